//! The exact bytes each operation sends, on both transports: the JS-thread socket's RESP and
//! the runtime's command (recorded from what the redis crate would write). A change here is a
//! change of what Redis is sent, never a refactoring.

use super::extend::Extend;
use super::fence_raise::FenceRaise;
use super::fenced_set::FencedSet;
use super::missed::CountMissed;
use super::read::{Exists, Pttl};
use super::release::{FenceUpkeep, HandOver, Release, ReleaseKind};
use super::{scripts, Op, Request};
use redis::Value;
use std::time::Duration;

/// RESP written by hand, apart from the code under test.
pub(super) fn resp(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend(format!("${}\r\n", part.len()).bytes());
        out.extend(*part);
        out.extend(b"\r\n");
    }
    out
}

pub(super) fn evalsha(script: &redis::Script, keys: &[&[u8]], args: &[&[u8]]) -> Vec<u8> {
    let count = keys.len().to_string();
    let mut parts = vec![
        b"EVALSHA".as_slice(),
        script.get_hash().as_bytes(),
        count.as_bytes(),
    ];
    parts.extend(keys.iter().chain(args));
    resp(&parts)
}

/// What each transport sends for `op`: both must be `want`.
pub(super) fn assert_sends<O: Op>(op: &O, want: &[u8]) {
    let mut socket = Vec::new();
    op.encode(&mut socket);
    assert_eq!(
        String::from_utf8_lossy(&socket),
        String::from_utf8_lossy(want)
    );
    let runtime = match Request::of(op) {
        Request::Script { evalsha, .. } => evalsha.get_packed_command(),
        Request::Command(cmd) => cmd.get_packed_command(),
    };
    assert_eq!(
        String::from_utf8_lossy(&runtime),
        String::from_utf8_lossy(want)
    );
}

const WAKE_RELEASE: [&[u8]; 2] = [b"lock:k", b"{lock:k}\xffwaiting"];
const FENCED: [&[u8]; 2] = [b"lock:k", b"{lock:k}\xfffence"];

#[test]
fn release_with_no_local_waiter_is_release_wake_with_zero() {
    let release = Release {
        lock_key: b"lock:k",
        token: "tok",
        kind: ReleaseKind::Wake { ours_wait: false },
    };
    let want = evalsha(
        &scripts::RELEASE_WAKE,
        &WAKE_RELEASE,
        &[b"tok", b"{lock:k}:released", b"0"],
    );
    assert_sends(&release, &want);
    let ours = Release {
        kind: ReleaseKind::Wake { ours_wait: true },
        ..release
    };
    let want = evalsha(
        &scripts::RELEASE_WAKE,
        &WAKE_RELEASE,
        &[b"tok", b"{lock:k}:released", b"1"],
    );
    assert_sends(&ours, &want);
    assert_eq!(ours.decode(Value::Int(1)).ok(), Some(true));
    assert_eq!(ours.decode(Value::Int(0)).ok(), Some(false));
}

/// One behaviour for both transports (the runtime freed with release.lua and woke nobody,
/// the JS thread with release_wake): a lock won late is released as any release is, and
/// wakes the next queued connection, which else would wait for its poll.
#[test]
fn a_late_win_is_freed_as_a_release_that_wakes_the_queue() {
    let want = evalsha(
        &scripts::RELEASE_WAKE,
        &WAKE_RELEASE,
        &[b"tok", b"{lock:k}:released", b"0"],
    );
    assert_sends(&Release::late_win(b"lock:k", "tok", false), &want);
    let fair = evalsha(
        &scripts::RELEASE_FAIR,
        &[b"lock:k", b"{lock:k}\xffline", b"{lock:k}\xffalive"],
        &[b"tok", b"{lock:k}:released"],
    );
    assert_sends(&Release::late_win(b"lock:k", "tok", true), &fair);
}

