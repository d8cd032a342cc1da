//! Wake-up on release: waiters poll rarely here (5 s), so only the release can explain a
//! prompt acquisition.

mod common;

use common::{calls, RedisServer};
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SLOW_POLL: Duration = Duration::from_secs(5);

/// A locker on its own connection, as a separate process would have (settings that differ
/// in anything, here the connect timeout, get connections of their own).
fn process(server: &RedisServer, n: u64) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        connect_timeout: Some(MS(2000 + n)),
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)))
}

async fn take(locks: &Locker, key: &str) -> Lease {
    match locks.attempt(key, MS(30_000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} held"),
    }
}

fn wait_for(locks: &Arc<Locker>, key: &str) -> tokio::task::JoinHandle<Instant> {
    let (locks, key) = (locks.clone(), key.to_owned());
    tokio::spawn(async move {
        let lease = locks
            .wait(
                &key,
                MS(30_000),
                MS(20_000),
                SLOW_POLL,
                &CancellationToken::new(),
            )
            .await
            .expect("wait");
        let at = Instant::now();
        locks.release(&lease).await.expect("release");
        at
    })
}

/// A wait by `locks` for `key` that gives up after 300 ms (the lock is held), leaving its
/// connection queued.
async fn give_up(locks: &Locker, key: &str) {
    let gave_up = locks
        .wait(
            key,
            MS(30_000),
            MS(300),
            SLOW_POLL,
            &CancellationToken::new(),
        )
        .await;
    assert!(gave_up.is_err(), "the lock was held");
}

/// Releases `lease` and says how long after it `waiting` held the lock.
async fn woken_after(
    holder: &Locker,
    lease: &Lease,
    waiting: tokio::task::JoinHandle<Instant>,
) -> Duration {
    let released = Instant::now();
    assert!(holder.release(lease).await.unwrap());
    waiting.await.unwrap().duration_since(released)
}

#[tokio::test]
async fn a_release_wakes_a_waiter_in_another_process_at_once() {
    let server = RedisServer::start();
    let (holder, waiter) = (process(&server, 1), process(&server, 2));
    let lease = take(&holder, "job").await;
    let waiting = wait_for(&waiter, "job");
    tokio::time::sleep(MS(300)).await;
    assert!(!waiting.is_finished());
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let got = waiting.await.unwrap();
    let after = got.duration_since(released);
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
}

#[tokio::test]
async fn a_release_wakes_one_waiter_the_one_that_asked_first() {
    let server = RedisServer::start();
    let (holder, waiters) = (process(&server, 1), process(&server, 2));
    let lease = take(&holder, "one").await;
    let first = wait_for(&waiters, "one");
    tokio::time::sleep(MS(200)).await;
    let second = wait_for(&waiters, "one");
    tokio::time::sleep(MS(200)).await;
    let mut monitor = server.raw();
    let before = calls(&mut monitor, "set");
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let first_at = first.await.unwrap();
    // The first waiter's own release wakes the second in turn.
    let second_at = second.await.unwrap();
    assert!(first_at <= second_at);
    let after = second_at.duration_since(released);
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the releases"
    );
    // Two acquisitions and nothing else: nobody tried and failed in between.
    assert_eq!(calls(&mut monitor, "set") - before, 2);
}

#[tokio::test]
async fn a_server_without_resp3_still_gets_the_lock_by_polling() {
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let holder = process(&server, 1);
    let waiter = process(&server, 2);
    let lease = take(&holder, "old").await;
    let (locks, started) = (waiter.clone(), Instant::now());
    let waiting = tokio::spawn(async move {
        locks
            .wait("old", MS(5000), MS(5000), MS(50), &CancellationToken::new())
            .await
    });
    tokio::time::sleep(MS(200)).await;
    assert!(holder.release(&lease).await.unwrap());
    let lease = waiting.await.unwrap().expect("wait");
    assert!(started.elapsed() < MS(2000));
    assert!(waiter.release(&lease).await.unwrap());
}

