//! Unit tests of `won.rs`: a lease is handed out only while its owner lives.
use super::*;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::clock::Stamp;
use crate::core::wait::owner::Owner;
use std::time::Duration;

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
        Won::Orphaned(_) => panic!("orphaned while its owner lives"),
    }
    let _ended = owner.end();
    match won(&locker, lease(&locker)) {
        Won::Deliver(_) => panic!("delivered to an ended owner"),
        Won::Orphaned(orphan) => assert!(matches!(orphan.release(), LockError::Aborted)),
    }
}
