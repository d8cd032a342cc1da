//! ExclusiveLock behind a restart quarantine (tests/epoch.rs has the other APIs): here, as
//! tests/ may reach only the core's api and basics, not `ops::exclusive`.

use super::{Exclusive, ExclusiveSpec, Terms};
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::test_server::RedisServer;
use crate::core::ops::store::Store;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;

#[tokio::test]
async fn an_exclusive_lock_that_waited_at_the_gate_counts_its_lease_from_after_it() {
    let server = RedisServer::start();
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(server.url()),
        connect_timeout: Some(MS(2_013)),
        restart_quarantine: Some(MS(1_500)),
        ..Default::default()
    })
    .expect("endpoint");
    let spec = ExclusiveSpec {
        name: "gate".into(),
        key_prefix: "epoch".into(),
        client_key_prefix: String::new(),
        fence_retention_ms: 0,
    };
    let lock = Exclusive::new(Store::shared(endpoint), spec, MS(5_000));
    let terms = Terms {
        contents: "c".into(),
        ttl: MS(1_000),
        refresh: MS(300),
    };
    let started = Instant::now();
    let claim = match lock.acquire(&terms).await {
        Ok(Some(claim)) => claim,
        Ok(None) => panic!("a fresh key held"),
        Err(err) => panic!("{err}"),
    };
    let stamped = claim.sent.at.duration_since(started);
    assert!(
        stamped >= MS(1_500 - 5),
        "stamped {stamped:?} after asking, before the gate opened"
    );
}
