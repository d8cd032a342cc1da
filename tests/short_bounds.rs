//! Issue 26: what a call left unanswered says of the runtime's connection. An attempt cut
//! short by its own deadline (plus its grace) meets a Redis slow for a moment: the connection
//! stays, nothing held through it is put in doubt. A call unanswered for a whole command
//! timeout shows the server silent: the connection is opened afresh and the drop signalled;
//! so do calls cut short one after another that together go unanswered that long.

mod common;
#[path = "common/delay_proxy.rs"]
mod delay_proxy;

use common::RedisServer;
use delay_proxy::DelayProxy;
use native_redis_lock::core::api::{Attempt, Endpoint, EndpointSpec, Locker, Store};
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::lease::Lease;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A 5 ms wait for the held key: its attempts are bounded by 5 ms plus their grace.
async fn wait_5ms(locks: &Locker) -> Result<Lease, LockError> {
    let cancel = CancellationToken::new();
    locks
        .wait("short:held", MS(10_000), MS(5), MS(1), &cancel)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_drops_the_connection_only_past_a_whole_command_timeout() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port).await;
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(proxy.url()),
        ..Default::default()
    })
    .expect("endpoint");
    let store = Store::shared(endpoint);
    let locks = Locker::new(store.clone(), "lock:", MS(1000));
    assert!(matches!(
        locks.attempt("short:held", MS(30_000)).await,
        Ok(Attempt::Acquired(_))
    ));

    // Redis answers 60 ms late: each attempt of a 5 ms wait gives up at its 30 ms bound.
    proxy.set_delay(MS(60));
    let quiet_since = Instant::now();
    let started = Instant::now();
    let waited = wait_5ms(&locks).await;
    let took = started.elapsed();
    assert!(
        matches!(waited, Err(LockError::Timeout(_))),
        "the attempt ended as {waited:?}, not at its own bound"
    );
    assert!(took < MS(250), "a 5 ms wait took {took:?}");
    proxy.set_delay(Duration::ZERO);
    assert_eq!(locks.is_locked("short:held").await, Ok(true));
    assert!(
        !store.dropped().since(quiet_since),
        "a bound cut short by its caller put the connection's locks in doubt"
    );

    // A caller whose command timeout is 100 ms: a silence that long is the server's.
    let strict = Locker::new(store.clone(), "lock:", MS(100));
    proxy.set_delay(MS(300));
    let silent_since = Instant::now();
    assert!(matches!(
        strict.is_locked("short:held").await,
        Err(LockError::Timeout(_))
    ));
    assert!(
        store.dropped().since(silent_since),
        "a whole command timeout without a reply left the connection as it was"
    );
    proxy.set_delay(Duration::ZERO);
    assert_eq!(strict.is_locked("short:held").await, Ok(true));

    // Attempts cut short one after another, none answered for the whole 100 ms: as silent.
    proxy.set_delay(MS(1000));
    let silent_since = Instant::now();
    while !store.dropped().since(silent_since) && silent_since.elapsed() < MS(400) {
        let waited = wait_5ms(&locks).await;
        assert!(waited.is_err(), "{waited:?}");
    }
    let took = silent_since.elapsed();
    assert!(
        store.dropped().since(silent_since),
        "{took:?} of attempts without a reply left the connection as it was"
    );
    assert!(
        took >= MS(100),
        "given up after {took:?}, before the command timeout"
    );
    proxy.set_delay(Duration::ZERO);
    assert_eq!(strict.is_locked("short:held").await, Ok(true));
}
