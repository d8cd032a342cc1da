//! Numbers as Redis reads and writes them: integers strictly (no sign but '-', no leading
//! zeros, no spaces), scores as floats without NaN, and doubles printed with `%.17g`, which
//! is what Redis 7.0 does both for a Lua number passed to `redis.call` and for a score in a
//! RESP2 reply.

/// Redis's `string2ll`: the only strings INCRBY, PX and friends accept.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(digit - b'0');
        value = if negative {
            value.checked_mul(10)?.checked_sub(digit)?
        } else {
            value.checked_mul(10)?.checked_add(digit)?
        };
    }
    Some(value)
}

/// A score or other float argument; NaN and surrounding spaces are refused, as by Redis.
pub fn parse_f64(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
    {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// C's `printf("%.17g", value)`.
pub fn format_g17(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // An integer that a double holds exactly is printed as itself by %.17g (it has at most
    // 16 digits): what scripts send most (TTLs, fences), without the scientific round trip.
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        return (value as i64).to_string();
    }
    let scientific = format!("{value:.16e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..17).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = usize::try_from(16 - exponent).unwrap_or(0);
    trim_fraction(&format!("{value:.decimals$}")).to_owned()
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1.0",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn doubles_print_as_percent_17g() {
        assert_eq!(format_g17(1.0), "1");
        assert_eq!(format_g17(1_717_000_000_123_456.0), "1717000000123456");
        assert_eq!(format_g17(1e9), "1000000000");
        assert_eq!(format_g17(0.5), "0.5");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g17(1.5e-5), "1.5e-05");
        assert_eq!(format_g17(123_456_789.123), "123456789.123");
        assert_eq!(format_g17(-2.25), "-2.25");
        // Either side of the integers printed without the scientific form.
        assert_eq!(format_g17(-9_007_199_254_740_991.0), "-9007199254740991");
        assert_eq!(format_g17(9_007_199_254_740_992.0), "9007199254740992");
        assert_eq!(
            format_g17(12_345_678_901_234_567_890.0),
            "1.2345678901234567e+19"
        );
    }
}
