use super::*;

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
