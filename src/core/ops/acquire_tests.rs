//! Acquisitions driven through `Locker::pursue` from a given `Plan` and `Start`, as the
//! fronts drive them, against a private redis-server (or memory://, or a Redlock of three):
//! the cases where a waiter's place, its first pause, its caller's cancellation or the
//! first send's clock of an attempt handed over decide what happens.

use super::*;

use crate::core::backend::endpoint::{Endpoint, EndpointSpec};
use crate::core::basics::clock::{self, Stamp};
use crate::core::basics::test_server::{calls, RedisServer};
use crate::core::ops::store::Store;
use crate::core::ops::test_support::locker_at;
use crate::core::wait::wake::{Reservation, Wakes};
use std::sync::Arc;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SLOW_POLL: Duration = Duration::from_secs(5);
const THREAD: usize = 9;

/// A caller of JS thread `THREAD`, whom a release made there may answer in place.
fn caller() -> Caller {
    Caller {
        thread: THREAD,
        id: 5,
        lent_start: false,
        asked: Instant::now(),
    }
}

async fn take(locks: &Locker, key: &str) -> Lease {
    match locks.attempt(key, MS(30_000)).await.expect("attempt") {
        Attempt::Acquired(lease) => lease,
        Attempt::Held { .. } => panic!("{key} held"),
    }
}

#[tokio::test]
async fn a_waiter_first_in_line_only_by_the_time_it_runs_waits_for_the_handover() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let held = take(&locks, "late").await;
    // Two waiters join in order (as waitForLock does on its JS thread, once its connection
    // remembers the lock); the second's task runs only after the lock has moved to the first.
    let first = locks.join("late", MS(30_000), None);
    let second = locks.join("late", MS(30_000), None);
    let mut monitor = server.raw();
    let before = calls(&mut monitor, "set");
    assert!(locks.release(&held).await.unwrap());
    let first_lease = first.take_grant().expect("handed to the first waiter");
    drop(first);
    let (late, cancel) = (locks.clone(), Cancel::never());
    let deadline = Instant::now() + MS(20_000);
    let waiting = tokio::spawn(async move {
        let plan = Plan::until(Place::Joined(second), deadline, SLOW_POLL);
        late.pursue(plan, "late", MS(30_000), &cancel, Start::Attempt)
            .await
    });
    tokio::time::sleep(MS(200)).await;
    // Only the handover's SET: first in line now, it still knows the lock is on its way.
    assert_eq!(
        calls(&mut monitor, "set") - before,
        1,
        "it tried for a held lock"
    );
    assert!(locks.release(&first_lease).await.unwrap());
    let lease = tokio::time::timeout(MS(2000), waiting)
        .await
        .expect("handed over in time")
        .unwrap()
        .expect("wait")
        .expect("won");
    assert_eq!(calls(&mut monitor, "set") - before, 2);
    assert!(locks.release(&lease).await.unwrap());
}

#[tokio::test]
async fn a_release_of_ours_between_a_waiters_attempt_and_its_joining_has_it_try_again_at_once() {
    // No RESP3, so no wake-up by message: only the count of releases can tell the waiter.
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let locks = locker_at(server.url());
    let held = take(&locks, "between").await;
    // Nobody of ours waits for the lock: the waiter is placed, not joined, and makes its
    // first attempt (elsewhere, say on its JS thread); it finds the lock held.
    let place = locks.place("between", MS(30_000), None);
    assert!(matches!(place, Place::Later { .. }));
    // Our release lands before the held reply is read: it finds nobody to hand over to.
    assert!(locks.release(&held).await.unwrap());
    let plan = Plan::until(place, Instant::now() + MS(20_000), SLOW_POLL);
    let started = Instant::now();
    let start = Start::Held {
        holder_ttl: Some(MS(30_000)),
    };
    let cancel = Cancel::never();
    let lease = locks
        .pursue(plan, "between", MS(30_000), &cancel, start)
        .await
        .expect("wait")
        .expect("won");
    let took = started.elapsed();
    assert!(took < MS(1000), "took {took:?}: its poll, not the release");
    assert!(locks.release(&lease).await.unwrap());
}

