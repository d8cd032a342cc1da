//! Every method of `LockStore`, called through the store itself on one Redis (`RedisStore`)
//! and on `memory://` (`MemoryStore`): the same sequence of calls gets the same answers and
//! publishes the same wake-ups. tests/memory_equivalence.rs holds the scripts to Redis's
//! replies command by command; this holds each store's own path (the op's one encoding, the
//! store's call, the op's decode) to the same outcome, for every operation of the boundary.
//! Clock-derived numbers (TTLs, expiries, the server's time) are compared within a tolerance.
//! Not here: a Ring's grants (memory:// has no other process to grant to, `Caps::handover`)
//! and a Redlock's fence write-back (a quorum's, tested in tests/redlock*.rs).

use super::*;
use crate::core::backend::endpoint::EndpointSpec;
use crate::core::backend::lock_store::LostScope;
use crate::core::basics::keys::{fence_key, missed_key, owner_key, released_channel};
use crate::core::basics::test_server::RedisServer;
use crate::core::basics::token::format_fence;
use crate::core::proto::acquire::{AttemptForm, Layout};
use crate::core::proto::missed::CountMissed;
use crate::core::proto::refresh::Refresh;
use crate::core::proto::release::{FenceUpkeep, ReleaseKind};
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

const TOLERANCE_MS: i64 = 250;
const BOUND: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(10);
const LOCK_ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

/// What each store published on the channels it listens to, in order.
#[derive(Default)]
struct Published(Mutex<Vec<(Vec<u8>, Vec<u8>)>>);

impl Listener for Published {
    fn message(&self, channel: &[u8], payload: &[u8]) {
        lock(&self.0).push((channel.to_vec(), payload.to_vec()));
    }
    fn connection_lost(&self, _: LostScope) {}
    fn unsubscribed(&self, _: &[u8]) {}
}

#[derive(Default)]
struct Channels(Mutex<HashSet<Vec<u8>>>);

impl Subscriptions for Channels {
    fn is_subscribed(&self, channel: &[u8]) -> bool {
        lock(&self.0).contains(channel)
    }
    fn is_wanted(&self, _: &[u8]) -> bool {
        true
    }
    fn take_idle(&self, _: usize) -> Vec<Vec<u8>> {
        Vec::new()
    }
    fn mark_subscribed(&self, channel: &[u8]) {
        lock(&self.0).insert(channel.to_vec());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One answer: compared exactly, or (a number of ms from a clock) within the tolerance.
#[derive(Debug)]
enum Got {
    Exact(String),
    Ms(Option<i64>),
}

fn same(a: &Got, b: &Got) -> bool {
    match (a, b) {
        (Got::Exact(a), Got::Exact(b)) => a == b,
        (Got::Ms(Some(a)), Got::Ms(Some(b))) => (a - b).abs() <= TOLERANCE_MS,
        (Got::Ms(a), Got::Ms(b)) => a.is_none() && b.is_none(),
        _ => false,
    }
}

/// The wall clock in ms, as the stores' expiries are written.
fn now_ms() -> i64 {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as i64)
}

fn exact<T: std::fmt::Debug>(value: T) -> Got {
    Got::Exact(format!("{value:?}"))
}

fn ms(duration: Option<Duration>) -> Got {
    Got::Ms(duration.map(|d| d.as_millis() as i64))
}

fn attempt<'a>(
    lock_key: &'a [u8],
    fence: &'a [u8],
    token: &'a str,
    layout: Layout<'a>,
) -> AcquireAttempt<'a> {
    AcquireAttempt {
        lock_key,
        fence_key: fence,
        token,
        ttl: TTL,
        fence_retention_ms: 5_000,
        keep_fences: false,
        fences_known_kept: false,
        layout,
        form: AttemptForm::Script,
        sent: Instant::now(),
    }
}

