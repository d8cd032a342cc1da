//! Unit tests of the fast calls in mod.rs and acquire.rs: a reply in, a decision out, with
//! no connection (the lane is whatever hands the reply over), kept apart so the library
//! files hold no test-only unwraps.
use super::acquire::{Mode, PlainAttempt};
use super::*;
use crate::core::basics::cancel::Cancel;
use crate::core::basics::clock::Stamp;
use crate::core::ops::acquire::Plan;

fn locker(port: u16) -> Arc<Locker> {
    crate::core::ops::test_support::locker(port, "t:")
}

fn lease(locker: &Locker) -> Arc<Lease> {
    Arc::new(Lease::new(
        "k".into(),
        locker.redis_key("k"),
        "token".into(),
        3,
        Stamp::now(),
        Duration::from_secs(10),
    ))
}

fn mode(plan: Plan) -> Mode {
    Mode {
        plan,
        cancel: Cancel::never(),
    }
}

fn now<T>(step: Step<T>) -> Settled<T> {
    match step {
        Step::Now(result) => result,
        Step::Handed { .. } => panic!("handed"),
        Step::Later(_) => panic!("later"),
    }
}

fn is_later<T>(step: &Step<T>) -> bool {
    matches!(step, Step::Later(_))
}

#[test]
fn a_release_reads_its_reply_and_asks_again_only_for_maestro() {
    let locker = locker(41001);
    let release = PlainRelease::new(&locker, &lease(&locker), false).unwrap();
    assert!(now(release.answered(Value::Int(1))).unwrap());
    let release = PlainRelease::new(&locker, &lease(&locker), false).unwrap();
    assert!(!now(release.answered(Value::Int(0))).unwrap());
    // Deleted nothing: maestro's answer is whether the lock is gone, asked on the runtime.
    let release = PlainRelease::new(&locker, &lease(&locker), true).unwrap();
    assert!(is_later(&release.answered(Value::Int(0))));
    // A refusal (NOSCRIPT among others) goes again through the runtime.
    let release = PlainRelease::new(&locker, &lease(&locker), false).unwrap();
    let (refused, _) = crate::core::basics::resp::parse(b"-NOSCRIPT No matching script.\r\n")
        .unwrap()
        .unwrap();
    assert!(is_later(&release.answered(refused)));
}

#[test]
fn a_released_lease_is_not_released_here_again() {
    let locker = locker(41002);
    let lease = lease(&locker);
    lease.mark_released();
    assert!(PlainRelease::new(&locker, &lease, false).is_none());
}

#[test]
fn exists_counts_keys() {
    let locker = locker(41003);
    assert!(now(IsLockedCall::new(&locker, "k").answered(Value::Int(1))).unwrap());
    assert!(!now(IsLockedCall::new(&locker, "k").answered(Value::Int(0))).unwrap());
}

#[test]
fn an_attempt_that_finds_the_lock_held_ends_or_goes_on_as_its_plan_says() {
    let locker = locker(41004);
    let held = || Value::Array(vec![Value::Int(0), Value::Int(250)]);
    let once = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(Plan::once()));
    assert!(now(once.answered(held())).unwrap().is_none());
    let plan = Plan::retries(0, Duration::from_millis(10), None, None);
    let no_retries = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(plan));
    assert!(matches!(
        now(no_retries.answered(held())),
        Err(LockError::Locked { retries: 0, .. })
    ));
    let plan = Plan::retries(2, Duration::from_millis(10), None, None);
    let retries = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(plan));
    assert!(is_later(&retries.answered(held())));
}

#[test]
fn a_won_attempt_is_the_lease_unless_its_caller_cancelled() {
    let locker = locker(41005);
    let won = || Value::Array(vec![Value::Int(1), Value::Int(7)]);
    let attempt = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(Plan::once()));
    let lease = now(attempt.answered(won())).unwrap().unwrap();
    assert_eq!(lease.fence, 7);
    let cancelled = Mode {
        cancel: Cancel::signal(),
        ..mode(Plan::once())
    };
    cancelled.cancel.cancel();
    let attempt = PlainAttempt::new(&locker, "k", Duration::from_secs(1), cancelled);
    // Answered (aborted) on the runtime, once the lock it won is freed.
    assert!(is_later(&attempt.answered(won())));
}

