//! Reads over a Redlock (is it locked, by whom, for how long) decided by a quorum of nodes
//! that agree, never by the first few to answer; short of such a quorum, the quorum error.

mod common;
#[path = "common/redlock.rs"]
mod redlock_nodes;

use common::RedisServer;
use native_redis_lock::core::api::{Locker, Store};
use redlock_nodes::servers;
use std::sync::Arc;
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "rd:";

fn redlock(servers: &[RedisServer]) -> Arc<Locker> {
    let endpoint = redlock_nodes::endpoint(servers, MS(2000));
    Arc::new(Locker::new(Store::shared(endpoint), PREFIX, MS(2000)))
}

/// Another holder's token on `server` for 30 s.
fn hold(server: &RedisServer, key: &str) {
    let mut raw = server.raw();
    let _: () = redis::cmd("SET")
        .arg(format!("{PREFIX}{key}"))
        .arg("someone")
        .arg("PX")
        .arg(30_000)
        .query(&mut raw)
        .expect("SET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_on_a_quorum_is_locked_though_a_holding_node_answers_last() {
    let nodes = servers(5);
    let locks = redlock(&nodes);
    // Every connection warm before a node goes quiet.
    assert!(!locks.is_locked("k").await.expect("is_locked"));
    for i in [0, 1, 3] {
        hold(&nodes[i], "k");
    }
    // Node 3 answers 300 ms late: the free nodes 2 and 4 answer with 0 and 1 first.
    nodes[3].signal("-STOP");
    let late = &nodes[3];
    let resumed = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(MS(300));
            late.signal("-CONT");
        });
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(locks.is_locked("k"))
        })
    });
    assert!(resumed.expect("is_locked"), "held on 3 of 5 nodes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_agree_on_nothing_with_a_quorum_are_the_quorum_error_never_free() {
    let mut nodes = servers(5);
    let locks = redlock(&nodes);
    assert!(!locks.is_locked("k").await.expect("is_locked"));
    drop(nodes.drain(3..));
    hold(&nodes[0], "k");
    hold(&nodes[1], "k");
    // Two held and one free of five: the two down may hold it too.
    let err = locks.is_locked("k").await.expect_err("no quorum agrees");
    assert_eq!(err.code(), "ECONNECTION", "{err}");
    assert!(
        err.to_string()
            .contains("only 2 of 5 Redlock nodes agreed; a quorum is 3"),
        "{err}"
    );
    // A quorum free is free, whatever the others.
    for node in &nodes[..2] {
        let mut raw = node.raw();
        let _: i64 = redis::cmd("DEL")
            .arg(format!("{PREFIX}k"))
            .query(&mut raw)
            .expect("DEL");
    }
    assert!(!locks.is_locked("k").await.expect("is_locked"));
}

/// Reads left behind on a paused node are dropped (redlock_store.rs `agreed`): each answers
/// without it, and once it runs again its connection still gives each later read its own
/// reply, not one of the dropped reads'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_left_behind_on_a_paused_node_leave_its_later_answers_its_own() {
    let nodes = servers(5);
    let locks = redlock(&nodes);
    assert!(!locks.is_locked("k").await.expect("is_locked"));
    nodes[4].signal("-STOP");
    for _ in 0..20 {
        let started = std::time::Instant::now();
        assert!(!locks.is_locked("k").await.expect("is_locked"));
        assert!(started.elapsed() < MS(1000), "waited for the paused node");
    }
    nodes[4].signal("-CONT");
    // Held on 2, 3 and 4: node 4's answer decides, and a stale "free" would say free.
    for i in [2, 3, 4] {
        hold(&nodes[i], "k");
    }
    for _ in 0..5 {
        assert!(
            locks.is_locked("k").await.expect("is_locked"),
            "held on 3 of 5"
        );
    }
}
