//! A Sentinel lookup: the checks the redis crate's lookup makes (the master named up, not
//! flagged down; its ROLE a master's; the sentinels' and the master's credentials, TLS, db),
//! but the sentinels asked at once rather than in turn, and ROLE asked where `natMap` routes
//! the announced address (the one `Link` then connects to; the address itself without a
//! route). A sentinel naming a master under an older configuration than one followed is
//! passed over while another answering names that one or a newer (`Followed`). Nothing else
//! of the sentinels is kept between lookups (a lookup happens only when `Link` opens a
//! connection).

use super::{trace_sentinel, Inner};
use crate::core::backend::endpoint::{list, Address};
use crate::core::backend::endpoint_multi::{routed, HostPort};
use crate::core::basics::error::LockError;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

impl Inner {
    /// One lookup, made before `deadline`: a sentinel naming master `name` up, whose routed
    /// address says it is a master. Returns the address announced (what `named` compares
    /// with). The sentinels are asked at once and the first good answer under the epoch
    /// followed or a newer one wins: asked in turn, a silent first sentinel held every lookup
    /// for a whole bound before the next was asked, and so failed every call bounded by about
    /// that much. Each sentinel, and each master it names, still gets `connect_timeout` to
    /// answer. An answer under an older epoch waits for the others (`Followed`).
    pub(super) async fn ask(&self, deadline: Instant) -> Result<HostPort, LockError> {
        let Address::Sentinel { name, nat, .. } = &self.endpoint.address else {
            return Err(LockError::Internal("not a Sentinel set".into()));
        };
        let followed = self.followed.get();
        let highest = AtomicU64::new(0);
        let mut asked: FuturesUnordered<_> = (self.sentinels.clone()?)
            .into_iter()
            .map(|sentinel| self.ask_one(sentinel, name, nat, &highest))
            .collect();
        let mut behind: Option<(HostPort, u64)> = None;
        let mut sentinel_err = None;
        let mut master_err = None;
        let mut cut = false;
        loop {
            let answer = match tokio::time::timeout_at(deadline, asked.next()).await {
                Ok(Some(answer)) => answer,
                Ok(None) => break,
                Err(_) => {
                    cut = true;
                    break;
                }
            };
            match answer {
                Ok((found, epoch)) if epoch >= followed => {
                    self.followed.follow(epoch);
                    return Ok(found);
                }
                Ok((found, epoch)) => {
                    if behind.as_ref().is_none_or(|(_, newest)| epoch > *newest) {
                        behind = Some((found, epoch));
                    }
                }
                Err(Miss::Sentinel(err)) => sentinel_err = Some(err),
                Err(Miss::Master(err)) => master_err = Some(err),
                Err(Miss::Auth(err)) => return Err(err),
            }
        }
        // Every sentinel answered, or the bound passed: one still silent is gone as far as
        // epochs go, or a set rebuilt beside a dead sentinel would never be followed.
        let highest = highest.load(Ordering::Acquire);
        match behind {
            Some((found, epoch)) if epoch == highest => {
                self.followed.reset(followed, epoch);
                return Ok(found);
            }
            Some((found, epoch)) => {
                sentinel_err = Some(LockError::Connection(self.about(&format!(
                    "a sentinel names {} under configuration epoch {epoch}, older than the \
                     epoch {highest} another names (a failover it has not heard of yet)",
                    list(std::slice::from_ref(&found))
                ))))
            }
            None => {}
        }
        if cut {
            return Err(self.no_answer());
        }
        // A master named but not reached says more than a sentinel that named none.
        Err((master_err.or(sentinel_err))
            .unwrap_or_else(|| LockError::Internal("a Sentinel set without sentinels".into())))
    }

    /// The sentinel `sentinel` dials asked for master `name`, and the master it names
    /// checked; `highest` raised to the configuration epoch it answers under, as soon as it
    /// answers.
    async fn ask_one(
        &self,
        sentinel: redis::Client,
        name: &str,
        nat: &[(HostPort, HostPort)],
        highest: &AtomicU64,
    ) -> Result<(HostPort, u64), Miss> {
        let bound = self.endpoint.connect_timeout;
        let named = match tokio::time::timeout(bound, announced_by(&sentinel, name, bound)).await {
            Ok(Ok(named)) => named,
            // The connection's own bound (`bounded`) may end it first: the same silence.
            Ok(Err(err)) if err.is_timeout() => return Err(Miss::Sentinel(self.no_answer())),
            Ok(Err(err)) => return Err(Miss::Sentinel(self.failed(err))),
            Err(_) => return Err(Miss::Sentinel(self.no_answer())),
        };
        if let Some(Named { epoch, .. }) = named {
            highest.fetch_max(epoch, Ordering::AcqRel);
        }
        let Some(Named {
            up: Some(announced),
            epoch,
        }) = named
        else {
            return Err(Miss::Sentinel(LockError::Connection(
                self.about("none of them names it"),
            )));
        };
        let dialled = routed(nat, &announced);
        let client =
            (self.master_endpoint(announced.clone()).client(false)).map_err(Miss::Sentinel)?;
        let why = match tokio::time::timeout(bound, says_master(client, bound)).await {
            Ok(Ok(true)) => return Ok((announced, epoch)),
            Ok(Ok(false)) => "it says it is not a master".to_owned(),
            Ok(Err(err)) if err.kind() == redis::ErrorKind::AuthenticationFailed => {
                return Err(Miss::Auth(self.failed(err)))
            }
            Ok(Err(err)) => reason(&err),
            Err(_) => "no answer in time".to_owned(),
        };
        let at = |address: &HostPort| list(std::slice::from_ref(address));
        let route = match dialled == announced {
            true => "no natMap route for it".to_owned(),
            false => format!("reached through natMap at {}", at(&dialled)),
        };
        Err(Miss::Master(LockError::Connection(self.about(&format!(
            "the master they name, {}, {route}: {why}",
            at(&announced)
        )))))
    }
}

