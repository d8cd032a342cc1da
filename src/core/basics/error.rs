use super::pace::GaveUp;
use std::fmt;

/// Which JavaScript error class a validation failure maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidKind {
    Type,
    Range,
}

/// Every failure the core reports. Each variant has a stable string code that the JS layer
/// turns into an error class; contention is never an error here, only the caller's policy
/// (give up after N retries, a deadline) makes it one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Bad input, found before any Redis call.
    Invalid {
        kind: InvalidKind,
        arg: &'static str,
        message: String,
    },
    /// Redis could not be reached, or dropped the connection.
    Connection(String),
    /// An attempt refused at the restart quarantine's closed gate (proto/epoch.rs): Redis
    /// was restarted `restarted_ms_ago`, less than `restartQuarantineMs` ago. Users see it
    /// as any server not reached (`ECONNECTION`, same text); a variant of its own so that a
    /// Redlock counts its nodes in quarantine apart without reading the text.
    Quarantined {
        restarted_ms_ago: u128,
        quarantine_ms: u128,
    },
    /// Redis did not answer within the call's bound.
    Timeout(String),
    /// Redis refused our credentials.
    Auth(String),
    /// Redis accepted our credentials but its ACL denied this user a command, key or channel.
    Denied(String),
    /// Redis answered with an error we did not expect (e.g. WRONGTYPE).
    Redis(String),
    /// The server answered only about its own state (loading, a replica, out of memory, busy
    /// with a script, its master down): it said nothing about a
    /// lock. Decided by the reply's code where it is read, so a quorum of nodes can tell
    /// it from an answer. Users see it as any Redis error (`EREDIS`).
    Unready(String),
    /// The lock stayed held by someone else for as long as the caller was willing to wait.
    Locked { key: String, retries: u32 },
    /// The handle no longer owns its lock (released, expired or taken over).
    NotHeld { key: String },
    /// The caller cancelled the operation.
    Aborted,
    /// A bug of ours (a panic) caught before it reached Node.
    Internal(String),
    /// A lock we were keeping alive is gone: deleted, taken, expired while Redis could not be
    /// reached, or given up on purpose (stalled holder, maximum hold time).
    Lost { key: String, reason: String },
    /// syncguard's `lock()` stopped trying, by one of its three rules (basics/pace.rs); the
    /// message is syncguard's own.
    GaveUp(GaveUp),
}

impl LockError {
    /// The same error, its text saying it came while doing `what`, where it carries a text
    /// Redis or the connection gave.
    pub fn while_doing(self, what: &str) -> Self {
        let said = |text: String| format!("{what}: {text}");
        match self {
            LockError::Denied(text) => LockError::Denied(said(text)),
            LockError::Redis(text) => LockError::Redis(said(text)),
            LockError::Unready(text) => LockError::Unready(said(text)),
            LockError::Auth(text) => LockError::Auth(said(text)),
            other => other,
        }
    }

    /// A call that got no reply within its bound.
    pub fn no_reply(bound: std::time::Duration) -> Self {
        LockError::Timeout(format!("no reply within {} ms", bound.as_millis()))
    }

    pub fn invalid_type(arg: &'static str, message: impl Into<String>) -> Self {
        LockError::Invalid {
            kind: InvalidKind::Type,
            arg,
            message: message.into(),
        }
    }

    pub fn invalid_range(arg: &'static str, message: impl Into<String>) -> Self {
        LockError::Invalid {
            kind: InvalidKind::Range,
            arg,
            message: message.into(),
        }
    }

