//! Where and how to connect: the identity of a shared connection.

use super::endpoint_multi::{self as multi, HostPort, Hosts, NatRoutes, SentinelAuth};
use crate::core::basics::error::LockError;
use redis::{
    ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    TlsCertificates,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::time::Duration;

#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `tls: None` is plain text; `Some` is TLS with those settings, never plain text.
    Tcp {
        host: String,
        port: u16,
        tls: Option<Tls>,
    },
    Unix(String),
    /// The embedded in-process keyspace of this name (`memory://name`), shared by every
    /// thread of the process.
    Memory(String),
    /// Independent masters, a lock held by a quorum of them (Redlock, see
    /// backend/redlock_store.rs); each node its own endpoint, credentials and all.
    Redlock(Vec<Endpoint>),
    /// A Redis Cluster, found from its seed nodes; `tls` for every node. `nat`: where a node
    /// the cluster announces at one address is reached instead (ioredis's `natMap`).
    Cluster {
        nodes: Vec<HostPort>,
        tls: Option<Tls>,
        nat: NatRoutes,
    },
    /// The master a Sentinel set names `name`; `tls` for the master and the sentinels;
    /// `auth`: the sentinels' own credentials (the endpoint's are the master's). `nat`: where
    /// a master the sentinels announce at one address is reached instead (ioredis's `natMap`).
    Sentinel {
        sentinels: Vec<HostPort>,
        name: String,
        tls: Option<Tls>,
        auth: SentinelAuth,
        nat: NatRoutes,
    },
}

/// The scheme of the embedded backend's URLs.
pub const MEMORY_SCHEME: &str = "memory://";

/// TLS settings of a connection. The PEM bytes are part of the connection's identity (a
/// client with another CA or another client certificate must not share a session) and are
/// never printed.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    /// Trusted root certificates (PEM, one or more); `None` trusts the system's roots.
    pub ca: Option<Vec<u8>>,
    /// A client certificate and its key, for servers that authenticate clients by certificate.
    pub client: Option<ClientIdentity>,
    /// No verification of the server's certificate at all (`rejectUnauthorized: false`).
    pub insecure: bool,
}

