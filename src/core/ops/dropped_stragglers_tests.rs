//! A Redlock's calls while one node is silent: past the straggler pool's bound
//! (backend/redlock_pool.rs) the oldest stragglers are dropped before their own timeout, and
//! each dropped release is owed to its node (backend/redlock_owed.rs) as one that timed out
//! is: the node may keep our token. So is a dropped attempt's free once its lock is over; not
//! while it stands (the release to come covers the node).

use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::redlock_store::RedlockStore;
use crate::core::basics::lease::Lease;
use crate::core::basics::test_server::RedisServer;
use crate::core::ops::attempt::Attempt;
use crate::core::ops::fast::quorum::redlock_of;
use crate::core::ops::lock::Locker;
use crate::core::ops::store::Store;
use futures_util::future::join_all;
use std::sync::Arc;
use std::time::Duration;

/// More than the pool keeps out at once (its `MAX_OUT`, 4096) by two of its generations.
const RELEASES: usize = 4096 + 2 * 256;

/// The leases of locks `<prefix><i>` for `i` in `0..count`, taken 256 at a time.
async fn take_all(locks: &Arc<Locker>, prefix: &str, count: usize) -> Vec<Lease> {
    let mut leases = Vec::with_capacity(count);
    for batch in (0..count).collect::<Vec<_>>().chunks(256) {
        let taken = join_all(batch.iter().map(|i| {
            let locks = locks.clone();
            async move {
                let key = format!("{prefix}{i}");
                locks.attempt(&key, Duration::from_secs(60)).await
            }
        }))
        .await;
        for attempt in taken {
            match attempt.expect("attempt") {
                Attempt::Acquired(lease) => leases.push(lease),
                Attempt::Held { .. } => panic!("held"),
            }
        }
    }
    leases
}

/// Releases every one of `leases`, 256 at a time.
async fn release_all(locks: &Locker, leases: &[Lease]) {
    for batch in leases.chunks(256) {
        let released = join_all(batch.iter().map(|lease| locks.release(lease))).await;
        assert!(released.into_iter().all(|r| r.expect("release")));
    }
}

/// Until no call's straggler is out on any node (60 s at most).
async fn settle(store: &RedlockStore) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while store.stragglers_out() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stragglers still out"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// What node `node` is owed once it reaches `expected` (or 20 s pass), read again 200 ms
/// later: a dropped straggler is owed when the pool's task next runs, not when it is dropped,
/// so the count trails the calls that dropped it; read too soon it is short by those.
async fn owed_once_settled(store: &RedlockStore, node: usize, expected: usize) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while store.owed(node) < expected && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.owed(node)
}

/// A Redlock over `servers` whose calls, and connections opened, are bounded by `bound`: a
/// connection opened to a stopped server would otherwise fail at the default connect timeout
/// (5 s), which a loaded machine reaches within a test, ending the calls waiting on it as
/// failures rather than stragglers the pool drops.
fn redlock(servers: &[RedisServer], bound: Duration) -> Arc<Locker> {
    let node = |server: &RedisServer| {
        let spec = EndpointSpec {
            url: Some(server.url()),
            connect_timeout: Some(bound),
            ..Default::default()
        };
        Endpoint::from_spec(spec).unwrap()
    };
    let endpoint = Endpoint::redlock(servers.iter().map(node).collect(), "redis").unwrap();
    Arc::new(Locker::new(Store::shared(endpoint), "drop:", bound))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_straggler_the_pool_drops_is_owed_to_its_silent_node() {
    let servers: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
    // Long enough that no straggler ends by its own timeout within the test.
    let locks = redlock(&servers, Duration::from_secs(60));
    let leases = take_all(&locks, "k", RELEASES).await;
    let store = redlock_of(&locks).expect("a Redlock");
    // An attempt a quorum decided without node 3 may still be out to it (a loaded machine):
    // in the pool's first generation it would take the place of a release dropped there.
    settle(store).await;
    let silent = 3;
    servers[silent].signal("-STOP");
    release_all(&locks, &leases).await;
    let owed = owed_once_settled(store, silent, 2 * 256).await;
    servers[silent].signal("-CONT");
    // Two generations dropped, each release owed; none ended by its timeout yet.
    assert!(owed >= 2 * 256, "{owed} owed");
    assert!(owed < RELEASES, "{owed} owed");
    for node in 0..silent {
        assert_eq!(store.owed(node), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_straggler_the_pool_drops_is_owed_its_free_once_its_lock_is_over_only() {
    let servers: Vec<RedisServer> = (0..4).map(|_| RedisServer::start()).collect();
    let locks = redlock(&servers, Duration::from_secs(60));
    let silent = 3;
    servers[silent].signal("-STOP");
    // Two generations of attempts' stragglers, then their locks released: two of releases'.
    let over = take_all(&locks, "over", 2 * 256).await;
    release_all(&locks, &over).await;
    // Attempts whose locks stand push all four out, and one generation of their own.
    let standing = take_all(&locks, "standing", 4096 + 256).await;
    let store = redlock_of(&locks).expect("a Redlock");
    let owed = owed_once_settled(store, silent, 4 * 256).await;
    servers[silent].signal("-CONT");
    // The over attempts' frees and the releases: none for the standing locks' attempts.
    assert_eq!(owed, 4 * 256);
    release_all(&locks, &standing).await;
}
