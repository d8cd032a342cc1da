//! The core against a real redis-server: what lands in Redis, and how the operations behave.

mod common;

use common::RedisServer;
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::keys;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn locker(server: &RedisServer, prefix: &str, timeout: Duration) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        connect_timeout: Some(timeout),
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), prefix, timeout))
}

async fn take(
    locker: &Locker,
    key: &str,
    ttl: Duration,
) -> native_redis_lock::core::basics::lease::Lease {
    match locker.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

#[tokio::test]
async fn acquire_stores_the_token_under_the_prefixed_key_with_the_ttl() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let lease = take(&locks, "user:1", MS(5000)).await;
    let mut raw = server.raw();
    let value: String = redis::cmd("GET")
        .arg("lock:user:1")
        .query(&mut raw)
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("lock:user:1")
        .query(&mut raw)
        .unwrap();
    assert_eq!(value, lease.token);
    assert!((4000..=5000).contains(&ttl), "{ttl}");
    let fence: i64 = redis::cmd("GET")
        .arg(keys::fence_key(b"lock:user:1"))
        .query(&mut raw)
        .unwrap();
    // Its fence, and the next kept for a handover.
    assert_eq!(fence as u64, lease.fence + 1);
}

#[tokio::test]
async fn a_held_lock_reports_its_holders_remaining_ttl() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let _lease = take(&locks, "k", MS(3000)).await;
    match locks.attempt("k", MS(1000)).await.unwrap() {
        Attempt::Held { ttl: Some(ttl) } => assert!(ttl > MS(2000) && ttl <= MS(3000)),
        _ => panic!("expected the lock to be held with a ttl"),
    }
}

#[tokio::test]
async fn fences_increase_across_holders() {
    let server = RedisServer::start();
    let a = locker(&server, "lock:", MS(2000));
    let b = locker(&server, "lock:", MS(2000));
    let mut last = 0;
    for i in 0..10 {
        let locks = if i % 2 == 0 { &a } else { &b };
        let lease = take(locks, "fenced", MS(1000)).await;
        assert!(lease.fence > last);
        last = lease.fence;
        assert!(locks.release(&lease).await.unwrap());
    }
}

#[tokio::test]
async fn release_and_extend_never_touch_another_holders_lock() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let stale = take(&locks, "shared", MS(100)).await;
    tokio::time::sleep(MS(150)).await;
    let current = take(&locks, "shared", MS(5000)).await;
    assert!(!locks.release(&stale).await.unwrap());
    let err = locks.extend(&stale, MS(60_000)).await.unwrap_err();
    assert_eq!(err.code(), "ENOTHELD");
    let mut raw = server.raw();
    let value: String = redis::cmd("GET")
        .arg("lock:shared")
        .query(&mut raw)
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("lock:shared")
        .query(&mut raw)
        .unwrap();
    assert_eq!(value, current.token);
    assert!(ttl <= 5000);
}

#[tokio::test]
async fn extend_adds_to_the_remaining_ttl() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let lease = take(&locks, "ext", MS(2000)).await;
    let before = lease.expires_at_ms();
    locks.extend(&lease, MS(3000)).await.unwrap();
    let mut raw = server.raw();
    let ttl: i64 = redis::cmd("PTTL").arg("lock:ext").query(&mut raw).unwrap();
    assert!((4500..=5000).contains(&ttl), "{ttl}");
    assert!(lease.expires_at_ms() >= before + 2900);
    assert!(lease.is_held());
}

#[tokio::test]
async fn retries_back_off_exponentially_then_give_up() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let _held = take(&locks, "busy", MS(10_000)).await;
    let started = Instant::now();
    let err = locks
        .acquire("busy", MS(1000), 2, MS(50), &CancellationToken::new())
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(
        err,
        LockError::Locked {
            key: "busy".into(),
            retries: 2
        }
    );
    assert!(elapsed >= MS(150) && elapsed < MS(600), "{elapsed:?}");
}

#[tokio::test]
async fn waiting_ends_when_the_holder_releases() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let held = take(&locks, "wait", MS(10_000)).await;
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .wait(
                    "wait",
                    MS(1000),
                    MS(3000),
                    MS(20),
                    &CancellationToken::new(),
                )
                .await
        })
    };
    tokio::time::sleep(MS(100)).await;
    locks.release(&held).await.unwrap();
    let lease = waiter.await.unwrap().expect("acquired after release");
    assert!(lease.fence > held.fence);
}