/// A client certificate chain and its private key, both PEM.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientIdentity {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// Two locks with equal endpoints share one connection. Credentials are part of the identity
/// (different users must not share a session) but are never printed.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub address: Address,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: Duration,
    /// Releases grant the lock to waiting connections of other processes (release_grant.lua),
    /// where the store can (`Handover::Ring`). A connection of its own: with it off, nothing
    /// of this changes what is sent.
    pub grants: bool,
    /// `restartQuarantineMs`: no attempt on a server incarnation our clients have known for
    /// less than this (proto/epoch.rs). Zero sends no command for it.
    pub restart_quarantine: Duration,
}

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Settings as they arrive from JavaScript: a URL, explicit fields, or both (explicit fields
/// win, as in node-redis).
#[derive(Default, Clone)]
pub struct EndpointSpec {
    pub url: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub path: Option<String>,
    /// `Some(true)` asks for TLS. `Some(false)` together with a `rediss://` URL or any `tls_*`
    /// field is refused: TLS that was asked for is never silently dropped.
    pub tls: Option<bool>,
    /// Trusted root certificates, PEM. Any `tls_*` field implies TLS.
    pub tls_ca: Option<Vec<u8>>,
    /// Client certificate chain, PEM; needs `tls_key`.
    pub tls_cert: Option<Vec<u8>>,
    /// Private key of `tls_cert`, PEM (unencrypted PKCS#8, PKCS#1 or SEC1).
    pub tls_key: Option<Vec<u8>>,
    /// The name the server certificate must carry; only the host itself is supported.
    pub tls_servername: Option<String>,
    /// `Some(false)` turns certificate verification off.
    pub tls_reject_unauthorized: Option<bool>,
    pub db: Option<i64>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: Option<Duration>,
    /// A Redis Cluster's seed nodes (host, port: 6379 when absent); no URL, host, port or
    /// path with it.
    pub cluster: Option<Vec<(String, Option<u16>)>>,
    /// Where a node a cluster (or a master a Sentinel set) announces at the first address is
    /// reached: the second (ioredis's `natMap`); a cluster or a Sentinel set only.
    pub nat_map: Option<NatRoutes>,
    /// A Sentinel set (host, port: 26379 when absent), with `sentinel_name`.
    pub sentinels: Option<Vec<(String, Option<u16>)>>,
    pub sentinel_name: Option<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    /// `crossProcessGrants` (see `Endpoint::grants`).
    pub cross_process_grants: Option<bool>,
    /// `restartQuarantineMs` (see `Endpoint::restart_quarantine`), already validated.
    pub restart_quarantine: Option<Duration>,
}

impl EndpointSpec {
    /// Whether any TLS detail was given (each of them asks for TLS).
    fn has_tls_details(&self) -> bool {
        self.tls_ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.tls_servername.is_some()
            || self.tls_reject_unauthorized.is_some()
    }
}

impl Endpoint {
    /// The endpoint `spec` names.
    pub fn from_spec(spec: EndpointSpec) -> Result<Self, LockError> {
        Self::parse(spec)
    }

    /// The endpoint `spec` names, whatever backend it needs.
    pub(crate) fn parse(mut spec: EndpointSpec) -> Result<Self, LockError> {
        crate::core::basics::key_counts::check_watch_env()?;
        if let Some(name) = spec
            .url
            .as_deref()
            .and_then(|u| u.strip_prefix(MEMORY_SCHEME))
        {
            return Self::memory(name, &spec);
        }
        let many = many_hosts(&mut spec)?;
        let mut endpoint = match &spec.url {
            Some(url) if multi::is_multi(url) => Self::from_multi_url(url)?,
            Some(url) => Self::from_url(url)?,
            None => Endpoint {
                address: Address::Tcp {
                    host: "127.0.0.1".into(),
                    port: 6379,
                    tls: None,
                },
                db: 0,
                username: None,
                password: None,
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                grants: false,
                restart_quarantine: Duration::ZERO,
            },
        };
        if let Some(address) = many {
            endpoint.address = address;
        }
        let url_tls = endpoint.tls().is_some();
        let details = spec.has_tls_details();
        if spec.tls == Some(false) && (url_tls || details) {
            return Err(LockError::invalid_type(
                "tls",
                if url_tls {
                    "tls is false but the URL is rediss://; refusing to connect without TLS"
                } else {
                    "tls is false but TLS options were given; refusing to connect without TLS"
                },
            ));
        }
        let url_insecure = endpoint.tls().is_some_and(|tls| tls.insecure);
        let tls = if url_tls || details || spec.tls == Some(true) {
            Some(tls_settings(&spec, url_insecure)?)
        } else {
            None
        };
        let many = matches!(
            endpoint.address,
            Address::Cluster { .. } | Address::Sentinel { .. }
        );
        if many && (spec.path.is_some() || spec.host.is_some() || spec.port.is_some()) {
            return Err(LockError::invalid_type(
                "redis",
                "a cluster or a Sentinel set is named by its list of nodes: give no host, port or path with it",
            ));
        }
        if let Some(path) = spec.path {
            endpoint.address = Address::Unix(path);
        } else if spec.host.is_some() || spec.port.is_some() {
            let (old_host, old_port) = match &endpoint.address {
                Address::Tcp { host, port, .. } => (host.clone(), *port),
                _ => ("127.0.0.1".to_string(), 6379),
            };
            endpoint.address = Address::Tcp {
                host: spec.host.unwrap_or(old_host),
                port: spec.port.unwrap_or(old_port),
                tls: None,
            };
        }
        match &mut endpoint.address {
            Address::Tcp {
                host, tls: slot, ..
            } => {
                if let (Some(name), Some(_)) = (&spec.tls_servername, &tls) {
                    check_servername(name, host)?;
                }
                *slot = tls;
            }
            Address::Unix(_) if tls.is_some() => {
                return Err(LockError::invalid_type(
                    "tls",
                    "TLS over a Unix socket is not supported; connect to a host and port, or drop the TLS options",
                ));
            }
            Address::Cluster { tls: slot, .. } | Address::Sentinel { tls: slot, .. } => {
                if spec.tls_servername.is_some() && tls.is_some() {
                    return Err(LockError::invalid_type(
                        "tls.servername",
                        "tls.servername names one host; a cluster or a Sentinel set has many, each checked against its own name",
                    ));
                }
                *slot = tls;
            }
            Address::Unix(_) | Address::Memory(_) | Address::Redlock(_) => {}
        }
        if let Some(db) = spec.db {
            if db < 0 {
                return Err(LockError::invalid_range(
                    "db",
                    format!("db must be a database index of 0 or more, got {db}"),
                ));
            }
            endpoint.db = db;
        }
        if spec.username.is_some() {
            endpoint.username = spec.username;
        }
        if spec.password.is_some() {
            endpoint.password = spec.password;
        }
        if let Some(timeout) = spec.connect_timeout {
            endpoint.connect_timeout = timeout;
        }
        endpoint.grants = spec.cross_process_grants.unwrap_or(false);
        endpoint.restart_quarantine = spec.restart_quarantine.unwrap_or_default();
        if let Some(routes) = spec.nat_map.filter(|routes| !routes.is_empty()) {
            let (Address::Cluster { nat, .. } | Address::Sentinel { nat, .. }) =
                &mut endpoint.address
            else {
                return Err(LockError::invalid_type(
                    "natMap",
                    "natMap maps the addresses a Redis Cluster or a Sentinel set announces: give it with cluster or sentinels only",
                ));
            };
            *nat = routes;
        }
        if matches!(endpoint.address, Address::Cluster { .. }) && endpoint.db != 0 {
            return Err(LockError::invalid_type(
                "db",
                "a Redis Cluster has database 0 only; drop db",
            ));
        }
        Ok(endpoint)
    }

    /// The TLS settings of a networked address, `None` for plain text or no network.
    fn tls(&self) -> Option<&Tls> {
        match &self.address {
            Address::Tcp { tls, .. }
            | Address::Cluster { tls, .. }
            | Address::Sentinel { tls, .. } => tls.as_ref(),
            Address::Unix(_) | Address::Memory(_) | Address::Redlock(_) => None,
        }
    }

    /// The embedded keyspace `name`: nothing to connect to, so no address, TLS, database or
    /// credentials go with it.
    fn memory(name: &str, spec: &EndpointSpec) -> Result<Self, LockError> {
        let networked = spec.host.is_some()
            || spec.port.is_some()
            || spec.path.is_some()
            || spec.tls == Some(true)
            || spec.has_tls_details()
            || spec.db.is_some_and(|db| db != 0)
            || spec.username.is_some()
            || spec.password.is_some();
        if networked {
            return Err(LockError::invalid_type(
                "redis",
                "a memory:// backend is in this process: it takes no host, port, path, TLS, database or credentials",
            ));
        }
        if !is_memory_name(name) {
            return Err(LockError::invalid_type(
                "redis",
                format!("redis must be memory:// or memory://<name>, the name made of ASCII letters, digits, '-', '_' or '.'; got {}", shown_memory_name(name)),
            ));
        }
        Ok(Endpoint {
            address: Address::Memory(name.to_owned()),
            db: 0,
            username: None,
            password: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            grants: false,
            restart_quarantine: Duration::ZERO,
        })
    }

    /// A cluster's or a Sentinel set's URL (see endpoint_multi.rs).
    fn from_multi_url(url: &str) -> Result<Self, LockError> {
        let read = multi::from_url(url)?;
        let tls = read.tls.then(Tls::default);
        let address = match read.hosts {
            Hosts::Cluster(nodes) => Address::Cluster {
                nodes,
                tls,
                nat: Vec::new(),
            },
            Hosts::Sentinel {
                sentinels,
                name,
                auth,
            } => Address::Sentinel {
                sentinels,
                name,
                tls,
                auth,
                nat: Vec::new(),
            },
        };
        Ok(Endpoint {
            address,
            db: read.db,
            username: read.username,
            password: read.password,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            grants: false,
            restart_quarantine: Duration::ZERO,
        })
    }

    fn from_url(url: &str) -> Result<Self, LockError> {
        // The URL may hold a password, so the message never quotes it.
        let invalid = || {
            LockError::invalid_type(
                "redis",
                "redis must be a valid redis://, rediss://, unix:// or memory:// URL",
            )
        };
        let info = url.into_connection_info().map_err(|_| invalid())?;
        let address = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Address::Tcp {
                host: host.clone(),
                port: *port,
                tls: None,
            },
            // `rediss://host/#insecure` is the redis crate's spelling of "verify nothing".
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => Address::Tcp {
                host: host.clone(),
                port: *port,
                tls: Some(Tls {
                    insecure: *insecure,
                    ..Tls::default()
                }),
            },
            ConnectionAddr::Unix(path) => Address::Unix(path.to_string_lossy().into_owned()),
            _ => return Err(invalid()),
        };
        let redis = info.redis_settings();
        if redis.db() < 0 {
            return Err(LockError::invalid_range(
                "redis",
                "redis must be a URL whose database index is 0 or more",
            ));
        }
        Ok(Endpoint {
            address,
            db: redis.db(),
            username: redis.username().map(str::to_owned),
            password: redis.password().map(str::to_owned),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            grants: false,
            restart_quarantine: Duration::ZERO,
        })
    }

    /// `resp3: false` is for servers without HELLO (Redis before 6, or HELLO renamed away).
    pub fn connection_info(&self, resp3: bool) -> Result<ConnectionInfo, LockError> {
        let addr = match &self.address {
            Address::Tcp { host, port, tls } => tcp_addr(host, *port, tls.as_ref()),
            Address::Unix(path) => ConnectionAddr::Unix(path.into()),
            Address::Memory(_) => {
                return Err(LockError::Internal(
                    "a memory:// backend has no network address".into(),
                ))
            }
            Address::Redlock(_) => {
                return Err(LockError::Internal(
                    "a Redlock connects to each of its nodes, not to one address".into(),
                ))
            }
            Address::Cluster { .. } | Address::Sentinel { .. } => {
                return Err(LockError::Internal(
                    "a cluster or a Sentinel set is not one address".into(),
                ));
            }
        };
        info_of(addr, self.db, &self.username, &self.password, resp3)
    }

    /// Each node a cluster or a Sentinel set lists, as the redis crate's cluster and Sentinel
    /// clients take them: a cluster's seeds with the endpoint's credentials, a Sentinel set's
    /// sentinels with their own and db 0 (the master's db is the endpoint's); TLS for all
    /// when the address has it.
    pub fn node_connection_infos(&self, resp3: bool) -> Result<Vec<ConnectionInfo>, LockError> {
        let (nodes, tls, username, password) = match &self.address {
            Address::Cluster { nodes, tls, .. } => (nodes, tls, &self.username, &self.password),
            Address::Sentinel {
                sentinels,
                tls,
                auth,
                ..
            } => (sentinels, tls, &auth.username, &auth.password),
            _ => {
                return Err(LockError::Internal(
                    "only a cluster or a Sentinel set lists nodes".into(),
                ))
            }
        };
        nodes
            .iter()
            .map(|(host, port)| {
                let addr = tcp_addr(host, *port, tls.as_ref());
                info_of(addr, 0, username, password, resp3)
            })
            .collect()
    }

    /// The client for this endpoint. A TLS endpoint with its own CA or a client certificate
    /// gets them here; one without verifies the server against the system's roots.
    pub fn client(&self, resp3: bool) -> Result<redis::Client, LockError> {
        let info = self.connection_info(resp3)?;
        match &self.address {
            Address::Tcp { tls, .. } => client_of(info, tls.as_ref()),
            _ => client_of(info, None),
        }
    }

    /// A client for each sentinel of a Sentinel set (`node_connection_infos`), with the set's
    /// CA and client certificate: the sentinels are checked against the same roots as the
    /// master they name.
    pub fn sentinel_clients(&self, resp3: bool) -> Result<Vec<redis::Client>, LockError> {
        let Address::Sentinel { tls, .. } = &self.address else {
            return Err(LockError::Internal("not a Sentinel set".into()));
        };
        (self.node_connection_infos(resp3)?)
            .into_iter()
            .map(|info| client_of(info, tls.as_ref()))
            .collect()
    }

    pub fn is_tls(&self) -> bool {
        matches!(self.address, Address::Tcp { tls: Some(_), .. })
    }
}

