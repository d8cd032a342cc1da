//! Releases within a tenure (wait/tenure.rs), on a store that grants across processes: the
//! lock is freed quietly, with no grant to the ring, for this process to take straight back;
//! one it does not take back is kicked to the ring's head shortly after.

use super::release::GRANT_CLAIM;
use super::store::{Store, BACKGROUND_TIMEOUT};
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::lease::Lease;
use crate::core::basics::token;
use crate::core::proto::ring::ReleaseGrant;
use crate::core::wait::tenure::KickStep;
use std::sync::Arc;
use std::time::Duration;

impl Store {
    /// Whether our release of `lease` frees the lock quietly, within our tenure; one that
    /// does not ends the tenure. Never for a grant passed on unconfirmed (nobody here wanted
    /// it), nor on a store that does not grant.
    pub(crate) fn release_quietly(&self, lease: &Lease) -> bool {
        self.grants() && !lease.is_claim_only() && self.wakes().release_quietly(&lease.redis_key)
    }

    /// This process won the lock at `lock_key` by an attempt: its tenure starts, or goes on
    /// after a quiet release.
    pub(crate) fn acquired(&self, lock_key: &[u8]) {
        if self.grants() {
            self.wakes().acquired(lock_key);
        }
    }

    /// A quiet release of ours freed the lock at `lock_key` (or may have: it went unanswered),
    /// whose fence counter is kept `fence_retention_ms`: unless this process takes the lock
    /// back within `KICK_AFTER`, it is granted to the ring's head.
    pub(crate) fn freed_quietly(&self, lock_key: &[u8], fence_retention_ms: u64) {
        if !self.wakes().freed_quietly(lock_key, fence_retention_ms) {
            return;
        }
        let lock_key = lock_key.to_vec();
        self.in_background(move |store| store.kick_when_due(lock_key));
    }

    /// A grant of the lock at `lock_key` was taken here, read on the runtime's thread: the
    /// kicker of its tenure starts now, so that the quiet releases that follow on the
    /// caller's thread need not wake this one.
    pub(crate) fn tenure_began(&self, lock_key: Vec<u8>) {
        if self.wakes().arm_kicker(&lock_key) {
            self.in_background(move |store| store.kick_when_due(lock_key));
        }
    }

    /// A release of ours granted a lock to the ring, which ended its tenure: its kicker ends
    /// now, on this thread, rather than wake it at its timer; so does the confirmation of the
    /// grant that began the tenure, released long since (ops/claims.rs).
    pub(crate) fn tenure_ended(&self) {
        self.tenures_ended.notify_waiters();
        self.wakes().lends().recheck_grants();
    }

    /// The task that kicks a lock freed quietly once it is due, unless it was taken back.
    async fn kick_when_due(self: Arc<Self>, lock_key: Vec<u8>) {
        loop {
            // Listening before the look: a tenure ended after it still cuts the wait short.
            let ended = self.tenures_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            match self.wakes().kick_step(&lock_key) {
                (KickStep::Wait(until), _) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(until.into()) => {}
                        () = ended => {}
                    }
                }
                (KickStep::Kick, window) => {
                    return self.kick(&lock_key, window, BACKGROUND_TIMEOUT).await;
                }
                (KickStep::Done, _) => return,
            }
        }
    }

    /// Grants the lock at `lock_key`, if it is free, to the next connection of its ring that
    /// listens, within `bound`; its fence counter is kept `fence_retention_ms` should the
    /// grant draw fences. A failure leaves the lock to the ring's polls.
    pub(crate) async fn kick(&self, lock_key: &[u8], fence_retention_ms: u64, bound: Duration) {
        let grant = token::new_token();
        let kick = ReleaseGrant::kick(lock_key, &grant, GRANT_CLAIM, self.id(), fence_retention_ms);
        let _ignored = self.backend().run(&kick, bound).await;
    }
}