#[test]
fn a_late_reply_frees_only_a_lock_the_attempt_took() {
    let locker = locker(41006);
    let mut out = Vec::new();
    let mut attempt = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(Plan::once()));
    assert!(matches!(
        attempt.timed_out(Duration::from_millis(5)),
        Err(LockError::Timeout(_))
    ));
    let lost = Value::Array(vec![Value::Int(0), Value::Int(250)]);
    assert!(attempt.answered_late(lost, &mut out).is_none());
    assert!(out.is_empty());
    let attempt = PlainAttempt::new(&locker, "k", Duration::from_secs(1), mode(Plan::once()));
    let won = Value::Array(vec![Value::Int(1), Value::Int(7)]);
    assert!(attempt.answered_late(won, &mut out).is_some());
    // Whole: its reply is for nobody, so a NOSCRIPT would leave the lock to its TTL.
    let release_wake = crate::core::proto::scripts::RELEASE_WAKE_SOURCE;
    assert_eq!(evals(&out), vec![release_wake.as_bytes().to_vec()]);
    assert!(evalshas(&out).is_empty());
}

#[test]
fn a_transaction_that_finds_the_lock_held_counts_the_fences_it_drew_behind_it() {
    let locker = locker(41008);
    let ttl = Duration::from_secs(1);
    let attempt = |form| {
        let attempt = PlainAttempt::new(&locker, "k", ttl, mode(Plan::once()));
        attempt.write(&mut Vec::new(), form);
        attempt
    };
    let exec = |first| Value::Array(vec![first, Value::Int(8), Value::Int(0), Value::Int(1)]);
    // Held: two drawn for nothing, counted beside the lock, one command behind the call.
    let mut out = Vec::new();
    assert!(attempt(AttemptForm::Transaction).follow_up(&exec(Value::Nil), &mut out));
    // Sent whole: its reply is for nobody, so a NOSCRIPT would go unseen (proto/missed.rs).
    let counted = evals(&out);
    let count_missed = crate::core::proto::scripts::COUNT_MISSED_SOURCE;
    assert_eq!(counted, vec![count_missed.as_bytes().to_vec()]);
    assert!(evalshas(&out).is_empty());
    let sent = String::from_utf8_lossy(&out);
    let missed =
        String::from_utf8_lossy(&crate::core::basics::keys::missed_key(b"t:k")).into_owned();
    assert!(
        sent.contains(&missed) && sent.contains("\r\n$1\r\n2\r\n"),
        "{sent:?}"
    );
    // Late, the same: the caller was told of the timeout, the fences were drawn all the same.
    let mut late = attempt(AttemptForm::Transaction);
    let _ = late.timed_out(Duration::from_millis(5));
    let mut out = Vec::new();
    assert!(late.follow_up(&exec(Value::Nil), &mut out));
    assert!(late.answered_late(exec(Value::Nil), &mut out).is_none());
    assert_eq!(evals(&out).len(), 1);
    // Won, refused, or the script's held (it draws nothing when it fails): nothing.
    let mut out = Vec::new();
    assert!(!attempt(AttemptForm::Transaction).follow_up(&exec(Value::Okay), &mut out));
    let refused = Value::Array(vec![Value::Nil, Value::Nil]);
    assert!(!attempt(AttemptForm::Transaction).follow_up(&refused, &mut out));
    let held = Value::Array(vec![Value::Int(0), Value::Int(250)]);
    assert!(!attempt(AttemptForm::Script).follow_up(&held, &mut out));
    assert!(!attempt(AttemptForm::Script).follow_up(&exec(Value::Nil), &mut out));
    assert!(out.is_empty());
}

/// The SHA1s of the EVALSHAs in `written`.
fn evalshas(written: &[u8]) -> Vec<Vec<u8>> {
    scripts_sent(written, b"EVALSHA")
}

/// The script texts of the EVALs in `written`.
fn evals(written: &[u8]) -> Vec<Vec<u8>> {
    scripts_sent(written, b"EVAL")
}

/// The second part of each command `command` in `written`.
fn scripts_sent(written: &[u8], command: &[u8]) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    let mut at = 0;
    while let Ok(Some((Value::Array(parts), used))) =
        crate::core::basics::resp::parse(&written[at..])
    {
        at += used;
        if let [Value::BulkString(name), Value::BulkString(script), ..] = parts.as_slice() {
            if name.eq_ignore_ascii_case(command) {
                sent.push(script.clone());
            }
        }
    }
    sent
}