/// A client for `info`, given `tls`'s own CA and client certificate where it has them.
fn client_of(info: ConnectionInfo, tls: Option<&Tls>) -> Result<redis::Client, LockError> {
    let Some(tls) = tls.filter(|tls| tls.ca.is_some() || tls.client.is_some()) else {
        return redis::Client::open(info).map_err(LockError::from);
    };
    let certificates = TlsCertificates {
        client_tls: tls.client.as_ref().map(|client| ClientTlsConfig {
            client_cert: client.cert.clone(),
            client_key: client.key.clone(),
        }),
        root_cert: tls.ca.clone(),
    };
    // The PEM was checked when the endpoint was made, so this does not fail; if it does,
    // its message could quote PEM lines, so it is not passed on.
    redis::Client::build_with_tls(info, certificates).map_err(|_| {
        LockError::invalid_type("tls", "the TLS certificates or key could not be loaded")
    })
}

fn tcp_addr(host: &str, port: u16, tls: Option<&Tls>) -> ConnectionAddr {
    match tls {
        None => ConnectionAddr::Tcp(host.to_owned(), port),
        Some(tls) => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: tls.insecure,
            tls_params: None,
        },
    }
}

/// `addr` with its database, credentials and protocol.
fn info_of(
    addr: ConnectionAddr,
    db: i64,
    username: &Option<String>,
    password: &Option<String>,
    resp3: bool,
) -> Result<ConnectionInfo, LockError> {
    // RESP3 lets the connection manager see a dropped socket the moment it drops (a push
    // from the driver) and reconnect before the next call, instead of failing that call.
    let mut redis = RedisConnectionInfo::default()
        .set_db(db)
        .set_protocol(if resp3 {
            redis::ProtocolVersion::RESP3
        } else {
            redis::ProtocolVersion::RESP2
        });
    if let Some(user) = username {
        redis = redis.set_username(user);
    }
    if let Some(password) = password {
        redis = redis.set_password(password);
    }
    let info = addr.into_connection_info().map_err(LockError::from)?;
    Ok(info.set_redis_settings(redis))
}