type Pursuit = tokio::task::JoinHandle<Result<Option<Lease>, LockError>>;

/// A waiter's `pursue` of `key` from `start`, joined before it for a caller of JS thread
/// `THREAD` who waits until a deadline. Its task and its channel.
fn pursued(
    locks: &Arc<Locker>,
    key: &'static str,
    cancel: &Cancel,
    start: Start,
) -> (Vec<u8>, Pursuit) {
    let ticket = locks.join(key, MS(30_000), Some(caller()));
    let channel = ticket.channel().to_vec();
    let deadline = Instant::now() + MS(20_000);
    let plan = Plan::until(Place::Joined(ticket), deadline, SLOW_POLL);
    let (locks, cancel) = (locks.clone(), cancel.clone());
    let waiting =
        tokio::spawn(async move { locks.pursue(plan, key, MS(30_000), &cancel, start).await });
    (channel, waiting)
}

/// `pursued`, its first attempt made while the server holds every command back a while: it
/// is in flight for that long, and wins after. With a connection of the test's own.
fn pursued_while_paused(
    server: &RedisServer,
    locks: &Arc<Locker>,
    key: &'static str,
    (cancel, start): (&Cancel, Start),
) -> (Vec<u8>, Pursuit, redis::Connection) {
    let mut admin = server.raw();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .query(&mut admin)
        .unwrap();
    let (channel, waiting) = pursued(locks, key, cancel, start);
    (channel, waiting, admin)
}

fn exists(admin: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("EXISTS")
        .arg(format!("lock:{key}"))
        .query(admin)
        .unwrap()
}

#[tokio::test]
async fn a_waiter_that_wins_after_its_caller_gave_up_frees_the_lock_before_it_answers() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let cancel = Cancel::signal();
    // The attempt is in flight when the caller gives up, and wins after.
    let (_, waiting, mut admin) =
        pursued_while_paused(&server, &locks, "given-up", (&cancel, Start::Attempt));
    tokio::time::sleep(MS(100)).await;
    cancel.cancel();
    let ended = waiting.await.unwrap();
    assert!(matches!(ended, Err(LockError::Aborted)), "{ended:?}");
    // Freed before the answer; not handed to the waiter that was giving up.
    assert_eq!(
        exists(&mut admin, "given-up"),
        0,
        "the lock outlived the answer"
    );
}

/// A waiter's attempt at `key` is on its way (`again`: its first, sent elsewhere with an
/// outcome unknown, sent again with its token): a release of its thread does not answer it
/// in place. Its caller's handle could release the lock before the attempt lands, which
/// would then win it for nobody.
async fn an_attempt_on_its_way_is_not_answered_in_place(key: &'static str, again: bool) {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let cancel = Cancel::never();
    let start = match again {
        true => Start::Again {
            request: locks.attempt_request(key, MS(30_000)),
            timeout: MS(2000),
        },
        false => Start::Attempt,
    };
    let (channel, waiting, mut admin) =
        pursued_while_paused(&server, &locks, key, (&cancel, start));
    tokio::time::sleep(MS(100)).await;
    let wakes = locks.store().wakes();
    assert!(
        wakes.reserve_in_place(&channel, THREAD).is_none(),
        "answerable in place while trying"
    );
    let lease = waiting.await.unwrap().expect("wait").expect("won");
    assert_eq!(exists(&mut admin, key), 1);
    assert!(wakes.reserve(&channel).is_none(), "still a waiter");
    assert!(locks.release(&lease).await.unwrap());
}

#[tokio::test]
async fn a_release_of_ours_does_not_answer_a_waiter_whose_own_attempt_is_on_its_way() {
    an_attempt_on_its_way_is_not_answered_in_place("trying", false).await;
}

#[tokio::test]
async fn nor_one_whose_first_attempt_is_sent_again() {
    an_attempt_on_its_way_is_not_answered_in_place("again", true).await;
}

