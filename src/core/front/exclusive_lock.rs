//! ExclusiveLock (@logdna/exclusive-lock): one named lock, one attempt per `acquire()`, kept
//! alive by the watchdog while held, its holder told when it is lost. One `ExclusiveLock`
//! serves every JS instance made with the same settings, so that making one costs nothing
//! here: each hold is a record of its own, named by the listener its attempt was made with.
//! What each call does in Redis is ops/exclusive.rs's.

use super::connection::LockConnection;
use super::reply::{ready, Reply};
use crate::core::basics::background;
use crate::core::basics::error::LockError;
use crate::core::basics::stats::{CallCounters, StatsSnapshot};
use crate::core::basics::sync;
use crate::core::basics::validate::{self, DEFAULT_COMMAND_TIMEOUT};
pub use crate::core::ops::exclusive::Inspection;
use crate::core::ops::exclusive::{Claim, Exclusive, ExclusiveSpec, Terms};
use crate::core::ops::fast::exclusive::{ExclusiveAttempt, ExclusiveRelease};
use crate::core::ops::route::{FirstAttempt, Route, RouteFacts};
use crate::core::ops::signals::{self, Confirmed, Heartbeat, Sink};
use crate::core::ops::store::Store;
use crate::core::ops::watchdog::{Limits, Watch, Watchdog};
use crate::core::wait::owner::Owner;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The options the JS layer has already checked against the original's rules (a required
/// name, the ttl/refresh pairing, the 500 ms margin), and ours.
pub struct ExclusiveSettings {
    pub name: String,
    pub key_prefix: String,
    /// The `keyPrefix` of the user's ioredis client.
    pub client_key_prefix: Option<String>,
    pub lock_ttl_ms: f64,
    pub lock_refresh_ms: f64,
    /// Give the lock up when the holder's thread has been blocked this long; 0 disables.
    pub max_stall_ms: f64,
    /// Give the lock up this long after acquiring it, whatever happens.
    pub max_hold_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
    /// How long the lock's fence counter outlives the lock; 0 or Infinity: forever.
    pub fence_retention_ms: Option<f64>,
    /// Count what its calls do, for `stats()`. Default true.
    pub stats: Option<bool>,
}

/// The shortest stall budget: the holder's thread beats every 100 ms, so a shorter one
/// would call a healthy thread stalled.
const MIN_STALL: Duration = Duration::from_millis(250);

struct ExclusiveHold {
    token: String,
    fence: u64,
    /// The value the lock key holds: release checks it.
    contents: String,
    /// The lock key's expiry as the transaction that took it set it.
    set_at: Option<i64>,
    watch: Watch,
    /// Set by `unref()`: the end of the owner leaves the lock to its TTL, as the original's
    /// did, instead of releasing it.
    unrefed: Arc<AtomicBool>,
    news: Arc<HoldNews>,
}

/// The holds of one `ExclusiveLock`, by the listener their attempt was made with (unique
/// among the listeners alive on the JS thread, and a hold keeps its listener alive).
type ExclusiveHolds = Arc<Mutex<HashMap<u32, ExclusiveHold>>>;

/// One hold's news on its way to its listener: `refreshed` only while its instance wants it
/// (someone listens, or the logger traces), so that 10,000 held locks cost no work per tick
/// on the listener's side. Per hold, as the instances sharing a front want different things.
struct HoldNews {
    sink: Arc<dyn Sink>,
    refreshed: AtomicBool,
}

impl Sink for HoldNews {
    fn refreshed(&self, tag: u32, sent: std::time::Instant, ttl: Duration) {
        if self.refreshed.load(Ordering::Relaxed) {
            self.sink.refreshed(tag, sent, ttl);
        }
    }

    fn lost(&self, tag: u32, error: LockError, last: Confirmed, token: &[u8]) {
        self.sink.lost(tag, error, last, token);
    }

    fn suspended(&self, tag: u32) {
        self.sink.suspended(tag);
    }

    fn resumed(&self, tag: u32) {
        self.sink.resumed(tag);
    }
}

pub struct ExclusiveLock {
    lock: Arc<Exclusive>,
    holds: ExclusiveHolds,
    heartbeat: Arc<Heartbeat>,
    max_stall: Option<Duration>,
    max_hold: Option<Duration>,
    sink: Arc<dyn Sink>,
    owner: Owner,
}

/// How an instance wants its hold kept, as it is when `acquire()` is called; `unref()` and
/// listeners added later change the hold through `set_unrefed` and `want_refreshed`.
#[derive(Clone, Copy, Default)]
pub struct Wishes {
    pub unrefed: bool,
    pub refreshed: bool,
}

