//! Delivering a lease just won to its caller: handed over (`Won::Deliver`, then `Unclaimed`
//! until the caller has it), or, when the owner (see wait/owner.rs) ended while the lock was
//! being won, freed instead (`OwnerlessLease`), since nobody is left to release it.

use super::lock::Locker;
use super::store::Store;
use crate::core::basics::background::spawn;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::wait::cleanup::{Cleaner, Cleanup};
use std::sync::Arc;

pub enum Won {
    Deliver(Lease),
    Ownerless(OwnerlessLease),
}

/// A lease whose owner ended: it must be freed (`free`), and its caller answered
/// with the error that gives back.
#[must_use]
pub struct OwnerlessLease {
    store: Arc<Store>,
    lease: Lease,
}

impl OwnerlessLease {
    /// Frees the lock in the background (to the next waiter of ours, or waking the next
    /// connection); the caller's answer is that it was aborted. Starts a task: the caller
    /// must be inside a runtime, or one must be installed (see basics/background.rs).
    pub fn free(self) -> LockError {
        self.store.release_orphan(self.lease);
        LockError::Aborted
    }
}

/// A plain lease on its way to its caller, which nothing else tracks (no watchdog keeps it):
/// if the caller's environment goes away before the caller has it (its answer never
/// delivered, or delivered to a thread that can no longer run it), nobody could release
/// it, so whoever failed to deliver it frees it here instead of leaving it to its TTL.
/// Dropped once delivered.
/// Boxed: it rides in every answer of a plain acquisition, which stays a few words.
pub struct Unclaimed(Box<UnclaimedLease>);

struct UnclaimedLease {
    ownerless: OwnerlessLease,
    /// Lent on handover (see fast/handoff.rs): Redis gets the lease only once its
    /// handover runs, which may still be on its way.
    lent: bool,
    /// A syncguard lock's index key: such a lock is freed by its lockId (its record is
    /// JSON, which our own release script would not recognise as its token).
    index_key: Option<Vec<u8>>,
}

impl Unclaimed {
    pub fn new(locker: &Locker, lease: Lease) -> Self {
        Self::of(locker, lease, false)
    }

    /// A lease lent to its caller before Redis ran its handover (see wait/lent.rs).
    pub fn lent(locker: &Locker, lease: Lease) -> Self {
        Self::of(locker, lease, true)
    }

    /// A syncguard lock won under the lockId its `index_key` names.
    pub fn syncguard(locker: &Locker, lease: Lease, index_key: Vec<u8>) -> Self {
        let Unclaimed(mut unclaimed) = Self::of(locker, lease, false);
        unclaimed.index_key = Some(index_key);
        Unclaimed(unclaimed)
    }

    fn of(locker: &Locker, lease: Lease, lent: bool) -> Self {
        let store = locker.store().clone();
        let ownerless = OwnerlessLease { store, lease };
        let index_key = None;
        Unclaimed(Box::new(UnclaimedLease {
            ownerless,
            lent,
            index_key,
        }))
    }

    /// Frees the lock in the background, as `OwnerlessLease::free` does. A lent lease only once
    /// its handover was answered (or can no longer matter, its lease over): the handover
    /// goes on its JS thread's connection, or again through the runtime as that thread
    /// ends, and a release reaching Redis before it would find the lender's token and free
    /// nothing, leaving the handover to give the lock to nobody for its whole TTL. Confirmed,
    /// the handover ran; refused, it never will (handoff.lua moves the lock only from the
    /// lender's token). Only one left unanswered within its bound may still run after this
    /// release, which then frees nothing: the lock is left to its TTL, as before.
    pub fn free(self) {
        let UnclaimedLease {
            ownerless,
            lent,
            index_key,
        } = *self.0;
        let OwnerlessLease { store, lease } = ownerless;
        if let Some(index_key) = index_key {
            store.clean_up(Cleanup::FreeById { lease, index_key });
            return;
        }
        if !lent {
            store.release_orphan(lease);
            return;
        }
        spawn(async move {
            let lends = store.wakes().lends();
            // A grant needs no confirmation to be freed.
            lends.forget_grant(&lease.token);
            lends.settled(&lease.token, lease.remaining()).await;
            // Nobody will ask for its answer.
            lends.forget(&lease.token);
            store.release_orphan(lease);
        });
    }
}

/// What becomes of `lease`, just won by `locker`.
pub fn won(locker: &Locker, lease: Lease) -> Won {
    if locker.owner().is_gone() {
        let store = locker.store().clone();
        return Won::Ownerless(OwnerlessLease { store, lease });
    }
    Won::Deliver(lease)
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
