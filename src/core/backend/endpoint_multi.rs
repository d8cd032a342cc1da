//! Addresses naming many hosts: a Redis Cluster's seed nodes (`redis+cluster://h:p,h:p`,
//! `{ cluster: [...] }`) and a Sentinel set (`redis+sentinel://h:p,h:p/<name>`,
//! `{ sentinels, name }`). Each host is read as `redis://host:port` by the redis crate, as a
//! single address is, so both spell hosts (IPv6 and all) alike.

use crate::core::basics::error::LockError;
use redis::{ConnectionAddr, IntoConnectionInfo};

/// A host and its port, as a node list names it.
pub type HostPort = (String, u16);

/// ioredis's `natMap` read: each route from an address a cluster or a Sentinel set
/// announces to the address it is reached at.
pub type NatRoutes = Vec<(HostPort, HostPort)>;

/// Where `announced` is reached: its route's target, or itself when no route names it.
pub fn routed(nat: &[(HostPort, HostPort)], announced: &HostPort) -> HostPort {
    (nat.iter().find(|(from, _)| from == announced))
        .map_or_else(|| announced.clone(), |(_, to)| to.clone())
}

/// Where a Sentinel set's own credentials go: apart from the master's.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct SentinelAuth {
    pub username: Option<String>,
    pub password: Option<String>,
}

const CLUSTER: [&str; 2] = ["redis+cluster://", "rediss+cluster://"];
const SENTINEL: [&str; 2] = ["redis+sentinel://", "rediss+sentinel://"];

/// The port a Sentinel listens on when the URL names none.
const SENTINEL_PORT: u16 = 26379;

/// Whether `url` is one of the many-host schemes (and so is read here).
pub fn is_multi(url: &str) -> bool {
    CLUSTER.iter().chain(&SENTINEL).any(|s| url.starts_with(s))
}

/// What a many-host URL names.
pub enum Hosts {
    Cluster(Vec<HostPort>),
    Sentinel {
        sentinels: Vec<HostPort>,
        name: String,
        auth: SentinelAuth,
    },
}

/// A many-host URL read: its hosts and what else it says.
pub struct MultiUrl {
    pub hosts: Hosts,
    /// `rediss+`: TLS for every node.
    pub tls: bool,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// `redis+cluster://[user:pass@]h1:p1,h2:p2` (or `rediss+`): the seed nodes, TLS for all.
/// No path: a cluster has database 0 only.
/// `redis+sentinel://[user:pass@]s1:p1,s2:p2/<name>[/<db>][?sentinelUsername=&sentinelPassword=]`.
pub fn from_url(url: &str) -> Result<MultiUrl, LockError> {
    let (scheme, rest) = url.split_once("://").ok_or_else(bad_url)?;
    let cluster = scheme.ends_with("+cluster");
    let tls = scheme.starts_with("rediss");
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (Some(user), hosts),
        None => (None, authority),
    };
    let default_port = if cluster { 6379 } else { SENTINEL_PORT };
    let nodes = hosts
        .split(',')
        .map(|host| node(host, default_port))
        .collect::<Result<Vec<_>, _>>()?;
    let nodes = checked("redis", nodes)?;
    let (username, password) = match userinfo {
        Some(user) => credentials(user, &nodes[0])?,
        None => (None, None),
    };
    let mut read = MultiUrl {
        hosts: Hosts::Cluster(Vec::new()),
        tls,
        db: 0,
        username,
        password,
    };
    if cluster {
        if !path.is_empty() || !query.is_empty() {
            return Err(LockError::invalid_type(
                "redis",
                "a redis+cluster:// URL takes no path or query: a cluster has database 0 only",
            ));
        }
        read.hosts = Hosts::Cluster(nodes);
        return Ok(read);
    }
    let mut parts = path.split('/');
    let name = parts.next().unwrap_or_default();
    if name.is_empty() {
        return Err(LockError::invalid_type(
            "redis",
            "a redis+sentinel:// URL must name its master after the hosts: redis+sentinel://host:port/<name>",
        ));
    }
    read.db = match (parts.next(), parts.next()) {
        (None, _) | (Some(""), None) => 0,
        (Some(db), None) => db.parse::<u32>().map(i64::from).map_err(|_| bad_db())?,
        (Some(_), Some(_)) => return Err(bad_url()),
    };
    let auth = sentinel_auth(query)?;
    read.hosts = Hosts::Sentinel {
        sentinels: nodes,
        name: decoded(name)?,
        auth,
    };
    Ok(read)
}

