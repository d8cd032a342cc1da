//! Finds the master a Sentinel set names, for `Link` (an `Upstream::Sentinel`): the sentinels
//! are asked all at once (sentinel_lookup.rs), and the master they name must say with ROLE
//! that it is one. A connection stays with the master it was opened to, so `Link` asks again
//! whenever its connection drops or is refused, a call times out or is answered READONLY,
//! and in the background at most once per `RECHECK` while calls (refreshes included) are
//! made: a failover that leaves the old master up (`SENTINEL FAILOVER`, a partition) would
//! otherwise go unnoticed until the sentinels demote it. A master found moved that way is a
//! drop for the watchdog, which re-checks its locks at once, on the new master: one drop,
//! signalled after the connection is marked stale, which covers every call that reached the
//! old master (staleness.rs), so the switch that follows signals none of its own. The old
//! master still says ROLE master for seconds, and sentinels behind the failover still name
//! it: the lookups after the move pass those over while a sentinel answering names the epoch
//! followed (theirs is older, sentinel_lookup.rs), and a connection whose lookup began
//! before the mark is never used (`Link::manager`), so no call after the drop reaches the
//! old master.

use super::endpoint::{Address, Endpoint};
use super::endpoint_multi::{routed, HostPort};
use super::staleness::Staleness;
use crate::core::basics::drops::Drops;
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::basics::trace;
use crate::core::proto::scripts;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How stale the master we use may be while calls are made, at most.
const RECHECK: Duration = Duration::from_millis(1_000);