#[tokio::test]
async fn a_holder_that_waits_again_queues_behind_the_waiter_it_woke() {
    let server = RedisServer::start();
    let locks = process(&server, 1);
    let first = locks
        .wait(
            "turns",
            MS(30_000),
            MS(1000),
            SLOW_POLL,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let other = wait_for(&locks, "turns");
    tokio::time::sleep(MS(200)).await;
    let mut monitor = server.raw();
    let before = calls(&mut monitor, "set");
    // Release and at once ask again, as a worker loop does: the waiter woken by the release
    // must get the lock, and the newcomer wait behind it without trying.
    assert!(locks.release(&first).await.unwrap());
    let again = locks
        .wait(
            "turns",
            MS(30_000),
            MS(20_000),
            SLOW_POLL,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let again_at = Instant::now();
    let other_at = other.await.unwrap();
    assert!(other_at < again_at, "the newcomer jumped the queue");
    assert_eq!(
        calls(&mut monitor, "set") - before,
        2,
        "a failed attempt in between"
    );
    assert!(locks.release(&again).await.unwrap());
}

#[tokio::test]
async fn a_release_wakes_one_waiter_across_processes_in_the_order_they_queued() {
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "herd").await;
    let mut waiting = Vec::new();
    for n in 2..5 {
        waiting.push(wait_for(&process(&server, n), "herd"));
        tokio::time::sleep(MS(150)).await;
    }
    let mut monitor = server.raw();
    let before = calls(&mut monitor, "set");
    assert!(holder.release(&lease).await.unwrap());
    let mut times = Vec::new();
    for handle in waiting {
        times.push(handle.await.unwrap());
    }
    // Each release woke exactly the next process: one successful attempt each, no losers.
    assert_eq!(calls(&mut monitor, "set") - before, 3);
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "not in queue order"
    );
    let queue: i64 = redis::cmd("EXISTS")
        .arg(keys::queue_key(b"lock:herd"))
        .query(&mut monitor)
        .unwrap();
    assert_eq!(queue, 0, "the queue outlived its waiters");
}

#[tokio::test]
async fn a_wake_for_a_process_whose_waiter_gave_up_is_passed_on() {
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "gone").await;
    let quitter = process(&server, 2);
    give_up(&quitter, "gone").await;
    // The quitter's connection is still first in the queue.
    let patient = wait_for(&process(&server, 3), "gone");
    tokio::time::sleep(MS(200)).await;
    let after = woken_after(&holder, &lease, patient).await;
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the passed-on wake"
    );
}

/// Holds `key` in one process, releases it under a waiter of another, and says how long
/// the waiter took to get it.
async fn handover_across_processes(server: &RedisServer, key: &str) -> Duration {
    let (holder, waiter) = (process(server, 1), process(server, 2));
    let lease = take(&holder, key).await;
    let waiting = wait_for(&waiter, key);
    tokio::time::sleep(MS(300)).await;
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    waiting.await.unwrap().duration_since(released)
}

#[tokio::test]
async fn the_wake_goes_by_sharded_pub_sub_where_the_server_has_it() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let after = handover_across_processes(&server, "sharded").await;
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
    assert!(calls(&mut raw, "ssubscribe") >= 1);
    assert!(calls(&mut raw, "spublish") >= 1);
    assert_eq!(calls(&mut raw, "publish"), 0);
}

#[tokio::test]
async fn a_server_without_sharded_pub_sub_wakes_by_plain_pub_sub() {
    let server = RedisServer::start_with(&[
        "--rename-command",
        "SSUBSCRIBE",
        "",
        "--rename-command",
        "SPUBLISH",
        "",
    ]);
    let mut raw = server.raw();
    let after = handover_across_processes(&server, "plain").await;
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
    assert!(calls(&mut raw, "subscribe") >= 1);
    assert!(calls(&mut raw, "publish") >= 1);
}

