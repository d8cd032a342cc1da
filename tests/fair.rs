//! Fair locks (`fair: true`): waiters line up in Redis and get the lock in the order they
//! asked for it, wherever they wait; nobody gets ahead of the line. Waiters poll rarely here
//! (5 s), so a prompt turn can only come from the release naming the next in line (or the
//! half-second attempt that keeps a place alive).

mod common;

use common::RedisServer;
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SLOW_POLL: Duration = Duration::from_secs(5);

/// A fair locker on its own connection, as a separate process would have.
fn process(server: &RedisServer, n: u64) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        connect_timeout: Some(MS(3000 + n)),
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)).fair(true))
}

async fn take(locks: &Locker, key: &str) -> Lease {
    match locks.attempt(key, MS(30_000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} held"),
    }
}

/// Waits for `key`, writes `name` down once it holds it, and releases it.
fn wait_for(
    locks: &Arc<Locker>,
    key: &str,
    name: &'static str,
    order: &Arc<Mutex<Vec<&'static str>>>,
) -> tokio::task::JoinHandle<Instant> {
    let (locks, key, order) = (locks.clone(), key.to_owned(), order.clone());
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        let lease = locks
            .wait(&key, MS(30_000), MS(20_000), SLOW_POLL, &cancel)
            .await
            .expect("wait");
        order.lock().unwrap().push(name);
        let at = Instant::now();
        tokio::time::sleep(MS(5)).await;
        assert!(locks.release(&lease).await.expect("release"));
        at
    })
}

fn line_size(raw: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("ZCARD")
        .arg(keys::line_key(format!("lock:{key}").as_bytes()))
        .query(raw)
        .unwrap()
}

/// Waits until `key`'s line holds `n` waiters (or `bound` ran out): a waiter's place is taken
/// when Redis has it, however late load runs its task, not after a fixed sleep.
async fn line_of(server: &RedisServer, key: &str, n: i64, bound: Duration) -> i64 {
    let mut raw = server.raw();
    let until = Instant::now() + bound;
    loop {
        let size = line_size(&mut raw, key);
        if size == n || Instant::now() >= until {
            return size;
        }
        tokio::time::sleep(MS(5)).await;
    }
}

#[tokio::test]
async fn waiters_get_the_lock_in_the_order_they_asked_wherever_they_wait() {
    let server = RedisServer::start();
    let (a, b, c) = (
        process(&server, 1),
        process(&server, 2),
        process(&server, 3),
    );
    let lease = take(&a, "turns").await;
    let order = Arc::new(Mutex::new(Vec::new()));
    // Waiters of the holder's own process among the others: a release must not hand the
    // lock to them out of turn.
    let mut waiting = Vec::new();
    for (locks, name) in [(&b, "b1"), (&a, "a1"), (&c, "c1"), (&a, "a2"), (&b, "b2")] {
        waiting.push(wait_for(locks, "turns", name, &order));
        let n = i64::try_from(waiting.len()).unwrap_or(i64::MAX);
        assert_eq!(
            line_of(&server, "turns", n, MS(10_000)).await,
            n,
            "{name} in line"
        );
    }
    let released = Instant::now();
    assert!(a.release(&lease).await.unwrap());
    let mut last = released;
    for handle in waiting {
        last = last.max(handle.await.unwrap());
    }
    assert_eq!(*order.lock().unwrap(), ["b1", "a1", "c1", "a2", "b2"]);
    let took = last.duration_since(released);
    assert!(took < MS(1000), "took {took:?}: polls, not releases");
    assert_eq!(line_size(&mut server.raw(), "turns"), 0);
}

#[tokio::test]
async fn a_plain_attempt_does_not_get_ahead_of_the_line() {
    let server = RedisServer::start();
    let (holder, waiter, barger) = (
        process(&server, 1),
        process(&server, 2),
        process(&server, 3),
    );
    let lease = take(&holder, "queue").await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiting = wait_for(&waiter, "queue", "waiter", &order);
    assert_eq!(line_of(&server, "queue", 1, MS(10_000)).await, 1);
    assert!(holder.release(&lease).await.unwrap());
    // Free, or taken by the waiter by now: either way not this attempt's to take.
    assert!(matches!(
        barger.attempt("queue", MS(30_000)).await.unwrap(),
        Attempt::Held { .. }
    ));
    waiting.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["waiter"]);
    // With nobody in line, a plain attempt wins as ever.
    let lease = take(&barger, "queue").await;
    assert!(barger.release(&lease).await.unwrap());
}

