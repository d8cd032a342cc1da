use super::*;
use crate::core::basics::clock::Stamp;
use crate::core::wait::cleanup::Cleaner;
use std::time::Duration;

const LOCK: &[u8] = b"lock:job";
const TTL: Duration = Duration::from_millis(1000);

async fn is_woken(ticket: &Ticket) -> bool {
    tokio::time::timeout(Duration::from_millis(20), ticket.woken())
        .await
        .is_ok()
}

#[tokio::test]
async fn a_turn_wakes_the_first_waiter_only() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    assert!(!first.view().behind_others);
    assert!(second.view().behind_others);
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::Woke));
    assert!(is_woken(&first).await);
    assert!(!is_woken(&second).await);
}

#[tokio::test]
async fn a_woken_waiter_is_skipped_by_the_next_turn_until_it_tries_again() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    wakes.take_turn(&channel(LOCK));
    wakes.take_turn(&channel(LOCK));
    assert!(is_woken(&first).await);
    assert!(is_woken(&second).await);
    // Both were told; a third turn finds nobody fresh and asks to pass it on.
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::PassOn(key) if key == LOCK));
    first.rearm();
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::Woke));
}

#[tokio::test]
async fn a_turn_for_a_lock_nobody_here_waits_for_is_passed_on() {
    let wakes = Arc::new(Wakes::default());
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::PassOn(_)));
    let gone = wakes.join(LOCK, TTL);
    drop(gone);
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::PassOn(key) if key == LOCK));
    let tagged: &[u8] = b"lock:{app}:job";
    assert!(matches!(wakes.take_turn(&channel(tagged)), Turn::PassOn(key) if key == tagged));
}

#[tokio::test]
async fn a_waiter_that_leaves_after_its_wake_hands_it_to_the_next() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    wakes.take_turn(&channel(LOCK));
    drop(first);
    assert!(is_woken(&second).await);
}

#[tokio::test]
async fn our_own_release_wakes_our_next_waiter() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK, TTL);
    assert!(wakes.has_waiters(&channel(LOCK)));
    wakes.wake_local(&channel(LOCK));
    assert!(is_woken(&waiter).await);
    drop(waiter);
    assert!(!wakes.has_waiters(&channel(LOCK)));
}

#[tokio::test]
async fn a_lost_connection_forgets_subscriptions_and_queue_places_and_wakes_the_first() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&channel(LOCK));
    wakes.mark_queued(&channel(LOCK), true);
    assert!(waiter.is_subscribed() && !waiter.view().needs_preparing);
    wakes.connection_lost(&LostScope::All);
    assert!(!waiter.is_subscribed() && waiter.view().needs_preparing);
    assert!(is_woken(&waiter).await);
}

#[tokio::test]
async fn subscriptions_lost_on_some_slots_wake_only_the_waiters_of_those_slots() {
    let wakes = Arc::new(Wakes::default());
    let (here, there) = (b"lock:{a}".as_slice(), b"lock:{b}".as_slice());
    let (slot_here, slot_there) = (keys::slot(here), keys::slot(there));
    assert_ne!(slot_here, slot_there);
    let lost = wakes.join(here, TTL);
    let kept = wakes.join(there, TTL);
    wakes.mark_subscribed(&channel(here));
    wakes.mark_subscribed(&channel(there));
    wakes.connection_lost(&LostScope::Slots(slot_here..=slot_here));
    assert!(!lost.is_subscribed() && is_woken(&lost).await);
    assert!(
        kept.is_subscribed(),
        "another shard's subscription is still there"
    );
    assert!(!is_woken(&kept).await);
}

#[test]
fn idle_channels_are_dropped_in_one_batch_past_the_limit_unless_still_queued() {
    let wakes = Arc::new(Wakes::default());
    for n in 0..4 {
        let key = format!("lock:{n}");
        let ticket = wakes.join(key.as_bytes(), TTL);
        wakes.mark_subscribed(ticket.channel());
    }
    // Queued after its last waiter left (a place its waiter's leaving has not undone yet).
    wakes.mark_queued(&channel(b"lock:0"), true);
    assert!(wakes.take_idle(4).is_empty());
    let dropped = wakes.take_idle(2);
    assert_eq!(dropped.len(), 3, "the queued one stays");
    assert!(!dropped.contains(&channel(b"lock:0")));
}

fn lease_for(token: &str) -> Lease {
    Lease::new(
        "job".into(),
        LOCK.to_vec(),
        token.into(),
        7,
        Stamp::now(),
        TTL,
    )
}