/// Asks a Sentinel set for its master. Cloning shares the sentinels' connections.
#[derive(Clone)]
pub(super) struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    /// The user's endpoint: the sentinels, the master's name, credentials and TLS.
    endpoint: Endpoint,
    /// A client for each sentinel, made once: each parses the set's PEMs and builds a TLS
    /// configuration. A client only dials, so clones share nothing but that.
    sentinels: Result<Vec<redis::Client>, LockError>,
    /// The newest Sentinel configuration a master was followed under (sentinel_lookup.rs).
    followed: Followed,
    /// The master the current connection goes to, and when that was last confirmed.
    current: Mutex<Option<(HostPort, Instant)>>,
    /// Marked when the master moved away from `current`: `Link` then opens a new connection.
    stale: Arc<Staleness>,
    /// `Link`'s drops: a master found moved by the re-check is one, so that a holder whose
    /// only calls are refreshes hears of it now, not at the refresh after next.
    dropped: Arc<Drops>,
    /// One background re-check at a time.
    checking: AtomicBool,
    /// A kept connection to a sentinel, for the background re-check: one question on it a
    /// second, instead of a lookup that opens a connection to the master to check its ROLE.
    watch: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl Resolver {
    /// `stale` is marked, and `dropped` signalled, when the sentinels name another master
    /// than the one in use.
    pub(super) fn new(endpoint: &Endpoint, stale: Arc<Staleness>, dropped: Arc<Drops>) -> Resolver {
        Resolver {
            inner: Arc::new(Inner {
                endpoint: endpoint.clone(),
                sentinels: endpoint.sentinel_clients(true),
                followed: Followed::default(),
                current: Mutex::new(None),
                stale,
                dropped,
                checking: AtomicBool::new(false),
                watch: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// The master's endpoint (its address, with the user's credentials, db and TLS), asked
    /// of the sentinels before `deadline`; it becomes the one in use.
    pub(super) async fn master(&self, deadline: Instant) -> Result<Endpoint, LockError> {
        let found = self.inner.ask(deadline).await?;
        *lock(&self.inner.current) = Some((found.clone(), Instant::now()));
        Ok(self.inner.master_endpoint(found))
    }

    /// Asks the sentinels again in the background if the master in use was last confirmed
    /// more than `RECHECK` ago; a different answer marks the connection stale and is a drop.
    pub(super) fn recheck(&self) {
        let using = match lock(&self.inner.current).as_ref() {
            Some((using, confirmed)) if confirmed.elapsed() >= RECHECK => using.clone(),
            _ => return,
        };
        if self.inner.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + inner.endpoint.connect_timeout;
            let asked = async {
                match tokio::time::timeout_at(deadline, inner.named()).await {
                    Ok(Ok(found)) if found == using => Ok(found),
                    // One sentinel's word that the master moved is checked by a full lookup
                    // (ROLE and all) before the connection is dropped for it: a sentinel
                    // behind the others (TILT, a partition) may name the old master. And
                    // sentinels that will not answer the short question (an ACL without it)
                    // may still answer the lookup's SENTINEL MASTER.
                    _ => inner.ask(deadline).await,
                }
            };
            if let Ok(found) = asked.await {
                let mut current = lock(&inner.current);
                match current.as_mut() {
                    Some((using, confirmed)) if *using == found => *confirmed = Instant::now(),
                    Some(_) => {
                        // The call that drove this check already went to the old master:
                        // the watchdog's re-check is the next call, and it goes to the new.
                        // Marked first, signalled after: the drop's date is past the last
                        // call that can take the old connection.
                        inner.stale.mark_told();
                        inner.dropped.signal();
                    }
                    None => {}
                }
            }
            inner.checking.store(false, Ordering::Release);
        });
    }
}

impl Inner {
    /// The master a sentinel names now, asked on the kept connection (else on a new one to
    /// each sentinel at once, the first to answer kept). Unchecked: a different answer only
    /// makes `Link` look the master up again (`ask`), ROLE and all.
    async fn named(&self) -> Result<HostPort, LockError> {
        let Address::Sentinel { name, .. } = &self.endpoint.address else {
            return Err(LockError::Internal("not a Sentinel set".into()));
        };
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("get-master-addr-by-name").arg(name);
        let cmd = &cmd;
        let bound = self.endpoint.connect_timeout;
        let mut slot = self.watch.lock().await;
        if let Some(con) = slot.as_mut() {
            // Half the re-check's bound: a kept sentinel gone silent leaves the other half
            // to the others.
            if let Ok(Ok(Some(found))) = tokio::time::timeout(bound / 2, asked(cmd, con)).await {
                return Ok(found);
            }
            *slot = None;
        }
        // At once, as a lookup asks them: a silent first sentinel holds nothing up.
        let mut asking: FuturesUnordered<_> = (self.sentinels.clone()?)
            .into_iter()
            .map(|sentinel| async move {
                let mut con = sentinel_lookup::connected(&sentinel, bound).await.ok()?;
                let found = asked(cmd, &mut con).await.ok()??;
                Some((found, con))
            })
            .collect();
        while let Some(answer) = asking.next().await {
            if let Some((found, con)) = answer {
                *slot = Some(con);
                return Ok(found);
            }
        }
        Err(self.no_answer())
    }

    /// The user's endpoint, pointed at `master` (the address the sentinels announce) where
    /// it is reached, through `natMap`: its credentials, db and TLS kept.
    fn master_endpoint(&self, master: HostPort) -> Endpoint {
        let (tls, (host, port)) = match &self.endpoint.address {
            Address::Sentinel { tls, nat, .. } => (tls.clone(), routed(nat, &master)),
            _ => (None, master),
        };
        Endpoint {
            address: Address::Tcp { host, port, tls },
            ..self.endpoint.clone()
        }
    }

    /// A failed lookup, naming the sentinels and the master's name (never a credential: the
    /// crate's errors carry none, and only their kind and detail are kept).
    fn failed(&self, err: redis::RedisError) -> LockError {
        let detail = match err.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                return LockError::Auth(
                    self.about("the sentinels or the master they name turned down the credentials"),
                )
            }
            // An I/O error (a TLS certificate refused, say) has no detail: its own words.
            _ => sentinel_lookup::reason(&err),
        };
        LockError::Connection(self.about(&detail))
    }

    fn no_answer(&self) -> LockError {
        LockError::Timeout(self.about("no answer in time"))
    }

    fn about(&self, what: &str) -> String {
        match &self.endpoint.address {
            Address::Sentinel {
                sentinels, name, ..
            } => format!(
                "asking the sentinels {} for master {name:?}: {what}",
                super::endpoint::list(sentinels)
            ),
            _ => what.to_owned(),
        }
    }
}

/// A sentinel asked `cmd` on `con`, traced as any call (basics/trace.rs).
async fn asked(
    cmd: &redis::Cmd,
    con: &mut MultiplexedConnection,
) -> redis::RedisResult<Option<HostPort>> {
    let started = std::time::Instant::now();
    let found = cmd.query_async::<Option<HostPort>>(con).await;
    trace_sentinel(|| cmd.get_packed_command(), started, &found);
    found
}

/// A `DEBUG` line for what went to the sentinels: `packed` is made only when tracing is on.
fn trace_sentinel<T>(
    packed: impl FnOnce() -> Vec<u8>,
    started: std::time::Instant,
    result: &redis::RedisResult<T>,
) {
    if !trace::on() {
        return;
    }
    let outcome = result
        .as_ref()
        .map_or_else(|err| err.code().unwrap_or("error"), |_| "ok");
    let took = started.elapsed();
    trace::call("sentinel", &packed(), took, outcome, scripts::name_of);
}

#[path = "sentinel_lookup.rs"]
mod sentinel_lookup;
use sentinel_lookup::Followed;

#[cfg(test)]
#[path = "sentinel_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "sentinel_epoch_tests.rs"]
mod epoch_tests;
