use super::error::{to_napi, OrThrow, Result};
use super::events::{EventArgs, JsSink};
use super::heartbeat::NativeHeartbeat;
use super::options::ConnectionOptions;
use crate::core::error::LockError;
use crate::core::exclusive::{Exclusive, ExclusiveSpec};
use crate::core::lock::DEFAULT_COMMAND_TIMEOUT;
use crate::core::store::Store;
use crate::core::sync;
use crate::core::token::format_fence;
use crate::core::validate;
use crate::core::watchdog::{Heartbeat, Limits, Watch, Watchdog};
use napi::bindgen_prelude::{Function, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Options of the native ExclusiveLock; the JS layer has already checked their types and
/// the original's rules (required name, ttl/refresh pairing, the 500 ms margin).
#[napi(object)]
pub struct ExclusiveLockOptions {
    pub name: String,
    pub key_prefix: String,
    /// The `keyPrefix` of the user's ioredis client.
    pub client_key_prefix: Option<String>,
    pub lock_contents: String,
    pub lock_ttl_ms: f64,
    pub lock_refresh_ms: f64,
    /// Give the lock up when the JS thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    /// Give the lock up this long after acquiring it, whatever happens.
    pub max_hold_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
}

/// `inspect()`'s answer, in the original's field names.
#[napi(object)]
pub struct Inspection {
    #[napi(js_name = "lock_ttl_ms")]
    pub lock_ttl_ms: f64,
    #[napi(js_name = "lock_contents")]
    pub lock_contents: String,
}

struct Held {
    token: String,
    fence: u64,
    watch: Watch,
}

#[napi]
pub struct NativeExclusiveLock {
    lock: Arc<Exclusive>,
    heartbeat: Arc<Heartbeat>,
    max_stall: Option<Duration>,
    max_hold: Option<Duration>,
    held: Arc<Mutex<Option<Held>>>,
    want_refreshed: Arc<AtomicBool>,
}

#[napi]
impl NativeExclusiveLock {
    #[napi(constructor)]
    pub fn new(
        connection: ConnectionOptions,
        options: ExclusiveLockOptions,
        heartbeat: &NativeHeartbeat,
    ) -> Result<Self> {
        let ttl = validate::positive_ms("lock_ttl_ms", options.lock_ttl_ms).or_throw()?;
        let refresh =
            validate::positive_ms("lock_refresh_ms", options.lock_refresh_ms).or_throw()?;
        let max_stall =
            validate::non_negative_ms("max_stall_ms", options.max_stall_ms).or_throw()?;
        // The JS layer beats every 100 ms; a shorter budget would call a healthy loop stalled.
        if !max_stall.is_zero() && max_stall < Duration::from_millis(250) {
            return Err(to_napi(LockError::invalid_range(
                "max_stall_ms",
                "max_stall_ms must be 0 (no stall guard) or at least 250",
            )));
        }
        let max_hold = options
            .max_hold_ms
            .map(|ms| validate::positive_ms("max_hold_ms", ms))
            .transpose()
            .or_throw()?;
        let command_timeout = options
            .command_timeout_ms
            .map(|ms| validate::positive_ms("command_timeout_ms", ms))
            .transpose()
            .or_throw()?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        validate::key("name", &options.name).or_throw()?;
        let spec = ExclusiveSpec {
            name: options.name,
            key_prefix: options.key_prefix,
            client_key_prefix: options.client_key_prefix.unwrap_or_default(),
            contents: options.lock_contents,
            ttl,
            refresh,
        };
        let store = Store::shared(connection.endpoint()?);
        Ok(NativeExclusiveLock {
            lock: Arc::new(Exclusive::new(store, spec, command_timeout)),
            heartbeat: heartbeat.inner.clone(),
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            max_hold,
            held: Arc::new(Mutex::new(None)),
            want_refreshed: Arc::new(AtomicBool::new(false)),
        })
    }

    #[napi(getter)]
    pub fn key(&self) -> String {
        self.lock.key.clone()
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.lock.name.clone()
    }

    /// The fencing token of the current hold, if any.
    #[napi(getter)]
    pub fn fence(&self) -> Option<String> {
        sync::lock(&self.held)
            .as_ref()
            .map(|h| format_fence(h.fence))
    }

    /// Whether `refreshed` events should cross into JavaScript.
    #[napi]
    pub fn want_refreshed(&self, want: bool) {
        self.want_refreshed.store(want, Ordering::Relaxed);
    }

    /// One attempt. On success the watchdog refreshes the lock and reports through
    /// `on_event('refreshed')` / `on_event('lost', code, message)`.
    #[napi]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        on_event: Function<EventArgs, ()>,
    ) -> Result<PromiseRaw<'env, bool>> {
        let callback = on_event
            .build_threadsafe_function::<EventArgs>()
            .weak::<true>()
            .build()?;
        let sink = Arc::new(JsSink {
            callback,
            want_refreshed: self.want_refreshed.clone(),
        });
        // A beat now, on the JS thread: the heartbeat may be stale from before this hold.
        self.heartbeat.beat();
        let limits_stall = self.max_stall.map(|max| (self.heartbeat.clone(), max));
        let (lock, held, max_hold) = (self.lock.clone(), self.held.clone(), self.max_hold);
        env.spawn_future(async move {
            let watchdog = Watchdog::of(lock.store());
            watchdog.prepare(lock.command_timeout()).await.or_throw()?;
            let Some(claim) = lock.acquire().await.or_throw()? else {
                return Ok(false);
            };
            let limits = Limits {
                stall: limits_stall,
                hold_until: max_hold.map(|max| tokio::time::Instant::from_std(claim.sent.at + max)),
            };
            let watch = watchdog.watch(&lock.target(&claim.token), claim.sent.at, limits, sink);
            *sync::lock(&held) = Some(Held {
                token: claim.token,
                fence: claim.fence,
                watch,
            });
            Ok(true)
        })
    }

    /// Stops refreshing and deletes the lock if it is still ours.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        // Stopped now, on the JS thread: no refresh is sent after this point, and the answer
        // of one already in flight is dropped, so it cannot report our own delete as a loss.
        let held = sync::lock(&self.held).take();
        if let Some(held) = &held {
            held.watch.stop();
        }
        let lock = self.lock.clone();
        env.spawn_future(async move {
            match held {
                Some(held) => lock.release(&held.token).await.or_throw(),
                None => Ok(false),
            }
        })
    }

    #[napi]
    pub fn inspect<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<Inspection>>> {
        let lock = self.lock.clone();
        env.spawn_future(async move {
            let found = lock.inspect().await.or_throw()?;
            Ok(found.map(|i| Inspection {
                lock_ttl_ms: i.ttl_ms as f64,
                lock_contents: i.contents,
            }))
        })
    }
}
