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

/// Before the release is sent: whether waiters of this connection wait for the lock key
/// `expect`ed (they are woken here, not by the script).
pub(super) fn ours_wait(store: &Store, expect: Option<&[u8]>) -> bool {
    expect.is_some_and(|lock_key| store.wakes().waiters_at_release(lock_key))
}

/// Once the release answered: waiters of this process are woken now; the lock key whose
/// queue still needs its wake (a key other than the one expected) is returned, for one more
/// call (best effort: a waiter's backoff is the safety net).
pub(super) fn answered(
    store: &Store,
    expect: Option<&[u8]>,
    ours_wait: bool,
    released: &ReleasedById,
) -> Option<Vec<u8>> {
    let freed = released.freed()?;
    let wakes = store.wakes();
    let expected = expect == Some(freed);
    if expected {
        // Counted before the script too (see wait/releases.rs); a count made only before
        // misses the waiter whose mark came after it and whose attempt came before the
        // script freed the lock.
        wakes.released(freed);
    }
    if expected && !ours_wait {
        return None;
    }
    // `ours_wait` was read for the key expected, which is not always the key freed.
    let ours = if expected {
        ours_wait
    } else {
        wakes.waiters_at_release(freed)
    };
    if ours {
        wakes.wake_local(&wake::channel(freed));
        return None;
    }
    Some(freed.to_vec())
}

/// The release by lockId, then the wake its script could not make.
pub(super) async fn release_by_id(
    store: &Arc<Store>,
    index_key: &[u8],
    lock_id: &str,
    expect: Option<&[u8]>,
    bound: Duration,
) -> Result<ReleasedById, LockError> {
    let ours_wait = ours_wait(store, expect);
    let op = ReleaseById {
        index_key,
        lock_id,
        expect,
        ours_wait,
    };
    let released = store.backend().release_by_id(&op, bound).await?;
    if let Some(lock_key) = answered(store, expect, ours_wait, &released) {
        let _best_effort = store
            .backend()
            .run(
                &WakeNext {
                    lock_key: &lock_key,
                },
                bound,
            )
            .await;
    }
    Ok(released)
}
