//! Numbers as Redis reads and writes them: integers strictly (no sign but '-', no leading
//! zeros, no spaces), scores as floats without NaN, and doubles printed with `%.17g`, which
//! is what Redis 7.0 does both for a Lua number passed to `redis.call` and for a score in a
//! RESP2 reply; cjson's `%.14g`, and C's `strtod`, with which cjson reads a number.

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
    format_g(value, 17)
}

/// C's `printf("%.<precision>g", value)` (cjson writes numbers with 14).
pub fn format_g(value: f64, precision: usize) -> String {
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
    let precision = precision.max(1);
    // An integer that a double holds exactly, with no more digits than the precision, is
    // printed as itself: what scripts send most (TTLs, fences), without the scientific
    // round trip.
    let whole = 9_007_199_254_740_992f64.min(10f64.powi(precision.min(17) as i32));
    if value.fract() == 0.0 && value.abs() < whole {
        return (value as i64).to_string();
    }
    let scientific = format!("{value:.*e}", precision - 1);
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let exponent: i64 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i64 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = usize::try_from(precision as i64 - 1 - exponent).unwrap_or(0);
    trim_fraction(&format!("{value:.decimals$}")).to_owned()
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// C's `strtod` on the start of `text`: the value and how many bytes it read, `None` when
/// no number starts there. Decimal and hexadecimal forms, `inf`, `infinity` and `nan`.
pub fn strtod(text: &[u8]) -> Option<(f64, usize)> {
    let (negative, sign) = match text.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let rest = &text[sign..];
    let lower: Vec<u8> = rest.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let (value, used) = if lower.starts_with(b"infinity") {
        (f64::INFINITY, 8)
    } else if lower.starts_with(b"inf") {
        (f64::INFINITY, 3)
    } else if lower.starts_with(b"nan") {
        let close = match rest.get(3) {
            Some(b'(') => rest[4..]
                .iter()
                .position(|&b| b == b')')
                .filter(|&n| {
                    rest[4..4 + n]
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
                })
                .map(|n| n + 2),
            _ => None,
        };
        (f64::NAN, 3 + close.unwrap_or(0))
    } else if lower.starts_with(b"0x") && rest.get(2).is_some_and(u8::is_ascii_hexdigit) {
        hexadecimal(&rest[2..]).map(|(value, used)| (value, used + 2))?
    } else {
        decimal(rest)?
    };
    Some((if negative { -value } else { value }, sign + used))
}

fn digits(text: &[u8], from: usize, radix: u32) -> usize {
    text[from.min(text.len())..]
        .iter()
        .take_while(|b| (**b as char).is_digit(radix))
        .count()
}

fn decimal(text: &[u8]) -> Option<(f64, usize)> {
    let whole = digits(text, 0, 10);
    let mut used = whole;
    let mut fraction = 0;
    if text.get(used) == Some(&b'.') {
        fraction = digits(text, used + 1, 10);
        if whole + fraction > 0 {
            used += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return None;
    }
    if matches!(text.get(used), Some(b'e' | b'E')) {
        let signed = matches!(text.get(used + 1), Some(b'+' | b'-')) as usize;
        let exponent = digits(text, used + 1 + signed, 10);
        if exponent > 0 {
            used += 1 + signed + exponent;
        }
    }
    let literal = std::str::from_utf8(&text[..used]).ok()?;
    let literal = literal.strip_suffix('.').unwrap_or(literal);
    literal.parse().ok().map(|value| (value, used))
}

fn hexadecimal(text: &[u8]) -> Option<(f64, usize)> {
    let whole = digits(text, 0, 16);
    let mut used = whole;
    let mut value = 0.0f64;
    for &b in &text[..whole] {
        value = value * 16.0 + f64::from((b as char).to_digit(16)?);
    }
    if text.get(used) == Some(&b'.') {
        let fraction = digits(text, used + 1, 16);
        let mut scale = 1.0 / 16.0;
        for &b in &text[used + 1..used + 1 + fraction] {
            value += f64::from((b as char).to_digit(16)?) * scale;
            scale /= 16.0;
        }
        used += 1 + fraction;
    }
    if matches!(text.get(used), Some(b'p' | b'P')) {
        let signed = matches!(text.get(used + 1), Some(b'+' | b'-'));
        let count = digits(text, used + 1 + signed as usize, 10);
        if count > 0 {
            let from = used + 1 + signed as usize;
            let power: i32 = std::str::from_utf8(&text[from..from + count])
                .ok()?
                .parse()
                .unwrap_or(i32::MAX);
            let power = if text[used + 1] == b'-' {
                -power
            } else {
                power
            };
            value *= 2f64.powi(power);
            used = from + count;
        }
    }
    Some((value, used))
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

    #[test]
    fn doubles_print_as_percent_14g() {
        assert_eq!(format_g(1_717_000_000_123.0, 14), "1717000000123");
        assert_eq!(format_g(101_795_754_377_590.0, 14), "1.0179575437759e+14");
        assert_eq!(format_g(999_999_999_999_999.0, 14), "1e+15");
        // Either side of the whole numbers printed as themselves.
        assert_eq!(format_g(99_999_999_999_999.0, 14), "99999999999999");
        assert_eq!(format_g(100_000_000_000_000.0, 14), "1e+14");
        assert_eq!(format_g(-99_999_999_999_999.0, 14), "-99999999999999");
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(0.0001, 14), "0.0001");
        assert_eq!(format_g(0.00001, 14), "1e-05");
        assert_eq!(format_g(-0.0, 14), "-0");
    }
}
