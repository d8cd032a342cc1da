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
fn a_refusal_puts_the_server_down_until_a_call_is_answered() {
    let drops = Drops::default();
    assert!(drops.refusal().is_none());
    let next = drops.next_refusal();
    drops.refused(&LockError::Connection("refused".into()));
    assert_eq!(
        drops.refusal(),
        Some(LockError::Connection("refused".into()))
    );
    // Made before the refusal: it has been told, though never polled until now.
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let mut next = std::pin::pin!(next);
    assert!(next.as_mut().poll(&mut context).is_ready());
    drops.answered();
    assert!(drops.refusal().is_none(), "up again");
}