#[tokio::test]
async fn cancelling_stops_a_wait_at_once() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let _held = take(&locks, "cancel", MS(10_000)).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(MS(50)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    // Polled every 3 s: a wait that saw the cancel only at its next poll would take that
    // long, far past what a loaded machine adds to one told at once.
    let err = locks
        .wait("cancel", MS(1000), MS(10_000), MS(3000), &cancel)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, LockError::Aborted);
    assert!(elapsed >= MS(45) && elapsed < MS(1500), "{elapsed:?}");
}

#[tokio::test]
async fn a_paused_server_times_out_within_the_bound() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(200));
    assert!(!locks.is_locked("x").await.unwrap());
    server.signal("-STOP");
    let started = Instant::now();
    let err = locks.is_locked("x").await.unwrap_err();
    let elapsed = started.elapsed();
    server.signal("-CONT");
    assert_eq!(err.code(), "ETIMEDOUT");
    assert!(elapsed >= MS(190) && elapsed < MS(1000), "{elapsed:?}");
}

#[tokio::test]
async fn nothing_listening_is_a_connection_error_not_contention() {
    let server = RedisServer::start();
    let port = server.port;
    drop(server);
    let endpoint = Endpoint::from_spec(EndpointSpec {
        port: Some(port),
        ..Default::default()
    })
    .unwrap();
    let locks = Locker::new(Store::shared(endpoint), "lock:", MS(1000));
    let err = locks.is_locked("x").await.unwrap_err();
    assert_eq!(err.code(), "ECONNECTION");
    let err = locks.attempt("x", MS(1000)).await.err().expect("must fail");
    assert!(err.is_infrastructure());
}

#[tokio::test]
async fn a_server_without_hello_is_spoken_to_in_resp2() {
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let locks = locker(&server, "lock:", MS(2000));
    let lease = take(&locks, "old-server", MS(1000)).await;
    assert!(locks.is_locked("old-server").await.unwrap());
    assert!(locks.release(&lease).await.unwrap());
}

// Multi-threaded so the connection's background tasks run while this thread blocks in
// `restart`, as they do under Node, where the runtime never waits on the JS thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_first_call_after_a_restart_succeeds() {
    let mut server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let _lease = take(&locks, "restart", MS(10_000)).await;
    server.restart();
    // The restarted server is empty: the lock is gone, and the call reconnects by itself.
    assert!(!locks.is_locked("restart").await.unwrap());
}

/// A counter that cannot give a fence (another client wrote to it, or it is exhausted) fails
/// the acquisition before anything is written: never a lock with fence 0, never a lock left
/// set by a failed acquisition.
#[tokio::test]
async fn an_acquisition_whose_fence_cannot_be_drawn_fails_and_leaves_no_lock() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let locks = locker(&server, "lock:", MS(2000));
    for (key, counter) in [
        ("garbage", "not a number"),
        ("float", "12.5"),
        ("negative", "-4"),
        ("exhausted", "999999999999998"),
    ] {
        let redis_key = format!("lock:{key}");
        let _: () = redis::cmd("SET")
            .arg(keys::fence_key(redis_key.as_bytes()))
            .arg(counter)
            .query(&mut raw)
            .unwrap();
        let err = match locks.attempt(key, MS(5000)).await {
            Err(err) => err,
            Ok(_) => panic!("{key}: an attempt with counter {counter:?} won"),
        };
        assert!(matches!(err, LockError::Redis(_)), "{key}: {err:?}");
        assert!(err.to_string().contains("no fencing token"), "{err}");
        let left: i64 = redis::cmd("EXISTS")
            .arg(&redis_key)
            .query(&mut raw)
            .unwrap();
        assert_eq!(left, 0, "{key}: the failed acquisition left the lock set");
    }
    // The last two fences there are: the holder's and the one kept for its handover.
    let _: () = redis::cmd("SET")
        .arg(keys::fence_key(b"lock:last"))
        .arg("999999999999997")
        .query(&mut raw)
        .unwrap();
    let lease = take(&locks, "last", MS(5000)).await;
    assert_eq!(lease.fence, 999_999_999_999_998);
    assert!(locks.release(&lease).await.expect("release"));
    assert!(locks.attempt("last", MS(5000)).await.is_err());
}

