//! `NativeExclusiveLock`: converts the JS layer's calls for core::front::exclusive_lock and
//! answers them through the call's promise.

use super::connection::{LockParts, NativeConnection};
use super::error::{OrThrow, Result};
use super::heartbeat::{Beater, NativeHeartbeat};
use super::js::outcome::{boolean, Outcome};
use super::js::responder::JsCalls;
use super::stats::{observe, NativeStats};
use crate::core::basics::token::format_fence;
use crate::core::front::exclusive_lock::{ExclusiveLock, ExclusiveSettings, Inspection, Wishes};
use crate::core::front::reply::Settled;
use napi::bindgen_prelude::{Env, PromiseRaw};
use napi_derive::napi;
use std::rc::Rc;

/// Options of the native ExclusiveLock; the JS layer has already checked their types and
/// the original's rules (required name, ttl/refresh pairing, the 500 ms margin).
#[napi(object)]
pub struct ExclusiveLockOptions {
    pub name: String,
    pub key_prefix: String,
    /// The `keyPrefix` of the user's ioredis client.
    pub client_key_prefix: Option<String>,
    pub lock_ttl_ms: f64,
    pub lock_refresh_ms: f64,
    /// Give the lock up when the JS thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    /// Give the lock up this long after acquiring it, whatever happens.
    pub max_hold_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
    /// How long each lock's fence counter outlives the lock. Default 7 days; 0 or Infinity:
    /// forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`; false keeps every count at zero. Default true.
    pub stats: Option<bool>,
}

/// Shared by every ExclusiveLock of the JS thread made with the same settings
/// (lib/shared-connection.js); each call names the hold it is about by its listener.
#[napi]
pub struct NativeExclusiveLock {
    front: ExclusiveLock,
    beater: Rc<Beater>,
    pub(super) calls: JsCalls,
}

fn inspected(result: Settled<Option<Inspection>>) -> Outcome {
    match result {
        Ok(found) => Outcome::Inspected(found),
        Err(err) => Outcome::Failed(err),
    }
}

#[napi]
impl NativeExclusiveLock {
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
        options: ExclusiveLockOptions,
        heartbeat: &NativeHeartbeat,
    ) -> Result<Self> {
        let settings = ExclusiveSettings {
            name: options.name,
            key_prefix: options.key_prefix,
            client_key_prefix: options.client_key_prefix,
            lock_ttl_ms: options.lock_ttl_ms,
            lock_refresh_ms: options.lock_refresh_ms,
            max_stall_ms: options.max_stall_ms,
            max_hold_ms: options.max_hold_ms,
            command_timeout_ms: options.command_timeout_ms,
            fence_retention_ms: options.fence_retention_ms,
            stats: options.stats,
        };
        // Every hold's news passes: the front keeps `refreshed` back per hold.
        let LockParts { calls, sink, owner } = connection.lock_parts(true);
        let front = ExclusiveLock::new(
            &connection.connection,
            settings,
            owner,
            heartbeat.inner.clone(),
            sink,
        )
        .or_throw(&env)?;
        Ok(NativeExclusiveLock {
            calls,
            front,
            beater: heartbeat.beater(),
        })
    }

    #[napi(getter)]
    pub fn key(&self) -> String {
        self.front.key().to_owned()
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.front.name().to_owned()
    }

    /// The fencing token of the hold won with `listener`, if held.
    #[napi]
    pub fn fence(&self, listener: u32) -> Option<String> {
        self.front.fence(listener).map(format_fence)
    }

    /// Whether a refresh of the hold won with `listener` is on its way to Redis (the
    /// original's `is_refreshing`).
    #[napi]
    pub fn refreshing(&self, listener: u32) -> bool {
        self.front.refreshing(listener)
    }

    /// Whether the hold won with `listener` lets its process exit (`unref()`): then the end
    /// of the JS environment leaves it to its TTL instead of releasing it.
    #[napi]
    pub fn set_unrefed(&self, listener: u32, unrefed: bool) {
        self.front.set_unrefed(listener, unrefed);
    }

    /// Whether the hold won with `listener` sends its `refreshed` events into JavaScript.
    #[napi]
    pub fn want_refreshed(&self, listener: u32, want: bool) {
        self.front.want_refreshed(listener, want);
    }

    /// One attempt with the instance's `lock_contents`, `lock_ttl_ms` and `lock_refresh_ms`
    /// (arguments, not an object: this is the hot path); resolves with whether it won. While
    /// held, the watchdog refreshes the lock and tells `listener` of `refreshed` and `lost`.
    /// `keep` and `beat` are changes to this thread's liveness counts (see `liveness`);
    /// `unrefed` and `refreshed` what the hold starts with (see `setUnrefed`, `wantRefreshed`).
    #[napi(ts_return_type = "Promise<boolean>")]
    #[allow(clippy::too_many_arguments)]
    pub fn acquire<'env>(
        &self,
        env: Env,
        listener: u32,
        lock_contents: String,
        lock_ttl_ms: f64,
        lock_refresh_ms: f64,
        keep: i32,
        beat: i32,
        unrefed: bool,
        refreshed: bool,
    ) -> Result<PromiseRaw<'env, ()>> {
        let wishes = Wishes { unrefed, refreshed };
        let acquire = self
            .front
            .acquire(
                listener,
                lock_contents,
                lock_ttl_ms,
                lock_refresh_ms,
                wishes,
            )
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        self.liveness(keep, beat);
        acquire.start(self.calls.reply(call.id, boolean));
        Ok(call.promise)
    }

    /// Stops refreshing the hold won with `listener` and deletes the lock if it is still
    /// ours; resolves with whether it was. `keep` and `beat` as for `acquire`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(
        &self,
        env: Env,
        listener: u32,
        keep: i32,
        beat: i32,
    ) -> Result<PromiseRaw<'env, ()>> {
        let call = self.calls.thread.call(&env, None)?;
        self.liveness(keep, beat);
        self.front
            .release(listener, self.calls.reply(call.id, boolean));
        Ok(call.promise)
    }

    /// Resolves with the holder's `{ lock_ttl_ms, lock_contents }`, or null when free.
    #[napi(ts_return_type = "Promise<{ lock_ttl_ms: number, lock_contents: string } | null>")]
    pub fn inspect<'env>(&self, env: Env) -> Result<PromiseRaw<'env, ()>> {
        let call = self.calls.thread.call(&env, None)?;
        self.front.inspect(self.calls.reply(call.id, inspected));
        Ok(call.promise)
    }
}

impl NativeExclusiveLock {
    /// Applies what the JS layer's liveness counts handed to this call (lib/liveness.js
    /// `handOff`): a held lock's claim on keeping the process alive and on the heartbeat
    /// ride on the acquire and release that cross into native anyway, instead of a call of
    /// their own each. Applied only once the call can no longer throw, so a call that throws
    /// applied nothing.
    fn liveness(&self, keep: i32, beat: i32) {
        if keep != 0 {
            self.calls.thread.keep(keep.signum());
        }
        if beat != 0 {
            // The JS layer hands the heartbeat over only when `hold(0)` said a native timer
            // beats; a closing timer (the environment ending) has no lock left to guard.
            self.beater.hold(beat.signum());
        }
    }
}
