use super::cancel::NativeCancel;
use super::completions::{Completer, Granted, NativeCompletions, Outcome};
use super::direct::{self, Link, Sender};
use super::error::{OrThrow, Result};
use super::events::JsSink;
use super::heartbeat::NativeHeartbeat;
use super::options::ConnectionOptions;
use super::promises::JsThread;
use super::win::Win;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::validate;
use crate::core::basics::validate::DEFAULT_COMMAND_TIMEOUT;
use crate::core::ops::carried::{self, Exists, Mode};
use crate::core::ops::lock::{Attempt, Locker, Plan, WaitStart};
use crate::core::ops::route::FirstAttempt;
use crate::core::ops::signals::{Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Limits, Watchdog};
use crate::core::ops::won::{won, Won};
use crate::core::wait::wake::Caller;
use napi::bindgen_prelude::{Env, Object, PromiseRaw};
use napi_derive::napi;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
}

const DEFAULT_PREFIX: &str = "lock:";
const DEFAULT_TTL: Duration = Duration::from_millis(30_000);
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// The native side of one DistributedLock. Handles are plain JS objects holding their
/// lock's token and deadline; their `release` and `extend` come back here with those.
#[napi]
pub struct NativeDistributedLock {
    pub(super) locker: Arc<Locker>,
    default_ttl: Duration,
    retry_delay: Duration,
    max_retries: u32,
    heartbeat: Arc<Heartbeat>,
    /// The user's ioredis `keyPrefix`: fenced resources carry it, not our lock prefix.
    client_prefix: String,
    pub(super) completer: Completer,
    pub(super) thread: Rc<JsThread>,
    /// The JS-thread connection for one-round-trip calls, where the endpoint allows one.
    pub(super) direct: Option<Rc<Link>>,
    /// Where the watchdog's news of every `autoRefresh` hold goes (by listener id).
    sink: Arc<dyn Sink>,
    /// Its waiters may start on a lent lease (see core::ops::carried_handoff).
    lend_on_handover: bool,
}

/// What an `autoRefresh` acquisition needs, prepared on the JS thread.
pub struct AutoRefresh {
    sink: Arc<dyn Sink>,
    listener: u32,
    limits: Limits,
}

impl AutoRefresh {
    /// Keeps `lease` alive from now on, refreshing every third of its TTL. Callable from
    /// the JS thread as from the runtime.
    fn start(self, locker: &Locker, lease: &Lease) -> u64 {
        let target = locker.target(lease, lease.ttl() / 3);
        let watchdog = Watchdog::of(locker.store());
        let sent = lease.sent().at;
        napi::bindgen_prelude::within_runtime_if_available(|| {
            watchdog.watch_id(target, sent, self.limits, self.sink, self.listener)
        })
    }
}

impl Granted {
    pub fn of(lease: &Lease, watch: Option<u64>) -> Granted {
        Granted {
            token: lease.token.clone(),
            fence: lease.fence,
            sent: lease.sent(),
            ttl: lease.ttl(),
            watch,
            lent_until: None,
        }
    }

    /// A handle answered as its handover was sent, on a lease valid until `until` (see
    /// core::ops::carried_handoff).
    pub fn lent(lease: &Lease, until: std::time::Instant) -> Granted {
        Granted {
            lent_until: Some(until),
            ..Granted::of(lease, None)
        }
    }
}

/// Hands the lease out, kept alive by the watchdog when `auto` asks for it, unless the core
/// says it is released instead (see core::ops::won).
pub fn finish(locker: &Locker, lease: Lease, auto: Option<AutoRefresh>) -> Outcome {
    let lease = match won(locker, lease) {
        Won::Deliver(lease) => lease,
        Won::Orphaned(orphan) => {
            let err = napi::bindgen_prelude::within_runtime_if_available(|| orphan.release());
            return Outcome::Failed(err);
        }
    };
    let watch = auto.map(|auto| auto.start(locker, &lease));
    Outcome::Lease(Granted::of(&lease, watch))
}

/// Loads the refresh script before the lock is taken, so every refresh is one round trip.
async fn prepare(
    locker: &Locker,
    auto: &Option<AutoRefresh>,
) -> std::result::Result<(), LockError> {
    if auto.is_some() {
        let watchdog = Watchdog::of(locker.store());
        watchdog.prepare(locker.command_timeout()).await?;
    }
    Ok(())
}

fn settled(result: std::result::Result<Outcome, LockError>) -> Outcome {
    result.unwrap_or_else(Outcome::Failed)
}

fn cancel_token(cancel: Option<&NativeCancel>) -> CancellationToken {
    cancel.map(|c| c.token.clone()).unwrap_or_default()
}