#[test]
fn handover_names_both_tokens_the_ttl_and_our_fence() {
    let handover = HandOver {
        lock_key: b"lock:k",
        token: "tok",
        fence: 7,
        to: "theirs",
        ttl: Duration::from_millis(3000),
        upkeep: FenceUpkeep::Margin,
    };
    let want = evalsha(
        &scripts::HANDOFF,
        &FENCED,
        &[b"tok", b"theirs", b"3000", b"7"],
    );
    assert_sends(&handover, &want);
    assert_eq!(handover.decode(Value::Int(8)).ok(), Some(Some(8)));
    assert_eq!(handover.decode(Value::Int(0)).ok(), Some(None));
    assert!(handover.decode(Value::Nil).is_err());
}

#[test]
fn handover_says_whether_the_counter_is_kept_already_or_by_which_window() {
    let handover = |upkeep| HandOver {
        lock_key: b"lock:k",
        token: "tok",
        fence: 7,
        to: "theirs",
        ttl: Duration::from_millis(3000),
        upkeep,
    };
    let kept = evalsha(
        &scripts::HANDOFF,
        &FENCED,
        &[b"tok", b"theirs", b"3000", b"7", b"kept"],
    );
    assert_sends(&handover(FenceUpkeep::Kept), &kept);
    let window = evalsha(
        &scripts::HANDOFF,
        &FENCED,
        &[b"tok", b"theirs", b"3000", b"7", b"60000"],
    );
    assert_sends(&handover(FenceUpkeep::Window(60_000)), &window);
}

#[test]
fn extend_names_the_fence_key_and_the_extra_ms() {
    let extend = Extend {
        lock_key: b"lock:k",
        token: "tok",
        extra: Duration::from_millis(500),
    };
    let want = evalsha(&scripts::EXTEND, &FENCED, &[b"tok", b"500"]);
    assert_sends(&extend, &want);
    assert_eq!(
        extend.decode(Value::Int(1500)).ok(),
        Some(Some(Duration::from_millis(1500)))
    );
    assert_eq!(extend.decode(Value::Int(0)).ok(), Some(None));
}

#[test]
fn a_fence_raise_names_the_counter_the_fence_the_ttl_and_the_window() {
    let raise = FenceRaise {
        fence_key: b"lock:k:fence",
        fence: 11,
        ttl: Duration::from_millis(3000),
        window_ms: Some(0),
    };
    let want = evalsha(
        &scripts::FENCE_RAISE,
        &[b"lock:k:fence"],
        &[b"11", b"3000", b"0"],
    );
    assert_sends(&raise, &want);
    assert_eq!(raise.decode(Value::Int(12)).ok(), Some(12));
    assert!(raise.decode(Value::Int(-1)).is_err());
}

#[test]
fn fences_drawn_in_vain_are_counted_beside_the_lock_for_ten_minutes_by_the_scripts_text() {
    let count = CountMissed {
        missed_key: b"{lock:k}\xffmissed",
        fences: 2,
    };
    let (keys, args): (&[&[u8]], &[&[u8]]) = (&[b"{lock:k}\xffmissed"], &[b"2", b"600000"]);
    assert_sends(&count, &evalsha(&scripts::COUNT_MISSED, keys, args));
    // What the lane sends: its reply is for nobody, so the text itself.
    let mut whole = Vec::new();
    super::wire::write_whole(&count, &mut whole);
    let mut want: Vec<&[u8]> = vec![b"EVAL", scripts::COUNT_MISSED_SOURCE.as_bytes(), b"1"];
    want.extend(keys.iter().chain(args));
    assert_eq!(whole, resp(&want));
    assert_eq!(count.decode(Value::Int(6)).ok(), Some(6));
}

#[test]
fn is_locked_is_exists_and_the_holders_ttl_is_pttl() {
    let exists = Exists {
        lock_key: b"lock:k",
    };
    assert_sends(&exists, &resp(&[b"EXISTS", b"lock:k"]));
    assert_eq!(exists.decode(Value::Int(1)).ok(), Some(true));
    assert_eq!(exists.decode(Value::Int(0)).ok(), Some(false));
    let pttl = Pttl {
        lock_key: b"lock:k",
    };
    assert_sends(&pttl, &resp(&[b"PTTL", b"lock:k"]));
    let left = Some(Some(Duration::from_millis(250)));
    assert_eq!(pttl.decode(Value::Int(250)).ok(), left);
    assert_eq!(pttl.decode(Value::Int(-2)).ok(), Some(None));
}

