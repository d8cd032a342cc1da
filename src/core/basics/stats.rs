//! What one API object has done since it was made: counters and a wait-time histogram, kept
//! with relaxed atomics so that counting costs a few uncontended adds and never allocates.
//! Relaxed is enough: each number is read on its own, and a read racing an update may miss
//! it, which a snapshot of live counters allows anyway.

use super::error::LockError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Every error code `LockError::code` gives, in a fixed order: errors are counted by index.
pub const ERROR_CODES: [&str; 12] = [
    "EINVAL",
    "ECONNECTION",
    "ETIMEDOUT",
    "EAUTH",
    "ENOPERM",
    "EREDIS",
    "ELOCKED",
    "ENOTHELD",
    "EABORTED",
    "ELOST",
    "EINTERNAL",
    "EGAVEUP",
];

/// Sub-buckets per power of two: 8 keeps a percentile within 12.5% of the true value.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Waits are kept in microseconds; 2^42 us is some 50 days, far beyond any wait's bound.
const TOP_BIT: u32 = 42;
const BUCKETS: usize = ((TOP_BIT - SUB_BITS + 2) as usize) * SUB as usize;

/// A fixed-size log-linear histogram of durations (microseconds): values below `SUB` each
/// have a bucket; above, each power of two is cut into `SUB` equal buckets.
pub struct WaitHistogram {
    buckets: [AtomicU64; BUCKETS],
    max_us: AtomicU64,
}

fn bucket_of(us: u64) -> usize {
    let us = us.min((1 << (TOP_BIT + 1)) - 1);
    if us < SUB {
        return us as usize;
    }
    let top = 63 - us.leading_zeros();
    let shift = top - SUB_BITS;
    let group = (shift + 1) as usize;
    group * SUB as usize + ((us >> shift) & (SUB - 1)) as usize
}

/// The largest value that falls in `bucket`.
fn bucket_high(bucket: usize) -> u64 {
    let (group, sub) = (bucket / SUB as usize, (bucket % SUB as usize) as u64);
    if group == 0 {
        return sub;
    }
    let shift = (group - 1) as u32;
    ((SUB + sub + 1) << shift) - 1
}

impl Default for WaitHistogram {
    fn default() -> Self {
        WaitHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            max_us: AtomicU64::new(0),
        }
    }
}

impl WaitHistogram {
    pub fn record(&self, wait: Duration) {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        // A read first: a new maximum is rare, and a read costs less than a write.
        if us > self.max_us.load(Relaxed) {
            self.max_us.fetch_max(us, Relaxed);
        }
    }

    /// How many waits were recorded (read bucket by bucket: not for a hot path).
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    pub fn max_us(&self) -> u64 {
        self.max_us.load(Relaxed)
    }

    /// The `q`-quantile (0..=1) in microseconds: the top of the bucket holding it, never
    /// above the largest value seen. 0 when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        // The rank of the q-quantile among `total` values, 1-based, as a sorted vector's
        // `sorted[ceil(q * n) - 1]` picks it.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_high(bucket).min(self.max_us());
            }
        }
        self.max_us()
    }
}

/// What a waiter went through, told to an `Observer` as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitNews {
    Contended,
    Woken,
    HandedOver,
}

impl WaitNews {
    /// The event's name as the `onEvent` hook gets it.
    pub fn name(self) -> &'static str {
        match self {
            WaitNews::Contended => "contended",
            WaitNews::Woken => "woken",
            WaitNews::HandedOver => "handed-over",
        }
    }
}

/// Hears of what is counted as it happens, with the lock's name. Called where the count is
/// made, on whichever thread that is: it must only hand the news on.
pub trait Observer: Send + Sync {
    fn seen(&self, seen: WaitNews, key: &str);
}

/// The counters of one API object (shared by every JS instance that shares its front).
pub struct CallCounters {
    /// `stats: false` clears it: then every count is one predictable branch and nothing
    /// more, so that the bench can show what counting costs. The observer still hears.
    on: bool,
    acquisitions: AtomicU64,
    contended: AtomicU64,
    woken: AtomicU64,
    handed_over: AtomicU64,
    refreshes: AtomicU64,
    lost: AtomicU64,
    errors: [AtomicU64; ERROR_CODES.len()],
    wait: WaitHistogram,
    /// Set once, when someone wants the news; unset, a count costs one load more.
    observer: OnceLock<Arc<dyn Observer>>,
}