#[napi]
impl NativeDistributedLock {
    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: ConnectionOptions,
        options: DistributedLockOptions,
        heartbeat: &NativeHeartbeat,
        completions: &NativeCompletions,
    ) -> Result<Self> {
        let ms = |value: Option<f64>, arg, default| -> Result<Duration> {
            value
                .map(|v| validate::positive_ms(arg, v))
                .unwrap_or(Ok(default))
                .or_throw(&env)
        };
        let default_ttl = ms(options.default_ttl_ms, "defaultTtlMs", DEFAULT_TTL)?;
        let command_timeout = ms(
            options.command_timeout_ms,
            "commandTimeoutMs",
            DEFAULT_COMMAND_TIMEOUT,
        )?;
        let retry_delay = options
            .retry_delay_ms
            .map(|v| validate::non_negative_ms("retryDelayMs", v))
            .unwrap_or(Ok(DEFAULT_RETRY_DELAY))
            .or_throw(&env)?;
        let max_retries = options
            .max_retries
            .map(|v| validate::count("maxRetries", v, validate::MAX_RETRIES))
            .unwrap_or(Ok(0))
            .or_throw(&env)?;
        let client_prefix = options.client_key_prefix.unwrap_or_default();
        let prefix = format!(
            "{client_prefix}{}",
            options.key_prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
        );
        let store = Store::shared(connection.endpoint().or_throw(&env)?);
        let completer = completions.completer();
        let thread = completions.thread().clone();
        let owner = thread.owner().clone();
        let never_refreshed = Arc::new(AtomicBool::new(false));
        Ok(NativeDistributedLock {
            sink: Arc::new(JsSink::new(completer.clone(), never_refreshed)),
            direct: Link::of(&store, &thread, &completer),
            locker: Arc::new(
                Locker::new(store, prefix, command_timeout)
                    .fair(options.fair.unwrap_or(false))
                    .owned_by(owner),
            ),
            default_ttl,
            retry_delay,
            max_retries,
            heartbeat: heartbeat.inner.clone(),
            client_prefix,
            completer,
            thread,
            lend_on_handover: options.lend_on_handover.unwrap_or(false),
        })
    }

    /// `listener` present means `autoRefresh`: events go there, and the hold is given up
    /// after 3 x TTL of a blocked JS thread.
    fn auto_refresh(&self, ttl: Duration, listener: Option<u32>) -> Option<AutoRefresh> {
        let listener = listener?;
        self.heartbeat.beat();
        Some(AutoRefresh {
            sink: self.sink.clone(),
            listener,
            limits: Limits {
                stall: Some((self.heartbeat.clone(), ttl.saturating_mul(3))),
                hold_until: None,
                owner: Some(self.thread.owner().clone()),
                outlives_owner: None,
            },
        })
    }

    /// Sends a first attempt on the JS-thread connection. `auto` comes back when it cannot
    /// go there (see `direct_sender`).
    fn send_attempt(
        &self,
        id: u32,
        key: &str,
        ttl: Duration,
        auto: Option<AutoRefresh>,
        mode: Mode,
    ) -> std::result::Result<(), Option<AutoRefresh>> {
        let attempt = FirstAttempt::of(&self.locker).watched(auto.is_some());
        let Some(sender) = self.direct_sender(attempt.in_mode(&mode)) else {
            return Err(auto);
        };
        self.attempt_on(sender, id, key, ttl, mode, auto);
        Ok(())
    }

    /// Sends a first attempt on `sender`; a won lock becomes the caller's handle.
    fn attempt_on(
        &self,
        sender: Sender,
        id: u32,
        key: &str,
        ttl: Duration,
        mode: Mode,
        auto: Option<AutoRefresh>,
    ) {
        let attempt = carried::Attempt::new(&self.locker, key, ttl, mode);
        let (locker, win) = (self.locker.clone(), Win::Handle(auto));
        sender.send(id, attempt, move |result| win.settle(&locker, result));
    }

    /// The JS-thread connection, when it is open and the core lets `attempt` go there.
    fn direct_sender(&self, attempt: FirstAttempt) -> Option<Sender> {
        if !attempt.carried() {
            return None;
        }
        self.direct.as_ref()?.sender()
    }

    /// Call `id` of this JS thread, as a waiter's caller (see core::wake::Caller).
    pub(super) fn caller(&self, id: u32) -> Caller {
        Caller {
            thread: Rc::as_ptr(&self.thread) as usize,
            id,
            lent_start: self.lend_on_handover,
        }
    }

    fn ttl(&self, ttl_ms: Option<f64>) -> std::result::Result<Duration, LockError> {
        match ttl_ms {
            Some(ms) => validate::positive_ms("ttlMs", ms),
            None => Ok(self.default_ttl),
        }
    }

    /// Resolves with `owner` filled in as the handle, after up to `maxRetries` retries.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn acquire<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        ttl_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
        listener: Option<u32>,
    ) -> Result<PromiseRaw<'env, ()>> {
        validate::key("key", &key).or_throw(&env)?;
        let ttl = self.ttl(ttl_ms).or_throw(&env)?;
        let call = self.thread.call(&env, Some(&owner))?;
        let mut auto = self.auto_refresh(ttl, listener);
        let (locker, retries, delay) = (self.locker.clone(), self.max_retries, self.retry_delay);
        let cancel = cancel_token(cancel);
        // An autoRefresh waiter is handed its lock through the runtime (its watch starts
        // there); others may be answered by a release on this thread.
        let caller = auto.is_none().then(|| self.caller(call.id));
        let mode = Mode {
            plan: Plan::Retries {
                retries,
                delay,
                caller,
            },
            cancel: cancel.clone(),
        };
        match self.send_attempt(call.id, &key, ttl, auto, mode) {
            Ok(()) => return Ok(call.promise),
            Err(back) => auto = back,
        }
        self.completer.run(call.id, async move {
            settled(
                async {
                    prepare(&locker, &auto).await?;
                    let lease = locker.acquire(&key, ttl, retries, delay, &cancel).await?;
                    Ok(finish(&locker, lease, auto))
                }
                .await,
            )
        });
        Ok(call.promise)
    }

    /// Resolves with `owner` filled in as the handle, or with `null` when the key is held.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn try_acquire<'env>(
        &self,
        env: Env,
        owner: Object<'env>,
        key: String,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<PromiseRaw<'env, ()>> {
        validate::key("key", &key).or_throw(&env)?;
        let ttl = self.ttl(ttl_ms).or_throw(&env)?;
        let call = self.thread.call(&env, Some(&owner))?;
        let auto = self.auto_refresh(ttl, listener);
        let once = Mode {
            plan: Plan::Once,
            cancel: CancellationToken::new(),
        };
        let auto = match self.send_attempt(call.id, &key, ttl, auto, once) {
            Ok(()) => return Ok(call.promise),
            Err(auto) => auto,
        };
        let locker = self.locker.clone();
        self.completer.run(call.id, async move {
            if let Err(err) = prepare(&locker, &auto).await {
                return Outcome::Failed(err);
            }
            match locker.attempt(&key, ttl).await {
                Ok(Attempt::Acquired(lease)) => finish(&locker, lease, auto),
                Ok(Attempt::Held { .. }) => Outcome::NoHandle,
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }

    /// Resolves with `owner` filled in as the handle once won; rejects after `timeout_ms`.
    #[napi(ts_return_type = "Promise<unknown>")]
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
    ) -> Result<PromiseRaw<'env, ()>> {
        validate::key("key", &key).or_throw(&env)?;
        let timeout = validate::non_negative_ms("timeoutMs", timeout_ms).or_throw(&env)?;
        let ttl = self.ttl(ttl_ms).or_throw(&env)?;
        let call = self.thread.call(&env, Some(&owner))?;
        let auto = self.auto_refresh(ttl, listener);
        let (locker, poll) = (self.locker.clone(), self.retry_delay);
        let cancel = cancel_token(cancel);
        let caller = auto.is_none().then(|| self.caller(call.id));
        // Joined here, not on the runtime: a release this thread makes next can hand the
        // lock to it at once, however late the runtime gets to the wait.
        let ticket = locker.join(&key, ttl, caller);
        let deadline = std::time::Instant::now() + timeout;
        // The first attempt is the one `acquire` makes, on this thread's connection when the
        // core lets it go there; a held lock continues the wait on the runtime.
        let attempt = FirstAttempt::of(&locker)
            .watched(auto.is_some())
            .cancelled_by(&cancel)
            .waiting_as(&ticket);
        if let Some(sender) = self.direct_sender(attempt) {
            let mode = Mode {
                plan: Plan::Until {
                    ticket,
                    deadline,
                    poll,
                },
                cancel,
            };
            self.attempt_on(sender, call.id, &key, ttl, mode, auto);
            return Ok(call.promise);
        }
        self.completer.run(call.id, async move {
            settled(
                async {
                    prepare(&locker, &auto).await?;
                    let start = WaitStart::Attempt;
                    let lease = locker
                        .wait_joined(ticket, &key, ttl, deadline, poll, &cancel, start)
                        .await?;
                    Ok(finish(&locker, lease, auto))
                }
                .await,
            )
        });
        Ok(call.promise)
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
        validate::key("key", &key).or_throw(&env)?;
        let redis_key = format!("{}{key}", self.client_prefix).into_bytes();
        let call = self.thread.call(&env, None)?;
        let locker = self.locker.clone();
        self.completer.run(call.id, async move {
            match locker.fenced_set(&redis_key, &value, &fence).await {
                Ok(written) => Outcome::Bool(written),
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }

    /// Resolves with whether anyone holds `key`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: Env, key: String) -> Result<PromiseRaw<'env, ()>> {
        validate::key("key", &key).or_throw(&env)?;
        let call = self.thread.call(&env, None)?;
        let locker = self.locker.clone();
        if let Some(link) = &self.direct {
            if link.send(call.id, Exists::new(&locker, &key), direct::boolean) {
                return Ok(call.promise);
            }
        }
        self.completer.run(call.id, async move {
            match locker.is_locked(&key).await {
                Ok(locked) => Outcome::Bool(locked),
                Err(err) => Outcome::Failed(err),
            }
        });
        Ok(call.promise)
    }
}
