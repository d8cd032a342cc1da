//! A grant from another process's release holds for its claim only (release_grant.lua): a
//! grantee that died or stopped keeps the lock no longer than that. The waiter that takes it
//! confirms it with its own TTL: before its caller has it, since a handle counts on the
//! deadline it is given; or, for a DistributedLock handle that asks for the confirmation
//! later (see wait/lent.rs), sent a third of the claim after the grant, off its way, the
//! handle counting on the claim until it answers. A section shorter than that sends none:
//! its release (which checks our token as a confirmation would) makes it needless.

use super::lock::Locker;
use super::release::GRANT_CLAIM;
use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::background::spawn;
use crate::core::basics::clock::{self, Stamp};
use crate::core::basics::lease::Lease;
use crate::core::proto::refresh::{Refresh, RefreshBatch};
use crate::core::wait::lent::Lent;
use std::sync::Arc;
use std::time::Duration;

/// What a grant's confirmation came to.
enum Confirm {
    /// Redis took our TTL for it, asked at this send stamp.
    Kept(Stamp),
    /// The grant was lost meanwhile: its claim ran out, and it is someone else's or free.
    Lost,
    /// No answer: it may still be ours, for its claim.
    Unknown,
}

/// Sends `lease`'s confirmation: our TTL for the grant, if it is still ours.
async fn confirm(store: &Store, lease: &Lease, window_ms: u64, bound: Duration) -> Confirm {
    let ttl_ms = u32::try_from(lease.ttl().as_millis()).unwrap_or(u32::MAX);
    let refresh = Refresh {
        key: &lease.redis_key,
        token: lease.token.as_bytes(),
        ttl_ms,
        fence_retention_ms: window_ms,
        pair: None,
    };
    let batch = RefreshBatch::new(&[refresh], &[]);
    let sent = Stamp::now();
    match store.backend().refresh(&batch, bound).await.first() {
        Some(Some(true)) => Confirm::Kept(sent),
        Some(Some(false)) => Confirm::Lost,
        _ => Confirm::Unknown,
    }
}

impl Locker {
    /// `lease` as its waiter (`name`, the key as the user gave it) keeps it: a lock handed
    /// over in this process as it is; a grant once Redis took our TTL for it. `None` when
    /// the grant was lost meanwhile (its claim ran out, and it is someone else's or free);
    /// without an answer it is freed in the background, for the waiter to try on its own.
    pub(super) async fn confirm_grant(&self, mut lease: Lease, name: &str) -> Option<Lease> {
        if !lease.is_claim_only() {
            return Some(lease);
        }
        if lease.key.is_empty() {
            name.clone_into(&mut lease.key);
        }
        let (window, bound) = (self.fence_retention_ms(), self.command_timeout());
        match confirm(self.store(), &lease, window, bound).await {
            Confirm::Kept(sent) => {
                lease.extended(sent, lease.ttl());
                Some(lease)
            }
            Confirm::Lost => None,
            Confirm::Unknown => {
                self.store().release_orphan(lease);
                None
            }
        }
    }

    /// A grant `lease` (claim only) whose caller starts on it now: its confirmation is sent
    /// once a third of the claim has passed since the anchor (at once when its handle
    /// extends it), unless the handle released it first, and answered to the handle when it
    /// comes (wait/lent.rs: our own deadline, or nothing held). Until then the handle counts
    /// on the claim, which Redis set no earlier than the lease's anchor: never later than
    /// Redis. Two thirds of the claim are left for the confirmation's round trip.
    pub(super) fn confirm_grant_later(&self, mut lease: Lease, name: &str) -> Lease {
        if lease.key.is_empty() {
            name.clone_into(&mut lease.key);
        }
        let store = self.store().clone();
        let lends_until = lease.deadline() + lease.ttl();
        store
            .wakes()
            .lends()
            .lend_grant(lease.token.clone(), lends_until);
        let (window, bound) = (self.fence_retention_ms(), self.command_timeout());
        let confirming = Lease::granted(
            lease.redis_key.clone(),
            lease.token.clone(),
            lease.fence,
            (Some(lease.sent()), GRANT_CLAIM),
            lease.ttl(),
        );
        let due = lease.sent().at + CONFIRM_AFTER;
        spawn(confirm_in_background(
            store,
            confirming,
            due,
            (window, bound),
        ));
        lease
    }
}

/// How long after its anchor a grant whose caller started on it is confirmed: a third of
/// the claim.
pub const CONFIRM_AFTER: Duration = Duration::from_millis(GRANT_CLAIM.as_millis() as u64 / 3);

/// Confirms, at `due` or once hurried, a grant its caller started on, unless the caller
/// released it first, and tells the caller's handle how it went.
async fn confirm_in_background(
    store: Arc<Store>,
    lease: Lease,
    due: std::time::Instant,
    (window_ms, bound): (u64, Duration),
) {
    let lends = store.wakes().lends();
    loop {
        // Made before the look: a hurry between the two still wakes this task.
        let hurried = lends.hurried();
        match lends.confirm_wanted(&lease.token) {
            None => return,
            Some(true) => break,
            Some(false) => {}
        }
        tokio::select! {
            () = tokio::time::sleep_until(due.into()) => break,
            () = hurried => {}
        }
    }
    // Released meanwhile: the release checked our token, as the confirmation would have.
    if lends.confirm_wanted(&lease.token).is_none() {
        return;
    }
    let state = match confirm(&store, &lease, window_ms, bound).await {
        Confirm::Kept(sent) => Lent::Confirmed(sent.at + clock::validity(lease.ttl())),
        Confirm::Lost => Lent::Failed,
        // Perhaps still ours for its claim, and its caller already runs on it: freeing it
        // would let another holder in before the claim deadline the handle counts on. The
        // handle is told it holds nothing; the claim runs out on its own (or the handle's
        // release frees it), as a lent lease whose answer is unknown is left to its TTL.
        Confirm::Unknown => Lent::Failed,
    };
    store.wakes().lends().settle(&lease.token, state);
}