/// What a hold is taken with, read from the instance's fields at each `acquire()`, as the
/// original reads them.
fn terms(contents: String, ttl_ms: f64, refresh_ms: f64) -> Result<Terms, LockError> {
    Ok(Terms {
        contents,
        ttl: validate::positive_ms("lock_ttl_ms", ttl_ms)?,
        refresh: validate::positive_ms("lock_refresh_ms", refresh_ms)?,
    })
}

impl ExclusiveLock {
    pub fn new(
        connection: &LockConnection,
        settings: ExclusiveSettings,
        owner: Owner,
        heartbeat: Arc<Heartbeat>,
        sink: Arc<dyn Sink>,
    ) -> Result<Self, LockError> {
        validate::positive_ms("lock_ttl_ms", settings.lock_ttl_ms)?;
        validate::positive_ms("lock_refresh_ms", settings.lock_refresh_ms)?;
        let max_stall = validate::non_negative_ms("max_stall_ms", settings.max_stall_ms)?;
        if !max_stall.is_zero() && max_stall < MIN_STALL {
            return Err(LockError::invalid_range(
                "max_stall_ms",
                "max_stall_ms must be 0 (no stall guard) or at least 250",
            ));
        }
        let max_hold = settings
            .max_hold_ms
            .map(|ms| validate::positive_ms("max_hold_ms", ms))
            .transpose()?;
        let command_timeout = settings
            .command_timeout_ms
            .map(|ms| validate::positive_ms("command_timeout_ms", ms))
            .transpose()?
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        validate::key("name", &settings.name)?;
        let fence_retention_ms =
            validate::fence_retention("fence_retention_ms", settings.fence_retention_ms)?;
        let spec = ExclusiveSpec {
            name: settings.name,
            key_prefix: settings.key_prefix,
            client_key_prefix: settings.client_key_prefix.unwrap_or_default(),
            fence_retention_ms,
        };
        let lock = Exclusive::new(connection.store().clone(), spec, command_timeout)
            .counting(settings.stats.unwrap_or(true));
        Ok(ExclusiveLock {
            lock: Arc::new(lock),
            holds: Arc::new(Mutex::new(HashMap::new())),
            heartbeat,
            max_stall: (!max_stall.is_zero()).then_some(max_stall),
            max_hold,
            sink,
            owner,
        })
    }

    pub fn store(&self) -> &Arc<Store> {
        self.lock.store()
    }

    /// What its calls have done so far (see basics/stats.rs).
    pub fn stats(&self) -> StatsSnapshot {
        self.lock.stats().snapshot()
    }

    /// Where its calls are counted (an observer may be added there).
    pub fn counters(&self) -> &Arc<CallCounters> {
        self.lock.stats()
    }

    /// The key as the original names it (`this.key`).
    pub fn key(&self) -> &str {
        &self.lock.key
    }

    pub fn name(&self) -> &str {
        &self.lock.name
    }

    /// The fencing token of the hold won with `listener`, if it is held.
    pub fn fence(&self, listener: u32) -> Option<u64> {
        sync::lock(&self.holds)
            .get(&listener)
            .map(|held| held.fence)
    }

    /// Whether a refresh of the hold won with `listener` is on its way to Redis (the
    /// original's `is_refreshing`).
    pub fn refreshing(&self, listener: u32) -> bool {
        sync::lock(&self.holds)
            .get(&listener)
            .is_some_and(|held| held.watch.refreshing())
    }

    /// Whether the hold won with `listener` lets its process exit (`unref()`): then the end
    /// of its owner leaves it to its TTL instead of releasing it. Nothing for a hold not won
    /// yet: its attempt carries the wish it was made with.
    pub fn set_unrefed(&self, listener: u32, unrefed: bool) {
        if let Some(held) = sync::lock(&self.holds).get(&listener) {
            held.unrefed.store(unrefed, Ordering::Relaxed);
        }
    }

    /// Whether the hold won with `listener` tells it of its refreshes; as `set_unrefed`.
    pub fn want_refreshed(&self, listener: u32, want: bool) {
        if let Some(held) = sync::lock(&self.holds).get(&listener) {
            held.news.refreshed.store(want, Ordering::Relaxed);
        }
    }

