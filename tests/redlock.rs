//! Redlock over independent redis-servers, each started by the test on a free port and
//! stopped by its pid: exclusion, a minority of nodes down, a majority down (the quorum
//! error), fences that strictly increase across majorities that only meet, and a node
//! restarted empty.

mod common;
#[path = "common/redlock.rs"]
mod redlock_nodes;

use common::{within, RedisServer};
use native_redis_lock::core::api::{Attempt, Locker, Store};
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use redlock_nodes::{servers, Rng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "rl:";

fn redlock(servers: &[RedisServer], timeout: Duration) -> Arc<Locker> {
    let endpoint = redlock_nodes::endpoint(servers, timeout);
    Arc::new(Locker::new(Store::shared(endpoint), PREFIX, timeout))
}

fn lock_key(key: &str) -> Vec<u8> {
    format!("{PREFIX}{key}").into_bytes()
}

fn set(server: &RedisServer, key: &[u8], value: &str) {
    let mut raw = server.raw();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query(&mut raw)
        .expect("SET");
}

fn del(server: &RedisServer, key: &[u8]) {
    let mut raw = server.raw();
    let _: i64 = redis::cmd("DEL").arg(key).query(&mut raw).expect("DEL");
}

/// Another holder's token on `server`, so that an attempt cannot win that node.
fn block(server: &RedisServer, key: &str) {
    set(server, &lock_key(key), "someone-else");
}

async fn take(locks: &Locker, key: &str, ttl: Duration) -> Lease {
    match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

/// A lease of `key` that every one of `nodes` holds. An attempt wins on a quorum and waits
/// for the others only a short grace: a node whose call was still on its way then (its
/// connection opening, say) is dropped before the command is written, and never holds it.
/// A test of nodes restarted empty means a lock on all of them, so it takes one until it is.
async fn take_on_all(locks: &Locker, nodes: &[RedisServer], key: &str, ttl: Duration) -> Lease {
    for _ in 0..5 {
        let lease = take(locks, key, ttl).await;
        let holds = |server: &RedisServer| {
            let value: Option<String> = redis::cmd("GET")
                .arg(lock_key(key))
                .query(&mut server.raw())
                .expect("GET");
            value.as_deref() == Some(lease.token.as_str())
        };
        if within(MS(1000), || nodes.iter().all(holds)).await {
            return lease;
        }
        assert!(locks.release(&lease).await.expect("release"));
    }
    panic!("{key} never reached all {} nodes", nodes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_tasks_never_overlap_and_fences_increase() {
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(2000));
    let counter = Arc::new(AtomicU64::new(0));
    let last_fence = Arc::new(AtomicU64::new(0));
    let (tasks, rounds) = (6, 15);
    let mut joined = Vec::new();
    for _ in 0..tasks {
        let (locks, counter, last_fence) = (locks.clone(), counter.clone(), last_fence.clone());
        joined.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let lease = loop {
                    match locks.attempt("counter", MS(5000)).await.expect("attempt") {
                        Attempt::Acquired(lease) => break lease,
                        Attempt::Held { .. } => tokio::time::sleep(MS(2)).await,
                    }
                };
                // Non-atomic on purpose: read, yield, write.
                let seen = counter.load(Ordering::SeqCst);
                let before = last_fence.swap(lease.fence, Ordering::SeqCst);
                assert!(lease.fence > before, "fence {} after {before}", lease.fence);
                tokio::time::sleep(MS(1)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                assert!(locks.release(&lease).await.expect("release"));
            }
        }));
    }
    for task in joined {
        task.await.expect("task");
    }
    assert_eq!(counter.load(Ordering::SeqCst), tasks * rounds);
}

