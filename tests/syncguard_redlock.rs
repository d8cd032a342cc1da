//! syncguard's backend on a Redlock over independent redis-servers, each started here on a
//! free port and stopped by its pid: acquire, release, extend, isLocked and lookups settled
//! on a quorum; a holder on a majority leaves nothing of ours behind; a minority down still
//! locks, a majority down is the quorum error (never "locked"); and the fence of a winner is
//! the one written in the records and counters of its majority, so that fences still
//! strictly increase across majorities that only meet (counters preset 10, 0, 0).

mod common;
#[path = "common/delay_proxy.rs"]
mod delay_proxy;
#[path = "common/redlock.rs"]
mod redlock_nodes;
#[path = "common/syncguard_keys.rs"]
mod syncguard_keys;

use common::RedisServer;
use delay_proxy::DelayProxy;
use native_redis_lock::core::api::{Endpoint, EndpointSpec, LockConnection, Owner};
use native_redis_lock::core::api::{ReleasedById, Syncguard, SyncguardSettings, SyncguardWon};
use native_redis_lock::core::basics::error::LockError;
use redis::Value;
use redlock_nodes::{servers, Rng};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use syncguard_keys::Keys;

const MS: fn(u64) -> Duration = Duration::from_millis;
const TTL_MS: f64 = 30_000.0;

fn backend(nodes: &[RedisServer], timeout: Duration) -> Syncguard {
    backend_at(redlock_nodes::endpoint(nodes, timeout), timeout)
}

fn backend_at(endpoint: Endpoint, timeout: Duration) -> Syncguard {
    let connection = LockConnection::open(endpoint);
    let settings = SyncguardSettings {
        command_timeout_ms: Some(timeout.as_millis() as f64),
        ..Default::default()
    };
    Syncguard::new(&connection, settings, Owner::new()).expect("backend")
}

impl Keys {
    /// A live record of this lockId on `server`, as syncguard writes it.
    fn plant(&self, server: &RedisServer) {
        let record = format!(
            r#"{{"lockId":"{}","expiresAtMs":{},"acquiredAtMs":0,"key":"{}","fence":"000000000000009"}}"#,
            self.id,
            now_ms() + 60_000,
            self.key
        );
        raw(
            server,
            &[b"SET", &self.lock, record.as_bytes(), b"PX", b"60000"],
        );
        raw(server, &[b"SET", &self.index, &self.lock, b"PX", b"60000"]);
    }

    fn record(&self, server: &RedisServer) -> Option<String> {
        match raw(server, &[b"GET", &self.lock]) {
            Value::BulkString(json) => Some(String::from_utf8(json).expect("utf-8")),
            _ => None,
        }
    }

    fn counter(&self, server: &RedisServer) -> u64 {
        match raw(server, &[b"GET", &self.fence]) {
            Value::BulkString(n) => std::str::from_utf8(&n).unwrap().parse().unwrap(),
            _ => 0,
        }
    }
}

