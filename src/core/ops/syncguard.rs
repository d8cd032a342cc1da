//! syncguard's lock operations on our engine: an attempt at its layout, and its release,
//! extend, isLocked and lookups by lockId or key. The decisions are its scripts' (proto/
//! syncguard.rs); what is ours is the wake: a release wakes the lock's next waiter, in the
//! same script when the caller named the lock key it expected, else with one more call.

use super::acquire::{Attempts, Place, Plan, Start};
use super::attempt::Attempt;
use super::key_scheme::{KeyScheme, SyncguardKeys};
use super::lock::Locker;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::pace::Pace;
use crate::core::proto::acquire::{AcquireAttempt, Acquired, AttemptForm, Layout};
use crate::core::proto::syncguard::{ExtendById, ReleasedById, SyncguardIsLocked, SyncguardLookup};
use crate::core::wait::releases::Mark;
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// A syncguard lock won: what its caller reports (the lockId and keys are the caller's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncguardWon {
    pub fence: u64,
    /// The record's expiry, by the server's clock (ms).
    pub expires_at_ms: u64,
}

impl SyncguardWon {
    pub fn of(lease: &Lease) -> Self {
        SyncguardWon {
            fence: lease.fence,
            expires_at_ms: lease.expires_at_ms(),
        }
    }
}

/// The attempt at syncguard's layout for `keys`, wanting the lock for `ttl`, first sent at
/// `sent`.
pub(crate) fn attempt_op(keys: &SyncguardKeys, ttl: Duration, sent: Instant) -> AcquireAttempt<'_> {
    AcquireAttempt {
        lock_key: &keys.lock_key,
        fence_key: &keys.fence_key,
        token: &keys.lock_id,
        ttl,
        // syncguard's counters never expire.
        fence_retention_ms: 0,
        keep_fences: false,
        fences_known_kept: false,
        layout: Layout::Syncguard {
            index_key: &keys.index_key,
            stored_key: &keys.stored_key,
            user_key: &keys.user_key,
        },
        form: AttemptForm::Script,
        sent,
    }
}

/// What an attempt at syncguard's layout, sent at `sent`, answered: the lock won (with the
/// record's expiry by the server's clock), or held.
pub(super) fn attempt_of(
    keys: &SyncguardKeys,
    ttl: Duration,
    sent: Stamp,
    answer: Acquired,
) -> Result<Attempt, LockError> {
    match answer {
        Acquired::Won {
            fence,
            set_at: Some(expiry),
        } => {
            let (key, lock_key) = (keys.user_key.clone(), keys.lock_key.clone());
            let lease = Lease::new(key, lock_key, keys.lock_id.clone(), fence, sent, ttl);
            Ok(Attempt::Acquired(lease.stated_expiry(expiry)))
        }
        Acquired::Held { ttl } => Ok(Attempt::Held { ttl }),
        // sg_acquire.lua always states the expiry of what it won, and never sets a lock it
        // could not fence.
        Acquired::Won { set_at: None, .. }
        | Acquired::SetWithoutFence { .. }
        | Acquired::Refused => Err(LockError::Redis(
            "syncguard's acquire answered no expiry or no fence".into(),
        )),
    }
}