/// A node list given as options (`cluster`, `sentinels`): each host with its port, checked
/// as a URL's are; `arg` names the option in refusals.
pub fn nodes(
    arg: &'static str,
    given: Vec<(String, Option<u16>)>,
) -> Result<Vec<HostPort>, LockError> {
    let mut out = Vec::with_capacity(given.len());
    for (i, (host, port)) in given.into_iter().enumerate() {
        let default = if arg == "sentinels" {
            SENTINEL_PORT
        } else {
            6379
        };
        let spelled = match host.contains(':') && !host.starts_with('[') {
            true => format!("[{host}]:{}", port.unwrap_or(default)),
            false => format!("{host}:{}", port.unwrap_or(default)),
        };
        out.push(node(&spelled, default).map_err(|_| {
            LockError::invalid_type(
                arg,
                format!("{arg}[{i}] must be a host name or IP address with a port from 1 to 65535"),
            )
        })?);
    }
    checked(arg, out)
}

/// Refuses an empty list and a node named twice.
fn checked(arg: &'static str, nodes: Vec<HostPort>) -> Result<Vec<HostPort>, LockError> {
    if nodes.is_empty() {
        return Err(LockError::invalid_type(
            arg,
            format!("{arg} must name at least one node"),
        ));
    }
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].contains(node) {
            return Err(LockError::invalid_type(
                arg,
                format!(
                    "{arg} names {}:{} twice; name each node once",
                    node.0, node.1
                ),
            ));
        }
    }
    Ok(nodes)
}

/// One `host[:port]` of a list, read by the redis crate.
fn node(host: &str, default_port: u16) -> Result<HostPort, LockError> {
    if host.is_empty() {
        return Err(LockError::invalid_type(
            "redis",
            "the URL's host list has an empty entry; separate hosts with single commas",
        ));
    }
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.contains(':'),
    };
    let spelled = match has_port {
        true => format!("redis://{host}"),
        false => format!("redis://{host}:{default_port}"),
    };
    let info = spelled.into_connection_info().map_err(|_| bad_url())?;
    match info.addr() {
        ConnectionAddr::Tcp(host, port) if *port != 0 => Ok((host.clone(), *port)),
        _ => Err(bad_url()),
    }
}

/// The user and password of `user[:pass]`, decoded as the crate decodes a single URL's.
fn credentials(
    userinfo: &str,
    first: &HostPort,
) -> Result<(Option<String>, Option<String>), LockError> {
    let spelled = format!("redis://{userinfo}@{}:{}", host_part(&first.0), first.1);
    let info = spelled.into_connection_info().map_err(|_| bad_url())?;
    let redis = info.redis_settings();
    Ok((
        redis.username().map(str::to_owned),
        redis.password().map(str::to_owned),
    ))
}

/// A host as a URL writes it: an IPv6 address in brackets.
fn host_part(host: &str) -> String {
    match host.contains(':') {
        true => format!("[{host}]"),
        false => host.to_owned(),
    }
}

/// `sentinelUsername` and `sentinelPassword` from a Sentinel URL's query; nothing else.
fn sentinel_auth(query: &str) -> Result<SentinelAuth, LockError> {
    let mut auth = SentinelAuth::default();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = Some(decoded(value)?);
        match name {
            "sentinelUsername" => auth.username = value,
            "sentinelPassword" => auth.password = value,
            // The name alone: a value may be a secret.
            other => {
                return Err(LockError::invalid_type(
                    "redis",
                    format!("a redis+sentinel:// URL takes sentinelUsername and sentinelPassword only, not {:?}", other.escape_default().to_string()),
                ))
            }
        }
    }
    Ok(auth)
}

/// `%XX` escapes decoded; the result must be UTF-8.
fn decoded(text: &str) -> Result<String, LockError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad_url)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad_url())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad_url())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad_url())
}

/// Never quotes the URL: it may hold a password.
fn bad_url() -> LockError {
    LockError::invalid_type(
        "redis",
        "redis must be a valid redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/<name> URL",
    )
}

fn bad_db() -> LockError {
    LockError::invalid_range(
        "redis",
        "redis must be a URL whose database index is 0 or more",
    )
}
