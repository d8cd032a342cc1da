//! The `memory://` backend answers our scripts exactly as Redis does: the same calls, sent
//! to a real redis-server and to a memory:// keyspace, get the same replies and leave the same
//! keys behind. Only clock-derived numbers (remaining TTLs, scores from TIME) are compared
//! within a tolerance. Every operation is sent: each layout's attempt (the script, and the
//! transaction the JS thread's connection writes), each kind of release, hand-over, extend,
//! isLocked and the holder's TTL, fenced writes, the queue scripts, and the watchdog's
//! refreshes, one by one and as its pipelined batch.

mod common;

use common::{args_of, RedisServer};
use native_redis_lock::core::api::scripts;
use native_redis_lock::core::api::{memory_command, memory_transaction};
use native_redis_lock::core::basics::keys::{
    alive_key, line_key, queue_key, released_channel as channel,
};
use native_redis_lock::core::basics::keys::{fence_key, owner_key};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Script, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Clock-derived numbers of the two backends, read ms apart, may differ by this much. At a
/// load of 7 on 2 cores, 72 ms passed between the two stores' writes of one TTL. The TTLs
/// drawn (whole seconds, see ttl()) are never within 250 ms of one another unless equal, so
/// a script that set the wrong one still fails here.
const TOLERANCE_MS: i64 = 250;
/// How long each op waits before it is sent, so that on each store's clock time has passed
/// since the op before. The scripts compare a counter's TTL against one they compute from the
/// TTLs given (see fence.lua): a counter set by one op and looked at by the next with the same
/// TTL sits exactly on the line while both run in the same millisecond, and two stores run a
/// moment apart fell on either side of it (one pushed the counter, the other did not).
/// 2 ms: one for the tick, one for an expiry from TIME (PXAT) that may be a millisecond past
/// the script's own clock.
const STEP: Duration = Duration::from_millis(2);
/// How long the real store may take to answer. The client's default (500 ms) was once
/// exceeded on a loaded machine, failing the proptest with nothing compared.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
const LOCKS: [&str; 2] = ["lock:a", "lock:{tag}:b"];
const TOKENS: [&str; 3] = ["t1", "t2", "t3"];
const RESOURCE: &str = "resource";

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        lock: usize,
        token: usize,
        ttl: u64,
    },
    AcquireExclusive {
        lock: usize,
        value: usize,
        token: usize,
        ttl: u64,
    },
    AcquireQueued {
        lock: usize,
        token: usize,
        ttl: u64,
        conn: usize,
        score: u64,
        company: bool,
    },
    AcquireFair {
        lock: usize,
        token: usize,
        ttl: u64,
        member: Option<usize>,
    },
    Release {
        lock: usize,
        token: usize,
    },
    /// `proof`: with the lock key's expiry as a transaction told it (see same_expiry.lua).
    ReleaseExclusive {
        lock: usize,
        token: usize,
        value: usize,
        proof: bool,
    },
    ReleaseWake {
        lock: usize,
        token: usize,
        own_waiters: bool,
    },
    ReleaseFair {
        lock: usize,
        token: usize,
    },
    Extend {
        lock: usize,
        token: usize,
        add: u64,
    },
    Refresh {
        lock: usize,
        token: usize,
        ttl: u64,
    },
    RefreshExclusive {
        lock: usize,
        token: usize,
        value: usize,
        ttl: u64,
        proof: bool,
    },
    RefreshMany {
        locks: Vec<(usize, usize, u64)>,
    },
    /// The watchdog's batch, one pipeline: `refresh_many` for the single-key locks, then
    /// one refresh per ExclusiveLock pair `(lock, token, value, ttl, proof)`.
    RefreshBatch {
        singles: Vec<(usize, usize, u64)>,
        pairs: Vec<(usize, usize, usize, u64, bool)>,
    },
    /// The first attempt as the JS thread's connection writes it where MULTI works (see
    /// proto/acquire.rs `AttemptForm::Transaction`), one pipeline: `value` for
    /// ExclusiveLock's contents (which asks the lock key's expiry back), else the token;
    /// `keep` when it pushes the counter's expiry.
    AcquireTransaction {
        lock: usize,
        token: usize,
        value: Option<usize>,
        ttl: u64,
        keep: bool,
    },
    /// isLocked().
    Exists {
        lock: usize,
    },
    /// The holder's remaining time.
    Pttl {
        lock: usize,
    },
    Handoff {
        lock: usize,
        ours: usize,
        theirs: usize,
        ttl: u64,
        fence: u64,
        /// 0 none (the margin kept), 1 'kept', 2 a window.
        upkeep: usize,
    },
    FencedSet {
        value: usize,
        fence: u64,
    },
    Inspect {
        lock: usize,
    },
    Enqueue {
        lock: usize,
        conn: usize,
        score: u64,
    },
    WakeNext {
        lock: usize,
    },
    LeaveFair {
        lock: usize,
        member: usize,
    },
    /// Another client writing where it should not: a counter that is no number, or full,
    /// or given an expiry, or a lock key of another type.
    Spoil {
        lock: usize,
        how: usize,
    },
}

fn member(n: usize) -> String {
    format!("conn{n}:{n}")
}

