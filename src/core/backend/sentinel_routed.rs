//! A Sentinel lookup through `natMap`. The redis crate's lookup checks the master's ROLE at
//! the address the sentinels announce, which behind NAT is the one address we cannot reach;
//! so with routes the sentinels are asked here, and the ROLE check dials the routed address
//! (the one `Link` then connects to).

use super::{trace_sentinel, Inner};
use crate::core::backend::endpoint::list;
use crate::core::backend::endpoint_multi::{routed, HostPort};
use crate::core::basics::error::LockError;
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;

impl Inner {
    /// One lookup: the first sentinel (in the given order) naming master `name` up, whose
    /// routed address says it is a master. Returns the address announced (what `named`
    /// compares with). Each sentinel, and each master it names, gets `connect_timeout` to
    /// answer, so a silent one does not use up the caller's deadline alone.
    pub(super) async fn ask_routed(
        &self,
        name: &str,
        nat: &[(HostPort, HostPort)],
    ) -> Result<HostPort, LockError> {
        let bound = self.endpoint.connect_timeout;
        let mut sentinel_err = None;
        let mut master_err = None;
        for info in self.endpoint.node_connection_infos(true)? {
            let announced = match tokio::time::timeout(bound, announced_by(info, name)).await {
                Ok(Ok(Some(found))) => found,
                Ok(Ok(None)) => {
                    sentinel_err = Some(LockError::Connection(self.about("none of them names it")));
                    continue;
                }
                Ok(Err(err)) => {
                    sentinel_err = Some(self.failed(err));
                    continue;
                }
                Err(_) => {
                    sentinel_err = Some(self.no_answer());
                    continue;
                }
            };
            let dialled = routed(nat, &announced);
            let client = self.master_endpoint(announced.clone()).client(false)?;
            let why = match tokio::time::timeout(bound, says_master(client)).await {
                Ok(Ok(true)) => return Ok(announced),
                Ok(Ok(false)) => "it says it is not a master".to_owned(),
                Ok(Err(err)) if err.kind() == redis::ErrorKind::AuthenticationFailed => {
                    return Err(self.failed(err))
                }
                Ok(Err(err)) => reason(&err),
                Err(_) => "no answer in time".to_owned(),
            };
            let at = |address: &HostPort| list(std::slice::from_ref(address));
            let route = match dialled == announced {
                true => "no natMap route for it".to_owned(),
                false => format!("reached through natMap at {}", at(&dialled)),
            };
            master_err = Some(LockError::Connection(self.about(&format!(
                "the master they name, {}, {route}: {why}",
                at(&announced)
            ))));
        }
        // A master named but not reached says more than a sentinel that named none.
        Err((master_err.or(sentinel_err))
            .unwrap_or_else(|| LockError::Internal("a Sentinel set without sentinels".into())))
    }
}

/// Whether the server `client` dials (a master the sentinels named, where `natMap` routes it,
/// with the master's credentials, db and TLS) says it is a master: ROLE, or INFO where ROLE
/// is refused.
async fn says_master(client: redis::Client) -> redis::RedisResult<bool> {
    let mut con = client.get_multiplexed_async_connection().await?;
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

/// The address a sentinel gives master `name` at, if it names it up (flagged a master, not
/// down in its view or the set's), as the crate's lookup accepts one.
async fn announced_by(
    info: redis::ConnectionInfo,
    name: &str,
) -> redis::RedisResult<Option<HostPort>> {
    let client = redis::Client::open(info)?;
    let mut con: MultiplexedConnection = client.get_multiplexed_async_connection().await?;
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
    Ok(match (up, fields.get("ip"), port) {
        (true, Some(ip), Some(port)) => Some((ip.clone(), port)),
        _ => None,
    })
}

/// Why a master was not reached, in words that carry no credential.
fn reason(err: &redis::RedisError) -> String {
    if err.is_connection_refusal() {
        "connection refused".to_owned()
    } else if err.is_timeout() {
        "timed out".to_owned()
    } else {
        err.detail().unwrap_or(err.category()).to_owned()
    }
}
