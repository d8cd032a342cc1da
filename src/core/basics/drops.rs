//! A connection's drops, as the watchdog hears them: a wake-up for its one waiter, and when
//! the last one happened. The wake-up is stored when nobody waits (the watchdog stops while
//! nothing is held), so it may reach a hold taken long after; the time tells the watchdog
//! which holds the drop can concern: those whose last confirmation was sent before it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

pub struct Drops {
    wake: Notify,
    base: Instant,
    /// Nanoseconds from `base` to the last drop, plus one; 0 before the first.
    last: AtomicU64,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            wake: Notify::new(),
            base: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Drops {
    /// The connection dropped now (or a call timed out and it was abandoned).
    pub fn signal(&self) {
        let since = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.last.fetch_max(since + 1, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Resolves at the next drop, or at once for one nobody has waited for yet.
    pub fn notified(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// When the last drop happened, if one did.
    pub fn last(&self) -> Option<Instant> {
        match self.last.load(Ordering::SeqCst) {
            0 => None,
            since => Some(self.base + std::time::Duration::from_nanos(since - 1)),
        }
    }

    /// Whether a drop happened at or after `sent`: what was sent then may have been lost
    /// with the connection.
    pub fn since(&self, sent: Instant) -> bool {
        self.last().is_some_and(|at| at >= sent)
    }
}

#[cfg(test)]
#[path = "drops_tests.rs"]
mod tests;
