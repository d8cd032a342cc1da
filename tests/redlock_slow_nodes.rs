//! Redlock over nodes behind a slow network (a proxy that delays what the client sends):
//! time spent past a lock's validity is reported as time (ETIMEDOUT), and a lock is never
//! handed to a waiter with no validity left.

mod common;
#[path = "common/delay_proxy.rs"]
mod delay_proxy;

use common::RedisServer;
use delay_proxy::DelayProxy;
use native_redis_lock::core::api::{Attempt, Endpoint, EndpointSpec, Locker, Store};
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::basics::lease::Lease;
use std::sync::Arc;
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "slow:";

/// A Redlock over `proxies`, every connection warmed by one lock taken and released.
async fn redlock(proxies: &[DelayProxy]) -> Arc<Locker> {
    let nodes = proxies
        .iter()
        .map(|proxy| {
            Endpoint::from_spec(EndpointSpec {
                url: Some(proxy.url()),
                connect_timeout: Some(MS(2000)),
                ..Default::default()
            })
            .expect("endpoint")
        })
        .collect();
    let endpoint = Endpoint::redlock(nodes, "redis").expect("redlock endpoint");
    let locks = Arc::new(Locker::new(Store::shared(endpoint), PREFIX, MS(2000)));
    let warm = take(&locks, "warm", MS(5000)).await;
    assert!(locks.release(&warm).await.expect("release"));
    locks
}

async fn proxies(nodes: &[RedisServer]) -> Vec<DelayProxy> {
    let mut proxies = Vec::new();
    for node in nodes {
        proxies.push(DelayProxy::start(node.port).await);
    }
    proxies
}

fn slow(proxies: &[DelayProxy], delay: Duration) {
    for proxy in proxies {
        proxy.set_delay(delay);
    }
}

async fn take(locks: &Locker, key: &str, ttl: Duration) -> Lease {
    match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_write_back_cut_short_by_the_validity_is_a_timeout() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let proxies = proxies(&nodes).await;
    let locks = redlock(&proxies).await;
    // Counters out of step: the fence must be written back, a second round trip.
    let fence_key = keys::fence_key(format!("{PREFIX}k").as_bytes());
    for (node, counter) in nodes.iter().zip(["10", "0", "0"]) {
        let mut raw = node.raw();
        let _: () = (redis::cmd("SET").arg(&fence_key).arg(counter))
            .query(&mut raw)
            .expect("SET");
    }
    // 100 ms a round trip against a validity of ~156 ms: the quorum answers with ~55 ms
    // left, which the write-back cannot make.
    slow(&proxies, MS(100));
    let err = match locks.attempt("k", MS(160)).await {
        Err(err) => err,
        Ok(_) => panic!("no lock with its validity spent"),
    };
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    slow(&proxies, MS(0));
    // Undone on every node.
    for node in &nodes {
        let mut raw = node.raw();
        let held: i64 = redis::cmd("EXISTS")
            .arg(format!("{PREFIX}k"))
            .query(&mut raw)
            .expect("EXISTS");
        assert_eq!(held, 0, "left on port {}", node.port);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_never_handed_a_lock_whose_validity_the_hand_over_spent() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let proxies = proxies(&nodes).await;
    let locks = redlock(&proxies).await;
    let lease = take(&locks, "job", MS(10_000)).await;
    let waiting = {
        let locks = locks.clone();
        tokio::spawn(async move {
            let cancel = tokio_util::sync::CancellationToken::new();
            locks.wait("job", MS(300), MS(5000), MS(100), &cancel).await
        })
    };
    tokio::time::sleep(MS(300)).await;
    assert!(!waiting.is_finished());
    // The hand-over takes 400 ms, past the waiter's validity (~295 ms of its 300 ms TTL).
    slow(&proxies, MS(400));
    let _released = locks.release(&lease).await;
    slow(&proxies, MS(0));
    // Its own attempt may still meet the slow network: then it fails as slow, never held.
    match waiting.await.expect("waiter") {
        Ok(next) => {
            assert!(
                next.is_held(),
                "handed a lock with no validity left (fence {})",
                next.fence
            );
            assert!(next.fence > lease.fence);
        }
        Err(err) => assert_eq!(err.code(), "ETIMEDOUT", "{err}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_leaves_a_slow_nodes_undo_to_a_task_that_still_frees_it() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let proxies = proxies(&nodes).await;
    let locks = redlock(&proxies).await;
    // Another holder on two of three: the attempt fails once those two answer.
    for node in &nodes[..2] {
        let mut raw = node.raw();
        let _: () = (redis::cmd("SET").arg(format!("{PREFIX}k")).arg("someone"))
            .query(&mut raw)
            .expect("SET");
    }
    proxies[2].set_delay(MS(400));
    let started = std::time::Instant::now();
    let attempt = locks.attempt("k", MS(10_000)).await.expect("attempt");
    let took = started.elapsed();
    assert!(matches!(attempt, Attempt::Held { .. }));
    assert!(took < MS(200), "waited {took:?} for the slow node's undo");
    // The attempt reaches node 2 at 400 ms and sets our token there; the undo sent behind
    // it frees it.
    tokio::time::sleep(MS(800)).await;
    let mut raw = nodes[2].raw();
    let left: i64 = (redis::cmd("EXISTS").arg(format!("{PREFIX}k")))
        .query(&mut raw)
        .expect("EXISTS");
    assert_eq!(left, 0, "the undo never reached the slow node");
}

/// A release after the lease ran out still deletes our token where a node kept it, and a
/// network slower than the lease's time left plus a grace is slow, not unreachable: the
/// release is bounded by the command timeout, not by the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_past_the_lease_on_slow_nodes_still_deletes_our_token_where_it_is() {
    let nodes: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let proxies = proxies(&nodes).await;
    let locks = redlock(&proxies).await;
    let lease = take(&locks, "k", MS(300)).await;
    // Two nodes keep our token longer than the lease (an extend only they got, say).
    for node in &nodes[..2] {
        let _: i64 = (redis::cmd("PEXPIRE").arg(format!("{PREFIX}k")).arg(30_000))
            .query(&mut node.raw())
            .expect("PEXPIRE");
    }
    tokio::time::sleep(MS(400)).await;
    // 60 ms each way to every node, past the 25 ms grace a lease's bound would leave.
    slow(&proxies, MS(60));
    let released = locks.release(&lease).await;
    slow(&proxies, MS(0));
    // Our token was on 2 of 5 only: not released on a quorum, and no error.
    assert!(!released.expect("no quorum error for slow nodes"));
    for node in &nodes[..2] {
        let left: i64 = (redis::cmd("EXISTS").arg(format!("{PREFIX}k")))
            .query(&mut node.raw())
            .expect("EXISTS");
        assert_eq!(left, 0, "our token left on port {}", node.port);
    }
}
