//! syncguard's `lock()` schedule, as its JavaScript computes it: how many scheduled attempts,
//! how long between them, and which of its three endings. The options are JS numbers and are
//! never validated there, so NaN, infinities, negatives and fractions are read here exactly
//! as its comparisons and `setTimeout` read them. No clock and no I/O: the caller passes the
//! time elapsed and a uniform draw.

use std::time::Duration;

/// How the delay grows between scheduled attempts (`backoff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// "exponential": the base, then doubled after each failed attempt.
    Doubling,
    /// Anything else: the base each time.
    Fixed,
}

impl Growth {
    /// syncguard's `backoff` option by name.
    pub fn named(backoff: &str) -> Growth {
        match backoff {
            "exponential" => Growth::Doubling,
            _ => Growth::Fixed,
        }
    }
}

/// How a delay is randomised (`jitter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    /// "equal": half the delay, plus up to the other half.
    Equal,
    /// "full": anywhere from 0 to the delay.
    Full,
    /// Anything else: the delay as it is.
    None,
}

impl Jitter {
    /// syncguard's `jitter` option by name.
    pub fn named(jitter: &str) -> Jitter {
        match jitter {
            "equal" => Jitter::Equal,
            "full" => Jitter::Full,
            _ => Jitter::None,
        }
    }
}

/// The acquisition options of one `lock()` call, as JS numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    pub max_retries: f64,
    pub base_ms: f64,
    pub growth: Growth,
    pub jitter: Jitter,
    pub timeout_ms: f64,
}

/// Which of syncguard's endings a `lock()` that got no lock came to (each its own message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GaveUp {
    /// The time was up before a scheduled attempt: "Failed to acquire lock after
    /// {elapsed_ms}ms ({attempts} attempts)", `attempts` counting the one not made.
    TimedOut { elapsed_ms: u64, attempts: u64 },
    /// Every retry failed: "Failed to acquire lock after {attempts} attempts (lock
    /// contention)".
    Contention { attempts: u64 },
    /// The delay before the next retry came to nothing: "Timeout reached before next retry
    /// ({elapsed_ms}ms elapsed)".
    NoTimeForRetry { elapsed_ms: u64 },
}

/// The longest delay Node's `setTimeout` keeps; longer ones, and those under 1 ms or NaN,
/// fire after 1 ms.
const TIMEOUT_MAX_MS: f64 = 2_147_483_647.0;

/// JS's `Math.min`/`Math.max`: NaN if either is.
fn js_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn js_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

impl Pace {
    /// Options with `backoff: "fixed"` and `jitter: "none"`: every delay is `base_ms`.
    pub fn fixed(max_retries: f64, base_ms: f64, timeout_ms: f64) -> Pace {
        Pace {
            max_retries,
            base_ms,
            growth: Growth::Fixed,
            jitter: Jitter::None,
            timeout_ms,
        }
    }

    /// Before scheduled attempt `attempts` (from 1), `elapsed_ms` after the call began:
    /// whether it may be made.
    pub fn before(&self, attempts: u64, elapsed_ms: u64) -> Result<(), GaveUp> {
        if elapsed_ms as f64 >= self.timeout_ms {
            return Err(GaveUp::TimedOut {
                elapsed_ms,
                attempts,
            });
        }
        Ok(())
    }

    /// After scheduled attempt `attempts` failed, `elapsed_ms` after the call began: how
    /// long to sleep before the next, or the ending. `unit` is a uniform draw from [0, 1)
    /// (`Math.random()`), used by the jitter.
    pub fn after_failure(
        &self,
        attempts: u64,
        elapsed_ms: u64,
        unit: f64,
    ) -> Result<Duration, GaveUp> {
        if attempts as f64 > self.max_retries {
            return Err(GaveUp::Contention { attempts });
        }
        let grown = match self.growth {
            Growth::Doubling => self.base_ms * 2f64.powf(attempts as f64 - 1.0),
            Growth::Fixed => self.base_ms,
        };
        let jittered = match self.jitter {
            Jitter::Equal => grown / 2.0 + unit * (grown / 2.0),
            Jitter::Full => unit * grown,
            Jitter::None => grown,
        };
        let left = self.timeout_ms - elapsed_ms as f64;
        let delay = js_min(jittered, js_max(0.0, left));
        if delay <= 0.0 {
            return Err(GaveUp::NoTimeForRetry { elapsed_ms });
        }
        Ok(timer(delay))
    }
}

/// What Node's `setTimeout` makes of a delay in ms.
fn timer(delay_ms: f64) -> Duration {
    if (1.0..=TIMEOUT_MAX_MS).contains(&delay_ms) {
        Duration::from_secs_f64(delay_ms / 1000.0)
    } else {
        Duration::from_millis(1)
    }
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
