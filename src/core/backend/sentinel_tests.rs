//! The resolver without sentinels to answer: a refused and a silent Sentinel set, with and
//! without a `natMap` (its own lookup). Each lookup ends within its deadline, names the
//! sentinels and the master's name, and never a password.
//! Finding a real master and following a failover: `__test__/sentinel.test.js` and
//! `__test__/faults/sentinel-failover.test.js` (real processes).

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::backend::endpoint_multi::HostPort;
use crate::core::basics::error::LockError;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The set at `port`, with `nat_map` routes (the lookup of sentinel_routed.rs when some).
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
    let resolver = Resolver::new(&endpoint, Arc::new(AtomicBool::new(false)));
    let started = Instant::now();
    let err = resolver.master(started + bound).await.unwrap_err();
    (err, started.elapsed())
}

/// Without routes (the crate's lookup) and with one (sentinel_routed.rs): refusals and
/// silences must end alike.
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
        // Accepts connections and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut kept = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                kept.push(socket);
            }
        });
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
