//! A waiter a release of ours is handing the lock to, while the server counts as down: its
//! pauses wait for that hand-over's end, on a runtime of one thread as the binding's, whose
//! task that ends it must get to run.

use crate::core::basics::cancel::Cancel;
use crate::core::basics::drops::PERSIST;
use crate::core::basics::error::LockError;
use crate::core::basics::lease::Lease;
use crate::core::basics::test_server::RedisServer;
use crate::core::ops::acquire::{Place, Plan, Start};
use crate::core::ops::lock::Locker;
use crate::core::ops::test_support::locker_at;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const KEY: &str = "reserved-down";
/// Far beyond the hand-over's end: a pursuit that takes this long spun in its stead.
const BOUND: Duration = Duration::from_secs(2);

/// Persistent refusals, as the watchdog records them: every waiter's pause ends at once.
fn put_down(locks: &Locker) {
    let err = LockError::Connection("refused".into());
    let drops = locks.store().dropped();
    drops.refused(&err);
    std::thread::sleep(PERSIST);
    drops.refused(&err);
    assert!(drops.refusal().is_some(), "not down");
}

/// A waiter of `KEY` reserved by a hand-over under way, the server down, pursues the lock
/// by `plan` (built from its place) from `start` on a runtime of one thread, where a task
/// ends that hand-over unused as soon as it runs. What it ended with, unless it took longer
/// than `BOUND`.
fn pursued_while_reserved(
    plan: impl FnOnce(Place) -> Plan + Send + 'static,
    start: impl FnOnce(&Locker) -> Start + Send + 'static,
) -> Option<Result<Option<Lease>, LockError>> {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let ticket = locks.join(KEY, MS(30_000), None);
    let to = (locks.store().wakes())
        .reserve(ticket.channel())
        .expect("the waiter sleeps");
    put_down(&locks);
    let (tell, told) = mpsc::channel();
    let pursuing = Arc::clone(&locks);
    // Left behind should it spin for good: the test fails all the same.
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            tokio::spawn(async move { drop(to) });
            let (plan, start) = (plan(Place::Joined(ticket)), start(&pursuing));
            let cancel = Cancel::never();
            let ended = pursuing.pursue(plan, KEY, MS(30_000), &cancel, start);
            let _ = tell.send(ended.await);
        });
    });
    let ended = told.recv_timeout(BOUND).ok();
    if let Some(Ok(Some(lease))) = &ended {
        let release = tokio::runtime::Runtime::new().unwrap();
        assert!(release.block_on(locks.release(lease)).unwrap());
    }
    ended
}

fn held() -> impl FnOnce(&Locker) -> Start + Send + 'static {
    |_| Start::Held {
        holder_ttl: Some(MS(30_000)),
    }
}

fn assert_won(ended: Option<Result<Option<Lease>, LockError>>) {
    match ended {
        Some(Ok(Some(_))) => {}
        Some(other) => panic!("ended with {other:?}"),
        None => panic!("still pursuing after {BOUND:?}: the hand-over's task never ran"),
    }
}

#[test]
fn a_waiter_polling_until_a_deadline_waits_for_its_hand_over_to_end() {
    let until = |place| Plan::until(place, Instant::now() + MS(5000), MS(5000));
    assert_won(pursued_while_reserved(until, held()));
}

#[test]
fn a_waiter_backing_off_waits_for_its_hand_over_to_end() {
    let backoff = |place| Plan::backoff(place, Instant::now() + MS(5000), MS(5000), MS(5000));
    assert_won(pursued_while_reserved(backoff, held()));
}

#[test]
fn an_attempt_sent_again_waits_for_its_hand_over_to_end() {
    let until = |place| Plan::until(place, Instant::now() + MS(5000), MS(5000));
    let again = |locks: &Locker| Start::Again {
        request: locks.attempt_request(KEY, MS(30_000)),
        timeout: MS(1000),
    };
    assert_won(pursued_while_reserved(until, again));
}
