//! Which transport a call takes, decided here and nowhere else: the caller's own socket
//! (one round trip from its thread, see fast/mod.rs), the call run where the caller is
//! (`memory://`, whose keyspace is in the process), or the runtime's connection. The
//! runtime's way does what the other two cannot: it loads the scripts first, queues for
//! wakes, waits its turn behind waiters of the same connection, and goes after a holder's
//! own handover.

use super::fast::acquire::Mode;
use super::lock::Locker;
use super::store::Store;
use crate::core::backend::lock_store::{FastPath, LockStore};
use crate::core::basics::cancel::Cancel;
use crate::core::basics::lease::Lease;
use crate::core::wait::wake::Ticket;

/// The transport of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// The caller's own socket to the server.
    Socket,
    /// Run now on the caller's thread, on the embedded keyspace.
    Inline,
    /// One socket of the caller's per node of a Redlock, the call decided at the quorum.
    Quorum,
    /// The runtime's connection.
    Runtime,
}

/// What a call is, as far as its way depends on it.
pub enum RouteFacts<'a> {
    /// A first attempt at a lock.
    Attempt(FirstAttempt),
    /// A holder's own release or extend.
    Holder {
        locker: &'a Locker,
        lease: &'a Lease,
    },
    /// A call that may take any way (isLocked, a release that wakes nobody of ours).
    Any,
}

pub struct Route;

impl Route {
    /// The way a call on `store`'s connection goes. The caller may still find the way closed
    /// (its socket not open yet): the runtime's way then answers it.
    pub fn way(store: &Store, facts: RouteFacts<'_>) -> Way {
        match Route::outside(store) {
            Way::Runtime => Way::Runtime,
            way if facts.may_leave_runtime() => way,
            _ => Way::Runtime,
        }
    }

    /// The way `store` offers outside the runtime, as its `Caps` say: a socket of the
    /// caller's, the call inline, or none. A store whose fast path is routed by slot has
    /// no socket per slot yet, so its calls stay on the runtime.
    pub fn outside(store: &Store) -> Way {
        match store.backend().caps().fast_path {
            FastPath::Socket => Way::Socket,
            FastPath::Inline => Way::Inline,
            FastPath::Quorum => Way::Quorum,
            FastPath::SlotRouted | FastPath::None => Way::Runtime,
        }
    }
}

impl RouteFacts<'_> {
    fn may_leave_runtime(&self) -> bool {
        match self {
            RouteFacts::Attempt(first) => first.may_leave_runtime(),
            // Not while its own handover is in flight (the call must come after it), nor for
            // a lease known released (the runtime's call says so without asking Redis).
            RouteFacts::Holder { locker, lease } => {
                !lease.is_released() && !locker.store().wakes().lends().pending(&lease.token)
            }
            RouteFacts::Any => true,
        }
    }
}

/// What the way of a first attempt depends on.
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstAttempt {
    /// A fair lock's attempts go through its line (acquire_fair.lua), not a transaction.
    pub fair: bool,
    /// A watchdog is to keep the lock once won: its refreshes must be one round trip from
    /// the first, so the refresh script must be known loaded.
    pub watched: bool,
    pub scripts_ready: bool,
    /// The restart quarantine's gate is closed or unknown: only the runtime's connection
    /// asks Redis for it and waits for it (backend/quarantine.rs).
    pub gate_closed: bool,
    pub cancelled: bool,
    /// A waiter of ours is subscribed to the lock: the attempt must queue for its wakes
    /// (acquire_queued.lua).
    pub subscribed: bool,
    /// The waiter's turn comes from our own waiters (see `TicketView::turn_from_others`):
    /// an attempt of its own would jump their queue.
    pub turn_from_others: bool,
    /// A release of ours freed the lock quietly moments ago (see `TicketView::barging`): an
    /// attempt that only takes it back needs neither queue nor ring, and one that finds it
    /// held goes on waiting through the runtime, where the ring's grants come.
    pub barging: bool,
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
            gate_closed: !store.gate_open(),
            ..FirstAttempt::default()
        }
    }

    pub fn watched(self, watched: bool) -> Self {
        FirstAttempt { watched, ..self }
    }

    pub fn cancelled_by(self, cancel: &Cancel) -> Self {
        let cancelled = cancel.is_cancelled();
        FirstAttempt { cancelled, ..self }
    }

    /// Made for the waiter of `ticket`.
    pub fn waiting_as(self, ticket: &Ticket) -> Self {
        let view = ticket.view();
        FirstAttempt {
            subscribed: view.subscribed,
            turn_from_others: view.turn_from_others,
            barging: view.barging,
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

    fn may_leave_runtime(&self) -> bool {
        !self.fair
            && !self.gate_closed
            && (self.scripts_ready || !self.watched)
            && !self.cancelled
            && (!self.subscribed || self.barging)
            && !self.turn_from_others
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
