//! Subtask skew, shared by the `sink` and `hot_key` steps: one subtask hot while the
//! others idle, and whether records explain it (a hot key) or not (a slow instance).

use crate::config::Thresholds;
use crate::diagnose::signals::{SubtaskSignals, VertexSignals};

/// The hottest subtask when it is at least `hot_subtask_busy_ratio` busy and the median
/// of the others is at most `others_busy_median_ratio`; `None` otherwise or with one
/// subtask.
pub fn find<'a>(v: &'a VertexSignals, t: &Thresholds) -> Option<&'a SubtaskSignals> {
    if v.subtasks.len() < 2 {
        return None;
    }
    let hot = v.hottest()?;
    let others = others_median(v, hot.subtask)?;
    (hot.busy? >= t.hot_subtask_busy_ratio && others <= t.others_busy_median_ratio).then_some(hot)
}

/// Median busy ratio of the subtasks other than `hot`.
pub fn others_median(v: &VertexSignals, hot: u32) -> Option<f64> {
    let mut others: Vec<f64> = v.subtasks.iter().filter(|s| s.subtask != hot).filter_map(|s| s.busy).collect();
    if others.is_empty() {
        return None;
    }
    others.sort_by(f64::total_cmp);
    let n = others.len();
    Some(if n % 2 == 1 { others[n / 2] } else { (others[n / 2 - 1] + others[n / 2]) / 2.0 })
}

/// The hot subtask's share `s` of the vertex's records: its rate over the sum of rates.
pub fn share(v: &VertexSignals, hot: u32) -> Option<f64> {
    let total = v.throughput()?;
    let mine = v.throughput_of(v.subtasks.iter().find(|s| s.subtask == hot)?)?;
    (total > 0.0).then(|| mine / total)
}

/// The records rate of the busiest subtask other than `hot`.
pub fn next_busiest_rate(v: &VertexSignals, hot: u32) -> Option<f64> {
    let next = v
        .subtasks
        .iter()
        .filter(|s| s.subtask != hot && s.busy.is_some())
        .max_by(|a, b| a.busy.unwrap().total_cmp(&b.busy.unwrap()))?;
    v.throughput_of(next)
}

/// A hot key: the hot subtask's share is at least `hot_key_share_factor / parallelism`
/// and it receives at least `hot_key_next_ratio` × the records of the next busiest.
pub fn is_hot_key(v: &VertexSignals, hot: u32, t: &Thresholds) -> bool {
    let (Some(s), Some(next)) = (share(v, hot), next_busiest_rate(v, hot)) else { return false };
    let Some(mine) = v.subtasks.iter().find(|x| x.subtask == hot).and_then(|x| v.throughput_of(x)) else {
        return false;
    };
    s >= t.hot_key_share_factor / v.subtasks.len() as f64 && mine >= t.hot_key_next_ratio * next
}
