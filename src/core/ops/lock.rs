//! `Locker`: the locks under one key prefix on one store, and the operations on a lock held
//! or looked at: release, extend, the held check and the fenced write. One attempt at a lock
//! is attempt.rs's, an acquisition from first attempt to end acquire.rs's.

use super::key_scheme::KeyScheme;
use super::store::Store;
use crate::core::backend::boundary::Backend;
use crate::core::backend::lock_store::{LockStore, ScriptsFor};
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::stats::CallCounters;
use crate::core::basics::token;
pub use crate::core::proto::acquire::fence_of;
pub use crate::core::proto::acquire::AttemptForm;
use crate::core::proto::extend::Extend;
use crate::core::proto::fenced_set::FencedSet;
use crate::core::proto::read::{Exists, Pttl};
use crate::core::wait::owner::Owner;
use crate::core::wait::wake::{Caller, Ticket};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slack on bounds derived from a deadline, so a call that starts just before it can finish.
/// Half the 50 ms we promise: the rest is for the hop back to the JS thread.
pub(super) const GRACE: Duration = Duration::from_millis(25);

/// Locks under one key prefix, on one shared connection.
pub struct Locker {
    store: Arc<Store>,
    prefix: Vec<u8>,
    command_timeout: Duration,
    /// Waiters get the lock in the order they asked for it (see acquire_fair.lua).
    fair: bool,
    /// How long a lock's fence counter outlives the lock, in ms; 0 forever (see fence.lua).
    fence_retention_ms: u64,
    /// On whose behalf its calls run: once it is gone, waits end and what they win is
    /// released (see owner.rs).
    owner: Owner,
    /// What its calls have done, counted where each is decided (`stats()` of its API).
    stats: Arc<CallCounters>,
}

impl Locker {
    pub fn new(store: Arc<Store>, prefix: impl Into<Vec<u8>>, command_timeout: Duration) -> Self {
        store.backend().heed_command_timeout(command_timeout);
        Locker {
            store,
            prefix: prefix.into(),
            command_timeout,
            fair: false,
            fence_retention_ms: token::FENCE_RETENTION_MS,
            owner: Owner::new(),
            stats: Arc::default(),
        }
    }

    /// Counts into `stats`: an API made of several lockers counts them as one.
    pub fn counted_in(mut self, stats: Arc<CallCounters>) -> Self {
        self.stats = stats;
        self
    }

    pub fn stats(&self) -> &Arc<CallCounters> {
        &self.stats
    }

    /// Counts its calls only when `on` (the API's `stats` option).
    pub fn counting(self, on: bool) -> Self {
        self.counted_in(Arc::new(CallCounters::new(on)))
    }

    /// Runs every call of this locker on behalf of `owner`.
    pub fn owned_by(mut self, owner: Owner) -> Self {
        self.owner = owner;
        self
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Makes every lock of this locker fair: its waiters line up in Redis, a release wakes
    /// the first in line, and no attempt (a waiter's or a plain one) gets ahead of the line.
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    pub fn is_fair(&self) -> bool {
        self.fair
    }

    /// Keeps each lock's fence counter `ms` past the lock (0: forever; see fence.lua).
    pub fn fence_retention(mut self, ms: u64) -> Self {
        self.fence_retention_ms = ms;
        self
    }

    pub fn fence_retention_ms(&self) -> u64 {
        self.fence_retention_ms
    }

    /// What every lock key of this locker starts with.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    pub fn redis_key(&self, key: &str) -> Vec<u8> {
        let mut full = Vec::with_capacity(self.prefix.len() + key.len());
        full.extend_from_slice(&self.prefix);
        full.extend_from_slice(key.as_bytes());
        full
    }

