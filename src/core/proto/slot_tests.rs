//! Every operation's keys in one hash slot, whatever the lock key looks like: Redis Cluster
//! refuses a script or a transaction whose keys span slots (CROSSSLOT), so a new script or
//! a new sibling key must not regress this. syncguard's exact layout (its index key named by
//! lockId) spans slots unless its prefix holds a hash tag, so a cluster uses the slot-safe
//! layout of `front/syncguard_slots.rs` there (checked in its tests); the last test here
//! pins the exact layout's split, the reason that layout exists.

use super::acquire::{AcquireAttempt, AttemptForm, Layout};
use super::extend::Extend;
use super::fence_raise::FenceRaise;
use super::fenced_set::FencedSet;
use super::queue::{Enqueue, LeaveLine, LeaveQueue, WakeNext};
use super::read::{Exists, Inspect, Pttl};
use super::refresh::{PairRefresh, Refresh, RefreshBatch};
use super::release::{FenceUpkeep, HandOver, Release, ReleaseKind};
use super::syncguard::{ExtendById, ReleaseById, SyncguardIsLocked, SyncguardLookup};
use super::{Op, Wire};
use crate::core::basics::keys::{self, slot};
use redis::Script;
use std::time::{Duration, Instant};

/// Lock keys of every shape the key scheme treats apart: no tag, a tag, an empty tag, a `}`
/// with no tag, a `{` never closed, bytes that are not UTF-8.
const LOCK_KEYS: &[&[u8]] = &[
    b"orders:42",
    b"{user:7}:profile",
    b"{}:empty-tag",
    b"a}b",
    b"open{brace",
    b"x{}y{z}",
    b"\xff\xfe{\x00}",
];

/// The keys each command of an operation names, in the order written.
#[derive(Default)]
struct Keys(Vec<Vec<Vec<u8>>>);

impl Wire for Keys {
    fn script(&mut self, _: &'static Script, keys: &[&[u8]], _: &[&[u8]]) {
        self.0.push(keys.iter().map(|key| key.to_vec()).collect());
    }

    /// The commands operations write, each naming its one key second; a command not listed
    /// here fails the audit until someone says which of its arguments are keys.
    fn command(&mut self, parts: &[&[u8]]) {
        let keys = match parts[0] {
            b"MULTI" | b"EXEC" => vec![],
            b"SET" | b"INCRBY" | b"PERSIST" | b"PEXPIRE" | b"PEXPIRETIME" | b"ZREM" | b"EXISTS"
            | b"PTTL" => vec![parts[1].to_vec()],
            other => panic!(
                "the audit does not know {}'s keys",
                String::from_utf8_lossy(other)
            ),
        };
        self.0.push(keys);
    }
}

/// Every key of every command `op` writes.
fn keys_of<O: Op>(op: &O) -> Vec<Vec<u8>> {
    let mut keys = Keys::default();
    op.encode(&mut keys);
    keys.0.into_iter().flatten().collect()
}

/// The slots `keys` fall in, each once.
fn slots(keys: &[Vec<u8>]) -> Vec<u16> {
    let mut slots: Vec<u16> = keys.iter().map(|key| slot(key)).collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

fn assert_one_slot(what: &str, lock_key: &[u8], keys: &[Vec<u8>]) {
    assert!(!keys.is_empty(), "{what} names no key");
    assert_eq!(
        slots(keys),
        vec![slot(lock_key)],
        "{what} on {:?} spans slots: {:?}",
        String::from_utf8_lossy(lock_key),
        keys.iter()
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect::<Vec<_>>()
    );
}

/// Every form of every layout of an acquire attempt.
fn attempts<'a>(key: &'a [u8], fence: &'a [u8], owner: &'a [u8]) -> Vec<AcquireAttempt<'a>> {
    let layouts = || {
        [
            Layout::Plain,
            Layout::Exclusive {
                owner_key: owner,
                contents: "{}",
            },
            Layout::Queued {
                queue_id: "q1",
                score: 7,
                company: true,
                lifetime: Duration::from_secs(1),
            },
            Layout::Fair {
                member: "m1",
                place: Duration::from_secs(1),
                lifetime: Duration::from_secs(1),
            },
            Layout::Ring { ring_id: "r1" },
        ]
    };
    let forms = [
        AttemptForm::Script,
        AttemptForm::Transaction,
        AttemptForm::Untried,
    ];
    let mut out = Vec::new();
    for form in forms {
        for (retention, keep_fences) in [(0, false), (0, true), (60_000, true)] {
            for layout in layouts() {
                out.push(AcquireAttempt {
                    lock_key: key,
                    fence_key: fence,
                    token: "token",
                    ttl: Duration::from_millis(500),
                    fence_retention_ms: retention,
                    keep_fences,
                    fences_known_kept: false,
                    layout,
                    form,
                    sent: Instant::now(),
                });
            }
        }
    }
    out
}

