//! Redlock calls that a node answers only after the quorum decided: a node paused (SIGSTOP
//! by pid) while its connection reopens. A release (or extend) started on it still reaches
//! it once it runs again, and an attempt that lands there after the lock was released is
//! freed: no node keeps a token nobody holds.

mod common;
#[path = "common/redlock.rs"]
mod redlock_nodes;

use common::{within, RedisServer};
use native_redis_lock::core::api::{Attempt, Locker, Store};
use native_redis_lock::core::basics::lease::Lease;
use redlock_nodes::servers;
use std::sync::Arc;
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "late:";

fn redlock(servers: &[RedisServer], timeout: Duration) -> Arc<Locker> {
    let endpoint = redlock_nodes::endpoint(servers, timeout);
    Arc::new(Locker::new(Store::shared(endpoint), PREFIX, timeout))
}

fn value(server: &RedisServer, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("{PREFIX}{key}"))
        .query(&mut server.raw())
        .expect("GET")
}

async fn take(locks: &Locker, key: &str, ttl: Duration) -> Lease {
    match locks.attempt(key, ttl).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} unexpectedly held"),
    }
}

/// Resumes a SIGSTOPped node when dropped, even if the test fails first.
struct Resume<'a>(&'a RedisServer);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}

/// Drops our connection to `node` and pauses it: the next call to it opens a connection
/// whose handshake the paused server answers only once resumed, so the call is not on the
/// wire when the quorum (the other nodes) decides.
async fn pause_reopening(node: &RedisServer) -> Resume<'_> {
    node.kill_clients();
    tokio::time::sleep(MS(50)).await;
    node.signal("-STOP");
    Resume(node)
}

/// Takes "k" for 30 s, waits until the fifth node has our token too, then pauses that node
/// as `pause_reopening` does.
async fn held_then_paused<'a>(nodes: &'a [RedisServer], locks: &Locker) -> (Lease, Resume<'a>) {
    let lease = take(locks, "k", MS(30_000)).await;
    let token = Some(lease.token.clone());
    assert!(within(MS(1000), || value(&nodes[4], "k") == token).await);
    (lease, pause_reopening(&nodes[4]).await)
}

#[tokio::test]
async fn a_release_started_on_a_node_whose_connection_reopens_reaches_it_once_it_runs() {
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(3000));
    let (lease, resume) = held_then_paused(&nodes, &locks).await;
    assert!(locks.release(&lease).await.expect("release"));
    // Past the stragglers' grace, well within the command timeout.
    tokio::time::sleep(MS(300)).await;
    drop(resume);
    assert!(
        within(MS(2000), || value(&nodes[4], "k").is_none()).await,
        "the paused node kept the released lock: its release was dropped before it was sent"
    );
}

#[tokio::test]
async fn an_attempt_that_lands_on_a_node_after_the_release_is_freed_there() {
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(3000));
    let warm = take(&locks, "warm", MS(5000)).await;
    assert!(locks.release(&warm).await.expect("release"));
    let resume = pause_reopening(&nodes[4]).await;
    // Won on the four others; the fifth's attempt waits for its connection.
    let lease = take(&locks, "k", MS(30_000)).await;
    assert!(locks.release(&lease).await.expect("release"));
    for node in &nodes[..4] {
        assert_eq!(value(node, "k"), None);
    }
    tokio::time::sleep(MS(300)).await;
    drop(resume);
    // The attempt and the release now run there in either order; an attempt after the
    // release is freed once its reply is read. Either way nothing is left after.
    tokio::time::sleep(MS(500)).await;
    assert!(
        within(MS(2000), || value(&nodes[4], "k").is_none()).await,
        "the paused node keeps a token nobody holds: {:?}",
        value(&nodes[4], "k")
    );
    tokio::time::sleep(MS(300)).await;
    assert_eq!(value(&nodes[4], "k"), None);
}

#[tokio::test]
async fn an_extend_started_on_a_node_whose_connection_reopens_reaches_it_once_it_runs() {
    let nodes = servers(5);
    let locks = redlock(&nodes, MS(3000));
    let (lease, resume) = held_then_paused(&nodes, &locks).await;
    assert!(locks.extend(&lease, MS(120_000)).await.is_ok());
    tokio::time::sleep(MS(300)).await;
    drop(resume);
    let pttl = || -> i64 {
        redis::cmd("PTTL")
            .arg(format!("{PREFIX}k"))
            .query(&mut nodes[4].raw())
            .expect("PTTL")
    };
    assert!(
        within(MS(2000), || pttl() > 60_000).await,
        "the paused node never got the extend: pttl {}",
        pttl()
    );
    assert!(locks.release(&lease).await.expect("release"));
}