    /// A cluster call its slot's nodes kept turning away unrun (`turned_away`: MOVED, ASK,
    /// TRYAGAIN while the slot migrates) until its `bound` ran out: no answer about the lock
    /// came in time, as with a silent server, so `ETIMEDOUT`, and retried as one. The
    /// server's own words ("Multiple keys request during rehashing of slot") say neither
    /// that the call was retried nor that it ran out of time.
    pub fn slot_moving(err: &redis::RedisError, bound: std::time::Duration) -> Self {
        let said = format!(
            "the cluster kept turning the call away while the key's slot moved between nodes, for all of its {} ms bound",
            bound.as_millis()
        );
        // Messages stay under 350 bytes, the server's words included.
        let room = 300usize.saturating_sub(said.len());
        // As the server said it ("TRYAGAIN ..."), not as the crate names its kind.
        let words = match (err.code(), err.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => redis_detail(err),
        };
        LockError::Timeout(format!("{said} ({})", clipped(words, room)))
    }

    /// No fencing token could be drawn for an acquisition (see fence.lua), which then fails.
    pub fn no_fence() -> Self {
        LockError::Redis(NO_FENCE.into())
    }

    /// The stable code users match on; never changes for a given variant.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::Invalid { .. } => "EINVAL",
            LockError::Connection(_) | LockError::Quarantined { .. } => "ECONNECTION",
            LockError::Timeout(_) => "ETIMEDOUT",
            LockError::Auth(_) => "EAUTH",
            LockError::Denied(_) => "ENOPERM",
            LockError::Redis(_) | LockError::Unready(_) => "EREDIS",
            LockError::Locked { .. } => "ELOCKED",
            LockError::NotHeld { .. } => "ENOTHELD",
            LockError::Aborted => "EABORTED",
            LockError::Lost { .. } => "ELOST",
            LockError::Internal(_) => "EINTERNAL",
            LockError::GaveUp(_) => "EGAVEUP",
        }
    }

    /// The lock the failure is about, for the variants that name one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LockError::Locked { key, .. }
            | LockError::NotHeld { key }
            | LockError::Lost { key, .. } => Some(key),
            _ => None,
        }
    }

    /// True when the failure says nothing about who holds the lock: Redis was not asked, or
    /// did not answer.
    pub fn is_infrastructure(&self) -> bool {
        matches!(
            self,
            LockError::Connection(_)
                | LockError::Quarantined { .. }
                | LockError::Timeout(_)
                | LockError::Auth(_)
                | LockError::Denied(_)
        )
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Invalid { message, .. } => f.write_str(message),
            LockError::Connection(m) => write!(f, "cannot reach Redis: {m}"),
            LockError::Quarantined {
                restarted_ms_ago,
                quarantine_ms,
            } => write!(
                f,
                "cannot reach Redis: Redis was restarted {restarted_ms_ago} ms ago; no lock is given for restartQuarantineMs ({quarantine_ms}) after a restart"
            ),
            LockError::Timeout(m) => write!(f, "Redis did not answer in time: {m}"),
            LockError::Auth(m) => write!(f, "Redis refused the credentials: {m}"),
            LockError::Denied(m) => write!(f, "Redis denied this user a command or key (ACL): {m}"),
            LockError::Redis(m) | LockError::Unready(m) => write!(f, "Redis error: {m}"),
            LockError::Locked { key, retries } => {
                write!(
                    f,
                    "could not acquire lock \"{key}\" after {retries} retries"
                )
            }
            LockError::NotHeld { key } => write!(f, "lock \"{key}\" is no longer held"),
            LockError::Aborted => f.write_str("the operation was aborted"),
            LockError::Internal(m) => write!(f, "internal error in native-redis-lock: {m}"),
            LockError::Lost { key, reason } => write!(f, "lock \"{key}\" was lost: {reason}"),
            LockError::GaveUp(GaveUp::TimedOut {
                elapsed_ms,
                attempts,
            }) => write!(
                f,
                "Failed to acquire lock after {elapsed_ms}ms ({attempts} attempts)"
            ),
            LockError::GaveUp(GaveUp::Contention { attempts }) => write!(
                f,
                "Failed to acquire lock after {attempts} attempts (lock contention)"
            ),
            LockError::GaveUp(GaveUp::NoTimeForRetry { elapsed_ms }) => write!(
                f,
                "Timeout reached before next retry ({elapsed_ms}ms elapsed)"
            ),
        }
    }
}