#[tokio::test]
async fn a_held_lock_is_held_for_another_and_free_after_release() {
    let nodes = servers(5);
    let a = redlock(&nodes, MS(2000));
    let lease = take(&a, "k", MS(5000)).await;
    // The call settles once a quorum answered (and a short grace): a node slower than that on
    // a loaded machine still has the command, so its write is waited for, not assumed.
    for server in &nodes {
        let mut raw = server.raw();
        let until = Instant::now() + MS(2000);
        let value = loop {
            let value: Option<String> = redis::cmd("GET")
                .arg(lock_key("k"))
                .query(&mut raw)
                .expect("GET");
            if value.as_deref() == Some(lease.token.as_str()) || Instant::now() > until {
                break value;
            }
            tokio::time::sleep(MS(5)).await;
        };
        assert_eq!(
            value.as_deref(),
            Some(lease.token.as_str()),
            "the same token on every node"
        );
    }
    match a.attempt("k", MS(5000)).await.expect("attempt") {
        Attempt::Held { ttl: Some(ttl) } => assert!(ttl > MS(3000) && ttl <= MS(5000), "{ttl:?}"),
        other => panic!(
            "expected held with a ttl, got acquired: {}",
            matches!(other, Attempt::Acquired(_))
        ),
    }
    assert!(a.release(&lease).await.expect("release"));
    let again = take(&a, "k", MS(5000)).await;
    assert!(again.fence > lease.fence);
}

#[tokio::test]
async fn two_of_five_down_still_locks_and_excludes() {
    let mut nodes = servers(5);
    let locks = redlock(&nodes, MS(1000));
    drop(nodes.drain(3..));
    let lease = take(&locks, "k", MS(5000)).await;
    assert!(matches!(
        locks.attempt("k", MS(5000)).await.expect("attempt"),
        Attempt::Held { .. }
    ));
    assert!(locks.release(&lease).await.expect("release"));
    let next = take(&locks, "k", MS(5000)).await;
    assert!(next.fence > lease.fence);
}

#[tokio::test]
async fn three_of_five_down_fails_fast_with_a_quorum_error_never_held() {
    let mut nodes = servers(5);
    let locks = redlock(&nodes, MS(1000));
    // A holder on the two that stay: still not "held", since no quorum answered.
    let lease = take(&locks, "k", MS(10_000)).await;
    drop(nodes.drain(2..));
    let started = Instant::now();
    let failed = locks.attempt("k", MS(5000)).await;
    let took = started.elapsed();
    match failed {
        Err(err @ LockError::Connection(_)) => {
            let text = err.to_string();
            assert!(
                text.contains("only 2 of 5 Redlock nodes answered"),
                "{text}"
            );
            assert!(text.contains("a quorum is 3"), "{text}");
            assert!(err.is_infrastructure());
        }
        Err(other) => panic!("expected the quorum error, got {other:?}"),
        Ok(Attempt::Held { .. }) => panic!("held, with only 2 of 5 nodes answering"),
        Ok(Attempt::Acquired(_)) => panic!("acquired without a quorum"),
    }
    assert!(took < MS(1500), "took {took:?}");
    // A fresh key too: no holder anywhere, still the quorum error.
    let fresh = locks.attempt("fresh", MS(5000)).await;
    assert!(
        matches!(fresh, Err(LockError::Connection(_))),
        "{:?}",
        fresh.err()
    );
    drop(lease);
}

#[tokio::test]
async fn the_counterexample_10_0_0_gives_increasing_fences() {
    let nodes = servers(3);
    let locks = redlock(&nodes, MS(2000));
    let fence_key = keys::fence_key(&lock_key("k"));
    set(&nodes[0], &fence_key, "10");
    set(&nodes[1], &fence_key, "0");
    set(&nodes[2], &fence_key, "0");
    // A wins nodes 1 and 2.
    block(&nodes[2], "k");
    let a = take(&locks, "k", MS(5000)).await;
    assert_eq!(a.fence, 11);
    assert!(locks.release(&a).await.expect("release"));
    del(&nodes[2], &lock_key("k"));
    // B wins nodes 2 and 3: the max of its majority's draws alone would be 3.
    block(&nodes[0], "k");
    let b = take(&locks, "k", MS(5000)).await;
    assert!(b.fence > a.fence, "B {} after A {}", b.fence, a.fence);
}

