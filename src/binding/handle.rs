//! What a DistributedLock handle asks of its lock (core::front::handle): release, extend,
//! and what the watchdog last confirmed of an `autoRefresh` hold. A handle is a plain JS
//! object holding its key, token and deadline (see lib/distributed-lock.js); it passes them
//! back here, so no native object exists per handle.

use super::distributed_lock::NativeDistributedLock;
use super::error::{OrThrow, Result};
use super::js::outcome::{done, Outcome};
use crate::core::front::handle::{Extended, Parts};
use crate::core::front::reply::Settled;
use napi::bindgen_prelude::{Env, Object, PromiseRaw, Unknown};
use napi_derive::napi;

fn extended(result: Settled<Extended>) -> Outcome {
    match result {
        Ok(extended) => Outcome::Extended {
            deadline: extended.deadline,
            expires_at_ms: extended.expires_at_ms,
            confirmed: extended.confirmed,
        },
        Err(err) => Outcome::Failed(err),
    }
}

#[napi]
impl NativeDistributedLock {
    fn parts(&self, key: String, token: String, fence: f64, deadline: f64, watch: f64) -> Parts {
        Parts {
            key,
            token,
            fence,
            deadline: self.calls.thread.instant(deadline),
            watch,
        }
    }

    /// Stops the refreshes of `watch`, then deletes the lock if it is still ours. Resolves
    /// once Redis answered (or the lock ran out meanwhile); `owner` is the handle. Answered
    /// in place (see js/in_call.rs), returns undefined instead of a promise.
    #[napi(ts_return_type = "unknown")]
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
    ) -> Result<Unknown<'env>> {
        let parts = self.parts(key, token, fence, deadline, watch);
        let release = self.front.release(parts).or_throw(&env)?;
        let call = self.calls.thread.call_in_place(&env, Some(&owner))?;
        release.start(self.calls.reply(call.id, done));
        Ok(self.calls.thread.returned(call))
    }

    /// Adds `additional_ms` to the lock's remaining TTL if it is still ours (for a watched
    /// lock, until its next refresh sets the TTL back to the hold's own); resolves with
    /// `[deadline, expiresAt, confirmed]`: the new deadline on `performance.now()`'s clock,
    /// when Redis expires the lock (epoch ms), and when the extend was sent (the clock of
    /// `deadline`; see `inDoubt`).
    #[napi(ts_return_type = "Promise<[number, number, number]>")]
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
        let parts = self.parts(key, token, 0.0, deadline, watch);
        let extend = self.front.extend(parts, additional_ms).or_throw(&env)?;
        let call = self.calls.thread.call(&env, Some(&owner))?;
        extend.start(self.calls.reply(call.id, extended));
        Ok(call.promise)
    }

    /// Where a holder that started on a lent lease stands (see core::ops::fast::handoff):
    /// 0 while Redis has not run its handover, then once its deadline (`performance.now()`'s
    /// clock) or -1 when it holds nothing; -1 too for a token not lent, or already told.
    #[napi]
    pub fn lent_state(&self, token: String) -> f64 {
        match self.front.lent_state(&token) {
            None => 0.0,
            Some(Some(deadline)) => self.calls.thread.perf_ms(deadline).floor(),
            Some(None) => -1.0,
        }
    }

    /// The owner token of `watch`, while the watchdog keeps it alive.
    #[napi]
    pub fn watch_token(&self, watch: f64) -> Option<String> {
        self.front.watch_token(watch)
    }

    /// Whether the watchdog still keeps `watch` alive and its TTL has not run out.
    #[napi]
    pub fn watch_held(&self, watch: f64) -> bool {
        self.front.watch_held(watch)
    }

    /// Whether a plain handle's lock, last confirmed by a request sent at `confirmed`
    /// (`performance.now()`'s clock), is in doubt: its connection dropped since.
    #[napi]
    pub fn in_doubt(&self, confirmed: f64) -> bool {
        self.front.in_doubt(self.calls.thread.instant(confirmed))
    }

    /// When Redis expires `watch` after its last confirmed refresh (ms after `baseWallMs`);
    /// NaN when it is no longer watched.
    #[napi]
    pub fn watch_expires_at(&self, watch: f64) -> f64 {
        self.front.watch_expires_at(watch).map_or(f64::NAN, |at| {
            at as f64 - self.calls.thread.base_wall_ms() as f64
        })
    }
}
