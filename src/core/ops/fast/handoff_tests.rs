//! Unit tests of `handoff.rs`: which release the fast lane sends, and that a lease
//! is lent only for a handover that is sent.
use super::*;
use crate::core::wait::waiter::SETTLED_UNTOLD;
use crate::core::wait::wake::{ClaimedTask, Ticket};
use std::cell::Cell;

/// The lane of a thread on which the waiters' calls are parked (`true`), or not.
struct Lane(bool);

impl Parking for Lane {
    fn claim(&self, _id: u32) -> Option<Box<dyn ClaimedTask>> {
        self.0.then(|| Box::new(NoTask) as Box<dyn ClaimedTask>)
    }
}

/// The claimed task of a waiter whose test drives its ticket by hand.
struct NoTask;

impl ClaimedTask for NoTask {
    fn drop_unrun(self: Box<Self>) {}
}

impl Parks for Lane {
    fn parking(&self) -> Arc<dyn Parking> {
        Arc::new(Lane(self.0))
    }
}

/// A lane with nothing parked on its thread.
impl Parks for () {
    fn parking(&self) -> Arc<dyn Parking> {
        Arc::new(Lane(false))
    }
}

const THREAD: usize = 7;

fn locker(port: u16) -> Arc<Locker> {
    crate::core::ops::test_support::locker(port, "t:")
}

fn lease(locker: &Locker) -> Arc<Lease> {
    let key = locker.redis_key("k");
    let ttl = Duration::from_secs(10);
    Arc::new(Lease::new(
        "k".into(),
        key,
        "t".into(),
        3,
        Stamp::now(),
        ttl,
    ))
}

fn waiter(locker: &Locker, thread: usize, lent_start: bool) -> Ticket {
    let caller = Caller {
        thread,
        id: 3,
        lent_start,
        asked: std::time::Instant::now(),
    };
    locker.join("k", Duration::from_secs(5), Some(caller))
}

fn reservable(locker: &Locker) -> bool {
    let channel = wake::channel(&locker.redis_key("k"));
    locker.store().wakes().reserve(&channel).is_some()
}

/// What is sent for a release of `lease` from `THREAD`, its connection open or not; whether
/// the connection was asked.
fn send_on(locker: &Arc<Locker>, lease: &Arc<Lease>, open: bool) -> (FastRelease<()>, bool) {
    let asked = Cell::new(false);
    let sender = || {
        asked.set(true);
        open.then_some(())
    };
    let sent = Releasing::of(locker, lease, THREAD).send_on(sender);
    (sent, asked.get())
}

#[tokio::test]
async fn a_release_with_nobody_of_ours_waiting_is_plain_unless_its_handover_is_pending() {
    let locker = locker(41301);
    let lease = lease(&locker);
    let (plain, asked) = send_on(&locker, &lease, true);
    assert!(matches!(plain, FastRelease::Plain(_)) && !asked);
    // Its own handover not yet confirmed: after it, through the runtime.
    let lends = locker.store().wakes().lends();
    lends.lend(
        lease.token.clone(),
        Instant::now() + Duration::from_secs(10),
    );
    assert!(matches!(
        send_on(&locker, &lease, true).0,
        FastRelease::Elsewhere
    ));
    lends.settle(&lease.token, Lent::Failed);
    assert!(matches!(
        send_on(&locker, &lease, true).0,
        FastRelease::Plain(_)
    ));
}

#[tokio::test]
async fn a_handover_not_sent_lends_nothing_and_leaves_the_waiter_to_the_runtime() {
    let locker = locker(41302);
    let lease = lease(&locker);
    let _waiter = waiter(&locker, THREAD, true);
    let (closed, asked) = send_on(&locker, &lease, false);
    assert!(matches!(closed, FastRelease::Elsewhere) && asked);
    assert!(reservable(&locker));
}

