//! `NativeDistributedLock`: converts the JS layer's calls for core::front::distributed_lock
//! and answers them through the call's promise.

use super::cancel::{signal, NativeCancel};
use super::connection::{LockParts, NativeConnection};
use super::error::{OrThrow, Result};
use super::heartbeat::NativeHeartbeat;
use super::js::outcome::{boolean, Outcome};
use super::js::responder::JsCalls;
use super::stats::{observe, NativeStats};
use crate::core::basics::cancel::Cancel;
use crate::core::front::distributed_lock::{DistributedLock, DistributedLockSettings};
use crate::core::front::granted::Granted;
use crate::core::front::reply::Settled;
use napi::bindgen_prelude::{Env, Object, PromiseRaw, Unknown};
use napi_derive::napi;

/// Options of `new DistributedLock(redis, options)`, defaults as in @lilith/distributed-lock.
#[napi(object)]
pub struct DistributedLockOptions {
    /// Prefix of every lock key. Default `'lock:'`.
    pub key_prefix: Option<String>,
    /// The `keyPrefix` of the user's ioredis client, which the original's keys carry too.
    pub client_key_prefix: Option<String>,
    /// TTL when a call gives none. Default 30000.
    pub default_ttl_ms: Option<f64>,
    /// First backoff delay of `acquire`, and the poll interval of `waitForLock`. Default 100.
    pub retry_delay_ms: Option<f64>,
    /// Retries of `acquire` after the first attempt. Default 0.
    pub max_retries: Option<f64>,
    /// Bound on every Redis call. Default 5000.
    pub command_timeout_ms: Option<f64>,
    /// Waiters get each lock in the order they asked for it, across processes. Default false.
    pub fair: Option<bool>,
    /// A waiter of this instance handed the lock by a release of its own JS thread starts as
    /// the handover is sent, on the releaser's lease, before Redis confirms it. Default false.
    pub lend_on_handover: Option<bool>,
    /// How long each lock's fence counter outlives the lock. Default 7 days; 0 or Infinity:
    /// forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`; false keeps every count at zero. Default true.
    pub stats: Option<bool>,
}

/// The native side of one DistributedLock. Handles are plain JS objects holding their
/// lock's token and deadline; their `release` and `extend` come back here with those.
#[napi]
pub struct NativeDistributedLock {
    pub(super) front: DistributedLock,
    pub(super) calls: JsCalls,
}

/// What a won acquisition settles its promise with: the handle, or none.
fn handle(result: Settled<Option<Granted>>) -> Outcome {
    match result {
        Ok(Some(granted)) => Outcome::Lease(granted),
        Ok(None) => Outcome::NoHandle,
        Err(err) => Outcome::Failed(err),
    }
}

#[napi]
impl NativeDistributedLock {
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
        options: DistributedLockOptions,
        heartbeat: &NativeHeartbeat,
    ) -> Result<Self> {
        let settings = DistributedLockSettings {
            key_prefix: options.key_prefix,
            client_key_prefix: options.client_key_prefix,
            default_ttl_ms: options.default_ttl_ms,
            retry_delay_ms: options.retry_delay_ms,
            max_retries: options.max_retries,
            command_timeout_ms: options.command_timeout_ms,
            fence_retention_ms: options.fence_retention_ms,
            fair: options.fair,
            lend_on_handover: options.lend_on_handover,
            stats: options.stats,
        };
        let LockParts { calls, sink, owner } = connection.lock_parts(false);
        let front = DistributedLock::new(
            &connection.connection,
            settings,
            owner,
            heartbeat.inner.clone(),
            sink,
        )
        .or_throw(&env)?;
        Ok(NativeDistributedLock { calls, front })
    }

    /// Resolves with `owner` filled in as the handle, after up to `maxRetries` retries.
    /// Answered in place (see js/in_call.rs), it returns that value instead of a promise.
    #[napi(ts_return_type = "unknown")]
    pub fn acquire<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        ttl_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
        listener: Option<u32>,
    ) -> Result<Unknown<'env>> {
        let acquire = self.front.acquire(key, ttl_ms, listener).or_throw(&env)?;
        let call = self.calls.thread.call_in_place(&env, Some(&owner))?;
        acquire.start(signal(cancel), self.calls.reply(call.id, handle));
        Ok(self.calls.thread.returned(call))
    }

    /// Resolves with `owner` filled in as the handle, or with `null` when the key is held;
    /// answered in place, returns that value.
    #[napi(ts_return_type = "unknown")]
    pub fn try_acquire<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<Unknown<'env>> {
        let attempt = self
            .front
            .try_acquire(key, ttl_ms, listener)
            .or_throw(&env)?;
        let call = self.calls.thread.call_in_place(&env, Some(&owner))?;
        attempt.start(Cancel::never(), self.calls.reply(call.id, handle));
        Ok(self.calls.thread.returned(call))
    }

    /// Resolves with `owner` filled in as the handle once won; rejects after `timeout_ms`.
    /// Answered in place, returns the handle.
    #[napi(ts_return_type = "unknown")]
    #[allow(clippy::too_many_arguments)]
    pub fn wait_for_lock<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        timeout_ms: f64,
        ttl_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
        listener: Option<u32>,
    ) -> Result<Unknown<'env>> {
        let wait = self
            .front
            .wait_for_lock(key, timeout_ms, ttl_ms, listener)
            .or_throw(&env)?;
        let call = self.calls.thread.call_in_place(&env, Some(&owner))?;
        wait.start(signal(cancel), self.calls.reply(call.id, handle));
        Ok(self.calls.thread.returned(call))
    }

    /// Resolves with whether the fenced write landed.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn fenced_set<'env>(
        &self,
        env: Env,
        key: String,
        value: String,
        fence: String,
    ) -> Result<PromiseRaw<'env, ()>> {
        let write = self.front.fenced_set(key, value, fence).or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        write.start(self.calls.reply(call.id, boolean));
        Ok(call.promise)
    }

    /// Resolves with whether anyone holds `key`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: Env, key: String) -> Result<PromiseRaw<'env, ()>> {
        let ask = self.front.is_locked(key).or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        ask.start(self.calls.reply(call.id, boolean));
        Ok(call.promise)
    }
}
