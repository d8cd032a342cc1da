//! syncguard's backend on the engine, through its core front, on a real redis-server started
//! here and on memory://: acquire and contention, the release codes, extend (it replaces the
//! TTL), isLocked with and without its clean-up, lookups by key and by lockId, and `lock()`'s
//! paced acquisition, woken by a release long before its backoff and ending as syncguard's.

mod common;
#[path = "common/syncguard_keys.rs"]
mod syncguard_keys;

use common::RedisServer;
use native_redis_lock::core::api::{memory_command, LockConnection, Owner};
use native_redis_lock::core::api::{Endpoint, EndpointSpec};
use native_redis_lock::core::api::{
    ReleasedById, Syncguard, SyncguardCall, SyncguardGranted, SyncguardSettings, SyncguardWon,
};
use native_redis_lock::core::basics::error::LockError;
use native_redis_lock::core::basics::pace::{GaveUp, Pace};
use redis::Value;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use syncguard_keys::Keys;
use tokio_util::sync::CancellationToken;

const TTL_MS: f64 = 30_000.0;

/// Where a test's backends run, and raw commands beside them.
enum Place {
    Redis(RedisServer),
    Memory(String),
}

impl Place {
    fn url(&self) -> String {
        match self {
            Place::Redis(server) => server.url(),
            Place::Memory(name) => format!("memory://{name}"),
        }
    }

    fn raw(&self, args: &[&[u8]]) -> Value {
        match self {
            Place::Redis(server) => {
                let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
                for arg in &args[1..] {
                    cmd.arg(*arg);
                }
                cmd.query(&mut server.raw()).unwrap()
            }
            Place::Memory(name) => memory_command(name, args),
        }
    }

    fn backend(&self, cleanup: bool) -> Syncguard {
        self.backend_on(cleanup, None)
    }

    /// A backend on a connection of its own (as another process's would be) when
    /// `connect_timeout` differs from the others'.
    fn backend_on(&self, cleanup: bool, connect_timeout: Option<Duration>) -> Syncguard {
        self.backend_of(cleanup, connect_timeout, Owner::new())
    }

    /// A backend whose calls run on behalf of `owner`.
    fn backend_of(
        &self,
        cleanup: bool,
        connect_timeout: Option<Duration>,
        owner: Owner,
    ) -> Syncguard {
        let spec = EndpointSpec {
            url: Some(self.url()),
            connect_timeout,
            ..Default::default()
        };
        let connection = LockConnection::open(Endpoint::from_spec(spec).unwrap());
        let settings = SyncguardSettings {
            cleanup_in_is_locked: Some(cleanup),
            command_timeout_ms: Some(2000.0),
            ..Default::default()
        };
        Syncguard::new(&connection, settings, owner).unwrap()
    }
}

/// A redis-server of its own, then a memory:// keyspace named for `test`.
fn places(test: &str) -> [Place; 2] {
    [
        Place::Redis(RedisServer::start()),
        Place::Memory(format!("sg-engine-{test}")),
    ]
}

impl Keys {
    /// Plants a record of this lockId expiring at `expires_at_ms`, with its index key, both
    /// without a TTL (as keys that outlived their JSON expiry).
    fn plant(&self, place: &Place, expires_at_ms: i64) {
        let record = format!(
            r#"{{"lockId":"{}","expiresAtMs":{expires_at_ms},"acquiredAtMs":0,"key":"{}","fence":"000000000000009"}}"#,
            self.id, self.key
        );
        place.raw(&[b"SET", &self.lock, record.as_bytes()]);
        place.raw(&[b"SET", &self.index, &self.lock]);
    }