/// Checks the PEM material up front, so a bad CA, certificate or key is a clear EINVAL at
/// construction rather than a connection error on every call. Messages never quote the PEM.
/// `url_insecure`: the URL ended in `#insecure`, which an explicit `rejectUnauthorized` overrides.
fn tls_settings(spec: &EndpointSpec, url_insecure: bool) -> Result<Tls, LockError> {
    let ca = match &spec.tls_ca {
        Some(pem) => {
            let certs = certificates("tls.ca", pem)?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in certs {
                roots.add(cert).map_err(|_| {
                    LockError::invalid_type(
                        "tls.ca",
                        "tls.ca holds a certificate that cannot be used as a trusted root",
                    )
                })?;
            }
            Some(pem.clone())
        }
        None => None,
    };
    let client = match (&spec.tls_cert, &spec.tls_key) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(LockError::invalid_type(
                "tls.key",
                "tls.key is required with tls.cert (the client certificate's private key, PEM)",
            ))
        }
        (None, Some(_)) => {
            return Err(LockError::invalid_type(
                "tls.cert",
                "tls.cert is required with tls.key (the client certificate, PEM)",
            ))
        }
        (Some(cert), Some(key)) => {
            let chain = certificates("tls.cert", cert)?;
            let private_key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
                LockError::invalid_type(
                    "tls.key",
                    "tls.key must be an unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)",
                )
            })?;
            let provider = rustls::crypto::ring::default_provider();
            rustls::sign::CertifiedKey::from_der(chain, private_key, &provider).map_err(|_| {
                LockError::invalid_type(
                    "tls.key",
                    "tls.key is not a usable private key for tls.cert (unsupported, or it does not match the certificate)",
                )
            })?;
            Some(ClientIdentity {
                cert: cert.clone(),
                key: key.clone(),
            })
        }
    };
    Ok(Tls {
        ca,
        client,
        insecure: !spec.tls_reject_unauthorized.unwrap_or(!url_insecure),
    })
}

