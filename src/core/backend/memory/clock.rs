//! The keyspace's time: a wall clock that never jumps. Expiries are absolute, as Redis keeps
//! them, but counted on the monotonic clock from the wall time the keyspace started at, so a
//! TTL set with PX and an instant set with PEXPIREAT (from TIME) agree, and a system clock
//! step cannot expire or revive a lock.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    wall_origin_us: i64,
}

/// One reading, taken once per step (`Instance::run`) so everything in it sees the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub us: i64,
}

impl Now {
    pub fn ms(self) -> i64 {
        self.us.div_euclid(1000)
    }
}

impl Clock {
    pub fn new() -> Self {
        let wall_origin_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| i64::try_from(since.as_micros()).unwrap_or(i64::MAX / 2))
            .unwrap_or(0);
        Clock {
            origin: Instant::now(),
            wall_origin_us,
        }
    }

    pub fn now(&self) -> Now {
        #[cfg(test)]
        if let Some(us) = frozen::now() {
            return Now { us };
        }
        let elapsed = i64::try_from(self.origin.elapsed().as_micros()).unwrap_or(i64::MAX / 4);
        Now {
            us: self.wall_origin_us.saturating_add(elapsed),
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// A clock a test stops, on its own thread: two keyspaces that must agree to the
/// millisecond (native_tests.rs) read the same time.
#[cfg(test)]
pub mod frozen {
    use std::cell::Cell;

    thread_local! {
        static AT: Cell<Option<i64>> = const { Cell::new(None) };
    }

    pub fn now() -> Option<i64> {
        AT.with(Cell::get)
    }

    /// Every keyspace read on this thread sees `us` (µs since the epoch) from now on.
    pub fn set(us: Option<i64>) {
        AT.with(|at| at.set(us));
    }
}