#[tokio::test]
async fn idle_subscriptions_are_dropped_past_the_limit_and_the_connection_stays_in_step() {
    let server = RedisServer::start();
    // Fair waiters keep no queue place, so their channels go idle as soon as they leave.
    let fair = |n: u64| {
        let endpoint = Endpoint::from_spec(EndpointSpec {
            url: Some(server.url()),
            connect_timeout: Some(MS(2100 + n)),
            ..Default::default()
        })
        .expect("endpoint");
        Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)).fair(true))
    };
    let (holder, waiter) = (fair(1), fair(2));
    let mut held = Vec::new();
    let mut waits = Vec::new();
    for n in 0..80 {
        let key = format!("idle:{n}");
        held.push(take(&holder, &key).await);
        let waiter = waiter.clone();
        waits.push(tokio::spawn(async move {
            let cancel = CancellationToken::new();
            waiter
                .wait(&key, MS(30_000), MS(300), SLOW_POLL, &cancel)
                .await
        }));
    }
    for wait in waits {
        assert!(wait.await.unwrap().is_err(), "the lock was held");
    }
    let mut raw = server.raw();
    let channels = |raw: &mut redis::Connection| -> usize {
        let names: Vec<String> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .query(raw)
            .unwrap();
        names.len()
    };
    // The 64th waiter to leave had the idle channels dropped in one go (not left for the next
    // SUBSCRIBE); only those that left after it stay. The drop is a chore the runtime carries
    // out after the leaving, so it is waited for, within a bound a loaded machine meets.
    let mut left = channels(&mut raw);
    for _ in 0..100 {
        if left <= 80 - 64 {
            break;
        }
        tokio::time::sleep(MS(50)).await;
        left = channels(&mut raw);
    }
    assert!(left <= 80 - 64, "{left} channels still subscribed");
    // The next wait must still hear its own wake: replies and confirmations stay paired.
    let lease = take(&holder, "idle:last").await;
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            waiter
                .wait("idle:last", MS(30_000), MS(5000), SLOW_POLL, &cancel)
                .await
        })
    };
    tokio::time::sleep(MS(100)).await;
    assert!(
        channels(&mut raw) <= left + 1,
        "idle channels were subscribed again"
    );
    let released = Instant::now();
    assert!(holder.release(&lease).await.unwrap());
    let won = waiting.await.unwrap().expect("wait");
    // Its next attempt to keep its place in line is due 400 ms after the release.
    let after = released.elapsed();
    assert!(after < MS(200), "took {after:?}: not the release");
    assert!(waiter.release(&won).await.unwrap());
    for lease in held {
        assert!(holder.release(&lease).await.unwrap());
    }
}

/// A connection queued under its marked name (`keys::WAKE_MARK`) that nobody hears any more:
/// what a waiting process killed with SIGKILL leaves in the queue (Redis drops a closed
/// connection's subscriptions; the queue place stays until it runs out).
fn queue_dead_waiter(server: &RedisServer, lock_key: &[u8], score: u64) {
    let mut raw = server.raw();
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::queue_key(lock_key))
        .arg(score)
        .arg(format!("ghost{}", keys::WAKE_MARK))
        .query(&mut raw)
        .unwrap();
}

#[tokio::test]
async fn a_dead_queued_waiter_does_not_swallow_the_wake() {
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "dead").await;
    let waiting = wait_for(&process(&server, 2), "dead");
    tokio::time::sleep(MS(300)).await;
    // Ahead of the live waiter, as a process that queued first and was killed.
    queue_dead_waiter(&server, b"lock:dead", 1);
    let mut raw = server.raw();
    let first: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys::queue_key(b"lock:dead"))
        .arg(0)
        .arg(-1)
        .query(&mut raw)
        .unwrap();
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0], "ghost!");
    assert!(first[1].ends_with('!'), "the live waiter is queued marked");
    let after = woken_after(&holder, &lease, waiting).await;
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
}

