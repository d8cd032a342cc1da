//! What a DistributedLock handle asks of its lock: release, extend, and (for `autoRefresh`
//! holds) what the watchdog last confirmed. A handle is a plain JS object holding its key,
//! token and deadline (see lib/distributed-lock.js); it passes them back here, so no native
//! object exists per handle.

use super::completions::{Granted, Outcome};
use super::direct::{self, Link};
use super::distributed_lock::NativeDistributedLock;
use super::error::{OrThrow, Result};
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::validate;
use crate::core::ops::carried_extend::Extend;
use crate::core::ops::carried_handoff::{Carry, Releasing};
use crate::core::ops::held;
use crate::core::ops::watchdog::Watchdog;
use crate::core::wait::lent::Lent;
use napi::bindgen_prelude::{Env, Object, PromiseRaw};
use napi_derive::napi;
use std::sync::Arc;

/// Watch ids come from JS as numbers; 0 (or anything not a positive integer) is none.
fn watch_id(watch: f64) -> Option<u64> {
    (watch >= 1.0 && watch.fract() == 0.0 && watch < 4.0e15).then_some(watch as u64)
}

#[napi]
impl NativeDistributedLock {
    /// The lease a handle describes. A watched lock's deadline is the watchdog's (the
    /// handle's own is its acquisition's, which the refreshes moved on since).
    fn lease(
        &self,
        key: String,
        token: String,
        fence: u64,
        deadline: f64,
        watch: Option<u64>,
    ) -> std::result::Result<Lease, LockError> {
        validate::key("key", &key)?;
        let redis_key = self.locker.redis_key(&key);
        // Only a watched lock asks the watchdog (a plain release must not make one).
        let watched = watch.map(|id| (id, Watchdog::of(self.locker.store())));
        let confirmed = watched.as_ref().and_then(|(id, w)| w.confirmed(*id));
        // A watched lock's handle may not hold its token: the watchdog does.
        let token = match &watched {
            Some((id, w)) if token.is_empty() => w.token(*id).unwrap_or_default(),
            _ => token,
        };
        let deadline = match confirmed {
            Some(confirmed) => confirmed.deadline,
            None => self.thread.instant(deadline),
        };
        Ok(Lease::resumed(key, redis_key, token, fence, deadline))
    }

