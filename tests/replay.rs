//! A connection that drops under a request: which calls go again, and why going again is safe.

mod common;
#[path = "common/switch_proxy.rs"]
mod switch_proxy;

use common::RedisServer;
use native_redis_lock::core::api::scripts;
use native_redis_lock::core::api::Store;
use native_redis_lock::core::api::{Attempt, Locker};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::basics::keys;
use std::sync::Arc;
use std::time::Duration;
use switch_proxy::SwitchProxy;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// How long a call waits on the stopped server before it dies: a call usually meets a reset
/// soon after it went out.
const SOON: Duration = Duration::from_millis(100);

fn locker(proxy: &SwitchProxy) -> Arc<Locker> {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(proxy.url()),
        connect_timeout: Some(MS(2000)),
        ..Default::default()
    })
    .expect("endpoint");
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(3000)))
}

/// Leaves a request unread in a stopped server's socket for `waited`, starts an empty server,
/// moves `proxy` to it, then kills the stopped one: the kernel answers with a reset, exactly
/// what a call sees when Redis dies under it. `server` is then the new one. The new server
/// is up before the reset, so the test does not hang on how fast a loaded machine starts one
/// (an attempt fails once refusals persist 40 ms).
async fn reset_under<T: Send + 'static>(
    server: &mut RedisServer,
    proxy: &SwitchProxy,
    waited: Duration,
    call: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    server.signal("-STOP");
    let pending = tokio::spawn(call);
    tokio::time::sleep(waited).await;
    assert!(!pending.is_finished(), "the stopped server answered");
    let next = RedisServer::start();
    proxy.switch(next.port);
    drop(std::mem::replace(server, next));
    pending.await.expect("call task")
}

// Multi-threaded so the connection's and the proxy's tasks run while this thread blocks in
// starting and stopping servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_read_reset_under_it_goes_again_on_the_new_server() {
    let mut server = RedisServer::start();
    let proxy = SwitchProxy::start(server.port).await;
    let locks = locker(&proxy);
    assert!(!locks.is_locked("warm").await.unwrap());
    let probe = locks.clone();
    let answer = reset_under(&mut server, &proxy, SOON, async move {
        probe.is_locked("k").await
    })
    .await;
    assert_eq!(answer.ok(), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_acquire_reset_under_it_goes_again_and_wins() {
    acquire_reset_after(SOON).await;
}

/// The brief pauses that carry a call across a restart (about 0.3 s) count from the reset,
/// not from when the request went out: counted from the send, a call that had waited that
/// long for its reply was never sent again (and one that waited 0.1 s had 0.2 s left for the
/// server to come back, which a loaded machine did not always make).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_acquire_that_waited_long_for_its_reply_still_goes_again_after_a_reset() {
    acquire_reset_after(MS(600)).await;
}

async fn acquire_reset_after(waited: Duration) {
    let mut server = RedisServer::start();
    let proxy = SwitchProxy::start(server.port).await;
    let locks = locker(&proxy);
    assert!(!locks.is_locked("warm").await.unwrap());
    let contender = locks.clone();
    let attempt = reset_under(&mut server, &proxy, waited, async move {
        contender.attempt("job", MS(5000)).await
    })
    .await;
    let Ok(Attempt::Acquired(lease)) = attempt else {
        panic!("the replayed acquire did not win: {:?}", attempt.err());
    };
    let mut raw = server.raw();
    let value: String = redis::cmd("GET").arg("lock:job").query(&mut raw).unwrap();
    assert_eq!(value, lease.token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_extend_reset_under_it_is_reported_not_sent_twice() {
    let mut server = RedisServer::start();
    let proxy = SwitchProxy::start(server.port).await;
    let locks = locker(&proxy);
    let Attempt::Acquired(lease) = locks.attempt("ext", MS(5000)).await.unwrap() else {
        panic!("free key held");
    };
    // Loads the scripts first, so the request left unread is the extend itself.
    locks.extend(&lease, MS(1)).await.unwrap();
    let lease = Arc::new(lease);
    let (extender, held) = (locks.clone(), lease.clone());
    let result = reset_under(&mut server, &proxy, SOON, async move {
        extender.extend(&held, MS(5000)).await
    })
    .await;
    let err = result.expect_err("an extend must not be replayed");
    assert_eq!(err.code(), "ECONNECTION", "{err}");
}

/// The acquire script sent twice with one token, as a replay does after its first run won.
#[test]
fn the_same_attempt_sent_again_wins_again_with_the_same_fence() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let acquire = |token: &str, raw: &mut redis::Connection| -> (i64, i64) {
        scripts::ACQUIRE
            .key("lock:r")
            .key(keys::fence_key(b"lock:r"))
            .arg(token)
            .arg(5000)
            .arg(604_800_000)
            .invoke(raw)
            .unwrap()
    };
    let first = acquire("token-a", &mut raw);
    assert_eq!(first.0, 1);
    assert_eq!(acquire("token-a", &mut raw), first);
    let other = acquire("token-b", &mut raw);
    assert_eq!(other.0, 0, "another token must see the lock held");
    assert!(other.1 > 4000, "the holder's ttl: {}", other.1);
}

#[test]
fn an_exclusive_lock_replay_wins_only_while_both_keys_are_still_its_own() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let acquire = |token: &str, raw: &mut redis::Connection| -> (i64, i64) {
        scripts::ACQUIRE
            .key("el:job")
            .key(keys::fence_key(b"el:job"))
            .key(keys::owner_key(b"el:job"))
            .arg("1")
            .arg(5000)
            .arg(604_800_000)
            .arg(token)
            .invoke(raw)
            .unwrap()
    };
    let first = acquire("token-a", &mut raw);
    assert_eq!(first.0, 1);
    assert_eq!(acquire("token-a", &mut raw), first);
    assert_eq!(acquire("token-b", &mut raw).0, 0);
    // The original package's release deletes the key whoever holds it, and its acquire sets
    // it anew with its own expiry: our owner key no longer speaks for the lock key.
    let _: () = redis::cmd("SET")
        .arg("el:job")
        .arg("1")
        .arg("PX")
        .arg(9000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(acquire("token-a", &mut raw).0, 0);
}

#[test]
fn a_key_of_another_type_is_held_not_an_error() {
    let server = RedisServer::start();
    let mut raw = server.raw();
    let _: () = redis::cmd("HSET")
        .arg("lock:h")
        .arg("f")
        .arg("v")
        .query(&mut raw)
        .unwrap();
    let (won, _ttl): (i64, i64) = scripts::ACQUIRE
        .key("lock:h")
        .key(keys::fence_key(b"lock:h"))
        .arg("token")
        .arg(5000)
        .arg(604_800_000)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(won, 0);
}
