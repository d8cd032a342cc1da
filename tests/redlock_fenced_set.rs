//! `fencedSet` over a Redlock is refused before any node is written: N copies of a value,
//! each read alone, cannot reject a stale holder the way one store that compares fences does.

mod common;
#[path = "common/redlock.rs"]
mod redlock_nodes;

use native_redis_lock::core::api::{Attempt, Locker, Store};
use redlock_nodes::servers;
use std::time::Duration;

#[tokio::test]
async fn fenced_set_over_a_redlock_is_refused_naming_the_method_and_writes_nothing() {
    let nodes = servers(3);
    let endpoint = redlock_nodes::endpoint(&nodes, Duration::from_secs(2));
    let locks = Locker::new(Store::shared(endpoint), "fs:", Duration::from_secs(2));
    let Attempt::Acquired(lease) = locks
        .attempt("k", Duration::from_secs(5))
        .await
        .expect("attempt")
    else {
        panic!("a free lock must be taken");
    };
    let fence = format!("{:015}", lease.fence);
    let err = (locks.fenced_set(b"balance", "120", &fence).await).expect_err("refused");
    assert_eq!(err.code(), "EINVAL", "{err}");
    assert!(err.to_string().contains("fencedSet"), "{err}");
    for node in &nodes {
        let mut raw = node.raw();
        let exists: i64 = redis::cmd("EXISTS")
            .arg("balance")
            .query(&mut raw)
            .expect("EXISTS");
        assert_eq!(exists, 0, "written on port {}", node.port);
    }
    assert!(locks.release(&lease).await.expect("release"));
}
