//! Whether a first attempt may be carried by the caller's own connection (see carried.rs)
//! or must run on the runtime, whatever carrier asks. The runtime's path does what a
//! carried attempt cannot: it loads the scripts first, queues for wakes, and waits its
//! turn behind waiters of the same connection.

use super::carried::Mode;
use super::lock::Locker;
use super::store::Store;
use crate::core::wait::wake::Ticket;
use tokio_util::sync::CancellationToken;

/// What the way of a first attempt depends on.
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstAttempt {
    /// A fair lock's attempts go through its line (acquire_fair.lua), not a transaction.
    pub fair: bool,
    /// A watchdog is to keep the lock once won: its refreshes must be one round trip from
    /// the first, so the refresh script must be known loaded.
    pub watched: bool,
    pub scripts_ready: bool,
    pub cancelled: bool,
    /// A waiter of ours is subscribed to the lock: the attempt must queue for its wakes
    /// (acquire_queued.lua).
    pub subscribed: bool,
    /// The waiter's turn comes from our own waiters (see `TicketView::turn_from_others`):
    /// an attempt of its own would jump their queue.
    pub turn_from_others: bool,
}

impl FirstAttempt {
    /// An attempt at a lock of `locker`.
    pub fn of(locker: &Locker) -> Self {
        FirstAttempt {
            fair: locker.is_fair(),
            ..FirstAttempt::on(locker.store())
        }
    }

    /// An attempt at a lock that is never fair, on `store`'s connection.
    pub fn on(store: &Store) -> Self {
        FirstAttempt {
            scripts_ready: store.scripts_ready(),
            ..FirstAttempt::default()
        }
    }

    pub fn watched(self, watched: bool) -> Self {
        FirstAttempt { watched, ..self }
    }

    pub fn cancelled_by(self, cancel: &CancellationToken) -> Self {
        let cancelled = cancel.is_cancelled();
        FirstAttempt { cancelled, ..self }
    }

    /// Made for the waiter of `ticket`.
    pub fn waiting_as(self, ticket: &Ticket) -> Self {
        let view = ticket.view();
        FirstAttempt {
            subscribed: view.subscribed,
            turn_from_others: view.turn_from_others,
            ..self
        }
    }

    /// Made in `mode`: its cancellation, and the ticket of a waiter's plan.
    pub fn in_mode(self, mode: &Mode) -> Self {
        let attempt = self.cancelled_by(&mode.cancel);
        match mode.plan.ticket() {
            Some(ticket) => attempt.waiting_as(ticket),
            // Not joined: its connection remembers nothing of the lock (acquire.rs `place`).
            None => attempt,
        }
    }

    /// Whether the caller's connection may carry it; otherwise it goes through the runtime.
    pub fn carried(&self) -> bool {
        !self.fair
            && (self.scripts_ready || !self.watched)
            && !self.cancelled
            && !self.subscribed
            && !self.turn_from_others
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