/// Whole seconds, as are the extends' additions: what the scripts compare are sums and
/// differences of these, less the time the sequence has taken, so two stores a few ms apart
/// are on the same side of every line unless they sit on it, which STEP settles. With
/// TTLs to the millisecond, two that differ by the few ms between the stores' readings put
/// the line between them.
fn ttl() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(10_000u64),
        Just(30_000u64),
        (1u64..60).prop_map(|s| s * 1_000)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let lock = 0..LOCKS.len();
    let token = 0..TOKENS.len();
    prop_oneof![
        4 => (lock.clone(), token.clone(), ttl()).prop_map(|(lock, token, ttl)| Op::Acquire { lock, token, ttl }),
        2 => (lock.clone(), 0..2usize, token.clone(), ttl()).prop_map(|(lock, value, token, ttl)| Op::AcquireExclusive { lock, value, token, ttl }),
        3 => (lock.clone(), token.clone(), ttl(), 0..3usize, 1u64..5, any::<bool>()).prop_map(|(lock, token, ttl, conn, score, company)| Op::AcquireQueued { lock, token, ttl, conn, score, company }),
        3 => (lock.clone(), token.clone(), ttl(), proptest::option::of(0..3usize)).prop_map(|(lock, token, ttl, member)| Op::AcquireFair { lock, token, ttl, member }),
        3 => (lock.clone(), token.clone()).prop_map(|(lock, token)| Op::Release { lock, token }),
        1 => (lock.clone(), token.clone(), 0..2usize, any::<bool>()).prop_map(|(lock, token, value, proof)| Op::ReleaseExclusive { lock, token, value, proof }),
        2 => (lock.clone(), token.clone(), any::<bool>()).prop_map(|(lock, token, own_waiters)| Op::ReleaseWake { lock, token, own_waiters }),
        2 => (lock.clone(), token.clone()).prop_map(|(lock, token)| Op::ReleaseFair { lock, token }),
        2 => (lock.clone(), token.clone(), 0u64..20).prop_map(|(lock, token, add)| Op::Extend { lock, token, add: add * 1_000 }),
        2 => (lock.clone(), token.clone(), ttl()).prop_map(|(lock, token, ttl)| Op::Refresh { lock, token, ttl }),
        1 => (lock.clone(), token.clone(), 0..2usize, ttl(), any::<bool>()).prop_map(|(lock, token, value, ttl, proof)| Op::RefreshExclusive { lock, token, value, ttl, proof }),
        1 => proptest::collection::vec((lock.clone(), token.clone(), ttl()), 1..4).prop_map(|locks| Op::RefreshMany { locks }),
        1 => (proptest::collection::vec((lock.clone(), token.clone(), ttl()), 0..3), proptest::collection::vec((lock.clone(), token.clone(), 0..2usize, ttl(), any::<bool>()), 0..3)).prop_map(|(singles, pairs)| Op::RefreshBatch { singles, pairs }),
        3 => (lock.clone(), token.clone(), proptest::option::of(0..2usize), ttl(), any::<bool>()).prop_map(|(lock, token, value, ttl, keep)| Op::AcquireTransaction { lock, token, value, ttl, keep }),
        1 => lock.clone().prop_map(|lock| Op::Exists { lock }),
        1 => lock.clone().prop_map(|lock| Op::Pttl { lock }),
        2 => (lock.clone(), token.clone(), token.clone(), ttl(), prop_oneof![Just(0u64), 1u64..8], 0..3usize).prop_map(|(lock, ours, theirs, ttl, fence, upkeep)| Op::Handoff { lock, ours, theirs, ttl, fence, upkeep }),
        1 => (0..3usize, 0u64..10).prop_map(|(value, fence)| Op::FencedSet { value, fence }),
        1 => lock.clone().prop_map(|lock| Op::Inspect { lock }),
        2 => (lock.clone(), 0..3usize, 1u64..5).prop_map(|(lock, conn, score)| Op::Enqueue { lock, conn, score }),
        1 => lock.clone().prop_map(|lock| Op::WakeNext { lock }),
        1 => (lock.clone(), 0..3usize).prop_map(|(lock, member)| Op::LeaveFair { lock, member }),
        1 => (lock, 0..5usize).prop_map(|(lock, how)| Op::Spoil { lock, how }),
    ]
}

