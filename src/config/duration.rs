//! Durations (`"5m"`, `"20s"`, `"1h30m"`, `"7d"`), diagnosis windows and RFC 3339 times.

use crate::settings::Millis;

/// The shortest diagnosis window (`--window`, the API's `window=`): below a second no
/// scrape can land in it, and `0.5ms` is a typo.
pub const MIN_WINDOW: Millis = Millis::from_secs(1);

/// The longest diagnosis window: 100 years (36,525 days). No metrics store keeps a
/// century, and it keeps `at − window` a time every part writes (jiff's range starts at
/// year −9999); a long window is narrowed to the current backpressure episode anyway.
pub const MAX_WINDOW: Millis = Millis::from_secs(36_525 * 24 * 3600);

/// A diagnosis window, from [`MIN_WINDOW`] to [`MAX_WINDOW`]; the error says which bound
/// it crosses (the caller names the flag or parameter).
pub fn parse_window(s: &str) -> Result<Millis, String> {
    let w = s.parse::<Millis>().map_err(|e| if e.contains("too long") { too_long_window(s) } else { e })?;
    if w < MIN_WINDOW {
        return Err(format!("`{s}` is shorter than {MIN_WINDOW}, the shortest window (e.g. 5m)"));
    }
    if w > MAX_WINDOW {
        return Err(too_long_window(s));
    }
    Ok(w)
}

fn too_long_window(s: &str) -> String {
    format!("`{s}` is longer than {}d (100 years), the longest window", MAX_WINDOW.as_ms() / 86_400_000)
}

/// A time as RFC 3339 (`2026-11-29T10:36:00Z`), in ms since the epoch. The error tells a
/// time that is no RFC 3339 from one outside the range culprit takes (jiff's,
/// -009999-01-02T01:59:59Z to 9999-12-30T22:00:00Z) and from one without an offset.
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    match jiff::fmt::temporal::Pieces::parse(s) {
        Ok(p) if p.offset().is_none() => {
            Err(format!("`{s}` has no offset: add Z for UTC or one such as +01:00 (RFC 3339)"))
        }
        Ok(p) if p.date().year() > 0 => Err(format!(
            "`{s}` is after {}, the latest time culprit takes",
            jiff::Timestamp::from_second(jiff::Timestamp::MAX.as_second()).unwrap_or(jiff::Timestamp::MAX)
        )),
        Ok(_) => Err(format!("`{s}` is before {}, the earliest time culprit takes", jiff::Timestamp::MIN)),
        Err(_) => Err(format!("`{s}` is not an RFC 3339 time such as 2026-11-29T10:36:00Z")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_or_time_out_of_range_says_the_limit_it_crosses_not_that_it_is_malformed() {
        assert_eq!(parse_window("5m"), Ok(Millis::from_secs(300)));
        // 36,525 days × 86,400 s = 3,155,760,000 s: the longest window is accepted.
        assert_eq!(parse_window("36525d"), Ok(Millis::from_secs(3_155_760_000)));
        assert_eq!(
            parse_window("36526d").unwrap_err(),
            "`36526d` is longer than 36525d (100 years), the longest window"
        );
        // Past jiff's 7,304,484 days the number cannot even be read: still "too long".
        assert_eq!(
            parse_window("1000000000d").unwrap_err(),
            "`1000000000d` is longer than 36525d (100 years), the longest window"
        );
        assert_eq!(parse_window("0.5ms").unwrap_err(), "`0.5ms` is shorter than 1s, the shortest window (e.g. 5m)");
        assert!(parse_window("5x").unwrap_err().contains("is not a duration"));
        assert!(parse_window("soon").unwrap_err().contains("is not a duration"));
        assert!("1000000000d".parse::<Millis>().unwrap_err().contains("is too long: a duration is at most 7304484d"));
        assert!("99999999999999s".parse::<Millis>().unwrap_err().contains("is too long"));

        assert_eq!(parse_time("2026-11-29T10:36:00Z"), Ok(1_795_948_560_000));
        assert_eq!(parse_time("9999-12-30T22:00:00Z"), Ok(253_402_207_200_000));
        assert_eq!(
            parse_time("9999-12-31T23:59:59Z").unwrap_err(),
            "`9999-12-31T23:59:59Z` is after 9999-12-30T22:00:00Z, the latest time culprit takes"
        );
        assert!(parse_time("-009999-01-01T00:00:00Z").unwrap_err().contains("is before -009999-01-02T01:59:59Z"));
        assert!(parse_time("2026-11-29T10:36:00").unwrap_err().contains("has no offset"));
        assert!(parse_time("yesterday").unwrap_err().contains("is not an RFC 3339 time"));
        assert!(parse_time("2026-13-01T00:00:00Z").unwrap_err().contains("is not an RFC 3339 time"));
    }

    #[test]
    fn durations_read_the_friendly_forms_and_days() {
        assert_eq!("5m".parse::<Millis>().unwrap(), Millis(300_000));
        assert_eq!("7d".parse::<Millis>().unwrap(), Millis(7 * 86_400_000));
        assert_eq!("1h30m".parse::<Millis>().unwrap(), Millis(5_400_000));
        assert_eq!("250ms".parse::<Millis>().unwrap(), Millis(250));
        assert!("soon".parse::<Millis>().is_err());
    }
}
