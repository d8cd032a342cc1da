//! DistributedLock (@lilith/distributed-lock): its options and their defaults, and which
//! operation each call is and which way it goes. The decisions are the operations'
//! (ops/acquire.rs, ops/attempt.rs, ops/route.rs); this names them for the API.

use super::auto_refresh::{AutoRefresh, HandleWin};
use super::connection::LockConnection;
use super::granted::Granted;
use super::reply::{ready, ready_quorum, Reply};
use super::win::{self, Win};
use crate::core::backend::lock_store::{Fairness, LockStore};
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::basics::error::LockError;
use crate::core::basics::stats::{CallCounters, StatsSnapshot};
use crate::core::basics::validate::{self, DEFAULT_COMMAND_TIMEOUT};
use crate::core::ops::acquire::{Plan, Start};
use crate::core::ops::fast::acquire::{Mode, PlainAttempt};
use crate::core::ops::fast::quorum::QuorumAttempt;
use crate::core::ops::fast::IsLockedCall;
use crate::core::ops::lock::Locker;
use crate::core::ops::route::{FirstAttempt, Route, RouteFacts};
use crate::core::ops::signals::{self, Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::wait::owner::Owner;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `new DistributedLock(redis, options)`, as the caller gave them.
#[derive(Default)]
pub struct DistributedLockSettings {
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
    /// A waiter handed the lock by a release of its own thread starts as the handover is
    /// sent, on the releaser's lease, before Redis confirms it. Default false.
    pub lend_on_handover: Option<bool>,
    /// How long each lock's fence counter outlives the lock; 0 or Infinity: forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`. Default true.
    pub stats: Option<bool>,
}

const DEFAULT_PREFIX: &str = "lock:";
const DEFAULT_TTL: Duration = Duration::from_millis(30_000);
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// One DistributedLock: its locks' prefix and defaults, on a shared connection.
pub struct DistributedLock {
    pub(super) locker: Arc<Locker>,
    default_ttl: Duration,
    retry_delay: Duration,
    max_retries: u32,
    /// The user's ioredis `keyPrefix`: fenced resources carry it, not our lock prefix.
    client_prefix: String,
    heartbeat: Arc<Heartbeat>,
    /// Where the watchdog's news of every `autoRefresh` hold goes (by listener id).
    sink: Arc<dyn Sink>,
    lend_on_handover: bool,
}

fn ms_or(value: Option<f64>, arg: &'static str, default: Duration) -> Result<Duration, LockError> {
    value.map_or(Ok(default), |ms| validate::positive_ms(arg, ms))
}

impl DistributedLock {
    /// Checks `settings` (naming the option at fault) and opens nothing yet: the shared
    /// connection to `endpoint` connects on first use. Its waits and locks belong to `owner`.
    pub fn new(
        connection: &LockConnection,
        settings: DistributedLockSettings,
        owner: Owner,
        heartbeat: Arc<Heartbeat>,
        sink: Arc<dyn Sink>,
    ) -> Result<Self, LockError> {
        let default_ttl = ms_or(settings.default_ttl_ms, "defaultTtlMs", DEFAULT_TTL)?;
        let command_timeout = ms_or(
            settings.command_timeout_ms,
            "commandTimeoutMs",
            DEFAULT_COMMAND_TIMEOUT,
        )?;
        let retry_delay = settings
            .retry_delay_ms
            .map_or(Ok(DEFAULT_RETRY_DELAY), |ms| {
                validate::non_negative_ms("retryDelayMs", ms)
            })?;
        let max_retries = settings.max_retries.map_or(Ok(0), |n| {
            validate::count("maxRetries", n, validate::MAX_RETRIES)
        })?;
        let fence_retention =
            validate::fence_retention("fenceRetentionMs", settings.fence_retention_ms)?;
        let fair = settings.fair.unwrap_or(false);
        if fair && connection.store().backend().caps().fairness == Fairness::None {
            return Err(LockError::invalid_type(
                "fair",
                "fair is not supported over several Redis servers (Redlock): each would keep its own line of waiters; drop fair or use one Redis",
            ));
        }
        let client_prefix = settings.client_key_prefix.unwrap_or_default();
        let prefix = format!(
            "{client_prefix}{}",
            settings.key_prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
        );
        let locker = Locker::new(connection.store().clone(), prefix, command_timeout)
            .fair(fair)
            .fence_retention(fence_retention)
            .owned_by(owner)
            .counting(settings.stats.unwrap_or(true));
        let locker = Arc::new(locker);
        Ok(DistributedLock {
            locker: locker.clone(),
            default_ttl,
            retry_delay,
            max_retries,
            client_prefix,
            heartbeat,
            sink: signals::counted(locker.stats(), sink),
            lend_on_handover: settings.lend_on_handover.unwrap_or(false),
        })
    }

    /// The shared connection its calls go through.
    pub fn store(&self) -> &Arc<Store> {
        self.locker.store()
    }

    /// What its calls have done so far (see basics/stats.rs).
    pub fn stats(&self) -> StatsSnapshot {
        self.locker.stats().snapshot()
    }

    /// Where its calls are counted (an observer may be added there).
    pub fn counters(&self) -> &Arc<CallCounters> {
        self.locker.stats()
    }

    fn ttl(&self, ttl_ms: Option<f64>) -> Result<Duration, LockError> {
        ttl_ms.map_or(Ok(self.default_ttl), |ms| {
            validate::positive_ms("ttlMs", ms)
        })
    }

    /// `listener` present means `autoRefresh`: the watchdog keeps the lock alive and tells
    /// the listener (see auto_refresh.rs).
    fn auto_refresh(&self, ttl: Duration, listener: Option<u32>) -> Option<AutoRefresh> {
        let listener = listener?;
        let owner = self.locker.owner().clone();
        Some(AutoRefresh::new(
            ttl,
            &self.heartbeat,
            &self.sink,
            listener,
            owner,
        ))
    }

    /// `acquire(key, ttlMs)`, checked: one attempt, then up to `maxRetries` retries with
    /// backoff.
    pub fn acquire(
        &self,
        key: String,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<Acquisition<'_>, LockError> {
        self.acquisition(WaitPolicy::Retries, key, ttl_ms, listener)
    }

    /// `tryAcquire(key, ttlMs)`, checked: one attempt; not won is no handle, not an error.
    pub fn try_acquire(
        &self,
        key: String,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<Acquisition<'_>, LockError> {
        self.acquisition(WaitPolicy::Once, key, ttl_ms, listener)
    }

    /// `waitForLock(key, timeoutMs, ttlMs)`, checked: attempts until `timeout_ms` has
    /// passed, woken by releases, polling every `retryDelayMs`.
    pub fn wait_for_lock(
        &self,
        key: String,
        timeout_ms: f64,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<Acquisition<'_>, LockError> {
        let timeout = validate::non_negative_ms("timeoutMs", timeout_ms)?;
        self.acquisition(WaitPolicy::Wait(timeout), key, ttl_ms, listener)
    }

    fn acquisition(
        &self,
        kind: WaitPolicy,
        key: String,
        ttl_ms: Option<f64>,
        listener: Option<u32>,
    ) -> Result<Acquisition<'_>, LockError> {
        validate::key("key", &key)?;
        let mut ttl = self.ttl(ttl_ms)?;
        if listener.is_some() {
            let arg = if ttl_ms.is_some() {
                "ttlMs"
            } else {
                "options.defaultTtlMs"
            };
            ttl = validate::refreshed_ttl(arg, ttl)?;
        }
        Ok(Acquisition {
            lock: self,
            kind,
            key,
            ttl,
            listener,
        })
    }

    /// `isLocked(key)`, checked.
    pub fn is_locked(&self, key: String) -> Result<IsLocked<'_>, LockError> {
        validate::key("key", &key)?;
        Ok(IsLocked { lock: self, key })
    }

    /// `fencedSet(key, value, fence)`, checked: writes `value` to `key` (under the client's
    /// own prefix) only if `fence` is the newest fence it has seen.
    pub fn fenced_set(
        &self,
        key: String,
        value: String,
        fence: String,
    ) -> Result<DistributedFencedSet<'_>, LockError> {
        validate::key("key", &key)?;
        let redis_key = format!("{}{key}", self.client_prefix).into_bytes();
        Ok(DistributedFencedSet {
            lock: self,
            redis_key,
            value,
            fence,
        })
    }
}

