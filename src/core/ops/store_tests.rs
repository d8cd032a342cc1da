//! Unit tests of `store.rs`, kept apart so the library file holds no test-only unwraps.
use super::*;
use crate::core::backend::endpoint::EndpointSpec;

fn endpoint(port: u16) -> Endpoint {
    Endpoint::from_spec(EndpointSpec {
        port: Some(port),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn equal_endpoints_share_one_store() {
    let a = Store::shared(endpoint(1));
    let b = Store::shared(endpoint(1));
    let c = Store::shared(endpoint(2));
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &c));
}

#[test]
fn a_dropped_store_is_not_kept_alive_by_the_registry() {
    let weak = Arc::downgrade(&Store::shared(endpoint(3)));
    assert!(weak.upgrade().is_none());
}

/// Passing on a grant nobody here takes is bounded by the background bound, not by the
/// grant's estimated life, which is nothing when the connection's last answer is unknown.
#[test]
fn an_unconfirmed_grant_is_freed_within_the_background_bound() {
    let claim = Duration::from_millis(1_000);
    let grant = |anchor| Lease::granted(b"k".to_vec(), "t".into(), 7, (anchor, claim), claim);
    assert_eq!(orphan_bound(&grant(None)), BACKGROUND_TIMEOUT);
    let anchor = Some(crate::core::basics::clock::Stamp::now());
    assert_eq!(orphan_bound(&grant(anchor)), BACKGROUND_TIMEOUT);
}