#[tokio::test]
async fn a_wake_passed_on_skips_a_dead_queued_waiter_too() {
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "dead-pass").await;
    let quitter = process(&server, 2);
    give_up(&quitter, "dead-pass").await;
    // The quitter's connection stays first; behind it a dead one, then the live waiter.
    queue_dead_waiter(&server, b"lock:dead-pass", 2);
    let patient = wait_for(&process(&server, 3), "dead-pass");
    tokio::time::sleep(MS(200)).await;
    let after = woken_after(&holder, &lease, patient).await;
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the passed-on wake"
    );
}

/// release_wake.lua as versions before the wake channels had it: it pops the first member and
/// announces it on the released channel, whatever its name.
const EARLIER_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local next = redis.pcall('ZPOPMIN', KEYS[2])
if type(next) == 'table' and next[1] then
  local sent = redis.pcall('SPUBLISH', ARGV[2], next[1])
  if type(sent) == 'table' and sent.err then redis.pcall('PUBLISH', ARGV[2], next[1]) end
end
return 1
"#;

#[tokio::test]
async fn a_release_of_an_earlier_version_still_wakes_a_waiter_queued_marked() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let lock_key = b"lock:mixed";
    let _: () = redis::cmd("SET")
        .arg(lock_key)
        .arg("old-holder")
        .query(&mut raw)
        .unwrap();
    let waiting = wait_for(&process(&server, 2), "mixed");
    tokio::time::sleep(MS(300)).await;
    let released = Instant::now();
    let freed: i64 = redis::cmd("EVAL")
        .arg(EARLIER_RELEASE)
        .arg(2)
        .arg(lock_key)
        .arg(keys::queue_key(lock_key))
        .arg("old-holder")
        .arg(keys::released_channel(lock_key))
        .query(&mut raw)
        .unwrap();
    assert_eq!(freed, 1);
    let after = waiting.await.unwrap().duration_since(released);
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
}

#[tokio::test]
async fn a_connection_queued_unmarked_is_told_on_the_released_channel_as_before() {
    // A process of an earlier version (or a Cluster store): queued under its bare id, it
    // listens on the lock's released channel only.
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "earlier").await;
    let client = redis::Client::open(server.url()).unwrap();
    let mut listener = client.get_connection().unwrap();
    let channel = keys::released_channel(b"lock:earlier");
    let _: redis::Value = redis::cmd("SSUBSCRIBE")
        .arg(&channel)
        .query(&mut listener)
        .unwrap();
    let mut raw = server.raw();
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::queue_key(b"lock:earlier"))
        .arg(1)
        .arg("earlier-id")
        .query(&mut raw)
        .unwrap();
    assert!(holder.release(&lease).await.unwrap());
    listener.set_read_timeout(Some(MS(5000))).unwrap();
    let message = listener.recv_response().unwrap();
    let text = format!("{message:?}");
    assert!(text.contains("earlier-id"), "{text}");
}

#[tokio::test]
async fn a_waiters_polls_keep_its_connection_queued_under_the_marked_name_only() {
    let server = RedisServer::start();
    let holder = process(&server, 1);
    let lease = take(&holder, "polls").await;
    let waiter = process(&server, 2);
    let waiting = tokio::spawn(async move {
        waiter
            .wait(
                "polls",
                MS(30_000),
                MS(5000),
                MS(50),
                &CancellationToken::new(),
            )
            .await
    });
    // Several polls, each an attempt that keeps the connection's place (acquire_queued.lua).
    tokio::time::sleep(MS(600)).await;
    let mut raw = server.raw();
    let queued: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys::queue_key(b"lock:polls"))
        .arg(0)
        .arg(-1)
        .query(&mut raw)
        .unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert!(queued[0].ends_with(keys::WAKE_MARK), "{queued:?}");
    assert!(holder.release(&lease).await.unwrap());
    assert!(waiting.await.unwrap().is_ok());
}
