use super::completions::{Completer, NativeCompletions, Outcome};
use super::error::{OrThrow, Result};
use super::events::JsSink;
use super::heartbeat::NativeHeartbeat;
use super::options::ConnectionOptions;
use super::promises::JsThread;
use crate::core::backoff;
use crate::core::error::LockError;
use crate::core::lease::Lease;
use crate::core::lock::{Locker, DEFAULT_COMMAND_TIMEOUT};
use crate::core::store::Store;
use crate::core::sync;
use crate::core::token;
use crate::core::validate;
use crate::core::watchdog::{Confirmed, Heartbeat, Limits, Sink, Watch, Watchdog};
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings of `@jonaskahn/maestro`'s DistributedLockService, resolved by the JS layer from
/// the constructor and maestro's environment variables.
#[napi(object)]
pub struct LockServiceOptions {
    pub lock_key: String,
    pub ttl_ms: f64,
    pub retry_delay_ms: f64,
    pub max_backoff_ms: f64,
    /// Give the lock up when the JS thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    pub command_timeout_ms: Option<f64>,
}

struct Held {
    lease: Lease,
    watch: Watch,
}

#[napi]
pub struct NativeLockService {
    locker: Arc<Locker>,
    key: String,
    /// The token of the current (else the last) hold; each attempt draws its own, so a
    /// replayed or late attempt can never be mistaken for a later one.
    value: Arc<Mutex<String>>,
    ttl: Duration,
    retry_delay: Duration,
    max_backoff: Duration,
    held: Arc<Mutex<Option<Held>>>,
    /// Set by the watchdog when the lock is lost; cleared by the next acquisition.
    lost: Arc<AtomicBool>,
    heartbeat: Arc<Heartbeat>,
    max_stall: Option<Duration>,
    completer: Completer,
    thread: Rc<JsThread>,
}

#[napi]
impl NativeLockService {
    #[napi(constructor)]
    pub fn new(
        connection: ConnectionOptions,
        options: LockServiceOptions,
        heartbeat: &NativeHeartbeat,
        completions: &NativeCompletions,
    ) -> Result<Self> {
        let max_stall = validate::non_negative_ms("maxStallMs", options.max_stall_ms).or_throw()?;
        validate::key("lockKey", &options.lock_key).or_throw()?;
        let command_timeout = options
            .command_timeout_ms
            .map(|ms| validate::positive_ms("commandTimeoutMs", ms))
            .transpose()
            .or_throw()?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        let store = Store::shared(connection.endpoint()?);
        Ok(NativeLockService {
            locker: Arc::new(Locker::new(store, "", command_timeout)),
            key: options.lock_key,
            // The original's value was `Date.now()-Math.random()`; ours is unguessable.
            value: Arc::new(Mutex::new(token::new_token())),
            ttl: validate::positive_ms("ttlMs", options.ttl_ms).or_throw()?,
            retry_delay: validate::non_negative_ms("retryDelayMs", options.retry_delay_ms)
                .or_throw()?,
            max_backoff: validate::non_negative_ms("maxBackoffMs", options.max_backoff_ms)
                .or_throw()?,
            held: Arc::new(Mutex::new(None)),
            lost: Arc::new(AtomicBool::new(false)),
            heartbeat: heartbeat.inner.clone(),
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            completer: completions.completer(),
            thread: completions.thread().clone(),
        })
    }

    #[napi(getter)]
    pub fn lock_value(&self) -> String {
        sync::lock(&self.value).clone()
    }

    /// Held and not known to be lost.
    #[napi(getter)]
    pub fn is_locked(&self) -> bool {
        sync::lock(&self.held).is_some() && !self.lost.load(Ordering::Relaxed)
    }

