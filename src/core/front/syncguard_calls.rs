//! syncguard's `backend.acquire` and `backend.release`, checked: each goes the way
//! ops/route.rs gives it (the caller's own connection, inline on memory://, or the runtime),
//! and `.await` runs it on the runtime (how the core's own tests drive it).

use super::reply::{ready, Reply, Settled};
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::pace::Pace;
use crate::core::basics::sync;
use crate::core::ops::delivery::Unclaimed;
use crate::core::ops::fast::syncguard::{SyncguardAttempt, SyncguardRelease};
use crate::core::ops::key_scheme::SyncguardKeys;
use crate::core::ops::lock::Locker;
use crate::core::ops::route::{FirstAttempt, Route, RouteFacts, Way};
use crate::core::ops::syncguard::SyncguardWon;
use crate::core::proto::syncguard::ReleasedById;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use std::collections::HashMap;
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Below this many remembered locks, the lockId table is not pruned.
const PRUNE_FLOOR: usize = 1024;

/// A syncguard lock won for a call, and what frees it should the answer never reach its
/// caller (see ops/delivery.rs).
pub struct SyncguardGranted {
    pub won: SyncguardWon,
    pub unclaimed: Unclaimed,
}

#[derive(Default)]
pub(super) struct HeldIds {
    pub(super) keys: HashMap<String, (Vec<u8>, Instant)>,
    prune_at: usize,
}

impl HeldIds {
    fn insert(&mut self, lock_id: &str, lock_key: Vec<u8>, until: Instant) {
        if self.keys.len() >= self.prune_at.max(PRUNE_FLOOR) {
            let now = Instant::now();
            self.keys.retain(|_, (_, until)| *until > now);
            self.prune_at = self.keys.len() * 2;
        }
        self.keys.insert(lock_id.to_owned(), (lock_key, until));
    }
}

/// Remembers a lock won for `ttl` under its lockId (the lease's token), and makes what its
/// caller gets.
pub(super) fn won(
    locker: &Locker,
    held: &Mutex<HeldIds>,
    index_key: Vec<u8>,
    ttl: Duration,
    lease: Lease,
) -> SyncguardGranted {
    let until = Instant::now().checked_add(ttl).unwrap_or_else(Instant::now);
    sync::lock(held).insert(&lease.token, lease.redis_key.clone(), until);
    SyncguardGranted {
        won: SyncguardWon::of(&lease),
        unclaimed: Unclaimed::syncguard(locker, lease, index_key),
    }
}

/// One attempt at a syncguard lock: `None` when it is held.
pub struct SyncguardAcquire {
    pub(super) locker: Arc<Locker>,
    pub(super) held: Arc<Mutex<HeldIds>>,
    pub(super) keys: SyncguardKeys,
    pub(super) ttl: Duration,
}

impl SyncguardAcquire {
    /// What a won attempt gives its caller (the lockId remembered for a bare release).
    fn granted(
        &self,
    ) -> impl FnOnce(Settled<Option<Lease>>) -> Settled<Option<SyncguardGranted>> + Send + 'static
    {
        let (locker, held) = (self.locker.clone(), self.held.clone());
        let (index_key, ttl, started) = (self.keys.index_key.clone(), self.ttl, Instant::now());
        move |answer| {
            locker.stats().ended(started, &answer, false);
            answer.map(|answer| answer.map(|lease| won(&locker, &held, index_key, ttl, lease)))
        }
    }

    pub fn start<R: Reply<Option<SyncguardGranted>>>(self, reply: R) {
        let store = self.locker.store();
        let way = Route::way(store, RouteFacts::Attempt(FirstAttempt::on(store)));
        let Some(on) = ready(&reply, way) else {
            return reply.run(self.into_future());
        };
        let granted = self.granted();
        let SyncguardAcquire {
            locker, keys, ttl, ..
        } = self;
        reply.call_fast(&on, SyncguardAttempt::new(&locker, keys, ttl), granted);
    }
}

impl IntoFuture for SyncguardAcquire {
    type Output = Settled<Option<SyncguardGranted>>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        let granted = self.granted();
        let SyncguardAcquire {
            locker, keys, ttl, ..
        } = self;
        async move { granted(locker.sg_acquire(&keys, ttl).await) }.boxed()
    }
}