#[tokio::test]
async fn a_handover_sent_lends_our_lease_to_a_waiter_that_opted_in() {
    let locker = locker(41303);
    let lease = lease(&locker);
    let _waiter = waiter(&locker, THREAD, true);
    let FastRelease::HandOver { lent, .. } = send_on(&locker, &lease, true).0 else {
        panic!("not handed over");
    };
    let Some(lent) = lent else {
        panic!("not lent");
    };
    assert_eq!((lent.waiter, lent.lease.fence), (3, lease.fence + 1));
    assert_eq!(lent.until, lease.deadline());
    assert!(locker.store().wakes().lends().pending(&lent.lease.token));
    // Answered already: no release picks it again.
    assert!(!reservable(&locker));
}

#[tokio::test]
async fn a_waiter_that_did_not_opt_in_waits_for_the_reply() {
    let locker = locker(41304);
    let lease = lease(&locker);
    let _waiter = waiter(&locker, THREAD, false);
    let sent = send_on(&locker, &lease, true).0;
    assert!(matches!(sent, FastRelease::HandOver { lent: None, .. }));
}

#[tokio::test]
async fn a_waiter_of_another_thread_is_left_to_the_runtime() {
    let locker = locker(41305);
    let lease = lease(&locker);
    let _waiter = waiter(&locker, THREAD + 1, true);
    let (sent, asked) = send_on(&locker, &lease, true);
    assert!(matches!(sent, FastRelease::Elsewhere) && !asked);
}

#[tokio::test]
async fn a_handover_answered_late_frees_the_waiters_token_by_the_scripts_text() {
    let locker = locker(41306);
    let lease = lease(&locker);
    let _waiter = waiter(&locker, THREAD, false);
    let FastRelease::HandOver {
        handoff: mut late, ..
    } = send_on(&locker, &lease, true).0
    else {
        panic!("not handed over");
    };
    assert!(late.timed_out(Duration::from_millis(5)).is_err());
    let mut out = Vec::new();
    assert!(late.answered_late(Value::Int(4), &mut out).is_some());
    // Its reply is for nobody: by its hash, a NOSCRIPT would leave the token to its TTL.
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("*8\r\n$4\r\nEVAL\r\n"), "{text}");
    assert!(text.contains(crate::core::proto::scripts::RELEASE_WAKE_SOURCE));
}

#[tokio::test]
async fn a_first_waiter_trying_on_its_own_is_left_to_the_runtime_not_passed_over() {
    let locker = locker(41307);
    let lease = lease(&locker);
    let first = waiter(&locker, THREAD, true);
    let second = waiter(&locker, THREAD, true);
    // Its caller, answered now, could release the lock before that attempt lands; the
    // second, answered now, would jump ahead of it.
    let _trying = first.trying().expect("waiting").expect("not reserved");
    let (sent, asked) = send_on(&locker, &lease, true);
    assert!(matches!(sent, FastRelease::Elsewhere) && !asked);
    // The runtime's release picks it: its own task answers it, after its attempt.
    let channel = wake::channel(&locker.redis_key("k"));
    let _to = locker.store().wakes().reserve(&channel).expect("a waiter");
    assert!(
        first.view().reserved && !second.view().reserved,
        "passed over the first waiter"
    );
}

#[tokio::test]
async fn a_parked_waiter_answered_in_place_is_not_told_however_long_its_pause() {
    // Told, its task would move to the runtime just before the binding drops it unrun.
    for (port, parked) in [(41308, true), (41309, false)] {
        let locker = locker(port);
        let lease = lease(&locker);
        let waiter = waiter(&locker, THREAD, false);
        waiter.pausing(std::time::Instant::now() + SETTLED_UNTOLD * 30);
        let sent = Releasing::of(&locker, &lease, THREAD).send_on(|| Some(Lane(parked)));
        let FastRelease::HandOver { handoff, .. } = sent else {
            panic!("not handed over");
        };
        let handed = handoff.answered(Value::Int(lease.fence as i64 + 1));
        assert!(matches!(handed, Step::Handed { .. }));
        let told = tokio::time::timeout(Duration::from_millis(20), waiter.woken()).await;
        assert_eq!(told.is_ok(), !parked, "parked: {parked}");
        assert!(waiter.view().settled);
    }
}
