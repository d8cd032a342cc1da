//! The resolver without sentinels to answer: a refused and a silent Sentinel set, with and
//! without a `natMap`. Each lookup ends within its deadline (silent sentinels waited for
//! together), names the sentinels and the master's name, and never a password.
//! Finding a real master and following a failover: `__test__/sentinel.test.js`,
//! `__test__/sentinel-prompt.test.js` and `__test__/faults/sentinel-failover.test.js` (real
//! processes).

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::endpoint_multi::HostPort;
use crate::core::basics::error::LockError;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The set at `port`, with `nat_map` routes.
fn routed_endpoint(port: u16, nat_map: Option<Vec<(HostPort, HostPort)>>) -> Endpoint {
    let url =
        format!("redis+sentinel://:hunter2@127.0.0.1:{port}/mymaster?sentinelPassword=hunter2");
    Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        nat_map,
        ..EndpointSpec::default()
    })
    .unwrap()
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One lookup of `endpoint` with `bound` to answer: its error and how long it took.
async fn lookup_of(endpoint: Endpoint, bound: Duration) -> (LockError, Duration) {
    let resolver = Resolver::new(&endpoint, Arc::default(), Arc::default());
    let started = Instant::now();
    let err = resolver.master(started + bound).await.unwrap_err();
    (err, started.elapsed())
}

/// Without routes and with one: refusals and silences must end alike.
fn nat_maps() -> [Option<Vec<(HostPort, HostPort)>>; 2] {
    let to = ("127.0.0.1".to_string(), closed_port());
    [None, Some(vec![(("10.0.0.1".to_string(), 6379), to)])]
}

#[tokio::test]
async fn refused_sentinels_are_a_connection_error_naming_them_and_no_password() {
    for nat_map in nat_maps() {
        let port = closed_port();
        let (err, took) = lookup_of(routed_endpoint(port, nat_map), Duration::from_secs(2)).await;
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(err.code(), "ECONNECTION", "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.contains("mymaster"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}

#[tokio::test]
async fn a_silent_sentinel_ends_at_the_deadline() {
    for nat_map in nat_maps() {
        let (port, held) = silent_port().await;
        let bound = Duration::from_millis(300);
        let (err, took) = lookup_of(routed_endpoint(port, nat_map), bound).await;
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
            "{took:?}"
        );
        assert_eq!(err.code(), "ETIMEDOUT", "{err}");
        assert!(err.to_string().contains("mymaster"));
        assert!(!err.to_string().contains("hunter2"));
        held.abort();
    }
}

/// A listener that accepts connections and never answers, kept until the task is aborted.
async fn silent_port() -> (u16, tokio::task::JoinHandle<()>) {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    (port, held)
}

#[tokio::test]
async fn silent_sentinels_are_waited_for_together_not_one_after_another() {
    for nat_map in nat_maps() {
        let (first, held_first) = silent_port().await;
        let (second, held_second) = silent_port().await;
        let bound = Duration::from_millis(1000);
        let url = format!("redis+sentinel://127.0.0.1:{first},127.0.0.1:{second}/mymaster");
        let endpoint = Endpoint::from_spec(EndpointSpec {
            url: Some(url),
            nat_map,
            connect_timeout: Some(bound),
            ..EndpointSpec::default()
        })
        .unwrap();
        // The caller's deadline is past two bounds: only the lookup's own way of asking ends it.
        let (err, took) = lookup_of(endpoint, 3 * bound).await;
        assert_eq!(err.code(), "ETIMEDOUT", "{err}");
        // Asked in turn, the second would get its bound only after the first's: 2 s at least.
        assert!(took >= bound && took < bound * 9 / 5, "{took:?}");
        held_first.abort();
        held_second.abort();
    }
}

#[test]
fn the_epoch_followed_rises_and_is_reset_only_from_what_the_lookup_saw() {
    let followed = super::Followed::default();
    assert_eq!(followed.get(), 0);
    followed.follow(7);
    // A lookup that won with an older answer before 7 was followed never lowers it.
    followed.follow(3);
    assert_eq!(followed.get(), 7);
    // A lookup that saw 5 followed, and a rebuilt set: another lookup followed 7 since.
    followed.reset(5, 0);
    assert_eq!(followed.get(), 7);
    followed.reset(7, 0);
    assert_eq!(followed.get(), 0);
}
