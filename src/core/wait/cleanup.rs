//! What a waiter leaves to do when it stops waiting, for the operations layer to carry out:
//! each sends a script (or an UNSUBSCRIBE), and this layer sends nothing.

use crate::core::basics::lease::Lease;

pub enum Cleanup {
    /// A lock handed to a waiter that left before taking it: freed as a release would (to
    /// the next waiter of ours, or waking the next connection).
    FreeGranted(Lease),
    /// A syncguard lock whose caller never had it: freed by its lockId (the lease's token)
    /// and the index key naming it.
    FreeById { lease: Lease, index_key: Vec<u8> },
    /// A wake nobody here will use: handed to the next connection in the lock's queue.
    PassWake(Vec<u8>),
    /// A fair waiter (`seq` on this connection) gave up its place in the lock's line.
    LeaveLine { lock_key: Vec<u8>, seq: u64 },
    /// This connection is queued for a lock nobody here waits for any more: it leaves.
    LeaveQueue(Vec<u8>),
    /// Many locks are still subscribed to with nobody waiting for them: unsubscribe.
    DropIdle,
}

/// Carries cleanups out, in the background (the store of the wake table's connection).
pub trait Cleaner: Send + Sync {
    fn clean_up(&self, cleanup: Cleanup);
}