#[test]
fn a_fair_release_names_the_line_and_its_liveness() {
    let release = Release {
        lock_key: b"lock:k",
        token: "tok",
        kind: ReleaseKind::Fair,
    };
    let want = evalsha(
        &scripts::RELEASE_FAIR,
        &[b"lock:k", b"{lock:k}\xffline", b"{lock:k}\xffalive"],
        &[b"tok", b"{lock:k}:released"],
    );
    assert_sends(&release, &want);
}

#[test]
fn an_exclusive_release_names_the_owner_key_first_and_proves_the_contents() {
    let release = Release {
        lock_key: b"{exclusive-lock:a}\xffowner",
        token: "tok",
        kind: ReleaseKind::Pair {
            data_key: b"exclusive-lock:a",
            contents: b"1",
            set_at: Some(5000),
        },
    };
    let want = evalsha(
        &scripts::RELEASE,
        &[b"{exclusive-lock:a}\xffowner", b"exclusive-lock:a"],
        &[b"tok", b"1", b"5000"],
    );
    assert_sends(&release, &want);
    let unset = Release {
        kind: ReleaseKind::Pair {
            data_key: b"exclusive-lock:a",
            contents: b"1",
            set_at: None,
        },
        ..release
    };
    let want = evalsha(
        &scripts::RELEASE,
        &[b"{exclusive-lock:a}\xffowner", b"exclusive-lock:a"],
        &[b"tok", b"1", b""],
    );
    assert_sends(&unset, &want);
}

#[test]
fn a_fenced_set_sends_the_value_then_the_fence() {
    let set = FencedSet {
        key: b"data",
        value: "v",
        fence: "000000000000007",
    };
    let want = evalsha(
        &scripts::FENCED_SET,
        &[b"data"],
        &[b"v", b"000000000000007"],
    );
    assert_sends(&set, &want);
    assert_eq!(set.decode(Value::Int(0)).ok(), Some(false));
}

/// The first acquire attempt, as the JS-thread socket writes it in each form, and the
/// number of replies it gets.
mod attempt {
    use super::{evalsha, resp, scripts};
    use crate::core::proto::acquire::{AcquireAttempt, AttemptForm, Layout};
    use crate::core::proto::Op;
    use std::time::{Duration, Instant};

    const FENCE: &[u8] = b"{lock:k}\xfffence";
    const X_KEY: &[u8] = b"exclusive-lock:a";
    const X_FENCE: &[u8] = b"{exclusive-lock:a}\xfffence";
    const X_OWNER: &[u8] = b"{exclusive-lock:a}\xffowner";

    /// What the JS-thread socket writes, and how many replies it waits for; the runtime
    /// sends the script alone, the same bytes (see `assert_sends`).
    fn written(op: &AcquireAttempt<'_>) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        op.encode(&mut out);
        if op.form == AttemptForm::Script {
            super::assert_sends(op, &out);
        }
        (out, op.replies())
    }

    /// DistributedLock's: token `t`, 1 s, a fence window of `retention` ms.
    fn plain(form: AttemptForm, retention: u64, keep_fences: bool) -> (Vec<u8>, usize) {
        plain_known(form, retention, keep_fences, false)
    }

    /// `plain`, its script told whether the counter is known kept.
    fn plain_known(
        form: AttemptForm,
        retention: u64,
        keep_fences: bool,
        fences_known_kept: bool,
    ) -> (Vec<u8>, usize) {
        written(&AcquireAttempt {
            lock_key: b"lock:k",
            fence_key: FENCE,
            token: "t",
            ttl: Duration::from_millis(1000),
            fence_retention_ms: retention,
            keep_fences,
            fences_known_kept,
            layout: Layout::Plain,
            form,
            sent: Instant::now(),
        })
    }

