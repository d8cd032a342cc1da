//! The refresh scheduler against a real redis-server.

mod common;
#[path = "common/watched.rs"]
mod watched;

use common::{within, RedisServer};
use native_redis_lock::core::api::Attempt;
use native_redis_lock::core::api::Heartbeat;
use native_redis_lock::core::api::Locker;
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::api::{Limits, Target, Watch, Watchdog};
use native_redis_lock::core::basics::lease::Lease;
use std::sync::Arc;
use std::time::{Duration, Instant};
use watched::Recorder;

const MS: fn(u64) -> Duration = Duration::from_millis;

struct Fixture {
    server: RedisServer,
    store: Arc<Store>,
    locks: Locker,
}

fn fixture() -> Fixture {
    let server = RedisServer::start();
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        ..Default::default()
    })
    .unwrap();
    let store = Store::shared(endpoint);
    let locks = Locker::new(store.clone(), "lock:", MS(1000));
    Fixture {
        server,
        store,
        locks,
    }
}

impl Fixture {
    async fn hold(
        &self,
        key: &str,
        ttl: Duration,
        every: Duration,
        limits: Limits,
    ) -> (Lease, Arc<Recorder>, Watch) {
        watched::hold(&self.store, &self.locks, key, (ttl, every), limits).await
    }

    fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.server.raw())
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn keeps_a_lock_alive_for_many_ttls_and_stops_when_told() {
    let f = fixture();
    let (_lease, recorder, watch) = f.hold("alive", MS(300), MS(100), Limits::default()).await;
    tokio::time::sleep(MS(1500)).await;
    assert!(f.pttl("lock:alive") > 100, "TTL was not pushed back");
    assert!(recorder.refreshes() >= 10, "{}", recorder.refreshes());
    assert!(recorder.lost_at().is_none());
    watch.stop();
    let after = recorder.refreshes();
    tokio::time::sleep(MS(400)).await;
    assert_eq!(recorder.refreshes(), after);
    assert_eq!(f.pttl("lock:alive"), -2, "the lock should have expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_deleted_lock_is_reported_lost_at_the_next_refresh() {
    let f = fixture();
    let (_lease, recorder, _watch) = f
        .hold("deleted", MS(1000), MS(100), Limits::default())
        .await;
    tokio::time::sleep(MS(150)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("lock:deleted")
        .query(&mut f.server.raw())
        .unwrap();
    let deleted_at = Instant::now();
    tokio::time::sleep(MS(300)).await;
    let (at, code) = recorder.lost_at().expect("lost");
    assert_eq!(code, "ELOST");
    assert!(at.duration_since(deleted_at) < MS(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_overwritten_lock_is_lost_and_never_extended() {
    let f = fixture();
    let (_lease, recorder, _watch) = f.hold("taken", MS(1000), MS(100), Limits::default()).await;
    let _: () = redis::cmd("SET")
        .arg("lock:taken")
        .arg("someone-else")
        .arg("PX")
        .arg(5000)
        .query(&mut f.server.raw())
        .unwrap();
    tokio::time::sleep(MS(400)).await;
    assert!(recorder.lost_at().is_some());
    let value: String = redis::cmd("GET")
        .arg("lock:taken")
        .query(&mut f.server.raw())
        .unwrap();
    assert_eq!(value, "someone-else");
    assert!(f.pttl("lock:taken") <= 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_unreachable_redis_means_lost_at_the_deadline_not_later() {
    let f = fixture();
    let (_lease, recorder, _watch) = f
        .hold("partition", MS(600), MS(200), Limits::default())
        .await;
    tokio::time::sleep(MS(250)).await;
    f.server.signal("-STOP");
    let paused_at = Instant::now();
    tokio::time::sleep(MS(900)).await;
    f.server.signal("-CONT");
    let (at, code) = recorder.lost_at().expect("lost while Redis was paused");
    assert_eq!(code, "ELOST");
    // The last confirmed refresh was sent at most 200 ms before the pause: deadline <= 600 ms.
    assert!(
        at.duration_since(paused_at) <= MS(650),
        "{:?}",
        at.duration_since(paused_at)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_stalled_heartbeat_stops_the_refreshes() {
    let f = fixture();
    let heartbeat = Arc::new(Heartbeat::default());
    heartbeat.beat();
    let limits = Limits {
        stall: Some((heartbeat.clone(), MS(300))),
        hold_until: None,
        owner: None,
        outlives_owner: None,
    };
    let (_lease, recorder, _watch) = f.hold("stall", MS(400), MS(100), limits).await;
    for _ in 0..6 {
        tokio::time::sleep(MS(100)).await;
        heartbeat.beat();
    }
    assert!(
        recorder.lost_at().is_none(),
        "beating holder must keep the lock"
    );
    let stopped = Instant::now();
    tokio::time::sleep(MS(500)).await;
    let (at, _) = recorder.lost_at().expect("given up after max stall");
    assert!(at.duration_since(stopped) >= MS(200) && at.duration_since(stopped) < MS(450));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn max_hold_gives_a_lock_up() {
    let f = fixture();
    let limits = Limits {
        stall: None,
        hold_until: Some(tokio::time::Instant::now() + MS(300)),
        owner: None,
        outlives_owner: None,
    };
    let (_lease, recorder, _watch) = f.hold("hold", MS(400), MS(100), limits).await;
    tokio::time::sleep(MS(500)).await;
    assert!(recorder.lost_at().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn refreshes_survive_a_script_flush() {
    let f = fixture();
    let (_lease, recorder, _watch) = f.hold("flush", MS(300), MS(100), Limits::default()).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut f.server.raw())
        .unwrap();
    tokio::time::sleep(MS(700)).await;
    assert!(recorder.lost_at().is_none());
    assert!(f.pttl("lock:flush") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_thousand_locks_cost_one_pipeline_per_tick() {
    let f = fixture();
    let watchdog = Watchdog::of(&f.store);
    let mut held = Vec::new();
    for i in 0..1000 {
        held.push(
            f.hold(&format!("many:{i}"), MS(600), MS(200), Limits::default())
                .await,
        );
    }
    // Locks acquired one after another start in many phases; give them two periods to merge.
    tokio::time::sleep(MS(400)).await;
    let before = watchdog.stats();
    tokio::time::sleep(MS(1000)).await;
    let after = watchdog.stats();
    let pipelines = after.pipelines - before.pipelines;
    let refreshes = after.refreshes - before.refreshes;
    assert_eq!(after.watched, 1000);
    assert!(refreshes >= 4000, "{refreshes} refreshes in 1 s");
    // Five periods in a second, at most two pipelines each once merged: far from 1000 per tick.
    assert!(
        pipelines <= 12,
        "{pipelines} pipelines for {refreshes} refreshes"
    );
    assert!(held.iter().all(|(_, r, _)| r.lost_at().is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_key_of_another_type_is_lost_alone_and_the_others_keep_being_refreshed() {
    // The locks of a tick are refreshed in one script call: one key that cannot be read as
    // a string must fail that lock only.
    let f = fixture();
    let mut held = Vec::new();
    for i in 0..5 {
        held.push(
            f.hold(&format!("mixed:{i}"), MS(600), MS(100), Limits::default())
                .await,
        );
    }
    let mut raw = f.server.raw();
    let _: i64 = redis::cmd("DEL")
        .arg("lock:mixed:2")
        .query(&mut raw)
        .unwrap();
    let _: i64 = redis::cmd("HSET")
        .arg("lock:mixed:2")
        .arg("field")
        .arg("value")
        .query(&mut raw)
        .unwrap();
    tokio::time::sleep(MS(1000)).await;
    for (i, (lease, recorder, _)) in held.iter().enumerate() {
        if i == 2 {
            assert!(
                recorder.lost_at().is_some(),
                "the hash was not reported lost"
            );
            continue;
        }
        assert!(recorder.lost_at().is_none(), "lock {i} lost");
        assert!(
            recorder.refreshes() >= 5,
            "lock {i}: {} refreshes",
            recorder.refreshes()
        );
        let value: String = redis::cmd("GET")
            .arg(&lease.redis_key)
            .query(&mut raw)
            .unwrap();
        assert_eq!(value, lease.token);
    }
}

/// A lock that needs nothing for minutes: neither refreshed nor checked during a test.
fn idle(watchdog: &Arc<Watchdog>, sink: &Arc<Recorder>, i: usize) -> Watch {
    let target = Target {
        key: format!("lock:idle:{i}").into_bytes(),
        name_at: 5,
        token: "token".into(),
        pair: None,
        ttl: Duration::from_secs(600),
        every: Duration::from_secs(200),
        punctual: false,
        fence_retention_ms: 60_000,
    };
    watchdog.watch(target, Instant::now(), Limits::default(), sink.clone(), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn starting_and_stopping_locks_visits_entries_in_proportion_to_them_not_to_the_table() {
    // Counted, not timed: each stop once woke the scheduler to pass over every entry, so
    // releasing k of n held locks cost k x n.
    const STOPPED: u64 = 500;
    let f = fixture();
    let watchdog = Watchdog::of(&f.store);
    let sink = Arc::new(Recorder::default());
    for held in [1_000u64, 50_000] {
        let before = watchdog.stats().visited;
        let watches: Vec<Watch> = (0..held as usize)
            .map(|i| idle(&watchdog, &sink, i))
            .collect();
        tokio::time::sleep(MS(50)).await; // whatever the scheduler does on its own, it does now
        let started = watchdog.stats();
        assert_eq!(started.watched, held);
        let cost = started.visited - before;
        assert!(
            cost <= 2 * held,
            "starting {held} locks visited {cost} entries"
        );

        for watch in watches.iter().take(STOPPED as usize) {
            watch.stop();
        }
        tokio::time::sleep(MS(50)).await;
        let stopped = watchdog.stats();
        assert_eq!(stopped.watched, held - STOPPED);
        let cost = stopped.visited - started.visited;
        assert!(
            cost <= 2 * STOPPED,
            "stopping {STOPPED} of {held} locks visited {cost} entries"
        );

        drop(watches);
        tokio::time::sleep(MS(50)).await;
        let emptied = watchdog.stats();
        assert_eq!(emptied.watched, 0);
        let cost = emptied.visited - stopped.visited;
        assert!(cost <= 2 * held, "stopping the rest visited {cost} entries");
    }
    assert!(sink.lost_at().is_none() && sink.refreshes() == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_tick_visits_the_locks_due_not_every_lock_held() {
    let f = fixture();
    let watchdog = Watchdog::of(&f.store);
    let sink = Arc::new(Recorder::default());
    let _idle: Vec<Watch> = (0..50_000).map(|i| idle(&watchdog, &sink, i)).collect();
    let (_lease, recorder, _watch) = f.hold("ticking", MS(300), MS(100), Limits::default()).await;
    tokio::time::sleep(MS(250)).await;
    let before = watchdog.stats();
    tokio::time::sleep(MS(1000)).await;
    let after = watchdog.stats();
    let refreshes = after.refreshes - before.refreshes;
    let visited = after.visited - before.visited;
    assert!(refreshes >= 8, "{refreshes} refreshes in 1 s");
    // A few visits per refresh of the busy lock (its due time, its early window, its
    // deadline while in flight, the next wake-up), none of the idle ones: a pass over the
    // table would be 50,001 a tick.
    assert!(
        visited <= 8 * refreshes + 16,
        "{visited} entries visited for {refreshes} refreshes among 50,001 held locks"
    );
    assert!(recorder.lost_at().is_none() && sink.lost_at().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_dropped_connection_puts_a_lock_in_doubt_until_a_refresh_confirms_it() {
    let f = fixture();
    let (_lease, recorder, watch) = f.hold("doubt", MS(3000), MS(1000), Limits::default()).await;
    assert!(watch.certain());
    f.server.kill_clients();
    assert!(
        within(MS(1000), || !recorder.doubts().is_empty()).await,
        "told suspended"
    );
    assert!(
        within(MS(1000), || recorder.doubts().len() == 2).await,
        "told resumed: {:?}",
        recorder.doubts()
    );
    assert_eq!(recorder.doubts(), ["suspended", "resumed"]);
    assert!(watch.certain(), "confirmed again");
    assert!(recorder.lost_at().is_none(), "no false loss");
    assert!(f.pttl("lock:doubt") > 2000, "still ours, refreshed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_restarted_redis_suspends_a_lock_at_the_drop_then_finds_it_lost() {
    let mut f = fixture();
    let (_lease, recorder, watch) = f
        .hold("restarted", MS(3000), MS(1000), Limits::default())
        .await;
    f.server.signal("-KILL");
    assert!(
        within(MS(500), || recorder.doubts() == ["suspended"]).await,
        "told suspended while Redis is down: {:?}",
        recorder.doubts()
    );
    assert!(!watch.certain(), "in doubt while Redis is down");
    assert!(recorder.lost_at().is_none());
    f.server.restart();
    assert!(
        within(MS(1000), || recorder.lost_at().is_some()).await,
        "lost once the empty Redis answers"
    );
    assert_eq!(recorder.doubts(), ["suspended"], "never resumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_drop_while_nothing_is_held_leaves_the_next_hold_certain() {
    let f = fixture();
    let (_lease, _recorder, watch) = f
        .hold("before", MS(3000), MS(1000), Limits::default())
        .await;
    watch.stop();
    let watchdog = Watchdog::of(&f.store);
    assert!(within(MS(1000), || watchdog.stats().watched == 0).await);
    // The watchdog's task ends at its next wake-up (the refresh that was due) with nothing
    // to watch: then nobody waits for the drop below.
    tokio::time::sleep(MS(1200)).await;
    f.server.kill_clients();
    tokio::time::sleep(MS(200)).await;
    let (_lease, recorder, watch) = f.hold("after", MS(3000), MS(1000), Limits::default()).await;
    tokio::time::sleep(MS(300)).await;
    assert_eq!(recorder.doubts(), Vec::<&str>::new(), "sent after the drop");
    assert!(watch.certain());
    assert!(recorder.lost_at().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn locks_watched_after_a_drop_visit_themselves_not_the_whole_table_each() {
    // A starved machine's calls time out, and each timeout counts as a drop. Every lock whose
    // acquisition was sent before it is watched in doubt: each once passed over the whole
    // table (putting every lock in doubt again), so a batch of k acquisitions caught by a
    // drop cost k x n while n locks were held: 1.2 million entries in one 3 s batch of
    // many-locks.test.js, the scheduler starved in turn, and thousands of locks lost.
    const HELD: usize = 5_000;
    const CAUGHT: usize = 1_000;
    let f = fixture();
    let watchdog = Watchdog::of(&f.store);
    let sink = Arc::new(Recorder::default());
    let sent = Instant::now();
    f.store.dropped().signal();
    tokio::time::sleep(MS(5)).await;
    // Confirmed after the drop: it says nothing of them.
    let _idle: Vec<Watch> = (0..HELD).map(|i| idle(&watchdog, &sink, i)).collect();
    tokio::time::sleep(MS(50)).await;
    let before = watchdog.stats().visited;
    let caught = Arc::new(Recorder::default());
    let _caught: Vec<Watch> = (0..CAUGHT)
        .map(|i| {
            let target = Target {
                key: format!("lock:caught:{i}").into_bytes(),
                name_at: 5,
                token: "token".into(),
                pair: None,
                ttl: Duration::from_secs(600),
                every: Duration::from_secs(200),
                punctual: false,
                fence_retention_ms: 60_000,
            };
            watchdog.watch(target, sent, Limits::default(), caught.clone(), 1)
        })
        .collect();
    let cost = watchdog.stats().visited - before;
    // A few visits each (watched, put in doubt, queued), and at most one pass over the table
    // for the drop itself, which the scheduler hears once.
    assert!(
        cost <= 4 * CAUGHT as u64 + 2 * (HELD + CAUGHT) as u64,
        "watching {CAUGHT} locks sent before a drop visited {cost} entries among {HELD} held"
    );
    let suspended = caught
        .doubts()
        .iter()
        .filter(|d| **d == "suspended")
        .count();
    assert_eq!(
        suspended, CAUGHT,
        "each caught lock is in doubt from the start"
    );
    assert!(
        sink.doubts().is_empty(),
        "the locks confirmed after the drop are certain"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_drop_heard_before_the_watchdog_starts_leaves_a_lock_sent_after_it_certain() {
    // The fronts make the watchdog when the first autoRefresh hold wins: its clock starts
    // after both the drop and the attempt's send, where each reads 0 ms. Compared in whole
    // ms, the lock was doubted, and its holder told suspended on arrival (a CI failure of
    // cluster-restart-quarantine.test.js: isHeld false just after the acquisition).
    let f = fixture();
    // The connection opened first: the attempt below is sent at once.
    f.locks.attempt("warm", MS(3000)).await.expect("warm");
    f.store.dropped().signal();
    tokio::time::sleep(MS(5)).await;
    let sent = Instant::now();
    let lease = match f.locks.attempt("late", MS(3000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("late is held"),
    };
    let target = Target {
        key: lease.redis_key.clone(),
        name_at: 5,
        token: lease.token.clone(),
        pair: None,
        ttl: MS(3000),
        every: MS(1000),
        punctual: false,
        fence_retention_ms: 60_000,
    };
    let recorder = Arc::new(Recorder::default());
    let watch = Watchdog::of(&f.store).watch(target, sent, Limits::default(), recorder.clone(), 1);
    tokio::time::sleep(MS(200)).await;
    assert_eq!(recorder.doubts(), Vec::<&str>::new(), "sent after the drop");
    assert!(watch.certain());
}
