//! DistributedLockService (@jonaskahn/maestro): one lock per instance, taken with maestro's
//! backoff until a wait runs out, refreshed while held on maestro's schedule, and released
//! with maestro's answer. The records of the holds live here: one front serves every
//! instance of its settings, so each hold, and each acquisition in flight, is named by the
//! listener its attempt was made with (unique among the listeners alive on the JS thread).

use super::connection::LockConnection;
use super::reply::{ready, Reply};
use super::win::{self, Win};
use crate::core::basics::cancel::Cancel;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::stats::{CallCounters, StatsSnapshot};
use crate::core::basics::sync;
use crate::core::basics::validate::{self, DEFAULT_COMMAND_TIMEOUT};
use crate::core::ops::acquire::{Plan, Start};
use crate::core::ops::fast::acquire::{Mode, PlainAttempt};
use crate::core::ops::fast::PlainRelease;
use crate::core::ops::lock::Locker;
use crate::core::ops::route::{FirstAttempt, Route, RouteFacts};
use crate::core::ops::signals::{self, Confirmed, Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Limits, Watch, Watchdog};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// maestro's settings, resolved by the JS layer from maestro's environment variables. The
/// key and TTL come with each call: maestro's users may reassign `lockKey` and `ttl`
/// between acquisitions.
pub struct Settings {
    pub retry_delay_ms: f64,
    pub max_backoff_ms: f64,
    /// Give the lock up when the holder's thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    pub command_timeout_ms: Option<f64>,
    /// How long the lock's fence counter outlives the lock; 0 or Infinity: forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`. Default true.
    pub stats: Option<bool>,
}

struct Held {
    lease: Lease,
    watch: Watch,
}

/// The holds, by listener.
type Holds = Arc<Mutex<HashMap<u32, Held>>>;
/// What cancels each acquisition in flight (a release made meanwhile wins), by listener.
type Acquiring = Arc<Mutex<HashMap<u32, CancellationToken>>>;

pub struct LockService {
    locker: Arc<Locker>,
    retry_delay: Duration,
    max_backoff: Duration,
    held: Holds,
    acquiring: Acquiring,
    heartbeat: Arc<Heartbeat>,
    max_stall: Option<Duration>,
    sink: Arc<dyn Sink>,
}

impl LockService {
    pub fn new(
        connection: &LockConnection,
        settings: Settings,
        owner: crate::core::wait::owner::Owner,
        heartbeat: Arc<Heartbeat>,
        sink: Arc<dyn Sink>,
    ) -> Result<Self, LockError> {
        let max_stall = validate::non_negative_ms("maxStallMs", settings.max_stall_ms)?;
        let command_timeout = settings
            .command_timeout_ms
            .map(|ms| validate::positive_ms("commandTimeoutMs", ms))
            .transpose()?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        let retry_delay = validate::non_negative_ms("retryDelayMs", settings.retry_delay_ms)?;
        let max_backoff = validate::non_negative_ms("maxBackoffMs", settings.max_backoff_ms)?;
        let fence_retention =
            validate::fence_retention("fenceRetentionMs", settings.fence_retention_ms)?;
        let locker = Locker::new(connection.store().clone(), "", command_timeout)
            .fence_retention(fence_retention)
            .owned_by(owner)
            .counting(settings.stats.unwrap_or(true));
        Ok(LockService {
            locker: Arc::new(locker),
            retry_delay,
            max_backoff,
            held: Arc::new(Mutex::new(HashMap::new())),
            acquiring: Arc::new(Mutex::new(HashMap::new())),
            heartbeat,
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            sink,
        })
    }

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