/// A handover's counter upkeep, as its client asks: none when known kept ('kept'), a
/// quarter window past the waiter's lock when given the window (also when sent again).
#[test]
fn a_handover_keeps_the_counter_as_its_client_asks() {
    use native_redis_lock::core::api::scripts;
    let server = RedisServer::start();
    let mut raw = server.raw();
    let fence_key = keys::fence_key(b"lock:h");
    let counter_ttl = |raw: &mut redis::Connection| -> i64 {
        redis::cmd("PTTL").arg(&fence_key).query(raw).unwrap()
    };
    let hand = |raw: &mut redis::Connection, ours: &str, theirs: &str, upkeep: &str| -> i64 {
        scripts::HANDOFF
            .key("lock:h")
            .key(&fence_key)
            .arg(ours)
            .arg(theirs)
            .arg(5000)
            .arg(7)
            .arg(upkeep)
            .invoke(raw)
            .unwrap()
    };
    let _: () = redis::cmd("SET")
        .arg("lock:h")
        .arg("a")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&fence_key)
        .arg(8)
        .arg("PX")
        .arg(1000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(hand(&mut raw, "a", "b", "kept"), 8);
    assert!(
        counter_ttl(&mut raw) <= 1000,
        "a counter known kept is left alone"
    );
    assert_eq!(hand(&mut raw, "b", "c", "60000"), 8);
    let left = counter_ttl(&mut raw);
    assert!((70_000..=80_000).contains(&left), "counter PTTL {left}");
    // Sent again (the waiter's token set already): kept as asked all the same.
    let _: () = redis::cmd("PEXPIRE")
        .arg(&fence_key)
        .arg(1000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(hand(&mut raw, "b", "c", "60000"), 8);
    let left = counter_ttl(&mut raw);
    assert!(
        (70_000..=80_000).contains(&left),
        "counter PTTL {left} after a resend"
    );
}

/// A counter with no expiry (kept forever by an older client, or from before windows) is
/// given one by a handover that keeps it by window: the client records it kept until then,
/// and an attempt's `PEXPIRE NX` could otherwise give it a shorter one. The repair of a
/// counter found behind our fence keeps the expiry just given (KEEPTTL).
#[test]
fn a_handover_gives_a_counter_without_expiry_one_and_its_repair_keeps_it() {
    use native_redis_lock::core::api::scripts;
    let server = RedisServer::start();
    let mut raw = server.raw();
    let fence_key = keys::fence_key(b"lock:k");
    let hand = |raw: &mut redis::Connection, ours: &str, theirs: &str, fence: u64| -> i64 {
        scripts::HANDOFF
            .key("lock:k")
            .key(&fence_key)
            .arg(ours)
            .arg(theirs)
            .arg(5000)
            .arg(fence)
            .arg("60000")
            .invoke(raw)
            .unwrap()
    };
    let set = |raw: &mut redis::Connection, key: &[u8], value: &str| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(raw).unwrap();
    };
    let counter = |raw: &mut redis::Connection| -> (i64, i64) {
        let value: i64 = redis::cmd("GET").arg(&fence_key).query(raw).unwrap();
        let ttl: i64 = redis::cmd("PTTL").arg(&fence_key).query(raw).unwrap();
        (value, ttl)
    };
    set(&mut raw, b"lock:k", "a");
    set(&mut raw, &fence_key, "8");
    assert_eq!(hand(&mut raw, "a", "b", 7), 8);
    let (value, left) = counter(&mut raw);
    assert_eq!(value, 9, "one fence drawn for the waiter's own handover");
    assert!((70_000..=80_000).contains(&left), "counter PTTL {left}");
    // Someone set the counter back below our fence: the repair puts it past the waiter's
    // fence and keeps the expiry the upkeep gave it.
    set(&mut raw, &fence_key, "2");
    assert_eq!(hand(&mut raw, "b", "c", 8), 9);
    let (value, left) = counter(&mut raw);
    assert_eq!(value, 10, "repaired past the waiter's fence");
    assert!(
        (70_000..=80_000).contains(&left),
        "counter PTTL {left} after the repair"
    );
}

/// A handover whose waiter can get no fence releases the lock instead.
#[test]
fn a_handover_without_a_fence_for_the_waiter_releases_the_lock() {
    use native_redis_lock::core::api::scripts;
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _: () = redis::cmd("SET")
        .arg("lock:h")
        .arg("ours")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(keys::fence_key(b"lock:h"))
        .arg("oops")
        .query(&mut raw)
        .unwrap();
    let fence: i64 = scripts::HANDOFF
        .key("lock:h")
        .key(keys::fence_key(b"lock:h"))
        .arg("ours")
        .arg("theirs")
        .arg(5000)
        .arg(7)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(fence, 0);
    let left: i64 = redis::cmd("EXISTS").arg("lock:h").query(&mut raw).unwrap();
    assert_eq!(left, 0);
}

