//! Timestamps: seconds (OpenMetrics) or milliseconds (text format 0.0.4), told apart by
//! their shape, and the range of times a reader accepts.

use crate::TimeUnit;
use crate::lex::show;

/// An integer timestamp with at least this absolute value is in milliseconds (text format
/// 0.0.4); a smaller one is in seconds (OpenMetrics). 1e11 ms is 1973; 1e11 s is year 5138.
const MILLISECONDS_THRESHOLD: i64 = 100_000_000_000;

/// Whether a time (Unix ms) is one culprit reasons with: within the years -9999 to 9999,
/// what jiff (and RFC 3339) can name. Any time from a recording or a backend is checked, so
/// window and step arithmetic on it (± hours, + steps) can never overflow.
pub fn time_in_range(ms: i64) -> bool {
    jiff::Timestamp::from_millisecond(ms).is_ok()
}

/// Parses a timestamp token into its unit and Unix milliseconds, rounding to the nearest
/// millisecond: a token with `.`, `e` or `E` is seconds; an integer with absolute value
/// ≥ 1e11 is milliseconds; a smaller integer is seconds.
pub(crate) fn parse_timestamp(token: &str) -> Result<(TimeUnit, i64), String> {
    if let Some(parsed) = parse_plain_timestamp(token.as_bytes()) {
        return Ok(parsed);
    }
    let bad = || format!("expected a timestamp after the sample value, found {}", show(token));
    if token.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        let seconds: f64 = token.parse().map_err(|_| bad())?;
        if !seconds.is_finite() {
            return Err(bad());
        }
        let ms = (seconds * 1000.0).round();
        // Both bounds are just inside the i64 range (i64::MAX as f64 would round up to 2^63).
        if !(-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&ms) {
            return Err(format!("timestamp {} is out of range", show(token)));
        }
        Ok((TimeUnit::Seconds, ms as i64))
    } else {
        let value: i64 = token.parse().map_err(|_| bad())?;
        if value.unsigned_abs() >= MILLISECONDS_THRESHOLD as u64 {
            Ok((TimeUnit::Milliseconds, value))
        } else {
            // |value| < 1e11, so the product fits.
            Ok((TimeUnit::Seconds, value * 1000))
        }
    }
}

/// The common shapes in one pass, exactly: `[+-]digits` and `[+-]digits.digits` with at
/// most 15 integer digits, decimal seconds rounded half away from zero to the millisecond.
/// None for anything else (exponents, longer numbers, errors): the caller takes the slow
/// path.
#[inline]
fn parse_plain_timestamp(b: &[u8]) -> Option<(TimeUnit, i64)> {
    let (negative, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut i = 0;
    let mut int: i64 = 0;
    while let Some(&c) = digits.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        if i == 15 {
            return None;
        }
        int = int * 10 + i64::from(c - b'0');
        i += 1;
    }
    let (unit, ms) = match digits.get(i) {
        None if i == 0 => return None,
        None if int >= MILLISECONDS_THRESHOLD => (TimeUnit::Milliseconds, int),
        None => (TimeUnit::Seconds, int * 1000),
        Some(b'.') => {
            let fraction = &digits[i + 1..];
            if (i == 0 && fraction.is_empty()) || !fraction.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let mut ms = int;
            for k in 0..3 {
                ms = ms * 10 + fraction.get(k).map_or(0, |c| i64::from(c - b'0'));
            }
            if fraction.get(3).is_some_and(|&c| c >= b'5') {
                ms += 1;
            }
            (TimeUnit::Seconds, ms)
        }
        Some(_) => return None,
    };
    Some((unit, if negative { -ms } else { ms }))
}
