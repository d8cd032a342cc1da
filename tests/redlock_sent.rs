//! A Redlock counts a lock's validity from the attempt's first send (`AcquireAttempt::sent`),
//! as the lease does, not from when the store got the attempt: an attempt handed over
//! mid-way (sent again with its token) keeps that first clock. Independent redis-servers,
//! each started by the test on a free port and stopped by its pid.

mod common;
#[path = "common/redlock.rs"]
mod redlock_nodes;

use common::RedisServer;
use native_redis_lock::core::api::{LockStore, Locker, Store};
use native_redis_lock::core::basics::clock;
use native_redis_lock::core::basics::keys;
use native_redis_lock::core::ops::acquire::{Plan, Start};
use native_redis_lock::core::proto::acquire::{AcquireAttempt, Acquired, AttemptForm, Layout};
use redlock_nodes::servers;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const MS: fn(u64) -> Duration = Duration::from_millis;
const PREFIX: &str = "sent:";

/// What each node holds at `key` (none: nil).
fn values(nodes: &[RedisServer], key: &[u8]) -> Vec<Option<String>> {
    (nodes.iter())
        .map(|node| {
            let mut raw = node.raw();
            redis::cmd("GET").arg(key).query(&mut raw).expect("GET")
        })
        .collect()
}

/// How many of `nodes` hold `token` at `key`.
fn holding(nodes: &[RedisServer], key: &[u8], token: &str) -> usize {
    let values = values(nodes, key);
    values
        .iter()
        .filter(|v| v.as_deref() == Some(token))
        .count()
}

#[tokio::test]
async fn an_attempt_first_sent_longer_ago_than_its_validity_is_not_won_and_leaves_nothing() {
    let nodes = servers(3);
    let store = Store::shared(redlock_nodes::endpoint(&nodes, MS(2000)));
    let lock_key = format!("{PREFIX}late").into_bytes();
    let fence_key = keys::fence_key(&lock_key);
    let ttl = MS(1000);
    let attempt = |token: &'static str, sent: Instant| AcquireAttempt {
        lock_key: &lock_key,
        fence_key: &fence_key,
        token,
        ttl,
        fence_retention_ms: 0,
        keep_fences: false,
        layout: Layout::Plain,
        form: AttemptForm::Script,
        sent,
    };
    // Every node takes it, but its validity was spent before it reached the store.
    let long_ago = (Instant::now().checked_sub(clock::validity(ttl))).expect("an uptime");
    let late = attempt("late", long_ago);
    let late = store.backend().acquire(&late, MS(2000)).await;
    let err = late.expect_err("past its validity");
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    assert!(
        err.to_string().contains("past the lock's validity"),
        "{err}"
    );
    // Undone at once on the quorum that won it; a node left behind once a quorum answered,
    // by a task of its own (well within the 1 s TTL that would free it anyway).
    assert!(holding(&nodes, &lock_key, "late") <= 1);
    let freed = Instant::now() + MS(500);
    while holding(&nodes, &lock_key, "late") > 0 && Instant::now() < freed {
        tokio::time::sleep(MS(5)).await;
    }
    assert_eq!(values(&nodes, &lock_key), vec![None, None, None]);
    // Sent just now, the same attempt wins.
    let now = attempt("now", Instant::now());
    let now = store.backend().acquire(&now, MS(2000)).await;
    assert!(matches!(now, Ok(Acquired::Won { .. })));
    let now = Some("now".to_owned());
    assert_eq!(
        values(&nodes, &lock_key),
        vec![now.clone(), now.clone(), now]
    );
}

#[tokio::test]
async fn an_attempt_handed_over_keeps_its_first_sends_clock() {
    let nodes = servers(3);
    let endpoint = redlock_nodes::endpoint(&nodes, MS(2000));
    let locks = Arc::new(Locker::new(Store::shared(endpoint), PREFIX, MS(2000)));
    let cancel = CancellationToken::new();
    let again = |request, timeout| Start::Again { request, timeout };
    // Won: the lease counts from the first send, not from the handover.
    let request = locks.attempt_request("kept", MS(5000));
    let first = request.terms.sent.at;
    tokio::time::sleep(MS(50)).await;
    let start = again(request, MS(2000));
    let won = locks.pursue(Plan::once(), "kept", MS(5000), &cancel, start);
    let lease = won.await.expect("pursue").expect("won");
    assert_eq!(lease.sent().at, first);
    assert!(lease.deadline() <= first + clock::validity(MS(5000)));
    assert!(locks.release(&lease).await.expect("release"));
    // Handed over past its validity: time, not a lock, and nothing left on the nodes.
    let request = locks.attempt_request("spent", MS(200));
    let token = request.terms.token.clone();
    tokio::time::sleep(MS(250)).await;
    let start = again(request, MS(2000));
    let spent = locks.pursue(Plan::once(), "spent", MS(200), &cancel, start);
    let err = spent.await.expect_err("past its validity");
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    let key = format!("{PREFIX}spent").into_bytes();
    // Undone at once on the quorum that won it (before the 200 ms TTL frees it).
    assert!(holding(&nodes, &key, &token) <= 1);
}
