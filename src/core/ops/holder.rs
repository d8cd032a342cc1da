//! A holder's own calls through the runtime (release, extend). One that started on a lent
//! lease (see fast/handoff.rs) goes after its handover, which may still be in flight on
//! the caller's connection or have moved to the runtime with a broken one: sent before it,
//! the call could reach Redis first and find the lock the releaser's.

use super::lock::Locker;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use std::time::Duration;

async fn after_handover(locker: &Locker, lease: &Lease) {
    let lends = locker.store().wakes().lends();
    lends.settled(&lease.token, locker.command_timeout()).await;
}

/// Deletes the lock if it is still ours; the holder's lent state is dropped after, since
/// its handle asks no more.
pub async fn release(locker: &Locker, lease: &Lease) -> Result<bool, LockError> {
    after_handover(locker, lease).await;
    let released = locker.release(lease).await;
    locker.store().wakes().lends().forget(&lease.token);
    released
}

/// Extends the lock if it is still ours; a grant whose confirmation waits has it sent first
/// (it sets our TTL, which would otherwise land after this extend's).
pub async fn extend(locker: &Locker, lease: &Lease, extra: Duration) -> Result<(), LockError> {
    locker.store().wakes().lends().hurry(&lease.token);
    after_handover(locker, lease).await;
    locker.extend(lease, extra).await
}

#[cfg(test)]
#[path = "holder_tests.rs"]
mod tests;