#[tokio::test]
async fn a_handoff_goes_to_the_first_waiter_in_request_order_with_its_ttl() {
    let wakes = Arc::new(Wakes::default());
    let first = wakes.join(LOCK, Duration::from_millis(700));
    let second = wakes.join(LOCK, TTL);
    let to = wakes.reserve(&channel(LOCK)).expect("a waiter to hand to");
    assert_eq!(to.ttl(), Duration::from_millis(700));
    // Reserved: neither another handoff nor a wake goes to it meanwhile.
    let next = wakes.reserve(&channel(LOCK)).expect("the second waiter");
    assert_eq!(next.ttl(), TTL);
    assert!(wakes.reserve(&channel(LOCK)).is_none());
    wakes.unreserve(next);
    assert!(
        is_woken(&second).await,
        "a handoff that did not happen wakes its waiter to try"
    );
    assert!(wakes.grant(&channel(LOCK), to, lease_for("t1")).is_none());
    assert!(is_woken(&first).await);
    let granted = first.take_grant().expect("the granted lease");
    assert_eq!(granted.token, "t1");
    assert!(first.take_grant().is_none());
}

/// A caller of JS thread `thread`, whom a release made there may answer in place.
fn caller(thread: usize) -> Caller {
    Caller {
        thread,
        id: 1,
        lent_start: false,
        asked: std::time::Instant::now(),
    }
}

#[tokio::test]
async fn the_runtimes_release_hands_the_lock_to_the_first_waiter_even_while_it_tries() {
    let wakes = Arc::new(Wakes::default());
    let first = wakes.join_as(LOCK, TTL, (Some(caller(1)), None), None);
    let _second = wakes.join_as(LOCK, TTL, (Some(caller(1)), None), None);
    let trying = first.trying().expect("not answered").expect("not reserved");
    // In place, its caller would be answered now, and could release the lock before its
    // attempt lands; nor is the second picked over it.
    assert!(wakes.reserve_in_place(&channel(LOCK), 1).is_none());
    // The runtime's release answers nobody: its own task does, after the attempt's reply.
    let to = wakes.reserve(&channel(LOCK)).expect("a waiter");
    assert_eq!(to.seq, first.seq, "passed over the first waiter");
    drop(trying);
    assert!(wakes.grant(&channel(LOCK), to, lease_for("t9")).is_none());
    assert!(is_woken(&first).await);
    assert_eq!(
        first.take_grant().map(|lease| lease.token),
        Some("t9".into())
    );
}

#[tokio::test]
async fn a_release_in_place_answers_only_the_first_waiter_of_its_own_thread() {
    let wakes = Arc::new(Wakes::default());
    let first = wakes.join_as(LOCK, TTL, (Some(caller(1)), None), None);
    let second = wakes.join_as(LOCK, TTL, (Some(caller(2)), None), None);
    assert!(wakes.reserve_in_place(&channel(LOCK), 2).is_none());
    let (to, caller) = wakes
        .reserve_in_place(&channel(LOCK), 1)
        .expect("the first");
    assert_eq!((to.seq, caller.thread), (first.seq, 1));
    assert!(wakes.settle(&channel(LOCK), to, false));
    let (to, caller) = wakes
        .reserve_in_place(&channel(LOCK), 2)
        .expect("first by now");
    assert_eq!((to.seq, caller.thread), (second.seq, 2));
}

#[tokio::test]
async fn a_waiter_refused_its_attempt_is_woken_when_its_reservation_is_dropped_unused() {
    let wakes = Arc::new(Wakes::default());
    let (refused, other) = (wakes.join(LOCK, TTL), wakes.join(b"lock:other", TTL));
    let to = wakes.reserve(&channel(LOCK)).expect("a waiter");
    assert!(matches!(refused.trying(), Ok(None)), "tried while reserved");
    drop(to);
    assert!(is_woken(&refused).await, "left asleep until its next poll");
    // Told to try, not woken by a release: the next release still picks it.
    assert!(wakes.reserve(&channel(LOCK)).is_some());
    // One that was not refused sleeps on: its task never stopped waiting for a release.
    drop(wakes.reserve(&channel(b"lock:other")).expect("a waiter"));
    assert!(!is_woken(&other).await);
}

#[tokio::test]
async fn a_wake_skips_a_waiter_being_handed_the_lock() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    let _to = wakes.reserve(&channel(LOCK));
    wakes.wake_local(&channel(LOCK));
    assert!(!is_woken(&first).await);
    assert!(is_woken(&second).await);
}