fn evalsha(script: &Script, keys: &[&[u8]], args: &[String]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

/// Whether a reply carries a clock-derived number, and where.
#[derive(Clone, Copy)]
enum Clocked {
    /// A transaction's EXEC: the lock key's expiry last (`expiry_last`), and at `gt_at` the
    /// counter's `PEXPIRE GT`, right after its `PEXPIRE NX` with the same ms. Redis 7.0
    /// reads the clock for each command of an EXEC, as memory:// does: when the NX has just
    /// set the expiry, the GT answers 1 only if the clock ticked between the two, which no
    /// STEP between ops can settle. Its answer is let go only then (both NX answered 1);
    /// the expiries it leaves differ by that millisecond, compared by compare_keys.
    Exec {
        gt_at: Option<usize>,
        expiry_last: bool,
    },
    No,
    /// [won, fence or pttl]: the second is a TTL when the first is 0.
    AttemptPttl,
    /// A bare TTL.
    Whole,
    /// [value, pttl].
    Second,
}

/// The fence counter's retention window a lock's attempts give: the first lock keeps its
/// counter forever, the others for a while.
fn retention(lock: usize) -> String {
    if lock == 0 { "0" } else { "600000" }.to_owned()
}

/// The lock keys' expiries as each lock's last winning ExclusiveLock transaction told them
/// to this store: what proves such a lock ours.
type Told = [Option<i64>; LOCKS.len()];

fn proof(told: &Told, lock: usize, proof: bool) -> String {
    match (proof, told[lock]) {
        (true, Some(at)) => at.to_string(),
        _ => String::new(),
    }
}

fn cmd(parts: &[&[u8]]) -> Cmd {
    let mut cmd = Cmd::new();
    for part in parts {
        cmd.arg(*part);
    }
    cmd
}

/// What an op sends, one command or a pipeline, and which numbers of each reply come from
/// the clock.
fn commands(op: &Op, told: &Told) -> Vec<(Cmd, Clocked)> {
    match op {
        Op::RefreshBatch { singles, pairs } => {
            let many = Op::RefreshMany {
                locks: singles.clone(),
            };
            let pairs = pairs.iter().map(|&(lock, token, value, ttl, proof)| {
                let one = Op::RefreshExclusive {
                    lock,
                    token,
                    value,
                    ttl,
                    proof,
                };
                command(&one, told)
            });
            let many = (!singles.is_empty()).then(|| command(&many, told));
            many.into_iter().chain(pairs).collect()
        }
        Op::AcquireTransaction {
            lock,
            token,
            value,
            ttl,
            keep,
        } => transaction(*lock, *token, *value, *ttl, *keep),
        _ => vec![command(op, told)],
    }
}

/// MULTI, SET NX PX, INCRBY 2, the counter kept (PERSIST, or PEXPIRE NX and GT), the lock
/// key's expiry for ExclusiveLock, EXEC: as proto/acquire.rs writes them.
fn transaction(
    lock: usize,
    token: usize,
    value: Option<usize>,
    ttl: u64,
    keep: bool,
) -> Vec<(Cmd, Clocked)> {
    let key = LOCKS[lock].as_bytes();
    let fence = fence_key(key);
    let stored = match value {
        Some(value) => format!("contents{value}"),
        None => TOKENS[token].to_owned(),
    };
    let ttl_ms = ttl.to_string();
    let mut queued = vec![
        cmd(&[
            b"SET",
            key,
            stored.as_bytes(),
            b"NX",
            b"PX",
            ttl_ms.as_bytes(),
        ]),
        cmd(&[b"INCRBY", &fence, b"2"]),
    ];
    let mut gt_at = None;
    match (keep, retention(lock).as_str()) {
        (false, _) => {}
        (true, "0") => queued.push(cmd(&[b"PERSIST", &fence])),
        (true, window) => {
            let window: u64 = window.parse().expect("a window");
            let pushed = (ttl + window + window / 4).to_string();
            queued.push(cmd(&[b"PEXPIRE", &fence, pushed.as_bytes(), b"NX"]));
            gt_at = Some(queued.len());
            queued.push(cmd(&[b"PEXPIRE", &fence, pushed.as_bytes(), b"GT"]));
        }
    }
    if value.is_some() {
        queued.push(cmd(&[b"PEXPIRETIME", key]));
    }
    let exec = Clocked::Exec {
        gt_at,
        expiry_last: value.is_some(),
    };
    let mut sent = vec![(cmd(&[b"MULTI"]), Clocked::No)];
    sent.extend(queued.into_iter().map(|queued| (queued, Clocked::No)));
    sent.push((cmd(&[b"EXEC"]), exec));
    sent
}

/// The command an op sends (built as lock.rs, release.rs, exclusive.rs, watched.rs and
/// store.rs build theirs), and which of its numbers come from the clock.
fn command(op: &Op, told: &Told) -> (Cmd, Clocked) {
    let key = |lock: usize| LOCKS[lock].as_bytes().to_vec();
    let token = |n: usize| TOKENS[n].to_owned();
    let chan = |lock: usize| String::from_utf8_lossy(&channel(&key(lock))).into_owned();
    match op {
        Op::Acquire {
            lock,
            token: t,
            ttl,
        } => (
            evalsha(
                &scripts::ACQUIRE,
                &[&key(*lock), &fence_key(&key(*lock))],
                &[token(*t), ttl.to_string(), retention(*lock)],
            ),
            Clocked::AttemptPttl,
        ),
        Op::AcquireExclusive {
            lock,
            value,
            token: t,
            ttl,
        } => (
            evalsha(
                &scripts::ACQUIRE,
                &[
                    &key(*lock),
                    &fence_key(&key(*lock)),
                    &owner_key(&key(*lock)),
                ],
                &[
                    format!("contents{value}"),
                    ttl.to_string(),
                    retention(*lock),
                    token(*t),
                ],
            ),
            Clocked::AttemptPttl,
        ),
        Op::AcquireQueued {
            lock,
            token: t,
            ttl,
            conn,
            score,
            company,
        } => (
            evalsha(
                &scripts::ACQUIRE_QUEUED,
                &[
                    &key(*lock),
                    &fence_key(&key(*lock)),
                    &queue_key(&key(*lock)),
                ],
                &[
                    token(*t),
                    ttl.to_string(),
                    retention(*lock),
                    format!("conn{conn}"),
                    score.to_string(),
                    if *company { "1" } else { "0" }.to_owned(),
                    "60000".to_owned(),
                ],
            ),
            Clocked::AttemptPttl,
        ),
        Op::AcquireFair {
            lock,
            token: t,
            ttl,
            member: m,
        } => (
            evalsha(
                &scripts::ACQUIRE_FAIR,
                &[
                    &key(*lock),
                    &fence_key(&key(*lock)),
                    &line_key(&key(*lock)),
                    &alive_key(&key(*lock)),
                ],
                &[
                    token(*t),
                    ttl.to_string(),
                    retention(*lock),
                    m.map(member).unwrap_or_default(),
                    "2000".to_owned(),
                    "60000".to_owned(),
                ],
            ),
            Clocked::AttemptPttl,
        ),
        Op::Release { lock, token: t } => (
            evalsha(&scripts::RELEASE, &[&key(*lock)], &[token(*t)]),
            Clocked::No,
        ),
        Op::ReleaseExclusive {
            lock,
            token: t,
            value,
            proof: p,
        } => (
            evalsha(
                &scripts::RELEASE,
                &[&owner_key(&key(*lock)), &key(*lock)],
                &[
                    token(*t),
                    format!("contents{value}"),
                    proof(told, *lock, *p),
                ],
            ),
            Clocked::No,
        ),
        Op::ReleaseWake {
            lock,
            token: t,
            own_waiters,
        } => (
            evalsha(
                &scripts::RELEASE_WAKE,
                &[&key(*lock), &queue_key(&key(*lock))],
                &[
                    token(*t),
                    chan(*lock),
                    if *own_waiters { "1" } else { "0" }.to_owned(),
                ],
            ),
            Clocked::No,
        ),
        Op::ReleaseFair { lock, token: t } => (
            evalsha(
                &scripts::RELEASE_FAIR,
                &[&key(*lock), &line_key(&key(*lock)), &alive_key(&key(*lock))],
                &[token(*t), chan(*lock)],
            ),
            Clocked::No,
        ),
        Op::Extend {
            lock,
            token: t,
            add,
        } => (
            evalsha(
                &scripts::EXTEND,
                &[&key(*lock), &fence_key(&key(*lock))],
                &[token(*t), add.to_string()],
            ),
            Clocked::Whole,
        ),
        Op::Refresh {
            lock,
            token: t,
            ttl,
        } => (
            evalsha(
                &scripts::REFRESH,
                &[&key(*lock), &fence_key(&key(*lock))],
                &[token(*t), ttl.to_string(), retention(*lock)],
            ),
            Clocked::No,
        ),
        Op::RefreshExclusive {
            lock,
            token: t,
            value,
            ttl,
            proof: p,
        } => (
            evalsha(
                &scripts::REFRESH,
                &[
                    &owner_key(&key(*lock)),
                    &key(*lock),
                    &fence_key(&key(*lock)),
                ],
                &[
                    token(*t),
                    ttl.to_string(),
                    format!("contents{value}"),
                    proof(told, *lock, *p),
                    retention(*lock),
                ],
            ),
            Clocked::No,
        ),
        Op::RefreshMany { locks } => {
            let mut keys: Vec<Vec<u8>> = locks.iter().map(|(lock, _, _)| key(*lock)).collect();
            keys.extend(locks.iter().map(|(lock, _, _)| fence_key(&key(*lock))));
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut args: Vec<String> = locks.iter().map(|(_, t, _)| token(*t)).collect();
            args.extend(locks.iter().map(|(_, _, ttl)| ttl.to_string()));
            args.extend(locks.iter().map(|(lock, _, _)| retention(*lock)));
            (evalsha(&scripts::REFRESH_MANY, &keys, &args), Clocked::No)
        }
        Op::Handoff {
            lock,
            ours,
            theirs,
            ttl,
            fence,
            upkeep,
        } => {
            let mut args = vec![
                token(*ours),
                format!("{}x", token(*theirs)),
                ttl.to_string(),
                fence.to_string(),
            ];
            match upkeep {
                0 => {}
                1 => args.push("kept".to_owned()),
                _ => args.push("600000".to_owned()),
            }
            (
                evalsha(
                    &scripts::HANDOFF,
                    &[&key(*lock), &fence_key(&key(*lock))],
                    &args,
                ),
                Clocked::No,
            )
        }
        Op::FencedSet { value, fence } => (
            evalsha(
                &scripts::FENCED_SET,
                &[RESOURCE.as_bytes()],
                &[format!("v{value}"), format!("{fence:015}")],
            ),
            Clocked::No,
        ),
        Op::Exists { lock } => (cmd(&[b"EXISTS", &key(*lock)]), Clocked::No),
        Op::Pttl { lock } => (cmd(&[b"PTTL", &key(*lock)]), Clocked::Whole),
        Op::RefreshBatch { .. } | Op::AcquireTransaction { .. } => {
            unreachable!("a pipeline: see commands()")
        }
        Op::Inspect { lock } => (
            evalsha(&scripts::INSPECT, &[&key(*lock)], &[]),
            Clocked::Second,
        ),
        Op::Enqueue { lock, conn, score } => (
            evalsha(
                &scripts::ENQUEUE,
                &[&queue_key(&key(*lock)), &key(*lock)],
                &[format!("conn{conn}"), score.to_string(), "60000".to_owned()],
            ),
            Clocked::No,
        ),
        Op::WakeNext { lock } => (
            evalsha(
                &scripts::WAKE_NEXT,
                &[&queue_key(&key(*lock))],
                &[chan(*lock)],
            ),
            Clocked::No,
        ),
        Op::LeaveFair { lock, member: m } => (
            evalsha(
                &scripts::LEAVE_FAIR,
                &[&key(*lock), &line_key(&key(*lock)), &alive_key(&key(*lock))],
                &[member(*m), chan(*lock)],
            ),
            Clocked::No,
        ),
        Op::Spoil { lock, how } => {
            let mut cmd = redis::cmd("SET");
            match how {
                0 => cmd.arg(fence_key(&key(*lock))).arg("not a number"),
                1 => cmd.arg(fence_key(&key(*lock))).arg("999999999999998"),
                2 => cmd.arg(fence_key(&key(*lock))).arg("7"),
                4 => {
                    let mut pexpire = redis::cmd("PEXPIRE");
                    pexpire.arg(fence_key(&key(*lock))).arg(100_000);
                    return (pexpire, Clocked::No);
                }
                _ => {
                    let mut hset = redis::cmd("HSET");
                    hset.arg(key(*lock)).arg("f").arg("v");
                    return (hset, Clocked::No);
                }
            };
            (cmd, Clocked::No)
        }
    }
}

fn close(a: i64, b: i64) -> bool {
    (a - b).abs() <= TOLERANCE_MS
}

/// Equal replies, errors word for word (where in which script included).
fn same(real: &Value, memory: &Value, clocked: Clocked) -> bool {
    match (real, memory, clocked) {
        (Value::Array(a), Value::Array(b), Clocked::Exec { gt_at, expiry_last })
            if a.len() == b.len() =>
        {
            let nx_set = |replies: &[Value], n: usize| {
                n.checked_sub(1)
                    .is_some_and(|nx| replies.get(nx) == Some(&Value::Int(1)))
            };
            a.iter().zip(b).enumerate().all(|(n, (x, y))| {
                let last = n + 1 == a.len();
                match (x, y) {
                    _ if gt_at == Some(n) && nx_set(a, n) && nx_set(b, n) => true,
                    (Value::Int(x), Value::Int(y)) if expiry_last && last => close(*x, *y),
                    _ => x == y,
                }
            })
        }
        (Value::Int(a), Value::Int(b), Clocked::Whole) => close(*a, *b),
        (Value::Array(a), Value::Array(b), Clocked::AttemptPttl)
            if a.len() == 2 && b.len() == 2 =>
        {
            match (&a[..], &b[..]) {
                ([Value::Int(0), Value::Int(x)], [Value::Int(0), Value::Int(y)]) => close(*x, *y),
                _ => a == b,
            }
        }
        (Value::Array(a), Value::Array(b), Clocked::Second) if a.len() == 2 && b.len() == 2 => {
            a[0] == b[0]
                && matches!((&a[1], &b[1]), (Value::Int(x), Value::Int(y)) if close(*x, *y))
        }
        _ => real == memory,
    }
}

struct Pair {
    real: MultiplexedConnection,
    /// The memory:// keyspace's name.
    memory: String,
    /// What ExclusiveLock's transactions told each store: (real, memory).
    told: (Told, Told),
}

impl Pair {
    async fn new(server: &RedisServer, name: &str) -> Self {
        let client = redis::Client::open(server.url()).expect("client");
        let mut pair = Pair {
            real: client
                .get_multiplexed_async_connection_with_config(
                    &AsyncConnectionConfig::new().set_response_timeout(Some(ANSWER_WITHIN)),
                )
                .await
                .expect("connection"),
            memory: name.to_owned(),
            told: ([None; LOCKS.len()], [None; LOCKS.len()]),
        };
        for source in scripts::ALL_SOURCES {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(source);
            let (real, memory) = pair.both(&load).await;
            assert_eq!(real, memory, "SCRIPT LOAD answers the same SHA-1");
        }
        pair
    }

    async fn both(&mut self, cmd: &Cmd) -> (Value, Value) {
        let real = self
            .real
            .req_packed_command(cmd)
            .await
            .expect("redis answers");
        let memory = memory_command(&self.memory, &args_of(cmd));
        (real, memory)
    }

    async fn send(&mut self, op: &Op) -> Result<(), String> {
        tokio::time::sleep(STEP).await;
        let sent = commands(op, &self.told.0);
        let real = run(&mut self.real, &sent).await;
        let memory = run_memory(&self.memory, &commands(op, &self.told.1));
        for ((real, memory), (_, clocked)) in real.iter().zip(&memory).zip(&sent) {
            if !same(real, memory, *clocked) {
                return Err(format!("{op:?}:\n  redis:  {real:?}\n  memory: {memory:?}"));
            }
        }
        if let Op::AcquireTransaction {
            lock,
            value: Some(_),
            ..
        } = op
        {
            for (told, replies) in [(&mut self.told.0, &real), (&mut self.told.1, &memory)] {
                if let Some(at) = replies.last().and_then(set_at) {
                    told[*lock] = Some(at);
                }
            }
        }
        Ok(())
    }

    /// Every key the ops touch, read back from both.
    async fn compare_keys(&mut self) -> Result<(), String> {
        let mut keys: Vec<Vec<u8>> = vec![RESOURCE.as_bytes().to_vec()];
        for lock in LOCKS {
            let lock = lock.as_bytes();
            keys.extend([
                lock.to_vec(),
                fence_key(lock),
                owner_key(lock),
                queue_key(lock),
                line_key(lock),
                alive_key(lock),
            ]);
        }
        for key in keys {
            let show = String::from_utf8_lossy(&key).into_owned();
            let (real, memory) = self.both(redis::cmd("TYPE").arg(&key)).await;
            if real != memory {
                return Err(format!("TYPE {show}: {real:?} vs {memory:?}"));
            }
            let (real, memory) = self.both(redis::cmd("PTTL").arg(&key)).await;
            if !same(&real, &memory, Clocked::Whole) {
                return Err(format!("PTTL {show}: {real:?} vs {memory:?}"));
            }
            let reads: Vec<(Cmd, bool)> = match real {
                Value::SimpleString(ref kind) if kind == "string" => {
                    vec![(redis::cmd("GET").arg(&key).clone(), true)]
                }
                Value::SimpleString(ref kind) if kind == "hash" => vec![
                    (redis::cmd("HGET").arg(&key).arg("value").clone(), true),
                    (redis::cmd("HGET").arg(&key).arg("fence").clone(), true),
                ],
                Value::SimpleString(ref kind) if kind == "zset" => {
                    // Scores of the fair line come from the clock: only the order counts.
                    let scores_exact = LOCKS.iter().any(|lock| queue_key(lock.as_bytes()) == key);
                    vec![
                        (redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).clone(), true),
                        (
                            redis::cmd("ZRANGE")
                                .arg(&key)
                                .arg(0)
                                .arg(-1)
                                .arg("WITHSCORES")
                                .clone(),
                            scores_exact,
                        ),
                    ]
                }
                _ => Vec::new(),
            };
            for (read, exact) in reads {
                let (real, memory) = self.both(&read).await;
                if exact && real != memory {
                    return Err(format!("{read:?} on {show}: {real:?} vs {memory:?}"));
                }
            }
        }
        Ok(())
    }

    async fn reset(&mut self) {
        self.told = ([None; LOCKS.len()], [None; LOCKS.len()]);
        let (real, memory) = self.both(&redis::cmd("FLUSHALL")).await;
        assert_eq!(real, memory);
    }
}

