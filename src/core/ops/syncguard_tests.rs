//! syncguard's operations on memory:// (the scripts' own replies are proven against
//! redis-server in tests/memory_syncguard.rs): `Paced`'s endings and counts, and the wakes.

use super::*;
use crate::core::basics::pace::GaveUp;
use crate::core::ops::test_support::locker_at;
use crate::core::wait::wake;
use std::sync::Arc;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn keys(name: &str, lock_id: &str) -> SyncguardKeys {
    let lock_key = format!("sg:{name}").into_bytes();
    SyncguardKeys {
        user_key: name.to_owned(),
        index_key: format!("sg:id:{lock_id}").into_bytes(),
        fence_key: format!("sg:fence:sg:{name}").into_bytes(),
        stored_key: lock_key.clone(),
        lock_key,
        lock_id: lock_id.to_owned(),
    }
}

fn id(n: u8) -> String {
    format!("{:A>22}", n)
}

async fn paced(
    locks: &Locker,
    keys: &SyncguardKeys,
    pace: Pace,
) -> Result<SyncguardWon, LockError> {
    let cancel = Cancel::never();
    let won = locks.sg_lock(keys, MS(30_000), pace, Instant::now(), &cancel);
    won.await.map(|lease| SyncguardWon::of(&lease))
}

/// A locker on `url` whose lock `name` another lockId holds, and the keys of a waiter for it.
async fn held_elsewhere(url: &str, name: &str) -> (Arc<Locker>, SyncguardKeys) {
    let locks = locker_at(url.into());
    let holder = keys(name, &id(1));
    assert!(locks
        .sg_acquire(&holder, MS(30_000))
        .await
        .unwrap()
        .is_some());
    (locks, keys(name, &id(2)))
}

#[tokio::test]
async fn paced_gives_up_after_its_retries_counting_the_first_attempt() {
    let (locks, waiter) = held_elsewhere("memory://sg-paced-retries", "busy").await;
    let ended = paced(&locks, &waiter, Pace::fixed(2.0, 10.0, f64::INFINITY)).await;
    assert_eq!(
        ended,
        Err(LockError::GaveUp(GaveUp::Contention { attempts: 3 }))
    );
}

#[tokio::test]
async fn paced_with_no_time_makes_no_attempt() {
    let locks = locker_at("memory://sg-paced-zero".into());
    let free = keys("free", &id(1));
    let ended = paced(&locks, &free, Pace::fixed(3.0, 10.0, 0.0)).await;
    // The elapsed time is whatever the machine took to get there (0 ms unless it is slow).
    assert!(
        matches!(
            ended,
            Err(LockError::GaveUp(GaveUp::TimedOut { attempts: 1, .. }))
        ),
        "{ended:?}"
    );
    let held = SyncguardIsLocked {
        lock_key: &free.lock_key,
        key_prefix: b"sg",
        cleanup: false,
    };
    assert!(!locks.store().backend().run(&held, MS(500)).await.unwrap());
}

