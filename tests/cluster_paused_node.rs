//! A Redis Cluster (3 masters, no replica) with one master paused (SIGSTOP, by pid): a call
//! left unanswered there costs only that call. Holders on the live masters are never put in
//! doubt, their refreshes, extends and new acquisitions answer as fast as before, and no
//! live master sees a new connection from us (the cluster connection is kept, not opened
//! afresh). The paused master's holders are told: the holder whose slot a timed-out call
//! went to is in doubt at once, and every holder there is lost by its deadline. After
//! SIGCONT the same connection serves the paused master's keys again.

#[path = "common/cluster.rs"]
mod cluster;
mod common;
#[path = "common/watched.rs"]
mod watched;

use cluster::RedisCluster;
use native_redis_lock::core::api::{Attempt, Limits, Locker, Store};
use native_redis_lock::core::basics::keys;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "pnode:";
/// Each call's bound: what a call on the paused master costs.
const BOUND: Duration = Duration::from_millis(400);
/// Far above a loopback round trip on a busy 2-core machine (about 220 ms seen beside a CPU
/// hog at load 15), below `BOUND`: a call on a live master that waited for the paused one, or
/// for a reconnection, would pass it.
const FAST: Duration = Duration::from_millis(300);
/// What a loaded machine may add to a call cut at `BOUND` on the paused master; below
/// `BOUND`, so a call that waited out its bound twice still fails the check.
const PAST_BOUND: Duration = Duration::from_millis(300);

/// Connections a node has accepted since it started, asked on `admin` (one kept open, so
/// asking opens none).
fn accepted(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(admin)
        .expect("INFO stats");
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received")
}

/// An acquire, extend and release on a fresh key on the master at `port`, each timed.
async fn round_trip(locks: &Locker, key: &str) -> Duration {
    let started = Instant::now();
    let lease = match locks.attempt(key, MS(2000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} is held"),
    };
    let took = started.elapsed();
    let started = Instant::now();
    locks.extend(&lease, MS(1000)).await.expect("extend");
    let took = took.max(started.elapsed());
    let started = Instant::now();
    assert!(locks.release(&lease).await.expect("release"));
    took.max(started.elapsed())
}