    /// ExclusiveLock's: token `t`, contents `1`, 3 s, a 5 s fence window.
    fn exclusive(form: AttemptForm, keep_fences: bool) -> (Vec<u8>, usize) {
        written(&AcquireAttempt {
            lock_key: X_KEY,
            fence_key: X_FENCE,
            token: "t",
            ttl: Duration::from_millis(3000),
            fence_retention_ms: 5000,
            keep_fences,
            fences_known_kept: false,
            layout: Layout::Exclusive {
                owner_key: X_OWNER,
                contents: "1",
            },
            form,
            sent: Instant::now(),
        })
    }

    fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn a_plain_script_attempt_names_the_fence_key_and_the_window() {
        let want = evalsha(
            &scripts::ACQUIRE,
            &[b"lock:k", FENCE],
            &[b"t", b"1000", b"5000"],
        );
        let (got, replies) = plain(AttemptForm::Script, 5000, true);
        assert_eq!((text(&got), replies), (text(&want), 1));
    }

    #[test]
    fn a_script_attempt_known_kept_sends_a_dash_for_the_window_unless_kept_forever() {
        let known = |retention: u64| plain_known(AttemptForm::Script, retention, false, true).0;
        let dash = evalsha(
            &scripts::ACQUIRE,
            &[b"lock:k", FENCE],
            &[b"t", b"1000", b"-"],
        );
        assert_eq!(text(&known(5000)), text(&dash));
        let forever = evalsha(
            &scripts::ACQUIRE,
            &[b"lock:k", FENCE],
            &[b"t", b"1000", b"0"],
        );
        assert_eq!(text(&known(0)), text(&forever));
    }

    #[test]
    fn a_plain_transaction_draws_two_fences_and_pushes_the_counter_unless_kept() {
        let set = resp(&[b"SET", b"lock:k", b"t", b"NX", b"PX", b"1000"]);
        let incr = resp(&[b"INCRBY", FENCE, b"2"]);
        let pushed = cat(&[
            resp(&[b"MULTI"]),
            set.clone(),
            incr.clone(),
            resp(&[b"PEXPIRE", FENCE, b"7250", b"NX"]),
            resp(&[b"PEXPIRE", FENCE, b"7250", b"GT"]),
            resp(&[b"EXEC"]),
        ]);
        for form in [AttemptForm::Transaction, AttemptForm::Untried] {
            let (got, replies) = plain(form, 5000, true);
            assert_eq!((text(&got), replies), (text(&pushed), 6));
        }
        let kept = cat(&[
            resp(&[b"MULTI"]),
            set.clone(),
            incr.clone(),
            resp(&[b"EXEC"]),
        ]);
        let (got, replies) = plain(AttemptForm::Transaction, 5000, false);
        assert_eq!((text(&got), replies), (text(&kept), 4));
        let forever = cat(&[
            resp(&[b"MULTI"]),
            set,
            incr,
            resp(&[b"PERSIST", FENCE]),
            resp(&[b"EXEC"]),
        ]);
        let (got, replies) = plain(AttemptForm::Transaction, 0, true);
        assert_eq!((text(&got), replies), (text(&forever), 5));
    }

    #[test]
    fn an_exclusive_script_attempt_names_the_owner_key_and_the_token_last() {
        let script = evalsha(
            &scripts::ACQUIRE,
            &[X_KEY, X_FENCE, X_OWNER],
            &[b"1", b"3000", b"5000", b"t"],
        );
        let (got, replies) = exclusive(AttemptForm::Script, true);
        assert_eq!((text(&got), replies), (text(&script), 1));
        let probed = cat(&[resp(&[b"MULTI"]), resp(&[b"EXEC"]), script]);
        let (got, replies) = exclusive(AttemptForm::Untried, true);
        assert_eq!((text(&got), replies), (text(&probed), 3));
    }

