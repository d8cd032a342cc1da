//! Sentinels behind a failover, played by a few lines of RESP: one names the old master
//! under epoch 1 at once, another the new master under epoch 2 later. Both masters say ROLE
//! master, as the old one does for seconds after a failover. Once epoch 2 was followed, a
//! lookup waits for the sentinel that names it rather than go back to the old master.

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::fake_resp::fake;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test]
async fn after_a_failover_is_followed_a_sentinel_naming_the_old_master_is_passed_over() {
    let (old_master, a, _) = fake(0, 0, Duration::ZERO).await;
    let (new_master, b, _) = fake(0, 0, Duration::ZERO).await;
    let (behind, c, _) = fake(old_master, 1, Duration::ZERO).await;
    let (ahead, d, _) = fake(new_master, 2, Duration::from_millis(200)).await;
    let url = format!("redis+sentinel://127.0.0.1:{behind},127.0.0.1:{ahead}/mymaster");
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        connect_timeout: Some(Duration::from_secs(2)),
        ..EndpointSpec::default()
    })
    .unwrap();
    let resolver = Resolver::new(&endpoint, Arc::default(), Arc::default());
    let master = |resolver: Resolver| async move {
        let found = resolver
            .master(Instant::now() + Duration::from_secs(3))
            .await;
        found
            .unwrap()
            .client(false)
            .unwrap()
            .get_connection_info()
            .addr()
            .to_string()
    };
    // Nothing followed yet: the first answer wins, the old master's.
    assert!(master(resolver.clone())
        .await
        .ends_with(&format!(":{old_master}")));
    // The re-check found the move (epoch 2 followed): the quicker sentinel is behind.
    resolver.inner.followed.follow(2);
    assert!(master(resolver.clone())
        .await
        .ends_with(&format!(":{new_master}")));
    for serving in [a, b, c, d] {
        serving.abort();
    }
}
