//! A first attempt to send on a connection of its own (the caller's, see fast/acquire.rs and
//! fast/exclusive.rs): its token and terms, owned until its reply is read, from which its
//! `AcquireAttempt` is written in whichever form that connection takes.

use super::lock::Locker;
use super::store::Store;
use crate::core::backend::lock_store::LockStore;
use crate::core::basics::clock::Stamp;
use crate::core::basics::keys;
use crate::core::basics::lease::Lease;
use crate::core::basics::token;
use crate::core::proto::acquire::{AcquireAttempt, AttemptForm, Layout};
use crate::core::proto::release::Release;
use std::time::Duration;

/// What an attempt at any lock sends: its token, `sent` when it was made.
#[derive(Clone)]
pub struct AttemptTerms {
    pub redis_key: Vec<u8>,
    fence_key: Vec<u8>,
    pub token: String,
    pub ttl: Duration,
    pub sent: Stamp,
    /// The lock's (see `Locker::fence_retention`).
    fence_retention_ms: u64,
    /// Whether a transaction pushes the fence counter's expiry (see kept_fences.rs).
    keep_fences: bool,
}

impl AttemptTerms {
    /// A fresh token, sent now, on a connection of `store`'s; `fence_key` is `redis_key`'s.
    pub fn new(
        store: &Store,
        redis_key: Vec<u8>,
        fence_key: Vec<u8>,
        ttl: Duration,
        fence_retention_ms: u64,
    ) -> Self {
        let keep_fences = store.kept_fences().due(&fence_key, ttl, fence_retention_ms);
        AttemptTerms {
            redis_key,
            fence_key,
            token: token::new_token(),
            ttl,
            sent: Stamp::now(),
            fence_retention_ms,
            keep_fences,
        }
    }

    /// The attempt at a lock of `layout`, written in `form`.
    pub fn op<'a>(&'a self, layout: Layout<'a>, form: AttemptForm) -> AcquireAttempt<'a> {
        AcquireAttempt {
            lock_key: &self.redis_key,
            fence_key: &self.fence_key,
            token: &self.token,
            ttl: self.ttl,
            fence_retention_ms: self.fence_retention_ms,
            keep_fences: self.keep_fences,
            layout,
            form,
            sent: self.sent.at,
        }
    }

    /// Remembers how long the reply to its transaction kept its fence counter.
    pub fn note_kept_fences(&self, store: &Store, reply: &redis::Value) {
        if self.keep_fences {
            let (ttl, window) = (self.ttl, self.fence_retention_ms);
            let kept = store.kept_fences();
            kept.answered(reply, &self.fence_key, self.sent.at, ttl, window);
        }
    }

    /// The same attempt under a fresh token, `sent` now.
    pub fn renewed(self) -> Self {
        AttemptTerms {
            token: token::new_token(),
            sent: Stamp::now(),
            ..self
        }
    }

    /// The terms `golden_tests` and the unit tests write: token `t`, a 5 s fence window.
    #[cfg(test)]
    pub(crate) fn sample(redis_key: &[u8], ttl: Duration, keep_fences: bool) -> Self {
        AttemptTerms {
            redis_key: redis_key.to_vec(),
            fence_key: keys::fence_key(redis_key),
            token: "t".into(),
            ttl,
            sent: Stamp::now(),
            fence_retention_ms: 5000,
            keep_fences,
        }
    }
}

/// A DistributedLock's (or maestro's service's) attempt at `key`.
pub struct PlainRequest {
    pub key: String,
    pub terms: AttemptTerms,
}

impl PlainRequest {
    pub fn op(&self, form: AttemptForm) -> AcquireAttempt<'_> {
        self.terms.op(Layout::Plain, form)
    }

    pub fn into_lease(self, fence: u64) -> Lease {
        let AttemptTerms {
            redis_key,
            token,
            sent,
            ttl,
            ..
        } = self.terms;
        Lease::new(self.key, redis_key, token, fence, sent, ttl)
    }
}

impl Locker {
    /// A first attempt (as `attempt`) to send elsewhere; `sent` is now.
    pub fn attempt_request(&self, key: &str, ttl: Duration) -> PlainRequest {
        let redis_key = self.redis_key(key);
        let fence_key = keys::fence_key(&redis_key);
        let window = self.fence_retention_ms();
        let terms = AttemptTerms::new(self.store(), redis_key, fence_key, ttl, window);
        PlainRequest {
            key: key.to_owned(),
            terms,
        }
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

    /// Frees a lock an attempt may have won after its caller stopped waiting, through the
    /// tokio connection (the attempt's own connection is gone), bounded by the lock's TTL.
    pub async fn abandon(&self, terms: &AttemptTerms) {
        let free = Release::late_win(&terms.redis_key, &terms.token, self.is_fair());
        let _ignored = self.store().backend().release(&free, terms.ttl).await;
    }
}