    #[test]
    fn an_exclusive_transaction_sets_the_contents_and_reads_the_expiry() {
        let set = resp(&[b"SET", X_KEY, b"1", b"NX", b"PX", b"3000"]);
        let incr = resp(&[b"INCRBY", X_FENCE, b"2"]);
        let expiry = resp(&[b"PEXPIRETIME", X_KEY]);
        let pushed = cat(&[
            resp(&[b"MULTI"]),
            set.clone(),
            incr.clone(),
            resp(&[b"PEXPIRE", X_FENCE, b"9250", b"NX"]),
            resp(&[b"PEXPIRE", X_FENCE, b"9250", b"GT"]),
            expiry.clone(),
            resp(&[b"EXEC"]),
        ]);
        let (got, replies) = exclusive(AttemptForm::Transaction, true);
        assert_eq!((text(&got), replies), (text(&pushed), 7));
        let kept = cat(&[resp(&[b"MULTI"]), set, incr, expiry, resp(&[b"EXEC"])]);
        let (got, replies) = exclusive(AttemptForm::Transaction, false);
        assert_eq!((text(&got), replies), (text(&kept), 5));
    }

    /// A waiter's attempt, as the runtime sends it (the script alone).
    fn waiter(layout: Layout<'_>) -> (Vec<u8>, usize) {
        written(&AcquireAttempt {
            lock_key: b"lock:k",
            fence_key: FENCE,
            token: "t",
            ttl: Duration::from_millis(1000),
            fence_retention_ms: 5000,
            keep_fences: true,
            fences_known_kept: false,
            layout,
            form: AttemptForm::Script,
            sent: Instant::now(),
        })
    }

    #[test]
    fn a_queued_attempt_names_the_queue_its_connection_its_place_and_company() {
        let want = evalsha(
            &scripts::ACQUIRE_QUEUED,
            &[b"lock:k", FENCE, b"{lock:k}\xffwaiting"],
            &[b"t", b"1000", b"5000", b"c1", b"1234", b"1", b"60000"],
        );
        let (got, replies) = waiter(Layout::Queued {
            queue_id: "c1",
            score: 1234,
            company: true,
            lifetime: Duration::from_secs(60),
        });
        assert_eq!((text(&got), replies), (text(&want), 1));
    }

    #[test]
    fn a_ring_attempt_names_the_ring_and_its_connection() {
        let want = evalsha(
            &scripts::JOIN_RING,
            &[b"lock:k", FENCE, b"{lock:k}\xffring"],
            &[b"t", b"1000", b"5000", b"c1"],
        );
        let (got, replies) = waiter(Layout::Ring { ring_id: "c1" });
        assert_eq!((text(&got), replies), (text(&want), 1));
    }

    #[test]
    fn a_fair_attempt_names_the_line_its_liveness_and_the_waiters_place() {
        let line: &[u8] = b"{lock:k}\xffline";
        let alive: &[u8] = b"{lock:k}\xffalive";
        for member in ["c1:7", ""] {
            let want = evalsha(
                &scripts::ACQUIRE_FAIR,
                &[b"lock:k", FENCE, line, alive],
                &[b"t", b"1000", b"5000", member.as_bytes(), b"2000", b"60000"],
            );
            let (got, replies) = waiter(Layout::Fair {
                member,
                place: Duration::from_secs(2),
                lifetime: Duration::from_secs(60),
            });
            assert_eq!((text(&got), replies), (text(&want), 1));
        }
    }
}

#[test]
fn enqueue_is_the_queue_script_with_id_score_and_lifetime() {
    use super::queue::Enqueue;
    let enqueue = Enqueue {
        lock_key: b"lock:k",
        id: "conn",
        score: 1_700_000_000_000_123,
        lifetime: Duration::from_secs(60),
    };
    let want = evalsha(
        &scripts::ENQUEUE,
        &[b"{lock:k}\xffwaiting", b"lock:k"],
        &[b"conn", b"1700000000000123", b"60000"],
    );
    assert_sends(&enqueue, &want);
    assert_eq!(enqueue.decode(Value::Int(1)).ok(), Some(true));
    assert_eq!(enqueue.decode(Value::Int(0)).ok(), Some(false));
}