fn raw(server: &RedisServer, args: &[&[u8]]) -> Value {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(&mut server.raw()).unwrap()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn fence_text(fence: u64) -> String {
    format!(r#""fence":"{fence:015}""#)
}

async fn acquire(
    backend: &Syncguard,
    keys: &Keys,
    ttl_ms: f64,
) -> Result<Option<SyncguardWon>, LockError> {
    let won = backend.acquire(&keys.call(), ttl_ms).unwrap().await;
    won.map(|won| won.map(|granted| granted.won))
}

async fn release(backend: &Syncguard, keys: &Keys) -> Result<ReleasedById, LockError> {
    backend.release(&keys.index, &keys.id).unwrap().await
}

/// Waits up to 2 s for `done`: what a majority confirmed reaches the other nodes a moment
/// later.
async fn settle(mut done: impl FnMut() -> bool) {
    for _ in 0..100 {
        if done() {
            return;
        }
        tokio::time::sleep(MS(20)).await;
    }
}

#[tokio::test]
async fn acquire_release_extend_is_locked_and_lookups_on_five_nodes() {
    let nodes = servers(5);
    let backend = backend(&nodes, MS(2000));
    let (mine, other) = (Keys::new("job", 1), Keys::new("job", 2));
    let before = now_ms();
    let won = acquire(&backend, &mine, TTL_MS)
        .await
        .unwrap()
        .expect("won");
    assert_eq!(won.fence, 1);
    let expires = won.expires_at_ms as i64;
    assert!(
        (expires - before - 30_000).abs() < 1_000,
        "{expires} vs {before}"
    );
    // A call returns once a majority answered; the other nodes' writes are already sent and
    // land within moments, not at once.
    settle(|| nodes.iter().all(|node| mine.record(node).is_some())).await;
    for node in &nodes {
        let record = mine.record(node).expect("a record on every node");
        assert!(
            record.contains(&mine.id) && record.contains(&fence_text(1)),
            "{record}"
        );
    }
    assert_eq!(
        acquire(&backend, &other, TTL_MS).await.unwrap(),
        None,
        "contention"
    );
    assert!(backend.is_locked(&mine.lock).unwrap().await.unwrap());
    let by_key = backend.lookup_key(&mine.lock).unwrap().await.unwrap();
    let by_key = String::from_utf8(by_key.expect("a record")).unwrap();
    assert!(
        by_key.contains(&format!(r#""lockId":"{}""#, mine.id)),
        "{by_key}"
    );
    assert!(by_key.contains(&fence_text(1)), "{by_key}");
    let by_id = backend.lookup_id(&mine.index, &mine.id).unwrap().await;
    assert!(by_id.unwrap().is_some());
    let not_ours = backend.lookup_id(&mine.index, &other.id).unwrap().await;
    assert_eq!(not_ours.unwrap(), None);

    let extended = backend
        .extend(&mine.index, &mine.id, 60_000.0)
        .unwrap()
        .await;
    let expiry = extended.unwrap().expect("ours");
    assert!((expiry - now_ms() - 60_000).abs() < 1_000, "{expiry}");
    let extended_on =
        |node| matches!(raw(node, &[b"PTTL", &mine.lock]), Value::Int(pttl) if pttl > 30_000);
    settle(|| nodes.iter().all(extended_on)).await;
    for node in &nodes {
        let Value::Int(pttl) = raw(node, &[b"PTTL", &mine.lock]) else {
            panic!("no TTL");
        };
        assert!((59_000..=60_000).contains(&pttl), "{pttl}");
    }
    let theirs = backend
        .extend(&mine.index, &other.id, 60_000.0)
        .unwrap()
        .await;
    assert_eq!(theirs.unwrap(), None);

    assert_eq!(
        release(&backend, &other).await.unwrap(),
        ReleasedById::NotFound
    );
    let lock_key = mine.lock.clone();
    assert_eq!(
        release(&backend, &mine).await.unwrap(),
        ReleasedById::Released { lock_key }
    );
    settle(|| nodes.iter().all(|node| mine.record(node).is_none())).await;
    for node in &nodes {
        assert_eq!(mine.record(node), None, "released on every node");
    }
    assert!(!backend.is_locked(&mine.lock).unwrap().await.unwrap());
    assert_eq!(backend.lookup_key(&mine.lock).unwrap().await.unwrap(), None);
    let again = acquire(&backend, &other, TTL_MS)
        .await
        .unwrap()
        .expect("free");
    assert_eq!(again.fence, 2);
}

#[tokio::test]
async fn held_on_a_majority_by_another_lock_id_fails_as_locked_and_leaves_nothing_of_ours() {
    let nodes = servers(5);
    let backend = backend(&nodes, MS(2000));
    let (theirs, mine) = (Keys::new("job", 1), Keys::new("job", 2));
    for node in &nodes[..3] {
        theirs.plant(node);
    }
    assert_eq!(acquire(&backend, &mine, TTL_MS).await.unwrap(), None);
    // The nodes it did not wait for (the failure was known from the three holders) are
    // freed by a release of their own, sent behind the attempt on the same connection.
    let ours_left = || {
        (nodes.iter()).any(|node| {
            raw(node, &[b"EXISTS", &mine.index]) == Value::Int(1)
                || (mine.record(node)).is_some_and(|record| record.contains(&mine.id))
        })
    };
    let deadline = Instant::now() + MS(3000);
    while ours_left() && Instant::now() < deadline {
        tokio::time::sleep(MS(10)).await;
    }
    assert!(!ours_left(), "a node keeps ours");
    // What a majority says: locked, by their record.
    assert!(backend.is_locked(&mine.lock).unwrap().await.unwrap());
    let by_key = backend.lookup_key(&mine.lock).unwrap().await.unwrap();
    assert!(String::from_utf8(by_key.expect("theirs"))
        .unwrap()
        .contains(&theirs.id));
    // Two records of one lockId and two of another: nobody holds a majority.
    raw(&nodes[2], &[b"DEL", &theirs.lock, &theirs.index]);
    Keys::new("job", 3).plant(&nodes[3]);
    Keys::new("job", 3).plant(&nodes[4]);
    assert_eq!(backend.lookup_key(&mine.lock).unwrap().await.unwrap(), None);
}

#[tokio::test]
async fn two_of_five_down_still_works() {
    let mut nodes = servers(5);
    let backend = backend(&nodes, MS(1000));
    drop(nodes.drain(3..));
    let mine = Keys::new("k", 1);
    let won = acquire(&backend, &mine, TTL_MS)
        .await
        .unwrap()
        .expect("won");
    assert_eq!(
        acquire(&backend, &Keys::new("k", 2), TTL_MS).await.unwrap(),
        None
    );
    assert!(backend.is_locked(&mine.lock).unwrap().await.unwrap());
    let extended = backend
        .extend(&mine.index, &mine.id, 10_000.0)
        .unwrap()
        .await;
    assert!(extended.unwrap().is_some());
    assert!(matches!(
        release(&backend, &mine).await.unwrap(),
        ReleasedById::Released { .. }
    ));
    let next = acquire(&backend, &mine, TTL_MS)
        .await
        .unwrap()
        .expect("free again");
    assert!(next.fence > won.fence);
}

#[tokio::test]
async fn three_of_five_down_is_the_quorum_error_fast_never_locked() {
    let mut nodes = servers(5);
    let backend = backend(&nodes, MS(1000));
    let holder = Keys::new("k", 1);
    acquire(&backend, &holder, TTL_MS)
        .await
        .unwrap()
        .expect("won");
    drop(nodes.drain(2..));
    let started = Instant::now();
    let failed = acquire(&backend, &Keys::new("k", 2), TTL_MS).await;
    let took = started.elapsed();
    match failed {
        Err(err @ LockError::Connection(_)) => {
            let text = err.to_string();
            assert!(
                text.contains("only 2 of 5 Redlock nodes answered"),
                "{text}"
            );
            assert!(err.is_infrastructure());
        }
        Err(other) => panic!("expected the quorum error, got {other:?}"),
        Ok(None) => panic!("locked, with only 2 of 5 nodes answering"),
        Ok(Some(_)) => panic!("acquired without a quorum"),
    }
    assert!(took < MS(1500), "took {took:?}");
    let is_locked = backend.is_locked(&holder.lock).unwrap().await;
    assert!(
        matches!(is_locked, Err(LockError::Connection(_))),
        "{is_locked:?}"
    );
    let lookup = backend.lookup_key(&holder.lock).unwrap().await;
    assert!(
        matches!(lookup, Err(LockError::Connection(_))),
        "{lookup:?}"
    );
    let released = release(&backend, &holder).await;
    assert!(
        matches!(released, Err(LockError::Connection(_))),
        "{released:?}"
    );
}

#[tokio::test]
async fn the_counterexample_10_0_0_gives_increasing_fences_written_where_they_won() {
    let nodes = servers(3);
    let backend = backend(&nodes, MS(2000));
    let (a, b, blocker) = (Keys::new("k", 1), Keys::new("k", 2), Keys::new("k", 3));
    for (node, preset) in nodes.iter().zip(["10", "0", "0"]) {
        raw(node, &[b"SET", &a.fence, preset.as_bytes()]);
    }
    // A wins nodes 1 and 2: fences 11 and 1, so 11, written on both.
    blocker.plant(&nodes[2]);
    let won_a = acquire(&backend, &a, TTL_MS).await.unwrap().expect("A");
    assert_eq!(won_a.fence, 11);
    for node in &nodes[..2] {
        let record = a.record(node).expect("A's record");
        assert!(record.contains(&fence_text(11)), "{record}");
        assert!(a.counter(node) >= 11);
    }
    let by_id = backend.lookup_id(&a.index, &a.id).unwrap().await.unwrap();
    assert!(String::from_utf8(by_id.expect("A's"))
        .unwrap()
        .contains(&fence_text(11)));
    assert!(matches!(
        release(&backend, &a).await.unwrap(),
        ReleasedById::Released { .. }
    ));
    raw(&nodes[2], &[b"DEL", &blocker.lock, &blocker.index]);
    // B wins nodes 2 and 3: the max of what they drew without the write-back would be 2.
    blocker.plant(&nodes[0]);
    let won_b = acquire(&backend, &b, TTL_MS).await.unwrap().expect("B");
    assert!(
        won_b.fence > won_a.fence,
        "B {} after A {}",
        won_b.fence,
        won_a.fence
    );
    for node in &nodes[1..] {
        let record = b.record(node).expect("B's record");
        assert!(record.contains(&fence_text(won_b.fence)), "{record}");
        assert!(b.counter(node) >= won_b.fence);
    }
}

/// A failed attempt frees the nodes it did not wait for by a release of its own, by lockId;
/// `lock()`'s next attempt keeps that lockId, so it must reach those nodes after that release,
/// or the release frees what it won there. Nodes 4 and 5 are slow (100 ms) so that the first
/// attempt fails (held on 1 to 3) without them, and the second, made at once (the test's
/// runtime runs nothing else in between), wins on 1 to 3 without them too.
#[tokio::test]
async fn a_retry_with_the_same_lock_id_is_not_undone_by_the_last_attempts_late_release() {
    let nodes = servers(5);
    let proxies = [
        DelayProxy::start(nodes[3].port).await,
        DelayProxy::start(nodes[4].port).await,
    ];
    let urls = (nodes[..3].iter().map(RedisServer::url)).chain(proxies.iter().map(DelayProxy::url));
    let endpoints = urls
        .map(|url| {
            let spec = EndpointSpec {
                url: Some(url),
                connect_timeout: Some(MS(2000)),
                ..Default::default()
            };
            Endpoint::from_spec(spec).expect("endpoint")
        })
        .collect();
    let backend = backend_at(Endpoint::redlock(endpoints, "redis").unwrap(), MS(2000));
    let (theirs, mine) = (Keys::new("k", 1), Keys::new("k", 2));
    // Every connection open before the race.
    let warm = Keys::new("warm", 3);
    acquire(&backend, &warm, TTL_MS)
        .await
        .unwrap()
        .expect("warm");
    release(&backend, &warm).await.unwrap();
    for node in &nodes[..3] {
        theirs.plant(node);
    }
    for proxy in &proxies {
        proxy.set_delay(MS(100));
    }
    assert_eq!(acquire(&backend, &mine, TTL_MS).await.unwrap(), None);
    for node in &nodes[..3] {
        raw(node, &[b"DEL", &theirs.lock, &theirs.index]);
    }
    let won = acquire(&backend, &mine, TTL_MS).await.unwrap();
    assert!(won.is_some(), "free on 1 to 3");
    // Everything sent to the slow nodes has arrived by now.
    tokio::time::sleep(MS(600)).await;
    for (i, node) in nodes.iter().enumerate() {
        let record = mine.record(node).unwrap_or_default();
        assert!(record.contains(&mine.id), "node {}: {record:?}", i + 1);
    }
}

/// Random majorities of 3 to 5 nodes (the others held by another lockId), counters preset at
/// random and now and then pushed ahead: each winner's fence is above the last, and is the
/// one in its majority's records.
#[tokio::test]
async fn random_majorities_with_preset_counters_give_strictly_increasing_fences() {
    let seed = redlock_nodes::seed();
    let mut rng = Rng(seed);
    let nodes = servers(5);
    let backend = backend(&nodes, MS(2000));
    let blocker = Keys::new("k", 99);
    for node in &nodes {
        let preset = rng.below(1000).to_string();
        raw(node, &[b"SET", &blocker.fence, preset.as_bytes()]);
    }
    let mut last = 0;
    for round in 0..30u8 {
        let mut order: Vec<usize> = (0..5).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let size = 3 + rng.below(3) as usize;
        let (majority, blocked) = order.split_at(size);
        for &i in blocked {
            blocker.plant(&nodes[i]);
        }
        if rng.below(4) == 0 {
            let i = rng.below(5) as usize;
            let by = rng.below(500).to_string();
            raw(&nodes[i], &[b"INCRBY", &blocker.fence, by.as_bytes()]);
        }
        let keys = Keys::new("k", round);
        let won = acquire(&backend, &keys, TTL_MS).await.unwrap();
        let won = won.unwrap_or_else(|| panic!("round {round} (seed {seed}): locked"));
        assert!(
            won.fence > last,
            "round {round} (seed {seed}): fence {} after {last}",
            won.fence
        );
        last = won.fence;
        let written = (majority.iter())
            .filter(|&&i| {
                (keys.record(&nodes[i])).is_some_and(|r| r.contains(&fence_text(won.fence)))
            })
            .count();
        assert!(
            written >= 3,
            "round {round} (seed {seed}): on {written} nodes"
        );
        release(&backend, &keys).await.unwrap();
        for &i in blocked {
            raw(&nodes[i], &[b"DEL", &blocker.lock, &blocker.index]);
        }
    }
}
