//! Options checked against what the connection's backend offers, before any Redis call.
use super::*;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::ops::signals::QuietSink;

fn endpoint(url: &str) -> Endpoint {
    Endpoint::from_spec(EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    })
    .unwrap()
}

fn lock(endpoint: Endpoint, fair: bool) -> Result<DistributedLock, LockError> {
    let settings = DistributedLockSettings {
        fair: Some(fair),
        ..Default::default()
    };
    let sink: Arc<dyn Sink> = Arc::new(QuietSink);
    let connection = LockConnection::open(endpoint);
    DistributedLock::new(&connection, settings, Owner::new(), Arc::default(), sink)
}

#[tokio::test]
async fn a_fair_lock_over_a_redlock_is_refused_naming_fair_and_one_redis_takes_it() {
    // Ports nothing listens on: nothing is asked of them.
    let nodes = (1..=3).map(|port| endpoint(&format!("redis://127.0.0.1:{port}")));
    let redlock = Endpoint::redlock(nodes.collect(), "redis").unwrap();
    match lock(redlock.clone(), true) {
        Err(LockError::Invalid { arg, message, .. }) => {
            assert_eq!(arg, "fair");
            assert!(message.contains("Redlock"), "{message}");
        }
        other => panic!("expected EINVAL, got {:?}", other.err()),
    }
    assert!(lock(redlock, false).is_ok());
    assert!(lock(endpoint("redis://127.0.0.1:1"), true).is_ok());
    assert!(lock(endpoint("memory://fair"), true).is_ok());
}