#[test]
fn the_queue_and_line_ops_send_their_scripts() {
    use super::queue::{LeaveLine, LeaveQueue, WakeNext};
    let want = evalsha(
        &scripts::WAKE_NEXT,
        &[b"{lock:k}\xffwaiting"],
        &[b"{lock:k}:released"],
    );
    assert_sends(
        &WakeNext {
            lock_key: b"lock:k",
        },
        &want,
    );
    let leave = LeaveLine {
        lock_key: b"lock:k",
        member: "conn:7",
    };
    let want = evalsha(
        &scripts::LEAVE_FAIR,
        &[b"lock:k", b"{lock:k}\xffline", b"{lock:k}\xffalive"],
        &[b"conn:7", b"{lock:k}:released"],
    );
    assert_sends(&leave, &want);
    let zrem = LeaveQueue {
        lock_key: b"lock:k",
        id: "conn",
    };
    assert_sends(
        &zrem,
        &resp(&[b"ZREM", b"{lock:k}\xffwaiting", b"conn", b"conn!"]),
    );
    let refused = crate::core::basics::resp::parse(b"-NOPERM no\r\n").unwrap();
    let (refused, _) = refused.unwrap();
    assert!(matches!(refused, Value::ServerError(_)));
    assert!(zrem.decode(refused).is_err());
}

#[test]
fn inspect_reads_contents_and_pttl_in_one_script() {
    use super::read::Inspect;
    let inspect = Inspect {
        lock_key: b"lock:k",
    };
    assert_sends(&inspect, &evalsha(&scripts::INSPECT, &[b"lock:k"], &[]));
    let held = Value::Array(vec![Value::BulkString(b"job".to_vec()), Value::Int(900)]);
    assert_eq!(
        inspect.decode(held).ok(),
        Some((Some(b"job".to_vec()), 900))
    );
    let free = Value::Array(vec![Value::Nil, Value::Int(-2)]);
    assert_eq!(inspect.decode(free).ok(), Some((None, -2)));
}

#[test]
fn a_refresh_batch_is_one_refresh_many_then_one_refresh_per_pair() {
    use super::refresh::{PairRefresh, Refresh, RefreshBatch};
    let single = |key: &'static [u8]| Refresh {
        key,
        token: b"tok",
        ttl_ms: 1000,
        fence_retention_ms: 5000,
        pair: None,
    };
    let pair = Refresh {
        key: b"owner:x",
        token: b"tok2",
        ttl_ms: 2000,
        fence_retention_ms: 0,
        pair: Some(PairRefresh {
            data_key: b"lock:x",
            expected: b"contents",
            set_at: Some(1_700_000_000_000),
        }),
    };
    let unset = Refresh {
        pair: Some(PairRefresh {
            data_key: b"lock:y",
            expected: b"c",
            set_at: None,
        }),
        ..single(b"owner:y")
    };
    let batch = RefreshBatch::new(&[single(b"lock:a"), single(b"lock:b")], &[pair, unset]);
    let sent: Vec<Vec<u8>> = batch
        .commands()
        .iter()
        .map(|cmd| cmd.get_packed_command())
        .collect();
    let want = [
        evalsha(
            &scripts::REFRESH_MANY,
            &[
                b"lock:a",
                b"lock:b",
                b"{lock:a}\xfffence",
                b"{lock:b}\xfffence",
            ],
            &[b"tok", b"tok", b"1000", b"1000", b"5000", b"5000"],
        ),
        evalsha(
            &scripts::REFRESH,
            &[b"owner:x", b"lock:x", b"{lock:x}\xfffence"],
            &[b"tok2", b"2000", b"contents", b"1700000000000", b"0"],
        ),
        evalsha(
            &scripts::REFRESH,
            &[b"owner:y", b"lock:y", b"{lock:y}\xfffence"],
            &[b"tok", b"1000", b"c", b"", b"5000"],
        ),
    ];
    assert_eq!(sent, want);
    assert_eq!(batch.len(), 4);
}

