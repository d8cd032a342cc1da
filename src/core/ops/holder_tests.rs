//! Unit tests of `holder.rs`, on the embedded keyspace: a holder's calls wait for its own
//! handover.
use super::*;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::ops::attempt::Attempt;
use crate::core::ops::route::{Route, RouteFacts, Way};
use crate::core::ops::store::Store;
use crate::core::wait::lent::Lent;
use std::sync::Arc;
use std::time::Instant;

fn locker(name: &str) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("memory://{name}")),
        ..Default::default()
    })
    .unwrap();
    Arc::new(Locker::new(
        Store::shared(endpoint),
        "t:",
        Duration::from_secs(5),
    ))
}

async fn held(locker: &Locker) -> Arc<Lease> {
    match locker.attempt("k", Duration::from_secs(30)).await.unwrap() {
        Attempt::Acquired(lease) => Arc::new(lease),
        Attempt::Held { .. } => panic!("held"),
    }
}

fn lend(locker: &Locker, lease: &Lease) {
    let until = Instant::now() + Duration::from_secs(30);
    locker
        .store()
        .wakes()
        .lends()
        .lend(lease.token.clone(), until);
}

#[tokio::test]
async fn a_release_waits_for_its_own_handover_then_forgets_the_lend() {
    let locker = locker("held-release");
    let lease = held(&locker).await;
    lend(&locker, &lease);
    let (l, ls) = (locker.clone(), lease.clone());
    let release = tokio::spawn(async move { release(&l, &ls).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!release.is_finished());
    assert!(locker.is_locked("k").await.unwrap());
    let lends = locker.store().wakes().lends();
    lends.settle(&lease.token, Lent::Confirmed(Instant::now()));
    let released = tokio::time::timeout(Duration::from_secs(2), release).await;
    assert!(matches!(released, Ok(Ok(Ok(true)))));
    assert!(!locker.is_locked("k").await.unwrap());
    assert_eq!(lends.take(&lease.token), None);
}

#[tokio::test]
async fn an_extend_waits_for_its_own_handover() {
    let locker = locker("held-extend");
    let lease = held(&locker).await;
    lend(&locker, &lease);
    let (l, ls) = (locker.clone(), lease.clone());
    let extra = Duration::from_secs(1);
    let extend = tokio::spawn(async move { extend(&l, &ls, extra).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!extend.is_finished());
    let lends = locker.store().wakes().lends();
    lends.settle(&lease.token, Lent::Confirmed(Instant::now()));
    let extended = tokio::time::timeout(Duration::from_secs(2), extend).await;
    assert!(matches!(extended, Ok(Ok(Ok(())))));
}

/// Whether the holder's call goes where its caller is (memory://) rather than the runtime.
fn may_carry(locker: &Locker, lease: &Lease) -> bool {
    Route::way(locker.store(), RouteFacts::Holder { locker, lease }) == Way::Inline
}

#[tokio::test]
async fn a_holders_call_is_carried_unless_its_handover_is_pending_or_it_is_released() {
    let locker = locker("held-may-carry");
    let lease = held(&locker).await;
    assert!(may_carry(&locker, &lease));
    lend(&locker, &lease);
    assert!(
        !may_carry(&locker, &lease),
        "carried ahead of its own handover"
    );
    let lends = locker.store().wakes().lends();
    lends.settle(&lease.token, Lent::Confirmed(Instant::now()));
    assert!(may_carry(&locker, &lease));
    lease.mark_released();
    assert!(!may_carry(&locker, &lease));
}
