//! `NativeSyncguard`: converts the calls of lib/syncguard/backend.js and lock.js for
//! core::front::syncguard and answers them through the call's promise. JS has validated
//! every argument and computed every key (syncguard's storage scheme); nothing is decided here.

use super::cancel::{signal, NativeCancel};
use super::connection::{LockParts, NativeConnection};
use super::error::{OrThrow, Result};
use super::js::outcome::{boolean, Outcome};
use super::js::responder::JsCalls;
use super::stats::{observe, NativeStats};
use crate::core::api::{
    ReleasedById, Syncguard, SyncguardCall, SyncguardGranted, SyncguardSettings,
};
use crate::core::basics::backoff::unit_random;
use crate::core::basics::pace::{GaveUp, Growth, Jitter, Pace};
use crate::core::front::reply::{Reply, Settled};
use napi::bindgen_prelude::{Env, PromiseRaw};
use napi_derive::napi;
use std::time::{Duration, Instant};

/// Options of `createRedisBackend(redis, options)` that reach the core.
#[napi(object)]
pub struct SyncguardOptions {
    /// syncguard's `keyPrefix`, trailing colons stripped. Default `"syncguard"`.
    pub key_prefix: Option<String>,
    /// Whether isLocked deletes a record expired past its guard. Default false.
    pub cleanup_in_is_locked: Option<bool>,
    /// The `keyPrefix` of the user's ioredis client, put in front of every key.
    pub client_key_prefix: Option<String>,
    /// Bound on every Redis call. Default 5000.
    pub command_timeout_ms: Option<f64>,
    /// Count what its calls do, for `stats()`; false keeps every count at zero. Default true.
    pub stats: Option<bool>,
}

/// One syncguard lock's keys, as lib/syncguard computed them, and the call's lockId.
#[napi(object)]
pub struct SyncguardCallKeys {
    /// The normalised user key.
    pub key: String,
    pub lock_key: String,
    pub index_key: String,
    pub fence_key: String,
    pub lock_id: String,
}

/// `lock()`'s acquisition options, as JS numbers and names (never validated by syncguard).
#[napi(object)]
pub struct SyncguardPace {
    pub max_retries: f64,
    pub retry_delay_ms: f64,
    pub backoff: String,
    pub jitter: String,
    pub timeout_ms: f64,
}

/// What comes after a scheduled attempt of `lock()` on a foreign backend: a delay, or the
/// message of the ending (`gaveUp` names which).
#[napi(object)]
pub struct SyncguardStep {
    pub delay_ms: Option<f64>,
    pub gave_up: Option<String>,
    pub message: Option<String>,
}

impl From<&SyncguardPace> for Pace {
    fn from(pace: &SyncguardPace) -> Pace {
        Pace {
            max_retries: pace.max_retries,
            base_ms: pace.retry_delay_ms,
            growth: Growth::named(&pace.backoff),
            jitter: Jitter::named(&pace.jitter),
            timeout_ms: pace.timeout_ms,
        }
    }
}

pub(super) fn call_of(keys: &SyncguardCallKeys) -> SyncguardCall<'_> {
    SyncguardCall {
        key: &keys.key,
        lock_key: keys.lock_key.as_bytes(),
        index_key: keys.index_key.as_bytes(),
        fence_key: keys.fence_key.as_bytes(),
        lock_id: &keys.lock_id,
    }
}

fn won(granted: SyncguardGranted) -> Outcome {
    Outcome::SyncguardWon {
        fence: granted.won.fence,
        expires_at_ms: granted.won.expires_at_ms,
        unclaimed: Some(granted.unclaimed),
    }
}

fn maybe_won(result: Settled<Option<SyncguardGranted>>) -> Outcome {
    match result {
        Ok(Some(granted)) => won(granted),
        Ok(None) => Outcome::NoHandle,
        Err(err) => Outcome::Failed(err),
    }
}

fn surely_won(result: Settled<SyncguardGranted>) -> Outcome {
    match result {
        Ok(granted) => won(granted),
        Err(err) => Outcome::Failed(err),
    }
}