impl std::error::Error for LockError {}

impl From<redis::RedisError> for LockError {
    fn from(err: redis::RedisError) -> Self {
        use redis::ErrorKind;
        let detail = redis_detail(&err);
        if err.is_timeout() {
            return LockError::Timeout(detail);
        }
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            return LockError::Connection(detail);
        }
        if err.kind() == ErrorKind::Parse {
            return LockError::Connection(NOT_REDIS.into());
        }
        // A cluster with no connection to the node a command is for (down, unreachable, or
        // refusing the login): the crate's words ("No connections found") say less than this.
        if err.kind() == ErrorKind::ClusterConnectionNotFound {
            return LockError::Connection(NO_CLUSTER_NODE.into());
        }
        // The crate files codes it has no variant for (WRONGPASS, NOAUTH) under `Extension`,
        // so the code is checked whatever the kind.
        match err.code() {
            Some("NOAUTH" | "WRONGPASS") => return LockError::Auth(detail),
            Some("NOPERM") => return LockError::Denied(detail),
            Some("NOFENCE") => return LockError::no_fence(),
            // No master serves the slot (failed, not yet replaced): the key's server is as
            // unreachable as a refused connection's, and retried the same.
            Some("CLUSTERDOWN") => {
                // Messages stay under 350 bytes, the server's words included.
                let room = 300 - CLUSTER_DOWN.len();
                return LockError::Connection(format!(
                    "{CLUSTER_DOWN} ({})",
                    clipped(detail, room)
                ));
            }
            Some(code) if UNREADY_CODES.contains(&code) => return LockError::Unready(detail),
            _ => {}
        }
        // A command denied inside a script comes back as a plain ERR with this text.
        if detail.contains("user executing the script can't run") {
            return LockError::Denied(detail);
        }
        if err.kind() == ErrorKind::AuthenticationFailed {
            LockError::Auth(detail)
        } else {
            LockError::Redis(detail)
        }
    }
}

/// A cluster's answer that the command's slot is moving between nodes (MOVED, ASK,
/// TRYAGAIN): the command was not run, and may go again (see `LockError::slot_moving`).
pub fn slot_moving(err: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
        )
    )
}

/// What a reply that is not RESP means: whatever answered is not a Redis server (a web
/// server, a TLS port spoken to in plain text, another protocol). The parser's own words say
/// nothing to a user.
pub const NOT_REDIS: &str =
    "the server did not answer in the Redis protocol: is the address a Redis server (and is TLS on where it should be)?";

/// What a cluster's missing connection to a command's node means to a user.
pub const NO_CLUSTER_NODE: &str =
    "no connection could be made to the cluster node serving the key (down, unreachable, or refusing the credentials)";

/// What a cluster's CLUSTERDOWN means to a user.
pub const CLUSTER_DOWN: &str =
    "the cluster serves no master for the key's slot (CLUSTERDOWN: a master failed and no replica has taken over yet)";

/// The codes a server answers with about its own state, whatever the command.
const UNREADY_CODES: [&str; 6] = [
    "LOADING",
    "READONLY",
    "MASTERDOWN",
    "TRYAGAIN",
    "OOM",
    "BUSY",
];

/// See fence.lua: the lock's fence counter was written by someone else, or is exhausted.
const NO_FENCE: &str = "no fencing token can be drawn for this lock: its fence counter holds something other than a whole number below 999999999999998 (another client wrote to it, or 10^15 fences were drawn); the lock was not taken";

/// The redis crate's messages name the failing command and the server's reply; neither
/// carries credentials (AUTH arguments are never echoed), so they are safe to pass on.
fn redis_detail(err: &redis::RedisError) -> String {
    clipped(err.to_string(), 300)
}

/// `text` cut to at most `max` bytes (and the ellipsis), at a character boundary.
fn clipped(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
