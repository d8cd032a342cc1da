//! Releasing a syncguard lock by its lockId (sg_release.lua), and the wake its script could
//! not make: the script wakes the next waiter only when the lock key it deleted is the one
//! its caller expected (only then can it name the queue and channel).

use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::error::LockError;
use crate::core::proto::queue::WakeNext;
use crate::core::proto::syncguard::{ReleaseById, ReleasedById};
use crate::core::wait::wake;
use std::sync::Arc;
use std::time::Duration;

/// The release by lockId, then the wake its script could not make: waiters of this process
/// are woken here; a lock key other than the one expected has its queue woken with one more
/// call (best effort: a waiter's backoff is the safety net).
pub(super) async fn release_by_id(
    store: &Arc<Store>,
    index_key: &[u8],
    lock_id: &str,
    expect: Option<&[u8]>,
    bound: Duration,
) -> Result<ReleasedById, LockError> {
    let wakes = store.wakes();
    let ours_wait = expect.is_some_and(|lock_key| wakes.waiters_at_release(lock_key));
    let op = ReleaseById {
        index_key,
        lock_id,
        expect,
        ours_wait,
    };
    let released = store.backend().run(&op, bound).await?;
    let Some(freed) = released.freed() else {
        return Ok(released);
    };
    let expected = expect == Some(freed);
    if expected {
        // Counted before the script too (see wait/releases.rs); a count made only before
        // misses the waiter whose mark came after it and whose attempt came before the
        // script freed the lock.
        wakes.released(freed);
    }
    if expected && !ours_wait {
        return Ok(released);
    }
    // `ours_wait` was read for the key expected, which is not always the key freed.
    let ours = if expected {
        ours_wait
    } else {
        wakes.waiters_at_release(freed)
    };
    if ours {
        wakes.wake_local(&wake::channel(freed));
    } else {
        let _best_effort = store
            .backend()
            .run(&WakeNext { lock_key: freed }, bound)
            .await;
    }
    Ok(released)
}
