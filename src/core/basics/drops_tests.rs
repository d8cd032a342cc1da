use super::*;
use std::future::Future;

#[test]
fn a_drop_concerns_what_was_sent_before_it_only() {
    let drops = Drops::default();
    let before = Instant::now();
    assert!(!drops.since(before), "no drop yet");
    drops.signal();
    let after = Instant::now();
    assert!(drops.since(before));
    assert!(!drops.since(after));
    assert!(drops.last().is_some_and(|at| at >= before && at <= after));
}

#[test]
fn refusals_that_persist_put_the_server_down_until_a_call_is_answered() {
    let drops = Drops::default();
    let err = LockError::Connection("refused".into());
    let first = Instant::now();
    assert!(drops.refusal().is_none());
    let next = drops.next_refusal();
    assert!(!drops.refused_at(&err, first), "one refusal is a restart");
    assert!(!drops.refused_at(&err, first + PERSIST / 2));
    assert!(drops.refusal().is_none(), "not down yet");
    assert!(drops.refused_at(&err, first + PERSIST));
    assert_eq!(drops.refusal(), Some(err.clone()));
    // Made before the refusal: it has been told, though never polled until now.
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let mut next = std::pin::pin!(next);
    assert!(next.as_mut().poll(&mut context).is_ready());
    drops.answered();
    assert!(drops.refusal().is_none(), "up again");
    // An answer between two refusals starts the count afresh.
    assert!(!drops.refused_at(&err, first + PERSIST * 2));
    assert!(drops.refusal().is_none());
}

#[test]
fn refusals_far_apart_are_separate_outages() {
    let drops = Drops::default();
    let err = LockError::Connection("refused".into());
    let first = Instant::now();
    assert!(!drops.refused_at(&err, first));
    assert!(!drops.refused_at(&err, first + STREAK_GAP * 2));
    assert!(drops.refused_at(&err, first + STREAK_GAP * 2 + PERSIST));
}

#[test]
fn refusing_and_the_streak_agree_after_answers_race_refusals() {
    // `answered` skips the lock when `refusing` is false, which is sound only while
    // `refusing` and the open streak change together: hammered from both sides, they agree
    // at the end, and an answer after the race puts the server up.
    let drops = std::sync::Arc::new(Drops::default());
    let err = LockError::Connection("refused".into());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let drops = drops.clone();
            let err = err.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if i % 2 == 0 {
                        drops.refused(&err);
                    } else {
                        drops.answered();
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        assert!(thread.join().is_ok());
    }
    let open = lock(&drops.streak).is_some();
    assert_eq!(drops.refusing.load(Ordering::SeqCst), open);
    assert!(
        !drops.down.load(Ordering::SeqCst) || open,
        "down with no streak"
    );
    drops.answered();
    assert!(drops.refusal().is_none());
    assert!(lock(&drops.streak).is_none());
}