#[tokio::test]
async fn a_handoff_to_a_waiter_that_left_gives_the_lease_back() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK, TTL);
    let to = wakes.reserve(&channel(LOCK)).expect("a waiter");
    drop(waiter);
    let back = wakes.grant(&channel(LOCK), to, lease_for("t2"));
    assert!(matches!(back, Some(lease) if lease.token == "t2"));
}

#[tokio::test]
async fn taking_a_grant_uses_its_wake_so_leaving_passes_nothing_on() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    let to = wakes.reserve(&channel(LOCK)).expect("a waiter");
    assert!(wakes.grant(&channel(LOCK), to, lease_for("t3")).is_none());
    assert!(first.take_grant().is_some());
    drop(first);
    assert!(
        !is_woken(&second).await,
        "the holder's leaving woke the next waiter for nothing"
    );
}

#[tokio::test]
async fn a_waiter_whose_owner_ended_is_neither_handed_the_lock_nor_woken() {
    let wakes = Arc::new(Wakes::default());
    let owner = Owner::new();
    let orphaned = wakes.join_as(LOCK, TTL, (None, None), Some(owner.clone()));
    let live = wakes.join_as(LOCK, TTL, (None, None), Some(Owner::new()));
    let _ending = owner.end();
    let to = wakes.reserve(&channel(LOCK)).expect("a live waiter");
    assert_eq!(to.seq, live.seq);
    drop(to);
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::Woke));
    assert!(is_woken(&live).await);
    assert!(!is_woken(&orphaned).await);
}

#[tokio::test]
async fn a_lock_handed_to_a_waiter_whose_owner_ended_comes_back() {
    let wakes = Arc::new(Wakes::default());
    let owner = Owner::new();
    let waiter = wakes.join_as(LOCK, TTL, (None, None), Some(owner.clone()));
    let to = wakes.reserve(&channel(LOCK)).expect("the waiter");
    let _ending = owner.end();
    let lease = Lease::new(
        "job".into(),
        LOCK.to_vec(),
        "t".into(),
        1,
        Stamp::now(),
        TTL,
    );
    assert!(wakes.grant(&channel(LOCK), to, lease).is_some());
    assert!(waiter.take_grant().is_none());
}

#[test]
fn a_lock_nobody_waits_on_any_more_is_forgotten_unless_listened_to_or_queued_for() {
    let wakes = Arc::new(Wakes::default());
    let channels = |wakes: &Wakes| lock(&wakes.channels).len();
    for n in 0..1_000 {
        drop(wakes.join(format!("free:{n}").as_bytes(), TTL));
    }
    assert_eq!(channels(&wakes), 0, "one entry per key ever waited on");

    let first = wakes.join(b"lock:a", TTL);
    let second = wakes.join(b"lock:a", TTL);
    drop(first);
    assert_eq!(channels(&wakes), 1, "a waiter is still there");
    drop(second);
    assert_eq!(channels(&wakes), 0);

    let listened = wakes.join(b"lock:b", TTL);
    wakes.mark_subscribed(listened.channel());
    let queued = wakes.join(b"lock:c", TTL);
    wakes.mark_queued(queued.channel(), true);
    let preparing = wakes.join(b"lock:d", TTL);
    assert!(wakes.begin_preparing(preparing.channel()));
    drop((listened, queued, preparing));
    assert_eq!(
        channels(&wakes),
        2,
        "kept for the next wait and for the subscription under way; the queue is left"
    );
    assert!(!wakes.remembers(|| b"lock:c".to_vec()));
}

#[test]
fn a_lock_left_while_its_subscription_was_under_way_or_lost_with_the_connection_is_forgotten() {
    let wakes = Arc::new(Wakes::default());
    let channels = |wakes: &Wakes| lock(&wakes.channels).len();
    let ticket = wakes.join(LOCK, TTL);
    assert!(wakes.begin_preparing(ticket.channel()));
    drop(ticket);
    assert_eq!(
        channels(&wakes),
        1,
        "kept while the subscription is under way"
    );
    assert!(!wakes.end_preparing(&channel(LOCK)));
    assert_eq!(
        channels(&wakes),
        0,
        "the subscription failed: nothing to keep"
    );

    let listened = wakes.join(b"lock:a", TTL);
    wakes.mark_subscribed(listened.channel());
    drop(listened);
    let waiting = wakes.join(b"lock:b", TTL);
    assert_eq!(channels(&wakes), 2);
    wakes.connection_lost(&LostScope::All);
    assert_eq!(channels(&wakes), 1, "only the lock still waited on is kept");
    drop(waiting);
    assert_eq!(channels(&wakes), 0);
}

