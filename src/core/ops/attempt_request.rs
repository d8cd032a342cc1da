//! A first attempt to send on a connection of its own (the caller's, see carried.rs): what
//! it writes, and what its reply means.

use super::lock::Locker;
use crate::core::basics::clock::Stamp;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::token;
use crate::core::proto::acquire::{Acquire, AttemptForm, Layout};
use crate::core::proto::release::Release;
use std::time::Duration;

/// An acquire attempt sent on a connection of its own, and what its reply means.
pub struct AttemptRequest {
    pub key: String,
    pub redis_key: Vec<u8>,
    fence_key: Vec<u8>,
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
    /// The locker's (see `Locker::fence_retention`).
    pub fence_retention_ms: u64,
    /// Whether the transaction pushes the fence counter's expiry (see kept_fences.rs).
    pub keep_fences: bool,
}

impl AttemptRequest {
    /// The attempt, written in `form`.
    pub fn op(&self, form: AttemptForm) -> Acquire<'_> {
        Acquire {
            lock_key: &self.redis_key,
            fence_key: &self.fence_key,
            token: &self.token,
            ttl: self.ttl,
            fence_retention_ms: self.fence_retention_ms,
            keep_fences: self.keep_fences,
            layout: Layout::Plain,
            form,
        }
    }

    pub fn into_lease(self, fence: u64) -> Lease {
        Lease::new(
            self.key,
            self.redis_key,
            self.token,
            fence,
            self.sent,
            self.ttl,
        )
    }
}

impl Locker {
    /// A first attempt (as `attempt`) to send elsewhere; `sent` is now.
    pub fn attempt_request(&self, key: &str, ttl: Duration) -> AttemptRequest {
        let redis_key = self.redis_key(key);
        let fence_retention_ms = self.fence_retention_ms();
        let fence_key = keys::fence_key(&redis_key);
        let keep_fences = self
            .store()
            .kept_fences()
            .due(&fence_key, ttl, fence_retention_ms);
        AttemptRequest {
            key: key.to_owned(),
            redis_key,
            fence_key,
            token: token::new_token(),
            ttl,
            sent: Stamp::now(),
            fence_retention_ms,
            keep_fences,
        }
    }

    /// Remembers how long the reply to `request`'s transaction kept its fence counter.
    pub fn note_kept_fences(&self, request: &AttemptRequest, reply: &redis::Value) {
        if request.keep_fences {
            let (ttl, window) = (request.ttl, request.fence_retention_ms);
            let kept = self.store().kept_fences();
            kept.answered(reply, &request.fence_key, request.sent.at, ttl, window);
        }
    }

    /// The bound of a release sent elsewhere (written by `write_release`). `None` when it
    /// must go through `release`: already released, or waiters of this process are to be
    /// woken by it.
    pub fn release_request(&self, lease: &Lease) -> Option<Duration> {
        let wakes = self.store().wakes();
        if self.is_fair() || lease.is_released() || wakes.waiters_at_release(&lease.redis_key) {
            return None;
        }
        Some(self.bound_for(lease))
    }

    /// The bound of a release (or handover) of `lease` sent elsewhere.
    pub fn release_bound(&self, lease: &Lease) -> Duration {
        self.bound_for(lease)
    }

    /// Frees a lock an attempt may have won after its caller stopped waiting, through the
    /// tokio connection (the attempt's own connection is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, request: &AttemptRequest) {
        let free = Release::late_win(&request.redis_key, &request.token, self.is_fair());
        let _ignored = self.store().run(&free, request.ttl).await;
    }
}
