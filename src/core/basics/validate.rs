//! Checks on user input, run before anything reaches Redis. Messages name the argument and
//! show the rejected value the way JavaScript would print it.

use super::error::LockError;
use std::time::Duration;

/// The longest TTL, wait or delay we accept: Node's own timer limit (about 24.8 days). Larger
/// values are almost always unit mistakes (seconds vs. microseconds), not intent.
pub const MAX_MS: u64 = 2_147_483_647;

/// Keys are stored byte-exact; this bound only stops a runaway string from being shipped to
/// Redis on every attempt. Redis itself allows 512 MB.
pub const MAX_KEY_BYTES: usize = 4 * 1024 * 1024;

/// The most retries `acquire` may be asked for; the backoff doubles each time, so anything
/// near this already waits for weeks.
pub const MAX_RETRIES: u32 = 1_000;

/// The bound of each command when the user sets none (`commandTimeout`).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_millis(5_000);

/// The shortest TTL a lock kept alive by refreshes may have: it is refreshed every third of
/// it, and a TTL shorter than this is nearly always seconds written where ms were meant.
pub const MIN_REFRESHED_TTL_MS: u64 = 100;

/// A TTL that refreshes are to keep alive (`ttl`, already checked as a TTL, from `arg`).
pub fn refreshed_ttl(arg: &'static str, ttl: Duration) -> Result<Duration, LockError> {
    if ttl.as_millis() < u128::from(MIN_REFRESHED_TTL_MS) {
        return Err(LockError::invalid_range(
            arg,
            format!(
                "{arg} must be at least {MIN_REFRESHED_TTL_MS} ms with autoRefresh (the lock is refreshed every third of it), got {} ms; TTLs are in milliseconds, not seconds",
                ttl.as_millis()
            ),
        ));
    }
    Ok(ttl)
}

pub fn key(arg: &'static str, key: &str) -> Result<(), LockError> {
    if key.is_empty() {
        return Err(LockError::invalid_type(
            arg,
            format!("{arg} must be a non-empty string"),
        ));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(LockError::invalid_range(
            arg,
            format!(
                "{arg} must be at most {MAX_KEY_BYTES} bytes long, got {} bytes",
                key.len()
            ),
        ));
    }
    Ok(())
}

/// A strictly positive whole number of milliseconds, at most `MAX_MS`.
pub fn positive_ms(arg: &'static str, value: f64) -> Result<Duration, LockError> {
    whole_ms(arg, value, 1)
}

/// A whole number of milliseconds from zero up to `MAX_MS`.
pub fn non_negative_ms(arg: &'static str, value: f64) -> Result<Duration, LockError> {
    whole_ms(arg, value, 0)
}

pub fn count(arg: &'static str, value: f64, max: u32) -> Result<u32, LockError> {
    if !is_whole(value) || value < 0.0 || value > f64::from(max) {
        return Err(LockError::invalid_range(
            arg,
            format!(
                "{arg} must be a whole number from 0 to {max}, got {}",
                js_number(value)
            ),
        ));
    }
    // In range 0..=max and whole, so the cast is exact.
    Ok(value as u32)
}

fn whole_ms(arg: &'static str, value: f64, min: u64) -> Result<Duration, LockError> {
    // `value >= min` is false for NaN, and -0.0 fails it for min 1 as it should.
    let in_range = value >= min as f64 && value <= MAX_MS as f64;
    if !is_whole(value) || !in_range {
        let lower = if min == 0 { "0" } else { "1" };
        return Err(LockError::invalid_range(
            arg,
            format!(
                "{arg} must be a whole number of milliseconds from {lower} to {MAX_MS}, got {}",
                js_number(value)
            ),
        ));
    }
    Ok(Duration::from_millis(value as u64))
}

/// How long a lock's fence counter is kept past the lock (see token.rs): `value` ms, 0 or
/// `Infinity` for forever (answered as 0), `None` for the default.
pub fn fence_retention(arg: &'static str, value: Option<f64>) -> Result<u64, LockError> {
    use super::token::{FENCE_RETENTION_MAX_MS, FENCE_RETENTION_MS};
    match value {
        None => Ok(FENCE_RETENTION_MS),
        Some(ms) if ms == f64::INFINITY => Ok(0),
        Some(ms) if is_whole(ms) && ms >= 0.0 && ms <= FENCE_RETENTION_MAX_MS as f64 => {
            Ok(ms as u64)
        }
        Some(ms) => Err(LockError::invalid_range(
            arg,
            format!(
                "{arg} must be a whole number of milliseconds from 0 to {FENCE_RETENTION_MAX_MS}, or Infinity (0 and Infinity keep fence counters forever), got {}",
                js_number(ms)
            ),
        )),
    }
}

