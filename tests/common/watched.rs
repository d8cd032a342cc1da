//! A lock taken and kept refreshed by the watchdog, and what the watchdog tells its holder,
//! for the tests that read it (taken by path: `common/mod.rs` is included by the library's
//! unit tests too, which cannot name this crate).

use native_redis_lock::core::api::{Attempt, Confirmed, Limits, Locker, Sink, Store};
use native_redis_lock::core::api::{Target, Watch, Watchdog};
use native_redis_lock::core::basics::clock::Stamp;
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Takes `key` for `ttl` and has the watchdog refresh it every `every`.
pub async fn hold(
    store: &Arc<Store>,
    locks: &Locker,
    key: &str,
    (ttl, every): (Duration, Duration),
    limits: Limits,
) -> (Lease, Arc<Recorder>, Watch) {
    // Ahead of the attempt, as the fronts do: the TTL counts from the attempt's send, and
    // loading the scripts after it spent a short lock's validity on a loaded machine. The
    // first call, so it opens the connections too: a generous bound, it is not under test.
    let watchdog = Watchdog::of(store);
    watchdog
        .prepare(Duration::from_millis(5000))
        .await
        .expect("prepare");
    let sent = Instant::now();
    let lease = match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} is held"),
    };
    let recorder = Arc::new(Recorder::default());
    let target = Target {
        key: lease.redis_key.clone(),
        name_at: lease.redis_key.len() - key.len(),
        token: lease.token.clone(),
        pair: None,
        ttl,
        every,
        punctual: false,
        fence_retention_ms: 60_000,
    };
    let watch = watchdog.watch(target, sent, limits, recorder.clone(), 1);
    (lease, recorder, watch)
}

#[derive(Default)]
pub struct Recorder {
    refreshed: Mutex<u32>,
    /// The last refresh confirmed: when it was sent, and the TTL it set.
    last_refresh: Mutex<Option<(Instant, Duration)>>,
    /// When it was told lost, why, and what had last been confirmed of it.
    lost: Mutex<Option<(Instant, LockError, Confirmed)>>,
    /// `suspended` and `resumed`, in the order told.
    doubts: Mutex<Vec<&'static str>>,
    /// When it was first told suspended.
    first_suspended: Mutex<Option<Instant>>,
}

impl Sink for Recorder {
    fn refreshed(&self, _tag: u32, sent: Instant, ttl: Duration) {
        *self.refreshed.lock().unwrap() += 1;
        *self.last_refresh.lock().unwrap() = Some((sent, ttl));
    }
    fn lost(&self, _tag: u32, error: LockError, last: Confirmed, _token: &[u8]) {
        *self.lost.lock().unwrap() = Some((Instant::now(), error, last));
    }
    fn suspended(&self, _tag: u32) {
        self.first_suspended
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now);
        self.doubts.lock().unwrap().push("suspended");
    }
    fn resumed(&self, _tag: u32) {
        self.doubts.lock().unwrap().push("resumed");
    }
}

impl Recorder {
    // Read by watchdog.rs only; the other files including this one do not look at doubt.
    #[allow(dead_code)]
    pub fn doubts(&self) -> Vec<&'static str> {
        self.doubts.lock().unwrap().clone()
    }
    pub fn refreshes(&self) -> u32 {
        *self.refreshed.lock().unwrap()
    }
    /// Tells `lease` of the last refresh, as a front's sink does: this watchdog is the test's
    /// own, and a lease left at its first TTL gives an extend after it only a grace to answer.
    // Read by cluster_store.rs only.
    #[allow(dead_code)]
    pub fn confirm(&self, lease: &Lease) {
        if let Some((sent, ttl)) = *self.last_refresh.lock().unwrap() {
            lease.extended(Stamp::at(sent), ttl);
        }
    }
    pub fn lost_at(&self) -> Option<(Instant, String)> {
        self.lost
            .lock()
            .unwrap()
            .as_ref()
            .map(|(at, e, _)| (*at, e.code().to_string()))
    }
    /// Why it was told lost, as its holder reads it.
    // Read by redlock_watchdog.rs only.
    #[allow(dead_code)]
    pub fn lost_reason(&self) -> Option<String> {
        self.lost
            .lock()
            .unwrap()
            .as_ref()
            .map(|(_, e, _)| e.to_string())
    }
    /// When it was first told suspended.
    // Read by redlock_watchdog.rs only.
    #[allow(dead_code)]
    pub fn first_suspended(&self) -> Option<Instant> {
        *self.first_suspended.lock().unwrap()
    }
    /// What had last been confirmed of the lock when it was told lost.
    // Read by redlock_watchdog.rs only.
    #[allow(dead_code)]
    pub fn lost_confirmed(&self) -> Option<Confirmed> {
        self.lost.lock().unwrap().as_ref().map(|(_, _, last)| *last)
    }
}
