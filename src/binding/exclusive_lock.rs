use super::completions::{Completer, NativeCompletions, Outcome};
use super::direct::{self, Link};
use super::error::{to_napi, OrThrow, Result};
use super::events::JsSink;
use super::heartbeat::{Beater, NativeHeartbeat};
use super::options::ConnectionOptions;
use super::promises::JsThread;
use crate::core::basics::error::LockError;
use crate::core::basics::sync;
use crate::core::basics::token::format_fence;
use crate::core::basics::validate;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use crate::core::ops::carried_exclusive::{ExclusiveAttempt, ExclusiveRelease};
use crate::core::ops::exclusive::{Claim, Exclusive, ExclusiveSpec, Terms};
use crate::core::ops::route::FirstAttempt;
use crate::core::ops::signals::{Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Limits, Watch, Watchdog};
use crate::core::wait::owner::Owner;
use napi::bindgen_prelude::{Env, PromiseRaw};
use napi_derive::napi;
use std::rc::Rc;
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

/// What a hold is taken with, read from the instance's fields at each `acquire()`, as the
/// original reads them.
fn hold_terms(
    contents: String,
    ttl_ms: f64,
    refresh_ms: f64,
) -> std::result::Result<Terms, LockError> {
    Ok(Terms {
        contents,
        ttl: validate::positive_ms("lock_ttl_ms", ttl_ms)?,
        refresh: validate::positive_ms("lock_refresh_ms", refresh_ms)?,
    })
}

struct Held {
    token: String,
    fence: u64,
    /// The value the lock key holds: release checks it.
    contents: String,
    watch: Watch,
}

/// What a won attempt needs to become the hold, prepared on the JS thread by `acquire()`
/// and used wherever the reply is read (the JS thread's connection or the runtime), so
/// both start the watchdog alike.
pub struct Winning {
    lock: Arc<Exclusive>,
    held: Arc<Mutex<Option<Held>>>,
    sink: Arc<dyn Sink>,
    listener: u32,
    terms: Terms,
    stall: Option<(Arc<Heartbeat>, Duration)>,
    max_hold: Option<Duration>,
    /// The JS environment whose lock it is (see core::owner).
    owner: Owner,
    /// Set by `unref()`: the environment's end leaves the lock to its TTL.
    unrefed: Arc<AtomicBool>,
}

impl Winning {
    pub fn lock(&self) -> &Arc<Exclusive> {
        &self.lock
    }

    /// The lock is ours: the watchdog keeps it alive from the moment its request was sent.
    /// Callable from the JS thread as from the runtime.
    pub fn hold(self, claim: Claim) -> Outcome {
        let limits = Limits {
            stall: self.stall,
            hold_until: self
                .max_hold
                .map(|max| tokio::time::Instant::from_std(claim.sent.at + max)),
            owner: Some(self.owner),
            outlives_owner: Some(self.unrefed),
        };
        let target = self.lock.target(&claim.token, &self.terms);
        let watchdog = Watchdog::of(self.lock.store());
        let (sink, listener) = (self.sink, self.listener);
        let watch = napi::bindgen_prelude::within_runtime_if_available(|| {
            watchdog.watch(target, claim.sent.at, limits, sink, listener)
        });
        *sync::lock(&self.held) = Some(Held {
            token: claim.token,
            fence: claim.fence,
            contents: self.terms.contents,
            watch,
        });
        Outcome::Bool(true)
    }

    /// The outcome of an attempt, as the promise of `acquire()` settles.
    pub fn settle(self, attempt: std::result::Result<Option<Claim>, LockError>) -> Outcome {
        match attempt {
            Ok(Some(claim)) => self.hold(claim),
            Ok(None) => Outcome::Bool(false),
            Err(err) => Outcome::Failed(err),
        }
    }
}

