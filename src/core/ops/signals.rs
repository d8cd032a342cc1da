//! What a watched lock tells and is told: the sink that hears it was refreshed or lost, what
//! was last confirmed of it, and the heartbeat of the thread that holds it. Apart from the
//! watchdog so its table (watched.rs) uses them without using the watchdog.

use crate::core::basics::error::LockError;
use crate::core::basics::stats::CallCounters;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Where watched locks' news goes; one sink may serve many locks, told apart by the tag
/// each was watched with. Called from the runtime thread, never under a lock.
pub trait Sink: Send + Sync {
    /// Redis confirmed the TTL `ttl` for a refresh sent at `sent`.
    fn refreshed(&self, tag: u32, sent: std::time::Instant, ttl: Duration);
    /// The lock is gone; `last` is what was last confirmed of it, `token` its owner token.
    fn lost(&self, tag: u32, error: LockError, last: Confirmed, token: &[u8]);
}

/// A sink that counts what it hears into an API's stats before passing it on: the watchdog
/// decides refreshes and losses, and every sink it tells goes through one of these.
struct Counted {
    stats: Arc<CallCounters>,
    sink: Arc<dyn Sink>,
}

impl Sink for Counted {
    fn refreshed(&self, tag: u32, sent: std::time::Instant, ttl: Duration) {
        self.stats.refreshed();
        self.sink.refreshed(tag, sent, ttl);
    }

    fn lost(&self, tag: u32, error: LockError, last: Confirmed, token: &[u8]) {
        self.stats.lost();
        self.sink.lost(tag, error, last, token);
    }
}

/// `sink`, its news counted into `stats` first.
pub fn counted(stats: &Arc<CallCounters>, sink: Arc<dyn Sink>) -> Arc<dyn Sink> {
    Arc::new(Counted {
        stats: stats.clone(),
        sink,
    })
}

/// Tells nobody: for watchdog tests that look at its entries, not at what it reports.
#[cfg(test)]
pub struct QuietSink;

#[cfg(test)]
impl Sink for QuietSink {
    fn refreshed(&self, _tag: u32, _sent: std::time::Instant, _ttl: Duration) {}
    fn lost(&self, _tag: u32, _error: LockError, _last: Confirmed, _token: &[u8]) {}
}

/// Proof that the JavaScript thread is still running, updated by the binding.
pub struct Heartbeat {
    origin: std::time::Instant,
    last_ms: AtomicU64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            origin: std::time::Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
}

impl Heartbeat {
    pub fn beat(&self) {
        let ms = self.origin.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    pub(crate) fn last(&self) -> Instant {
        Instant::from_std(self.origin + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// What the watchdog last confirmed of a lock it keeps alive.
#[derive(Debug, Clone, Copy)]
pub struct Confirmed {
    /// Until when the lock counts as ours by our clock.
    pub deadline: std::time::Instant,
    /// When Redis expires it, as far as we know: the TTL from the last confirmed request.
    pub expires_at_ms: u64,
}
