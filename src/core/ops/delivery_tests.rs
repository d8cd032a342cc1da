//! Unit tests of `delivery.rs`: a lease is handed out only while its owner lives.
use super::*;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::clock::Stamp;
use crate::core::wait::owner::Owner;
use std::time::{Duration, Instant};

fn locker(port: u16, owner: &Owner) -> Locker {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        port: Some(port),
        ..Default::default()
    })
    .unwrap();
    Locker::new(Store::shared(endpoint), "t:", Duration::from_millis(500)).owned_by(owner.clone())
}

fn lease(locker: &Locker) -> Lease {
    let key = locker.redis_key("k");
    Lease::new(
        "k".into(),
        key,
        "token".into(),
        3,
        Stamp::now(),
        Duration::from_secs(10),
    )
}

#[tokio::test]
async fn a_lease_won_for_a_living_owner_is_delivered_and_an_ended_ones_released() {
    let owner = Owner::new();
    let locker = locker(41201, &owner);
    match won(&locker, lease(&locker)) {
        Won::Deliver(lease) => assert_eq!(lease.token, "token"),
        Won::Ownerless(_) => panic!("ownerless while its owner lives"),
    }
    let _ended = owner.end();
    match won(&locker, lease(&locker)) {
        Won::Deliver(_) => panic!("delivered to an ended owner"),
        Won::Ownerless(lease) => assert!(matches!(lease.free(), LockError::Aborted)),
    }
}

/// A locker on the embedded keyspace `name`.
fn memory_locker(name: &str) -> Locker {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("memory://{name}")),
        ..Default::default()
    })
    .unwrap();
    Locker::new(Store::shared(endpoint), "t:", Duration::from_secs(5))
}

#[tokio::test]
async fn a_lent_lease_is_freed_only_once_its_handover_was_answered() {
    use crate::core::ops::attempt::Attempt;
    use crate::core::wait::lent::Lent;
    let locker = memory_locker("won-lent");
    let ttl = Duration::from_secs(30);
    let lender = match locker.attempt("k", ttl).await.unwrap() {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("held"),
    };
    let lent = Lease::new(
        "k".into(),
        lender.redis_key.clone(),
        "lent".into(),
        lender.fence + 1,
        Stamp::now(),
        ttl,
    );
    let lends = locker.store().wakes().lends();
    lends.lend("lent".into(), lender.deadline());
    // Its thread ends before the handover reached Redis.
    Unclaimed::lent(&locker, lent).free();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(locker.is_locked("k").await.unwrap());
    // The handover runs only now, and is answered.
    let store = locker.store();
    let bound = Duration::from_secs(1);
    let ran = super::super::release::confirm_lend(store, &lender, "lent", ttl, (bound, None)).await;
    assert!(matches!(ran, Ok(true)));
    lends.settle("lent", Lent::Confirmed(Instant::now() + ttl));
    let mut freed = false;
    for _ in 0..100 {
        if !locker.is_locked("k").await.unwrap() {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        freed,
        "the lock lent to a caller that never had it outlived the handover"
    );
    assert_eq!(lends.take("lent"), None);
}