/// Sends one command, or several as one pipeline.
async fn run<C: ConnectionLike>(con: &mut C, sent: &[(Cmd, Clocked)]) -> Vec<Value> {
    if let [(one, _)] = sent {
        return vec![con.req_packed_command(one).await.expect("an answer")];
    }
    let mut pipe = redis::pipe();
    for (cmd, _) in sent {
        pipe.add_command(cmd.clone());
    }
    if sent.is_empty() {
        return Vec::new();
    }
    con.req_packed_commands(&pipe, 0, sent.len())
        .await
        .expect("answers")
}

/// What `run` gets from Redis, from the keyspace `name`: a transaction's commands run as
/// one step at its EXEC, each answered QUEUED before, as Redis answers them.
fn run_memory(name: &str, sent: &[(Cmd, Clocked)]) -> Vec<Value> {
    let mut replies = Vec::with_capacity(sent.len());
    let mut queued: Option<Vec<Vec<&[u8]>>> = None;
    for (cmd, _) in sent {
        let args = args_of(cmd);
        let word = args.first().map(|w| w.to_ascii_uppercase());
        match (word.as_deref(), queued.as_mut()) {
            (Some(b"MULTI"), None) => {
                queued = Some(Vec::new());
                replies.push(Value::Okay);
            }
            (Some(b"EXEC"), Some(commands)) => {
                replies.push(Value::Array(memory_transaction(name, commands)));
                queued = None;
            }
            (_, Some(commands)) => {
                commands.push(args);
                replies.push(Value::SimpleString("QUEUED".into()));
            }
            (_, None) => replies.push(memory_command(name, &args)),
        }
    }
    replies
}

