//! A Redlock's releases while one node is silent: past the straggler pool's bound
//! (backend/redlock_pool.rs) the oldest stragglers are dropped before their own timeout, and
//! each dropped release is owed to its node (backend/redlock_owed.rs) as one that timed out
//! is: the node may keep our token.

use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
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

/// A Redlock over `servers` whose calls are bounded by `bound`.
fn redlock(servers: &[RedisServer], bound: Duration) -> Arc<Locker> {
    let node = |server: &RedisServer| {
        let spec = EndpointSpec {
            url: Some(server.url()),
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
    let mut leases: Vec<Lease> = Vec::with_capacity(RELEASES);
    for batch in (0..RELEASES).collect::<Vec<_>>().chunks(256) {
        let taken = join_all(batch.iter().map(|i| {
            let locks = locks.clone();
            async move {
                locks
                    .attempt(&format!("k{i}"), Duration::from_secs(60))
                    .await
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
    let silent = 3;
    servers[silent].signal("-STOP");
    for batch in leases.chunks(256) {
        let released = join_all(batch.iter().map(|lease| locks.release(lease))).await;
        assert!(released.into_iter().all(|r| r.expect("release")));
    }
    let store = redlock_of(&locks).expect("a Redlock");
    let owed = store.owed(silent);
    servers[silent].signal("-CONT");
    // Two generations dropped, each release owed; none ended by its timeout yet.
    assert!(owed >= 2 * 256, "{owed} owed");
    assert!(owed < RELEASES, "{owed} owed");
    for node in 0..silent {
        assert_eq!(store.owed(node), 0);
    }
}