#[test]
fn every_acquire_form_keeps_its_keys_in_the_lock_keys_slot() {
    for &key in LOCK_KEYS {
        let (fence, owner) = (keys::fence_key(key), keys::owner_key(key));
        for attempt in attempts(key, &fence, &owner) {
            assert_one_slot("an acquire", key, &keys_of(&attempt));
        }
    }
}

#[test]
fn every_other_lock_operation_keeps_its_keys_in_the_lock_keys_slot() {
    let ms = Duration::from_millis;
    for &key in LOCK_KEYS {
        let (fence, owner) = (keys::fence_key(key), keys::owner_key(key));
        let release = |kind| {
            keys_of(&Release {
                lock_key: key,
                token: "t",
                kind,
            })
        };
        let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
            (
                "release (wake)",
                release(ReleaseKind::Wake { ours_wait: true }),
            ),
            ("release (fair)", release(ReleaseKind::Fair)),
            (
                "release (pair)",
                keys_of(&Release {
                    lock_key: &owner,
                    token: "t",
                    kind: ReleaseKind::Pair {
                        data_key: key,
                        contents: b"{}",
                        set_at: Some(1),
                    },
                }),
            ),
            ("late win", keys_of(&Release::late_win(key, "t", true))),
            (
                "release (grant)",
                keys_of(&super::ring::ReleaseGrant {
                    lock_key: key,
                    token: "t",
                    fence: 3,
                    last: 4,
                    grant: "u",
                    claim: ms(100),
                    id: "c1",
                    leave: false,
                    ours_wait: false,
                    fence_retention_ms: 0,
                    fences_known_kept: false,
                }),
            ),
            (
                "handover",
                keys_of(&HandOver {
                    lock_key: key,
                    token: "t",
                    fence: 3,
                    to: "u",
                    ttl: ms(100),
                    upkeep: FenceUpkeep::Margin,
                }),
            ),
            (
                "extend",
                keys_of(&Extend {
                    lock_key: key,
                    token: "t",
                    extra: ms(100),
                }),
            ),
            (
                "fence raise",
                keys_of(&FenceRaise {
                    fence_key: &fence,
                    fence: 3,
                    ttl: ms(100),
                    window_ms: Some(10),
                }),
            ),
            (
                "fenced set",
                keys_of(&FencedSet {
                    key,
                    value: "v",
                    fence: "1",
                }),
            ),
            (
                "enqueue",
                keys_of(&Enqueue {
                    lock_key: key,
                    id: "q",
                    score: 1,
                    lifetime: ms(100),
                }),
            ),
            ("wake next", keys_of(&WakeNext { lock_key: key })),
            (
                "leave line",
                keys_of(&LeaveLine {
                    lock_key: key,
                    member: "m",
                }),
            ),
            (
                "leave queue",
                keys_of(&LeaveQueue {
                    lock_key: key,
                    id: "q",
                }),
            ),
            ("exists", keys_of(&Exists { lock_key: key })),
            ("pttl", keys_of(&Pttl { lock_key: key })),
            ("inspect", keys_of(&Inspect { lock_key: key })),
        ];
        for (what, named) in cases {
            assert_one_slot(what, key, &named);
        }
    }
}

#[test]
fn a_release_announces_on_a_channel_of_the_lock_keys_slot() {
    for &key in LOCK_KEYS {
        assert_eq!(slot(&keys::released_channel(key)), slot(key));
        let grant = keys::grant_channel(key, "c1");
        assert_eq!(slot(&grant), slot(key));
        assert_eq!(
            keys::grant_of_channel(&grant),
            Some((key.to_vec(), "c1".to_owned()))
        );
    }
}

/// The wake scripts build a connection's wake channel from the lock's released channel (see
/// announce.lua's `wake_first`): `released` after the tag's `}` and separator becomes
/// `wake:<id>`. It must be the channel the connection subscribed (`keys::wake_channel`).
#[test]
fn a_wake_channel_is_the_released_channel_with_the_connection_in_it() {
    let mut keys_seen: Vec<&[u8]> = LOCK_KEYS.to_vec();
    keys_seen.extend([&b"{released}x"[..], b"released", b"a}b{c", b"{}released"]);
    for key in keys_seen {
        let released = keys::released_channel(key);
        let close = released.iter().position(|&b| b == b'}').unwrap_or(0) + 1;
        let mut built = released[..close + 1].to_vec();
        built.extend_from_slice(b"wake:c1");
        built.extend_from_slice(&released[close + 1 + "released".len()..]);
        let wake = keys::wake_channel(key, "c1");
        assert_eq!(built, wake, "{}", String::from_utf8_lossy(key));
        assert_eq!(slot(&wake), slot(key));
        assert_eq!(
            keys::wake_of_channel(&wake),
            Some((key.to_vec(), "c1".to_owned()))
        );
        assert_eq!(keys::grant_of_channel(&wake), None);
        assert_eq!(keys::wake_of_channel(&released), None);
    }
}

