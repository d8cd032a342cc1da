//! The core on a real Redis Cluster (3 masters, a replica each) that the test starts on
//! loopback and stops by pid: every operation on keys of every master, wake-ups by sharded
//! pub/sub on each master, refreshes of locks spread over all of them, a flushed script
//! cache healed by the calls themselves, a dead master that holds up no other, and `db`
//! refused.

#[path = "common/cluster.rs"]
mod cluster;
mod common;
#[path = "common/watched.rs"]
mod watched;

use cluster::RedisCluster;
use common::calls;
use native_redis_lock::core::api::{scripts, Attempt, Limits, Locker, Store};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "cl:";

fn locker(cluster: &RedisCluster) -> Arc<Locker> {
    Arc::new(Locker::new(
        Store::shared(cluster.endpoint(MS(2000))),
        PREFIX,
        MS(2000),
    ))
}

async fn take(locks: &Locker, key: &str, ttl: Duration) -> Lease {
    match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

/// One cluster for every case (starting one costs seconds on two cores); each case uses
/// keys of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_serves_every_operation_on_every_master() {
    let cluster = RedisCluster::start(3, 1);
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    let locks = locker(&cluster);
    every_op_on_each_master(&cluster, &locks, &masters).await;
    a_release_wakes_a_waiter_on_each_master(&cluster, &locks, &masters).await;
    refreshes_keep_locks_on_every_master(&cluster, &masters).await;
    a_flushed_script_cache_is_loaded_again(&cluster, &locks, &masters).await;
    a_flushed_node_is_healed_by_the_calls_themselves(&cluster, &locks, &masters).await;
    a_dead_master_leaves_the_others_kept_and_extendable(&cluster, &locks, &masters).await;
}

async fn every_op_on_each_master(cluster: &RedisCluster, locks: &Locker, masters: &[u16]) {
    let other = locker(cluster);
    for &port in masters {
        let key = cluster.key_on(port, PREFIX, "op:");
        let lease = take(locks, &key, MS(5000)).await;
        let lock_key = format!("{PREFIX}{key}");
        assert_eq!(
            cluster.get(port, lock_key.as_bytes()),
            Some(lease.token.clone()),
            "the token is on the master serving {lock_key}"
        );
        let fence: i64 = redis::cmd("GET")
            .arg(keys::fence_key(lock_key.as_bytes()))
            .query(&mut cluster.node(port).raw())
            .expect("GET fence");
        assert_eq!(
            fence as u64,
            lease.fence + 1,
            "the fence is in the lock's slot"
        );
        assert!(locks.is_locked(&key).await.expect("is_locked"));
        assert!(matches!(
            other.attempt(&key, MS(5000)).await.expect("attempt"),
            Attempt::Held { .. }
        ));
        locks.extend(&lease, MS(20_000)).await.expect("extend");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&lock_key)
            .query(&mut cluster.node(port).raw())
            .expect("PTTL");
        assert!(ttl > 15_000, "extended: {ttl}");
        assert!(locks.release(&lease).await.expect("release"));
        assert!(!locks.is_locked(&key).await.expect("is_locked"));
        let again = take(&other, &key, MS(5000)).await;
        assert!(again.fence > lease.fence);
        assert!(other.release(&again).await.expect("release"));
    }
}

/// The waiter polls every 10 s: getting the lock within 2 s means a message woke it.
async fn a_release_wakes_a_waiter_on_each_master(
    cluster: &RedisCluster,
    locks: &Arc<Locker>,
    masters: &[u16],
) {
    let waiting = locker(cluster);
    for &port in masters {
        let key = cluster.key_on(port, PREFIX, "wake:");
        let held = take(locks, &key, MS(30_000)).await;
        let waiter = {
            let (waiting, key) = (waiting.clone(), key.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let won = waiting
                    .wait(
                        &key,
                        MS(5000),
                        MS(8000),
                        MS(10_000),
                        &CancellationToken::new(),
                    )
                    .await;
                (won, started.elapsed())
            })
        };
        let lock_key = format!("{PREFIX}{key}");
        let channel = keys::channel_key(lock_key.as_bytes(), keys::RELEASED);
        let deadline = Instant::now() + MS(3000);
        loop {
            let subscribed: (Vec<u8>, i64) = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(&channel)
                .query(&mut cluster.node(port).raw())
                .expect("PUBSUB SHARDNUMSUB");
            if subscribed.1 == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no sharded subscription on {port}"
            );
            tokio::time::sleep(MS(20)).await;
        }
        let released = Instant::now();
        assert!(locks.release(&held).await.expect("release"));
        let (won, _) = waiter.await.expect("waiter");
        let lease = won.expect("the waiter gets the lock");
        assert!(
            released.elapsed() < MS(2000),
            "woken, not polled: {:?}",
            released.elapsed()
        );
        assert!(lease.fence > held.fence);
        waiting.release(&lease).await.expect("release");
    }
}