#[tokio::test]
async fn the_runtimes_release_during_a_waiters_attempt_hands_it_the_lock_in_order() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let cancel = Cancel::never();
    let held = take(&locks, "in-order").await;
    // The first waiter's attempt is on its way when the holder releases; a second waits
    // behind it.
    let (_, waiting, mut admin) =
        pursued_while_paused(&server, &locks, "in-order", (&cancel, Start::Attempt));
    let second = locks.join("in-order", MS(30_000), None);
    tokio::time::sleep(MS(100)).await;
    let handed_before = locks.stats().snapshot().handed_over;
    assert!(locks.release(&held).await.unwrap());
    assert!(
        second.take_grant().is_none(),
        "passed over to a later waiter"
    );
    // Answered by its own task once its attempt found the lock held (ours, or handed to it).
    let lease = tokio::time::timeout(MS(2000), waiting)
        .await
        .expect("handed over, not left to its poll")
        .unwrap()
        .expect("wait")
        .expect("won");
    // Not its own attempt's win, which would come with the same fence.
    let handed = locks.stats().snapshot().handed_over - handed_before;
    assert_eq!(handed, 1, "not the lock handed over");
    assert_eq!(exists(&mut admin, "in-order"), 1);
    drop(second);
    assert!(locks.release(&lease).await.unwrap());
}

#[tokio::test]
async fn an_attempt_sent_again_waits_out_a_hand_over_under_way_then_sends_its_token() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let request = locks.attempt_request("again-reserved", MS(30_000));
    let token = request.terms.token.clone();
    // Its waiter joins before the hand-over, which is dropped unused (a fast-lane release
    // that was not sent): its first send may have won, so it is sent again all the same,
    // though the hand-over outlasted its time.
    let cancel = Cancel::never();
    let start = Start::Again {
        request,
        timeout: MS(50),
    };
    let (channel, waiting) = pursued(&locks, "again-reserved", &cancel, start);
    let to = locks.store().wakes().reserve(&channel);
    tokio::time::sleep(MS(100)).await;
    let mut admin = server.raw();
    assert_eq!(
        exists(&mut admin, "again-reserved"),
        0,
        "sent while reserved"
    );
    assert!(to.is_some(), "its waiter was not there to reserve");
    drop(to);
    let lease = tokio::time::timeout(MS(1000), waiting)
        .await
        .expect("woken as its hand-over was dropped")
        .unwrap()
        .expect("wait")
        .expect("won");
    assert_eq!(lease.token, token, "not the token sent first");
    assert!(locks.release(&lease).await.unwrap());
}