    fn exists(&self, place: &Place, key: &[u8]) -> bool {
        place.raw(&[b"EXISTS", key]) == Value::Int(1)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn acquire(backend: &Syncguard, keys: &Keys, ttl_ms: f64) -> Option<SyncguardWon> {
    let won = backend.acquire(&keys.call(), ttl_ms).unwrap().await;
    won.unwrap().map(|granted| granted.won)
}

/// What a `lock()` acquisition ended with, without what frees an undelivered lock.
async fn won(
    granted: impl IntoFuture<Output = Result<SyncguardGranted, LockError>>,
) -> Result<SyncguardWon, LockError> {
    granted.await.map(|granted| granted.won)
}

async fn release(backend: &Syncguard, index: &Keys, id: &Keys) -> ReleasedById {
    (backend.release(&index.index, &id.id).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn acquire_contention_lookups_and_the_release_codes() {
    for place in places("codes") {
        let backend = place.backend(false);
        let (first, second) = (Keys::new("job", 1), Keys::new("job", 2));
        let before = now_ms();
        let won = acquire(&backend, &first, TTL_MS).await.expect("won");
        assert_eq!(won.fence, 1);
        let expires = won.expires_at_ms as i64;
        assert!(
            (expires - before - 30_000).abs() < 1_000,
            "{expires} vs {before}"
        );
        assert_eq!(acquire(&backend, &second, TTL_MS).await, None, "contention");
        assert!(backend.is_locked(&first.lock).unwrap().await.unwrap());

        let by_key = backend.lookup_key(&first.lock).unwrap().await.unwrap();
        let record = String::from_utf8(by_key.expect("a record")).unwrap();
        for field in [
            format!(r#""lockId":"{}""#, first.id),
            r#""key":"job""#.to_owned(),
            r#""fence":"000000000000001""#.to_owned(),
            format!(r#""expiresAtMs":{expires}"#),
        ] {
            assert!(record.contains(&field), "{field} in {record}");
        }
        let by_id = backend.lookup_id(&first.index, &first.id).unwrap().await;
        assert!(by_id.unwrap().is_some());
        let not_ours = backend.lookup_id(&first.index, &second.id).unwrap().await;
        assert_eq!(
            not_ours.unwrap(),
            None,
            "the index names another lockId's record"
        );
        let unknown = backend.lookup_id(&second.index, &second.id).unwrap().await;
        assert_eq!(unknown.unwrap(), None);

        assert_eq!(
            release(&backend, &second, &second).await,
            ReleasedById::NotFound
        );
        assert_eq!(
            release(&backend, &first, &second).await,
            ReleasedById::NotOwner
        );
        let lock_key = first.lock.clone();
        assert_eq!(
            release(&backend, &first, &first).await,
            ReleasedById::Released { lock_key }
        );
        assert_eq!(
            release(&backend, &first, &first).await,
            ReleasedById::NotFound
        );
        assert!(!backend.is_locked(&first.lock).unwrap().await.unwrap());
        assert_eq!(
            backend.lookup_key(&first.lock).unwrap().await.unwrap(),
            None
        );

        let third = Keys::new("job", 3);
        let won = acquire(&backend, &third, TTL_MS).await.expect("free again");
        assert_eq!(won.fence, 2, "fences go on from the counter");

        let stale = Keys::new("stale", 4);
        stale.plant(&place, now_ms() - 10_000);
        let lock_key = stale.lock.clone();
        assert_eq!(
            release(&backend, &stale, &stale).await,
            ReleasedById::Expired { lock_key }
        );
        assert!(!stale.exists(&place, &stale.lock) && !stale.exists(&place, &stale.index));
    }
}

#[tokio::test]
async fn extend_replaces_the_ttl() {
    for place in places("extend") {
        let backend = place.backend(false);
        let (mine, other) = (Keys::new("ext", 1), Keys::new("ext", 2));
        acquire(&backend, &mine, 5_000.0).await.expect("won");
        let before = now_ms();
        let extended = backend
            .extend(&mine.index, &mine.id, 60_000.0)
            .unwrap()
            .await;
        let expiry = extended.unwrap().expect("ours");
        // Set to now + 60 s, not added to the 5 s left (which would be about now + 65 s).
        assert!(
            (expiry - before - 60_000).abs() < 1_000,
            "{expiry} vs {before}"
        );
        let Value::Int(pttl) = place.raw(&[b"PTTL", &mine.lock]) else {
            panic!("no TTL");
        };
        assert!((59_000..=60_000).contains(&pttl), "{pttl}");
        let Value::Int(index_pttl) = place.raw(&[b"PTTL", &mine.index]) else {
            panic!("no TTL");
        };
        assert!((59_000..=60_000).contains(&index_pttl), "{index_pttl}");
        let theirs = backend
            .extend(&mine.index, &other.id, 60_000.0)
            .unwrap()
            .await;
        assert_eq!(theirs.unwrap(), None, "another lockId extends nothing");
        assert!(matches!(
            release(&backend, &mine, &mine).await,
            ReleasedById::Released { .. }
        ));
        let gone = backend
            .extend(&mine.index, &mine.id, 1_000.0)
            .unwrap()
            .await;
        assert_eq!(gone.unwrap(), None);
    }
}

#[tokio::test]
async fn is_locked_cleans_up_only_when_asked_and_past_its_guard() {
    for place in places("cleanup") {
        let (keep, clean) = (place.backend(false), place.backend(true));
        let (old, recent) = (Keys::new("old", 1), Keys::new("recent", 2));
        place.raw(&[b"SET", &old.fence, b"7"]);
        old.plant(&place, now_ms() - 5_000);
        // Expired (past the 1 s tolerance) but within the 2 s guard.
        recent.plant(&place, now_ms() - 1_500);

        assert!(!keep.is_locked(&old.lock).unwrap().await.unwrap());
        assert!(old.exists(&place, &old.lock) && old.exists(&place, &old.index));

        assert!(!clean.is_locked(&recent.lock).unwrap().await.unwrap());
        assert!(recent.exists(&place, &recent.lock), "within the guard");

        assert!(!clean.is_locked(&old.lock).unwrap().await.unwrap());
        assert!(!old.exists(&place, &old.lock) && !old.exists(&place, &old.index));
        let fence = place.raw(&[b"GET", &old.fence]);
        assert_eq!(
            fence,
            Value::BulkString(b"7".to_vec()),
            "the fence is never deleted"
        );

        let live = Keys::new("live", 3);
        acquire(&clean, &live, TTL_MS).await.expect("won");
        assert!(clean.is_locked(&live.lock).unwrap().await.unwrap());
    }
}

/// A release made through this package wakes a waiting `lock()` at once, though its next
/// scheduled attempt is 5 s away: by the lockId its backend won (the key known), and by a
/// backend on another connection that never saw the lock (the key learnt from the
/// release's reply, the waiter's connection woken through Redis by a second call).
#[tokio::test]
async fn a_paced_lock_is_woken_by_a_release_well_before_its_backoff() {
    for place in places("woken") {
        for (n, releaser_won_it) in [(0u8, true), (1, false)] {
            let backend = Arc::new(place.backend(false));
            let holder = Keys::new(&format!("w{n}"), 1);
            acquire(&backend, &holder, TTL_MS).await.expect("won");
            let waiter = Keys::new(&format!("w{n}"), 2);
            let started = Instant::now();
            let pace = Pace::fixed(5.0, 5_000.0, 60_000.0);
            let waiting = backend
                .lock(
                    &waiter.call(),
                    TTL_MS,
                    pace,
                    started,
                    CancellationToken::new(),
                )
                .unwrap();
            let waiting = tokio::spawn(won(waiting));
            tokio::time::sleep(Duration::from_millis(300)).await;
            let releaser = if releaser_won_it {
                backend.clone()
            } else {
                Arc::new(place.backend_on(false, Some(Duration::from_millis(4321))))
            };
            assert!(matches!(
                release(&releaser, &holder, &holder).await,
                ReleasedById::Released { .. }
            ));
            let won = tokio::time::timeout(Duration::from_millis(2_500), waiting)
                .await
                .expect("woken before its 5 s backoff")
                .unwrap()
                .expect("won");
            assert_eq!(won.fence, 2);
            assert!(started.elapsed() < Duration::from_secs(3));
        }
    }
}

#[tokio::test]
async fn a_paced_lock_ends_as_syncguards_does() {
    for place in places("endings") {
        let backend = place.backend(false);
        let holder = Keys::new("busy", 1);
        acquire(&backend, &holder, TTL_MS).await.expect("won");
        let waiter = Keys::new("busy", 2);
        let lock = |pace| {
            let cancel = CancellationToken::new();
            won((backend.lock(&waiter.call(), TTL_MS, pace, Instant::now(), cancel)).unwrap())
        };
        assert_eq!(
            lock(Pace::fixed(2.0, 10.0, f64::INFINITY)).await,
            Err(LockError::GaveUp(GaveUp::Contention { attempts: 3 }))
        );
        let no_time = lock(Pace::fixed(3.0, 10.0, 0.0)).await;
        assert!(
            matches!(
                no_time,
                Err(LockError::GaveUp(GaveUp::TimedOut { attempts: 1, .. }))
            ),
            "{no_time:?}"
        );
        let cancel = CancellationToken::new();
        let pace = Pace::fixed(5.0, 5_000.0, 60_000.0);
        let waiting = backend.lock(&waiter.call(), TTL_MS, pace, Instant::now(), cancel.clone());
        let waiting = tokio::spawn(won(waiting.unwrap()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert_eq!(ended.unwrap().unwrap(), Err(LockError::Aborted));
    }
}

#[tokio::test]
async fn bad_arguments_are_refused_naming_them() {
    let place = Place::Memory("sg-engine-args".into());
    let backend = place.backend(false);
    let keys = Keys::new("args", 1);
    let name = |err: LockError| match err {
        LockError::Invalid { arg, .. } => arg,
        other => panic!("{other:?}"),
    };
    let short = SyncguardCall {
        lock_id: "short",
        ..keys.call()
    };
    assert_eq!(
        name(backend.acquire(&short, TTL_MS).err().unwrap()),
        "lockId"
    );
    assert_eq!(
        name(backend.acquire(&keys.call(), 0.0).err().unwrap()),
        "ttlMs"
    );
    assert_eq!(
        name(backend.acquire(&keys.call(), 1.5).err().unwrap()),
        "ttlMs"
    );
    assert_eq!(
        name(backend.acquire(&keys.call(), f64::NAN).err().unwrap()),
        "ttlMs"
    );
    assert_eq!(name(backend.is_locked(b"").err().unwrap()), "lockKey");
    assert_eq!(
        name(backend.release(&keys.index, "x").err().unwrap()),
        "lockId"
    );
}

/// A lock won for a caller that is no longer there is freed, as with every other API: won
/// after its owner ended (the server paused under the attempt), or never delivered.
#[tokio::test]
async fn a_lock_won_for_a_caller_gone_is_freed() {
    for place in places("late") {
        let keys = Keys::new("late", 1);
        if let Place::Redis(server) = &place {
            let owner = Owner::new();
            let backend = place.backend_of(false, None, owner.clone());
            // Connected first, so that the attempt below is sent and waits in the server.
            assert!(!backend.is_locked(&keys.lock).unwrap().await.unwrap());
            server.signal("-STOP");
            let attempt =
                tokio::spawn(backend.acquire(&keys.call(), TTL_MS).unwrap().into_future());
            tokio::time::sleep(Duration::from_millis(200)).await;
            owner.end().await;
            server.signal("-CONT");
            let ended = attempt.await.unwrap().map(|granted| granted.is_some());
            assert_eq!(ended, Err(LockError::Aborted));
            assert!(!keys.exists(&place, &keys.lock), "a late win was kept");
            assert!(!keys.exists(&place, &keys.index));
        }
        let backend = place.backend(false);
        let undelivered = Keys::new("late", 2);
        let granted = backend.acquire(&undelivered.call(), TTL_MS).unwrap().await;
        let granted = granted.unwrap().expect("won");
        assert!(undelivered.exists(&place, &undelivered.lock));
        granted.unclaimed.free();
        let deadline = Instant::now() + Duration::from_secs(2);
        while undelivered.exists(&place, &undelivered.lock) {
            assert!(Instant::now() < deadline, "an undelivered lock was kept");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!undelivered.exists(&place, &undelivered.index));
    }
}