/// A copy of `CallCounters` at one moment, waits in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSnapshot {
    /// Whether anything was counted (all zero when not).
    pub enabled: bool,
    pub acquisitions: u64,
    pub contended: u64,
    pub woken: u64,
    pub handed_over: u64,
    pub refreshes: u64,
    pub lost: u64,
    /// Only the codes seen, in `ERROR_CODES` order.
    pub errors: Vec<(&'static str, u64)>,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub wait_max_ms: f64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Default for CallCounters {
    fn default() -> Self {
        CallCounters::new(true)
    }
}

impl CallCounters {
    /// Counters that count when `on`, and otherwise stay zero.
    pub fn new(on: bool) -> Self {
        CallCounters {
            on,
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            woken: AtomicU64::new(0),
            handed_over: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            wait: WaitHistogram::default(),
            observer: OnceLock::new(),
        }
    }

    /// A lock won, `waited` after the call asked for it.
    pub fn acquired(&self, waited: Duration) {
        if !self.on {
            return;
        }
        self.acquisitions.fetch_add(1, Relaxed);
        self.wait.record(waited);
    }

    /// An attempt at `key` found the lock held by someone else.
    pub fn contended(&self, key: &str) {
        if self.on {
            self.contended.fetch_add(1, Relaxed);
        }
        self.tell(WaitNews::Contended, key);
    }

    /// A waiter for `key` was woken by a release.
    pub fn woken(&self, key: &str) {
        if self.on {
            self.woken.fetch_add(1, Relaxed);
        }
        self.tell(WaitNews::Woken, key);
    }

    /// A waiter for `key` was handed the lock by a release, without an attempt of its own.
    pub fn handed_over(&self, key: &str) {
        if self.on {
            self.handed_over.fetch_add(1, Relaxed);
        }
        self.tell(WaitNews::HandedOver, key);
    }

    fn tell(&self, seen: WaitNews, key: &str) {
        if let Some(observer) = self.observer.get() {
            observer.seen(seen, key);
        }
    }

    /// Tells `observer` of every wait from now on; `false` when one was set already.
    pub fn observe(&self, observer: Arc<dyn Observer>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Redis confirmed a held lock's new TTL (the watchdog's refresh, or `extend`).
    pub fn refreshed(&self) {
        if !self.on {
            return;
        }
        self.refreshes.fetch_add(1, Relaxed);
    }

    /// A held lock was found gone or could no longer be kept.
    pub fn lost(&self) {
        if !self.on {
            return;
        }
        self.lost.fetch_add(1, Relaxed);
    }

    /// A call ended with `error`.
    pub fn error(&self, error: &LockError) {
        if !self.on {
            return;
        }
        let code = error.code();
        if let Some(at) = ERROR_CODES.iter().position(|c| *c == code) {
            self.errors[at].fetch_add(1, Relaxed);
        }
    }

    /// How an acquisition asked for at `started` ended: won (`Some`), not won (`None`, no
    /// error), or an error. An abort counts only when the caller `cancelled`: otherwise the
    /// caller was answered already by whoever handed it the lock (which counted it), or its
    /// owner is gone.
    pub fn ended<T>(
        &self,
        started: Instant,
        answer: &Result<Option<T>, LockError>,
        cancelled: bool,
    ) {
        if !self.on {
            return;
        }
        match answer {
            Ok(Some(_)) => self.acquired(started.elapsed()),
            Ok(None) => {}
            Err(LockError::Aborted) if !cancelled => {}
            Err(err) => self.error(err),
        }
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let errors = ERROR_CODES
            .iter()
            .zip(&self.errors)
            .map(|(code, n)| (*code, n.load(Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        StatsSnapshot {
            enabled: self.on,
            acquisitions: self.acquisitions.load(Relaxed),
            contended: self.contended.load(Relaxed),
            woken: self.woken.load(Relaxed),
            handed_over: self.handed_over.load(Relaxed),
            refreshes: self.refreshes.load(Relaxed),
            lost: self.lost.load(Relaxed),
            errors,
            wait_p50_ms: ms(self.wait.quantile_us(0.5)),
            wait_p99_ms: ms(self.wait.quantile_us(0.99)),
            wait_max_ms: ms(self.wait.max_us()),
        }
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
