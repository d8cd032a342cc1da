//! An undo written on a lane behind a call whose reply came too late (a win after its caller
//! was told of the timeout, a handover answered late), its own reply read by nobody else:
//! sent whole (`wire::write_whole`), so a NOSCRIPT cannot refuse it. Should it still fail, the
//! lock would stay held by nobody until its TTL, unseen: its failure is counted among the
//! stats' errors by code (and traced with `DEBUG`, as every call on the lane is), and a
//! failure the server gives for a passing state of its own sends the undo once more through
//! the runtime. Every undo frees only a token of ours, so it may run twice.

use crate::core::basics::background::spawn;
use crate::core::basics::resp;
use crate::core::basics::stats::CallCounters;
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long the undo waits before going again through the runtime: a script that kept the
/// server BUSY, a replica LOADING, are over in moments or not soon at all.
pub const UNDO_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// The server's codes for a state of its own that passes, after which the undo may succeed.
/// Not OOM: memory is not freed by waiting a moment, and the lock's TTL frees the key anyway.
const PASSING: [&str; 4] = ["BUSY", "LOADING", "TRYAGAIN", "MASTERDOWN"];

/// An undo written on a lane, its reply not read yet.
pub struct UndoSent {
    /// Sends the undo again through the runtime (a Redlock's node: owed to it until it
    /// answers, backend/redlock_owed.rs).
    again: Box<dyn FnOnce() + Send>,
    stats: Arc<CallCounters>,
}

impl UndoSent {
    pub fn new(stats: &Arc<CallCounters>, again: impl FnOnce() + Send + 'static) -> Self {
        UndoSent {
            again: Box::new(again),
            stats: stats.clone(),
        }
    }

    /// The lane's connection broke before the undo's reply: it may never have run.
    pub fn owe(self) {
        (self.again)();
    }

    /// The undo's reply came: `true` when it failed and goes again through the runtime.
    pub fn heard(self, reply: Value) -> bool {
        let passing = match &reply {
            Value::ServerError(err) => PASSING.contains(&err.code()),
            _ => false,
        };
        let Err(err) = resp::typed::<Value>(reply) else {
            return false;
        };
        self.stats.error(&err);
        if passing {
            let again = self.again;
            spawn(async move {
                tokio::time::sleep(UNDO_AGAIN_AFTER).await;
                again();
            });
        }
        passing
    }
}

#[cfg(test)]
#[path = "undo_tests.rs"]
mod tests;