/// The lock key's expiry an EXEC of a transaction that set it tells.
fn set_at(exec: &Value) -> Option<i64> {
    match exec {
        Value::Array(items) => match (items.first(), items.last()) {
            (Some(Value::Okay), Some(Value::Int(at))) => Some(*at),
            (Some(Value::SimpleString(ok)), Some(Value::Int(at))) if ok == "OK" => Some(*at),
            _ => None,
        },
        _ => None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn random_sequences_of_script_calls_get_the_same_replies_and_leave_the_same_keys() {
    let server = RedisServer::start();
    let runtime = runtime();
    let pair =
        std::cell::RefCell::new(runtime.block_on(Pair::new(&server, "equivalence-proptest")));
    let cases = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..40), |ops| {
        cases.fetch_add(1, Ordering::Relaxed);
        let mut pair = pair.borrow_mut();
        let outcome = runtime.block_on(async {
            pair.reset().await;
            for op in &ops {
                pair.send(op).await?;
            }
            pair.compare_keys().await
        });
        prop_assert!(outcome.is_ok(), "{}", outcome.err().unwrap_or_default());
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    assert!(cases.load(Ordering::Relaxed) >= 96);
}

/// A counter drawn and refreshed with the same TTL is pushed by both stores, and a
/// transaction's `PEXPIRE GT` after it then leaves both where the push put them. Sent
/// back to back, a store that ran the first two in one millisecond read the counter's TTL
/// exactly at the line and did not push; the transaction then gave it 760 s against the
/// other's 780 s. Sent without STEP, this failed in each of 5 runs.
#[test]
fn a_counter_refreshed_right_after_its_draw_is_pushed_by_both() {
    use Op::*;
    let server = RedisServer::start();
    let runtime = runtime();
    let script = [
        Acquire {
            lock: 1,
            token: 0,
            ttl: 30_000,
        },
        RefreshMany {
            locks: vec![(1, 0, 30_000)],
        },
        AcquireTransaction {
            lock: 1,
            token: 1,
            value: Some(0),
            ttl: 10_000,
            keep: true,
        },
    ];
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-refreshed").await;
        for round in 0..20 {
            pair.reset().await;
            for op in &script {
                pair.send(op).await.unwrap_or_else(|diff| panic!("{diff}"));
            }
            pair.compare_keys()
                .await
                .unwrap_or_else(|diff| panic!("round {round}: {diff}"));
            let (real, _) = pair
                .both(redis::cmd("PTTL").arg(fence_key(LOCKS[1].as_bytes())))
                .await;
            assert!(
                matches!(real, Value::Int(left) if left > 770_000),
                "round {round}: the refresh pushed the counter to 780 s: {real:?}"
            );
        }
    });
}