    /// `acquire(lockTtl?, maxWaitTime?)` of `key`, checked: tries until `max_wait_ms`
    /// (default 3 x the TTL) with maestro's backoff. While held, the watchdog refreshes the
    /// lock every third of the shorter of `ttl_ms` (the instance's) and `lock_ttl_ms` (this
    /// call's), back to the longer, and tells `listener` if it is lost.
    pub fn acquire(
        &self,
        key: String,
        ttl_ms: f64,
        lock_ttl_ms: Option<f64>,
        max_wait_ms: Option<f64>,
        listener: u32,
    ) -> Result<Acquire<'_>, LockError> {
        validate::key("lockKey", &key)?;
        let ttl = validate::positive_ms("ttl", ttl_ms)?;
        let lock_ttl = match lock_ttl_ms {
            Some(ms) => validate::positive_ms("lockTtl", ms)?,
            None => ttl,
        };
        let max_wait = match max_wait_ms {
            Some(ms) => validate::non_negative_ms("maxWaitTime", ms)?,
            None => lock_ttl.saturating_mul(3),
        };
        Ok(Acquire {
            service: self,
            key,
            ttl,
            lock_ttl,
            max_wait,
            listener,
        })
    }

    /// Ends the acquisition made with `listener`, if in flight: a lock it wins is released
    /// at once.
    pub fn cancel(&self, listener: u32) {
        if let Some(cancel) = sync::lock(&self.acquiring).remove(&listener) {
            cancel.cancel();
        }
    }

    /// Stops refreshing the hold won with `listener` and leaves it to expire (its user set
    /// `isLocked` false by hand, after which maestro's refresh stops and its release deletes
    /// nothing).
    pub fn forget(&self, listener: u32) {
        if let Some(held) = sync::lock(&self.held).remove(&listener) {
            held.watch.stop();
        }
    }

    /// `release()` of the hold won with `listener`: stops refreshing and deletes the lock if
    /// it is ours. Answers `true` when it was ours or is already gone, `false` when someone
    /// else holds it now, as maestro.
    pub fn release<R: Reply<bool>>(&self, listener: u32, reply: R) {
        // Stopped on the caller's thread, before the release is sent (see ExclusiveLock).
        let Some(held) = sync::lock(&self.held).remove(&listener) else {
            return reply.now(Ok(true));
        };
        held.watch.stop();
        let lease = Arc::new(held.lease);
        // Waiters of ours to wake, or a lock already released: through the runtime.
        if let Some(release) = PlainRelease::new(&self.locker, &lease, true) {
            let way = Route::way(self.locker.store(), RouteFacts::Any);
            if let Some(on) = ready(&reply, way) {
                return reply.call_fast(&on, release, |result| result);
            }
        }
        let locker = self.locker.clone();
        reply.run(async move {
            if locker.release(&lease).await? {
                return Ok(true);
            }
            Ok(!locker.is_locked(&lease.key).await?)
        });
    }
}

/// A checked `acquire()`.
pub struct Acquire<'a> {
    service: &'a LockService,
    key: String,
    ttl: Duration,
    lock_ttl: Duration,
    max_wait: Duration,
    listener: u32,
}