fn certificates(arg: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, LockError> {
    let bad = || {
        LockError::invalid_type(
            arg,
            format!("{arg} must hold one or more PEM certificates (-----BEGIN CERTIFICATE-----)"),
        )
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad())?;
    if certs.is_empty() {
        return Err(bad());
    }
    Ok(certs)
}

/// The redis crate checks the server certificate against the host it connects to and sends
/// that host as SNI; it has no separate server name. A `servername` naming the host itself is
/// what happens anyway; any other name cannot be honoured, and ignoring it would check the
/// certificate against a name the user did not mean, so it is refused.
fn check_servername(name: &str, host: &str) -> Result<(), LockError> {
    let bare = |s: &str| {
        s.trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase()
    };
    if bare(name) == bare(host) {
        return Ok(());
    }
    Err(LockError::invalid_type(
        "tls.servername",
        format!(
            "tls.servername must be the host we connect to (\"{host}\"): the certificate is always checked against the host; connect to the name on the certificate instead"
        ),
    ))
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (address, tls) = match &self.address {
            Address::Tcp { host, port, tls } => (
                format!(
                    "{}://{host}:{port}",
                    if tls.is_some() { "rediss" } else { "redis" }
                ),
                tls.as_ref(),
            ),
            Address::Unix(path) => (format!("unix://{path}"), None),
            Address::Memory(name) => (format!("{MEMORY_SCHEME}{name}"), None),
            Address::Redlock(nodes) => (format!("redlock({nodes:?})"), None),
            Address::Cluster { nodes, tls, nat } => (
                format!(
                    "{}{}{}",
                    cluster_scheme(tls.is_some()),
                    list(nodes),
                    nat_shown(nat)
                ),
                tls.as_ref(),
            ),
            Address::Sentinel {
                sentinels,
                name,
                tls,
                auth,
                nat,
            } => (
                format!(
                    "{}{}/{name} (sentinel user {:?}, password {}){}",
                    sentinel_scheme(tls.is_some()),
                    list(sentinels),
                    auth.username,
                    if auth.password.is_some() {
                        "<redacted>"
                    } else {
                        "none"
                    },
                    nat_shown(nat)
                ),
                tls.as_ref(),
            ),
        };
        let mut out = f.debug_struct("Endpoint");
        out.field("address", &address);
        if let Some(tls) = tls {
            out.field("tls", tls);
        }
        out.field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

fn cluster_scheme(tls: bool) -> &'static str {
    if tls {
        "rediss+cluster://"
    } else {
        "redis+cluster://"
    }
}

fn sentinel_scheme(tls: bool) -> &'static str {
    if tls {
        "rediss+sentinel://"
    } else {
        "redis+sentinel://"
    }
}

