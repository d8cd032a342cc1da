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

pub use crate::core::proto::acquire::AttemptForm;

/// Which attempt form one such connection's server takes, learnt from its replies: a
/// transaction until the server refuses MULTI (an ACL without it), the script from then
/// on. A property of the connection, whatever lock is attempted on it.
#[derive(Debug, Default)]
pub struct TxSupport {
    refused: bool,
    worked: bool,
}

impl TxSupport {
    /// How the next attempt is written.
    pub fn attempts(&self) -> AttemptForm {
        match (self.refused, self.worked) {
            (true, _) => AttemptForm::Script,
            (false, true) => AttemptForm::Transaction,
            (false, false) => AttemptForm::Untried,
        }
    }

    /// A command queued in a transaction was refused. Only a refusal of the command itself
    /// (an ACL without it, a renamed or unknown command) says MULTI is not allowed here; any
    /// other (OOM under maxmemory, a read-only replica, ...) passes with its cause, and
    /// taking it for one would send every later attempt as the costlier script.
    pub fn multi_refused(&mut self, refusal: &redis::Value) {
        if let redis::Value::ServerError(err) = refusal {
            let unknown = err.code() == "ERR"
                && err
                    .details()
                    .is_some_and(|details| details.starts_with("unknown command"));
            if err.code() == "NOPERM" || unknown {
                self.refused = true;
            }
        }
    }

    /// A transaction ran with none of its commands refused.
    pub fn multi_worked(&mut self) {
        self.worked = true;
    }
}

/// How long to leave the direct connection alone after it could not be opened: calls go
/// through tokio meanwhile, which reports whatever is wrong.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: &[u8]) -> redis::Value {
        match crate::core::basics::resp::parse(line) {
            Ok(Some((value, _))) => value,
            other => panic!("{line:?} gave {other:?}"),
        }
    }

    #[test]
    fn attempts_are_untried_then_transactions_until_multi_is_refused_then_scripts_for_good() {
        let noperm = error(b"-NOPERM User u has no permissions to run the 'multi' command\r\n");
        let mut support = TxSupport::default();
        assert_eq!(support.attempts(), AttemptForm::Untried);
        support.multi_worked();
        assert_eq!(support.attempts(), AttemptForm::Transaction);
        support.multi_refused(&noperm);
        assert_eq!(support.attempts(), AttemptForm::Script);
        support.multi_worked();
        assert_eq!(support.attempts(), AttemptForm::Script);
        let mut refused_first = TxSupport::default();
        refused_first.multi_refused(&error(
            b"-ERR unknown command 'MULTI', with args beginning with: \r\n",
        ));
        assert_eq!(refused_first.attempts(), AttemptForm::Script);
    }

    #[test]
    fn other_refusals_in_a_transaction_leave_it_the_form() {
        let mut support = TxSupport::default();
        support.multi_worked();
        for line in [
            &b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"[..],
            b"-READONLY You can't write against a read only replica.\r\n",
            b"-ERR value is not an integer or out of range\r\n",
        ] {
            support.multi_refused(&error(line));
            assert_eq!(support.attempts(), AttemptForm::Transaction, "{line:?}");
        }
    }
}
