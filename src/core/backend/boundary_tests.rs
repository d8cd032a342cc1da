//! What each backend says it offers, and the clock it answers with.
use super::*;
use crate::core::backend::endpoint::EndpointSpec;
use crate::core::backend::lock_store::{FastPath, LostScope};

struct Deaf;

impl Listener for Deaf {
    fn message(&self, _: &[u8], _: &[u8]) {}
    fn connection_lost(&self, _: LostScope) {}
}

fn open(url: &str) -> Backend {
    let endpoint = Endpoint::from_spec(EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    })
    .unwrap();
    Backend::open(endpoint, Arc::new(Deaf))
}

#[test]
fn one_redis_offers_the_socket_and_transactions_memory_runs_inline_and_scripts_only() {
    let redis = open("redis://127.0.0.1:1").caps();
    assert!(matches!(open("redis://127.0.0.1:1"), Backend::Redis(_)));
    assert_eq!(redis.fast_path, FastPath::Socket);
    assert!(redis.transactions);
    let memory = open("memory://caps").caps();
    assert!(matches!(open("memory://caps"), Backend::Memory(_)));
    assert_eq!(memory.fast_path, FastPath::Inline);
    assert!(!memory.transactions);
    assert_eq!(
        (redis.fencing, redis.handover, redis.fairness, redis.wake),
        (
            memory.fencing,
            memory.handover,
            memory.fairness,
            memory.wake
        ),
        "the same scripts give both the same guarantees"
    );
}

#[tokio::test]
async fn memory_answers_the_time_of_its_own_clock() {
    let memory = open("memory://time");
    let before = SystemTime::now();
    let time = memory.server_time(Duration::from_secs(1)).await.unwrap();
    let after = SystemTime::now();
    let slack = Duration::from_millis(50);
    assert!(time + slack >= before && time <= after + slack);
}

/// syncguard's layout through the boundary: each op reaches the store and comes back read.
#[tokio::test]
async fn memory_keeps_a_syncguard_lock_through_its_life() {
    use crate::core::proto::acquire::{AcquireAttempt, AttemptForm, Layout};
    use crate::core::proto::syncguard::{
        ExtendById, ReleaseById, ReleasedById, SyncguardIsLocked, SyncguardLookup,
    };
    let store = open("memory://sg-life");
    let bound = Duration::from_secs(1);
    store.prepare(bound).await.unwrap();
    let (lock, index, id) = (
        &b"sg:job"[..],
        &b"sg:id:AAAAAAAAAAAAAAAAAAAAAA"[..],
        "AAAAAAAAAAAAAAAAAAAAAA",
    );
    let attempt = AcquireAttempt {
        lock_key: lock,
        fence_key: b"sg:fence:sg:job",
        token: id,
        ttl: Duration::from_secs(30),
        fence_retention_ms: 0,
        keep_fences: false,
        layout: Layout::Syncguard {
            index_key: index,
            stored_key: lock,
            user_key: "job",
        },
        form: AttemptForm::Script,
    };
    let now_ms = |time: SystemTime| {
        time.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let before = now_ms(SystemTime::now());
    let Acquired::Won {
        fence: 1,
        set_at: Some(expires),
    } = store.acquire(&attempt, bound).await.unwrap()
    else {
        panic!("not won with the first fence");
    };
    assert!(
        (expires - before - 30_000).abs() < 1_000,
        "{expires} vs {before}"
    );
    let by_id = SyncguardLookup::ById {
        index_key: index,
        lock_id: id,
    };
    let json = store.lookup_record(&by_id, bound).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&json).contains(id));
    let live = SyncguardIsLocked {
        lock_key: lock,
        key_prefix: b"sg",
        cleanup: true,
    };
    assert!(store.record_live(&live, bound).await.unwrap());
    let extend = ExtendById {
        index_key: index,
        lock_id: id,
        ttl: Duration::from_secs(60),
    };
    let extended = store.extend_by_id(&extend, bound).await.unwrap().unwrap();
    assert!(extended - expires > 29_000);
    let release = ReleaseById {
        index_key: index,
        lock_id: id,
        expect: Some(lock),
        ours_wait: false,
    };
    let released = store.release_by_id(&release, bound).await.unwrap();
    assert_eq!(
        released,
        ReleasedById::Released {
            lock_key: lock.to_vec()
        }
    );
    assert!(!store.record_live(&live, bound).await.unwrap());
    let by_key = SyncguardLookup::ByKey { lock_key: lock };
    assert_eq!(store.lookup_record(&by_key, bound).await.unwrap(), None);
    assert_eq!(
        store.release_by_id(&release, bound).await.unwrap(),
        ReleasedById::NotFound
    );
    assert_eq!(store.extend_by_id(&extend, bound).await.unwrap(), None);
}