/// An attempt's answer, its fence kept for what follows; a held lock's TTL within the
/// tolerance.
fn acquired(answer: Result<Acquired, LockError>, fence: &mut u64) -> Vec<Got> {
    match answer {
        Ok(Acquired::Won { fence: won, set_at }) => {
            *fence = won;
            vec![exact(("won", won)), Got::Ms(set_at.map(|at| at - now_ms()))]
        }
        Ok(Acquired::Held { ttl }) => vec![exact("held"), ms(ttl)],
        other => vec![exact(other)],
    }
}

/// The same calls, in the same order, on `store`; every answer in order.
async fn every_operation(store: &Backend, heard: &Published) -> Vec<Got> {
    let mut got = Vec::new();
    let subs = Channels::default();
    let (a, b, x, fair, single) = (b"eq:a", b"eq:b", b"eq:x", b"eq:fair", b"eq:single");
    let (fa, fb, ffair, fsingle) = (
        fence_key(a),
        fence_key(b),
        fence_key(fair),
        fence_key(single),
    );
    let mut fence = 0;

    got.push(exact(store.prepare(BOUND, ScriptsFor::Attempt).await));
    got.push(exact(store.is_prepared()));
    got.push(exact(
        store.listen(&released_channel(a), &subs, BOUND).await,
    ));

    // One lock, its holder and a waiter of another connection.
    got.extend(acquired(
        store
            .acquire(&attempt(a, &fa, "t1", Layout::Plain), BOUND)
            .await,
        &mut fence,
    ));
    let held_fence = fence;
    got.extend(acquired(
        store
            .acquire(&attempt(a, &fa, "t2", Layout::Plain), BOUND)
            .await,
        &mut fence,
    ));
    let queued = Layout::Queued {
        queue_id: "conn-2",
        score: 1,
        company: false,
        lifetime: TTL,
    };
    got.extend(acquired(
        store.acquire(&attempt(a, &fa, "t2", queued), BOUND).await,
        &mut fence,
    ));
    got.push(exact(store.is_locked(&Exists { lock_key: a }, BOUND).await));
    got.push(exact(store.is_locked(&Exists { lock_key: x }, BOUND).await));

    // Fences a transaction drew in vain, counted beside the lock, for as long on both (the
    // stores' own attempts are the script, which draws none so).
    let missed = missed_key(a);
    for _ in 0..2 {
        let count = CountMissed {
            missed_key: &missed,
            fences: 2,
        };
        got.push(exact(store.run(&count, BOUND).await));
    }
    got.push(ms(store
        .holder_ttl(&Pttl { lock_key: &missed }, BOUND)
        .await
        .expect("PTTL")));
    let ttl = store.holder_ttl(&Pttl { lock_key: a }, BOUND).await;
    got.push(ms(ttl.expect("PTTL")));
    let (holder, left) = store
        .inspect(&Inspect { lock_key: a }, BOUND)
        .await
        .expect("inspect");
    got.extend([exact(holder), Got::Ms(Some(left))]);
    let extra = Duration::from_secs(5);
    let extend = |token| Extend {
        lock_key: a,
        token,
        extra,
    };
    got.push(ms(store
        .extend(&extend("t1"), BOUND)
        .await
        .expect("extend")));
    got.push(ms(store
        .extend(&extend("t2"), BOUND)
        .await
        .expect("extend")));

    // Fenced writes: the holder's fence, then an older one.
    let (newer, older) = (format_fence(held_fence), format_fence(held_fence - 1));
    for fence in [&newer, &older] {
        let write = FencedSet {
            key: b"eq:resource",
            value: "v",
            fence,
        };
        got.push(exact(store.fenced_write(&write, BOUND).await));
    }

    // Handed over to another token, released (waking the queued connection), then again.
    let hand_over = HandOver {
        lock_key: a,
        token: "t1",
        fence: held_fence,
        to: "t3",
        ttl: TTL,
        upkeep: FenceUpkeep::Margin,
    };
    got.push(exact(store.hand_over(&hand_over, BOUND).await));
    got.push(exact(store.hand_over(&hand_over, BOUND).await));
    let release = |token| Release {
        lock_key: a,
        token,
        kind: ReleaseKind::Wake { ours_wait: false },
    };
    got.push(exact(store.release(&release("t3"), BOUND).await));
    got.push(exact(store.release(&release("t3"), BOUND).await));

    // The queue steps on a free lock.
    let enqueue = Enqueue {
        lock_key: a,
        id: "conn-3",
        score: 2,
        lifetime: TTL,
    };
    got.push(exact(store.enqueue(&enqueue, BOUND).await));
    got.extend(acquired(
        store
            .acquire(&attempt(a, &fa, "t4", Layout::Plain), BOUND)
            .await,
        &mut fence,
    ));
    got.push(exact(store.enqueue(&enqueue, BOUND).await));
    got.push(exact(
        store
            .leave_queue(
                &LeaveQueue {
                    lock_key: a,
                    id: "conn-3",
                },
                BOUND,
            )
            .await,
    ));
    got.push(exact(
        store.wake_next(&WakeNext { lock_key: a }, BOUND).await,
    ));

    // ExclusiveLock's pair: its owner key holds the token, the lock key the value.
    let owner = owner_key(b);
    let exclusive = || Layout::Exclusive {
        owner_key: &owner,
        contents: "value",
    };
    got.extend(acquired(
        store
            .acquire(&attempt(b, &fb, "t5", exclusive()), BOUND)
            .await,
        &mut fence,
    ));
    let pair = |contents| Release {
        lock_key: &owner,
        token: "t5",
        kind: ReleaseKind::Pair {
            data_key: b,
            contents,
            set_at: None,
        },
    };
    got.push(exact(store.release(&pair(b"value"), BOUND).await));
    got.push(exact(store.release(&pair(b"value"), BOUND).await));
    // Not its value: not ours, and the owner key of ours beside it goes (see release.lua).
    got.extend(acquired(
        store
            .acquire(&attempt(b, &fb, "t5", exclusive()), BOUND)
            .await,
        &mut fence,
    ));
    got.push(exact(store.release(&pair(b"other"), BOUND).await));
    got.push(exact(
        store.is_locked(&Exists { lock_key: &owner }, BOUND).await,
    ));

    // A fair lock's line.
    let fair_layout = |member| Layout::Fair {
        member,
        place: TTL,
        lifetime: TTL,
    };
    got.extend(acquired(
        store
            .acquire(&attempt(fair, &ffair, "t6", fair_layout("")), BOUND)
            .await,
        &mut fence,
    ));
    got.extend(acquired(
        store
            .acquire(&attempt(fair, &ffair, "t7", fair_layout("m1")), BOUND)
            .await,
        &mut fence,
    ));
    got.push(exact(
        store
            .leave_line(
                &LeaveLine {
                    lock_key: fair,
                    member: "m1",
                },
                BOUND,
            )
            .await,
    ));
    let fair_release = Release {
        lock_key: fair,
        token: "t6",
        kind: ReleaseKind::Fair,
    };
    got.push(exact(store.release(&fair_release, BOUND).await));

    // The watchdog's batch: a lock of ours, and one that is nobody's.
    got.extend(acquired(
        store
            .acquire(&attempt(single, &fsingle, "t8", Layout::Plain), BOUND)
            .await,
        &mut fence,
    ));
    let refresh = |key, token| Refresh {
        key,
        token,
        ttl_ms: 20_000,
        fence_retention_ms: 5_000,
        pair: None,
    };
    let batch = RefreshBatch::new(&[refresh(single, b"t8"), refresh(x, b"t9")], &[]);
    got.push(exact(store.refresh(&batch, BOUND).await));
    got.push(ms(store
        .holder_ttl(&Pttl { lock_key: single }, BOUND)
        .await
        .expect("PTTL")));

    // syncguard's layout: a record, its index key by lockId, its own fence counter.
    let (sg, index, sg_fence) = (b"eq:sg:lock", b"eq:sg:id:AAAA", b"eq:sg:fence");
    let layout = Layout::Syncguard {
        index_key: index,
        stored_key: sg,
        user_key: "lock",
    };
    got.extend(acquired(
        store
            .acquire(&attempt(sg, sg_fence, LOCK_ID, layout), BOUND)
            .await,
        &mut fence,
    ));
    let is_locked = SyncguardIsLocked {
        lock_key: sg,
        key_prefix: b"eq:sg:",
        cleanup: false,
    };
    got.push(exact(store.syncguard_is_locked(&is_locked, BOUND).await));
    let lookup = SyncguardLookup::ById {
        index_key: index,
        lock_id: LOCK_ID,
    };
    let record = store
        .syncguard_lookup(&lookup, BOUND)
        .await
        .expect("lookup");
    let record = record.map(|json| String::from_utf8_lossy(&json).contains(LOCK_ID));
    got.push(exact(record));
    let extend = ExtendById {
        index_key: index,
        lock_id: LOCK_ID,
        ttl: TTL,
    };
    let until = store
        .extend_by_id(&extend, BOUND)
        .await
        .expect("extend by id");
    got.push(Got::Ms(until.map(|at| at - now_ms())));
    let release = |lock_id| ReleaseById {
        index_key: index,
        lock_id,
        expect: Some(sg),
        ours_wait: false,
    };
    got.push(exact(
        store
            .release_by_id(&release("BBBBBBBBBBBBBBBBBBBBBB"), BOUND)
            .await,
    ));
    got.push(exact(store.release_by_id(&release(LOCK_ID), BOUND).await));
    got.push(exact(store.release_by_id(&release(LOCK_ID), BOUND).await));
    got.push(exact(store.syncguard_is_locked(&is_locked, BOUND).await));

    let time = store.server_time(a, BOUND).await.expect("TIME");
    let skew = time.duration_since(SystemTime::now()).map_or_else(
        |e| -(e.duration().as_millis() as i64),
        |d| d.as_millis() as i64,
    );
    got.push(Got::Ms(Some(skew)));
    store.drop_idle(&subs, BOUND).await;

    // Redis delivers what it published on its own time: wait for the wake-ups.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock(&heard.0).len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let heard: Vec<_> = (lock(&heard.0).iter())
        .map(|(c, p)| (text(c), text(p)))
        .collect();
    got.push(exact(heard));
    got
}

