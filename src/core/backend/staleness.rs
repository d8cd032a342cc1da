//! Whether `Link`'s connection must be replaced by one to where its `Upstream` says now (a
//! Sentinel set's master moved, or the connection to it dropped or was answered READONLY),
//! and whether that switch is a drop still to be told to the watchdog.
//!
//! What holds: a call takes its send stamp before it takes a connection, and once the mark
//! is set, no call takes the marked connection (`Link::kept_manager` switches it first); a
//! connection whose lookup began before a mark is never installed or used (`marks`: the
//! lookup may have been answered with the old master, which says ROLE master for seconds
//! after a failover). So every request that reached the old master was stamped before the
//! mark, and a drop signalled after the mark (`mark_told`) covers every lock confirmed there:
//! the switch signals none of its own (one master move, one drop, one `suspended` and one
//! re-check per lock). A mark nobody signalled for (`mark`) leaves the drop to the switch.
//! A mark stays until a connection replaces the marked one: one met with no connection in
//! place is taken by the next connection installed.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const FRESH: u8 = 0;
/// Replace the connection, and signal a drop when doing so.
const UNTOLD: u8 = 1;
/// Replace the connection: the drop was signalled after the mark.
const TOLD: u8 = 2;

#[derive(Default)]
pub(super) struct Staleness {
    state: AtomicU8,
    /// How many marks were made: counted before each takes effect.
    marks: AtomicU64,
}

impl Staleness {
    /// The connection must be replaced; the switch signals the drop.
    pub(super) fn mark(&self) {
        self.marks.fetch_add(1, Ordering::AcqRel);
        // Never downgrades `TOLD` to `UNTOLD`: a drop was signalled after the mark either way.
        let _ = (self.state).compare_exchange(FRESH, UNTOLD, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The connection must be replaced; the caller signals the drop after this returns.
    pub(super) fn mark_told(&self) {
        self.marks.fetch_add(1, Ordering::AcqRel);
        self.state.store(TOLD, Ordering::Release);
    }

    pub(super) fn is_marked(&self) -> bool {
        self.state.load(Ordering::Acquire) != FRESH
    }

    /// How many marks were made so far: a connection opened while this changed may go to
    /// the master a mark left (its lookup was answered before), after the drop was signalled.
    pub(super) fn marks(&self) -> u64 {
        self.marks.load(Ordering::Acquire)
    }

    /// Clears the mark: `None` when there was none, else whether the switch must signal
    /// the drop itself.
    pub(super) fn take(&self) -> Option<bool> {
        match self.state.swap(FRESH, Ordering::AcqRel) {
            FRESH => None,
            was => Some(was == UNTOLD),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Staleness;

    #[test]
    fn a_told_mark_is_switched_without_a_drop_of_its_own() {
        let stale = Staleness::default();
        assert_eq!(stale.take(), None);
        stale.mark_told();
        // A drop met after the move was told adds no second one.
        stale.mark();
        assert!(stale.is_marked());
        assert_eq!(stale.take(), Some(false));
        assert!(!stale.is_marked());
    }

    #[test]
    fn an_untold_mark_signals_at_the_switch() {
        let stale = Staleness::default();
        stale.mark();
        assert_eq!(stale.take(), Some(true));
        assert_eq!(stale.take(), None);
    }

    #[test]
    fn every_mark_is_counted_even_one_on_a_standing_mark() {
        let stale = Staleness::default();
        let before = stale.marks();
        stale.mark_told();
        let told = stale.marks();
        assert_ne!(told, before);
        stale.mark();
        assert_ne!(stale.marks(), told);
        // Taking the mark is no mark.
        let marked = stale.marks();
        stale.take();
        assert_eq!(stale.marks(), marked);
    }
}
