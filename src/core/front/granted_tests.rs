//! A handle's `acquiredAt` and `expiresAt` count from one moment, the winning request's send.
use super::Granted;
use crate::core::basics::clock::{wall_ms, Stamp};
use crate::core::basics::lease::Lease;
use std::time::{Duration, Instant};

fn lease(sent: Stamp, ttl: Duration) -> Lease {
    Lease::new("k".into(), b"lock:k".to_vec(), "t".into(), 1, sent, ttl)
}

#[test]
fn acquired_at_is_the_send_and_expiry_is_a_ttl_after_it() {
    let sent = Stamp::at(Instant::now() - Duration::from_millis(40));
    let ttl = Duration::from_millis(12_000);
    let lease = lease(sent, ttl);
    // Made 40 ms after the send, as a reply taken late would be.
    let granted = Granted::of(&lease, None);
    assert_eq!(granted.acquired_at_ms(), sent.wall_ms);
    assert_eq!(lease.expires_at_ms() - granted.acquired_at_ms(), 12_000);
    assert!(granted.acquired_at_ms() + 40 <= wall_ms());
}

#[test]
fn a_past_moment_is_never_dated_later_than_it_was() {
    for _ in 0..200 {
        let at = Instant::now() - Duration::from_micros(2_500);
        let before = wall_ms();
        let stamp = Stamp::at(at);
        // The wall clock 2.5 ms before `before` was read is at most before - 2 (whole ms).
        assert!(
            stamp.wall_ms + 2 <= before,
            "{} vs {}",
            stamp.wall_ms,
            before
        );
    }
}