    /// Tries until `max_wait_ms` (default 3 x the TTL) with maestro's backoff and resolves
    /// with whether it won; on success the watchdog refreshes the lock every third of its
    /// TTL and tells `listener` if it is lost.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn acquire<'env>(
        &self,
        lock_ttl_ms: Option<f64>,
        max_wait_ms: Option<f64>,
        listener: u32,
    ) -> Result<PromiseRaw<'env, ()>> {
        let ttl = match lock_ttl_ms {
            Some(ms) => validate::positive_ms("lockTtl", ms).or_throw()?,
            None => self.ttl,
        };
        let max_wait = match max_wait_ms {
            Some(ms) => validate::non_negative_ms("maxWaitTime", ms).or_throw()?,
            None => ttl.saturating_mul(3),
        };
        let call = self.thread.call(None)?;
        if self.is_locked() {
            self.completer.run(call.id, async { Outcome::Bool(true) });
            return Ok(call.promise);
        }
        let never_refreshed = Arc::new(AtomicBool::new(false));
        let sink: Arc<dyn Sink> = Arc::new(LostFlag {
            js: JsSink::new(self.completer.clone(), never_refreshed),
            lost: self.lost.clone(),
        });
        let (locker, key, value) = (self.locker.clone(), self.key.clone(), self.value.clone());
        let (base, cap, held) = (self.retry_delay, self.max_backoff, self.held.clone());
        // The original refreshed every third of the constructor's TTL even when this hold's
        // TTL was shorter, letting it expire first; a third of the shorter one is safe.
        let every = self.ttl.min(ttl) / 3;
        let refresh_ttl = self.ttl.max(ttl);
        let lost = self.lost.clone();
        self.heartbeat.beat();
        let limits = Limits {
            stall: self.max_stall.map(|max| (self.heartbeat.clone(), max)),
            hold_until: None,
        };
        self.completer.run(call.id, async move {
            let watchdog = Watchdog::of(locker.store());
            if let Err(err) = watchdog.prepare(locker.command_timeout()).await {
                return Outcome::Failed(err);
            }
            let delay = |n| backoff::maestro_delay(base, cap, n, backoff::unit_random());
            let lease = match locker.acquire_within(&key, ttl, max_wait, delay).await {
                Ok(Some(lease)) => lease,
                Ok(None) => return Outcome::Bool(false),
                Err(err) => return Outcome::Failed(err),
            };
            let mut target = locker.target(&lease, every.max(Duration::from_millis(1)));
            target.ttl = refresh_ttl;
            let watch = watchdog.watch(target, lease.sent().at, limits, sink, listener);
            lost.store(false, Ordering::Relaxed);
            *sync::lock(&value) = lease.token.clone();
            *sync::lock(&held) = Some(Held { lease, watch });
            Outcome::Bool(true)
        });
        Ok(call.promise)
    }

    /// Stops refreshing and deletes the lock if it is ours. Resolves with `true` when it was
    /// ours or is already gone, `false` when someone else holds it now, as the original
    /// answers.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self) -> Result<PromiseRaw<'env, ()>> {
        let call = self.thread.call(None)?;
        // Stopped on the JS thread, before the release is sent (see NativeExclusiveLock).
        let held = sync::lock(&self.held).take();
        if let Some(held) = &held {
            held.watch.stop();
        }
        let locker = self.locker.clone();
        self.completer.run(call.id, async move {
            let Some(held) = held else {
                return Outcome::Bool(true);
            };
            let answer = async {
                if locker.release(&held.lease).await? {
                    return Ok(true);
                }
                Ok(!locker.is_locked(&held.lease.key).await?)
            };
            match answer.await {
                Ok(answer) => Outcome::Bool(answer),
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }
}

/// Records the loss natively (for `getStatus`) and tells JS (to drop its keep-alive).
struct LostFlag {
    js: JsSink,
    lost: Arc<AtomicBool>,
}

impl Sink for LostFlag {
    fn refreshed(&self, _listener: u32, _sent: std::time::Instant, _ttl: Duration) {}

    fn lost(&self, listener: u32, error: LockError, last: Confirmed, token: &[u8]) {
        self.lost.store(true, Ordering::Relaxed);
        self.js.lost(listener, error, last, token);
    }
}
