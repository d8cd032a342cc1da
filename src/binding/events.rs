use super::completions::Completer;
use crate::core::error::LockError;
use crate::core::watchdog::{Confirmed, Sink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Delivers watchdog news to a JavaScript listener (registered by id in lib/completions.js),
/// through the completion queue. `refreshed` crosses into JS only while someone listens for
/// it, so 10,000 held locks cost no JS work per tick.
pub struct JsSink {
    pub completer: Completer,
    pub listener: u32,
    pub want_refreshed: Arc<AtomicBool>,
}

impl JsSink {
    pub fn new(completer: Completer, listener: u32, want_refreshed: Arc<AtomicBool>) -> Self {
        JsSink {
            completer,
            listener,
            want_refreshed,
        }
    }

    pub fn lost(&self, error: LockError, last: Confirmed) {
        self.completer
            .event(self.listener, "lost", Some(error), Some(last.expires_at_ms));
    }
}

impl Sink for JsSink {
    fn refreshed(&self, _sent: std::time::Instant, _ttl: std::time::Duration) {
        if self.want_refreshed.load(Ordering::Relaxed) {
            self.completer.event(self.listener, "refreshed", None, None);
        }
    }

    fn lost(&self, error: LockError, last: Confirmed) {
        JsSink::lost(self, error, last);
    }
}