#[test]
fn a_turn_for_a_lock_forgotten_after_a_lost_connection_is_passed_on() {
    // Our place in the lock's queue outlives the connection, and the client subscribes
    // again on reconnecting: a turn can come for a lock nobody here remembers.
    let wakes = Arc::new(Wakes::default());
    let ticket = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(ticket.channel());
    wakes.mark_queued(ticket.channel(), true);
    wakes.connection_lost(&LostScope::All);
    drop(ticket);
    assert_eq!(lock(&wakes.channels).len(), 0);
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::PassOn(key) if key == LOCK));
}

#[test]
fn idle_channels_being_prepared_are_not_dropped() {
    let wakes = Arc::new(Wakes::default());
    for n in 0..3 {
        let ticket = wakes.join(format!("lock:{n}").as_bytes(), TTL);
        wakes.mark_subscribed(ticket.channel());
        if n == 0 {
            assert!(wakes.begin_preparing(ticket.channel()));
        }
    }
    let dropped = wakes.take_idle(0);
    assert_eq!(dropped.len(), 2, "the one being prepared stays");
    assert!(!dropped.contains(&channel(b"lock:0")));
    assert_eq!(lock(&wakes.channels).len(), 1);
}

#[tokio::test]
async fn a_waiter_joining_late_learns_of_a_release_of_ours_that_looked_before_it_joined() {
    let wakes = Arc::new(Wakes::default());
    // Nothing remembered: a release looks no further, and a new waiter need not join.
    assert!(!wakes.remembers(|| unreachable!("worked out with nothing remembered")));
    let mark = wakes.mark(&[b"lock:", b"job"]);
    assert!(!wakes.waiters_at_release(LOCK));
    let (late, missed) = wakes.join_late(LOCK, TTL, (None, None), None, mark);
    assert!(missed);
    // Told only: not woken, so a release still hands it the lock, and no wake is owed.
    assert!(!is_woken(&late).await);
    assert!(wakes.remembers(|| LOCK.to_vec()));
    // Joined, it is what the next release finds.
    let after_join = wakes.mark(&[LOCK]);
    assert!(wakes.waiters_at_release(LOCK));
    assert!(wakes.reserve(&channel(LOCK)).is_some());
    drop(late);
    assert!(!wakes.remembers(|| LOCK.to_vec()));
    let (_, missed) = wakes.join_late(LOCK, TTL, (None, None), None, after_join);
    assert!(missed, "the release counted after the mark");
    let fresh = wakes.mark(&[LOCK]);
    let (calm, missed) = wakes.join_late(LOCK, TTL, (None, None), None, fresh);
    assert!(!missed);
    calm.nudge();
    assert!(is_woken(&calm).await);
}

/// The cleanups a table asks for, as names.
#[derive(Default)]
struct Noted(Mutex<Vec<String>>);

impl Cleaner for Noted {
    fn clean_up(&self, cleanup: Cleanup) {
        let name = match cleanup {
            Cleanup::FreeGranted(_) => "release-orphan".to_string(),
            Cleanup::FreeById { .. } => "release-orphan-by-id".to_string(),
            Cleanup::PassWake(_) => "pass-on".to_string(),
            Cleanup::LeaveLine { .. } => "leave-line".to_string(),
            Cleanup::LeaveQueue(key) => format!("leave-queue {}", String::from_utf8_lossy(&key)),
            Cleanup::DropIdle => "drop-idle".to_string(),
        };
        lock(&self.0).push(name);
    }
}

fn noted() -> (Arc<Wakes>, Arc<Noted>) {
    let wakes = Arc::new(Wakes::default());
    let noted = Arc::new(Noted::default());
    let cleaner: Arc<dyn Cleaner> = noted.clone();
    wakes.set_cleaner(Arc::downgrade(&cleaner));
    // Kept alive by the caller's `Arc<Noted>`.
    drop(cleaner);
    (wakes, noted)
}

#[test]
fn the_last_waiter_to_leave_takes_the_connection_off_the_queue() {
    let (wakes, noted) = noted();
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&channel(LOCK));
    wakes.mark_queued(&channel(LOCK), true);
    drop(waiter);
    assert_eq!(*lock(&noted.0), vec!["leave-queue lock:job".to_string()]);
    // Subscribed, no longer queued: dropped with the next idle subscriptions.
    assert_eq!(wakes.take_idle(0), vec![channel(LOCK)]);
}

