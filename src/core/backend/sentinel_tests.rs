//! The resolver without sentinels to answer: a refused and a silent Sentinel set. Each lookup
//! ends within its deadline, names the sentinels and the master's name, and never a password.
//! Finding a real master and following a failover: `__test__/sentinel.test.js` and
//! `__test__/faults/sentinel-failover.test.js` (real processes).

use super::Resolver;
use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::error::LockError;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

fn endpoint(port: u16) -> Endpoint {
    let url =
        format!("redis+sentinel://:hunter2@127.0.0.1:{port}/mymaster?sentinelPassword=hunter2");
    Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        ..EndpointSpec::default()
    })
    .unwrap()
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One lookup of the set at `port` with `bound` to answer: its error and how long it took.
async fn lookup(port: u16, bound: Duration) -> (LockError, Duration) {
    let resolver = Resolver::new(&endpoint(port), Arc::new(AtomicBool::new(false)));
    let started = Instant::now();
    let err = resolver.master(started + bound).await.unwrap_err();
    (err, started.elapsed())
}

#[tokio::test]
async fn refused_sentinels_are_a_connection_error_naming_them_and_no_password() {
    let port = closed_port();
    let (err, took) = lookup(port, Duration::from_secs(2)).await;
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(err.code(), "ECONNECTION", "{err}");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("mymaster"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test]
async fn a_silent_sentinel_ends_at_the_deadline() {
    // Accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    let (err, took) = lookup(port, Duration::from_millis(300)).await;
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    assert!(err.to_string().contains("mymaster"));
    assert!(!err.to_string().contains("hunter2"));
    held.abort();
}
