//! Names as messages show them, and text made safe to show. Pure.
//!
//! A vertex has three names:
//!
//! * its **description**, what the job plan's `nodes[].description` holds: for a Flink SQL
//!   job, hundreds to thousands of characters per operator
//!   (`[9]:ConstraintEnforcer[NotNullEnforcer(fields=[…])]`); only the JSON and the page
//!   show it;
//! * **Flink's vertex name**, the chained operators' names joined by ` -> `, as the web UI
//!   and the `task_name` label write it (`ConstraintEnforcer[9] -> Sink: dws_merchant_sku_1m[10]`);
//!   for a SQL operator it is the node's kind and id (FLIP-195, FLINK-25076: `Calc[2]`,
//!   sources and sinks with their table, `Source: ods_order_events[1]`,
//!   `Sink: dws_merchant_sku_1m[10]`); a DataStream operator's name is its description.
//!   Messages write it once;
//! * the **prose form**: Flink's vertex name when it is short, else the first and last
//!   operator and a count (`Source: a -> … -> sink (12 operators)`).
//!
//! [`Names`] rewrites text the diagnosis wrote (which names vertices by whatever the
//! verdict carries) into the prose forms.

use std::borrow::Cow;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::model::verdict::Verdict;

/// Widest vertex name written in prose, in columns; longer names become the first and
/// last operator and a count.
pub const PROSE_NAME_MAX: usize = 60;

/// What ends cut text.
pub const ELLIPSIS: char = '…';

/// The separator of chained operators in a vertex name, as Flink writes it.
pub const CHAIN_SEPARATOR: &str = " -> ";

/// True for characters that must never reach a terminal, a chat message or a page: C0 and
/// C1 control characters (ESC starts terminal escape sequences; NUL, BEL, CR, …) and the
/// Unicode bidirectional controls, which make text read in another order than it is
/// stored.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `s` with newlines and tabs as spaces and every other [`is_unsafe`] character as `�`
/// (U+FFFD), so a name shows where one was cleaned.
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\n' | '\r' | '\t' => ' ',
                c if is_unsafe(c) => '\u{FFFD}',
                c => c,
            })
            .collect(),
    )
}

/// Display width in terminal columns (East Asian wide characters count two).
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` columns, ending with `…` when cut.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    let budget = max.saturating_sub(1);
    let mut used = 0;
    let mut out = String::new();
    for c in s.chars() {
        let w = UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        out.push(c);
    }
    let mut out = out.trim_end().to_string();
    if max > 0 {
        out.push(ELLIPSIS);
    }
    Cow::Owned(out)
}

/// The SQL planner's `[id]:` prefix of an operator description: the id, and what follows.
fn sql_node(op: &str) -> Option<(&str, &str)> {
    let rest = op.strip_prefix('[')?;
    let close = rest.find("]:")?;
    let id = &rest[..close];
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| (id, &rest[close + 2..]))
}

/// The object name of the table a SQL source or sink names after `key`
/// (`table=[[default_catalog, default_database, orders, watermark=[…]]]` → `orders`,
/// `table=[default_catalog.default_database.orders]` → `orders`).
fn table_name(body: &str, key: &str) -> Option<String> {
    let list = &body[body.find(key)? + key.len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    let last = list
        .split(", ")
        .take_while(|item| !item.contains(['=', '[', '(']))
        .last()?
        .rsplit('.')
        .next()?
        .trim_matches('`')
        .trim();
    (!last.is_empty()).then(|| last.to_string())
}

/// Flink's name of one operator from what the plan describes it by: a SQL planner
/// description `[id]:Kind(…)` becomes `Kind[id]` (`Source: <table>[id]` for a
/// `TableSourceScan`, `Sink: <table>[id]` for a `Sink`), anything else stays as it is.
pub fn operator_name(op: &str) -> String {
    let op = op.trim();
    let Some((id, body)) = sql_node(op) else {
        return op.to_string();
    };
    let kind: String = body.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if kind.is_empty() {
        return op.to_string();
    }
    let table = match kind.as_str() {
        "TableSourceScan" => table_name(body, "table=[[").map(|t| format!("Source: {t}")),
        "Sink" => table_name(body, "table=[").map(|t| format!("Sink: {t}")),
        _ => None,
    };
    format!("{}[{id}]", table.unwrap_or(kind))
}

