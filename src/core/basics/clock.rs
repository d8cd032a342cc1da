//! Wall-clock time is only for display (`acquiredAt`, `expiresAt`); every decision about
//! whether a lock is still ours uses the monotonic clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, as `Date.now()` gives them.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The moment a request was sent, on both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub at: std::time::Instant,
    pub wall_ms: u64,
}

impl Stamp {
    /// A moment in the past, with its wall-clock time worked out from the monotonic gap,
    /// rounded up so the wall time is never later than the moment (see `now`).
    pub fn at(at: std::time::Instant) -> Self {
        let ago = u64::try_from(at.elapsed().as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
        Stamp {
            at,
            wall_ms: wall_ms().saturating_sub(ago),
        }
    }

    /// The wall clock is read first: a pause between the two readings then makes the wall
    /// time early, never late, and an expiry counted from it (`expiresAt`) errs towards
    /// the monotonic deadline's side, as network delay does.
    pub fn now() -> Self {
        let wall_ms = wall_ms();
        Stamp {
            at: std::time::Instant::now(),
            wall_ms,
        }
    }
}

/// How long a lock granted for `ttl` counts as ours: the TTL less a margin for clock-rate
/// drift and scheduling (1 % + 2 ms, as Redlock allows), so we stop relying on a lock, and
/// tell its holder, before Redis can hand it to anyone else.
pub fn validity(ttl: std::time::Duration) -> std::time::Duration {
    ttl.saturating_sub(ttl / 100 + std::time::Duration::from_millis(2))
}
