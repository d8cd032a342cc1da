//! A connection's drops, as the watchdog hears them: a wake-up for its one waiter, and when
//! the last one happened. The wake-up is stored when nobody waits (the watchdog stops while
//! nothing is held), so it may reach a hold taken long after; the time tells the watchdog
//! which holds the drop can concern: those whose last confirmation was sent before it.
//! Also whether the server refuses connections right now (down): waiters then end at once
//! instead of sleeping out their bound, since no attempt can succeed until it accepts again.
//! Down only once refusals persist (`PERSIST`): a restarting Redis refuses for a few ms
//! before it accepts again, which no wait should fail for.

use super::error::LockError;
use super::sync::lock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long refusals must go on, unanswered, before the server counts as down: long enough
/// to carry a quick restart (a supervisor's few ms of closed port), short enough that a wait
/// still fails well within 100 ms of the server going away.
pub const PERSIST: Duration = Duration::from_millis(40);
/// Refusals further apart than this belong to different outages: a new one starts afresh.
const STREAK_GAP: Duration = Duration::from_secs(1);
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

struct Streak {
    first: Instant,
    last: Instant,
    err: LockError,
}

pub struct Drops {
    wake: Notify,
    base: Instant,
    /// Nanoseconds from `base` to the last drop, plus one; 0 before the first.
    last: AtomicU64,
    /// Refusals went on for `PERSIST` and no call has been answered since.
    down: AtomicBool,
    /// A refusal was met and no call has been answered since (the cheap check for `answered`).
    refusing: AtomicBool,
    /// The refusals since the last answer, and what the latest failed with.
    streak: Mutex<Option<Streak>>,
    /// Every waiter, at each refusal while down: its next attempt finds out.
    refused: Notify,
    /// Slots whose node left a call unanswered on a connection that was kept (a cluster's:
    /// one node's silence says nothing of the others'), not yet taken by the watchdog.
    slots: Mutex<Vec<u16>>,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            wake: Notify::new(),
            base: Instant::now(),
            last: AtomicU64::new(0),
            down: AtomicBool::new(false),
            refusing: AtomicBool::new(false),
            streak: Mutex::new(None),
            refused: Notify::new(),
            slots: Mutex::new(Vec::new()),
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

    /// A call on `slot` got no answer in time on a connection that was kept: the locks of
    /// that slot are in doubt, no other. Wakes the watchdog like a drop, which `last` and
    /// `since` do not count: they speak of the whole connection.
    pub fn signal_slot(&self, slot: u16) {
        let mut slots = lock(&self.slots);
        if !slots.contains(&slot) {
            slots.push(slot);
        }
        drop(slots);
        self.wake.notify_one();
    }

    /// The slots signalled since the last call (see `signal_slot`).
    pub fn take_slots(&self) -> Vec<u16> {
        std::mem::take(&mut *lock(&self.slots))
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

    /// A connection attempt was refused with `err`. Whether the server is down now: refusals
    /// have gone on for `PERSIST` without an answer between them.
    pub fn refused(&self, err: &LockError) -> bool {
        self.refused_at(err, Instant::now())
    }

    fn refused_at(&self, err: &LockError, now: Instant) -> bool {
        let mut streak = lock(&self.streak);
        let first = match streak.as_ref() {
            Some(open) if now.saturating_duration_since(open.last) <= STREAK_GAP => open.first,
            _ => now,
        };
        *streak = Some(Streak {
            first,
            last: now,
            err: err.clone(),
        });
        self.refusing.store(true, Ordering::SeqCst);
        if now.saturating_duration_since(first) < PERSIST {
            return false;
        }
        self.down.store(true, Ordering::SeqCst);
        drop(streak);
        self.refused.notify_waiters();
        true
    }

    /// A call was answered: the server is up.
    pub fn answered(&self) {
        // A load first: this runs for every reply, and a store would bounce the cache line.
        // Relaxed is enough: `refusing` changes only under `streak`'s lock, together with it,
        // so reading false means no streak was open at that point of its order. A refusal
        // racing this answer then opens a fresh streak, which puts the server down only if
        // refusals go on for `PERSIST` after it; one this answer's call saw before it (the
        // same task, or handed on through the runtime) is ordered before the load, which then
        // reads true. A stronger ordering would add no bound in time either.
        if self.refusing.load(Ordering::Relaxed) {
            let mut streak = lock(&self.streak);
            *streak = None;
            self.refusing.store(false, Ordering::SeqCst);
            self.down.store(false, Ordering::SeqCst);
        }
    }

    /// The refusal that put the server down, while it is.
    pub fn refusal(&self) -> Option<LockError> {
        if !self.down.load(Ordering::SeqCst) {
            return None;
        }
        lock(&self.streak).as_ref().map(|open| open.err.clone())
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