#[test]
fn each_refresh_of_a_batch_split_by_slot_stays_in_one_slot() {
    let pairs_owner: Vec<Vec<u8>> = LOCK_KEYS.iter().map(|key| keys::owner_key(key)).collect();
    let singles: Vec<Refresh<'_>> = LOCK_KEYS.iter().map(|&key| refresh(key, None)).collect();
    let pairs: Vec<Refresh<'_>> = LOCK_KEYS
        .iter()
        .zip(&pairs_owner)
        .map(|(&key, owner)| {
            refresh(
                owner,
                Some(PairRefresh {
                    data_key: key,
                    expected: b"{}",
                    set_at: None,
                }),
            )
        })
        .collect();
    let whole = RefreshBatch::new(&singles, &pairs);
    assert!(
        slots(&batch_keys(&whole)).len() > 1,
        "the audit's keys should span slots, or it proves nothing"
    );
    let split = RefreshBatch::by_slot(&singles, &pairs);
    for (slot_of_batch, batch) in split.batches() {
        let named = batch_keys(batch);
        assert!(!named.is_empty());
        assert_eq!(slots(&named), vec![*slot_of_batch]);
    }
}

fn refresh<'a>(key: &'a [u8], pair: Option<PairRefresh<'a>>) -> Refresh<'a> {
    Refresh {
        key,
        token: b"t",
        ttl_ms: 500,
        fence_retention_ms: 0,
        pair,
    }
}

/// The keys a batch's commands declare (EVALSHA sha numkeys key...).
fn batch_keys(batch: &RefreshBatch) -> Vec<Vec<u8>> {
    batch
        .commands()
        .iter()
        .flat_map(|cmd| {
            let args: Vec<Vec<u8>> = cmd
                .args_iter()
                .map(|arg| match arg {
                    redis::Arg::Simple(bytes) => bytes.to_vec(),
                    _ => vec![],
                })
                .collect();
            let count: usize = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|count| count.parse().ok())
                .unwrap_or(0);
            args.into_iter().skip(3).take(count).collect::<Vec<_>>()
        })
        .collect()
}

/// syncguard's keys (`<prefix><key>`, `<prefix>id:<lockId>`, `<prefix>fence:<key>`) span
/// slots unless its prefix carries a hash tag: why a cluster with an untagged prefix takes
/// the slot-safe layout (`front/syncguard_slots.rs`).
#[test]
fn syncguard_stays_in_one_slot_only_under_a_tagged_prefix() {
    let spans = |prefix: &str| {
        let lock_key = format!("{prefix}job").into_bytes();
        let index_key = format!("{prefix}id:AAAAAAAAAAAAAAAAAAAAAA").into_bytes();
        let fence_key = format!("{prefix}fence:job").into_bytes();
        let acquire = AcquireAttempt {
            lock_key: &lock_key,
            fence_key: &fence_key,
            token: "AAAAAAAAAAAAAAAAAAAAAA",
            ttl: Duration::from_secs(1),
            fence_retention_ms: 0,
            keep_fences: false,
            fences_known_kept: false,
            layout: Layout::Syncguard {
                index_key: &index_key,
                stored_key: &lock_key,
                user_key: "job",
            },
            form: AttemptForm::Script,
            sent: Instant::now(),
        };
        let named = [
            keys_of(&acquire),
            keys_of(&ReleaseById {
                index_key: &index_key,
                lock_id: "AAAAAAAAAAAAAAAAAAAAAA",
                expect: Some(&lock_key),
                ours_wait: false,
            }),
            keys_of(&ExtendById {
                index_key: &index_key,
                lock_id: "AAAAAAAAAAAAAAAAAAAAAA",
                ttl: Duration::from_secs(1),
            }),
            keys_of(&SyncguardIsLocked {
                lock_key: &lock_key,
                key_prefix: prefix.as_bytes(),
                cleanup: true,
            }),
            keys_of(&SyncguardLookup::ById {
                index_key: &index_key,
                lock_id: "AAAAAAAAAAAAAAAAAAAAAA",
            }),
        ]
        .concat();
        slots(&named).len() > 1
    };
    assert!(spans("syncguard:"));
    assert!(!spans("{app}:syncguard:"));
}