#[test]
fn every_script_a_fast_call_sends_is_loaded_when_the_socket_opens() {
    use super::extend::ExtendCall;
    use super::syncguard::{SyncguardAttempt, SyncguardRelease};
    use crate::core::ops::key_scheme::SyncguardKeys;
    let loaded: Vec<String> = (crate::core::ops::direct::SCRIPTS.iter())
        .map(|source| redis::Script::new(source).get_hash().to_owned())
        .collect();
    let locker = locker(41007);
    let lease = lease(&locker);
    let keys = SyncguardKeys {
        user_key: "k".into(),
        lock_key: b"sg:k".to_vec(),
        index_key: b"sg:id:i".to_vec(),
        fence_key: b"sg:fence:k".to_vec(),
        stored_key: b"sg:k".to_vec(),
        lock_id: "i".into(),
    };
    let ttl = Duration::from_secs(1);
    let mut out = Vec::new();
    let form = AttemptForm::Script;
    let plain = PlainAttempt::new(&locker, "k", ttl, mode(Plan::once()));
    plain.write(&mut out, form);
    (PlainRelease::new(&locker, &lease, false).unwrap()).write(&mut out, form);
    ExtendCall::new(&locker, &lease, ttl).write(&mut out, form);
    SyncguardAttempt::new(&locker, keys.clone(), ttl).write(&mut out, form);
    let (index_key, lock_id) = (keys.index_key.clone(), keys.lock_id.clone());
    SyncguardRelease::new(&locker, index_key, lock_id, keys.lock_key).write(&mut out, form);
    let held = Value::Array(vec![Value::Nil, Value::Int(8)]);
    let counting = PlainAttempt::new(&locker, "k", ttl, mode(Plan::once()));
    counting.write(&mut Vec::new(), AttemptForm::Transaction);
    assert!(counting.follow_up(&held, &mut out));
    // The count goes whole, needing nothing loaded.
    assert_eq!(evals(&out).len(), 1);
    let sent = evalshas(&out);
    assert_eq!(sent.len(), 5);
    for sha in sent {
        let sha = String::from_utf8(sha).unwrap();
        assert!(loaded.contains(&sha), "{sha} is not loaded on the socket");
    }
}

#[tokio::test]
async fn a_joined_waiters_first_attempt_is_trying_until_its_reply_is_read() {
    use crate::core::ops::acquire::{Attempts, Place};
    use crate::core::wait::wake::{self, Caller};
    let locker = locker(41010);
    let caller = Caller {
        thread: 7,
        id: 3,
        lent_start: true,
        asked: std::time::Instant::now(),
    };
    let ticket = locker.join("k", Duration::from_secs(5), Some(caller));
    let plan = Plan {
        attempts: Attempts::Until {
            deadline: std::time::Instant::now() + Duration::from_secs(5),
            poll: Duration::from_secs(1),
        },
        place: Place::Joined(ticket),
    };
    let attempt = PlainAttempt::new(&locker, "k", Duration::from_secs(5), mode(plan));
    let channel = wake::channel(&locker.redis_key("k"));
    let wakes = locker.store().wakes();
    // On its way: a release of this thread answering its caller now could see it win the
    // lock that caller's handle just released, for nobody.
    assert!(wakes.reserve_in_place(&channel, 7).is_none());
    let held = Value::Array(vec![Value::Int(0), Value::Int(250)]);
    let step = attempt.answered(held);
    assert!(is_later(&step));
    // Its reply read: it waits, and a release of its thread may answer it in place.
    assert!(wakes.reserve_in_place(&channel, 7).is_some());
}

#[tokio::test]
async fn a_timed_out_waiters_undo_keeps_neither_its_ticket_nor_its_trying_mark() {
    // Its undo's reply may be 250 ms away (BUSY): meanwhile the waiter behind it is first,
    // and a release of its thread answers it in place.
    use crate::core::ops::acquire::{Attempts, Place};
    use crate::core::wait::wake::{self, Caller};
    let locker = locker(41011);
    let caller = |id| Caller {
        thread: 7,
        id,
        lent_start: true,
        asked: std::time::Instant::now(),
    };
    let ttl = Duration::from_secs(5);
    let plan = Plan {
        attempts: Attempts::Until {
            deadline: std::time::Instant::now() + ttl,
            poll: Duration::from_secs(1),
        },
        place: Place::Joined(locker.join("k", ttl, Some(caller(3)))),
    };
    let mut attempt = PlainAttempt::new(&locker, "k", ttl, mode(plan));
    let _behind = locker.join("k", ttl, Some(caller(4)));
    assert!(attempt.timed_out(Duration::from_millis(1)).is_err());
    let won = Value::Array(vec![Value::Int(1), Value::Int(7)]);
    let mut out = Vec::new();
    let _undo = attempt.answered_late(won, &mut out).expect("undone");
    let channel = wake::channel(&locker.redis_key("k"));
    let reserved = locker.store().wakes().reserve_in_place(&channel, 7);
    assert_eq!(reserved.map(|(_, caller)| caller.id), Some(4));
}