/// `lock()`'s acquisition: its first attempt goes the way an acquire goes (the caller's own
/// lane when ready), and a held lock is waited for on the runtime, paced and woken.
pub struct SyncguardLock {
    pub(super) locker: Arc<Locker>,
    pub(super) held: Arc<Mutex<HeldIds>>,
    pub(super) keys: SyncguardKeys,
    pub(super) ttl: Duration,
    pub(super) pace: Pace,
    pub(super) started: Instant,
    pub(super) cancel: Cancel,
}

impl SyncguardLock {
    fn granted(&self) -> impl FnOnce(Settled<Lease>) -> Settled<SyncguardGranted> + Send + 'static {
        let (locker, held) = (self.locker.clone(), self.held.clone());
        let (index_key, ttl, started) = (self.keys.index_key.clone(), self.ttl, self.started);
        let cancel = self.cancel.clone();
        move |answer| {
            match &answer {
                Ok(_) => locker.stats().acquired(started.elapsed()),
                Err(LockError::Aborted) if !cancel.is_cancelled() => {}
                Err(err) => locker.stats().error(err),
            }
            answer.map(|lease| won(&locker, &held, index_key, ttl, lease))
        }
    }

    pub fn start<R: Reply<SyncguardGranted>>(self, reply: R) {
        let store = self.locker.store();
        let way = Route::way(store, RouteFacts::Attempt(FirstAttempt::on(store)));
        let Some(on) = ready(&reply, way) else {
            return reply.run(self.into_future());
        };
        let granted = self.granted();
        let SyncguardLock {
            locker,
            keys,
            ttl,
            pace,
            started,
            cancel,
            ..
        } = self;
        // The mark is read here, before the first attempt is sent.
        let attempt = SyncguardAttempt::paced(&locker, keys, ttl, (pace, started), cancel);
        reply.call_fast(&on, attempt, move |answer| {
            // A paced attempt answers a lock or an error, never "held".
            let lease = answer.and_then(|lease| {
                lease.ok_or_else(|| LockError::Internal("a paced acquisition answered held".into()))
            });
            granted(lease)
        });
    }
}

impl IntoFuture for SyncguardLock {
    type Output = Settled<SyncguardGranted>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        let granted = self.granted();
        let SyncguardLock { locker, keys, .. } = &self;
        let (locker, keys) = (locker.clone(), keys.clone());
        let (ttl, pace, started, cancel) = (self.ttl, self.pace, self.started, self.cancel);
        async move { granted(locker.sg_lock(&keys, ttl, pace, started, &cancel).await) }.boxed()
    }
}

/// A release by lockId; `expect`, the lock key this backend won that lockId at, if it did.
pub struct SyncguardReleaseCall {
    pub(super) locker: Arc<Locker>,
    pub(super) index_key: Vec<u8>,
    pub(super) lock_id: String,
    pub(super) expect: Option<Vec<u8>>,
}

impl SyncguardReleaseCall {
    pub fn start<R: Reply<ReleasedById>>(self, reply: R) {
        // Only a release that names the key it expects wakes in one round trip; the others
        // may need a second call, which the runtime makes. So do waiters of this process,
        // woken from the runtime as the other APIs' releases wake them.
        let store = self.locker.store();
        let way = match &self.expect {
            Some(key) if !store.wakes().remembers(|| key.clone()) => {
                Route::way(store, RouteFacts::Any)
            }
            _ => Way::Runtime,
        };
        let (Some(on), Some(expect)) = (ready(&reply, way), self.expect.clone()) else {
            return reply.run(self.into_future());
        };
        let SyncguardReleaseCall {
            locker,
            index_key,
            lock_id,
            ..
        } = self;
        let call = SyncguardRelease::new(&locker, index_key, lock_id, expect);
        reply.call_fast(&on, call, |released| released);
    }
}

impl IntoFuture for SyncguardReleaseCall {
    type Output = Result<ReleasedById, LockError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        let SyncguardReleaseCall {
            locker,
            index_key,
            lock_id,
            expect,
        } = self;
        async move {
            locker
                .sg_release(&index_key, &lock_id, expect.as_deref())
                .await
        }
        .boxed()
    }
}