#[tokio::test]
async fn random_majorities_with_preset_counters_give_strictly_increasing_fences() {
    let seed = redlock_nodes::seed();
    let mut rng = Rng(seed);
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(2000));
    let fence_key = keys::fence_key(&lock_key("k"));
    for server in &nodes {
        set(server, &fence_key, &rng.below(1000).to_string());
    }
    let mut last = 0;
    for round in 0..40 {
        // A majority of 3 to 5 nodes; the others blocked by another holder.
        let mut order: Vec<usize> = (0..5).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let size = 3 + rng.below(3) as usize;
        let blocked = &order[size..];
        for &i in blocked {
            block(&nodes[i], "k");
        }
        // Now and then a node's counter jumps ahead (another client's failed draws).
        if rng.below(4) == 0 {
            let i = rng.below(5) as usize;
            let mut raw = nodes[i].raw();
            let _: i64 = redis::cmd("INCRBY")
                .arg(&fence_key)
                .arg(rng.below(500) as i64)
                .query(&mut raw)
                .expect("INCRBY");
        }
        let lease = take(&locks, "k", MS(5000)).await;
        assert!(
            lease.fence > last,
            "round {round} (seed {seed}): fence {} after {last}",
            lease.fence
        );
        last = lease.fence;
        assert!(locks.release(&lease).await.expect("release"));
        for &i in blocked {
            del(&nodes[i], &lock_key("k"));
        }
    }
}

#[tokio::test]
async fn nodes_restarted_empty_below_a_quorum_give_no_second_holder() {
    let mut nodes = servers(5);
    let locks = redlock(&nodes, MS(2000));
    // On all 5: restarting 2 then leaves 3 holders, a quorum no other attempt can win.
    let lease = take_on_all(&locks, &nodes, "k", MS(10_000)).await;
    nodes[0].restart();
    nodes[1].restart();
    // The restarted two are empty: an attempt wins them, and is held on the other three.
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        match locks.attempt("k", MS(5000)).await {
            // The restarted nodes' connections may still be reconnecting: retried.
            Err(LockError::Connection(_)) if attempts < 20 => {
                tokio::time::sleep(MS(100)).await;
            }
            other => break other,
        }
    };
    assert!(
        matches!(answer, Ok(Attempt::Held { .. })),
        "{:?}",
        answer.as_ref().map(|a| matches!(a, Attempt::Acquired(_)))
    );
    // What the failed attempt set on the empty nodes was taken back.
    for server in &nodes[..2] {
        let mut raw = server.raw();
        let exists: i64 = redis::cmd("EXISTS")
            .arg(lock_key("k"))
            .query(&mut raw)
            .expect("EXISTS");
        assert_eq!(exists, 0);
    }
    assert!(locks.release(&lease).await.expect("release"));
}

fn wait_for(locks: &Arc<Locker>, key: &str) -> tokio::task::JoinHandle<(Instant, Lease)> {
    let (locks, key) = (locks.clone(), key.to_owned());
    tokio::spawn(async move {
        // Polling every 5 s: only a release's message explains a prompt acquisition.
        let cancel = tokio_util::sync::CancellationToken::new();
        let lease = (locks
            .wait(&key, MS(10_000), MS(8_000), MS(5_000), &cancel)
            .await)
            .expect("wait");
        (Instant::now(), lease)
    })
}

#[tokio::test]
async fn a_release_wakes_a_waiter_of_another_connection_at_once_with_a_node_down() {
    let mut nodes = servers(5);
    let (holder, waiter) = (redlock(&nodes, MS(2001)), redlock(&nodes, MS(2002)));
    drop(nodes.remove(0));
    let lease = take(&holder, "job", MS(10_000)).await;
    let waiting = wait_for(&waiter, "job");
    tokio::time::sleep(MS(300)).await;
    assert!(!waiting.is_finished());
    let released = Instant::now();
    assert!(holder.release(&lease).await.expect("release"));
    let (at, next) = waiting.await.expect("waiter");
    let after = at.duration_since(released);
    assert!(
        after < MS(1000),
        "took {after:?}: the poll, not the release"
    );
    assert!(next.fence > lease.fence);
}