#[test]
fn a_queueing_answered_after_a_turn_or_after_the_last_waiter_left_leaves_no_place() {
    let (wakes, noted) = noted();
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&channel(LOCK));
    // A turn announced while the queueing was under way took us off the queue.
    let turns = wakes.turns(&channel(LOCK));
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::Woke));
    wakes.mark_queued_after(&channel(LOCK), true, turns);
    assert!(wakes.needs_queueing(&channel(LOCK)));
    // Queued with nobody left to wait: the connection leaves the queue again.
    waiter.rearm();
    let _keeps_the_entry = wakes.begin_preparing(&channel(LOCK));
    drop(waiter);
    assert!(lock(&noted.0).is_empty());
    let turns = wakes.turns(&channel(LOCK));
    wakes.mark_queued_after(&channel(LOCK), true, turns);
    assert_eq!(*lock(&noted.0), vec!["leave-queue lock:job".to_string()]);
    assert!(!wakes.needs_queueing(&channel(LOCK)));
}

#[test]
fn a_subscription_is_not_wanted_once_its_waiters_left_nor_is_a_queue_place() {
    let (wakes, waiter) = preparing();
    assert!(wakes.needs_queueing(&channel(LOCK)));
    drop(waiter);
    assert!(!wakes.has_waiters(&channel(LOCK)));
    assert!(!wakes.needs_queueing(&channel(LOCK)));
}

#[test]
fn waiters_leaving_subscribed_locks_ask_for_idle_subscriptions_to_be_dropped() {
    let (wakes, noted) = noted();
    let leave_subscribed = |n: usize| {
        let ticket = wakes.join(format!("lock:{n}").as_bytes(), TTL);
        wakes.mark_subscribed(ticket.channel());
    };
    (1..IDLE_SUBSCRIPTIONS).for_each(leave_subscribed);
    assert!(lock(&noted.0).is_empty());
    leave_subscribed(IDLE_SUBSCRIPTIONS);
    assert_eq!(*lock(&noted.0), vec!["drop-idle".to_string()]);
    // Looking at them starts the count afresh.
    assert_eq!(wakes.take_idle(IDLE_SUBSCRIPTIONS).len(), 0);
    (1..IDLE_SUBSCRIPTIONS).for_each(|n| leave_subscribed(n + 100));
    assert_eq!(lock(&noted.0).len(), 1);
    assert_eq!(
        wakes.take_idle(IDLE_SUBSCRIPTIONS).len(),
        2 * IDLE_SUBSCRIPTIONS - 1
    );
}

#[tokio::test]
async fn a_subscription_the_server_dropped_wakes_that_channels_first_waiter_only() {
    let wakes = Arc::new(Wakes::default());
    let (moved, stayed) = (b"lock:{a}".as_slice(), b"lock:{b}".as_slice());
    let lost = wakes.join(moved, TTL);
    let kept = wakes.join(stayed, TTL);
    wakes.mark_subscribed(&channel(moved));
    wakes.mark_subscribed(&channel(stayed));
    wakes.mark_queued(&channel(moved), true);
    wakes.unsubscribed(&channel(moved));
    assert!(!lost.is_subscribed() && lost.view().needs_preparing);
    assert!(is_woken(&lost).await);
    assert!(kept.is_subscribed());
    assert!(!is_woken(&kept).await);
}

/// A waiter for `LOCK`, whose channel a task of ours is subscribing and queueing.
fn preparing() -> (Arc<Wakes>, Ticket) {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK, TTL);
    assert!(wakes.begin_preparing(&channel(LOCK)));
    (wakes, waiter)
}

#[tokio::test]
async fn a_subscription_dropped_while_its_queueing_was_under_way_is_made_again() {
    // A cluster's node gives the slot away while the queueing that follows our SSUBSCRIBE is
    // turned away (TRYAGAIN): the waiter woken by the loss finds the preparation under way.
    let (wakes, waiter) = preparing();
    wakes.mark_subscribed(&channel(LOCK));
    wakes.unsubscribed(&channel(LOCK));
    assert!(is_woken(&waiter).await);
    waiter.rearm();
    assert!(waiter.view().needs_preparing);
    assert!(!wakes.begin_preparing(&channel(LOCK)), "still under way");
    // The queueing, answered on the new master at last.
    let turns = wakes.turns(&channel(LOCK));
    wakes.mark_queued_after(&channel(LOCK), true, turns);
    assert!(wakes.end_preparing(&channel(LOCK)), "prepared once more");
    let view = waiter.view();
    assert!(!view.subscribed && view.needs_preparing);
    assert!(
        wakes.needs_queueing(&channel(LOCK)),
        "queued again after subscribing"
    );
    assert!(!wakes.begin_preparing(&channel(LOCK)), "the claim is kept");
    wakes.mark_subscribed(&channel(LOCK));
    wakes.mark_queued(&channel(LOCK), true);
    assert!(
        !wakes.end_preparing(&channel(LOCK)),
        "nothing lost this time"
    );
    assert!(waiter.is_subscribed() && !waiter.view().needs_preparing);
    assert!(!is_woken(&waiter).await, "woken once, by the loss");
}