/// With no retry limit only the timeout ends it. Unloaded, attempts go at 0, 100 and 200 ms,
/// the third's delay is clamped to the 50 ms left, and the fourth, due at 250, finds the time
/// up. A loaded machine may start any of them late, or stretch one past the timeout: then an
/// earlier one ends it. Either way the ending counts the attempts made, and comes no sooner
/// than the timeout.
#[tokio::test]
async fn paced_stops_when_the_next_delay_would_pass_its_timeout() {
    let (locks, waiter) = held_elsewhere("memory://sg-paced-clamp", "slow").await;
    let started = Instant::now();
    let pace = Pace::fixed(f64::NAN, 100.0, 250.0);
    let ended = tokio::time::timeout(MS(20_000), paced(&locks, &waiter, pace))
        .await
        .expect("ended by its timeout");
    let made = locks.stats().snapshot().contended;
    match ended {
        // `attempts` counts the one the time forbade.
        Err(LockError::GaveUp(GaveUp::TimedOut {
            attempts,
            elapsed_ms,
        })) => {
            assert_eq!(attempts, made + 1, "the ones made, and the one not");
            assert!((2..=4).contains(&attempts), "{attempts}");
            assert!(elapsed_ms >= 250, "{elapsed_ms}");
        }
        Err(LockError::GaveUp(GaveUp::NoTimeForRetry { elapsed_ms })) => {
            assert!((1..=3).contains(&made), "{made}");
            assert!(elapsed_ms >= 250, "{elapsed_ms}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= MS(250), "{:?}", started.elapsed());
}

/// A delay longer than the whole timeout is cut to the time left: the second attempt comes
/// at the timeout and finds it up, rather than a minute later.
#[tokio::test]
async fn paced_clamps_a_delay_longer_than_its_timeout_to_the_time_left() {
    let (locks, waiter) = held_elsewhere("memory://sg-paced-clamp-long", "slow").await;
    let pace = Pace::fixed(f64::NAN, 60_000.0, 250.0);
    // Far under the minute an unclamped delay takes, far over what a loaded machine adds.
    let ended = tokio::time::timeout(MS(20_000), paced(&locks, &waiter, pace))
        .await
        .expect("the minute's delay was cut to the 250 ms left");
    // A first attempt that itself outlasted the timeout leaves no time for a retry.
    assert!(
        matches!(
            ended,
            Err(LockError::GaveUp(
                GaveUp::TimedOut { attempts: 2, .. } | GaveUp::NoTimeForRetry { .. }
            ))
        ),
        "{ended:?}"
    );
}

/// A release of ours wakes a paced waiter long before its backoff: in the script when the
/// releaser names the lock key, by a follow-up wake when it names none.
#[tokio::test]
async fn a_release_wakes_a_paced_waiter_before_its_backoff() {
    for (n, expect) in [(0u8, true), (1, false)] {
        let locks = locker_at(format!("memory://sg-paced-wake-{n}"));
        let held = keys("job", &id(1));
        assert!(locks.sg_acquire(&held, MS(30_000)).await.unwrap().is_some());
        let waiter = keys("job", &id(2));
        let (late, cancel) = (Arc::clone(&locks), Cancel::never());
        let started = Instant::now();
        let waiting = tokio::spawn(async move {
            (late.sg_lock(
                &waiter,
                MS(30_000),
                Pace::fixed(5.0, 5000.0, 60_000.0),
                started,
                &cancel,
            ))
            .await
        });
        tokio::time::sleep(MS(200)).await;
        let expected = expect.then_some(&held.lock_key[..]);
        let released = locks.sg_release(&held.index_key, &held.lock_id, expected);
        assert!(matches!(
            released.await.unwrap(),
            ReleasedById::Released { .. }
        ));
        let won = tokio::time::timeout(MS(2000), waiting)
            .await
            .expect("woken before its 5 s backoff")
            .unwrap()
            .expect("won");
        assert_eq!(won.fence, 2);
        assert!(started.elapsed() < MS(2500));
    }
}

#[tokio::test]
async fn a_paced_waiter_cancelled_ends_aborted_and_holds_nothing() {
    let locks = locker_at("memory://sg-paced-cancel".into());
    let held = keys("c", &id(1));
    assert!(locks.sg_acquire(&held, MS(30_000)).await.unwrap().is_some());
    let waiter = keys("c", &id(2));
    let (late, cancel) = (Arc::clone(&locks), Cancel::signal());
    let stop = cancel.clone();
    let waiting = tokio::spawn(async move {
        let pace = Pace::fixed(5.0, 5000.0, 60_000.0);
        let won = late.sg_lock(&waiter, MS(30_000), pace, Instant::now(), &stop);
        won.await.map(|lease| SyncguardWon::of(&lease))
    });
    tokio::time::sleep(MS(100)).await;
    cancel.cancel();
    let ended = tokio::time::timeout(MS(1000), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended, Err(LockError::Aborted));
}

#[tokio::test]
async fn extend_sets_the_expiry_and_release_answers_what_it_found() {
    let locks = locker_at("memory://sg-extend".into());
    let mine = keys("e", &id(1));
    let won = locks.sg_acquire(&mine, MS(1000)).await.unwrap().unwrap();
    let extended = locks.sg_extend(&mine.index_key, &mine.lock_id, MS(60_000));
    let expiry = extended.await.unwrap().expect("still ours");
    assert!(expiry as u64 > won.expires_at_ms() + 50_000);
    let other = keys("e", &id(2));
    let (index, lock_id) = (&other.index_key, &other.lock_id);
    assert_eq!(
        locks.sg_release(index, lock_id, None).await.unwrap(),
        ReleasedById::NotFound
    );
    let released = locks.sg_release(&mine.index_key, &mine.lock_id, None);
    assert_eq!(
        released.await.unwrap(),
        ReleasedById::Released {
            lock_key: mine.lock_key.clone()
        }
    );
    let again = locks.sg_extend(&mine.index_key, &mine.lock_id, MS(1000));
    assert_eq!(again.await.unwrap(), None);
}

/// Wakes that find the lock still held are extra attempts: the count and the schedule stay
/// syncguard's (one retry 500 ms after the first attempt, whatever woke it meanwhile).
#[tokio::test]
async fn woken_attempts_that_fail_do_not_count() {
    let locks = locker_at("memory://sg-paced-extra".into());
    let held = keys("kept", &id(1));
    assert!(locks.sg_acquire(&held, MS(30_000)).await.unwrap().is_some());
    let waiter = keys("kept", &id(2));
    let (late, cancel) = (Arc::clone(&locks), Cancel::never());
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let pace = Pace::fixed(1.0, 500.0, f64::INFINITY);
        let won = late.sg_lock(&waiter, MS(30_000), pace, started, &cancel);
        won.await.map(|lease| SyncguardWon::of(&lease))
    });
    let channel = wake::channel(&held.lock_key);
    for _ in 0..3 {
        tokio::time::sleep(MS(100)).await;
        locks.store().wakes().wake_local(&channel);
    }
    let ended = waiting.await.unwrap();
    assert_eq!(
        ended,
        Err(LockError::GaveUp(GaveUp::Contention { attempts: 2 }))
    );
    assert!(started.elapsed() >= MS(500), "{:?}", started.elapsed());
}