    /// `acquire()` with the instance's `lock_contents`, `lock_ttl_ms` and `lock_refresh_ms`,
    /// checked; the watchdog tells `listener` of the hold's news, and the hold is named by it.
    pub fn acquire(
        &self,
        listener: u32,
        contents: String,
        ttl_ms: f64,
        refresh_ms: f64,
        wishes: Wishes,
    ) -> Result<ExclusiveAcquire<'_>, LockError> {
        let terms = terms(contents, ttl_ms, refresh_ms)?;
        Ok(ExclusiveAcquire {
            lock: self,
            listener,
            terms,
            wishes,
        })
    }

    /// `release()` of the hold won with `listener`: stops refreshing, then deletes the lock
    /// if it is still ours; answers whether it was.
    pub fn release<R: Reply<bool>>(&self, listener: u32, reply: R) {
        // Stopped now, on the caller's thread: no refresh is sent after this point, and the
        // answer of one already in flight is dropped, so it cannot report our own delete as
        // a loss.
        let Some(held) = sync::lock(&self.holds).remove(&listener) else {
            return reply.now(Ok(false));
        };
        held.watch.stop();
        let release = ExclusiveRelease::new(&self.lock, held.token, held.contents, held.set_at);
        if let Some(on) = ready(&reply, Route::way(self.lock.store(), RouteFacts::Any)) {
            return reply.call_fast(&on, release, |result| result);
        }
        reply.run(release.run());
    }

    /// `inspect()`: the holder's contents and remaining TTL, or `None` when free.
    pub fn inspect<R: Reply<Option<Inspection>>>(&self, reply: R) {
        let lock = self.lock.clone();
        reply.run(async move { lock.inspect().await });
    }
}

/// A checked `acquire()`.
pub struct ExclusiveAcquire<'a> {
    lock: &'a ExclusiveLock,
    listener: u32,
    terms: Terms,
    wishes: Wishes,
}

impl ExclusiveAcquire<'_> {
    /// Answers whether the lock is ours now.
    pub fn start<R: Reply<bool>>(self, reply: R) {
        let front = self.lock;
        // A beat now: the heartbeat may be stale from before this hold.
        front.heartbeat.beat();
        let winning = Winning {
            started: Instant::now(),
            lock: front.lock.clone(),
            holds: front.holds.clone(),
            sink: front.sink.clone(),
            listener: self.listener,
            terms: self.terms,
            stall: front.max_stall.map(|max| (front.heartbeat.clone(), max)),
            max_hold: front.max_hold,
            owner: front.owner.clone(),
            wishes: self.wishes,
        };
        // The caller's connection only once the scripts are known loaded: the watchdog's
        // refreshes must be one round trip from the first, which the runtime's way makes
        // sure of (as DistributedLock's autoRefresh).
        let store = front.lock.store();
        let first = FirstAttempt::on(store).watched(true);
        if let Some(on) = ready(&reply, Route::way(store, RouteFacts::Attempt(first))) {
            let attempt = ExclusiveAttempt::new(&winning.lock, &winning.terms);
            return reply.call_fast(&on, attempt, move |result| winning.settle(result));
        }
        reply.run(async move {
            let watchdog = Watchdog::of(winning.lock.store());
            watchdog.prepare(winning.lock.command_timeout()).await?;
            let attempt = winning.lock.acquire(&winning.terms).await;
            winning.settle(attempt)
        });
    }
}

/// What a won attempt needs to become the hold, prepared when `acquire()` is called and used
/// wherever the reply is read, so both ways start the watchdog alike.
struct Winning {
    started: Instant,
    lock: Arc<Exclusive>,
    holds: ExclusiveHolds,
    sink: Arc<dyn Sink>,
    listener: u32,
    terms: Terms,
    stall: Option<(Arc<Heartbeat>, Duration)>,
    max_hold: Option<Duration>,
    owner: Owner,
    wishes: Wishes,
}

impl Winning {
    /// The lock is ours: the watchdog keeps it alive from the moment its request was sent.
    fn hold(self, claim: Claim) -> bool {
        let unrefed = Arc::new(AtomicBool::new(self.wishes.unrefed));
        let news = Arc::new(HoldNews {
            sink: self.sink,
            refreshed: AtomicBool::new(self.wishes.refreshed),
        });
        let limits = Limits {
            stall: self.stall,
            hold_until: self
                .max_hold
                .map(|max| tokio::time::Instant::from_std(claim.sent.at + max)),
            owner: Some(self.owner),
            outlives_owner: Some(unrefed.clone()),
        };
        let target = self.lock.target(&claim, &self.terms);
        let watchdog = Watchdog::of(self.lock.store());
        let sink = signals::counted(self.lock.stats(), news.clone());
        let listener = self.listener;
        let watch =
            background::within(|| watchdog.watch(target, claim.sent.at, limits, sink, listener));
        let held = ExclusiveHold {
            token: claim.token,
            fence: claim.fence,
            contents: self.terms.contents,
            set_at: claim.set_at,
            watch,
            unrefed,
            news,
        };
        sync::lock(&self.holds).insert(self.listener, held);
        true
    }

    fn settle(self, attempt: Result<Option<Claim>, LockError>) -> Result<bool, LockError> {
        self.lock.stats().ended(self.started, &attempt, false);
        match attempt? {
            Some(claim) => Ok(self.hold(claim)),
            None => Ok(false),
        }
    }
}
