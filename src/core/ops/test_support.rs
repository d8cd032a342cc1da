//! What the core's unit tests build a `Locker` from: one on a TCP endpoint that is never
//! dialled (the tests hand replies to the decisions themselves), so none needs a server.

use super::lock::Locker;
use super::store::Store;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use std::sync::Arc;
use std::time::Duration;

/// A locker for 127.0.0.1:`port` with keys under `prefix` and a 500 ms command timeout.
pub fn locker(port: u16, prefix: &str) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        port: Some(port),
        ..Default::default()
    })
    .unwrap();
    Arc::new(Locker::new(
        Store::shared(endpoint),
        prefix,
        Duration::from_millis(500),
    ))
}
