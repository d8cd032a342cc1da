//! An owner that ends (a JS environment gone, for the binding): its waits stop, a release
//! hands the lock past them, and the locks kept alive for it are released and never
//! refreshed again. Waiters poll rarely here (5 s), so only a handover or wake-up explains a
//! prompt acquisition.

mod common;

use common::RedisServer;
use native_redis_lock::core::api::Owner;
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Confirmed, Sink};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::api::{Limits, Target, Watchdog};
use native_redis_lock::core::basics::error::{LockError, LockError::Aborted};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SLOW_POLL: Duration = Duration::from_secs(5);

fn store(server: &RedisServer) -> Arc<Store> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        ..Default::default()
    })
    .expect("endpoint");
    Store::shared(endpoint)
}

fn locker(store: &Arc<Store>, owner: &Owner) -> Arc<Locker> {
    Arc::new(Locker::new(store.clone(), "lock:", MS(2000)).owned_by(owner.clone()))
}

fn get(server: &RedisServer, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.raw())
        .expect("GET")
}

struct Quiet;
impl Sink for Quiet {
    fn refreshed(&self, _tag: u32, _sent: Instant, _ttl: Duration) {}
    fn lost(&self, _tag: u32, _error: LockError, _last: Confirmed, _token: &[u8]) {}
    fn suspended(&self, _tag: u32) {}
    fn resumed(&self, _tag: u32) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_ended_owners_wait_stops_and_the_release_goes_to_the_waiter_behind_it() {
    let server = RedisServer::start();
    let store = store(&server);
    let (gone, alive) = (Owner::new(), Owner::new());
    let (theirs, ours) = (locker(&store, &gone), locker(&store, &alive));
    let held = match ours.attempt("job", MS(30_000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("held"),
    };
    let wait = |locks: Arc<Locker>| {
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            let won = locks.wait("job", MS(30_000), MS(20_000), SLOW_POLL, &cancel);
            won.await.map(|lease| (lease, Instant::now()))
        })
    };
    let first = wait(theirs);
    tokio::time::sleep(MS(100)).await;
    let second = wait(ours.clone());
    tokio::time::sleep(MS(100)).await;
    gone.end().await;
    let ended = tokio::time::timeout(MS(500), first).await;
    assert!(
        matches!(ended, Ok(Ok(Err(Aborted)))),
        "the ended owner's wait went on"
    );
    let released = Instant::now();
    ours.release(&held).await.expect("release");
    let (lease, at) = second.await.expect("task").expect("won");
    assert!(at.duration_since(released) < MS(1000));
    assert_eq!(get(&server, "lock:job"), Some(lease.token.clone()));
    ours.release(&lease).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_ended_owners_kept_alive_locks_are_released_and_never_refreshed() {
    let server = RedisServer::start();
    let store = store(&server);
    let owner = Owner::new();
    let locks = locker(&store, &owner);
    let watchdog = Watchdog::of(&store);
    watchdog.prepare(MS(1000)).await.expect("scripts");
    let watch = |key: &str| {
        let locks = locks.clone();
        let (watchdog, owner, key) = (watchdog.clone(), owner.clone(), key.to_owned());
        async move {
            let lease = match locks.attempt(&key, MS(3000)).await.expect("attempt") {
                Attempt::Acquired(lease) => lease,
                Attempt::Held { .. } => panic!("held"),
            };
            let target: Target = locks.target(&lease, MS(1000));
            let limits = Limits {
                owner: Some(owner),
                ..Limits::default()
            };
            let id = watchdog.watch_id(target, lease.sent().at, limits, Arc::new(Quiet), 1);
            (lease, id)
        }
    };
    let (first, id) = watch("kept").await;
    assert_ne!(id, 0);
    assert_eq!(watchdog.stats().watched, 1);
    owner.end().await;
    assert_eq!(
        get(&server, "lock:kept"),
        None,
        "the kept lock outlived its owner"
    );
    assert_eq!(watchdog.stats().watched, 0);
    // Put back with a long TTL: a refresh would set it to 3 s.
    let _: () = redis::cmd("SET")
        .arg("lock:kept")
        .arg(&first.token)
        .arg("PX")
        .arg(60_000)
        .query(&mut server.raw())
        .expect("SET");
    // A lock won after the end is released instead of kept alive.
    let (_late, id) = watch("late").await;
    assert_eq!(id, 0);
    tokio::time::sleep(MS(300)).await;
    assert_eq!(
        get(&server, "lock:late"),
        None,
        "a lock won after the end was kept"
    );
    tokio::time::sleep(MS(1700)).await;
    let ttl: i64 = redis::cmd("PTTL")
        .arg("lock:kept")
        .query(&mut server.raw())
        .expect("PTTL");
    assert!(ttl > 50_000, "refreshed after its owner ended: {ttl}");
}
