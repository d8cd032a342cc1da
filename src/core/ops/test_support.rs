//! What the core's unit tests build a `Locker` from: one on a TCP endpoint that is never
//! dialled (the tests hand replies to the decisions themselves), or one on a server a test
//! started.

use super::lock::Locker;
use super::store::Store;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use std::sync::Arc;
use std::time::Duration;

/// A locker for 127.0.0.1:`port` with keys under `prefix` and a 500 ms command timeout.
pub fn locker(port: u16, prefix: &str) -> Arc<Locker> {
    let spec = EndpointSpec {
        port: Some(port),
        ..Default::default()
    };
    locker_of(spec, prefix, Duration::from_millis(500))
}

/// A locker that does dial: for `url` (a server the test started, or memory://), with keys
/// under `lock:` and a 2 s command timeout.
pub fn locker_at(url: String) -> Arc<Locker> {
    let spec = EndpointSpec {
        url: Some(url),
        ..Default::default()
    };
    locker_of(spec, "lock:", Duration::from_secs(2))
}

fn locker_of(spec: EndpointSpec, prefix: &str, timeout: Duration) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(spec).unwrap();
    Arc::new(Locker::new(Store::shared(endpoint), prefix, timeout))
}

/// A locker over a Redlock of 127.0.0.1:`ports`, never dialled, with keys under `t:` and a
/// 500 ms command timeout.
pub fn redlock_locker(ports: &[u16]) -> Arc<Locker> {
    let nodes = (ports.iter())
        .map(|&port| {
            let spec = EndpointSpec {
                port: Some(port),
                ..Default::default()
            };
            Endpoint::from_spec(spec).unwrap()
        })
        .collect();
    let endpoint = Endpoint::redlock(nodes, "redis").unwrap();
    Arc::new(Locker::new(
        Store::shared(endpoint),
        "t:",
        Duration::from_millis(500),
    ))
}
