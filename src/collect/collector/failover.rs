//! The job's restarts in the window, from Flink's `numRestarts` (a JobManager job gauge: the
//! restarts since the job was submitted, full and fine-grained) sampled per step.

/// The rises of `numRestarts` at times in `(from_ms, to_ms]`, `(Unix ms, restarts added)`,
/// oldest first; `None` when the store has no sample of it (unknown, not zero). A gap while
/// the job restarts (no sample) is bridged: the rise is counted at the first sample after it.
pub(super) fn restarts_in(points: &[(i64, f64)], from_ms: i64, to_ms: i64) -> Option<Vec<(i64, u32)>> {
    let finite: Vec<(i64, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    Some(
        finite
            .windows(2)
            .filter(|w| w[1].0 > from_ms && w[1].0 <= to_ms && w[1].1 > w[0].1)
            .map(|w| (w[1].0, (w[1].1 - w[0].1).round() as u32))
            .filter(|(_, n)| *n > 0)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rise_of_num_restarts_inside_the_window_is_counted_once_with_its_size() {
        // 0 until 10 s, 1 at 15 s, (no sample at 20 s: restarting), 3 at 25 s, 3 after:
        // rises of 1 at 15 s and of 2 at 25 s.
        let pts = [(5_000, 0.0), (10_000, 0.0), (15_000, 1.0), (25_000, 3.0), (30_000, 3.0)];
        assert_eq!(restarts_in(&pts, 0, 30_000), Some(vec![(15_000, 1), (25_000, 2)]));
        // The window starts at 20 s: only the rise at 25 s is in it.
        assert_eq!(restarts_in(&pts, 20_000, 30_000), Some(vec![(25_000, 2)]));
    }

    #[test]
    fn no_sample_is_unknown_and_a_flat_series_is_no_restart() {
        assert_eq!(restarts_in(&[], 0, 10), None);
        assert_eq!(restarts_in(&[(1, f64::NAN)], 0, 10), None);
        assert_eq!(restarts_in(&[(1, 4.0), (5, 4.0)], 0, 10), Some(vec![]));
    }
}