/// A waiter's first attempt at `key` won, though no reply told it; sent again, it waits for
/// a hand-over under way, during which `meanwhile` ends its caller's wait (given its
/// reservation, kept until the end if handed back, and its cancellation). It ends
/// `Aborted`, with nothing left held.
async fn what_a_first_send_won_is_freed<M>(key: &'static str, meanwhile: M)
where
    M: FnOnce(&Arc<Wakes>, &[u8], Reservation, &Cancel) -> Option<Reservation>,
{
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let request = locks.attempt_request(key, MS(30_000));
    let (token, sent) = (request.terms.token.clone(), request.terms.sent);
    let first = locks.attempt_with(key, token, sent, MS(30_000), MS(2000), None);
    assert!(matches!(first.await, Ok(Attempt::Acquired(_))));
    let cancel = Cancel::signal();
    let start = Start::Again {
        request,
        timeout: MS(2000),
    };
    let (channel, waiting) = pursued(&locks, key, &cancel, start);
    let wakes = locks.store().wakes();
    let to = wakes.reserve(&channel).expect("its waiter");
    tokio::time::sleep(MS(100)).await;
    let _kept = meanwhile(wakes, &channel, to, &cancel);
    let ended = tokio::time::timeout(MS(1000), waiting)
        .await
        .expect("ended");
    assert!(matches!(ended.unwrap(), Err(LockError::Aborted)));
    let mut admin = server.raw();
    assert_eq!(
        exists(&mut admin, key),
        0,
        "its first send's lock left held"
    );
}

#[tokio::test]
async fn an_attempt_sent_again_for_a_caller_answered_meanwhile_frees_what_its_first_send_won() {
    // Answered by the hand-over it waited for (one from a lease no longer ours, say).
    what_a_first_send_won_is_freed("again-won", |wakes, channel, to, _| {
        assert!(wakes.settle(channel, to, false));
        None
    })
    .await;
}

#[tokio::test]
async fn an_attempt_sent_again_for_a_caller_who_gave_up_meanwhile_frees_what_its_first_send_won() {
    // Its caller gives up while the hand-over is still under way (kept until then).
    what_a_first_send_won_is_freed("again-given-up", |_, _, to, cancel| {
        cancel.cancel();
        Some(to)
    })
    .await;
}

#[tokio::test]
async fn an_attempt_sent_again_for_a_caller_answered_meanwhile_that_finds_the_lock_held_ends() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let key = "again-held";
    let held = take(&locks, key).await;
    let cancel = Cancel::never();
    let start = Start::Again {
        request: locks.attempt_request(key, MS(30_000)),
        timeout: MS(2000),
    };
    let (channel, waiting) = pursued(&locks, key, &cancel, start);
    let wakes = locks.store().wakes();
    let to = wakes.reserve(&channel).expect("its waiter");
    tokio::time::sleep(MS(100)).await;
    let before = locks.stats().snapshot().contended;
    assert!(wakes.settle(&channel, to, false), "its caller answered");
    let ended = tokio::time::timeout(MS(1000), waiting)
        .await
        .expect("ended");
    assert!(matches!(ended.unwrap(), Err(LockError::Aborted)));
    // Its held reply ends it there: nobody waits on, nor was kept from the lock.
    assert_eq!(locks.stats().snapshot().contended, before);
    assert!(locks.release(&held).await.unwrap());
}

#[tokio::test]
async fn a_lock_won_for_a_caller_a_release_answered_already_is_freed() {
    let server = RedisServer::start();
    let locks = locker_at(server.url());
    let key = "answered";
    // What a waiter's attempt won, as its caller was answered by a release that handed it
    // the lock (the rule `won` keeps should such an attempt ever land after that).
    let lease = take(&locks, key).await;
    let ticket = locks.join(key, MS(30_000), None);
    let wakes = locks.store().wakes();
    let to = wakes.reserve(ticket.channel()).expect("the waiter sleeps");
    assert!(
        wakes.settle(ticket.channel(), to, false),
        "its caller answered"
    );
    let cancel = Cancel::never();
    let ended = (locks.won(lease, &cancel, Some(ticket), KeyScheme::Ours(key))).await;
    assert!(matches!(ended, Err(LockError::Aborted)), "{ended:?}");
    // Freed before it ends: nobody would ever release a lock won for a caller answered.
    let mut admin = server.raw();
    assert_eq!(
        exists(&mut admin, key),
        0,
        "the lock won for nobody stayed held"
    );
}

#[tokio::test]
async fn an_acquire_that_retries_learns_of_a_release_of_ours_that_landed_before_it_joined() {
    // No RESP3: only the count of releases can tell it before its retry is due.
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let locks = locker_at(server.url());
    let held = take(&locks, "retried").await;
    // Read before its first attempt, which finds the lock held; our release lands first.
    let mark = locks.mark("retried");
    assert!(locks.release(&held).await.unwrap());
    let plan = Plan::retries(3, SLOW_POLL, None, Some(mark));
    let started = Instant::now();
    let start = Start::Held {
        holder_ttl: Some(MS(30_000)),
    };
    let lease = locks
        .pursue(plan, "retried", MS(30_000), &Cancel::never(), start)
        .await
        .expect("acquire")
        .expect("won");
    let took = started.elapsed();
    assert!(
        took < MS(1000),
        "took {took:?}: its backoff, not the release"
    );
    assert!(locks.release(&lease).await.unwrap());
}

