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
use crate::core::validate;
use crate::core::watchdog::{Confirmed, Heartbeat, Limits, Sink, Watch, Watchdog};
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Settings of `@jonaskahn/maestro`'s DistributedLockService, resolved by the JS layer from
/// maestro's environment variables. The key and TTL come with each call: maestro's users may
/// reassign `lockKey` and `ttl` between acquisitions.
#[napi(object)]
pub struct LockServiceOptions {
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
    retry_delay: Duration,
    max_backoff: Duration,
    held: Arc<Mutex<Option<Held>>>,
    /// Cancels the acquisition in flight, if any: a release made meanwhile wins.
    acquiring: Mutex<Option<CancellationToken>>,
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
        let command_timeout = options
            .command_timeout_ms
            .map(|ms| validate::positive_ms("commandTimeoutMs", ms))
            .transpose()
            .or_throw()?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        let store = Store::shared(connection.endpoint()?);
        Ok(NativeLockService {
            locker: Arc::new(
                Locker::new(store, "", command_timeout)
                    .owned_by(completions.thread().owner().clone()),
            ),
            retry_delay: validate::non_negative_ms("retryDelayMs", options.retry_delay_ms)
                .or_throw()?,
            max_backoff: validate::non_negative_ms("maxBackoffMs", options.max_backoff_ms)
                .or_throw()?,
            held: Arc::new(Mutex::new(None)),
            acquiring: Mutex::new(None),
            heartbeat: heartbeat.inner.clone(),
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            completer: completions.completer(),
            thread: completions.thread().clone(),
        })
    }

    /// Tries `key` until `max_wait_ms` (default 3 x the TTL) with maestro's backoff and
    /// resolves with the lock's value (its owner token) once won, `null` when it stayed held
    /// or a release cancelled the wait. While held, the watchdog refreshes it every third of
    /// the shorter of `ttl_ms` (the instance's) and `lock_ttl_ms` (this call's), back to the
    /// longer, and tells `listener` if it is lost.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn acquire<'env>(
        &self,
        key: String,
        ttl_ms: f64,
        lock_ttl_ms: Option<f64>,
        max_wait_ms: Option<f64>,
        listener: u32,
    ) -> Result<PromiseRaw<'env, ()>> {
        validate::key("lockKey", &key).or_throw()?;
        let ttl = validate::positive_ms("ttl", ttl_ms).or_throw()?;
        let lock_ttl = match lock_ttl_ms {
            Some(ms) => validate::positive_ms("lockTtl", ms).or_throw()?,
            None => ttl,
        };
        let max_wait = match max_wait_ms {
            Some(ms) => validate::non_negative_ms("maxWaitTime", ms).or_throw()?,
            None => lock_ttl.saturating_mul(3),
        };
        let call = self.thread.call(None)?;
        let cancel = CancellationToken::new();
        *sync::lock(&self.acquiring) = Some(cancel.clone());
        // Every refresh is told: maestro's users may end a hold by setting isLocked false,
        // which the JS layer sees only then (one crossing per third of a TTL).
        let refreshes = Arc::new(AtomicBool::new(true));
        let sink: Arc<dyn Sink> = Arc::new(LostFlag {
            js: JsSink::new(self.completer.clone(), refreshes),
            held: self.held.clone(),
        });
        let (locker, held) = (self.locker.clone(), self.held.clone());
        let (base, cap) = (self.retry_delay, self.max_backoff);
        // The original refreshed every third of the instance's TTL even when this hold's TTL
        // was shorter, letting it expire first; a third of the shorter one is safe.
        let every = ttl.min(lock_ttl) / 3;
        let refresh_ttl = ttl.max(lock_ttl);
        self.heartbeat.beat();
        let limits = Limits {
            stall: self.max_stall.map(|max| (self.heartbeat.clone(), max)),
            hold_until: None,
            owner: Some(self.thread.owner().clone()),
            outlives_owner: None,
        };
        self.completer.run(call.id, async move {
            let watchdog = Watchdog::of(locker.store());
            if let Err(err) = watchdog.prepare(locker.command_timeout()).await {
                return Outcome::Failed(err);
            }
            let delay = |n| backoff::maestro_delay(base, cap, n, backoff::unit_random());
            let won = locker
                .acquire_within(&key, lock_ttl, max_wait, delay, &cancel)
                .await;
            let lease = match won {
                Ok(Some(lease)) => lease,
                Ok(None) | Err(LockError::Aborted) => return Outcome::NoHandle,
                Err(err) => return Outcome::Failed(err),
            };
            let mut target = locker.target(&lease, every.max(Duration::from_millis(1)));
            target.ttl = refresh_ttl;
            let watch = watchdog.watch(target, lease.sent().at, limits, sink, listener);
            let token = lease.token.clone();
            *sync::lock(&held) = Some(Held { lease, watch });
            Outcome::Text(token)
        });
        Ok(call.promise)
    }

    /// Ends the acquisition in flight, if any: a lock it wins is released at once.
    #[napi]
    pub fn cancel(&self) {
        if let Some(cancel) = sync::lock(&self.acquiring).take() {
            cancel.cancel();
        }
    }

    /// Stops refreshing the held lock and leaves it to expire (its user set `isLocked` false
    /// by hand, after which maestro's refresh stops and its release deletes nothing).
    #[napi]
    pub fn forget(&self) {
        if let Some(held) = sync::lock(&self.held).take() {
            held.watch.stop();
        }
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

/// Forgets the hold natively once it is lost, and tells JS.
struct LostFlag {
    js: JsSink,
    held: Arc<Mutex<Option<Held>>>,
}

impl Sink for LostFlag {
    fn refreshed(&self, listener: u32, sent: std::time::Instant, ttl: Duration) {
        self.js.refreshed(listener, sent, ttl);
    }

    fn lost(&self, listener: u32, error: LockError, last: Confirmed, token: &[u8]) {
        {
            let mut held = sync::lock(&self.held);
            if held
                .as_ref()
                .is_some_and(|h| h.lease.token.as_bytes() == token)
            {
                *held = None;
            }
        }
        self.js.lost(listener, error, last, token);
    }
}