#[tokio::test]
async fn a_waiter_of_the_same_connection_is_handed_the_lock_with_a_larger_fence() {
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(2000));
    let lease = take(&locks, "job", MS(10_000)).await;
    let waiting = wait_for(&locks, "job");
    tokio::time::sleep(MS(300)).await;
    assert!(!waiting.is_finished());
    let released = Instant::now();
    assert!(locks.release(&lease).await.expect("release"));
    let (at, next) = waiting.await.expect("waiter");
    assert!(at.duration_since(released) < MS(1000));
    assert!(
        next.fence > lease.fence,
        "{} after {}",
        next.fence,
        lease.fence
    );
    // The waiter holds it on a quorum: another connection finds it held.
    let other = redlock(&nodes, MS(2003));
    assert!(matches!(
        other.attempt("job", MS(1000)).await.expect("attempt"),
        Attempt::Held { .. }
    ));
    assert!(locks.release(&next).await.expect("release"));
}

#[tokio::test]
async fn extend_lengthens_the_lock_on_the_quorum() {
    let mut nodes = servers(5);
    let locks = redlock(&nodes, MS(1000));
    drop(nodes.drain(3..));
    let lease = take(&locks, "k", MS(2000)).await;
    locks.extend(&lease, MS(5000)).await.expect("extend");
    for server in &nodes {
        let mut raw = server.raw();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(lock_key("k"))
            .query(&mut raw)
            .expect("PTTL");
        assert!(ttl > 5000, "{ttl}");
    }
    // Ours on two of five only: not extended.
    let mut raw = nodes[0].raw();
    let _: i64 = redis::cmd("DEL")
        .arg(lock_key("k"))
        .query(&mut raw)
        .expect("DEL");
    let refused = locks.extend(&lease, MS(5000)).await;
    assert!(
        matches!(refused, Err(LockError::NotHeld { .. })),
        "{refused:?}"
    );
}

/// Resumes a SIGSTOPped node when dropped, even if the test fails first.
struct Resume<'a>(&'a RedisServer);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}

#[tokio::test]
async fn a_silent_node_leaves_short_ttl_acquisitions_their_validity() {
    let nodes = servers(3);
    let locks = redlock(&nodes, MS(1000));
    // Warm every connection, then stop one node: it accepts but never answers.
    let lease = take(&locks, "warm", MS(5000)).await;
    assert!(locks.release(&lease).await.expect("release"));
    nodes[2].signal("-STOP");
    let resume = Resume(&nodes[2]);
    // 14 ms: the stragglers' grace (at least 10 ms) alone used to spend the validity, so every
    // try failed. A loaded machine can still stall one try past 14 ms, hence a few tries each
    // (on its own key: a timed-out try is undone, but not waited for).
    let mut fences = Vec::new();
    for (i, ttl) in [300, 300, 14, 14, 14].into_iter().enumerate() {
        let mut failures = Vec::new();
        for attempt in 0..5 {
            let key = format!("short-{i}-{attempt}");
            match locks.attempt(&key, MS(ttl)).await {
                Ok(Attempt::Acquired(lease)) => {
                    fences.push(lease.fence);
                    break;
                }
                Ok(Attempt::Held { .. }) => panic!("{key} unexpectedly held"),
                Err(err) => failures.push(format!("{key} (ttl {ttl} ms): {err}")),
            }
        }
        assert!(failures.len() < 5, "every try failed: {failures:?}");
    }
    assert_eq!(fences.len(), 5);
    drop(resume);
    let after = take(&locks, "after", MS(300)).await;
    assert!(locks.release(&after).await.expect("release"));
}

#[tokio::test]
async fn a_read_only_node_is_no_answer_and_short_of_a_quorum_is_the_quorum_error() {
    let mut nodes = servers(3);
    let locks = redlock(&nodes, MS(1000));
    let gone = nodes.remove(0);
    let port = gone.port;
    drop(gone);
    // A replica of the node just stopped: it answers every write READONLY.
    let mut raw = nodes[0].raw();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(&mut raw)
        .expect("REPLICAOF");
    let err = match locks.attempt("k", MS(5000)).await {
        Err(err) => err,
        Ok(_) => panic!("one writable node of three must not give a lock"),
    };
    assert_eq!(err.code(), "ECONNECTION", "{err}");
    assert!(
        err.to_string()
            .contains("only 1 of 3 Redlock nodes answered; a quorum is 2"),
        "{err}"
    );
}