#[tokio::test]
async fn a_waiter_is_woken_by_the_release_not_by_its_poll() {
    let holder = locker_at("memory://engine-wake".into());
    let waiter = locker_at("memory://engine-wake".into());
    let Attempt::Acquired(lease) = holder.attempt("w", MS(10_000)).await.expect("attempt") else {
        panic!("a free lock was not won");
    };
    let cancel = Cancel::never();
    let plan = Plan::until(
        waiter.place("w", MS(5000), None),
        Instant::now() + MS(5000),
        MS(4000),
    );
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .pursue(plan, "w", MS(5000), &cancel, Start::Attempt)
                .await
        })
    };
    tokio::time::sleep(MS(100)).await;
    let released = Instant::now();
    holder.release(&lease).await.expect("release");
    let won = waiting
        .await
        .expect("task")
        .expect("wait")
        .expect("a lease");
    assert!(
        released.elapsed() < MS(1000),
        "woken after {:?}",
        released.elapsed()
    );
    assert!(won.fence > lease.fence);
}

/// A Redlock over `servers`, with keys under `lock:` and a 2 s command timeout.
fn redlock(servers: &[RedisServer]) -> Arc<Locker> {
    let node = |server: &RedisServer| {
        let url = Some(server.url());
        Endpoint::from_spec(EndpointSpec {
            url,
            ..Default::default()
        })
        .unwrap()
    };
    let endpoint = Endpoint::redlock(servers.iter().map(node).collect(), "redis").unwrap();
    Arc::new(Locker::new(Store::shared(endpoint), "lock:", MS(2000)))
}

/// How many of `servers` hold `token` at `key`.
fn holding(servers: &[RedisServer], key: &str, token: &str) -> usize {
    let holds = |server: &RedisServer| {
        let mut raw = server.raw();
        let value: Option<String> = redis::cmd("GET").arg(key).query(&mut raw).unwrap();
        value.as_deref() == Some(token)
    };
    servers.iter().filter(|server| holds(server)).count()
}

#[tokio::test]
async fn an_attempt_handed_over_keeps_its_first_sends_clock_for_its_lease() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let locks = redlock(&servers);
    let request = locks.attempt_request("kept", MS(5000));
    let first = request.terms.sent.at;
    tokio::time::sleep(MS(50)).await;
    let start = Start::Again {
        request,
        timeout: MS(2000),
    };
    let cancel = Cancel::never();
    let won = locks.pursue(Plan::once(), "kept", MS(5000), &cancel, start);
    let lease = won.await.expect("pursue").expect("won");
    assert_eq!(lease.sent().at, first);
    assert!(lease.deadline() <= first + clock::validity(MS(5000)));
    assert!(locks.release(&lease).await.unwrap());
}

#[tokio::test]
async fn a_redlock_attempt_first_sent_longer_ago_than_its_validity_is_time_and_undone() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let locks = redlock(&servers);
    // Handed over once its validity was spent: every node takes it, but it is not ours.
    let ttl = MS(1000);
    let mut request = locks.attempt_request("late", ttl);
    let long_ago = Instant::now().checked_sub(clock::validity(ttl)).unwrap();
    request.terms.sent = Stamp::at(long_ago);
    let token = request.terms.token.clone();
    let start = Start::Again {
        request,
        timeout: MS(2000),
    };
    let cancel = Cancel::never();
    let late = locks
        .pursue(Plan::once(), "late", ttl, &cancel, start)
        .await;
    let err = late.expect_err("past its validity");
    assert_eq!(err.code(), "ETIMEDOUT", "{err}");
    assert!(
        err.to_string().contains("past the lock's validity"),
        "{err}"
    );
    // Undone at once on the quorum that won it; a node left behind once a quorum answered,
    // by a task of its own, well within the TTL that would free it anyway.
    assert!(holding(&servers, "lock:late", &token) <= 1);
    let freed = Instant::now() + MS(500);
    while holding(&servers, "lock:late", &token) > 0 && Instant::now() < freed {
        tokio::time::sleep(MS(5)).await;
    }
    assert_eq!(holding(&servers, "lock:late", &token), 0);
    // Sent now, the same key is won.
    let lease = take(&locks, "late").await;
    assert!(locks.release(&lease).await.unwrap());
}