/// syncguard's release codes.
fn release_code(result: Settled<ReleasedById>) -> Outcome {
    match result {
        Ok(ReleasedById::Released { .. }) => Outcome::Number(1.0),
        Ok(ReleasedById::NotOwner) => Outcome::Number(0.0),
        Ok(ReleasedById::NotFound) => Outcome::Number(-1.0),
        Ok(ReleasedById::Expired { .. }) => Outcome::Number(-2.0),
        Err(err) => Outcome::Failed(err),
    }
}

fn expiry(result: Settled<Option<i64>>) -> Outcome {
    match result {
        Ok(Some(ms)) => Outcome::Number(ms as f64),
        Ok(None) => Outcome::NoHandle,
        Err(err) => Outcome::Failed(err),
    }
}

fn record(result: Settled<Option<Vec<u8>>>) -> Outcome {
    match result {
        Ok(Some(json)) => Outcome::Text(String::from_utf8_lossy(&json).into_owned()),
        Ok(None) => Outcome::NoHandle,
        Err(err) => Outcome::Failed(err),
    }
}

fn step(next: std::result::Result<Duration, GaveUp>) -> SyncguardStep {
    match next {
        Ok(delay) => SyncguardStep {
            delay_ms: Some(delay.as_secs_f64() * 1000.0),
            gave_up: None,
            message: None,
        },
        Err(gave_up) => SyncguardStep {
            delay_ms: None,
            gave_up: Some(
                match gave_up {
                    GaveUp::TimedOut { .. } => "timedOut",
                    GaveUp::Contention { .. } => "contention",
                    GaveUp::NoTimeForRetry { .. } => "noTimeForRetry",
                }
                .to_owned(),
            ),
            message: Some(crate::core::basics::error::LockError::GaveUp(gave_up).to_string()),
        },
    }
}

/// `lock()`'s acquisition options converted once, for the calls that share them (converting
/// five fields, two of them texts, at every call cost more than the rest of the call's
/// arguments).
#[napi]
pub struct NativePace {
    pace: Pace,
}

#[napi]
impl NativePace {
    #[napi(constructor)]
    pub fn new(pace: SyncguardPace) -> Self {
        NativePace {
            pace: Pace::from(&pace),
        }
    }
}

#[napi]
pub struct NativeSyncguard {
    front: Syncguard,
    calls: JsCalls,
}

#[napi]
impl NativeSyncguard {
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
    pub fn new(env: Env, connection: &NativeConnection, options: SyncguardOptions) -> Result<Self> {
        let settings = SyncguardSettings {
            key_prefix: options.key_prefix,
            cleanup_in_is_locked: options.cleanup_in_is_locked,
            client_key_prefix: options.client_key_prefix,
            command_timeout_ms: options.command_timeout_ms,
            stats: options.stats,
        };
        let LockParts { calls, owner, .. } = connection.lock_parts(false);
        let front = Syncguard::new(&connection.connection, settings, owner).or_throw(&env)?;
        Ok(NativeSyncguard { front, calls })
    }

    /// Whether a fresh lockId must go through `lockIdFor` (a cluster whose prefix holds no
    /// hash tag: the lockId names its lock key's slot).
    #[napi(getter)]
    pub fn slot_safe(&self) -> bool {
        self.front.slot_safe()
    }

    /// The lockId an acquisition of `lock_key` takes, made from the fresh `lock_id`.
    #[napi]
    pub fn lock_id_for(&self, env: Env, lock_key: String, lock_id: String) -> Result<String> {
        self.front
            .lock_id_for(lock_key.as_bytes(), &lock_id)
            .or_throw(&env)
    }

