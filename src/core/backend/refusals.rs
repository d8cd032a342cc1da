//! What a server's refusal says of the command refused: sent again elsewhere (a cluster's
//! slot moving), not to be sent here at all (unknown or denied), or the connection's protocol.

use redis::{ErrorKind, ServerErrorKind};

/// A cluster's answer that the command was not run, to be sent again: its slot is moving
/// (MOVED, ASK, TRYAGAIN), the cluster is electing a master, or the crate has no connection to
/// the slot's node yet.
pub(super) fn turned_away(err: &redis::RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
        ) | ErrorKind::ClusterConnectionNotFound
    )
}

/// The server has no such command for us: unknown to it (SSUBSCRIBE before Redis 7, or
/// renamed away) or denied by an ACL. Any other refusal is about this call, not the command.
pub(super) fn refuses_command(err: &redis::RedisError) -> bool {
    let unknown = || {
        err.detail()
            .is_some_and(|detail| detail.to_ascii_lowercase().starts_with("unknown command"))
    };
    err.code() == Some("NOPERM") || (err.code() == Some("ERR") && unknown())
}

/// Redis before 6 answers HELLO with "unknown command"; a server with HELLO renamed away does
/// the same, and one that has HELLO without protocol 3 answers NOPROTO (whose text names no
/// command: only HELLO answers it). The manager's connect then fails for good, so we fall
/// back to RESP2.
pub(super) fn refuses_resp3(err: &redis::RedisError) -> bool {
    if err.kind() == redis::ErrorKind::RESP3NotSupported || err.code() == Some("NOPROTO") {
        return true;
    }
    let text = err.to_string();
    text.contains("HELLO") && text.contains("unknown command")
}

#[cfg(test)]
#[path = "refusals_tests.rs"]
mod tests;