/// A waiter's attempt (acquire_queued.lua) draws its fences after it sets the lock, as
/// acquire.lua does: a counter that can give none fails the attempt with nothing written and
/// the counter as it was; on a held lock it only queues, as any failed attempt.
#[test]
fn a_queued_attempt_without_a_fence_fails_and_leaves_no_lock() {
    use native_redis_lock::core::api::scripts;
    let server = RedisServer::start();
    let mut raw = server.raw();
    let fence_key = keys::fence_key(b"lock:q");
    let attempt = |raw: &mut redis::Connection| {
        scripts::ACQUIRE_QUEUED
            .key("lock:q")
            .key(&fence_key)
            .key("lock:q:waiting")
            .arg("mine")
            .arg(5000)
            .arg(604_800_000)
            .arg("conn")
            .arg(1)
            .arg("0")
            .arg(60_000)
            .invoke::<(i64, i64)>(raw)
    };
    for counter in ["oops", "-4", "007", "999999999999998"] {
        let _: () = redis::cmd("SET")
            .arg(&fence_key)
            .arg(counter)
            .query(&mut raw)
            .unwrap();
        let err = attempt(&mut raw).expect_err(counter);
        assert!(err.to_string().contains("NOFENCE"), "{counter}: {err}");
        let left: i64 = redis::cmd("EXISTS").arg("lock:q").query(&mut raw).unwrap();
        assert_eq!(left, 0, "{counter}: the failed attempt left the lock set");
        let after: String = redis::cmd("GET").arg(&fence_key).query(&mut raw).unwrap();
        assert_eq!(after, counter, "the failed attempt moved the counter");
    }
    let _: () = redis::cmd("SET")
        .arg("lock:q")
        .arg("theirs")
        .arg("PX")
        .arg(5000)
        .query(&mut raw)
        .unwrap();
    let (won, pttl) = attempt(&mut raw).expect("a held lock is no error");
    assert_eq!(won, 0);
    assert!(pttl > 0);
    let queued: Option<f64> = redis::cmd("ZSCORE")
        .arg("lock:q:waiting")
        .arg("conn")
        .query(&mut raw)
        .unwrap();
    assert!(queued.is_some(), "the failed attempt did not queue");
    let _: () = redis::cmd("DEL")
        .arg("lock:q")
        .arg(&fence_key)
        .query(&mut raw)
        .unwrap();
    assert_eq!(attempt(&mut raw).expect("a free lock"), (1, 1));
}

/// An attempt that wins after its caller stopped waiting is freed as any release is: the
/// connection queued longest for the lock is woken (taken off the queue), not left to its
/// poll. (It was freed without a wake on this path, and with one on the JS thread's.)
#[tokio::test]
async fn a_lock_won_after_its_attempt_timed_out_is_freed_and_wakes_the_queue() {
    let server = RedisServer::start();
    let locker = locker(&server, "lock:", MS(150));
    let warm = take(&locker, "warm", MS(10_000)).await;
    locker.release(&warm).await.expect("release");
    let mut admin = server.raw();
    let queue = keys::queue_key(b"lock:late");
    let _: () = redis::cmd("ZADD")
        .arg(&queue)
        .arg(1)
        .arg("another-connection")
        .query(&mut admin)
        .expect("ZADD");
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(500)
        .arg("WRITE")
        .query(&mut admin)
        .expect("CLIENT PAUSE");
    let attempt = locker.attempt("late", MS(10_000)).await;
    assert!(matches!(attempt, Err(LockError::Timeout(_))), "timed out");
    // The attempt runs once the pause ends, and the release queued behind it then.
    let deadline = Instant::now() + MS(3_000);
    loop {
        let held: i64 = redis::cmd("EXISTS")
            .arg("lock:late")
            .query(&mut admin)
            .expect("EXISTS");
        let queued: i64 = redis::cmd("ZCARD")
            .arg(&queue)
            .query(&mut admin)
            .expect("ZCARD");
        if held == 0 && queued == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "held {held}, queued {queued}");
        tokio::time::sleep(MS(20)).await;
    }
}