#[test]
fn refresh_answers_map_the_flags_then_the_pairs_in_order() {
    use super::refresh::{PairRefresh, Refresh, RefreshBatch};
    let single = || Refresh {
        key: b"k",
        token: b"t",
        ttl_ms: 1,
        fence_retention_ms: 0,
        pair: None,
    };
    let pair = || Refresh {
        pair: Some(PairRefresh {
            data_key: b"d",
            expected: b"e",
            set_at: None,
        }),
        ..single()
    };
    let flags = |text: &str| Some(Value::BulkString(text.as_bytes().to_vec()));
    let three = [single(), single(), single()];
    let batch = RefreshBatch::new(&three, &[pair(), pair()]);
    let answers = batch.answers(vec![flags("101"), Some(Value::Int(1)), Some(Value::Int(0))]);
    let expected = [Some(true), Some(false), Some(true), Some(true), Some(false)];
    assert_eq!(answers, expected);

    // A missing or malformed reply is no answer for its locks only.
    let batch = RefreshBatch::new(&three[..2], &[pair()]);
    assert_eq!(
        batch.answers(vec![None, Some(Value::Int(1))]),
        [None, None, Some(true)]
    );
    assert_eq!(
        batch.answers(vec![flags("1"), None]),
        [None, None, None],
        "a flag string of the wrong length tells nothing"
    );
    assert_eq!(batch.answers(Vec::new()), [None, None, None]);
}

#[test]
fn a_batch_split_by_slot_is_one_batch_per_slot_in_slot_order() {
    use super::refresh::{PairRefresh, Refresh, RefreshBatch};
    use crate::core::basics::keys::slot;
    // "{a}x" and "{a}y" share slot 15495; "lock:b" is in 10224 (CRC16/XMODEM mod 16384).
    let single = |key: &'static [u8]| Refresh {
        key,
        token: b"tok",
        ttl_ms: 1000,
        fence_retention_ms: 0,
        pair: None,
    };
    let pair = Refresh {
        pair: Some(PairRefresh {
            data_key: b"lock:b",
            expected: b"c",
            set_at: None,
        }),
        ..single(b"{lock:b}\xffowner")
    };
    let (a, b) = (slot(b"{a}x"), slot(b"lock:b"));
    assert!(
        b < a && slot(b"{a}y") == a,
        "the case needs two slots, b's first"
    );
    let split = RefreshBatch::by_slot(
        &[single(b"{a}x"), single(b"lock:b"), single(b"{a}y")],
        &[pair],
    );
    let sent: Vec<(u16, Vec<Vec<u8>>)> = split
        .batches()
        .iter()
        .map(|(slot, batch)| {
            let bytes = batch.commands().iter().map(|c| c.get_packed_command());
            (*slot, bytes.collect())
        })
        .collect();
    let want = vec![
        (
            b,
            vec![
                evalsha(
                    &scripts::REFRESH_MANY,
                    &[b"lock:b", b"{lock:b}\xfffence"],
                    &[b"tok", b"1000", b"0"],
                ),
                evalsha(
                    &scripts::REFRESH,
                    &[b"{lock:b}\xffowner", b"lock:b", b"{lock:b}\xfffence"],
                    &[b"tok", b"1000", b"c", b"", b"0"],
                ),
            ],
        ),
        (
            a,
            vec![evalsha(
                &scripts::REFRESH_MANY,
                &[
                    b"{a}x",
                    b"{a}y",
                    b"{a}\xfffence\xff{a}x",
                    b"{a}\xfffence\xff{a}y",
                ],
                &[b"tok", b"tok", b"1000", b"1000", b"0", b"0"],
            )],
        ),
    ];
    assert_eq!(sent, want);

    // Answers go back in the caller's order: singles, then pairs; a missing batch
    // answers nothing for its locks only.
    let flags = |text: &str| Some(Value::BulkString(text.as_bytes().to_vec()));
    let answers = split.answers(vec![
        vec![flags("1"), Some(Value::Int(0))],
        vec![flags("01")],
    ]);
    assert_eq!(answers, [Some(false), Some(true), Some(true), Some(false)]);
    let answers = split.answers(vec![vec![flags("0"), Some(Value::Int(1))]]);
    assert_eq!(answers, [None, Some(false), None, Some(true)]);
}