enum WaitPolicy {
    Once,
    Retries,
    Wait(Duration),
}

/// A checked acquisition: `start` runs it.
pub struct Acquisition<'a> {
    lock: &'a DistributedLock,
    kind: WaitPolicy,
    key: String,
    ttl: Duration,
    listener: Option<u32>,
}

impl Acquisition<'_> {
    /// Answers with the handle's parts once won; `None` when `tryAcquire` found it held.
    /// `cancel` (an AbortSignal) ends the wait; a lock won meanwhile is released.
    pub fn start<R: Reply<Option<Granted>>>(self, cancel: Cancel, reply: R) {
        let Acquisition {
            lock,
            kind,
            key,
            ttl,
            listener,
        } = self;
        // One reading for the call: when it started, and when its first attempt was sent
        // (a moment before it was, so its lease's validity counts from no later).
        let stamp = Stamp::now();
        let started = stamp.at;
        let auto = lock.auto_refresh(ttl, listener);
        let locker = lock.locker.clone();
        // An autoRefresh waiter is handed its lock through the runtime (its watch starts
        // there); others may be answered by a release on the caller's thread.
        let caller = auto
            .is_none()
            .then(|| reply.caller(lock.lend_on_handover, started));
        let plan = match kind {
            WaitPolicy::Once => Plan::once(),
            WaitPolicy::Retries => Plan::retries(
                lock.max_retries,
                lock.retry_delay,
                caller,
                (lock.max_retries > 0).then(|| locker.mark(&key)),
            ),
            // Placed now, on the caller's thread, behind any waiter of ours already there;
            // it joins there too should its first attempt find the lock held.
            WaitPolicy::Wait(timeout) => Plan::until(
                locker.place(&key, ttl, caller),
                Instant::now() + timeout,
                lock.retry_delay,
            ),
        };
        let asked = cancel.clone();
        let mode = Mode { plan, cancel };
        let win = HandleWin(auto);
        let first = FirstAttempt::of(&locker)
            .watched(win.watched())
            .in_mode(&mode);
        let way = Route::way(locker.store(), RouteFacts::Attempt(first));
        // A Redlock's: every node's socket at once, decided at the quorum.
        let mode = match ready_quorum(&reply, way) {
            Some(on) => match QuorumAttempt::new(&locker, &key, ttl, mode) {
                Ok(parts) => {
                    return reply.call_quorum(&on, parts, move |result| {
                        win::settle(win, &locker, (started, &asked), result)
                    });
                }
                Err(mode) => mode,
            },
            None => mode,
        };
        if let Some(on) = ready(&reply, way) {
            let attempt = PlainAttempt::sent_at(&locker, key, ttl, mode, stamp);
            return reply.call_fast(&on, attempt, move |result| {
                win::settle(win, &locker, (started, &asked), result)
            });
        }
        // Queued behind waiters of ours, it pauses before any attempt: most such waits are
        // answered by a release on this thread before that pause ends.
        let pauses_first = caller.is_some()
            && (mode.plan.ticket()).is_some_and(|ticket| ticket.view().turn_from_others);
        let work = async move {
            win::prepare(&locker, win.watched()).await?;
            let Mode { plan, cancel } = mode;
            let result = locker
                .pursue(plan, &key, ttl, &cancel, Start::Attempt)
                .await;
            win::settle(win, &locker, (started, &asked), result)
        };
        match pauses_first {
            true => reply.run_after_pause(work),
            false => reply.run(work),
        }
    }
}

/// A checked `isLocked`.
pub struct IsLocked<'a> {
    lock: &'a DistributedLock,
    key: String,
}

impl IsLocked<'_> {
    pub fn start<R: Reply<bool>>(self, reply: R) {
        let locker = self.lock.locker.clone();
        let way = Route::way(locker.store(), RouteFacts::Any);
        if let Some(on) = ready(&reply, way) {
            return reply.call_fast(&on, IsLockedCall::new(&locker, &self.key), |result| result);
        }
        let key = self.key;
        reply.run(async move { locker.is_locked(&key).await });
    }
}

/// A checked `fencedSet`.
pub struct DistributedFencedSet<'a> {
    lock: &'a DistributedLock,
    redis_key: Vec<u8>,
    value: String,
    fence: String,
}

impl DistributedFencedSet<'_> {
    /// Answers whether the write landed.
    pub fn start<R: Reply<bool>>(self, reply: R) {
        let locker = self.lock.locker.clone();
        let DistributedFencedSet {
            redis_key,
            value,
            fence,
            ..
        } = self;
        reply.run(async move { locker.fenced_set(&redis_key, &value, &fence).await });
    }
}

#[cfg(test)]
#[path = "distributed_lock_tests.rs"]
mod tests;
