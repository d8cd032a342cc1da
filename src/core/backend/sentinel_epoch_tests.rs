//! Sentinels by configuration epoch, played by a few lines of RESP. Through a failover: one
//! names the old master under epoch 1 at once, another the new master under epoch 2 later;
//! both masters say ROLE master, as the old one does for seconds after a failover. Once
//! epoch 2 was followed, a lookup waits for the sentinel that names it rather than go back to
//! the old master. After the set is rebuilt (epochs back at 0), no sentinel names epoch 2
//! any more, and the lookup follows what they name.

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::fake_resp::fake;
use crate::core::basics::error::LockError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A resolver of the set of sentinels at `ports`, each given 2 s to answer.
fn resolver_of(ports: &[u16]) -> Resolver {
    let hosts: Vec<String> = ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(format!("redis+sentinel://{}/mymaster", hosts.join(","))),
        connect_timeout: Some(Duration::from_secs(2)),
        ..EndpointSpec::default()
    })
    .unwrap();
    Resolver::new(&endpoint, Arc::default(), Arc::default())
}

/// The port of the master a lookup within `bound` finds.
async fn master_port(resolver: &Resolver, bound: Duration) -> Result<u16, LockError> {
    let found = resolver.master(Instant::now() + bound).await?;
    let addr = found
        .client(false)?
        .get_connection_info()
        .addr()
        .to_string();
    Ok((addr.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or(0))
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn after_a_failover_is_followed_a_sentinel_naming_the_old_master_is_passed_over() {
    let (old_master, a, _) = fake(0, 0, Duration::ZERO).await;
    let (new_master, b, _) = fake(0, 0, Duration::ZERO).await;
    let (behind, c, _) = fake(old_master, 1, Duration::ZERO).await;
    let (ahead, d, _) = fake(new_master, 2, Duration::from_millis(200)).await;
    let resolver = resolver_of(&[behind, ahead]);
    let bound = Duration::from_secs(3);
    // Nothing followed yet: the first answer wins, the old master's.
    assert_eq!(master_port(&resolver, bound).await.unwrap(), old_master);
    // The re-check found the move (epoch 2 followed): the quicker sentinel is behind.
    resolver.inner.followed.follow(2);
    assert_eq!(master_port(&resolver, bound).await.unwrap(), new_master);
    assert_eq!(resolver.inner.followed.get(), 2);
    for serving in [a, b, c, d] {
        serving.abort();
    }
}

#[tokio::test]
async fn a_sentinel_naming_the_epoch_followed_keeps_the_old_master_out_though_its_master_fails() {
    let (old_master, a, _) = fake(0, 0, Duration::ZERO).await;
    let (behind, b, _) = fake(old_master, 1, Duration::ZERO).await;
    // It names the new master under epoch 2, which does not answer (yet).
    let (ahead, c, _) = fake(closed_port(), 2, Duration::ZERO).await;
    let resolver = resolver_of(&[behind, ahead]);
    resolver.inner.followed.follow(2);
    let err = master_port(&resolver, Duration::from_secs(3))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ECONNECTION", "{err}");
    assert_eq!(resolver.inner.followed.get(), 2);
    for serving in [a, b, c] {
        serving.abort();
    }
}

#[tokio::test]
async fn a_set_rebuilt_with_its_epochs_back_at_0_is_followed() {
    let (master, a, _) = fake(0, 0, Duration::ZERO).await;
    let (first, b, _) = fake(master, 0, Duration::ZERO).await;
    let (second, c, _) = fake(master, 0, Duration::from_millis(100)).await;
    let resolver = resolver_of(&[first, second]);
    // Followed before the rebuild.
    resolver.inner.followed.follow(2);
    assert_eq!(
        master_port(&resolver, Duration::from_secs(3))
            .await
            .unwrap(),
        master
    );
    // Epoch 0 followed now: the set's next failover (epoch 1) is followed as any.
    assert_eq!(resolver.inner.followed.get(), 0);
    for serving in [a, b, c] {
        serving.abort();
    }
}

#[tokio::test]
async fn a_set_rebuilt_beside_a_silent_sentinel_is_followed_within_the_lookups_bound() {
    let (master, a, _) = fake(0, 0, Duration::ZERO).await;
    let (rebuilt, b, _) = fake(master, 0, Duration::ZERO).await;
    // A sentinel of the old set that accepts connections and never answers.
    let (silent, c, _) = fake(master, 2, Duration::from_secs(60)).await;
    let resolver = resolver_of(&[rebuilt, silent]);
    resolver.inner.followed.follow(2);
    // Within a bound shorter than the sentinels' own (2 s): one that has not answered by
    // then does not count.
    let started = Instant::now();
    let bound = Duration::from_millis(700);
    assert_eq!(master_port(&resolver, bound).await.unwrap(), master);
    assert!(started.elapsed() < bound + Duration::from_millis(300));
    assert_eq!(resolver.inner.followed.get(), 0);
    for serving in [a, b, c] {
        serving.abort();
    }
}