fn open(url: &str, heard: Arc<Published>) -> Backend {
    let spec = EndpointSpec {
        url: Some(url.into()),
        ..Default::default()
    };
    let endpoint = Endpoint::from_spec(spec).expect("endpoint");
    Backend::open(endpoint, heard)
}

#[tokio::test]
async fn every_operation_answers_alike_on_one_redis_and_on_memory() {
    let server = RedisServer::start();
    let (redis_heard, memory_heard) = (
        Arc::new(Published::default()),
        Arc::new(Published::default()),
    );
    let redis = open(&server.url(), redis_heard.clone());
    let memory = open("memory://store-equivalence", memory_heard.clone());
    assert!(matches!(
        (&redis, &memory),
        (Backend::Redis(_), Backend::Memory(_))
    ));
    let on_redis = every_operation(&redis, &redis_heard).await;
    let on_memory = every_operation(&memory, &memory_heard).await;
    assert_eq!(on_redis.len(), on_memory.len());
    for (i, (r, m)) in on_redis.iter().zip(&on_memory).enumerate() {
        assert!(
            same(r, m),
            "answer {i}: Redis {r:?}, memory:// {m:?}\nRedis: {on_redis:?}"
        );
    }
    // The sequence does what it says: a win, a wait, a hand-over and its wake-up.
    let seen = format!("{on_redis:?}");
    let woken = r#"[(\"{eq:a}:released\", \"conn-2\")]"#;
    for expected in [
        "won", "held", "Some(2)", "Ok(4)", "Released", "NotOwner", woken,
    ] {
        assert!(seen.contains(expected), "{expected} missing from {seen}");
    }
}