    /// Stops the refreshes of `watch`, then deletes the lock if it is still ours. Resolves
    /// once Redis answered (or the lock ran out meanwhile); `owner` is the handle.
    #[napi(ts_return_type = "Promise<void>")]
    #[allow(clippy::too_many_arguments)]
    pub fn release<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        token: String,
        fence: f64,
        deadline: f64,
        watch: f64,
    ) -> Result<PromiseRaw<'env, ()>> {
        let watch = watch_id(watch);
        // A fence we cannot read back exactly is none: the handover then draws a new one.
        let fence = watch_id(fence).unwrap_or(0);
        let lease = Arc::new(
            self.lease(key, token, fence, deadline, watch)
                .or_throw(&env)?,
        );
        // Before the release is sent, on the JS thread: no refresh goes out after it, and a
        // refresh in flight cannot report our own delete as a loss.
        if let Some(id) = watch {
            Watchdog::of(self.locker.store()).stop(id);
        }
        let call = self.thread.call(&env, Some(&owner))?;
        if let Some(link) = &self.direct {
            if self.send_release(link, call.id, &lease) {
                return Ok(call.promise);
            }
        }
        let locker = self.locker.clone();
        self.completer.run(call.id, async move {
            match held::release(&locker, &lease).await {
                Ok(_) => Outcome::Done,
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }

    /// Sends on the JS-thread connection what the core says a release sends there: a plain
    /// one, or the handover to a waiter of this thread (whose reply answers that waiter too,
    /// or which answers it at once on a lent lease). `false` when it must go through the
    /// runtime instead.
    fn send_release(&self, link: &Link, id: u32, lease: &Arc<Lease>) -> bool {
        let thread = self.caller(id).thread;
        let releasing = Releasing::of(&self.locker, lease, thread);
        let (sender, handoff, lent) = match releasing.carry(|| link.sender()) {
            Carry::Elsewhere => return false,
            Carry::Plain(release) => return link.send(id, release, direct::done),
            Carry::HandOver {
                sender,
                handoff,
                lent,
            } => (sender, handoff, lent),
        };
        let lent = lent.map(|to| (to.waiter, Granted::lent(&to.lease, to.until)));
        sender.send(id, handoff, direct::done);
        if let Some((waiter, granted)) = lent {
            // Its runtime task, if any, ends without a word.
            self.completer.answered(waiter);
            self.thread.settle_in_call(waiter, Outcome::Lease(granted));
        }
        true
    }

    /// Adds `additional_ms` to the lock's remaining TTL if it is still ours (for a watched
    /// lock, until its next refresh sets the TTL back to the hold's own); resolves with
    /// `[deadline, expiresAt]`: the new deadline on `performance.now()`'s clock, and when
    /// Redis expires the lock (epoch ms).
    #[napi(ts_return_type = "Promise<[number, number]>")]
    #[allow(clippy::too_many_arguments)]
    pub fn extend<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        token: String,
        additional_ms: f64,
        deadline: f64,
        watch: f64,
    ) -> Result<PromiseRaw<'env, ()>> {
        let extra = validate::positive_ms("additionalMs", additional_ms).or_throw(&env)?;
        let watch = watch_id(watch);
        let lease = Arc::new(self.lease(key, token, 0, deadline, watch).or_throw(&env)?);
        let call = self.thread.call(&env, Some(&owner))?;
        let locker = self.locker.clone();
        // A watched lock's deadline stays the watchdog's: its next refresh sets the TTL back
        // to the hold's own, and a refresh Redis ran without our hearing must not leave us
        // counting on the longer one.
        let extended = |lease: Arc<Lease>| {
            move |result: std::result::Result<(), LockError>| match result {
                Ok(()) => Outcome::Extended {
                    deadline: lease.deadline(),
                    expires_at_ms: lease.expires_at_ms(),
                },
                Err(err) => Outcome::Failed(err),
            }
        };
        let sender = held::may_carry(&locker, &lease)
            .then(|| self.direct.as_ref().and_then(|link| link.sender()))
            .flatten();
        if let Some(sender) = sender {
            let extend = Extend::new(&locker, &lease, extra);
            sender.send(call.id, extend, extended(lease));
            return Ok(call.promise);
        }
        self.completer.run(call.id, async move {
            let result = held::extend(&locker, &lease, extra).await;
            extended(lease)(result)
        });
        Ok(call.promise)
    }

    /// Where a holder that started on a lent lease stands (see core::ops::carried_handoff):
    /// 0 while Redis has not run its handover, then once its deadline (`performance.now()`'s
    /// clock) or -1 when it holds nothing; -1 too for a token not lent, or already told.
    #[napi]
    pub fn lent_state(&self, token: String) -> f64 {
        match self.locker.store().wakes().lends().take(&token) {
            Some(Lent::Pending) => 0.0,
            Some(Lent::Confirmed(deadline)) => self.thread.perf_ms(deadline).floor(),
            Some(Lent::Failed) | None => -1.0,
        }
    }

    /// The owner token of `watch`, while the watchdog keeps it alive.
    #[napi]
    pub fn watch_token(&self, watch: f64) -> Option<String> {
        watch_id(watch).and_then(|id| Watchdog::of(self.locker.store()).token(id))
    }

    /// Whether the watchdog still keeps `watch` alive and its TTL has not run out.
    #[napi]
    pub fn watch_held(&self, watch: f64) -> bool {
        watch_id(watch)
            .and_then(|id| Watchdog::of(self.locker.store()).confirmed(id))
            .is_some_and(|confirmed| std::time::Instant::now() < confirmed.deadline)
    }

    /// When Redis expires `watch` after its last confirmed refresh (ms after `baseWallMs`);
    /// NaN when it is no longer watched.
    #[napi]
    pub fn watch_expires_at(&self, watch: f64) -> f64 {
        watch_id(watch)
            .and_then(|id| Watchdog::of(self.locker.store()).confirmed(id))
            .map_or(f64::NAN, |confirmed| {
                confirmed.expires_at_ms as f64 - self.thread.base_wall_ms() as f64
            })
    }
}
