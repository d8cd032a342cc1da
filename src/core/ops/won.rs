//! What becomes of a lease won for an owner (see wait/owner.rs): handed to the caller, or,
//! when the owner ended while the lock was being won, released instead, since nobody is
//! left to release it.

use super::lock::Locker;
use super::store::Store;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use std::sync::Arc;

pub enum Won {
    Deliver(Lease),
    Orphaned(Orphan),
}

/// A lease whose owner ended: it must be released (`release`), and its caller answered
/// with the error that gives back.
#[must_use]
pub struct Orphan {
    store: Arc<Store>,
    lease: Lease,
}

impl Orphan {
    /// Frees the lock in the background (to the next waiter of ours, or waking the next
    /// connection); the caller's answer is that it was aborted. Starts a task: the caller
    /// must be inside a runtime, or one must be installed (see basics/background.rs).
    pub fn release(self) -> LockError {
        self.store.release_orphan(self.lease);
        LockError::Aborted
    }
}

/// What becomes of `lease`, just won by `locker`.
pub fn won(locker: &Locker, lease: Lease) -> Won {
    if locker.owner().is_gone() {
        let store = locker.store().clone();
        return Won::Orphaned(Orphan { store, lease });
    }
    Won::Deliver(lease)
}

#[cfg(test)]
#[path = "won_tests.rs"]
mod tests;