/// `n` keys `<prefix><i>` whose `<PREFIX><key>` hash to the master at `port`, by `map`
/// (read once: a paused node would stall the question).
fn keys_on(map: &[(u16, Vec<(u16, u16)>)], port: u16, prefix: &str, n: usize) -> Vec<String> {
    let (_, ranges) = map.iter().find(|(p, _)| *p == port).expect("a master");
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|key| {
            let slot = keys::slot(format!("{PREFIX}{key}").as_bytes());
            ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot))
        })
        .take(n)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_master_costs_only_its_own_calls_and_holders() {
    let cluster = RedisCluster::start(3, 0);
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    cluster.allow_partial_coverage();
    let store = Store::shared(cluster.endpoint(MS(1000)));
    let locks = Locker::new(store.clone(), PREFIX, BOUND);
    let (live, paused) = ([masters[0], masters[1]], masters[2]);
    let map = cluster.slot_map();
    let during: Vec<Vec<String>> = live
        .iter()
        .map(|&port| keys_on(&map, port, "during:", 60))
        .collect();
    let [key_a, key_free, key_after]: [String; 3] = keys_on(&map, paused, "a:", 3)
        .try_into()
        .expect("three keys");

    // Every master reached once within a generous bound: on a loaded machine the first
    // connections and slot map can take longer than `BOUND`, which the test is not about.
    let reach = Locker::new(store.clone(), PREFIX, MS(5000));
    for &port in &masters {
        round_trip(&reach, &cluster.key_on(port, PREFIX, "reach:")).await;
    }

    // Two holders on each live master, one on the paused one (its TTL past the test's calls
    // on it, so only the timeout, not its deadline, can put it in doubt first).
    let mut holders = Vec::new();
    for (i, &port) in live.iter().enumerate() {
        for n in 0..2 {
            let key = cluster.key_on(port, PREFIX, &format!("live{i}{n}:"));
            let held =
                watched::hold(&store, &locks, &key, (MS(800), MS(200)), Limits::default()).await;
            holders.push((port, key, held));
        }
    }
    let a_ttl = MS(2500);
    let (_lease_a, a, _watch_a) =
        watched::hold(&store, &locks, &key_a, (a_ttl, MS(600)), Limits::default()).await;
    // Every master has been reached, and a round on each live one is timed as it is now.
    tokio::time::sleep(MS(700)).await;
    for (_, _, (_, recorder, _)) in &holders {
        assert!(recorder.refreshes() >= 1);
    }
    for (i, &port) in live.iter().enumerate() {
        let took = round_trip(&locks, &cluster.key_on(port, PREFIX, &format!("warm{i}:"))).await;
        assert!(
            took < FAST,
            "before the pause, a call on {port} took {took:?}"
        );
    }
    let mut admins: Vec<redis::Connection> =
        live.iter().map(|&port| cluster.node(port).raw()).collect();
    let connections: Vec<u64> = admins.iter_mut().map(accepted).collect();

    let stopped = cluster.pause(paused);
    let stopped_at = Instant::now();

    // A call on the paused master: its own bound, no more, and A (its slot) is in doubt.
    let started = Instant::now();
    let err = match locks.attempt(&key_a, MS(2000)).await {
        Err(err) => err,
        Ok(_) => panic!("an attempt on a paused master was answered"),
    };
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    assert!(
        started.elapsed() < BOUND + PAST_BOUND,
        "the attempt on the paused master took {:?}",
        started.elapsed()
    );
    let doubt_by = Instant::now() + MS(500);
    while a.doubts().is_empty() && Instant::now() < doubt_by {
        tokio::time::sleep(MS(10)).await;
    }
    assert_eq!(a.doubts(), ["suspended"], "A, on the paused master");

    // The live masters, for four of their holders' TTLs: every call as fast as before,
    // timed-out calls on the paused master among them.
    let mut rounds = 0;
    while stopped_at.elapsed() < MS(3200) && rounds < 60 {
        for (i, &port) in live.iter().enumerate() {
            let key = &during[i][rounds];
            let took = round_trip(&locks, key).await;
            assert!(
                took < FAST,
                "during the pause, a call on {port} took {took:?}"
            );
        }
        let started = Instant::now();
        // A key nobody holds here: the answer must come from the paused node.
        assert!(locks.is_locked(&key_free).await.is_err());
        let took = started.elapsed();
        assert!(
            took < BOUND + PAST_BOUND,
            "a call on the paused master took {took:?}"
        );
        rounds += 1;
    }
    assert!(rounds >= 3, "only {rounds} rounds in 3.2 s");

    let reopened: Vec<u64> = admins.iter_mut().map(accepted).collect();
    assert_eq!(
        reopened, connections,
        "a live master accepted new connections while another was paused"
    );
    for (port, key, (lease, recorder, _)) in &holders {
        assert!(recorder.lost_at().is_none(), "{key} on {port} lost");
        assert!(
            recorder.doubts().is_empty(),
            "{key} on {port}, a live master, was put in doubt: {:?}",
            recorder.doubts()
        );
        // Refreshed every 200 ms for 3.2 s (at least), none held back.
        assert!(
            recorder.refreshes() >= 12,
            "{key}: {} refreshes",
            recorder.refreshes()
        );
        assert_eq!(
            cluster.get(*port, format!("{PREFIX}{key}").as_bytes()),
            Some(lease.token.clone())
        );
    }

    // A: lost by its deadline (its last confirmed refresh plus its TTL), never kept.
    let (lost_at, code) = a.lost_at().expect("A on the paused master is told lost");
    assert_eq!(code, "ELOST");
    assert!(
        lost_at.saturating_duration_since(stopped_at) <= a_ttl + MS(300),
        "A lost {:?} after the pause, past its deadline",
        lost_at.saturating_duration_since(stopped_at)
    );

    // Resumed: the connection that was kept serves the paused master's keys again, once the
    // calls queued there meanwhile are answered (and dropped).
    drop(stopped);
    let key = key_after;
    let back_by = Instant::now() + MS(3000);
    loop {
        match locks.attempt(&key, MS(2000)).await {
            Ok(Attempt::Acquired(lease)) => {
                assert!(locks.release(&lease).await.expect("release after"));
                break;
            }
            Ok(Attempt::Held { .. }) => panic!("{key} is held"),
            Err(err) => assert!(Instant::now() < back_by, "still failing: {err}"),
        }
    }
    for (_, _, (lease, _, watch)) in &holders {
        watch.stop();
        assert!(locks.release(lease).await.expect("release"));
    }
}

/// A master paused for good while its replica takes over: the crate's slot map still names
/// the paused node, which answers no MOVED, so calls on its slots would time out until it
/// woke. Silent past `STUCK` (5 s), the connection is opened afresh and reads the new map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_paused_through_its_failover_is_left_for_its_replica() {
    let cluster = RedisCluster::start(3, 1);
    let masters = cluster.master_ports();
    let paused = masters[0];
    let map = cluster.slot_map();
    let key = keys_on(&map, paused, "moved:", 1).remove(0);
    let store = Store::shared(cluster.endpoint(MS(1000)));
    let locks = Locker::new(store.clone(), PREFIX, BOUND);
    let probe = match locks.attempt(&key, MS(1000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} is held"),
    };
    assert!(locks.release(&probe).await.expect("release"));

    let _stopped = cluster.pause(paused);
    let stopped_at = Instant::now();
    // The node timeout (1 s) and the election, then at most `STUCK` of silence.
    let by = stopped_at + MS(12_000);
    let lease = loop {
        match locks.attempt(&key, MS(1000)).await {
            Ok(Attempt::Acquired(lease)) => break lease,
            Ok(Attempt::Held { .. }) => panic!("{key} is held"),
            Err(err) => assert!(
                Instant::now() < by,
                "{:?} after the pause, still: {err}",
                stopped_at.elapsed()
            ),
        }
        tokio::time::sleep(MS(100)).await;
    };
    assert!(
        stopped_at.elapsed() > MS(1000),
        "acquired {:?} after the pause, before any failover",
        stopped_at.elapsed()
    );
    assert!(locks
        .release(&lease)
        .await
        .expect("release on the new master"));
}
