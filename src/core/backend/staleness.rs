//! Whether `Link`'s connection must be replaced by one to where its `Upstream` says now (a
//! Sentinel set's master moved, or the connection to it dropped or was answered READONLY),
//! and whether that switch is a drop still to be told to the watchdog.
//!
//! Once marked, no call takes the old connection (`Link::kept_manager` switches first), so a
//! request that reached it was stamped before the mark. A drop signalled after the mark
//! (`mark_told`) therefore covers every lock confirmed there, and the switch signals none of
//! its own: one master move, one drop, one `suspended` and one re-check per lock. A mark
//! nobody signalled for (`mark`) leaves the drop to the switch.

use std::sync::atomic::{AtomicU8, Ordering};

const FRESH: u8 = 0;
/// Replace the connection, and signal a drop when doing so.
const UNTOLD: u8 = 1;
/// Replace the connection: the drop was signalled after the mark.
const TOLD: u8 = 2;

#[derive(Default)]
pub(super) struct Staleness(AtomicU8);

impl Staleness {
    /// The connection must be replaced; the switch signals the drop.
    pub(super) fn mark(&self) {
        // Never downgrades `TOLD` to `UNTOLD`: a drop was signalled after the mark either way.
        let _ = (self.0).compare_exchange(FRESH, UNTOLD, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The connection must be replaced; the caller signals the drop after this returns.
    pub(super) fn mark_told(&self) {
        self.0.store(TOLD, Ordering::Release);
    }

    pub(super) fn is_marked(&self) -> bool {
        self.0.load(Ordering::Acquire) != FRESH
    }

    /// Clears the mark: `None` when there was none, else whether the switch must signal
    /// the drop itself.
    pub(super) fn take(&self) -> Option<bool> {
        match self.0.swap(FRESH, Ordering::AcqRel) {
            FRESH => None,
            was => Some(was == UNTOLD),
        }
    }

    /// A connection was opened while the mark stood: a lookup begun before the move may
    /// have led it to the old master, after the drop was signalled, so its switch signals.
    pub(super) fn opened(&self) {
        let _ = (self.0).compare_exchange(TOLD, UNTOLD, Ordering::AcqRel, Ordering::Acquire);
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
    fn an_untold_mark_or_a_connection_opened_under_a_told_one_signals_at_the_switch() {
        let stale = Staleness::default();
        stale.mark();
        assert_eq!(stale.take(), Some(true));
        stale.mark_told();
        stale.opened();
        assert_eq!(stale.take(), Some(true));
        stale.opened();
        assert_eq!(stale.take(), None);
    }
}