#[tokio::test]
async fn acquire_with_retries_takes_its_place_with_its_first_attempt() {
    let server = RedisServer::start();
    let (holder, patient, eager) = (
        process(&server, 1),
        process(&server, 2),
        process(&server, 3),
    );
    let lease = take(&holder, "retries").await;
    // Retries due only after 10 s: its place comes from its first attempt, not a retry.
    let asked = Instant::now();
    let acquiring = {
        let patient = patient.clone();
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            patient
                .acquire("retries", MS(30_000), 3, MS(10_000), &cancel)
                .await
        })
    };
    assert_eq!(line_of(&server, "retries", 1, MS(10_000)).await, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiting = wait_for(&eager, "retries", "eager", &order);
    assert_eq!(line_of(&server, "retries", 2, MS(10_000)).await, 2);
    assert!(holder.release(&lease).await.unwrap());
    let won = acquiring.await.unwrap().expect("acquire");
    // Before its first retry was due, however slow the machine: the release woke it.
    assert!(asked.elapsed() < MS(10_000), "the retry, not the release");
    assert!(
        order.lock().unwrap().is_empty(),
        "the later waiter went first"
    );
    assert!(patient.release(&won).await.unwrap());
    waiting.await.unwrap();
}

#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_line() {
    let server = RedisServer::start();
    let (holder, quitter, stayer) = (
        process(&server, 1),
        process(&server, 2),
        process(&server, 3),
    );
    let lease = take(&holder, "leave").await;
    let quitting = {
        let quitter = quitter.clone();
        tokio::spawn(async move {
            let cancel = CancellationToken::new();
            quitter
                .wait("leave", MS(30_000), MS(400), SLOW_POLL, &cancel)
                .await
        })
    };
    assert_eq!(line_of(&server, "leave", 1, MS(10_000)).await, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let asked = Instant::now();
    let staying = wait_for(&stayer, "leave", "stayer", &order);
    assert_eq!(line_of(&server, "leave", 2, MS(10_000)).await, 2);
    assert!(quitting.await.unwrap().is_err(), "the lock was held");
    // Well before a place left alone runs out (2 s): the quitter took its own out.
    assert_eq!(line_of(&server, "leave", 1, MS(1000)).await, 1);
    // The release names the one left in line.
    assert!(holder.release(&lease).await.unwrap());
    staying.await.unwrap();
    // Before its first poll (5 s) was due, however slow the machine: the release woke it.
    assert!(asked.elapsed() < SLOW_POLL, "a poll, not the release");
    assert_eq!(*order.lock().unwrap(), ["stayer"]);
    assert_eq!(line_size(&mut server.raw(), "leave"), 0);
}

#[tokio::test]
async fn a_waiter_that_went_away_holds_up_the_line_only_until_its_place_runs_out() {
    let server = RedisServer::start();
    let locks = process(&server, 1);
    let mut raw = server.raw();
    // A waiter first in line whose process is gone: it no longer renews its place.
    let now_ms = {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut raw).unwrap();
        secs * 1000 + micros / 1000
    };
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(keys::line_key(b"lock:gone"))
        .arg(1)
        .arg("ghost:1")
        .ignore()
        .cmd("ZADD")
        .arg(keys::alive_key(b"lock:gone"))
        .arg(now_ms + 800)
        .arg("ghost:1")
        .ignore()
        .query(&mut raw)
        .unwrap();
    let started = Instant::now();
    assert!(matches!(
        locks.attempt("gone", MS(30_000)).await.unwrap(),
        Attempt::Held { .. }
    ));
    let cancel = CancellationToken::new();
    let lease = locks
        .wait("gone", MS(30_000), MS(5000), SLOW_POLL, &cancel)
        .await
        .expect("wait");
    let waited = started.elapsed();
    assert!(waited >= MS(700), "got ahead of a live place: {waited:?}");
    assert!(waited < MS(2500), "the dead place held on: {waited:?}");
    assert!(locks.release(&lease).await.unwrap());
    assert_eq!(line_size(&mut raw, "gone"), 0);
}
