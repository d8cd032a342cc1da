//! A connection's drops, as the watchdog hears them: a wake-up for its one waiter, and when
//! the last one happened. The wake-up is stored when nobody waits (the watchdog stops while
//! nothing is held), so it may reach a hold taken long after; the time tells the watchdog
//! which holds the drop can concern: those whose last confirmation was sent before it.
//! Also whether the server refuses connections right now (down): waiters then end at once
//! instead of sleeping out their bound, since no attempt can succeed until it accepts again.

use super::error::LockError;
use super::sync::lock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

pub struct Drops {
    wake: Notify,
    base: Instant,
    /// Nanoseconds from `base` to the last drop, plus one; 0 before the first.
    last: AtomicU64,
    /// A reconnect was refused and no call has been answered since.
    down: AtomicBool,
    /// What the refused reconnect failed with, for the waiters it ends.
    refusal: Mutex<Option<LockError>>,
    /// Every waiter, at each refusal.
    refused: Notify,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            wake: Notify::new(),
            base: Instant::now(),
            last: AtomicU64::new(0),
            down: AtomicBool::new(false),
            refusal: Mutex::new(None),
            refused: Notify::new(),
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

    /// A reconnect was refused with `err`: the server is down until a call is answered.
    pub fn refused(&self, err: &LockError) {
        *lock(&self.refusal) = Some(err.clone());
        self.down.store(true, Ordering::SeqCst);
        self.refused.notify_waiters();
    }

    /// A call was answered: the server is up.
    pub fn answered(&self) {
        // A load first: this runs for every reply, and a store would bounce the cache line.
        if self.down.load(Ordering::Relaxed) {
            self.down.store(false, Ordering::SeqCst);
        }
    }

    /// The refusal that put the server down, while it is.
    pub fn refusal(&self) -> Option<LockError> {
        if !self.down.load(Ordering::SeqCst) {
            return None;
        }
        lock(&self.refusal).clone()
    }

    /// Resolves at the next refusal. Counts from when it is made (not first polled): make
    /// it, then look at `refusal()`, then await it, and no refusal falls in between.
    pub fn next_refusal(&self) -> Notified<'_> {
        self.refused.notified()
    }
}

#[cfg(test)]
#[path = "drops_tests.rs"]
mod tests;