fn is_whole(value: f64) -> bool {
    value.is_finite() && value.fract() == 0.0
}

/// Prints a number as JavaScript's `String(n)` would for the values users get wrong.
pub fn js_number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if value != 0.0 && (value.abs() >= 1e21 || value.abs() < 1e-6) {
        // JavaScript switches to exponent form here: 1e+21, 5e-324.
        let text = format!("{value:e}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => text,
        }
    } else if value.fract() == 0.0 {
        format!("{}", value as i128)
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::basics::error::InvalidKind;

    fn range_arg(err: LockError) -> (&'static str, InvalidKind) {
        match err {
            LockError::Invalid { arg, kind, .. } => (arg, kind),
            other => panic!("not a validation error: {other:?}"),
        }
    }

    #[test]
    fn accepts_whole_positive_ttls() {
        assert_eq!(positive_ms("ttlMs", 1.0), Ok(Duration::from_millis(1)));
        assert_eq!(
            positive_ms("ttlMs", MAX_MS as f64),
            Ok(Duration::from_millis(MAX_MS))
        );
    }

    #[test]
    fn rejects_every_bad_ttl_as_a_range_error_naming_the_argument() {
        for bad in [
            0.0,
            -0.0,
            -1.0,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e21,
            9007199254740992.0,
            MAX_MS as f64 + 1.0,
        ] {
            let err = positive_ms("ttlMs", bad).expect_err("must reject");
            assert_eq!(range_arg(err), ("ttlMs", InvalidKind::Range), "{bad}");
        }
    }

    #[test]
    fn zero_is_a_valid_delay_but_not_a_ttl() {
        assert_eq!(non_negative_ms("retryDelayMs", 0.0), Ok(Duration::ZERO));
        assert!(positive_ms("ttlMs", 0.0).is_err());
    }

    #[test]
    fn refreshed_ttls_have_a_floor_named_in_ms() {
        assert!(refreshed_ttl("ttlMs", Duration::from_millis(100)).is_ok());
        let err = refreshed_ttl("ttlMs", Duration::from_millis(5)).unwrap_err();
        assert_eq!(range_arg(err.clone()), ("ttlMs", InvalidKind::Range));
        assert!(err.to_string().contains("at least 100 ms"), "{err}");
        assert!(err.to_string().contains("got 5 ms"), "{err}");
    }

    #[test]
    fn empty_key_is_a_type_error() {
        let err = key("key", "").expect_err("must reject");
        assert_eq!(range_arg(err), ("key", InvalidKind::Type));
        assert!(key("key", "a b\n{*}?ü\0").is_ok());
    }

    #[test]
    fn messages_print_numbers_like_javascript() {
        assert_eq!(js_number(f64::NAN), "NaN");
        assert_eq!(js_number(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(js_number(1.5), "1.5");
        assert_eq!(js_number(-1.0), "-1");
        assert_eq!(js_number(1e21), "1e+21");
        assert_eq!(js_number(5e-324), "5e-324");
        assert_eq!(js_number(f64::MAX), "1.7976931348623157e+308");
        let err = positive_ms("ttlMs", f64::INFINITY).expect_err("must reject");
        assert!(err.to_string().contains("got Infinity"), "{err}");
    }

    #[test]
    fn counts_are_bounded() {
        assert_eq!(count("maxRetries", 3.0, MAX_RETRIES), Ok(3));
        assert!(count("maxRetries", -1.0, MAX_RETRIES).is_err());
        assert!(count("maxRetries", 0.5, MAX_RETRIES).is_err());
        assert!(count("maxRetries", 1001.0, MAX_RETRIES).is_err());
    }

    #[test]
    fn fence_retention_is_whole_ms_or_forever() {
        use crate::core::basics::token::{FENCE_RETENTION_MAX_MS, FENCE_RETENTION_MS};
        let arg = "fenceRetentionMs";
        assert_eq!(fence_retention(arg, None), Ok(FENCE_RETENTION_MS));
        assert_eq!(fence_retention(arg, Some(0.0)), Ok(0));
        assert_eq!(fence_retention(arg, Some(f64::INFINITY)), Ok(0));
        assert_eq!(fence_retention(arg, Some(1.0)), Ok(1));
        let max = FENCE_RETENTION_MAX_MS as f64;
        assert_eq!(fence_retention(arg, Some(max)), Ok(FENCE_RETENTION_MAX_MS));
        for bad in [-1.0, 1.5, f64::NAN, f64::NEG_INFINITY, max + 1.0, 1e300] {
            let err = fence_retention(arg, Some(bad)).expect_err("must reject");
            assert_eq!(range_arg(err), (arg, InvalidKind::Range), "{bad}");
        }
    }
}