#[tokio::test]
async fn the_store_answers_the_servers_time() {
    use native_redis_lock::core::api::LockStore;
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(1000));
    let backend = locks.store().backend();
    let before = std::time::SystemTime::now();
    let time = backend
        .server_time(b"lock:t", MS(1000))
        .await
        .expect("TIME");
    let slack = MS(1000);
    assert!(time + slack >= before && time <= std::time::SystemTime::now() + slack);
    assert!(
        backend.caps().transactions,
        "one Redis may take an attempt as MULTI"
    );
}

/// A server that refuses connections (killed, not restarted): a wait in flight ends with a
/// connection error within a moment of the refused reconnect, not at its bound, nor after
/// retrying the refusal (about 0.3 s), and a new attempt fails as fast.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_refused_reconnect_ends_waits_at_once() {
    let server = RedisServer::start();
    let locks = locker(&server, "lock:", MS(2000));
    let _held = take(&locks, "refused", MS(30_000)).await;
    let waiting = {
        let locks = locks.clone();
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            let result = (locks.wait("refused", MS(1000), MS(8000), MS(1000), &cancel)).await;
            (result.map(|_| ()), Instant::now())
        })
    };
    // Into its wait: the first attempt found the key held.
    tokio::time::sleep(MS(100)).await;
    let killed = Instant::now();
    server.signal("-KILL");
    let (result, ended) = waiting.await.expect("the wait's task");
    assert!(
        matches!(result, Err(LockError::Connection(_))),
        "{result:?}"
    );
    let took = ended.duration_since(killed);
    assert!(took < MS(100), "the wait ended {took:?} after the kill");
    let started = Instant::now();
    let fresh = locks.attempt("refused-new", MS(1000)).await.map(|_| ());
    assert!(matches!(fresh, Err(LockError::Connection(_))), "{fresh:?}");
    let took = started.elapsed();
    assert!(took < MS(100), "a new attempt failed after {took:?}");
}

/// Errors `raw`'s server has answered with `code` so far (INFO errorstats).
fn errors(raw: &mut redis::Connection, code: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(raw).unwrap();
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_fresh_connection_loads_its_scripts_before_its_first_call() {
    // The first acquire and release on a new connection go as EVALSHA: were the scripts
    // loaded only on a NOSCRIPT, each would cost a refused call, a SCRIPT LOAD and a resend.
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    let before = errors(&mut raw, "NOSCRIPT");
    let locks = locker(&server, "lock:", MS(2000));
    let lease = take(&locks, "fresh", MS(5000)).await;
    assert!(locks.release(&lease).await.unwrap());
    assert_eq!(errors(&mut raw, "NOSCRIPT"), before);
    // On a reconnect too: the new connection loads them again. The flush waits until the
    // drop is heard (its push), not to race it with the next call.
    server.kill_clients();
    let heard = Instant::now();
    while locks.store().scripts_ready() {
        assert!(heard.elapsed() < MS(5000), "the drop was never heard");
        tokio::time::sleep(MS(5)).await;
    }
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.raw())
        .unwrap();
    let lease = match locks.attempt("again", MS(5000)).await {
        Ok(Attempt::Acquired(lease)) => lease,
        // The killed connection may fail the first call; the next one reconnects.
        _ => take(&locks, "again", MS(5000)).await,
    };
    assert!(locks.release(&lease).await.unwrap());
    assert_eq!(errors(&mut server.raw(), "NOSCRIPT"), before);
}

/// Refusals (an ACL's) of `SCRIPT LOAD` on `raw`'s server so far.
fn refused_script_loads(raw: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_script|load:"))
        .and_then(|stats| {
            let rejected = stats
                .split(',')
                .find_map(|s| s.strip_prefix("rejected_calls="));
            rejected.and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_refused_script_load_is_not_sent_again_on_the_same_connection() {
    // An ACL without SCRIPT: the scripts are in the cache (loaded by another user), and the
    // calls go as EVALSHA; the preload, refused once, is not sent again with every call.
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noscript")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-script")
        .query(&mut raw)
        .unwrap();
    for source in native_redis_lock::core::api::scripts::ALL_SOURCES {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut raw)
            .unwrap();
    }
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("redis://noscript:pw@127.0.0.1:{}", server.port)),
        ..Default::default()
    })
    .expect("endpoint");
    let locks = Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)));
    for round in 0..4 {
        let lease = take(&locks, &format!("acl:{round}"), MS(5000)).await;
        assert!(locks.release(&lease).await.unwrap());
    }
    // One preload: its pipeline's SCRIPT LOAD of every script, each refused.
    let every = native_redis_lock::core::api::scripts::ALL_SOURCES.len() as i64;
    assert_eq!(refused_script_loads(&mut raw), every);
}