    /// The lock key `scheme` names in Redis, by which its waiters are known.
    pub fn scheme_key<'k>(&self, scheme: &KeyScheme<'k>) -> Cow<'k, [u8]> {
        match scheme {
            KeyScheme::Ours(key) => Cow::Owned(self.redis_key(key)),
            KeyScheme::Syncguard(keys) => Cow::Borrowed(&keys.lock_key),
        }
    }

    /// The refresh target of a lease: its key holds the token, nothing beside it. Batched
    /// with others (not punctual): DistributedLock's `autoRefresh` has no original schedule.
    pub fn target(&self, lease: &Lease, every: Duration) -> super::watched::Target {
        super::watched::Target {
            key: lease.redis_key.clone(),
            name_at: self.prefix.len(),
            token: lease.token.clone(),
            pair: None,
            ttl: lease.ttl(),
            every,
            punctual: false,
            fence_retention_ms: self.fence_retention_ms,
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Deletes the lock if it is still ours, or hands it to a waiter of this process (see
    /// release.rs). Releasing twice, or after expiry, is a no-op; the answer says whether
    /// Redis still had our lock.
    pub async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let bound = self.release_bound(lease);
        if self.fair {
            return super::release::release_fair(&self.store, lease, bound).await;
        }
        super::release::release(&self.store, lease, bound, Some(self.fence_retention_ms)).await
    }

    /// The bound of a release sent elsewhere (written by `write_release`). `None` when it
    /// must go through `release`: already released, or waiters of this process are to be
    /// woken by it. On a store that grants, only a release within our tenure is sent
    /// elsewhere (it frees the lock quietly, see ops/tenure.rs).
    pub fn release_request(&self, lease: &Lease) -> Option<Duration> {
        let wakes = self.store().wakes();
        // A store that grants decides on the runtime's connection, whose pushes bring grants.
        if self.is_fair()
            || lease.is_released()
            || wakes.waiters_at_release(&lease.redis_key)
            || (self.store().grants() && !self.store().release_quietly(lease))
        {
            return None;
        }
        Some(self.release_bound(lease))
    }

    /// Adds `extra` to the lock's remaining TTL, if the lock is still ours.
    pub async fn extend(&self, lease: &Lease, extra: Duration) -> Result<(), LockError> {
        if lease.is_released() {
            return Err(LockError::NotHeld {
                key: lease.key.clone(),
            });
        }
        (self.store)
            .ensure_scripts(self.bound_for(lease), ScriptsFor::Held)
            .await?;
        let sent = Stamp::now();
        let extend = Self::extend_op(lease, extra);
        let new_ttl = self
            .store
            .backend()
            .extend(&extend, self.bound_for(lease))
            .await?;
        self.extended(lease, sent, new_ttl)
    }

    pub(crate) fn extend_op(lease: &Lease, extra: Duration) -> Extend<'_> {
        Extend {
            lock_key: &lease.redis_key,
            token: &lease.token,
            extra,
        }
    }

    /// What extend's answer (the new TTL, `None` when not ours) means for `lease`, sent at
    /// `sent`, wherever it was carried.
    pub(crate) fn extended(
        &self,
        lease: &Lease,
        sent: Stamp,
        new_ttl: Option<Duration>,
    ) -> Result<(), LockError> {
        let Some(new_ttl) = new_ttl else {
            lease.mark_released();
            return Err(LockError::NotHeld {
                key: lease.key.clone(),
            });
        };
        lease.extended(sent, new_ttl);
        self.stats.refreshed();
        Ok(())
    }

    /// Queues a waiter (wanting `key` for `ttl`, for `caller`) for its releases.
    pub fn join(&self, key: &str, ttl: Duration, caller: Option<Caller>) -> Ticket {
        self.join_at(&self.redis_key(key), ttl, caller)
    }

    /// Queues a waiter for the releases of the lock at `lock_key`.
    pub(super) fn join_at(&self, lock_key: &[u8], ttl: Duration, caller: Option<Caller>) -> Ticket {
        let wakes = self.store.wakes();
        let owner = Some(self.owner.clone());
        if self.fair {
            return wakes.join_fair(lock_key, ttl, owner);
        }
        wakes.join_as(lock_key, ttl, (caller, Some(self.stats.clone())), owner)
    }

    /// Waiting on a release or extend past the lock's own validity helps nobody: by then the
    /// lock has expired either way.
    pub(crate) fn bound_for(&self, lease: &Lease) -> Duration {
        self.command_timeout.min(lease.remaining() + GRACE)
    }

    /// A release's bound: as `bound_for` on one server, whose copy of the lock ends with the
    /// lease. A Redlock's nodes may keep our token past it (one that took it late, or an
    /// extend that reached it), and a release must still delete it there; a node slower
    /// than the lease's time left is no reason to call the nodes unreachable either.
    pub(crate) fn release_bound(&self, lease: &Lease) -> Duration {
        match self.store.backend() {
            Backend::Redlock(_) => self.command_timeout,
            _ => self.bound_for(lease),
        }
    }

    /// Writes `value` to the hash at `redis_key` unless a higher fence already wrote there.
    pub async fn fenced_set(
        &self,
        redis_key: &[u8],
        value: &str,
        fence: &str,
    ) -> Result<bool, LockError> {
        if fence.len() != 15 || !fence.bytes().all(|b| b.is_ascii_digit()) {
            return Err(LockError::invalid_range(
                "fence",
                "fence must be a fencing token: 15 decimal digits, as handle.fence gives it",
            ));
        }
        let set = FencedSet {
            key: redis_key,
            value,
            fence,
        };
        self.store
            .backend()
            .fenced_write(&set, self.command_timeout)
            .await
    }

    /// How long `key`'s holder still has, when Redis tells it before `deadline` (with a
    /// little grace): `None` when the lock is free, has no TTL, or the answer did not come
    /// (a poll is the safety net).
    pub(super) async fn holder_ttl(&self, lock_key: &[u8], deadline: Instant) -> Option<Duration> {
        let left = deadline.saturating_duration_since(Instant::now()) + GRACE;
        let pttl = Pttl { lock_key };
        let bound = self.command_timeout.min(left);
        self.store
            .backend()
            .holder_ttl(&pttl, bound)
            .await
            .ok()
            .flatten()
    }

    /// Whether anyone holds `key`. An unreachable Redis is an error, never `false`.
    pub async fn is_locked(&self, key: &str) -> Result<bool, LockError> {
        let exists = Exists {
            lock_key: &self.redis_key(key),
        };
        self.store
            .backend()
            .is_locked(&exists, self.command_timeout)
            .await
    }
}