#[tokio::test]
async fn a_node_dropping_a_subscription_not_yet_recorded_has_it_made_again() {
    // The SSUBSCRIBE's confirmation and the node's SUNSUBSCRIBE push reach us by different
    // paths: the push may be heard before the subscription is recorded.
    let (wakes, waiter) = preparing();
    wakes.unsubscribed(&channel(LOCK));
    wakes.mark_subscribed(&channel(LOCK));
    assert!(
        !is_woken(&waiter).await,
        "nothing was lost that a waiter had"
    );
    assert!(wakes.end_preparing(&channel(LOCK)));
    assert!(
        !waiter.is_subscribed(),
        "made again, wherever the slot is now"
    );
}

#[tokio::test]
async fn a_node_dropping_one_channel_of_a_slot_has_every_preparation_of_that_slot_run_again() {
    // The crate may take the node's SUNSUBSCRIBE for the reply to another channel's
    // SSUBSCRIBE in flight there, whose own answer was a MOVED.
    let wakes = Arc::new(Wakes::default());
    let (dropped, sibling, elsewhere) = (
        b"lock:{a}:1".as_slice(),
        b"lock:{a}:2".as_slice(),
        b"lock:{b}".as_slice(),
    );
    assert_ne!(keys::slot(sibling), keys::slot(elsewhere));
    let waiters = [dropped, sibling, elsewhere].map(|key| wakes.join(key, TTL));
    wakes.mark_subscribed(&channel(dropped));
    for key in [sibling, elsewhere] {
        assert!(wakes.begin_preparing(&channel(key)));
        wakes.mark_subscribed(&channel(key));
    }
    wakes.unsubscribed(&channel(dropped));
    assert!(is_woken(&waiters[0]).await);
    assert!(!is_woken(&waiters[1]).await, "its own loss is not known");
    assert!(wakes.end_preparing(&channel(sibling)));
    assert!(!wakes.end_preparing(&channel(elsewhere)), "another slot");
}

#[test]
fn a_loss_during_a_preparation_its_waiters_left_prepares_nothing_more() {
    let (wakes, waiter) = preparing();
    wakes.connection_lost(&LostScope::All);
    drop(waiter);
    assert!(!wakes.end_preparing(&channel(LOCK)));
    assert_eq!(lock(&wakes.channels).len(), 0);
    let waiter = wakes.join(LOCK, TTL);
    assert!(wakes.begin_preparing(&channel(LOCK)));
    wakes.connection_lost(&LostScope::All);
    assert!(
        wakes.end_preparing(&channel(LOCK)),
        "a lost connection counts alike"
    );
    drop(waiter);
}

#[tokio::test]
async fn our_own_unsubscribe_of_an_idle_channel_wakes_nobody() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK, TTL);
    // Subscribed, not yet marked: a confirmation of an UNSUBSCRIBE of ours looks the same.
    wakes.unsubscribed(&channel(LOCK));
    assert!(!is_woken(&waiter).await);
}

/// A grant of another process's release, as `Store::granted` makes it.
fn remote(ttl: Option<Duration>) -> Lease {
    let anchor = Some(Stamp::now());
    let claim = Duration::from_millis(1000);
    Lease::granted(
        LOCK.to_vec(),
        "grant".into(),
        7,
        (anchor, claim),
        ttl.unwrap_or(claim),
    )
}

#[tokio::test]
async fn a_grant_from_another_process_with_nobody_waiting_comes_back_to_pass_on() {
    let wakes = Arc::new(Wakes::default());
    let back = wakes.grant_remote(&channel(LOCK), remote).expect("back");
    assert_eq!((back.token.as_str(), back.fence), ("grant", 7));
    assert!(back.is_claim_only());
    // Left: the same.
    drop(wakes.join(LOCK, TTL));
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_some());
}

#[tokio::test]
async fn a_grant_from_another_process_skips_a_settled_or_trying_waiter() {
    let wakes = Arc::new(Wakes::default());
    let (settled, trying) = (wakes.join(LOCK, TTL), wakes.join(LOCK, TTL));
    let to = wakes.reserve(&channel(LOCK)).expect("reserved");
    assert!(wakes.settle(&channel(LOCK), to, false));
    assert!(settled.view().settled);
    // Woken by a release of ours: it is about to try on its own.
    wakes.wake_local(&channel(LOCK));
    assert!(is_woken(&trying).await);
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_some());
    // Back asleep, it takes the next one, made for its own TTL.
    trying.rearm();
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_none());
    let lease = trying.take_grant().expect("granted");
    assert_eq!(lease.ttl(), TTL);
    assert!(lease.is_claim_only());
}

