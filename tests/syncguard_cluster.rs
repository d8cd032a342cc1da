//! syncguard's front on a real Redis Cluster (3 masters) started here and stopped by pid,
//! with its default prefix, which holds no hash tag: on a key of each master, the lockId
//! names the lock key's slot, the index and fence keys are `{<tag of that slot>}` + syncguard's
//! names on that master, and acquire, lookup by lockId, extend and release find them there; a
//! lockId that does not name its lock key's slot is refused before any call.

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use cluster::RedisCluster;
use native_redis_lock::core::api::{LockConnection, Owner, ReleasedById};
use native_redis_lock::core::api::{Syncguard, SyncguardCall, SyncguardSettings};
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::{keys, slots};
use std::time::Duration;

/// One cluster for both cases (starting one costs seconds on two cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncguard_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    the_default_prefix_puts_index_and_fence_in_the_lock_keys_slot(&cluster).await;
    a_tagged_prefix_keeps_syncguards_names_and_lock_ids(&cluster).await;
}

async fn the_default_prefix_puts_index_and_fence_in_the_lock_keys_slot(cluster: &RedisCluster) {
    let connection = LockConnection::open(cluster.endpoint(Duration::from_millis(2000)));
    let settings = SyncguardSettings {
        command_timeout_ms: Some(2000.0),
        ..Default::default()
    };
    let backend = Syncguard::new(&connection, settings, Owner::new()).expect("a backend");
    assert!(backend.slot_safe());
    for port in cluster.master_ports() {
        let key = cluster.key_on(port, "syncguard:", "job-");
        let lock = format!("syncguard:{key}").into_bytes();
        let slot = keys::slot(&lock);
        let lock_id = backend
            .lock_id_for(&lock, "q3Zx_-09aZbYc8Lm2kP4Tw")
            .expect("a lockId");
        assert_eq!(
            &lock_id[..19],
            "q3Zx_-09aZbYc8Lm2kP",
            "its random part kept"
        );
        let index = format!("syncguard:id:{lock_id}").into_bytes();
        let fence = format!("syncguard:fence:syncguard:{key}").into_bytes();
        let call = SyncguardCall {
            key: &key,
            lock_key: &lock,
            index_key: &index,
            fence_key: &fence,
            lock_id: &lock_id,
        };
        let won = backend.acquire(&call, 30_000.0).expect("checked").await;
        let won = won.expect("acquired").expect("won").won;

        let tag = slots::tag_for_slot(slot);
        let in_slot = |name: &[u8]| [b"{", tag, b"}", name].concat();
        assert_eq!(
            cluster
                .get(port, &in_slot(&index))
                .as_deref()
                .map(str::as_bytes),
            Some(&lock[..])
        );
        assert_eq!(
            cluster.get(port, &in_slot(&fence)),
            Some(won.fence.to_string())
        );
        assert_eq!(
            cluster.get(cluster.master_of(&index), &index),
            None,
            "not syncguard's own name"
        );

        let record = backend.lookup_id(&index, &lock_id).expect("checked").await;
        assert!(
            record.expect("looked up").is_some(),
            "found by lockId alone"
        );
        let extended = backend
            .extend(&index, &lock_id, 40_000.0)
            .expect("checked")
            .await;
        assert!(extended.expect("extended").is_some());
        let released = backend.release(&index, &lock_id).expect("checked").await;
        assert_eq!(
            released.expect("released"),
            ReleasedById::Released {
                lock_key: lock.clone()
            }
        );
        assert_eq!(cluster.get(port, &in_slot(&index)), None);

        // A lockId naming another slot: refused, naming it, before any call.
        let other = backend
            .lock_id_for(b"syncguard:elsewhere", &lock_id)
            .expect("a lockId");
        if keys::slot(b"syncguard:elsewhere") != slot {
            let call = SyncguardCall {
                lock_id: &other,
                ..call
            };
            match backend.acquire(&call, 1000.0) {
                Err(LockError::Invalid { arg, .. }) => assert_eq!(arg, "lockId"),
                Err(other) => panic!("refused otherwise: {other}"),
                Ok(_) => panic!("a lockId of another slot was taken"),
            }
        }
    }
}

async fn a_tagged_prefix_keeps_syncguards_names_and_lock_ids(cluster: &RedisCluster) {
    let connection = LockConnection::open(cluster.endpoint(Duration::from_millis(2000)));
    let settings = SyncguardSettings {
        key_prefix: Some("{jobs}".into()),
        command_timeout_ms: Some(2000.0),
        ..Default::default()
    };
    let backend = Syncguard::new(&connection, settings, Owner::new()).expect("a backend");
    assert!(!backend.slot_safe());
    let id = "q3Zx_-09aZbYc8Lm2kP4Tw";
    assert_eq!(backend.lock_id_for(b"{jobs}:a", id).expect("a lockId"), id);
    let (lock, index, fence) = (
        &b"{jobs}:a"[..],
        format!("{{jobs}}:id:{id}").into_bytes(),
        &b"{jobs}:fence:{jobs}:a"[..],
    );
    let call = SyncguardCall {
        key: "a",
        lock_key: lock,
        index_key: &index,
        fence_key: fence,
        lock_id: id,
    };
    let won = backend.acquire(&call, 30_000.0).expect("checked").await;
    let won = won.expect("acquired").expect("won").won;
    let port = cluster.master_of(lock);
    assert_eq!(cluster.get(port, &index).as_deref(), Some("{jobs}:a"));
    assert_eq!(cluster.get(port, fence), Some(won.fence.to_string()));
    let released = backend.release(&index, id).expect("checked").await;
    assert_eq!(
        released.expect("released"),
        ReleasedById::Released {
            lock_key: lock.to_vec()
        }
    );
}
