//! syncguard's schedule with its defaults and with every odd value its JS arithmetic lets
//! through.

use super::*;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// `LOCK_DEFAULTS`: 10 retries from 100 ms, doubling, equal jitter, 5 s.
fn defaults() -> Pace {
    Pace {
        max_retries: 10.0,
        base_ms: 100.0,
        growth: Growth::Doubling,
        jitter: Jitter::Equal,
        timeout_ms: 5000.0,
    }
}

fn plain(base_ms: f64, timeout_ms: f64) -> Pace {
    Pace::fixed(defaults().max_retries, base_ms, timeout_ms)
}

#[test]
fn the_defaults_double_with_equal_jitter_for_ten_retries() {
    let pace = defaults();
    let lowest: Vec<_> = (1..=5).map(|n| pace.after_failure(n, 0, 0.0)).collect();
    assert_eq!(
        lowest,
        [
            Ok(MS(50)),
            Ok(MS(100)),
            Ok(MS(200)),
            Ok(MS(400)),
            Ok(MS(800))
        ]
    );
    let high = pace.after_failure(3, 0, 0.5).unwrap();
    assert_eq!(high, MS(300), "half of 400, and half of the other half");
    assert!(
        pace.after_failure(10, 0, 0.0).is_ok(),
        "the tenth retry still sleeps first"
    );
    assert_eq!(
        pace.after_failure(11, 0, 0.0),
        Err(GaveUp::Contention { attempts: 11 }),
        "at most maxRetries + 1 attempts"
    );
}

#[test]
fn a_retry_count_is_compared_as_js_compares_it() {
    let with = |max_retries| Pace {
        max_retries,
        ..defaults()
    };
    // 2.5: `attempts > 2.5` first holds at 3.
    assert!(with(2.5).after_failure(2, 0, 0.0).is_ok());
    assert_eq!(
        with(2.5).after_failure(3, 0, 0.0),
        Err(GaveUp::Contention { attempts: 3 })
    );
    for none in [0.0, -1.0, f64::NEG_INFINITY] {
        assert_eq!(
            with(none).after_failure(1, 0, 0.0),
            Err(GaveUp::Contention { attempts: 1 })
        );
    }
    for unlimited in [f64::NAN, f64::INFINITY] {
        assert!(with(unlimited).after_failure(1_000, 0, 0.0).is_ok());
    }
}

#[test]
fn the_time_is_checked_before_every_scheduled_attempt() {
    let pace = defaults();
    assert_eq!(pace.before(1, 0), Ok(()));
    assert_eq!(pace.before(4, 4_999), Ok(()));
    assert_eq!(
        pace.before(4, 5_000),
        Err(GaveUp::TimedOut {
            elapsed_ms: 5_000,
            attempts: 4
        })
    );
    // timeoutMs 0 (or below): refused before the first attempt, no I/O.
    for none in [0.0, -5.0] {
        assert_eq!(
            plain(100.0, none).before(1, 0),
            Err(GaveUp::TimedOut {
                elapsed_ms: 0,
                attempts: 1
            })
        );
    }
    for never in [f64::NAN, f64::INFINITY] {
        assert_eq!(plain(100.0, never).before(99, u64::MAX / 2), Ok(()));
    }
}

#[test]
fn a_delay_is_clamped_to_the_time_left_and_none_left_ends_it() {
    let pace = defaults();
    assert_eq!(pace.after_failure(4, 4_950, 0.999), Ok(MS(50)));
    assert_eq!(
        pace.after_failure(2, 5_000, 0.5),
        Err(GaveUp::NoTimeForRetry { elapsed_ms: 5_000 })
    );
    assert_eq!(
        pace.after_failure(2, 6_000, 0.5),
        Err(GaveUp::NoTimeForRetry { elapsed_ms: 6_000 })
    );
    // Negative delays end it at once; so does full jitter drawing 0.
    assert_eq!(
        plain(-10.0, 5_000.0).after_failure(1, 3, 0.5),
        Err(GaveUp::NoTimeForRetry { elapsed_ms: 3 })
    );
    let full = Pace {
        jitter: Jitter::Full,
        ..defaults()
    };
    assert_eq!(
        full.after_failure(1, 0, 0.0),
        Err(GaveUp::NoTimeForRetry { elapsed_ms: 0 })
    );
    assert_eq!(full.after_failure(2, 0, 0.25), Ok(MS(50)));
}

#[test]
fn fixed_growth_sleeps_the_base_each_time() {
    let pace = plain(250.0, 60_000.0);
    for attempts in 1..=10 {
        assert_eq!(pace.after_failure(attempts, 0, 0.7), Ok(MS(250)));
    }
}

#[test]
fn what_set_timeout_cannot_take_fires_after_one_millisecond() {
    // NaN delay or NaN time left: `NaN <= 0` is false, and setTimeout(NaN) waits 1 ms.
    assert_eq!(plain(f64::NAN, 5_000.0).after_failure(1, 0, 0.5), Ok(MS(1)));
    assert_eq!(plain(100.0, f64::NAN).after_failure(1, 0, 0.5), Ok(MS(1)));
    // Under 1 ms, and past 2^31 - 1 ms.
    assert_eq!(plain(0.5, 5_000.0).after_failure(1, 0, 0.5), Ok(MS(1)));
    assert_eq!(
        plain(3e9, f64::INFINITY).after_failure(1, 0, 0.5),
        Ok(MS(1))
    );
    assert_eq!(plain(3e9, 1e12).after_failure(1, 0, 0.5), Ok(MS(1)));
    let doubling = Pace {
        timeout_ms: f64::INFINITY,
        max_retries: f64::INFINITY,
        ..defaults()
    };
    assert_eq!(
        doubling.after_failure(2_000, 0, 0.5),
        Ok(MS(1)),
        "2^1999 x 100"
    );
    assert_eq!(
        plain(2_147_483_647.0, f64::INFINITY).after_failure(1, 0, 0.5),
        Ok(MS(2_147_483_647))
    );
}