#[test]
fn release_grant_known_kept_sends_a_dash_for_the_window_and_draws_the_scripts_block() {
    use super::ring::{ReleaseGrant, GRANT_BLOCK};
    let args = |fence_retention_ms: u64| {
        let release = ReleaseGrant {
            fences_known_kept: true,
            fence_retention_ms,
            ..ReleaseGrant::kick(b"lock:k", "g", Duration::from_secs(1), "me", 0)
        };
        let mut out = Vec::new();
        release.encode(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let (kept, forever) = (args(5000), args(0));
    assert!(
        kept.contains("\r\n$1\r\n-\r\n") && !kept.contains("5000"),
        "{kept}"
    );
    assert!(
        forever.contains("\r\n$1\r\n0\r\n$") && !forever.contains("\r\n-\r\n"),
        "{forever}"
    );
    let source = include_str!("scripts/release_grant.lua");
    assert!(source.contains(&format!("local BLOCK = {GRANT_BLOCK}\n")));
}

#[test]
fn release_grant_names_the_ring_the_grant_and_the_channel_around_an_id() {
    use super::ring::{ReleaseGrant, Released};
    let release = ReleaseGrant {
        lock_key: b"lock:k",
        token: "tok",
        fence: 41,
        last: 42,
        grant: "g",
        claim: Duration::from_secs(1),
        id: "me",
        leave: false,
        ours_wait: false,
        fence_retention_ms: 5000,
        fences_known_kept: false,
    };
    let want = evalsha(
        &scripts::RELEASE_GRANT,
        &[
            b"lock:k",
            b"{lock:k}\xfffence",
            b"{lock:k}\xffring",
            b"{lock:k}\xffwaiting",
        ],
        &[
            b"tok",
            b"41",
            b"42",
            b"g",
            b"1000",
            b"me",
            b"0",
            b"{lock:k}:grant:",
            b"",
            b"5000",
            b"{lock:k}:released",
            b"0",
        ],
    );
    assert_sends(&release, &want);
    let tagged = ReleaseGrant {
        lock_key: b"{app}:k",
        leave: true,
        ours_wait: true,
        ..release
    };
    let want = evalsha(
        &scripts::RELEASE_GRANT,
        &[
            b"{app}:k",
            b"{app}\xfffence\xff{app}:k",
            b"{app}\xffring\xff{app}:k",
            b"{app}\xffwaiting\xff{app}:k",
        ],
        &[
            b"tok",
            b"41",
            b"42",
            b"g",
            b"1000",
            b"me",
            b"1",
            b"{app}\0grant:",
            b"\0{app}:k",
            b"5000",
            b"{app}\0released\0{app}:k",
            b"1",
        ],
    );
    assert_sends(&tagged, &want);
    let answers = [
        (Value::Int(0), Released::NotOurs),
        (Value::Int(1), Released::Freed),
        (Value::Int(3), Released::Yielded),
        (
            Value::Array(vec![
                Value::Int(2),
                Value::BulkString(b"c7".to_vec()),
                Value::Int(42),
                Value::Int(1066),
            ]),
            Released::Granted {
                to: "c7".into(),
                fence: 42,
                last: 1066,
            },
        ),
    ];
    for (reply, want) in answers {
        assert_eq!(tagged.decode(reply).ok(), Some(want));
    }
}

#[test]
fn a_grant_message_is_read_whole_or_not_at_all() {
    use super::ring::GrantMessage;
    assert_eq!(
        GrantMessage::parse(b"42 1066 1000 tok-1"),
        Some(GrantMessage {
            fence: 42,
            last: 1066,
            claim: Duration::from_secs(1),
            token: "tok-1".into(),
        })
    );
    for stranger in [
        &b"c1"[..],
        b"42 1066 1000",
        b"42 1066 1000 tok extra",
        b"0 1 1000 tok",
        b"43 42 1000 tok",
        b"x 1066 1000 tok",
        b"42 1066 1000 ",
    ] {
        assert_eq!(GrantMessage::parse(stranger), None);
    }
}
