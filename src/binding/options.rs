use super::error::{OrThrow, Result};
use crate::core::api::{Endpoint, EndpointSpec};
use crate::core::basics::error::LockError;
use crate::core::basics::validate;
use napi::bindgen_prelude::{Buffer, Env};
use napi_derive::napi;

/// Where to connect. `lib/connection.js` fills this from an ioredis or node-redis client, a
/// URL or a plain options object.
#[napi(object)]
pub struct ConnectionOptions {
    pub url: Option<String>,
    pub host: Option<String>,
    pub port: Option<u32>,
    /// A Unix socket path; wins over host and port.
    pub path: Option<String>,
    /// Connect with TLS. A `rediss://` URL or any `tls*` field below also asks for TLS, and
    /// `tls: false` with either is refused: TLS that was asked for is never dropped.
    pub tls: Option<bool>,
    /// Trusted root certificates, PEM (one or more); without it the system's roots are used.
    pub tls_ca: Option<Buffer>,
    /// Client certificate (chain), PEM, for servers that require one; needs `tlsKey`.
    pub tls_cert: Option<Buffer>,
    /// Private key of `tlsCert`, PEM, unencrypted.
    pub tls_key: Option<Buffer>,
    /// The name the server certificate must carry; only the host itself is supported.
    pub tls_servername: Option<String>,
    /// `false` turns off verification of the server certificate.
    pub tls_reject_unauthorized: Option<bool>,
    pub db: Option<u32>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    /// A Redlock: independent masters, each read as one connection is; the fields above
    /// are then unused (each node carries its own) but `connectTimeoutMs`, the default of
    /// every node.
    pub nodes: Option<Vec<ConnectionOptions>>,
    /// A Redis Cluster's seed nodes (refused until the cluster's store lands).
    pub cluster: Option<Vec<NodeAddress>>,
    /// ioredis's `natMap`, read into its routes: a cluster node (or a Sentinel set's
    /// master) announced at `from` is reached at `to`.
    pub nat_map: Option<Vec<NatRoute>>,
    /// A Sentinel set, with `sentinelName`: the master it names, followed across failovers; the
    /// sentinels' own credentials apart from the master's.
    pub sentinels: Option<Vec<NodeAddress>>,
    pub sentinel_name: Option<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// Releases grant the lock to waiting connections of other processes (see README,
    /// "Grants across processes"); off by default.
    pub cross_process_grants: Option<bool>,
    /// No lock is given on a server restarted (or first met) less than this ago (see
    /// README, "Guarantees"); 0, the default, turns it off and sends nothing for it.
    pub restart_quarantine_ms: Option<f64>,
}

/// One route of a `natMap`: the address a cluster node or a Sentinel set's master is
/// announced at, and where to reach it.
#[napi(object)]
pub struct NatRoute {
    pub from: NodeAddress,
    pub to: NodeAddress,
}

/// One node of a list: `port` defaults to the service's own (6379, a sentinel 26379).
#[napi(object)]
pub struct NodeAddress {
    pub host: String,
    pub port: Option<u32>,
}