    /// One attempt: resolves with `[fence, expiresAtMs]`, or `null` when the key is held.
    #[napi(ts_return_type = "Promise<[number, number] | null>")]
    pub fn acquire<'env>(
        &self,
        env: Env,
        keys: SyncguardCallKeys,
        ttl_ms: f64,
    ) -> Result<PromiseRaw<'env, ()>> {
        let attempt = self.front.acquire(&call_of(&keys), ttl_ms).or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        attempt.start(self.calls.reply(call.id, maybe_won));
        Ok(call.promise)
    }

    /// `lock()`'s acquisition, begun `elapsed_ms` ago by the JS caller's clock: resolves with
    /// `[fence, expiresAtMs]`, or rejects (EGAVEUP with syncguard's ending; EABORTED once
    /// `cancel` is cancelled).
    #[napi(ts_return_type = "Promise<[number, number]>")]
    pub fn lock<'env>(
        &self,
        env: Env,
        keys: SyncguardCallKeys,
        ttl_ms: f64,
        pace: &NativePace,
        elapsed_ms: f64,
        cancel: Option<&NativeCancel>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let now = Instant::now();
        let ago = Duration::try_from_secs_f64(elapsed_ms.max(0.0) / 1000.0).unwrap_or_default();
        let started = now.checked_sub(ago).unwrap_or(now);
        let token = signal(cancel);
        let acquisition = self
            .front
            .lock(&call_of(&keys), ttl_ms, pace.pace, started, token)
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        acquisition.start(self.calls.reply(call.id, surely_won));
        Ok(call.promise)
    }

    /// Resolves with syncguard's release code: 1 released, 0 another's, -1 not found,
    /// -2 expired.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn release<'env>(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
    ) -> Result<PromiseRaw<'env, ()>> {
        let release = self
            .front
            .release(index_key.as_bytes(), &lock_id)
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        release.start(self.calls.reply(call.id, release_code));
        Ok(call.promise)
    }

    /// Resolves with the record's new expiry (server ms), or `null`.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn extend<'env>(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
        ttl_ms: f64,
    ) -> Result<PromiseRaw<'env, ()>> {
        let extend = self
            .front
            .extend(index_key.as_bytes(), &lock_id, ttl_ms)
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        self.calls.reply(call.id, expiry).run(extend);
        Ok(call.promise)
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: Env, lock_key: String) -> Result<PromiseRaw<'env, ()>> {
        let ask = self.front.is_locked(lock_key.as_bytes()).or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        self.calls.reply(call.id, boolean).run(ask);
        Ok(call.promise)
    }

    /// Resolves with the live record's JSON, or `null`.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn lookup_by_key<'env>(&self, env: Env, lock_key: String) -> Result<PromiseRaw<'env, ()>> {
        let read = self.front.lookup_key(lock_key.as_bytes()).or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        self.calls.reply(call.id, record).run(read);
        Ok(call.promise)
    }

    /// Resolves with the live record's JSON when it is `lock_id`'s, or `null`.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn lookup_by_id<'env>(
        &self,
        env: Env,
        index_key: String,
        lock_id: String,
    ) -> Result<PromiseRaw<'env, ()>> {
        let read = self
            .front
            .lookup_id(index_key.as_bytes(), &lock_id)
            .or_throw(&env)?;
        let call = self.calls.thread.call(&env, None)?;
        self.calls.reply(call.id, record).run(read);
        Ok(call.promise)
    }

    /// `lock()`'s schedule for a foreign backend (no wakes there): before scheduled attempt
    /// `attempts` (`failed` false), or after it failed (`failed` true), `elapsed_ms` after
    /// the call began. The same formula as the native loop's.
    #[napi]
    pub fn paced_next(
        pace: SyncguardPace,
        attempts: f64,
        elapsed_ms: f64,
        failed: bool,
    ) -> SyncguardStep {
        let pace = Pace::from(&pace);
        // Counts and times from JS are whole and non-negative; the casts saturate otherwise.
        let (attempts, elapsed_ms) = (attempts as u64, elapsed_ms as u64);
        if failed {
            step(pace.after_failure(attempts, elapsed_ms, unit_random()))
        } else {
            step(pace.before(attempts, elapsed_ms).map(|()| Duration::ZERO))
        }
    }
}