/// The proptest's sequence that failed with `PTTL {tag}\xfffence\xfflock:{tag}:b:
/// int(769247) vs int(789246)` (see the test above for why), replayed as it was drawn. Sent
/// without STEP, it failed within three rounds in each of 5 runs, either store ahead.
#[test]
fn the_sequence_that_parted_the_counters_leaves_the_same_keys() {
    use Op::*;
    let server = RedisServer::start();
    let runtime = runtime();
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-replay").await;
        for round in 0..10 {
            pair.reset().await;
            let script = [
                Refresh {
                    lock: 0,
                    token: 0,
                    ttl: 30000,
                },
                AcquireQueued {
                    lock: 0,
                    token: 1,
                    ttl: 30000,
                    conn: 2,
                    score: 3,
                    company: true,
                },
                Acquire {
                    lock: 1,
                    token: 0,
                    ttl: 30000,
                },
                RefreshBatch {
                    singles: vec![(0, 2, 30000), (1, 0, 30000)],
                    pairs: vec![],
                },
                Refresh {
                    lock: 0,
                    token: 2,
                    ttl: 59399,
                },
                RefreshMany {
                    locks: vec![(1, 2, 30000), (0, 2, 2315), (0, 2, 30000)],
                },
                Extend {
                    lock: 0,
                    token: 0,
                    add: 4128,
                },
                Handoff {
                    lock: 1,
                    ours: 2,
                    theirs: 0,
                    ttl: 13476,
                    fence: 0,
                    upkeep: 0,
                },
                AcquireTransaction {
                    lock: 0,
                    token: 0,
                    value: Some(0),
                    ttl: 30000,
                    keep: false,
                },
                AcquireTransaction {
                    lock: 0,
                    token: 1,
                    value: Some(0),
                    ttl: 8987,
                    keep: false,
                },
                Refresh {
                    lock: 0,
                    token: 1,
                    ttl: 10000,
                },
                RefreshMany {
                    locks: vec![(1, 0, 10992)],
                },
                Release { lock: 1, token: 1 },
                AcquireTransaction {
                    lock: 1,
                    token: 1,
                    value: Some(0),
                    ttl: 10000,
                    keep: true,
                },
                WakeNext { lock: 1 },
                ReleaseFair { lock: 1, token: 1 },
                RefreshExclusive {
                    lock: 0,
                    token: 2,
                    value: 1,
                    ttl: 59593,
                    proof: false,
                },
                Release { lock: 1, token: 2 },
                AcquireFair {
                    lock: 1,
                    token: 2,
                    ttl: 42437,
                    member: Some(2),
                },
                AcquireExclusive {
                    lock: 1,
                    value: 1,
                    token: 1,
                    ttl: 15431,
                },
                Extend {
                    lock: 0,
                    token: 1,
                    add: 1650,
                },
                WakeNext { lock: 1 },
                Acquire {
                    lock: 0,
                    token: 0,
                    ttl: 59138,
                },
                Pttl { lock: 1 },
                Acquire {
                    lock: 1,
                    token: 0,
                    ttl: 10000,
                },
                Acquire {
                    lock: 1,
                    token: 2,
                    ttl: 30000,
                },
                AcquireExclusive {
                    lock: 0,
                    value: 1,
                    token: 1,
                    ttl: 10000,
                },
                Release { lock: 0, token: 2 },
                AcquireExclusive {
                    lock: 0,
                    value: 1,
                    token: 1,
                    ttl: 7224,
                },
                Extend {
                    lock: 1,
                    token: 0,
                    add: 9252,
                },
                ReleaseWake {
                    lock: 1,
                    token: 1,
                    own_waiters: false,
                },
                AcquireTransaction {
                    lock: 1,
                    token: 1,
                    value: Some(0),
                    ttl: 41081,
                    keep: false,
                },
                ReleaseExclusive {
                    lock: 0,
                    token: 1,
                    value: 0,
                    proof: true,
                },
                Extend {
                    lock: 0,
                    token: 0,
                    add: 10913,
                },
            ];
            for op in &script {
                pair.send(op).await.unwrap_or_else(|diff| panic!("{diff}"));
            }
            pair.compare_keys()
                .await
                .unwrap_or_else(|diff| panic!("round {round}: {diff}"));
        }
    });
}

/// One sequence through every script, with the wake-ups and fence paths each takes.
#[test]
fn every_script_answers_as_redis_does() {
    use Op::*;
    let server = RedisServer::start();
    let runtime = runtime();
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-fixed").await;
        let script = [
            Acquire {
                lock: 0,
                token: 0,
                ttl: 10_000,
            },
            Acquire {
                lock: 0,
                token: 1,
                ttl: 10_000,
            },
            Acquire {
                lock: 0,
                token: 0,
                ttl: 10_000,
            },
            Extend {
                lock: 0,
                token: 0,
                add: 5_000,
            },
            Extend {
                lock: 0,
                token: 1,
                add: 5_000,
            },
            Refresh {
                lock: 0,
                token: 0,
                ttl: 20_000,
            },
            Inspect { lock: 0 },
            Enqueue {
                lock: 0,
                conn: 1,
                score: 3,
            },
            AcquireQueued {
                lock: 0,
                token: 2,
                ttl: 10_000,
                conn: 2,
                score: 4,
                company: false,
            },
            Handoff {
                lock: 0,
                ours: 0,
                theirs: 1,
                ttl: 10_000,
                fence: 1,
                upkeep: 2,
            },
            Handoff {
                lock: 0,
                ours: 0,
                theirs: 1,
                ttl: 10_000,
                fence: 1,
                upkeep: 2,
            },
            ReleaseWake {
                lock: 0,
                token: 0,
                own_waiters: false,
            },
            ReleaseWake {
                lock: 0,
                token: 1,
                own_waiters: false,
            },
            WakeNext { lock: 0 },
            WakeNext { lock: 0 },
            AcquireExclusive {
                lock: 1,
                value: 0,
                token: 0,
                ttl: 10_000,
            },
            AcquireExclusive {
                lock: 1,
                value: 0,
                token: 0,
                ttl: 10_000,
            },
            AcquireExclusive {
                lock: 1,
                value: 1,
                token: 1,
                ttl: 10_000,
            },
            RefreshExclusive {
                lock: 1,
                token: 0,
                value: 0,
                ttl: 30_000,
                proof: false,
            },
            RefreshExclusive {
                lock: 1,
                token: 0,
                value: 1,
                ttl: 30_000,
                proof: false,
            },
            ReleaseExclusive {
                lock: 1,
                token: 0,
                value: 0,
                proof: false,
            },
            AcquireFair {
                lock: 0,
                token: 0,
                ttl: 10_000,
                member: None,
            },
            AcquireFair {
                lock: 0,
                token: 1,
                ttl: 10_000,
                member: Some(1),
            },
            AcquireFair {
                lock: 0,
                token: 2,
                ttl: 10_000,
                member: Some(2),
            },
            ReleaseFair { lock: 0, token: 0 },
            AcquireFair {
                lock: 0,
                token: 2,
                ttl: 10_000,
                member: Some(2),
            },
            LeaveFair { lock: 0, member: 1 },
            AcquireFair {
                lock: 0,
                token: 2,
                ttl: 10_000,
                member: Some(2),
            },
            RefreshMany {
                locks: vec![(0, 2, 15_000), (1, 0, 15_000), (1, 1, 15_000)],
            },
            FencedSet { value: 0, fence: 5 },
            FencedSet { value: 1, fence: 3 },
            FencedSet { value: 2, fence: 5 },
            Spoil { lock: 0, how: 1 },
            Release { lock: 0, token: 2 },
            Acquire {
                lock: 0,
                token: 0,
                ttl: 10_000,
            },
            Spoil { lock: 0, how: 0 },
            AcquireQueued {
                lock: 0,
                token: 0,
                ttl: 10_000,
                conn: 0,
                score: 1,
                company: true,
            },
            Spoil { lock: 1, how: 3 },
            Acquire {
                lock: 1,
                token: 0,
                ttl: 10_000,
            },
            Release { lock: 1, token: 0 },
            RefreshMany {
                locks: vec![(1, 0, 15_000)],
            },
        ];
        for op in &script {
            if let Err(diff) = pair.send(op).await {
                panic!("{diff}");
            }
        }
        if let Err(diff) = pair.compare_keys().await {
            panic!("{diff}");
        }
    });
}

