//! The history of verdicts (`GET /verdicts`): recent verdicts, newest first, each linking
//! to its page, with what changed from the job's verdict before it; and two verdicts of
//! one job compared.
//!
//! Pure: the caller gives the rows (links already made) and the filters in force. The page
//! is one HTML document with the verdict page's own style sheet
//! ([`crate::render::html::CSS`], allowed by the server's Content-Security-Policy), no
//! script and no form: the filters are links (a job's name, a finding, a time range), so
//! nothing needs a form target. Every dynamic string is escaped
//! ([`crate::render::html::escape`]); link parameters are encoded by `url`'s serializer.

use std::fmt::Write as _;

use serde::Serialize;

use crate::model::verdict::Verdict;
use crate::render::html::{CSS, escape};

/// One verdict of the listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub id: i64,
    /// When it was stored, Unix ms.
    pub created_ms: i64,
    pub verdict: Verdict,
    /// Its page (`/verdicts/{id}`, signed when links are).
    pub url: String,
    /// The id of the job's verdict before it, if the store keeps one.
    pub previous: Option<i64>,
    /// What changed from that one ([`changes`]); `None` for the job's first.
    pub changes: Option<Vec<String>>,
}

/// The filters in force (as given, for the page to say and keep in its links).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Filters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

impl Filters {
    /// `/verdicts?…` with these filters and `key` set to `value` (`None`: left out).
    fn link(&self, key: &str, value: Option<&str>) -> String {
        let mut f = self.clone();
        let slot = match key {
            "job" => &mut f.job,
            "finding" => &mut f.finding,
            "until" => &mut f.until,
            _ => &mut f.since,
        };
        *slot = value.map(str::to_string);
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [("job", &f.job), ("finding", &f.finding), ("since", &f.since), ("until", &f.until)] {
            if let Some(v) = v {
                q.append_pair(k, v);
            }
        }
        let q = q.finish();
        if q.is_empty() { "/verdicts".into() } else { format!("/verdicts?{q}") }
    }
}

/// The culprit's name as the verdict gives it, or `none`.
fn culprit(v: &Verdict) -> String {
    v.culprit.as_ref().map_or_else(|| "none".to_string(), |c| c.vertex_name.clone())
}

/// What a reader sees change from `older` to `newer` (two verdicts of one job): status,
/// finding, culprit, confidence and the number of hazards, each `what: before → after`.
/// Empty: the same on all of them.
pub fn changes(older: &Verdict, newer: &Verdict) -> Vec<String> {
    let pairs = [
        ("status", older.status.as_str().to_string(), newer.status.as_str().to_string()),
        ("finding", older.finding.as_str().to_string(), newer.finding.as_str().to_string()),
        ("culprit", culprit(older), culprit(newer)),
        ("confidence", older.confidence.as_str().to_string(), newer.confidence.as_str().to_string()),
        ("hazards", older.hazards.len().to_string(), newer.hazards.len().to_string()),
    ];
    pairs.into_iter().filter(|(_, a, b)| a != b).map(|(what, a, b)| format!("{what}: {a} → {b}")).collect()
}

fn head(s: &mut String, title: &str) {
    let _ = write!(
        s,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        escape(title)
    );
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default()
}

fn change_cell(row: &Row) -> String {
    match (&row.changes, row.previous) {
        (None, _) => "<span class=\"note\">first</span>".into(),
        (Some(c), Some(p)) if c.is_empty() => {
            format!("<span class=\"note\">unchanged since <a href=\"/verdicts?compare={p},{}\">#{p}</a></span>", row.id)
        }
        (Some(c), p) => {
            let list = c.iter().map(|x| escape(x)).collect::<Vec<_>>().join("<br>");
            let from = p.map(|p| format!(" (<a href=\"/verdicts?compare={p},{}\">from #{p}</a>)", row.id));
            format!("{list}{}", from.unwrap_or_default())
        }
    }
}

/// The listing page.
pub fn page(rows: &[Row], filters: &Filters) -> String {
    let mut s = String::with_capacity(4096 + rows.len() * 600);
    head(&mut s, "culprit: verdicts");
    let _ = writeln!(s, "<h1>Verdicts</h1>");
    let mut said = Vec::new();
    for (k, v) in
        [("job", &filters.job), ("finding", &filters.finding), ("since", &filters.since), ("until", &filters.until)]
    {
        if let Some(v) = v {
            said.push(format!(
                "{k} <code>{}</code> (<a href=\"{}\">any</a>)",
                escape(v),
                escape(&filters.link(k, None))
            ));
        }
    }
    let ranges: Vec<String> = [("1h", "last hour"), ("24h", "last day"), ("7d", "last week")]
        .iter()
        .map(|(v, label)| format!("<a href=\"{}\">{label}</a>", escape(&filters.link("since", Some(v)))))
        .collect();
    let shown = if said.is_empty() { "all jobs".to_string() } else { said.join(" · ") };
    let _ = writeln!(s, "<p class=\"meta\">{} shown: {shown}. Time: {}.</p>", rows.len(), ranges.join(" · "));
    if rows.is_empty() {
        let _ = writeln!(s, "<p>No verdict matches.</p></body></html>");
        return s;
    }
    let _ = writeln!(
        s,
        "<table><thead><tr><th>#</th><th>stored</th><th>job</th><th>status</th><th>finding</th><th>culprit</th><th>confidence</th><th>summary</th><th>changed</th></tr></thead><tbody>"
    );
    for r in rows {
        let v = &r.verdict;
        let status = v.status.as_str();
        let _ = writeln!(
            s,
            "<tr class=\"verdict\" id=\"v{id}\"><td><a href=\"{url}\">#{id}</a></td><td>{at}</td><td><a href=\"{job_link}\">{job}</a></td>\
             <td><span class=\"badge {status}\">{status_text}</span></td><td><a href=\"{finding_link}\">{finding}</a></td>\
             <td>{culprit}</td><td>{confidence}</td><td>{summary}</td><td>{changed}</td></tr>",
            id = r.id,
            url = escape(&r.url),
            at = time(r.created_ms),
            job_link = escape(&filters.link("job", Some(&v.job.name))),
            job = escape(&v.job.name),
            status_text = status.replace('_', " "),
            finding_link = escape(&filters.link("finding", Some(v.finding.as_str()))),
            finding = v.finding.as_str(),
            culprit = escape(&culprit(v)),
            confidence = v.confidence.as_str(),
            summary = escape(&v.summary),
            changed = change_cell(r),
        );
    }
    let _ = writeln!(s, "</tbody></table></body></html>");
    s
}