#[tokio::test]
async fn grants_from_another_process_go_to_our_waiters_in_the_order_they_joined() {
    let wakes = Arc::new(Wakes::default());
    let waiters: Vec<Ticket> = (0..3).map(|_| wakes.join(LOCK, TTL)).collect();
    for (n, _) in waiters.iter().enumerate() {
        assert!(wakes.grant_remote(&channel(LOCK), remote).is_none());
        for (m, waiter) in waiters.iter().enumerate() {
            assert_eq!(is_woken(waiter).await, m == n, "grant {n}, waiter {m}");
        }
    }
    for waiter in &waiters {
        assert!(waiter.take_grant().is_some());
    }
}

#[tokio::test]
async fn a_grant_taken_here_arms_its_tenures_kicker_once_and_a_quiet_release_starts_none() {
    let wakes = Arc::new(Wakes::default());
    wakes.set_tenure(TenureTerms {
        window: Duration::from_secs(60),
        kick_after: Duration::ZERO,
    });
    assert!(!wakes.arm_kicker(LOCK), "nothing known of the lock");
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&keys::grant_channel(LOCK, "c1"));
    assert!(!wakes.arm_kicker(LOCK), "no tenure before the grant");
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_none());
    assert!(waiter.take_grant().is_some());
    assert!(wakes.arm_kicker(LOCK));
    assert!(!wakes.arm_kicker(LOCK), "one kicker per tenure");
    drop(waiter);
    // The tenure the grant began frees the lock quietly; the kicker already runs.
    assert!(wakes.release_quietly(LOCK));
    assert!(!wakes.freed_quietly(LOCK, 0));
    assert_eq!(wakes.kick_step(LOCK), (KickStep::Kick, 0));
}

#[test]
fn a_grant_its_waiter_leaves_before_taking_is_freed_as_a_lock_handed_over_here_is() {
    let (wakes, noted) = noted();
    let gone = wakes.join(LOCK, TTL);
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_none());
    drop(gone);
    assert_eq!(*lock(&noted.0), vec!["release-orphan".to_string()]);
}

#[test]
fn a_grant_channel_of_ours_is_its_locks_entry_and_is_what_is_unsubscribed() {
    let wakes = Arc::new(Wakes::default());
    let grants = keys::grant_channel(LOCK, "c1");
    drop(wakes.join(LOCK, TTL));
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&grants);
    assert!(wakes.is_subscribed(&grants));
    assert!(!wakes.is_subscribed(&channel(LOCK)));
    assert!(waiter.is_subscribed());
    drop(waiter);
    assert_eq!(wakes.take_idle(0), vec![grants]);
}

#[test]
fn a_connection_in_a_ring_stays_there_and_a_new_waiter_waits_silently_once_it_handed_on() {
    let (wakes, noted) = noted();
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&keys::grant_channel(LOCK, "c1"));
    wakes.joined_ring(&channel(LOCK));
    assert!(!waiter.view().turn_from_others);
    drop(waiter);
    // No leave-queue: a grant that comes is passed on, and the next wait needs no joining.
    assert!(lock(&noted.0).is_empty());
    wakes.handed_on(&channel(LOCK), true);
    let next = wakes.join(LOCK, TTL);
    assert!(next.view().turn_from_others);
    // Out of the ring (it passed a grant on), it must join again: its attempts are its own.
    wakes.left_ring(&channel(LOCK));
    assert!(!next.view().turn_from_others);
}

#[tokio::test]
async fn a_waiter_that_joined_as_its_connection_left_the_ring_tries_again_to_join() {
    let wakes = Arc::new(Wakes::default());
    let first = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&keys::grant_channel(LOCK, "c1"));
    wakes.joined_ring(&channel(LOCK));
    drop(first);
    // A pass-on takes the lingering connection out while a new waiter's attempt, which found
    // it still in the ring, is under way: that attempt joined nothing.
    let joining = wakes.join(LOCK, TTL);
    assert!(!is_woken(&joining).await);
    wakes.left_ring(&channel(LOCK));
    assert!(is_woken(&joining).await);
    assert!(joining.view().needs_preparing);
}

