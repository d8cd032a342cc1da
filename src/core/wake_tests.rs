use super::*;
use std::time::Duration;

const LOCK: &[u8] = b"lock:job";

async fn is_woken(ticket: &Ticket) -> bool {
    tokio::time::timeout(Duration::from_millis(20), ticket.woken())
        .await
        .is_ok()
}

#[tokio::test]
async fn a_turn_wakes_the_first_waiter_only() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK), wakes.join(LOCK));
    assert!(!first.is_behind_others());
    assert!(second.is_behind_others());
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::Woke));
    assert!(is_woken(&first).await);
    assert!(!is_woken(&second).await);
}

#[tokio::test]
async fn a_woken_waiter_is_skipped_by_the_next_turn_until_it_tries_again() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK), wakes.join(LOCK));
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
    let gone = wakes.join(LOCK);
    drop(gone);
    assert!(matches!(wakes.take_turn(&channel(LOCK)), Turn::PassOn(key) if key == LOCK));
}

#[tokio::test]
async fn a_waiter_that_leaves_after_its_wake_hands_it_to_the_next() {
    let wakes = Arc::new(Wakes::default());
    let (first, second) = (wakes.join(LOCK), wakes.join(LOCK));
    wakes.take_turn(&channel(LOCK));
    drop(first);
    assert!(is_woken(&second).await);
}

#[tokio::test]
async fn our_own_release_wakes_our_next_waiter() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK);
    assert!(wakes.has_waiters(&channel(LOCK)));
    wakes.wake_local(&channel(LOCK));
    assert!(is_woken(&waiter).await);
    drop(waiter);
    assert!(!wakes.has_waiters(&channel(LOCK)));
}

#[tokio::test]
async fn a_lost_connection_forgets_subscriptions_and_queue_places_and_wakes_the_first() {
    let wakes = Arc::new(Wakes::default());
    let waiter = wakes.join(LOCK);
    wakes.mark_subscribed(&channel(LOCK));
    wakes.mark_queued(&channel(LOCK), true);
    assert!(waiter.is_subscribed() && !waiter.needs_preparing());
    wakes.connection_lost();
    assert!(!waiter.is_subscribed() && waiter.needs_preparing());
    assert!(is_woken(&waiter).await);
}

#[test]
fn idle_channels_are_dropped_in_one_batch_past_the_limit_unless_still_queued() {
    let wakes = Arc::new(Wakes::default());
    for n in 0..4 {
        let key = format!("lock:{n}");
        let ticket = wakes.join(key.as_bytes());
        wakes.mark_subscribed(ticket.channel());
        if n == 0 {
            wakes.mark_queued(ticket.channel(), true);
        }
    }
    assert!(wakes.take_idle(4).is_empty());
    let dropped = wakes.take_idle(2);
    assert_eq!(dropped.len(), 3, "the queued one stays");
    assert!(!dropped.contains(&channel(b"lock:0")));
}
