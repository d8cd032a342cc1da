//! The lock engine over the embedded memory:// backend: the operations run unchanged on it,
//! through the same store, scripts and wake-ups as over Redis.

use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use std::sync::Arc;
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn locker(name: &str) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("memory://{name}")),
        ..Default::default()
    })
    .expect("a memory endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(1000)))
}

#[tokio::test]
async fn an_attempt_wins_a_free_lock_and_finds_a_held_one_held_with_its_ttl() {
    let locks = locker("engine-attempt");
    let Attempt::Acquired(lease) = locks.attempt("k", MS(5000)).await.expect("attempt") else {
        panic!("a free lock was not won");
    };
    assert!(lease.fence >= 1);
    match locks.attempt("k", MS(5000)).await.expect("attempt") {
        Attempt::Held { ttl: Some(ttl) } => assert!(ttl <= MS(5000) && ttl > MS(4000), "{ttl:?}"),
        other => panic!(
            "held lock not reported held: {}",
            matches!(other, Attempt::Acquired(_))
        ),
    }
    assert!(locks.is_locked("k").await.expect("exists"));
    assert!(locks.release(&lease).await.expect("release"));
    assert!(!locks.is_locked("k").await.expect("exists"));
}

#[tokio::test]
async fn keyspaces_of_different_names_are_apart() {
    let one = locker("engine-one");
    let two = locker("engine-two");
    let Attempt::Acquired(_lease) = one.attempt("same", MS(5000)).await.expect("attempt") else {
        panic!("a free lock was not won");
    };
    assert!(matches!(
        two.attempt("same", MS(5000)).await.expect("attempt"),
        Attempt::Acquired(_)
    ));
}