#[tokio::test]
async fn a_closing_environment_leaves_the_rings_nobody_alive_here_waits_in() {
    let wakes = Arc::new(Wakes::default());
    let owner = Owner::new();
    let waiter = wakes.join_as(LOCK, TTL, (None, None), Some(owner.clone()));
    // Listening for grants, its joining not counted yet (sent before it listened).
    wakes.mark_subscribed(&keys::grant_channel(LOCK, "c1"));
    assert!(wakes.rings_to_leave().is_empty(), "a live waiter stays");
    let _ending = owner.end();
    assert_eq!(wakes.rings_to_leave(), vec![LOCK.to_vec()]);
    drop(waiter);
    assert_eq!(wakes.rings_to_leave(), vec![LOCK.to_vec()]);
}

/// A connection that got the lock by a grant and holds it, its waiter gone: subscribed, its
/// tenure running, and (out of the ring, or its joining older than `QUEUE_LIFETIME`) not
/// queued, so nothing but a pending kick keeps its entry from `take_idle`.
fn tenured_and_idle() -> Arc<Wakes> {
    let wakes = Arc::new(Wakes::default());
    wakes.set_tenure(TenureTerms {
        window: Duration::from_secs(60),
        kick_after: Duration::ZERO,
    });
    let waiter = wakes.join(LOCK, TTL);
    wakes.mark_subscribed(&keys::grant_channel(LOCK, "c1"));
    assert!(wakes.grant_remote(&channel(LOCK), remote).is_none());
    assert!(waiter.take_grant().is_some());
    drop(waiter);
    wakes.left_ring(&channel(LOCK));
    wakes
}

#[test]
fn a_quiet_release_whose_entry_was_dropped_as_idle_meanwhile_is_still_kicked() {
    let wakes = tenured_and_idle();
    assert!(wakes.release_quietly(LOCK));
    // Between the decision and the answer, idle subscriptions are dropped (more than
    // IDLE_SUBSCRIPTIONS of them): this one with them.
    assert_eq!(wakes.take_idle(0).len(), 1);
    assert!(wakes.freed_quietly(LOCK, 5000), "no kick would be started");
    assert_eq!(wakes.kick_step(LOCK), (KickStep::Kick, 5000));
    assert!(!wakes.remembers(|| LOCK.to_vec()), "forgotten once kicked");
}

#[test]
fn a_quiet_release_whose_subscription_was_lost_meanwhile_is_still_kicked() {
    let wakes = tenured_and_idle();
    assert!(wakes.release_quietly(LOCK));
    wakes.connection_lost(&LostScope::All);
    assert!(wakes.freed_quietly(LOCK, 5000), "no kick would be started");
    assert_eq!(wakes.kick_step(LOCK), (KickStep::Kick, 5000));
}

#[test]
fn a_quiet_release_taken_back_after_its_entry_was_dropped_needs_no_kick() {
    let wakes = tenured_and_idle();
    assert!(wakes.release_quietly(LOCK));
    assert_eq!(wakes.take_idle(0).len(), 1);
    assert!(wakes.freed_quietly(LOCK, 5000));
    // Taken back by an attempt of ours before the kick is due: no kick, and our release
    // after that grants (its entry forgotten with its waiter, the tenure with it).
    let back = wakes.join(LOCK, TTL);
    wakes.acquired(LOCK);
    drop(back);
    assert_ne!(wakes.kick_step(LOCK).0, KickStep::Kick);
    assert!(!wakes.release_quietly(LOCK));
}

#[tokio::test]
async fn a_settled_waiter_is_told_only_when_its_pause_ends_later_than_settled_untold() {
    use super::super::waiter::SETTLED_UNTOLD;
    let wakes = Arc::new(Wakes::default());
    let (soon, late, busy) = (
        wakes.join(LOCK, TTL),
        wakes.join(LOCK, TTL),
        wakes.join(LOCK, TTL),
    );
    // Far from the bar either way, so that a stalled test still finds each on its side.
    soon.pausing(Instant::now() + SETTLED_UNTOLD / 2);
    late.pausing(Instant::now() + SETTLED_UNTOLD * 30);
    // `busy` is between pauses: it may be about to wait for the wake, so it is told.
    for _ in 0..3 {
        let to = wakes.reserve(&channel(LOCK)).expect("a sleeping waiter");
        assert!(wakes.settle(&channel(LOCK), to, false));
    }
    assert!(!is_woken(&soon).await, "its pause ends soon enough");
    assert!(is_woken(&late).await);
    assert!(is_woken(&busy).await);
    // Each still finds its wait over as it looks up from the pause.
    for ticket in [&soon, &late, &busy] {
        assert!(ticket.view().settled);
        assert!(matches!(ticket.rearm(), Resume::Settled));
    }
}
