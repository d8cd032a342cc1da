use super::completions::{Completer, NativeCompletions, Outcome};
use super::direct::{self, Link, Sender};
use super::error::{OrThrow, Result};
use super::events::JsSink;
use super::heartbeat::NativeHeartbeat;
use super::options::ConnectionOptions;
use super::promises::JsThread;
use super::win::Win;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::sync;
use crate::core::basics::validate;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use crate::core::ops::carried::{Attempt, Mode, Release};
use crate::core::ops::lock::{Locker, Plan};
use crate::core::ops::route::FirstAttempt;
use crate::core::ops::signals::{Confirmed, Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Limits, Watch, Watchdog};
use napi::bindgen_prelude::{Env, PromiseRaw};
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
    /// This thread's connection to the same server, for one-round-trip calls.
    direct: Option<Rc<Link>>,
}

#[napi]
impl NativeLockService {
    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: ConnectionOptions,
        options: LockServiceOptions,
        heartbeat: &NativeHeartbeat,
        completions: &NativeCompletions,
    ) -> Result<Self> {
        let max_stall =
            validate::non_negative_ms("maxStallMs", options.max_stall_ms).or_throw(&env)?;
        let command_timeout = options
            .command_timeout_ms
            .map(|ms| validate::positive_ms("commandTimeoutMs", ms))
            .transpose()
            .or_throw(&env)?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        let store = Store::shared(connection.endpoint().or_throw(&env)?);
        let (completer, thread) = (completions.completer(), completions.thread().clone());
        Ok(NativeLockService {
            direct: Link::of(&store, &thread, &completer),
            locker: Arc::new(
                Locker::new(store, "", command_timeout).owned_by(thread.owner().clone()),
            ),
            retry_delay: validate::non_negative_ms("retryDelayMs", options.retry_delay_ms)
                .or_throw(&env)?,
            max_backoff: validate::non_negative_ms("maxBackoffMs", options.max_backoff_ms)
                .or_throw(&env)?,
            held: Arc::new(Mutex::new(None)),
            acquiring: Mutex::new(None),
            heartbeat: heartbeat.inner.clone(),
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            completer,
            thread,
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
        env: Env,
        key: String,
        ttl_ms: f64,
        lock_ttl_ms: Option<f64>,
        max_wait_ms: Option<f64>,
        listener: u32,
    ) -> Result<PromiseRaw<'env, ()>> {
        validate::key("lockKey", &key).or_throw(&env)?;
        let ttl = validate::positive_ms("ttl", ttl_ms).or_throw(&env)?;
        let lock_ttl = match lock_ttl_ms {
            Some(ms) => validate::positive_ms("lockTtl", ms).or_throw(&env)?,
            None => ttl,
        };
        let max_wait = match max_wait_ms {
            Some(ms) => validate::non_negative_ms("maxWaitTime", ms).or_throw(&env)?,
            None => lock_ttl.saturating_mul(3),
        };
        let call = self.thread.call(&env, None)?;
        let cancel = CancellationToken::new();
        *sync::lock(&self.acquiring) = Some(cancel.clone());
        // Every refresh is told: maestro's users may end a hold by setting isLocked false,
        // which the JS layer sees only then (one crossing per third of a TTL).
        let refreshes = Arc::new(AtomicBool::new(true));
        let sink: Arc<dyn Sink> = Arc::new(LostFlag {
            js: JsSink::new(self.completer.clone(), refreshes),
            held: self.held.clone(),
        });
        self.heartbeat.beat();
        let hold = ServiceHold {
            held: self.held.clone(),
            // The original refreshed every third of the instance's TTL even when this hold's
            // TTL was shorter, letting it expire first; a third of the shorter one is safe.
            every: ttl.min(lock_ttl) / 3,
            refresh_ttl: ttl.max(lock_ttl),
            limits: Limits {
                stall: self.max_stall.map(|max| (self.heartbeat.clone(), max)),
                hold_until: None,
                owner: Some(self.thread.owner().clone()),
                outlives_owner: None,
            },
            sink,
            listener,
        };
        let locker = self.locker.clone();
        // Joined before the first attempt, as every waiter: a release from now on wakes it.
        let ticket = locker.join(&key, lock_ttl, None);
        let plan = Plan::Backoff {
            ticket,
            deadline: std::time::Instant::now() + max_wait,
            base: self.retry_delay,
            cap: self.max_backoff,
        };
        let mode = Mode { plan, cancel };
        if let Some(sender) = self.direct_sender(&mode) {
            let attempt = Attempt::new(&locker, &key, lock_ttl, mode);
            let win = Win::Service(hold);
            sender.send(call.id, attempt, move |result| win.settle(&locker, result));
            return Ok(call.promise);
        }
        self.completer.run(call.id, async move {
            let watchdog = Watchdog::of(locker.store());
            if let Err(err) = watchdog.prepare(locker.command_timeout()).await {
                return Outcome::Failed(err);
            }
            let Mode { plan, cancel } = mode;
            let result = locker.pursue(plan, &key, lock_ttl, &cancel).await;
            Win::Service(hold).settle(&locker, result)
        });
        Ok(call.promise)
    }

    /// The JS-thread connection, when it is open and the core lets the first attempt, in
    /// `mode`, of a hold the watchdog keeps go there.
    fn direct_sender(&self, mode: &Mode) -> Option<Sender> {
        let attempt = FirstAttempt::of(&self.locker).watched(true).in_mode(mode);
        attempt
            .carried()
            .then(|| self.direct.as_ref()?.sender())
            .flatten()
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
    pub fn release<'env>(&self, env: Env) -> Result<PromiseRaw<'env, ()>> {
        let call = self.thread.call(&env, None)?;
        // Stopped on the JS thread, before the release is sent (see NativeExclusiveLock).
        let held = sync::lock(&self.held).take();
        if let Some(held) = &held {
            held.watch.stop();
        }
        let Some(held) = held else {
            self.completer.settle(call.id, Outcome::Bool(true));
            return Ok(call.promise);
        };
        let lease = Arc::new(held.lease);
        // Waiters of ours to wake, or a lock already released: through the runtime.
        let direct = Release::new(&self.locker, &lease, true);
        let sender = direct.and_then(|release| Some((release, self.direct.as_ref()?.sender()?)));
        if let Some((release, sender)) = sender {
            sender.send(call.id, release, direct::boolean);
            return Ok(call.promise);
        }
        let locker = self.locker.clone();
        self.completer.run(call.id, async move {
            let answer = async {
                if locker.release(&lease).await? {
                    return Ok(true);
                }
                Ok(!locker.is_locked(&lease.key).await?)
            };
            match answer.await {
                Ok(answer) => Outcome::Bool(answer),
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }
}

/// What a won acquisition starts: the watchdog's refresh of it, with maestro's schedule,
/// and the service's record of the hold; its caller is answered with the lock's value.
pub struct ServiceHold {
    held: Arc<Mutex<Option<Held>>>,
    every: Duration,
    refresh_ttl: Duration,
    limits: Limits,
    sink: Arc<dyn Sink>,
    listener: u32,
}

impl ServiceHold {
    /// Callable on the JS thread as on the runtime.
    pub fn start(self, locker: &Locker, lease: Lease) -> Outcome {
        let mut target = locker.target(&lease, self.every.max(Duration::from_millis(1)));
        target.ttl = self.refresh_ttl;
        let watchdog = Watchdog::of(locker.store());
        let sent = lease.sent().at;
        let watch = napi::bindgen_prelude::within_runtime_if_available(|| {
            watchdog.watch(target, sent, self.limits, self.sink, self.listener)
        });
        let token = lease.token.clone();
        *sync::lock(&self.held) = Some(Held { lease, watch });
        Outcome::Text(token)
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