/// A cluster's or a Sentinel set's `natMap`, as the endpoint's description shows it (nothing
/// when none).
fn nat_shown(nat: &[(HostPort, HostPort)]) -> String {
    if nat.is_empty() {
        return String::new();
    }
    let routes: Vec<String> = (nat.iter())
        .map(|(from, to)| {
            format!(
                "{} -> {}",
                list(std::slice::from_ref(from)),
                list(std::slice::from_ref(to))
            )
        })
        .collect();
    format!(" (natMap {})", routes.join(", "))
}

/// `h1:p1,h2:p2`, IPv6 hosts in brackets.
pub(super) fn list(nodes: &[HostPort]) -> String {
    let shown: Vec<String> = nodes
        .iter()
        .map(|(host, port)| match host.contains(':') {
            true => format!("[{host}]:{port}"),
            false => format!("{host}:{port}"),
        })
        .collect();
    shown.join(",")
}

/// `spec`'s `cluster` or `sentinels` (with `sentinel_*`) as an address, taken out of it;
/// `None` when it has neither. A URL, or both lists, beside one is refused.
fn many_hosts(spec: &mut EndpointSpec) -> Result<Option<Address>, LockError> {
    let sentinel_fields = spec.sentinel_name.is_some()
        || spec.sentinel_username.is_some()
        || spec.sentinel_password.is_some();
    if spec.sentinels.is_none() && sentinel_fields {
        return Err(LockError::invalid_type(
            "sentinels",
            "sentinels is required with name, sentinelUsername or sentinelPassword (the list of sentinels to ask)",
        ));
    }
    let either = spec.cluster.is_some() || spec.sentinels.is_some();
    if spec.cluster.is_some() && spec.sentinels.is_some() {
        return Err(LockError::invalid_type(
            "cluster",
            "cluster and sentinels cannot both be given: name a cluster or a Sentinel set",
        ));
    }
    if either && spec.url.is_some() {
        return Err(LockError::invalid_type(
            "url",
            "a URL cannot come with cluster or sentinels: pass one or the other",
        ));
    }
    if let Some(nodes) = spec.cluster.take() {
        return Ok(Some(Address::Cluster {
            nodes: multi::nodes("cluster", nodes)?,
            tls: None,
            nat: Vec::new(),
        }));
    }
    let Some(sentinels) = spec.sentinels.take() else {
        return Ok(None);
    };
    let name = spec.sentinel_name.take().filter(|name| !name.is_empty());
    let name = name.ok_or_else(|| {
        LockError::invalid_type(
            "name",
            "name is required with sentinels: the name of the master the sentinels watch",
        )
    })?;
    Ok(Some(Address::Sentinel {
        sentinels: multi::nodes("sentinels", sentinels)?,
        name,
        tls: None,
        auth: SentinelAuth {
            username: spec.sentinel_username.take(),
            password: spec.sentinel_password.take(),
        },
        nat: Vec::new(),
    }))
}

/// Says which settings are present, never their bytes.
impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.as_ref().map(|_| "<custom>"))
            .field("client", &self.client)
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<client certificate>")
    }
}

/// A `memory://` name: what the error message promises, so that two spellings of one name
/// (`%2F` and `/`, a space or none) cannot make two keyspaces by accident.
fn is_memory_name(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A refused name as the message shows it: quoted, whatever is not printable ASCII escaped,
/// cut short when long, and left out when it reads like `user:password@host`.
fn shown_memory_name(name: &str) -> String {
    const MOST: usize = 64;
    if name.contains('@') {
        return "a name with '@' (not repeated: it may hold credentials)".into();
    }
    let escaped: String = name.escape_default().collect();
    match escaped.char_indices().nth(MOST) {
        Some((cut, _)) => format!("'{}'...", &escaped[..cut]),
        None => format!("'{escaped}'"),
    }
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "endpoint_multi_tests.rs"]
mod multi_tests;