async fn refreshes_keep_locks_on_every_master(cluster: &RedisCluster, masters: &[u16]) {
    let store = Store::shared(cluster.endpoint(MS(1000)));
    let locks = Locker::new(store.clone(), PREFIX, MS(1000));
    let before: Vec<i64> = masters
        .iter()
        .map(|&port| calls(&mut cluster.node(port).raw(), "evalsha"))
        .collect();
    let mut held = Vec::new();
    for &port in masters {
        for n in 0..3 {
            let key = cluster.key_on(port, PREFIX, &format!("refresh{n}:"));
            let hold =
                watched::hold(&store, &locks, &key, (MS(600), MS(150)), Limits::default()).await;
            held.push((port, key, hold));
        }
    }
    tokio::time::sleep(MS(1800)).await;
    for (port, key, (lease, recorder, _watch)) in &held {
        assert!(
            recorder.lost_at().is_none(),
            "{key}: {:?}",
            recorder.lost_at()
        );
        assert!(recorder.refreshes() >= 4, "{key}: {}", recorder.refreshes());
        let lock_key = format!("{PREFIX}{key}");
        assert_eq!(
            cluster.get(*port, lock_key.as_bytes()),
            Some(lease.token.clone())
        );
    }
    for (i, &port) in masters.iter().enumerate() {
        let now = calls(&mut cluster.node(port).raw(), "evalsha");
        assert!(
            now >= before[i] + 4,
            "refreshes ran on {port}: {} -> {now}",
            before[i]
        );
    }
    for (_, _, (lease, _, watch)) in held {
        watch.stop();
        locks.release(&lease).await.expect("release");
    }
}

async fn a_flushed_script_cache_is_loaded_again(
    cluster: &RedisCluster,
    locks: &Locker,
    masters: &[u16],
) {
    let port = masters[0];
    let key = cluster.key_on(port, PREFIX, "flushed:");
    let lease = take(locks, &key, MS(5000)).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut cluster.node(port).raw())
        .expect("SCRIPT FLUSH");
    assert!(locks.release(&lease).await.expect("release after NOSCRIPT"));
    let again = take(locks, &key, MS(5000)).await;
    assert!(locks.release(&again).await.expect("release"));
}

/// SCRIPT LOADs run by every node of the cluster so far.
fn loads(cluster: &RedisCluster) -> Vec<i64> {
    cluster
        .nodes
        .iter()
        .map(|node| calls(&mut node.raw(), "script|load"))
        .collect()
}

fn cached(cluster: &RedisCluster, port: u16, script: &redis::Script) -> bool {
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(script.get_hash())
        .query(&mut cluster.node(port).raw())
        .expect("SCRIPT EXISTS");
    exists == [true]
}

