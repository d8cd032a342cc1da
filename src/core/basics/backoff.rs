//! How long to sleep between attempts.

use super::validate::MAX_MS;
use std::time::Duration;

/// `acquire` retries after `base`, `2 x base`, `4 x base`, ... as the original package does.
/// Saturates at the largest delay we accept anywhere instead of overflowing.
pub fn retry_delay(base: Duration, retry_index: u32) -> Duration {
    let factor = 1u64.checked_shl(retry_index).unwrap_or(u64::MAX);
    let ms = (base.as_millis() as u64).saturating_mul(factor).min(MAX_MS);
    Duration::from_millis(ms)
}

/// `waitForLock` polls every `base`, but never sleeps past the moment the holder's TTL runs
/// out (when Redis told us) nor past the caller's deadline, and always at least 1 ms.
pub fn poll_delay(base: Duration, holder_ttl: Option<Duration>, remaining: Duration) -> Duration {
    let mut delay = base;
    if let Some(ttl) = holder_ttl {
        delay = delay.min(ttl.saturating_add(Duration::from_millis(1)));
    }
    delay.min(remaining).max(Duration::from_millis(1))
}

/// The longest a waiter in a lock's ring stretches its polls to (see `ring_poll`), unless
/// its own poll is longer.
pub const RING_POLL_CAP: Duration = Duration::from_millis(100);

/// A `waitForLock` poll of a waiter whose connection is in the lock's ring, after `failed`
/// attempts found the lock held: a release grants it the lock in turn, so each poll only
/// finds it held, at a few commands each. They double from `base`, up to the longer of
/// `base` and `RING_POLL_CAP`: a lock left free with nobody to grant it (its process killed
/// right after a quiet release, or freed for a waiter without grants) is still found within
/// that. Before `poll_delay`'s bounds.
pub fn ring_poll(base: Duration, failed: u32) -> Duration {
    let cap = base.max(RING_POLL_CAP);
    retry_delay(base, failed.saturating_sub(1).min(16)).min(cap)
}

/// `@jonaskahn/maestro`'s schedule: after the n-th failed attempt (n from 1) sleep
/// `min(base x 2^n, cap)`, stretched by 0-5 % of positive jitter (`unit` is a uniform draw
/// from [0, 1)). The jitter keeps contenders that started together from retrying together.
pub fn maestro_delay(base: Duration, cap: Duration, attempt: u32, unit: f64) -> Duration {
    let grown = retry_delay(base, attempt).min(cap);
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let stretched = grown.as_millis() as f64 * (1.0 + unit * 0.05);
    Duration::from_millis(stretched.floor() as u64)
}

/// A uniform draw from [0, 1) off the OS CSPRNG; 0 if the OS refuses, which only removes
/// the jitter.
pub fn unit_random() -> f64 {
    getrandom::u64()
        .map(|n| (n >> 11) as f64 / (1u64 << 53) as f64)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn retries_double_from_the_base() {
        let delays: Vec<_> = (0..4).map(|i| retry_delay(MS(100), i)).collect();
        assert_eq!(delays, [MS(100), MS(200), MS(400), MS(800)]);
    }

    #[test]
    fn maestro_backoff_doubles_up_to_the_cap_with_at_most_five_percent_jitter() {
        assert_eq!(maestro_delay(MS(100), MS(1000), 1, 0.0), MS(200));
        assert_eq!(maestro_delay(MS(100), MS(1000), 3, 0.0), MS(800));
        assert_eq!(maestro_delay(MS(100), MS(1000), 5, 0.0), MS(1000));
        assert_eq!(maestro_delay(MS(30_000), MS(18_000), 1, 0.999), MS(18_899));
        let unit = unit_random();
        assert!((0.0..1.0).contains(&unit));
    }

    #[test]
    fn retry_delay_saturates() {
        assert_eq!(retry_delay(MS(100), 200), MS(MAX_MS));
    }

    #[test]
    fn polling_wakes_when_the_holder_expires_or_the_deadline_comes() {
        assert_eq!(poll_delay(MS(100), Some(MS(20)), MS(1000)), MS(21));
        assert_eq!(poll_delay(MS(100), None, MS(30)), MS(30));
        assert_eq!(poll_delay(MS(0), None, MS(30)), MS(1));
    }

    #[test]
    fn ring_polls_double_up_to_the_cap_or_the_poll_itself() {
        let delays: Vec<_> = (1..7).map(|failed| ring_poll(MS(10), failed)).collect();
        assert_eq!(delays, [MS(10), MS(20), MS(40), MS(80), MS(100), MS(100)]);
        // A poll longer than the cap is never shortened, nor stretched.
        assert_eq!(ring_poll(MS(250), 5), MS(250));
        assert_eq!(ring_poll(MS(10), 0), MS(10));
        assert_eq!(ring_poll(MS(10), u32::MAX), MS(100));
    }
}
