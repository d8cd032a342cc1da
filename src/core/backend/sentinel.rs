//! Finds the master a Sentinel set names, for `Link` (an `Upstream::Sentinel`): the sentinels
//! are asked with the redis crate's Sentinel support, which checks with ROLE that the master
//! they name says it is one. The crate does not follow a failover for connections already
//! open (redis-rs#1438), so `Link` asks again whenever its connection drops or is refused,
//! a call times out or is answered READONLY, and in the background at most once per
//! `RECHECK` while calls are made: a failover that leaves the old master up (`SENTINEL
//! FAILOVER`, a partition) would otherwise go unnoticed until the sentinels demote it.

use super::endpoint::{Address, Endpoint};
use super::endpoint_multi::{routed, HostPort};
use crate::core::basics::error::LockError;
use crate::core::basics::sync::lock;
use crate::core::basics::trace;
use crate::core::proto::scripts;
use redis::aio::MultiplexedConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ConnectionAddr, RedisConnectionInfo, TlsMode};
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
    /// The crate's client, with its cached connections to the sentinels. An async mutex:
    /// a lookup awaits, and each caller bounds its own wait by its deadline.
    sentinel: tokio::sync::Mutex<Option<Sentinel>>,
    /// The master the current connection goes to, and when that was last confirmed.
    current: Mutex<Option<(HostPort, Instant)>>,
    /// Set when the master moved away from `current`: `Link` then opens a new connection.
    stale: Arc<AtomicBool>,
    /// One background re-check at a time.
    checking: AtomicBool,
    /// A kept connection to a sentinel, for the background re-check: one question on it a
    /// second, instead of a lookup that opens a connection to the master to check its ROLE.
    watch: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl Resolver {
    /// `stale` is set when the sentinels name another master than the one in use.
    pub(super) fn new(endpoint: &Endpoint, stale: Arc<AtomicBool>) -> Resolver {
        Resolver {
            inner: Arc::new(Inner {
                endpoint: endpoint.clone(),
                sentinel: tokio::sync::Mutex::new(None),
                current: Mutex::new(None),
                stale,
                checking: AtomicBool::new(false),
                watch: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// The master's endpoint (its address, with the user's credentials, db and TLS), asked
    /// of the sentinels before `deadline`; it becomes the one in use.
    pub(super) async fn master(&self, deadline: Instant) -> Result<Endpoint, LockError> {
        let found = tokio::time::timeout_at(deadline, self.inner.ask())
            .await
            .map_err(|_| self.inner.no_answer())??;
        *lock(&self.inner.current) = Some((found.clone(), Instant::now()));
        Ok(self.inner.master_endpoint(found))
    }

    /// Asks the sentinels again in the background if the master in use was last confirmed
    /// more than `RECHECK` ago; a different answer marks the connection stale.
    pub(super) fn recheck(&self) {
        let due = match lock(&self.inner.current).as_ref() {
            Some((_, confirmed)) => confirmed.elapsed() >= RECHECK,
            None => false,
        };
        if !due || self.inner.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let bound = inner.endpoint.connect_timeout;
            // A set the kept connection cannot ask (TLS with its own CA) gets a full lookup.
            let asked = async {
                match inner.named().await {
                    Ok(found) => Ok(found),
                    Err(_) => inner.ask().await,
                }
            };
            if let Ok(Ok(found)) = tokio::time::timeout(bound, asked).await {
                let mut current = lock(&inner.current);
                match current.as_mut() {
                    Some((using, confirmed)) if *using == found => *confirmed = Instant::now(),
                    Some(_) => inner.stale.store(true, Ordering::Release),
                    None => {}
                }
            }
            inner.checking.store(false, Ordering::Release);
        });
    }
}

impl Inner {
    /// One lookup: the first sentinel (in the given order) naming a master that answers ROLE
    /// as a master.
    async fn ask(&self) -> Result<HostPort, LockError> {
        let Address::Sentinel { name, tls, nat, .. } = &self.endpoint.address else {
            return Err(LockError::Internal("not a Sentinel set".into()));
        };
        if !nat.is_empty() {
            return self.ask_routed(name, nat).await;
        }
        let mut master = RedisConnectionInfo::default().set_db(self.endpoint.db);
        if let Some(user) = &self.endpoint.username {
            master = master.set_username(user);
        }
        if let Some(password) = &self.endpoint.password {
            master = master.set_password(password);
        }
        let mut node = SentinelNodeConnectionInfo::default().set_redis_connection_info(master);
        if let Some(tls) = tls {
            node = node.set_tls_mode(match tls.insecure {
                true => TlsMode::Insecure,
                false => TlsMode::Secure,
            });
        }
        let mut slot = self.sentinel.lock().await;
        if slot.is_none() {
            let sentinels = self.endpoint.node_connection_infos(true)?;
            *slot = Some(Sentinel::build(sentinels).map_err(|err| self.failed(err))?);
        }
        let Some(sentinel) = slot.as_mut() else {
            return Err(LockError::Internal("no Sentinel client".into()));
        };
        let started = std::time::Instant::now();
        let client = sentinel.async_master_for(name, Some(&node)).await;
        // The crate's lookup, as one line: SENTINEL MASTERS of the sentinels it asks, then ROLE
        // of the master they name (each on a connection of its own, set up as any).
        trace_lookup(started, &client);
        let client = client.map_err(|err| self.failed(err))?;
        match client.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Ok((host.clone(), *port))
            }
            _ => Err(LockError::Internal(
                "the sentinels named a master that is not a TCP address".into(),
            )),
        }
    }

    /// The master a sentinel names now, asked on the kept connection (a new one to the first
    /// sentinel that answers if it broke). Unchecked: a different answer only makes `Link`
    /// look the master up again (`ask`), ROLE and all.
    async fn named(&self) -> Result<HostPort, LockError> {
        let Address::Sentinel { name, .. } = &self.endpoint.address else {
            return Err(LockError::Internal("not a Sentinel set".into()));
        };
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("get-master-addr-by-name").arg(name);
        let mut slot = self.watch.lock().await;
        if let Some(con) = slot.as_mut() {
            if let Ok(Some(found)) = asked(&cmd, con).await {
                return Ok(found);
            }
            *slot = None;
        }
        for info in self.endpoint.node_connection_infos(true)? {
            let Ok(client) = redis::Client::open(info) else {
                continue;
            };
            let Ok(mut con) = client.get_multiplexed_async_connection().await else {
                continue;
            };
            if let Ok(Some(found)) = asked(&cmd, &mut con).await {
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
    /// crate's errors carry none, and only its kind and detail are kept).
    fn failed(&self, err: redis::RedisError) -> LockError {
        let detail = match err.kind() {
            redis::ErrorKind::MasterNameNotFoundBySentinel => "none of them names it".to_owned(),
            redis::ErrorKind::AuthenticationFailed => {
                return LockError::Auth(
                    self.about("the sentinels or the master they name turned down the credentials"),
                )
            }
            _ => err.detail().unwrap_or("no master found").to_owned(),
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

/// A `DEBUG` line for the crate's master lookup (`async_master_for`), which sends its commands
/// itself: named as what it asks, with how long it took in all.
fn trace_lookup<T>(started: std::time::Instant, result: &redis::RedisResult<T>) {
    let lookup = || {
        let mut lookup = redis::Pipeline::new();
        lookup.cmd("SENTINEL").arg("MASTERS").cmd("ROLE");
        lookup.get_packed_pipeline()
    };
    trace_sentinel(lookup, started, result);
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

#[path = "sentinel_routed.rs"]
mod sentinel_routed;

#[cfg(test)]
#[path = "sentinel_tests.rs"]
mod tests;