/// A master that lost its scripts is healed by the calls that find them missing there: each
/// goes again whole (EVAL) to that node alone, which then has its script. No SCRIPT LOAD
/// reaches any node, an extend (which must not run twice) runs once, and the watchdog's
/// refreshes there go on.
async fn a_flushed_node_is_healed_by_the_calls_themselves(
    cluster: &RedisCluster,
    locks: &Locker,
    masters: &[u16],
) {
    let port = masters[1];
    let flush = || {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut cluster.node(port).raw())
            .expect("SCRIPT FLUSH");
    };
    let loaded = loads(cluster);
    let evals = calls(&mut cluster.node(port).raw(), "eval");
    let key = cluster.key_on(port, PREFIX, "healed:");
    let lease = take(locks, &key, MS(5000)).await;
    flush();
    locks
        .extend(&lease, MS(20_000))
        .await
        .expect("extend after NOSCRIPT");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("{PREFIX}{key}"))
        .query(&mut cluster.node(port).raw())
        .expect("PTTL");
    assert!((20_000..=25_000).contains(&ttl), "extended once: {ttl}");
    assert!(cached(cluster, port, &scripts::EXTEND));
    assert!(locks.release(&lease).await.expect("release"));

    let store = Store::shared(cluster.endpoint(MS(1000)));
    let watching = Locker::new(store.clone(), PREFIX, MS(1000));
    let key = cluster.key_on(port, PREFIX, "healed-watched:");
    // Refreshed every 150 ms, so three refreshes take about 450 ms; waited for up to 15
    // times that, and a TTL of 40 refreshes, so a loaded machine's late refresh neither
    // loses the lock nor misses the count. Refreshes that did not heal would never count.
    let (lease, recorder, watch) = watched::hold(
        &store,
        &watching,
        &key,
        (MS(6000), MS(150)),
        Limits::default(),
    )
    .await;
    tokio::time::sleep(MS(300)).await;
    flush();
    let before = recorder.refreshes();
    let healed = common::within(MS(7000), || recorder.refreshes() >= before + 3).await;
    assert!(healed, "{before} -> {}", recorder.refreshes());
    assert!(recorder.lost_at().is_none(), "{:?}", recorder.lost_at());
    assert!(cached(cluster, port, &scripts::REFRESH_MANY));
    watch.stop();
    assert!(watching.release(&lease).await.expect("release"));
    assert!(cached(cluster, port, &scripts::RELEASE_WAKE));

    let now = calls(&mut cluster.node(port).raw(), "eval");
    assert!(now >= evals + 3, "sent whole: {evals} -> {now}");
    assert_eq!(loads(cluster), loaded, "no SCRIPT LOAD on any node");
}

/// Last, as it kills a master: a connection that reached it (and heard it drop) still takes
/// locks with a watchdog on the masters that answer, refreshes and extends them there, while
/// the dead one's replica has not taken over yet: no call there waits on the dead node. The
/// live masters serve their slots all along, as a client on a loaded machine may be slow
/// enough to call between the dead one's failure and its replica's election (by default
/// every master answers CLUSTERDOWN then).
async fn a_dead_master_leaves_the_others_kept_and_extendable(
    cluster: &RedisCluster,
    locks: &Locker,
    masters: &[u16],
) {
    let store = Store::shared(cluster.endpoint(MS(900)));
    let fresh = Locker::new(store.clone(), PREFIX, MS(1000));
    for &port in masters {
        // A connection to every master, the one to die included.
        let lease = take(&fresh, &cluster.key_on(port, PREFIX, "reach:"), MS(5000)).await;
        assert!(fresh.release(&lease).await.expect("release"));
    }
    cluster.allow_partial_coverage();
    cluster.node(masters[2]).signal("-KILL");
    tokio::time::sleep(MS(200)).await;
    let key = cluster.key_on(masters[0], PREFIX, "kept:");
    // Refreshed every 150 ms, a refresh may come 850 ms late; a call held until the failover
    // (no sooner than the node timeout, 1 s, and an election after it) finds the lock gone.
    let (lease, recorder, watch) =
        watched::hold(&store, &fresh, &key, (MS(1000), MS(150)), Limits::default()).await;
    // Past the TTL: only refreshes kept it.
    tokio::time::sleep(MS(1100)).await;
    assert!(recorder.lost_at().is_none(), "{:?}", recorder.lost_at());
    assert!(recorder.refreshes() >= 2, "{}", recorder.refreshes());
    recorder.confirm(&lease);
    fresh.extend(&lease, MS(8000)).await.expect("extend");
    watch.stop();
    assert!(fresh.release(&lease).await.expect("release"));
    let key = cluster.key_on(masters[1], PREFIX, "extended:");
    let lease = take(locks, &key, MS(5000)).await;
    locks.extend(&lease, MS(8000)).await.expect("extend");
    assert!(locks.release(&lease).await.expect("release"));
}

#[test]
fn a_database_other_than_0_is_refused_naming_db() {
    let spec = EndpointSpec {
        url: Some("redis+cluster://127.0.0.1:1,127.0.0.1:2".into()),
        db: Some(1),
        ..Default::default()
    };
    let Err(err) = Endpoint::from_spec(spec) else {
        panic!("db 1 on a cluster was accepted");
    };
    assert_eq!(err.code(), "EINVAL");
    assert!(err.to_string().contains("db"), "{err}");
}