/// The first attempt as a transaction, in both layouts, and what follows one: the proof an
/// ExclusiveLock's transaction keeps (its lock key's expiry) for refresh and release, the
/// watchdog's batch, the script recognising a plain transaction's lock, isLocked and the
/// holder's TTL, and a transaction on a spoilt counter or lock key.
#[test]
fn the_transaction_form_and_what_follows_it_answer_as_redis_does() {
    use Op::*;
    let server = RedisServer::start();
    let runtime = runtime();
    let exclusive = |token, value, keep| AcquireTransaction {
        lock: 1,
        token,
        value: Some(value),
        ttl: 10_000,
        keep,
    };
    let plain = |lock, token, keep| AcquireTransaction {
        lock,
        token,
        value: None,
        ttl: 10_000,
        keep,
    };
    let acquire = |lock, token| Acquire {
        lock,
        token,
        ttl: 10_000,
    };
    let release = |token, value, proof| ReleaseExclusive {
        lock: 1,
        token,
        value,
        proof,
    };
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-transaction").await;
        let script = [
            exclusive(0, 0, true),
            exclusive(1, 0, true),
            Exists { lock: 1 },
            Pttl { lock: 1 },
            // Without the expiry it was told, the lock is not provably ours.
            release(0, 0, false),
            RefreshExclusive {
                lock: 1,
                token: 0,
                value: 0,
                ttl: 20_000,
                proof: true,
            },
            plain(0, 0, true),
            // A counter kept forever loses an expiry another client gave it, to the
            // transaction and to the script alike.
            Spoil { lock: 0, how: 4 },
            RefreshBatch {
                singles: vec![(0, 0, 15_000), (0, 1, 15_000)],
                pairs: vec![(1, 0, 0, 15_000, true), (1, 1, 0, 15_000, false)],
            },
            release(0, 0, true),
            Exists { lock: 1 },
            exclusive(2, 1, false),
            release(2, 1, true),
            plain(0, 1, true),
            Spoil { lock: 0, how: 4 },
            plain(0, 1, false),
            acquire(0, 0),
            Pttl { lock: 0 },
            Release { lock: 0, token: 0 },
            // Set, but no fence: taken back with its proof, or by the script that finds
            // its own token.
            Spoil { lock: 1, how: 0 },
            exclusive(0, 0, true),
            release(0, 0, true),
            Spoil { lock: 1, how: 1 },
            plain(1, 0, true),
            acquire(1, 0),
            Exists { lock: 1 },
            Spoil { lock: 1, how: 3 },
            plain(1, 1, true),
            Exists { lock: 1 },
            Pttl { lock: 1 },
        ];
        for op in &script {
            pair.send(op).await.unwrap_or_else(|diff| panic!("{diff}"));
        }
        pair.compare_keys()
            .await
            .unwrap_or_else(|diff| panic!("{diff}"));
    });
}

/// Expiry on both sides: a lock left to its TTL is free again for the next acquire.
#[test]
fn an_expired_lock_is_free_on_both() {
    use Op::*;
    let server = RedisServer::start();
    let runtime = runtime();
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-expiry").await;
        for op in [
            Acquire {
                lock: 0,
                token: 0,
                ttl: 30,
            },
            AcquireExclusive {
                lock: 1,
                value: 0,
                token: 0,
                ttl: 30,
            },
        ] {
            pair.send(&op).await.unwrap_or_else(|diff| panic!("{diff}"));
        }
        tokio::time::sleep(Duration::from_millis(120)).await;
        for op in [
            Inspect { lock: 0 },
            Acquire {
                lock: 0,
                token: 1,
                ttl: 10_000,
            },
            AcquireExclusive {
                lock: 1,
                value: 1,
                token: 1,
                ttl: 10_000,
            },
            Release { lock: 0, token: 0 },
        ] {
            pair.send(&op).await.unwrap_or_else(|diff| panic!("{diff}"));
        }
        pair.compare_keys()
            .await
            .unwrap_or_else(|diff| panic!("{diff}"));
    });
}

