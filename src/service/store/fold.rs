//! Folding of "could not diagnose" notices: one per destination and window, never one
//! per job. Pure; both backends call it when they claim such a notice.

use crate::model::notice::Notice;

/// Longest a "could not diagnose" notice waits for the diagnoses still queued or running
/// (of its alert group, or a burst draining), so that their failures fold into it
/// ([`fold_could_not_diagnose`]) and verdicts go first.
pub const FOLD_WAIT_MAX_MS: i64 = 60_000;

/// Most jobs a folded "could not diagnose" notice names; the rest are counted.
pub const FOLDED_JOBS_NAMED: usize = 10;

/// Folds the other "could not diagnose" notices waiting for the same destination (of
/// any alert group) into `head`, so that a destination gets one such notice per window,
/// never one per job: the reason goes on to name the other jobs, at most
/// [`FOLDED_JOBS_NAMED`], counts the rest ("and N more"), says in which alert groups, and
/// whether they failed for the same reason (a reason that differs only by naming its own
/// job is the same). Pure.
pub fn fold_could_not_diagnose(head: &mut Notice, others: &[Notice]) {
    let own = head.reason.clone().unwrap_or_default();
    let mut seen = std::collections::BTreeSet::from([head.job.name.clone()]);
    let mut same = true;
    let mut jobs = Vec::new();
    for n in others {
        let reason = n.reason.clone().unwrap_or_default();
        let (name, head_name) = (n.job.name.as_str(), head.job.name.as_str());
        same &= reason == own || (!name.is_empty() && replace_word(&reason, name, head_name) == own);
        if seen.insert(name.to_string()) {
            jobs.push(name.to_string());
        }
    }
    if jobs.is_empty() {
        return;
    }
    let mut list = jobs.iter().take(FOLDED_JOBS_NAMED).cloned().collect::<Vec<_>>().join(", ");
    if jobs.len() > FOLDED_JOBS_NAMED {
        list.push_str(&format!(" and {} more", jobs.len() - FOLDED_JOBS_NAMED));
    }
    let more = if jobs.len() == 1 { "1 more job".to_string() } else { format!("{} more jobs", jobs.len()) };
    let why = if same { "for the same reason" } else { "each for its own reason (culprit's log has them)" };
    let groups: std::collections::BTreeSet<&str> =
        others.iter().map(|n| n.group_key.as_str()).filter(|g| *g != head.group_key).collect();
    let scope = match groups.len() {
        0 => "in this alert group".to_string(),
        1 => "in this alert group or 1 other".to_string(),
        n => format!("in this alert group or {n} others"),
    };
    head.reason = Some(format!("{own}\nNot diagnosed either {scope}, {why}: {more}: {list}"));
}

/// `s` with every `from` that stands as a word of its own (no letter, digit, `_` or `-`
/// around it) replaced by `to`.
fn replace_word(s: &str, from: &str, to: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let mut out = String::with_capacity(s.len());
    let mut rest = 0;
    for (i, _) in s.match_indices(from) {
        let end = i + from.len();
        if i < rest || word(s[..i].chars().next_back()) || word(s[end..].chars().next()) {
            continue;
        }
        out.push_str(&s[rest..i]);
        out.push_str(to);
        rest = end;
    }
    out.push_str(&s[rest..]);
    out
}
