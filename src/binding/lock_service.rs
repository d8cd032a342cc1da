//! `NativeLockService`: converts the JS layer's calls for core::front::lock_service and
//! answers them through the call's promise.

use super::connection::{LockParts, NativeConnection};
use super::error::{OrThrow, Result};
use super::heartbeat::NativeHeartbeat;
use super::js::outcome::{boolean, Outcome};
use super::js::responder::JsCalls;
use super::stats::{observe, NativeStats};
use crate::core::front::lock_service::{LockService, Settings};
use crate::core::front::reply::Settled;
use napi::bindgen_prelude::{Env, PromiseRaw};
use napi_derive::napi;

/// Settings of `@jonaskahn/maestro`'s DistributedLockService, resolved by the JS layer from
/// maestro's environment variables. The key and TTL come with each call: maestro's users may
/// reassign `lockKey` and `ttl` between acquisitions, and one native object serves every
/// instance of these settings (each hold named by its listener).
#[napi(object)]
pub struct LockServiceOptions {
    pub retry_delay_ms: f64,
    pub max_backoff_ms: f64,
    /// Give the lock up when the JS thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    pub command_timeout_ms: Option<f64>,
    /// How long each lock's fence counter outlives the lock. Default 7 days; 0 or Infinity:
    /// forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`; false keeps every count at zero. Default true.
    pub stats: Option<bool>,
}

#[napi]
pub struct NativeLockService {
    front: LockService,
    pub(super) calls: JsCalls,
}

fn token(result: Settled<Option<String>>) -> Outcome {
    match result {
        Ok(Some(token)) => Outcome::Text(token),
        Ok(None) => Outcome::NoHandle,
        Err(err) => Outcome::Failed(err),
    }
}

#[napi]
impl NativeLockService {
    /// Tells JS listener `listener` (the object's `onEvent` hook) of every contention,
    /// wake-up and hand-over from now on.
    #[napi]
    pub fn observe(&self, listener: u32) {
        observe(self.front.counters(), &self.calls.completer, listener);
    }

    /// Counters and wait-time percentiles of this object's calls.
    #[napi]
    pub fn stats(&self) -> NativeStats {
        self.front.stats().into()
    }

    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: &NativeConnection,
        options: LockServiceOptions,
        heartbeat: &NativeHeartbeat,
    ) -> Result<Self> {
        let settings = Settings {
            retry_delay_ms: options.retry_delay_ms,
            max_backoff_ms: options.max_backoff_ms,
            max_stall_ms: options.max_stall_ms,
            command_timeout_ms: options.command_timeout_ms,
            fence_retention_ms: options.fence_retention_ms,
            stats: options.stats,
        };
        // Every refresh is told: maestro's users may end a hold by setting isLocked false,
        // which the JS layer sees only then (one crossing per third of a TTL).
        let LockParts { calls, sink, owner } = connection.lock_parts(true);
        let front = LockService::new(
            &connection.connection,
            settings,
            owner,
            heartbeat.inner.clone(),
            sink,
        )
        .or_throw(&env)?;
        Ok(NativeLockService { calls, front })
    }

    /// Tries `key` until `max_wait_ms` (default 3 x the TTL) with maestro's backoff and
    /// resolves with the lock's value (its owner token) once won, `null` when it stayed held
    /// or a release cancelled the wait. While held, the watchdog refreshes it every third of
    /// the shorter of `ttl_ms` (the instance's) and `lock_ttl_ms` (this call's), back to the
    /// longer, and tells `listener` if it is lost.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn acquire<'env>(
        &self,
        env: Env,
        key: String,
        ttl_ms: f64,
        lock_ttl_ms: Option<f64>,
        max_wait_ms: Option<f64>,
        listener: u32,
    ) -> Result<PromiseRaw<'env, ()>> {
        let acquire = self
            .front
            .acquire(key, ttl_ms, lock_ttl_ms, max_wait_ms, listener)
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        acquire.start(self.calls.reply(call.id, token));
        Ok(call.promise)
    }

    /// Ends the acquisition made with `listener`, if in flight: a lock it wins is released
    /// at once.
    #[napi]
    pub fn cancel(&self, listener: u32) {
        self.front.cancel(listener);
    }

    /// Stops refreshing the hold won with `listener` and leaves it to expire (its user set
    /// `isLocked` false by hand, after which maestro's refresh stops and its release deletes
    /// nothing).
    #[napi]
    pub fn forget(&self, listener: u32) {
        self.front.forget(listener);
    }

    /// Stops refreshing the hold won with `listener` and deletes the lock if it is ours.
    /// Resolves with `true` when it was ours or is already gone, `false` when someone else
    /// holds it now, as the original answers.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: Env, listener: u32) -> Result<PromiseRaw<'env, ()>> {
        let call = self.calls.thread.call(&env, None)?;
        self.front
            .release(listener, self.calls.reply(call.id, boolean));
        Ok(call.promise)
    }
}

impl NativeLockService {}