#[napi]
pub struct NativeExclusiveLock {
    lock: Arc<Exclusive>,
    heartbeat: Arc<Heartbeat>,
    beater: Rc<Beater>,
    max_stall: Option<Duration>,
    max_hold: Option<Duration>,
    held: Arc<Mutex<Option<Held>>>,
    want_refreshed: Arc<AtomicBool>,
    /// Its holder let the process exit while holding it (`unref()`): the end of the JS
    /// environment leaves the lock to its TTL, as the original's did, instead of releasing it.
    unrefed: Arc<AtomicBool>,
    completer: Completer,
    thread: Rc<JsThread>,
    /// The JS-thread connection for acquire() and release(), where the endpoint allows one.
    direct: Option<Rc<Link>>,
}

#[napi]
impl NativeExclusiveLock {
    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: ConnectionOptions,
        options: ExclusiveLockOptions,
        heartbeat: &NativeHeartbeat,
        completions: &NativeCompletions,
    ) -> Result<Self> {
        validate::positive_ms("lock_ttl_ms", options.lock_ttl_ms).or_throw(&env)?;
        validate::positive_ms("lock_refresh_ms", options.lock_refresh_ms).or_throw(&env)?;
        let max_stall =
            validate::non_negative_ms("max_stall_ms", options.max_stall_ms).or_throw(&env)?;
        // The JS layer beats every 100 ms; a shorter budget would call a healthy loop stalled.
        if !max_stall.is_zero() && max_stall < Duration::from_millis(250) {
            return Err(to_napi(
                &env,
                LockError::invalid_range(
                    "max_stall_ms",
                    "max_stall_ms must be 0 (no stall guard) or at least 250",
                ),
            ));
        }
        let max_hold = options
            .max_hold_ms
            .map(|ms| validate::positive_ms("max_hold_ms", ms))
            .transpose()
            .or_throw(&env)?;
        let command_timeout = options
            .command_timeout_ms
            .map(|ms| validate::positive_ms("command_timeout_ms", ms))
            .transpose()
            .or_throw(&env)?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        validate::key("name", &options.name).or_throw(&env)?;
        let spec = ExclusiveSpec {
            name: options.name,
            key_prefix: options.key_prefix,
            client_key_prefix: options.client_key_prefix.unwrap_or_default(),
        };
        let store = Store::shared(connection.endpoint().or_throw(&env)?);
        let (completer, thread) = (completions.completer(), completions.thread().clone());
        Ok(NativeExclusiveLock {
            direct: Link::of(&store, &thread, &completer),
            lock: Arc::new(Exclusive::new(store, spec, command_timeout)),
            heartbeat: heartbeat.inner.clone(),
            beater: heartbeat.beater(),
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            max_hold,
            held: Arc::new(Mutex::new(None)),
            want_refreshed: Arc::new(AtomicBool::new(false)),
            unrefed: Arc::new(AtomicBool::new(false)),
            completer,
            thread,
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

    /// Whether a refresh of the held lock is on its way to Redis (the original's
    /// `is_refreshing`).
    #[napi(getter)]
    pub fn refreshing(&self) -> bool {
        sync::lock(&self.held)
            .as_ref()
            .is_some_and(|held| held.watch.refreshing())
    }

    /// Whether a hold lets its process exit (`unref()`): then the end of the JS environment
    /// leaves it to its TTL instead of releasing it.
    #[napi]
    pub fn set_unrefed(&self, unrefed: bool) {
        self.unrefed.store(unrefed, Ordering::Relaxed);
    }

    /// Whether `refreshed` events should cross into JavaScript.
    #[napi]
    pub fn want_refreshed(&self, want: bool) {
        self.want_refreshed.store(want, Ordering::Relaxed);
    }

    /// One attempt with the instance's `lock_contents`, `lock_ttl_ms` and `lock_refresh_ms`
    /// (arguments, not an object: this is the hot path); resolves with whether it won. While
    /// held, the watchdog refreshes the lock and tells `listener` of `refreshed` and `lost`.
    /// `keep` and `beat` are changes to this thread's liveness counts (see `liveness`).
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
    ) -> Result<PromiseRaw<'env, ()>> {
        let terms = hold_terms(lock_contents, lock_ttl_ms, lock_refresh_ms).or_throw(&env)?;
        let call = self.thread.call(&env, None)?;
        let sink: Arc<dyn Sink> = Arc::new(JsSink::new(
            self.completer.clone(),
            self.want_refreshed.clone(),
        ));
        // A beat now, on the JS thread: the heartbeat may be stale from before this hold.
        self.heartbeat.beat();
        let winning = Winning {
            lock: self.lock.clone(),
            held: self.held.clone(),
            sink,
            listener,
            terms,
            stall: self.max_stall.map(|max| (self.heartbeat.clone(), max)),
            max_hold: self.max_hold,
            owner: self.thread.owner().clone(),
            unrefed: self.unrefed.clone(),
        };
        // The JS-thread connection only once the scripts are known loaded: the watchdog's
        // refreshes must be one round trip from the first, which the runtime's path makes
        // sure of (as DistributedLock's autoRefresh).
        let attempt = FirstAttempt::on(self.lock.store()).watched(true);
        let sender = attempt
            .carried()
            .then(|| self.direct.as_ref().and_then(|link| link.sender()))
            .flatten();
        self.liveness(keep, beat);
        if let Some(sender) = sender {
            let attempt = ExclusiveAttempt::new(winning.lock(), &winning.terms);
            sender.send(call.id, attempt, move |result| winning.settle(result));
            return Ok(call.promise);
        }
        self.completer.run(call.id, async move {
            let watchdog = Watchdog::of(winning.lock().store());
            if let Err(err) = watchdog.prepare(winning.lock().command_timeout()).await {
                return Outcome::Failed(err);
            }
            let attempt = winning.lock().acquire(&winning.terms).await;
            winning.settle(attempt)
        });
        Ok(call.promise)
    }

    /// Stops refreshing and deletes the lock if it is still ours; resolves with whether it
    /// was. `keep` and `beat` as for `acquire`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: Env, keep: i32, beat: i32) -> Result<PromiseRaw<'env, ()>> {
        let call = self.thread.call(&env, None)?;
        self.liveness(keep, beat);
        // Stopped now, on the JS thread: no refresh is sent after this point, and the answer
        // of one already in flight is dropped, so it cannot report our own delete as a loss.
        let Some(held) = sync::lock(&self.held).take() else {
            self.completer.run(call.id, async { Outcome::Bool(false) });
            return Ok(call.promise);
        };
        held.watch.stop();
        let (lock, token, contents) = (self.lock.clone(), held.token, held.contents);
        if let Some(sender) = self.direct.as_ref().and_then(|link| link.sender()) {
            let release = ExclusiveRelease::new(&lock, token, contents);
            sender.send(call.id, release, direct::boolean);
            return Ok(call.promise);
        }
        self.completer.run(call.id, async move {
            match lock.release(&token, &contents).await {
                Ok(deleted) => Outcome::Bool(deleted),
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }

    /// Resolves with the holder's `{ lock_ttl_ms, lock_contents }`, or null when free.
    #[napi(ts_return_type = "Promise<{ lock_ttl_ms: number, lock_contents: string } | null>")]
    pub fn inspect<'env>(&self, env: Env) -> Result<PromiseRaw<'env, ()>> {
        let call = self.thread.call(&env, None)?;
        let lock = self.lock.clone();
        self.completer.run(call.id, async move {
            match lock.inspect().await {
                Ok(found) => Outcome::Inspected(found),
                Err(err) => Outcome::Failed(err),
            }
        });
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
            self.thread.keep(keep.signum());
        }
        if beat != 0 {
            // The JS layer hands the heartbeat over only when `hold(0)` said a native timer
            // beats; a closing timer (the environment ending) has no lock left to guard.
            self.beater.hold(beat.signum());
        }
    }
}
