//! The watchdog's refresh over a Redlock whose slow nodes answer after each round was
//! decided: what they answer late still counts. A lock they said is not ours, once gone
//! from one more node, is no longer on a quorum and is told lost at the next rounds, not
//! left in doubt until its deadline.

mod common;
#[path = "common/delay_proxy.rs"]
mod delay_proxy;
#[path = "common/watched.rs"]
mod watched;

use common::{within, RedisServer};
use delay_proxy::DelayProxy;
use native_redis_lock::core::api::{Endpoint, EndpointSpec, Limits, Locker, Store};
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn node(url: String) -> Endpoint {
    Endpoint::from_spec(EndpointSpec {
        url: Some(url),
        connect_timeout: Some(MS(2000)),
        ..Default::default()
    })
    .expect("endpoint")
}

fn exists(server: &RedisServer, key: &str) -> bool {
    let found: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut server.raw())
        .expect("EXISTS");
    found == 1
}

fn del(server: &RedisServer, key: &str) {
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query(&mut server.raw())
        .expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_slow_nodes_said_is_not_ours_is_lost_once_one_more_node_lost_it() {
    const TTL: Duration = Duration::from_millis(4000);
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    // Nodes 3 and 4 behind a slow network: every refresh round is decided without them.
    let proxies = [
        DelayProxy::start(servers[3].port).await,
        DelayProxy::start(servers[4].port).await,
    ];
    let mut urls: Vec<String> = servers[..3].iter().map(RedisServer::url).collect();
    urls.extend(proxies.iter().map(DelayProxy::url));
    let endpoint =
        Endpoint::redlock(urls.into_iter().map(node).collect(), "redis").expect("redlock");
    let store = Store::shared(endpoint);
    let locks = Locker::new(store.clone(), "lock:", MS(2000));
    let (_lease, recorder, _watch) =
        watched::hold(&store, &locks, "k", (TTL, MS(200)), Limits::default()).await;
    // The hold is granted at a quorum: a node's acquisition may still be on its way (a
    // fresh connection loads its scripts first), and would land after the DELs below.
    assert!(
        within(MS(2000), || servers.iter().all(|s| exists(s, "lock:k"))).await,
        "the lock reached every node"
    );
    for proxy in &proxies {
        proxy.set_delay(MS(150));
    }
    // Gone from the slow nodes: only their late answers say so.
    del(&servers[3], "lock:k");
    del(&servers[4], "lock:k");
    tokio::time::sleep(MS(800)).await;
    assert!(
        recorder.lost_at().is_none(),
        "still on 3 of 5: {:?}",
        recorder.lost_at()
    );
    let refreshed = recorder.refreshes();
    assert!(refreshed >= 3, "refreshed by the quorum: {refreshed}");
    // Now on 2 of 5, and the slow nodes' answers come after every round's decision.
    del(&servers[2], "lock:k");
    let deleted_at = Instant::now();
    assert!(
        within(MS(1500), || recorder.lost_at().is_some()).await,
        "left in doubt: the slow nodes' late 'not ours' was dropped (the deadline is {:?} away)",
        crate_validity(TTL)
    );
    let (at, code) = recorder.lost_at().expect("lost");
    assert_eq!(code, "ELOST");
    assert!(at.duration_since(deleted_at) < MS(1500));
}

fn crate_validity(ttl: Duration) -> Duration {
    native_redis_lock::core::basics::clock::validity(ttl)
}

/// The refreshes left behind on a paused node are dropped before their own timeout would
/// discard its connection: that would put the lock in doubt at every round (suspended, then
/// resumed by the quorum) though a quorum keeps confirming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_under_a_watched_lock_puts_it_in_no_doubt_while_a_quorum_confirms_it() {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let nodes = urls.into_iter().map(node).collect();
    let store = Store::shared(Endpoint::redlock(nodes, "redis").expect("redlock"));
    let locks = Locker::new(store.clone(), "lock:", MS(500));
    let (_lease, recorder, watch) =
        watched::hold(&store, &locks, "k", (MS(3000), MS(300)), Limits::default()).await;
    assert!(within(MS(2000), || watch.certain()).await);
    let before = recorder.doubts().len();
    let refreshed = recorder.refreshes();
    servers[4].signal("-STOP");
    // Several rounds, each refresh bound (the lock's deadline, ~3 s) running out on the way.
    tokio::time::sleep(MS(4000)).await;
    servers[4].signal("-CONT");
    assert_eq!(recorder.doubts()[before..], [] as [&str; 0]);
    assert!(recorder.lost_at().is_none(), "{:?}", recorder.lost_at());
    assert!(
        recorder.refreshes() >= refreshed + 8,
        "{}",
        recorder.refreshes()
    );
}
