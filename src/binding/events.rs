use super::js::settle::Completer;
use crate::core::api::{Confirmed, Sink};
use crate::core::basics::error::LockError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Delivers watchdog news to JavaScript listeners (registered by id in lib/completions.js;
/// the id is the tag a lock was watched with), through the completion queue. `refreshed`
/// crosses into JS only while someone listens for it, so 10,000 held locks cost no JS work
/// per tick. One sink serves every lock of its owner.
pub struct JsSink {
    pub completer: Completer,
    pub want_refreshed: Arc<AtomicBool>,
}

impl JsSink {
    pub fn new(completer: Completer, want_refreshed: Arc<AtomicBool>) -> Self {
        JsSink {
            completer,
            want_refreshed,
        }
    }
}

impl Sink for JsSink {
    fn refreshed(&self, listener: u32, _sent: std::time::Instant, _ttl: std::time::Duration) {
        if self.want_refreshed.load(Ordering::Relaxed) {
            self.completer.refreshed(listener);
        }
    }

    fn lost(&self, listener: u32, error: LockError, last: Confirmed, token: &[u8]) {
        let token = String::from_utf8_lossy(token).into_owned();
        self.completer
            .lost(listener, error, last.expires_at_ms, token);
    }

    fn suspended(&self, listener: u32) {
        self.completer.news(listener, "suspended");
    }

    fn resumed(&self, listener: u32) {
        self.completer.news(listener, "resumed");
    }
}