impl Locker {
    /// The caller gave up, or its owner went away.
    pub(super) fn is_cancelled(&self, cancel: &Cancel) -> bool {
        cancel.is_cancelled() || self.owner.is_gone()
    }

    pub(super) fn check(&self, cancel: &Cancel) -> Result<(), LockError> {
        if self.is_cancelled(cancel) {
            Err(LockError::Aborted)
        } else {
            Ok(())
        }
    }

    /// Waits at the restart quarantine's gate of the lock `scheme` names
    /// (`Store::pass_gate`) unless `cancel` ends it.
    pub(super) async fn pass_gate(
        &self,
        scheme: KeyScheme<'_>,
        bound: Duration,
        cancel: &Cancel,
    ) -> Result<(), LockError> {
        tokio::select! {
            passed = self.store.pass_gate(|| self.scheme_key(&scheme), bound) => passed,
            _ = cancel.cancelled() => Err(LockError::Aborted),
            _ = self.owner.gone() => Err(LockError::Aborted),
        }
    }

    pub(super) async fn sleep(&self, delay: Duration, cancel: &Cancel) -> Result<(), LockError> {
        tokio::select! {
            _ = tokio::time::sleep(delay) => Ok(()),
            _ = cancel.cancelled() => Err(LockError::Aborted),
            _ = self.owner.gone() => Err(LockError::Aborted),
        }
    }
}