/// Plain commands and Lua conversions, sent as they are to both: replies equal word for word.
#[test]
fn commands_and_lua_conversions_answer_as_redis_does() {
    let server = RedisServer::start();
    let runtime = runtime();
    let commands: &[&[&str]] = &[
        &["SET", "s", "v", "NX", "PX", "10000"],
        &["SET", "s", "w", "NX"],
        &["SET", "s", "w", "XX", "GET"],
        &["SET", "s", "x", "PX", "0"],
        &["SET", "s", "x", "PX", "abc"],
        &["SET", "s", "x", "NX", "XX"],
        &["SET", "s", "x", "KEEPTTL", "PX", "5"],
        &["SET", "s", "y", "KEEPTTL"],
        &["GET", "s"],
        &["GET", "missing"],
        &["GET"],
        &["INCR", "n"],
        &["INCRBY", "n", "41"],
        &["INCRBY", "n", "x"],
        &["INCRBY", "s", "1"],
        &["SET", "big", "9223372036854775807"],
        &["INCR", "big"],
        &["SET", "lead", "01"],
        &["INCR", "lead"],
        &["HSET", "h", "a", "1", "b", "2"],
        &["HSET", "h", "a", "3"],
        &["HSET", "h", "a"],
        &["HGET", "h", "a"],
        &["HGET", "h", "zz"],
        &["HGET", "s", "a"],
        &["GET", "h"],
        &["INCR", "h"],
        &[
            "ZADD", "z", "1", "a", "2", "b", "2", "c", "0.1", "d", "1e17", "e",
        ],
        &["ZADD", "z", "NX", "5", "a", "6", "f"],
        &["ZADD", "z", "XX", "7", "a", "8", "g"],
        &["ZADD", "z", "GT", "CH", "1", "a", "9", "b"],
        &["ZADD", "z", "LT", "CH", "1", "a"],
        &["ZADD", "z", "NX", "XX", "1", "a"],
        &["ZADD", "z", "GT", "LT", "1", "a"],
        &["ZADD", "z", "x", "a"],
        &["ZADD", "z", "1"],
        &["ZADD", "z", "INCR", "2.5", "a"],
        &["ZADD", "s", "1", "a"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "z", "-2", "-1"],
        &["ZRANGE", "z", "1", "100", "REV"],
        &["ZRANGE", "z", "5", "2"],
        &["ZRANGE", "z", "a", "2"],
        &["ZRANGE", "missing", "0", "0"],
        &["ZSCORE", "z", "d"],
        &["ZSCORE", "z", "e"],
        &["ZSCORE", "z", "nobody"],
        &["ZREM", "z", "a", "nobody"],
        &["ZPOPMIN", "z"],
        &["ZPOPMIN", "z", "2"],
        &["ZPOPMIN", "z", "-1"],
        &["ZPOPMIN", "missing"],
        &["ZPOPMIN", "z", "100"],
        &["EXISTS", "z", "s", "s", "h"],
        &["PEXPIRE", "s", "100000"],
        &["PEXPIRE", "s", "1000", "NX"],
        &["PEXPIRE", "s", "1000", "GT"],
        &["PEXPIRE", "s", "1000", "LT"],
        &["PEXPIRE", "h", "1000", "XX"],
        &["PEXPIRE", "s", "1000", "NX", "XX"],
        &["PEXPIRE", "s", "x"],
        &["PEXPIRE", "missing", "100"],
        &["PEXPIRE", "h", "-1"],
        &["EXISTS", "h"],
        &["PTTL", "missing"],
        &["PEXPIRETIME", "missing"],
        &["PEXPIRETIME", "n"],
        &["DEL", "n", "missing", "s"],
        &["PUBLISH", "chan", "m"],
        &["SPUBLISH", "chan", "m"],
        &["NOSUCHCOMMAND", "a"],
        &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
        &["EVAL", "return 1", "-1"],
        &["EVAL", "return 1", "2", "a"],
        &[
            "EVAL",
            "return {true, false, 3.7, -3.7, 'x', {1, 2}, nil, 9}",
            "0",
        ],
        &["EVAL", "return {ok = 'FINE'}", "0"],
        &["EVAL", "return {err = 'MYCODE went wrong'}", "0"],
        &["EVAL", "return redis.error_reply('OOPS it broke')", "0"],
        &["EVAL", "return redis.error_reply('single')", "0"],
        &["EVAL", "return redis.error_reply('-ERR with dash')", "0"],
        &["EVAL", "return redis.status_reply('QUEUED')", "0"],
        &["EVAL", "return redis.call('SET', KEYS[1], 0.1)", "1", "f"],
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 1e9) return redis.call('GET', KEYS[1])",
            "1",
            "f",
        ],
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 1e17) return redis.call('GET', KEYS[1])",
            "1",
            "f",
        ],
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "missing"],
        // Not `return redis.call(...)`: Lua 5.1 drops the frame of a tail call to a Lua
        // function, so memory:// cannot say on which line such an error was raised.
        &[
            "EVAL",
            "local n = redis.call('INCR', KEYS[1]) return n",
            "1",
            "f",
        ],
        &["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "f"],
        &[
            "EVAL",
            "local r = redis.pcall('GET', KEYS[1]) return r.err",
            "1",
            "h",
        ],
        &["EVAL", "return type(redis.call('TIME')[1])", "0"],
        &[
            "EVAL",
            "return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')",
            "1",
            "z",
        ],
        &[
            "EVAL",
            "return KEYS[1] .. ARGV[1] .. #ARGV",
            "1",
            "k",
            "a",
            "b",
        ],
        &["EVAL", "return redis.sha1hex('abc')", "0"],
        &["EVAL", "return redis.replicate_commands()", "0"],
        &["EVAL", "\n\nreturn redis.call('GET', KEYS[1])", "1", "h"],
        &["EVAL", "return string.format('%d', 123456789012345)", "0"],
        &["EVAL", "return tonumber('12') + 1", "0"],
        &["EVAL", "return {1, {2, {3}}}", "0"],
        &["EVAL", "return 'bin\\255ary'", "0"],
        &["EVAL", "return nil + 1", "0"],
        &["EVAL", "return +", "0"],
        &["EVAL", "local x = {}\nx.y.z = 1", "0"],
        &["EVAL", "local r = redis.call() return r", "0"],
        &["EVAL", "local r = redis.call('GET', {}) return r", "0"],
        &[
            "EVAL",
            "local r = redis.call('SUBSCRIBE', 'x') return r",
            "0",
        ],
        &["EVAL", "error('boom')", "0"],
        &["EVAL", "error({err = 'XCODE y'})", "0"],
        &["EVAL", "local ok, e = pcall(error, 'z') return e", "0"],
        &["SCRIPT", "LOAD", "return 'x'"],
        &[
            "SCRIPT",
            "EXISTS",
            "e5e3d6b0b8a3c86d2ee8a6fe1bb3a8c1e1f81e6b",
        ],
    ];
    runtime.block_on(async {
        let mut pair = Pair::new(&server, "equivalence-commands").await;
        pair.reset().await;
        for args in commands {
            let mut cmd = Cmd::new();
            for arg in *args {
                cmd.arg(*arg);
            }
            let (real, memory) = pair.both(&cmd).await;
            assert_eq!(real, memory, "{args:?}");
        }
        pair.compare_keys()
            .await
            .unwrap_or_else(|diff| panic!("{diff}"));
    });
}