/// How one sentinel's answer failed: the sentinel itself, the master it named, or the
/// credentials (which ends the lookup: every server of the set has the same).
enum Miss {
    Sentinel(LockError),
    Master(LockError),
    Auth(LockError),
}

/// The Sentinel configuration epoch a master was last followed under. Sentinels adopt the
/// configuration with the highest epoch, and each failover raises it, so a sentinel naming
/// a master under a lower one is behind (TILT, a partition, a failover in progress it has
/// not heard of): once `Link` moved to the new master, it must not go back to the old one,
/// which still says ROLE master until the sentinels demote it. That holds while a sentinel
/// answering the lookup names the epoch followed or a newer one: that is the failover's
/// window. Once none does (a set rebuilt, its epochs back at 0; or the sentinels that named
/// it gone), the highest epoch named is followed instead, or the client would find no master
/// until restarted.
#[derive(Default)]
pub(super) struct Followed(AtomicU64);

impl Followed {
    pub(super) fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// `epoch` followed, if newer than the one followed.
    pub(super) fn follow(&self, epoch: u64) {
        self.0.fetch_max(epoch, Ordering::AcqRel);
    }

    /// `epoch` followed in place of `from`, older: unless another lookup followed another
    /// meanwhile, which saw the set later.
    pub(super) fn reset(&self, from: u64, epoch: u64) {
        let _ = (self.0).compare_exchange(from, epoch, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A connection's own bounds: the crate's defaults (1 s to connect, 500 ms to answer) would
/// otherwise cut `connect_timeout` short.
fn bounded(bound: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(bound))
        .set_response_timeout(Some(bound))
}

/// A connection to the server (or sentinel) `client` dials, opening and answering within
/// `bound`.
pub(super) async fn connected(
    client: &redis::Client,
    bound: Duration,
) -> redis::RedisResult<MultiplexedConnection> {
    (client.get_multiplexed_async_connection_with_config(&bounded(bound))).await
}

/// Whether the server `client` dials (a master the sentinels named, where `natMap` routes it,
/// with the master's credentials, db and TLS) says it is a master: ROLE, or INFO where ROLE
/// is refused.
async fn says_master(client: redis::Client, bound: Duration) -> redis::RedisResult<bool> {
    let mut con = connected(&client, bound).await?;
    let role = redis::cmd("ROLE");
    let started = std::time::Instant::now();
    let answer = role.query_async::<redis::Role>(&mut con).await;
    trace_sentinel(|| role.get_packed_command(), started, &answer);
    match answer {
        Ok(role) => Ok(matches!(role, redis::Role::Primary { .. })),
        Err(err) if matches!(err.kind(), redis::ErrorKind::Server(_)) => {
            let mut info = redis::cmd("INFO");
            info.arg("REPLICATION");
            let text = info.query_async::<String>(&mut con).await?;
            Ok(text.lines().any(|line| line.trim_end() == "role:master"))
        }
        Err(err) => Err(err),
    }
}

/// What a sentinel says of a master: the configuration epoch it knows it under (0 where not
/// given), and the address it gives it at if it names it up (flagged a master, not down in
/// its view or the set's), as the crate's lookup accepts one.
struct Named {
    up: Option<HostPort>,
    epoch: u64,
}

/// What a sentinel says of master `name`: none where it knows no such master.
async fn announced_by(
    sentinel: &redis::Client,
    name: &str,
    bound: Duration,
) -> redis::RedisResult<Option<Named>> {
    let mut con = connected(sentinel, bound).await?;
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("MASTER").arg(name);
    let started = std::time::Instant::now();
    let answer = cmd.query_async::<HashMap<String, String>>(&mut con).await;
    trace_sentinel(|| cmd.get_packed_command(), started, &answer);
    let fields = match answer {
        Ok(fields) => fields,
        Err(err) if err.detail().is_some_and(|d| d.contains("No such master")) => return Ok(None),
        Err(err) => return Err(err),
    };
    let up = fields.get("flags").is_some_and(|flags| {
        flags.split(',').any(|flag| flag == "master")
            && !flags.contains("s_down")
            && !flags.contains("o_down")
    });
    let port = fields.get("port").and_then(|port| port.parse::<u16>().ok());
    let epoch = (fields.get("config-epoch")).and_then(|epoch| epoch.parse::<u64>().ok());
    let up = match (up, fields.get("ip"), port) {
        (true, Some(ip), Some(port)) => Some((ip.clone(), port)),
        _ => None,
    };
    Ok(Some(Named {
        up,
        epoch: epoch.unwrap_or(0),
    }))
}

/// Why a sentinel or master was not reached, in words that carry no credential (the crate's
/// errors carry none): an I/O error, which has no detail, in its own words, so that a
/// certificate refused (`invalid peer certificate: UnknownIssuer`) says so.
pub(super) fn reason(err: &redis::RedisError) -> String {
    if err.is_connection_refusal() {
        "connection refused".to_owned()
    } else if err.is_timeout() {
        "timed out".to_owned()
    } else {
        err.detail().map_or_else(|| err.to_string(), str::to_owned)
    }
}
