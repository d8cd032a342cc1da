//! What a failure to reach a server is about: its address, a missing password, or TLS on one
//! side only; for a cluster, credentials its seeds refuse. Looked into only once a call failed
//! before the endpoint was ever reached, so a working connection pays nothing for it.

use super::endpoint::{Address, Endpoint};
use crate::core::basics::error::LockError;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a probe of the other protocol may take, on top of the failed call.
pub const PROBE_BOUND: Duration = Duration::from_millis(300);
/// A TLS connection still unanswered after this long is worth a plain-text probe at once:
/// a plain server sent a TLS hello answers nothing until the connect timeout.
pub const TLS_SILENCE: Duration = Duration::from_millis(500);

/// The server as the user named it, without credentials.
pub fn label(endpoint: &Endpoint) -> String {
    match &endpoint.address {
        Address::Tcp {
            host,
            port,
            tls: None,
        } => format!("redis://{host}:{port}"),
        Address::Tcp { host, port, .. } => format!("rediss://{host}:{port}"),
        Address::Unix(path) => format!("unix://{path}"),
        Address::Memory(name) => format!("memory://{name}"),
        Address::Cluster { nodes, tls, .. } => {
            let scheme = if tls.is_some() { "rediss" } else { "redis" };
            format!("{scheme}+cluster://{}", super::endpoint::list(nodes))
        }
        Address::Sentinel {
            sentinels,
            name,
            tls,
            ..
        } => {
            let scheme = if tls.is_some() { "rediss" } else { "redis" };
            format!(
                "{scheme}+sentinel://{}/{name}",
                super::endpoint::list(sentinels)
            )
        }
        Address::Redlock(nodes) => {
            let labels: Vec<String> = nodes.iter().map(label).collect();
            format!("redlock[{}]", labels.join(", "))
        }
    }
}

/// `err` with the server named, and a refused login without a password said to lack one.
pub fn explain(endpoint: &Endpoint, err: LockError) -> LockError {
    match err {
        LockError::Connection(detail) => {
            LockError::Connection(format!("{detail} ({})", label(endpoint)))
        }
        LockError::Timeout(detail) => LockError::Timeout(format!("{detail} ({})", label(endpoint))),
        LockError::Auth(_) if endpoint.password.is_none() => LockError::Auth(format!(
            "none were given, and a password is required by {}: pass it in the URL, the options or the client",
            label(endpoint)
        )),
        other => other,
    }
}

/// The error to report when the server at `endpoint` speaks the other protocol: plain text
/// where TLS was asked for, or TLS where it was not. `None` when it does not, or cannot tell.
pub async fn tls_mismatch(endpoint: &Endpoint) -> Option<LockError> {
    let Address::Tcp { host, port, tls } = &endpoint.address else {
        return None;
    };
    let probe = async {
        let mut stream = TcpStream::connect((host.as_str(), *port)).await.ok()?;
        let hello = match tls {
            Some(_) => b"PING\r\n".to_vec(),
            None => client_hello(host)?,
        };
        stream.write_all(&hello).await.ok()?;
        let mut first = [0u8; 2];
        stream.read_exact(&mut first).await.ok()?;
        Some(first)
    };
    let first = tokio::time::timeout(PROBE_BOUND, probe).await.ok()??;
    let at = format!("the server at {host}:{port}");
    match tls {
        // A RESP reply to PING (+PONG, or -NOAUTH and the like) in plain text.
        Some(_) if matches!(first[0], b'+' | b'-') => Some(LockError::Connection(format!(
            "TLS was asked for (rediss:// or a tls option) but {at} speaks plain text: connect with redis:// and no tls option, or to the server's tls-port"
        ))),
        // A TLS record (handshake or alert) in answer to a TLS hello.
        None if matches!(first, [0x15 | 0x16, 0x03]) => Some(LockError::Connection(format!(
            "{at} speaks TLS but the connection was plain text: connect with rediss:// or tls: true"
        ))),
        _ => None,
    }
}

/// The refusal of the credentials by a seed of the cluster at `endpoint`, when one refuses
/// them. The crate reports a cluster whose every node turned the login down as no more than
/// "no connections found": each seed is asked with the endpoint's credentials (a PING after
/// the login, which tells a missing password), at once, within `PROBE_BOUND`. `None` when
/// none refuses them, or none answers.
pub async fn cluster_refusal(endpoint: &Endpoint) -> Option<LockError> {
    if !matches!(endpoint.address, Address::Cluster { .. }) {
        return None;
    }
    let seeds = endpoint.node_connection_infos(false).ok()?;
    let probes = seeds.into_iter().map(|info| async move {
        let client = redis::Client::open(info).ok()?;
        let login = async {
            let mut con = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<()>(&mut con).await
        };
        let err = tokio::time::timeout(PROBE_BOUND, login).await.ok()?.err()?;
        Some(LockError::from(err)).filter(|err| matches!(err, LockError::Auth(_)))
    });
    let refusals = futures_util::future::join_all(probes).await;
    refusals.into_iter().flatten().next()
}

/// The bytes a TLS client opens with; nothing is verified, as no handshake follows.
fn client_hello(host: &str) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .or_else(|_| ServerName::try_from("localhost"))
        .ok()?;
    let mut connection = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut out = Vec::new();
    connection.write_tls(&mut out).ok()?;
    Some(out)
}
