//! Opens the socket of a connection that is driven outside tokio (the JS thread's, see
//! binding/js/socket): connected, authenticated and with the given scripts loaded here, on the
//! runtime, then handed over as a plain non-blocking socket.

use super::endpoint::{Address, Endpoint};
use crate::core::basics::error::LockError;
use crate::core::basics::{resp, trace};
use crate::core::proto::scripts::name_of as script_name;
use redis::{Cmd, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Whether `endpoint` can have such a connection: plain TCP only (TLS and Unix sockets stay
/// on the tokio connection).
pub fn supports(endpoint: &Endpoint) -> bool {
    matches!(endpoint.address, Address::Tcp { tls: None, .. })
}

/// A connected, ready socket in non-blocking mode, within the endpoint's connect timeout.
pub async fn open(endpoint: &Endpoint, scripts: &[&str]) -> Result<std::net::TcpStream, LockError> {
    let timeout = endpoint.connect_timeout;
    match tokio::time::timeout(timeout, connect(endpoint, scripts)).await {
        Ok(result) => result,
        Err(_) => Err(LockError::Timeout(format!(
            "no connection within {} ms",
            timeout.as_millis()
        ))),
    }
}

async fn connect(endpoint: &Endpoint, scripts: &[&str]) -> Result<std::net::TcpStream, LockError> {
    let Address::Tcp {
        host,
        port,
        tls: None,
    } = &endpoint.address
    else {
        return Err(LockError::Internal(
            "no direct connection over TLS or Unix sockets".into(),
        ));
    };
    let mut stream = TcpStream::connect((host.as_str(), *port))
        .await
        .map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    let commands = handshake(endpoint, scripts);
    let mut out = Vec::new();
    for cmd in &commands {
        cmd.write_packed_command(&mut out);
    }
    let started = std::time::Instant::now();
    let answered = handshaken(&mut stream, &out, commands.len()).await;
    if trace::on() && !commands.is_empty() {
        let outcome = answered.as_ref().map_or_else(LockError::code, |()| "ok");
        trace::call("socket", &out, started.elapsed(), outcome, script_name);
    }
    answered?;
    stream.into_std().map_err(io)
}

/// Sends the handshake `out` and reads its `count` replies, every one a success.
async fn handshaken(stream: &mut TcpStream, out: &[u8], count: usize) -> Result<(), LockError> {
    stream.write_all(out).await.map_err(io)?;
    for reply in read_replies(stream, count).await? {
        reply.extract_error()?;
    }
    Ok(())
}

/// AUTH, SELECT and SCRIPT LOAD, as the tokio connection sends them (RESP2: the JS thread
/// reads replies only, no pushes).
fn handshake(endpoint: &Endpoint, scripts: &[&str]) -> Vec<Cmd> {
    let mut commands = Vec::new();
    if let Some(password) = &endpoint.password {
        let mut auth = Cmd::new();
        auth.arg("AUTH");
        if let Some(username) = &endpoint.username {
            auth.arg(username);
        }
        commands.push(auth.arg(password).to_owned());
    }
    if endpoint.db != 0 {
        commands.push(Cmd::new().arg("SELECT").arg(endpoint.db).to_owned());
    }
    for source in scripts {
        commands.push(Cmd::new().arg("SCRIPT").arg("LOAD").arg(source).to_owned());
    }
    commands
}

async fn read_replies(stream: &mut TcpStream, count: usize) -> Result<Vec<Value>, LockError> {
    let mut buf = Vec::with_capacity(512);
    let mut replies = Vec::with_capacity(count);
    let mut chunk = [0u8; 512];
    while replies.len() < count {
        let read = stream.read(&mut chunk).await.map_err(io)?;
        if read == 0 {
            return Err(LockError::Connection(
                "connection closed during the handshake".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..read]);
        while let Some((reply, used)) = resp::parse(&buf).map_err(protocol)? {
            buf.drain(..used);
            replies.push(reply);
        }
    }
    Ok(replies)
}

fn io(err: std::io::Error) -> LockError {
    LockError::Connection(err.to_string())
}

pub fn protocol(err: resp::ProtocolError) -> LockError {
    LockError::Connection(format!("unexpected reply from Redis: {}", err.0))
}

/// How long to leave the direct connection alone after it could not be opened: calls go
/// through tokio meanwhile, which reports whatever is wrong.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
