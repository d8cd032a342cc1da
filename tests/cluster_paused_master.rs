//! A Redis Cluster (3 masters, no replica) whose master is paused (SIGSTOP) while the
//! watchdog keeps a lock on it and one on a live master: the paused master's slot answers
//! nothing, so its lock is lost by its deadline, and the live one's refreshes must keep
//! landing meanwhile (issue 25). A round of refreshes that waited for every slot would hold
//! the live lock's answer back until the paused lock's deadline, past its own.

#[path = "common/cluster.rs"]
mod cluster;
mod common;
#[path = "common/watched.rs"]
mod watched;

use cluster::RedisCluster;
use native_redis_lock::core::api::{Limits, Locker, Store};
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "pause:";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_master_holds_no_refresh_of_a_lock_on_a_live_master_back() {
    let cluster = RedisCluster::start(3, 0);
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    cluster.allow_partial_coverage();
    let store = Store::shared(cluster.endpoint(MS(2000)));
    let locks = Locker::new(store.clone(), PREFIX, MS(2000));
    let (live, paused) = (masters[0], masters[2]);
    let key_a = cluster.key_on(paused, PREFIX, "a:");
    let key_b = cluster.key_on(live, PREFIX, "b:");
    let a_ttl = MS(3000);
    let a_taken = Instant::now();
    let (_lease_a, a, _watch_a) =
        watched::hold(&store, &locks, &key_a, (a_ttl, MS(750)), Limits::default()).await;
    let b_ttl = MS(800);
    let (lease_b, b, watch_b) =
        watched::hold(&store, &locks, &key_b, (b_ttl, MS(200)), Limits::default()).await;
    // Both slots were refreshed once, so the connection reaches both masters.
    tokio::time::sleep(MS(900)).await;
    assert!(a.refreshes() >= 1 && b.refreshes() >= 1);

    let stopped = cluster.pause(paused);
    let stopped_at = Instant::now();
    let b_before = b.refreshes();
    // Four of B's TTLs, past A's deadline (A's last refresh, at most 750 ms before the
    // pause, plus its 3 s TTL).
    tokio::time::sleep(b_ttl * 4).await;
    assert!(
        b.lost_at().is_none(),
        "B on a live master was told lost {:?} after A's master was paused: {:?}",
        b.lost_at()
            .map(|(at, _)| at.saturating_duration_since(stopped_at)),
        b.lost_at()
    );
    assert!(
        b.refreshes() >= b_before + 8,
        "B's refreshes kept landing: {} -> {}",
        b_before,
        b.refreshes()
    );
    assert_eq!(
        cluster.get(live, format!("{PREFIX}{key_b}").as_bytes()),
        Some(lease_b.token.clone()),
        "B's key still holds its token"
    );

    // A: lost by its deadline (its last confirmed refresh plus its TTL), not kept.
    let wait_until = a_taken + MS(900) + a_ttl + MS(1500);
    while a.lost_at().is_none() && Instant::now() < wait_until {
        tokio::time::sleep(MS(50)).await;
    }
    let (lost_at, code) = a
        .lost_at()
        .expect("A on the paused master is reported lost");
    assert_eq!(code, "ELOST");
    assert!(
        lost_at.saturating_duration_since(stopped_at) <= a_ttl + MS(300),
        "A lost {:?} after the pause, past its deadline",
        lost_at.saturating_duration_since(stopped_at)
    );
    assert!(
        b.lost_at().is_none(),
        "B kept while A was lost: {:?}",
        b.lost_at()
    );
    watch_b.stop();
    drop(stopped);
    assert!(locks.release(&lease_b).await.expect("release B"));
}