/// The operators of a vertex name, in chain order. A name of SQL descriptions is split
/// only before the next `[id]:`, so a ` -> ` inside a description does not split it.
pub fn operators(name: &str) -> Vec<&str> {
    if sql_node(name).is_none() {
        return name.split(CHAIN_SEPARATOR).collect();
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(i) = name[search..].find(CHAIN_SEPARATOR) {
        let at = search + i;
        let next = at + CHAIN_SEPARATOR.len();
        if sql_node(&name[next..]).is_some() {
            out.push(&name[start..at]);
            start = next;
        }
        search = next;
    }
    out.push(&name[start..]);
    out
}

/// Flink's vertex name: each operator by [`operator_name`], joined by ` -> `, cleaned.
pub fn vertex_name(name: &str) -> String {
    let ops: Vec<String> = operators(name).into_iter().map(operator_name).collect();
    clean(&ops.join(CHAIN_SEPARATOR)).into_owned()
}

/// The prose form of a vertex name: Flink's vertex name when it is at most
/// [`PROSE_NAME_MAX`] columns; else the first and last operator and the count
/// (`first -> … -> last (5 operators)`), each operator cut to fit.
pub fn prose_name(name: &str) -> String {
    let flink = vertex_name(name);
    if width(&flink) <= PROSE_NAME_MAX {
        return flink;
    }
    let ops: Vec<&str> = flink.split(CHAIN_SEPARATOR).collect();
    match ops.as_slice() {
        [first, .., last] if ops.len() > 2 => {
            let count = format!(" ({} operators)", ops.len());
            let each = (PROSE_NAME_MAX - width(&count) - 2 * CHAIN_SEPARATOR.len() - 1) / 2;
            format!("{}{CHAIN_SEPARATOR}{ELLIPSIS}{CHAIN_SEPARATOR}{}{count}", clip(first, each), clip(last, each))
        }
        [first, last] => {
            let each = (PROSE_NAME_MAX - CHAIN_SEPARATOR.len()) / 2;
            format!("{}{CHAIN_SEPARATOR}{}", clip(first, each), clip(last, each))
        }
        _ => clip(&flink, PROSE_NAME_MAX).into_owned(),
    }
}

/// The names of one verdict and their prose forms, to rewrite the verdict's text.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// (as the verdict writes it, prose form), longest first; only names that change.
    rewrites: Vec<(String, String)>,
}

impl Names {
    /// Every vertex name the verdict carries (graph, culprits, their operators).
    pub fn of(v: &Verdict) -> Names {
        let mut all: Vec<String> = v.graph.vertices.iter().map(|x| x.name.clone()).collect();
        for c in v.culprit.iter().chain(&v.culprits) {
            all.push(c.vertex_name.clone());
            all.extend(c.operators.iter().cloned());
        }
        all.extend(all.clone().iter().flat_map(|n| operators(n).into_iter().map(str::to_string)));
        all.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        all.dedup();
        let rewrites = all
            .into_iter()
            .filter(|n| !n.is_empty())
            .filter_map(|n| {
                let short = prose_name(&n);
                (short != n).then_some((n, short))
            })
            .collect();
        Names { rewrites }
    }

    /// The prose form of a vertex name.
    pub fn prose(&self, name: &str) -> String {
        prose_name(name)
    }

    /// Text the diagnosis wrote, cleaned, with every long name in its prose form.
    pub fn text(&self, text: &str) -> String {
        let mut out = clean(text).into_owned();
        for (long, short) in &self.rewrites {
            if out.contains(long.as_str()) {
                out = out.replace(long.as_str(), short);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SINK: &str = "[9]:ConstraintEnforcer[NotNullEnforcer(fields=[window_start, merchant_id, sku_id])] -> [10]:Sink(table=[default_catalog.default_database.dws_merchant_sku_1m], fields=[window_start, window_end, merchant_id])";

    #[test]
    fn sql_descriptions_become_flinks_short_vertex_name() {
        assert_eq!(vertex_name(SINK), "ConstraintEnforcer[9] -> Sink: dws_merchant_sku_1m[10]");
        assert_eq!(
            vertex_name(
                "[1]:TableSourceScan(table=[[default_catalog, default_database, ods_order_events, watermark=[-(event_time, 5000:INTERVAL SECOND)]]], fields=[a, b]) -> [2]:Calc(select=[a], where=[(a -> b)])"
            ),
            "Source: ods_order_events[1] -> Calc[2]"
        );
        assert_eq!(operator_name("[3]:LocalWindowAggregate(groupBy=[merchant_id])"), "LocalWindowAggregate[3]");
    }

    #[test]
    fn datastream_names_stay_as_they_are() {
        for n in ["Source: txn-source -> parse", "slow-sink: Writer", "enrich -> score", "[x]:odd", "[]:odd"] {
            assert_eq!(vertex_name(n), n);
            assert_eq!(prose_name(n), n);
        }
    }

    #[test]
    fn a_long_chain_is_its_first_and_last_operator_and_a_count_in_prose() {
        let name = (0..12).map(|i| format!("operator-number-{i}")).collect::<Vec<_>>().join(" -> ");
        let p = prose_name(&name);
        assert_eq!(p, "operator-number-0 -> … -> operator-number-11 (12 operators)");
        assert!(width(&p) <= PROSE_NAME_MAX);
        let long = format!("{} -> {}", "a".repeat(200), "b".repeat(200));
        let p = prose_name(&long);
        assert!(width(&p) <= PROSE_NAME_MAX && p.contains(" -> "), "{p}");
        assert_eq!(width(&prose_name(&"x".repeat(500))), PROSE_NAME_MAX);
    }

    #[test]
    fn control_and_bidi_characters_are_cleaned() {
        assert_eq!(clean("a\u{1b}[31mb\nc\u{202e}d\u{0}"), "a\u{FFFD}[31mb c\u{FFFD}d\u{FFFD}");
        assert!(matches!(clean("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn clipping_counts_columns_and_ends_with_an_ellipsis() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("漢字漢字", 5), "漢字…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
