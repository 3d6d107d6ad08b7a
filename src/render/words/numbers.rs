//! Numbers as a person reads them: `97%`, `1660`, `12 min`, `3.5 MB`. Every sentence of a
//! verdict writes its numbers through these, so a value reads the same everywhere.

use crate::model::verdict::round_sig;

/// Joins at most `max` items, then says how many more there are.
pub fn limited_list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, and {} more", items[..max].join(", "), items.len() - max)
    }
}

/// `0.973` → `97%`.
pub fn pct(ratio: f64) -> String {
    // Rounded to 4 significant digits first, so float sums that differ in the last bits
    // (a live backend and its recording) read alike.
    no_negative_zero(format!("{:.0}%", round_sig(ratio) * 100.0))
}

/// A formatted number that rounds to zero is written without its minus sign: `-0.3` at no
/// decimals is `0`, never `-0`.
pub fn no_negative_zero(s: String) -> String {
    match s.strip_prefix('-') {
        Some(rest) if !rest.chars().any(|c| c.is_ascii_digit() && c != '0') => rest.to_string(),
        _ => s,
    }
}

/// [`pct`] of a value that may be missing: `unknown` then, never `0%`.
pub fn pct_or_unknown(ratio: Option<f64>) -> String {
    ratio.map(pct).unwrap_or_else(|| "unknown".into())
}

/// A rate or count, readable: `1660`, `12.5`, `0.84`.
pub fn num(v: f64) -> String {
    let a = v.abs();
    no_negative_zero(if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    })
}

/// A rate or count to three significant digits, readable: `33400`, `778000`, `12.5`:
/// advice numbers that should not wobble with the last digits of a float sum.
pub fn approx(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let digits = v.abs().log10().floor() as i32 - 2;
        let factor = 10f64.powi(digits);
        no_negative_zero(format!("{:.0}", (v / factor).round() * factor))
    } else {
        num(v)
    }
}

/// Seconds, readable: `45 s`, `12 min`, `3.5 h`, `2.1 d`.
pub fn human_secs(s: f64) -> String {
    no_negative_zero(if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} d", s / 86400.0)
    })
}

/// A short time given in ms — per record, per request — to three significant digits in
/// the unit that keeps it readable: `1.52 ms`, `250 ms`, `2.50 µs`, `40.0 ns`; `0 ms` only
/// for zero. A per-record time is often far below a millisecond (a job at 1 M records/s per
/// subtask spends 1 µs on each): never rounded to `0.00 ms`.
pub fn per_record(ms: f64) -> String {
    let a = ms.abs();
    let (v, unit) = if a == 0.0 || !a.is_finite() {
        return no_negative_zero(format!("{ms:.0} ms"));
    } else if a >= 1000.0 {
        return human_secs(ms / 1000.0);
    } else if a >= 1.0 {
        (ms, "ms")
    } else if a >= 1e-3 {
        (ms * 1e3, "µs")
    } else {
        (ms * 1e6, "ns")
    };
    let decimals = match v.abs() {
        x if x >= 100.0 => 0,
        x if x >= 10.0 => 1,
        _ => 2,
    };
    no_negative_zero(format!("{v:.decimals$} {unit}"))
}

/// Bytes, readable: `3.5 MB`.
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    no_negative_zero(if i == 0 { format!("{v:.0} {}", UNITS[i]) } else { format!("{v:.1} {}", UNITS[i]) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(pct(0.973), "97%");
        assert_eq!(num(1660.03), "1660");
        // Three significant digits from 1000 up: 33365 and 33366 read the same.
        assert_eq!(
            (approx(33365.2), approx(33366.0), approx(778267.0), approx(999.4)),
            ("33400".into(), "33400".into(), "778000".into(), "999".into())
        );
        assert_eq!(human_secs(5400.0), "90 min");
        assert_eq!(human_bytes(3_500_000.0), "3.5 MB");
        assert_eq!(round_sig(0.123456), 0.1235);
        assert_eq!(round_sig(1660.033), 1660.0);
    }

    #[test]
    fn a_per_record_time_keeps_three_significant_digits_in_a_readable_unit() {
        // 0.97 busy × 1000 ms × 2 subtasks / 1 000 000 records/s = 0.00194 ms = 1.94 µs,
        // which `{:.2} ms` wrote as "0.00 ms".
        assert_eq!(per_record(0.97 * 1000.0 * 2.0 / 1_000_000.0), "1.94 µs");
        assert_eq!(per_record(1.52), "1.52 ms");
        assert_eq!(per_record(0.25), "250 µs");
        assert_eq!(per_record(0.0125), "12.5 µs");
        // 1 / 25 000 ms = 0.00004 ms = 40 ns.
        assert_eq!(per_record(1.0 / 25_000.0), "40.0 ns");
        assert_eq!(per_record(250.0), "250 ms");
        assert_eq!(per_record(4500.0), "4 s");
        // Zero only for zero; no minus on it.
        assert_eq!((per_record(0.0), per_record(-0.0)), ("0 ms".into(), "0 ms".into()));
    }

    #[test]
    fn no_small_positive_per_record_time_reads_as_zero() {
        // Every decade from 1 s down to 1 ns per record keeps a non-zero digit.
        for exp in -6..=3 {
            let ms = 1.7 * 10f64.powi(exp);
            let words = per_record(ms);
            assert!(words.chars().any(|c| c.is_ascii_digit() && c != '0'), "{ms} ms → {words}");
        }
    }

    #[test]
    fn a_number_that_rounds_to_zero_is_never_written_negative() {
        // −0.3 % at no decimals, −0.001 at two, −0.0 itself, −0.2 s: all read as zero.
        assert_eq!(
            (pct(-0.003), num(-0.001), num(-0.0), human_secs(-0.2)),
            ("0%".into(), "0.00".into(), "0.00".into(), "0 s".into())
        );
        assert_eq!((pct(-0.5), num(-12.5)), ("-50%".into(), "-12.5".into()));
    }
}