impl Acquire<'_> {
    /// Answers with the lock's value (its owner token) once won, `None` when it stayed held
    /// or a release cancelled the wait.
    pub fn start<R: Reply<Option<String>>>(self, reply: R) {
        let Acquire {
            service,
            key,
            ttl,
            lock_ttl,
            max_wait,
            listener,
        } = self;
        let token = CancellationToken::new();
        sync::lock(&service.acquiring).insert(listener, token.clone());
        let cancel = Cancel::from(token);
        service.heartbeat.beat();
        let started = Instant::now();
        let locker = service.locker.clone();
        let hold = ServiceHold {
            _in_flight: InFlight {
                acquiring: service.acquiring.clone(),
                listener,
            },
            held: service.held.clone(),
            // The original refreshed every third of the instance's TTL even when this hold's
            // TTL was shorter, letting it expire first; a third of the shorter one is safe.
            every: ttl.min(lock_ttl) / 3,
            refresh_ttl: ttl.max(lock_ttl),
            limits: Limits {
                stall: service
                    .max_stall
                    .map(|max| (service.heartbeat.clone(), max)),
                hold_until: None,
                owner: Some(locker.owner().clone()),
                outlives_owner: None,
            },
            sink: signals::counted(
                locker.stats(),
                Arc::new(LostFlag {
                    sink: service.sink.clone(),
                    held: service.held.clone(),
                }),
            ),
            listener,
        };
        // Placed before the first attempt, as every waiter (see `Locker::place`). With no
        // caller, as DistributedLock's autoRefresh waiters: a release on this thread answers
        // a caller in place with a handle's lease (binding `Outcome::Lease`), which would skip
        // what this win starts (the watchdog's refresh, the service's record of the hold) and
        // answer no lock value. Nor is its task parked on the caller's thread
        // (`run_after_pause`): without an answer in place, the hand-over's wake would move it
        // to the runtime all the same.
        let plan = Plan::backoff(
            locker.place(&key, lock_ttl, None),
            Instant::now() + max_wait,
            service.retry_delay,
            service.max_backoff,
        );
        let asked = cancel.clone();
        let mode = Mode { plan, cancel };
        let first = FirstAttempt::of(&locker).watched(true).in_mode(&mode);
        if let Some(on) = ready(
            &reply,
            Route::way(locker.store(), RouteFacts::Attempt(first)),
        ) {
            let attempt = PlainAttempt::new(&locker, &key, lock_ttl, mode);
            return reply.call_fast(&on, attempt, move |result| {
                win::settle(hold, &locker, (started, &asked), result)
            });
        }
        reply.run(async move {
            win::prepare(&locker, true).await?;
            let Mode { plan, cancel } = mode;
            let result = locker
                .pursue(plan, &key, lock_ttl, &cancel, Start::Attempt)
                .await;
            win::settle(hold, &locker, (started, &asked), result)
        });
    }
}

/// What a won acquisition starts: the watchdog's refresh of it, on maestro's schedule, and
/// the service's record of the hold; its caller is answered with the lock's value.
struct ServiceHold {
    // Dropped with the hold, once the acquisition has settled however it did.
    _in_flight: InFlight,
    held: Holds,
    every: Duration,
    refresh_ttl: Duration,
    limits: Limits,
    sink: Arc<dyn Sink>,
    listener: u32,
}

impl Win for ServiceHold {
    type Output = String;

    fn watched(&self) -> bool {
        true
    }

    fn deliver(self, locker: &Locker, lease: Lease) -> String {
        let mut target = locker.target(&lease, self.every.max(Duration::from_millis(1)));
        target.ttl = self.refresh_ttl;
        // maestro refreshes on a `setInterval`: never sooner than its interval.
        target.punctual = true;
        let watchdog = Watchdog::of(locker.store());
        let sent = lease.sent().at;
        let watch = watchdog.watch(target, sent, self.limits, self.sink, self.listener);
        let token = lease.token.clone();
        sync::lock(&self.held).insert(self.listener, Held { lease, watch });
        token
    }

    /// maestro answers a wait its own release() ended as a lock not won.
    fn without(self, err: LockError) -> Result<Option<String>, LockError> {
        match err {
            LockError::Aborted => Ok(None),
            err => Err(err),
        }
    }
}

/// An acquisition in flight: no longer cancellable once this is dropped.
struct InFlight {
    acquiring: Acquiring,
    listener: u32,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        sync::lock(&self.acquiring).remove(&self.listener);
    }
}

/// Forgets the hold once it is lost, then passes the news on.
struct LostFlag {
    sink: Arc<dyn Sink>,
    held: Holds,
}

impl Sink for LostFlag {
    fn refreshed(&self, listener: u32, sent: std::time::Instant, ttl: Duration) {
        self.sink.refreshed(listener, sent, ttl);
    }

    fn lost(&self, listener: u32, error: LockError, last: Confirmed, token: &[u8]) {
        {
            let mut held = sync::lock(&self.held);
            if held
                .get(&listener)
                .is_some_and(|h| h.lease.token.as_bytes() == token)
            {
                held.remove(&listener);
            }
        }
        self.sink.lost(listener, error, last, token);
    }

    fn suspended(&self, listener: u32) {
        self.sink.suspended(listener);
    }

    fn resumed(&self, listener: u32) {
        self.sink.resumed(listener);
    }
}