impl ConnectionOptions {
    pub fn endpoint(self) -> std::result::Result<Endpoint, LockError> {
        let restart_quarantine = self
            .restart_quarantine_ms
            .map(|ms| validate::non_negative_ms("restartQuarantineMs", ms))
            .transpose()?;
        if let Some(nodes) = self.nodes {
            let nodes = nodes
                .into_iter()
                .enumerate()
                .map(|(i, mut node)| {
                    // The API's connectTimeoutMs and restartQuarantineMs come beside the
                    // nodes, for all of them (each node keeps its own gate).
                    node.connect_timeout_ms = node.connect_timeout_ms.or(self.connect_timeout_ms);
                    node.restart_quarantine_ms =
                        node.restart_quarantine_ms.or(self.restart_quarantine_ms);
                    node.endpoint().map_err(|err| in_node(err, i))
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            return Endpoint::redlock(nodes, "redis");
        }
        let port = self
            .port
            .map(|port| port16("port", "port", port))
            .transpose()?;
        let cluster = self.cluster.map(|n| node_list("cluster", n)).transpose()?;
        let nat_map = self.nat_map.map(nat_routes).transpose()?;
        let sentinels = self
            .sentinels
            .map(|n| node_list("sentinels", n))
            .transpose()?;
        let connect_timeout = self
            .connect_timeout_ms
            .map(|ms| validate::positive_ms("connectTimeoutMs", ms))
            .transpose()?;
        Endpoint::from_spec(EndpointSpec {
            url: self.url,
            host: self.host,
            port,
            path: self.path,
            tls: self.tls,
            tls_ca: self.tls_ca.map(|pem| pem.to_vec()),
            tls_cert: self.tls_cert.map(|pem| pem.to_vec()),
            tls_key: self.tls_key.map(|pem| pem.to_vec()),
            tls_servername: self.tls_servername,
            tls_reject_unauthorized: self.tls_reject_unauthorized,
            db: self.db.map(i64::from),
            username: self.username,
            password: self.password,
            connect_timeout,
            cluster,
            nat_map,
            sentinels,
            sentinel_name: self.sentinel_name,
            sentinel_username: self.sentinel_username,
            sentinel_password: self.sentinel_password,
            cross_process_grants: self.cross_process_grants,
            restart_quarantine,
        })
    }
}

/// `port` as a port; `shown` names it in the message (`cluster[2].port`), `arg` the option.
fn port16(arg: &'static str, shown: &str, port: u32) -> std::result::Result<u16, LockError> {
    u16::try_from(port).map_err(|_| {
        LockError::invalid_range(arg, format!("{shown} must be from 0 to 65535, got {port}"))
    })
}

/// A node list as the core reads it; a port out of range names its node.
fn node_list(
    arg: &'static str,
    nodes: Vec<NodeAddress>,
) -> std::result::Result<Vec<(String, Option<u16>)>, LockError> {
    nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let port = node
                .port
                .map(|port| port16(arg, &format!("{arg}[{i}].port"), port))
                .transpose()?;
            Ok((node.host, port))
        })
        .collect()
}

/// `natMap`'s routes as the core reads them (a port absent is 6379, as ioredis's).
fn nat_routes(routes: Vec<NatRoute>) -> std::result::Result<Vec<NatPair>, LockError> {
    let address = |node: NodeAddress| -> std::result::Result<(String, u16), LockError> {
        let shown = format!("natMap['{}'].port", node.host);
        let port = node.port.map(|port| port16("natMap", &shown, port));
        Ok((node.host, port.transpose()?.unwrap_or(6379)))
    };
    (routes.into_iter())
        .map(|route| Ok((address(route.from)?, address(route.to)?)))
        .collect()
}

/// An announced address and the one it is reached at.
type NatPair = ((String, u16), (String, u16));

/// A node's refusal says which node: its argument name alone would not.
fn in_node(err: LockError, i: usize) -> LockError {
    match err {
        LockError::Invalid { kind, arg, message } => LockError::Invalid {
            kind,
            arg,
            message: format!("redis[{i}]: {message}"),
        },
        other => other,
    }
}

/// The TTL rule every API shares, for JS code paths that create no native lock (a
/// DistributedLockService without a cache still rejects what the others reject).
#[napi]
pub fn validate_ttl_ms(env: Env, value: f64) -> Result<()> {
    validate::positive_ms("ttlMs", value)
        .map(|_| ())
        .or_throw(&env)
}

/// The fence retention rule, for a DistributedLockService whose cache takes no native lock
/// (see `validate_ttl_ms`).
#[napi]
pub fn validate_fence_retention_ms(env: Env, value: f64) -> Result<()> {
    validate::fence_retention("fenceRetentionMs", Some(value))
        .map(|_| ())
        .or_throw(&env)
}