impl Locker {
    /// One attempt at syncguard's layout with the call's lockId: sent again after a dropped
    /// connection, the script finds the lock its own and answers won.
    pub(super) async fn attempt_syncguard(
        &self,
        keys: &SyncguardKeys,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Attempt, LockError> {
        // Stamped after the gate (see `attempt_bounded`).
        let key = || Cow::Borrowed(&keys.lock_key[..]);
        self.store().pass_gate(key, timeout).await?;
        let sent = Stamp::now();
        let op = attempt_op(keys, ttl, sent.at);
        let answer = self.store().backend().acquire(&op, timeout).await?;
        attempt_of(keys, ttl, sent, answer)
    }

    /// syncguard's `backend.acquire`: one attempt, `None` when the lock is held. A lock won
    /// after the owner went away is released at once (`pursue` decides, as for every API).
    pub async fn sg_acquire(
        &self,
        keys: &SyncguardKeys,
        ttl: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let scheme = KeyScheme::Syncguard(keys);
        let never = Cancel::never();
        (self.pursue_in(Plan::once(), scheme, ttl, &never, Start::Attempt)).await
    }

    /// Frees a syncguard lock an acquisition won after its caller gave up.
    pub(super) async fn sg_release_won(
        &self,
        keys: &SyncguardKeys,
        lease: &Lease,
    ) -> Result<ReleasedById, LockError> {
        let (index_key, expect) = (&keys.index_key, Some(&keys.lock_key[..]));
        let bound = self.release_bound(lease);
        super::release_by_id::release_by_id(self.store(), index_key, &keys.lock_id, expect, bound)
            .await
    }

    /// syncguard's `lock()` acquisition: attempts paced as `pace` says from `started`, each
    /// with the call's lockId; meanwhile a release of the lock (made through this package)
    /// wakes it for an extra attempt. Ends with the lock, or `LockError::GaveUp`.
    pub async fn sg_lock(
        &self,
        keys: &SyncguardKeys,
        ttl: Duration,
        pace: Pace,
        started: Instant,
        cancel: &Cancel,
    ) -> Result<Lease, LockError> {
        let mark = self.mark_at(&keys.lock_key);
        (self.sg_lock_from(keys, ttl, (pace, started), cancel, mark, Start::Attempt)).await
    }

    /// `lock()`'s acquisition from `start`: its own first attempt, or after one made on the
    /// caller's own lane found the lock held (its first pause then due). `mark` was read
    /// before any attempt, so a release of ours in between ends that pause at once.
    pub async fn sg_lock_from(
        &self,
        keys: &SyncguardKeys,
        ttl: Duration,
        (pace, started): (Pace, Instant),
        cancel: &Cancel,
        mark: Mark,
        start: Start,
    ) -> Result<Lease, LockError> {
        let plan = Plan {
            attempts: Attempts::Paced { pace, started },
            place: Place::Later {
                caller: None,
                mark: Some(mark),
            },
        };
        let scheme = KeyScheme::Syncguard(keys);
        let won = self.pursue_in(plan, scheme, ttl, cancel, start);
        won.await?.ok_or_else(|| {
            LockError::Internal("a paced acquisition ended without saying why".into())
        })
    }

    /// syncguard's `backend.release({ lockId })`. `expect`, the lock key the caller believes
    /// the lockId holds, lets the script wake that lock's next waiter itself.
    pub async fn sg_release(
        &self,
        index_key: &[u8],
        lock_id: &str,
        expect: Option<&[u8]>,
    ) -> Result<ReleasedById, LockError> {
        super::release_by_id::release_by_id(
            self.store(),
            index_key,
            lock_id,
            expect,
            self.command_timeout(),
        )
        .await
    }

    /// syncguard's `backend.extend({ lockId, ttlMs })`: the record's new expiry (server ms),
    /// `None` when the lock is not, or no longer, this lockId's.
    pub async fn sg_extend(
        &self,
        index_key: &[u8],
        lock_id: &str,
        ttl: Duration,
    ) -> Result<Option<i64>, LockError> {
        let op = ExtendById {
            index_key,
            lock_id,
            ttl,
        };
        let extended = (self.store().backend())
            .extend_by_id(&op, self.command_timeout())
            .await;
        if matches!(extended, Ok(Some(_))) {
            self.stats().refreshed();
        }
        extended
    }

    /// syncguard's `backend.isLocked({ key })`; with `cleanup`, a record expired past its
    /// guard is deleted with the index key named from `key_prefix`.
    pub async fn sg_is_locked(
        &self,
        lock_key: &[u8],
        key_prefix: &[u8],
        cleanup: bool,
    ) -> Result<bool, LockError> {
        let op = SyncguardIsLocked {
            lock_key,
            key_prefix,
            cleanup,
        };
        self.store()
            .backend()
            .syncguard_is_locked(&op, self.command_timeout())
            .await
    }

    /// syncguard's `backend.lookup`: the live record's JSON, by key or by lockId.
    pub async fn sg_lookup(&self, by: &SyncguardLookup<'_>) -> Result<Option<Vec<u8>>, LockError> {
        (self.store().backend())
            .syncguard_lookup(by, self.command_timeout())
            .await
    }
}

#[cfg(test)]
#[path = "syncguard_tests.rs"]
mod tests;