/// Two verdicts of one job side by side (`older` first), what changed listed first.
pub fn compare(older: &Row, newer: &Row) -> String {
    let mut s = String::with_capacity(8192);
    let (a, b) = (&older.verdict, &newer.verdict);
    head(&mut s, &format!("culprit: verdicts #{} and #{} of {}", older.id, newer.id, a.job.name));
    let _ = writeln!(
        s,
        "<h1>{}: verdict <a href=\"{}\">#{}</a> → <a href=\"{}\">#{}</a></h1>",
        escape(&a.job.name),
        escape(&older.url),
        older.id,
        escape(&newer.url),
        newer.id
    );
    let changed = changes(a, b);
    if changed.is_empty() {
        let _ = writeln!(
            s,
            "<p class=\"changes\">Unchanged: the same status, finding, culprit, confidence and hazards.</p>"
        );
    } else {
        let items: String = changed.iter().map(|c| format!("<li>{}</li>", escape(c))).collect();
        let _ = writeln!(s, "<h2>What changed</h2><ul class=\"changes\">{items}</ul>");
    }
    let _ = writeln!(s, "<table><thead><tr><th></th><th>#{}</th><th>#{}</th></tr></thead><tbody>", older.id, newer.id);
    let fix = |v: &Verdict| v.fix.iter().map(|f| escape(f)).collect::<Vec<_>>().join("<br>");
    let lines = [
        ("stored", time(older.created_ms), time(newer.created_ms)),
        ("status", a.status.as_str().into(), b.status.as_str().into()),
        ("finding", a.finding.as_str().into(), b.finding.as_str().into()),
        ("culprit", escape(&culprit(a)), escape(&culprit(b))),
        ("confidence", a.confidence.as_str().into(), b.confidence.as_str().into()),
        ("summary", escape(&a.summary), escape(&b.summary)),
        ("fix", fix(a), fix(b)),
    ];
    for (what, x, y) in lines {
        let _ = writeln!(s, "<tr><th>{what}</th><td>{x}</td><td>{y}</td></tr>");
    }
    let _ = writeln!(s, "</tbody></table><p><a href=\"/verdicts\">All verdicts</a></p></body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts() -> Vec<Verdict> {
        crate::samples::captures::CAPTURES.iter().map(|c| crate::samples::captures::verdict(c).unwrap()).collect()
    }

    fn row(id: i64, v: Verdict, previous: Option<(i64, &Verdict)>) -> Row {
        Row {
            id,
            created_ms: 1_795_000_000_000 + id * 60_000,
            changes: previous.map(|(_, p)| changes(p, &v)),
            previous: previous.map(|(p, _)| p),
            url: format!("/verdicts/{id}?expires=1&sig=ab"),
            verdict: v,
        }
    }

    #[test]
    fn changes_name_each_field_a_reader_sees_differ_and_nothing_when_the_same() {
        let all = verdicts();
        let a = &all[0];
        assert_eq!(changes(a, a), Vec::<String>::new());
        let other = all.iter().find(|v| v.finding != a.finding).unwrap();
        let c = changes(a, other);
        assert!(c.contains(&format!("finding: {} → {}", a.finding.as_str(), other.finding.as_str())), "{c:?}");
    }

    #[test]
    fn the_page_lists_each_verdict_with_its_link_and_escapes_the_job_name() {
        let mut all = verdicts();
        all[0].job.name = "<script>alert(1)</script>".into();
        let first = all[0].clone();
        let rows = vec![row(2, all[1].clone(), Some((1, &first))), row(1, first.clone(), None)];
        let filters = Filters { job: Some("a&b".into()), ..Default::default() };
        let html = page(&rows, &filters);
        assert_eq!(html.matches("<tr class=\"verdict\"").count(), 2);
        assert!(html.contains("<a href=\"/verdicts/2?expires=1&amp;sig=ab\">#2</a>"), "{html}");
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;"));
        // The job filter link is encoded by the serializer, then escaped for HTML.
        assert!(html.contains("href=\"/verdicts?job=%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""), "{html}");
        assert!(html.contains("job <code>a&amp;b</code>"));
        assert!(html.contains(">first</span>"));
        assert!(html.contains("/verdicts?compare=1,2"));
        assert!(page(&[], &Filters::default()).contains("No verdict matches."));
    }

    #[test]
    fn the_comparison_says_unchanged_or_lists_what_changed() {
        let all = verdicts();
        let (a, b) = (row(1, all[0].clone(), None), row(2, all[0].clone(), None));
        assert!(compare(&a, &b).contains("Unchanged"));
        let other = all.iter().find(|v| v.finding != all[0].finding).unwrap().clone();
        let html = compare(&a, &row(3, other, None));
        assert!(html.contains("<h2>What changed</h2>") && html.contains("<li>finding: "), "{html}");
    }
}
