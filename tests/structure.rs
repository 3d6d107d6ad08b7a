//! The shape of `src/` (docs/architecture.md): every import between its rooms points one
//! way, no function is longer than a screenful or two, no file is too long to hold in one's
//! head, the diagnosis says what it found as data (few sentences built in `src/diagnose/`),
//! no decision reads English and no persisted key is built from Debug text.
//!
//! Every file is read whole: its `#[cfg(test)]` items (a `mod tests { … }` found by brace
//! matching, a `mod x;`, a single annotated `fn` or `use`) are left out, as tests may reach
//! anywhere and be long, and what follows them counts. The rules and their measure are those
//! of the round's checker, `structure2.py` (issue 21), mirrored here to the letter, quirks
//! included, so that the two agree: strings, chars and comments are blanked before braces
//! are matched; a function is counted in its non-blank, non-comment lines from its `fn` to
//! its matching brace; a file in its non-blank, non-comment production lines.
//!
//! A room is a top-level file or folder of `src/` (`config.rs`, `collect/`). An edge
//! `a → b` is a `crate::b` path in production code of room `a` (comments left out). The
//! rooms must form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Longest function allowed in `src/`, in non-blank, non-comment lines (tests aside).
const MAX_FN_LINES: usize = 120;
/// Longest file allowed in `src/`, in non-blank, non-comment production lines (issue 21).
const MAX_FILE_LINES: usize = 800;
/// The most `format!` / `write!` / `writeln!` calls left in `src/diagnose/`: the steps
/// return facts and the renderers word them (issue 21).
const MAX_DIAGNOSE_FORMATS: usize = 40;

/// `src/`-relative path (with `/`) → file text.
type Files = BTreeMap<String, String>;

fn read_src() -> Files {
    fn walk(dir: &Path, root: &Path, out: &mut Files) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Files::new();
    walk(&root, &root, &mut files);
    files
}

/// The room of a `src/`-relative path: `collect/store.rs` → `collect`, `config.rs` → `config`.
fn room(path: &str) -> String {
    match path.split_once('/') {
        Some((dir, _)) => dir.to_string(),
        None => path.trim_end_matches(".rs").to_string(),
    }
}

/// The production code of a whole file for the import check: its `#[cfg(test)]` items
/// blanked (their newlines kept, so line numbers stay), comment lines out (empty).
fn code(text: &str) -> Vec<String> {
    let raw: Vec<char> = normalize_newlines(text).chars().collect();
    let mut kept = raw.clone();
    for (a, b) in test_spans(&blank_literals(&raw)) {
        for c in &mut kept[a..b.min(raw.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    let kept: String = kept.into_iter().collect();
    kept.split('\n').map(|l| if l.trim_start().starts_with("//") { String::new() } else { l.to_string() }).collect()
}

/// Python's text mode reads `\r\n` and `\r` as `\n`.
fn normalize_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

fn starts_with_at(t: &[char], at: usize, s: &str) -> bool {
    (at..).zip(s.chars()).all(|(k, c)| t.get(k) == Some(&c))
}

fn find_from(t: &[char], from: usize, c: char) -> Option<usize> {
    t.get(from..)?.iter().position(|&x| x == c).map(|i| i + from)
}

fn find_str_from(t: &[char], from: usize, s: &str) -> Option<usize> {
    (from..t.len()).find(|&k| starts_with_at(t, k, s))
}

/// Python's `\w`: a letter, digit or `_`.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn skip_ws(t: &[char], mut k: usize) -> usize {
    while k < t.len() && t[k].is_whitespace() {
        k += 1;
    }
    k
}

/// The end (exclusive) of the literal or comment starting at `at`, as the checker's
/// pattern `r(#*)"(?:.|\n)*?"\1 | b?"(?:\\.|[^"\\])*" | b?'(?:\\.|[^'\\\n])' | //[^\n]* |
/// /\*(?:.|\n)*?\*/` tries its alternatives in that order (`.` is not a newline: a string
/// continued with a backslash at a line's end is not one literal to it).
fn literal_at(t: &[char], at: usize) -> Option<usize> {
    let raw = || {
        if t.get(at) != Some(&'r') {
            return None;
        }
        let hashes = t[at + 1..].iter().take_while(|&&c| c == '#').count();
        let open = at + 1 + hashes;
        if t.get(open) != Some(&'"') {
            return None;
        }
        let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
        find_str_from(t, open + 1, &close).map(|k| k + 1 + hashes)
    };
    let quoted = |quote: char, single: bool| {
        let both = [at + 1, at];
        let starts = if t.get(at) == Some(&'b') { &both[..] } else { &both[1..] };
        starts.iter().find_map(|&open| {
            if t.get(open) != Some(&quote) {
                return None;
            }
            let mut k = open + 1;
            let mut chars = 0;
            loop {
                match t.get(k) {
                    None => return None,
                    Some(&c) if c == quote && (!single || chars == 1) => return Some(k + 1),
                    Some(_) if single && chars == 1 => return None,
                    Some('\\') => match t.get(k + 1) {
                        Some(&n) if n != '\n' => k += 2,
                        _ => return None,
                    },
                    Some(&c) if c == quote => return None,
                    Some('\n') if single => return None,
                    Some(_) => k += 1,
                }
                chars += 1;
            }
        })
    };
    let line_comment = || starts_with_at(t, at, "//").then(|| find_from(t, at, '\n').unwrap_or(t.len()));
    let block_comment = || starts_with_at(t, at, "/*").then(|| find_str_from(t, at + 2, "*/").map(|k| k + 2)).flatten();
    raw().or_else(|| quoted('"', false)).or_else(|| quoted('\'', true)).or_else(line_comment).or_else(block_comment)
}

/// Strings and chars become `"` + blanks + `"`, comments blanks (newlines kept, the length
/// kept), so that braces inside them are not counted and `format!` calls stay visible.
fn blank_literals(t: &[char]) -> Vec<char> {
    let mut out = t.to_vec();
    let mut at = 0;
    while at < t.len() {
        let Some(end) = literal_at(t, at) else {
            at += 1;
            continue;
        };
        let comment = t[at] == '/';
        for (k, c) in out.iter_mut().enumerate().take(end).skip(at) {
            if *c != '\n' {
                *c = ' ';
            }
            if !comment && (k == at || k == end - 1) {
                *c = '"';
            }
        }
        at = end;
    }
    out
}

/// The index of the brace matching the `{` at `open`, or the text's end when unmatched.
fn matching_brace(t: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in t.iter().enumerate().skip(open) {
        if c == '{' {
            depth += 1;
        } else if c == '}' {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return k;
            }
        }
    }
    t.len()
}

/// `(start, end)` of every `#[cfg(test)]` item of a blanked text: up to the `;` of a
/// `mod x;` or `use …;`, else to the brace matching the item's first `{`.
fn test_spans(t: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while let Some(start) = find_str_from(t, i, "#[cfg(test)]") {
        let mut j = skip_ws(t, start + "#[cfg(test)]".len());
        while starts_with_at(t, j, "#[") {
            j = skip_ws(t, find_from(t, j, ']').map_or(t.len(), |k| k + 1));
        }
        let (semi, brace) = (find_from(t, j, ';'), find_from(t, j, '{'));
        let end = match (semi, brace) {
            (_, None) => semi.map_or(t.len(), |s| s + 1),
            (Some(s), Some(b)) if s < b => s + 1,
            (_, Some(b)) => matching_brace(t, b) + 1,
        };
        spans.push((start, end));
        i = end;
    }
    spans
}

fn cut(t: &[char], spans: &[(usize, usize)]) -> Vec<char> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    for &(a, b) in spans {
        out.extend_from_slice(&t[i.min(t.len())..a.min(t.len())]);
        i = b;
    }
    out.extend_from_slice(&t[i.min(t.len())..]);
    out
}

/// The lines that count: not blank, not a `//` comment.
fn code_lines(t: &[char]) -> usize {
    let text: String = t.iter().collect();
    text.split('\n').filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).count()
}

/// A file of `src/` without its test items: `blank` with literals blanked, `raw` as written.
struct Production {
    blank: Vec<char>,
    raw: Vec<char>,
}

/// Every file the checker reads (`tests.rs` and `*_tests.rs` are test files), whole.
fn production(files: &Files) -> BTreeMap<String, Production> {
    files
        .iter()
        .filter(|(path, _)| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name != "tests.rs" && !name.ends_with("_tests.rs")
        })
        .map(|(path, text)| {
            let raw: Vec<char> = normalize_newlines(text).chars().collect();
            let blank = blank_literals(&raw);
            let spans = test_spans(&blank);
            (path.clone(), Production { blank: cut(&blank, &spans), raw: cut(&raw, &spans) })
        })
        .collect()
}

/// The 1-based line of index `at`.
fn line_of(t: &[char], at: usize) -> usize {
    t[..at].iter().filter(|&&c| c == '\n').count() + 1
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segments named after `crate::` on a line, groups included:
/// `use crate::{a::X, b};` → `a`, `b`.
fn crate_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let boundary = rest[..i].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = &rest[i + "crate::".len()..];
        rest = after;
        if !boundary {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let (mut depth, mut item_start) = (0usize, true);
            for (at, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && is_ident(c) => {
                        out.push(group[at..].chars().take_while(|&c| is_ident(c)).collect());
                        item_start = false;
                    }
                    c if item_start && !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            let word: String = after.chars().take_while(|&c| is_ident(c)).collect();
            if !word.is_empty() {
                out.push(word);
            }
        }
    }
    out
}

/// Room → rooms it imports, each with one place that does (`file:line`).
fn edges(files: &Files) -> BTreeMap<String, BTreeMap<String, String>> {
    let rooms: BTreeSet<String> = files.keys().map(|p| room(p)).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in files {
        let from = room(path);
        edges.entry(from.clone()).or_default();
        // lib.rs only declares the modules.
        if from == "lib" {
            continue;
        }
        for (n, line) in code(text).iter().enumerate() {
            for to in crate_paths(line) {
                if to != from && rooms.contains(&to) {
                    edges.get_mut(&from).unwrap().entry(to).or_insert_with(|| format!("src/{path}:{}", n + 1));
                }
            }
        }
    }
    edges
}

/// The groups of rooms that import each other (strongly connected components of more
/// than one room), Tarjan's algorithm.
fn cycles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges[v].keys().map(String::as_str) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The function whose header starts at line start `at`, as the checker's pattern
/// `^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+([a-zA-Z0-9_]+)`
/// matches it: (the end of the match, the name).
fn fn_header_at(t: &[char], at: usize) -> Option<(usize, String)> {
    let mut k = skip_ws(t, at);
    // One optional word followed by at least one space; `pub` may carry `(crate)`.
    let word = |k: usize, w: &str, paren: bool| -> Option<usize> {
        if !starts_with_at(t, k, w) {
            return None;
        }
        let mut after = k + w.len();
        if paren && t.get(after) == Some(&'(') {
            let close = find_from(t, after + 1, ')')?;
            if t.get(close + 1).is_some_and(|c| c.is_whitespace()) {
                return Some(skip_ws(t, close + 1));
            }
        }
        if paren && t.get(after) == Some(&'(') {
            return None;
        }
        if !t.get(after).is_some_and(|c| c.is_whitespace()) {
            return None;
        }
        after = skip_ws(t, after);
        Some(after)
    };
    for (w, paren) in [("pub", true), ("async", false), ("const", false), ("unsafe", false)] {
        if let Some(next) = word(k, w, paren) {
            k = next;
        }
    }
    let after_fn = word(k, "fn", false)?;
    let name: String = t[after_fn..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').collect();
    (!name.is_empty()).then(|| (after_fn + name.chars().count(), name))
}

/// Functions longer than `limit` code lines: (lines, `file`, name). Every `fn` header at a
/// line's start (nested ones too) with a body: from the header to its matching brace.
fn long_functions(files: &Files, limit: usize) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (path, file) in production(files) {
        let t = &file.blank;
        let mut pos = 0;
        let mut at = 0;
        while at <= t.len() {
            let line_start = at == 0 || t[at - 1] == '\n';
            let header = if at >= pos && line_start { fn_header_at(t, at) } else { None };
            let Some((end, name)) = header else {
                at += 1;
                continue;
            };
            let start = at;
            pos = end;
            at = end;
            let Some(open) = find_from(t, end, '{') else { continue };
            if find_from(t, end, ';').is_some_and(|semi| semi < open) {
                continue;
            }
            let close = matching_brace(t, open);
            let n = code_lines(&t[start..(close + 1).min(t.len())]);
            if n > limit {
                out.push((n, path.clone(), name));
            }
        }
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

/// Files with more than `limit` production lines: (lines, `file`).
fn long_files(files: &Files, limit: usize) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = production(files)
        .into_iter()
        .map(|(path, f)| (code_lines(&f.blank), path))
        .filter(|(n, _)| *n > limit)
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out
}

/// `format!`, `write!` and `writeln!` calls in the code of `src/diagnose/` (as
/// `\b(format|write|writeln)!\s*\(`).
fn diagnose_formats(files: &Files) -> usize {
    let mut n = 0;
    for (path, f) in production(files) {
        if !format!("src/{path}").contains("/diagnose/") {
            continue;
        }
        let t = &f.blank;
        for at in 0..t.len() {
            if at > 0 && is_word(t[at - 1]) {
                continue;
            }
            let after =
                ["format!", "writeln!", "write!"].iter().find(|m| starts_with_at(t, at, m)).map(|m| at + m.len());
            if after.is_some_and(|k| t.get(skip_ws(t, k)) == Some(&'(')) {
                n += 1;
            }
        }
    }
    n
}

/// Decisions that read a verdict's English: `missing` or `notes` followed on its line,
/// within 60 characters and no `;`, by `.contains("` (as
/// `\b(missing|notes)\b[^;\n]{0,60}\.contains\(\s*"`): `file:line`.
fn decisions_reading_english(files: &Files) -> Vec<String> {
    let mut out = Vec::new();
    for (path, f) in production(files) {
        let t = &f.raw;
        let mut at = 0;
        while at < t.len() {
            let matched = (at == 0 || !is_word(t[at - 1]))
                .then(|| ["missing", "notes"].iter().find(|w| starts_with_at(t, at, w)))
                .flatten()
                .map(|w| at + w.len())
                .filter(|&end| t.get(end).is_none_or(|&c| !is_word(c)))
                .and_then(|end| contains_call_after(t, end));
            match matched {
                Some(end) => {
                    out.push(format!("{path}:{}", line_of(t, at)));
                    at = end;
                }
                None => at += 1,
            }
        }
    }
    out
}

/// The end of `[^;\n]{0,60}\.contains\(\s*"` at `from`, taking the farthest `.contains(`.
fn contains_call_after(t: &[char], from: usize) -> Option<usize> {
    let run = t[from..].iter().take(60).take_while(|&&c| c != ';' && c != '\n').count();
    (0..=run).rev().find_map(|d| {
        let k = from + d;
        if !starts_with_at(t, k, ".contains(") {
            return None;
        }
        let q = skip_ws(t, k + ".contains(".len());
        (t.get(q) == Some(&'"')).then_some(q + 1)
    })
}

/// Keys from Debug text: `format!("{:?}"` in the code of `src/service/`: `file:line`.
fn debug_keys(files: &Files) -> Vec<String> {
    let mut out = Vec::new();
    for (path, f) in production(files) {
        if !format!("src/{path}").contains("/service/") {
            continue;
        }
        let t = &f.raw;
        for at in 0..t.len() {
            if starts_with_at(t, at, "format!(") && starts_with_at(t, skip_ws(t, at + "format!(".len()), "\"{:?}\"") {
                out.push(format!("{path}:{}", line_of(t, at)));
            }
        }
    }
    out
}

/// One shortest cycle through the rooms of `component`, starting at its first room:
/// `(from, to, where)` for each import on it.
fn a_cycle(edges: &BTreeMap<String, BTreeMap<String, String>>, component: &[String]) -> Vec<(String, String, String)> {
    let start = &component[0];
    // Breadth-first from `start` inside the component, until an edge leads back to it.
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(room) = queue.pop_front() {
        for next in edges[room].keys().filter(|n| component.contains(n)) {
            if next == start {
                let mut path = vec![(room.clone(), next.clone(), edges[room][next].clone())];
                let mut at = room;
                while at != start {
                    let prev = came_from[at];
                    path.push((prev.clone(), at.clone(), edges[prev][at].clone()));
                    at = prev;
                }
                path.reverse();
                return path;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, room);
                queue.push_back(next);
            }
        }
    }
    Vec::new()
}

#[test]
fn the_rooms_of_src_import_each_other_one_way_only() {
    let edges = edges(&read_src());
    let cycles = cycles(&edges);
    let explain: Vec<String> = cycles
        .iter()
        .map(|c| {
            let path: Vec<String> =
                a_cycle(&edges, c).into_iter().map(|(a, b, at)| format!("  {a} → {b} ({at})")).collect();
            format!("rooms {} import each other, e.g.:\n{}", c.join(", "), path.join("\n"))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "{}\nEvery import points down: move what both sides need to a room below both (docs/architecture.md).",
        explain.join("\n")
    );
}

#[test]
fn no_function_in_src_is_longer_than_120_lines() {
    let long = long_functions(&read_src(), MAX_FN_LINES);
    let list: Vec<String> = long.iter().map(|(n, p, f)| format!("  src/{p}: fn {f} is {n} lines")).collect();
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines; split them into named steps:\n{}", list.join("\n"));
}

#[test]
fn no_file_in_src_has_more_than_800_production_lines() {
    let long = long_files(&read_src(), MAX_FILE_LINES);
    let list: Vec<String> = long.iter().map(|(n, p)| format!("  src/{p}: {n} lines")).collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} production lines; split them along their seams:\n{}",
        list.join("\n")
    );
}

#[test]
fn the_diagnosis_builds_at_most_40_sentences_and_returns_facts_instead() {
    let n = diagnose_formats(&read_src());
    assert!(
        n <= MAX_DIAGNOSE_FORMATS,
        "{n} format!/write! calls in src/diagnose/ (at most {MAX_DIAGNOSE_FORMATS}): return facts, word them in src/render/"
    );
}

#[test]
fn no_decision_in_src_reads_a_missing_or_notes_string() {
    let found = decisions_reading_english(&read_src());
    assert!(
        found.is_empty(),
        "decisions reading a verdict's English (missing data and notes are typed):\n  src/{}",
        found.join("\n  src/")
    );
}

#[test]
fn no_persisted_key_in_src_service_is_built_from_debug_text() {
    let found = debug_keys(&read_src());
    assert!(
        found.is_empty(),
        "format!(\"{{:?}}\") in src/service/ (a renamed variant would change the key): use fixed names:\n  src/{}",
        found.join("\n  src/")
    );
}

/// The checks above must be able to fail: a planted cycle and a planted long function are
/// found.
#[test]
fn the_checks_find_a_planted_cycle_and_a_planted_long_function() {
    let mut files = Files::new();
    files.insert("lib.rs".into(), "pub mod a;\npub mod b;\npub mod c;\n".into());
    files.insert("a/mod.rs".into(), "use crate::b::X;\n// use crate::c::Y; (a comment)\n".into());
    files.insert("b.rs".into(), "use crate::{c::Z, config as _};\npub struct X;\n".into());
    files.insert("c.rs".into(), "pub fn f() { let _ = crate::a::g(); }\n#[cfg(test)]\nuse crate::b::X;\n".into());
    let e = edges(&files);
    assert_eq!(e["a"].keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(e["b"].keys().collect::<Vec<_>>(), ["c"]);
    assert_eq!(e["c"].keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(cycles(&e), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    let path: Vec<(String, String)> = a_cycle(&e, &cycles(&e)[0]).into_iter().map(|(a, b, _)| (a, b)).collect();
    assert_eq!(path, [("a".into(), "b".into()), ("b".into(), "c".into()), ("c".into(), "a".into())]);
    files.insert("c.rs".into(), "pub fn f() {}\n".into());
    assert!(cycles(&edges(&files)).is_empty());

    // 1 line `fn`, 121 body lines, 1 closing brace: 123 lines.
    let body = "    let x = 1;\n".repeat(121);
    files.insert("d.rs".into(), format!("pub(crate) async fn long() {{\n{body}}}\nfn short() {{}}\n"));
    assert_eq!(long_functions(&files, MAX_FN_LINES), vec![(123, "d.rs".to_string(), "long".to_string())]);
}

/// The whole file is read: production code after a `#[cfg(test)]` module counts, the
/// module (braces in its strings and comments included) does not.
#[test]
fn code_after_a_test_module_counts_and_the_test_module_does_not() {
    let mut files = Files::new();
    let body = "    let x = 1;\n".repeat(121);
    let test_module = format!(
        "#[cfg(test)]\n#[allow(dead_code)]\nmod tests {{\n    const S: &str = \"}}\";\n    // }} a brace in a comment\n    fn in_test() {{\n{body}    }}\n}}\n"
    );
    // In the test module: a 123-line fn and a `{:?}` key (not counted); after it, in
    // production code: a 123-line fn, the line of `format!` below.
    let text = format!(
        "fn first() {{}}\n{test_module}pub fn after() {{\n{body}}}\nfn key() -> String {{ format!(\"{{:?}}\", 1) }}\n"
    );
    files.insert("service/x.rs".into(), text.clone());
    assert_eq!(long_functions(&files, MAX_FN_LINES), vec![(123, "service/x.rs".to_string(), "after".to_string())]);
    // 1 (first) + 123 (after) + 1 (key): the test module's 128 lines are left out.
    assert_eq!(long_files(&files, 100), vec![(125, "service/x.rs".to_string())]);
    // The line in the text as the checker reports it, the module cut: `first` (1), the
    // newline the module's closing brace leaves (2), `after` (3 to 125), `key` (126).
    assert_eq!(debug_keys(&files), ["service/x.rs:126"]);
    // A `tests.rs` file is a test file.
    files.clear();
    files.insert("service/tests.rs".into(), text);
    assert!(long_functions(&files, MAX_FN_LINES).is_empty() && debug_keys(&files).is_empty());
}

#[test]
fn the_checks_find_a_long_file_sentences_in_the_diagnosis_english_read_and_a_debug_key() {
    let mut files = Files::new();
    // 801 code lines; blank and comment lines do not count.
    files.insert("collect/big.rs".into(), "const A: u8 = 1;\n\n// c\n".repeat(801));
    files.insert("collect/small.rs".into(), "const A: u8 = 1;\n".repeat(800));
    assert_eq!(long_files(&files, MAX_FILE_LINES), vec![(801, "collect/big.rs".to_string())]);

    // Three calls in src/diagnose/, one in a string and one in a comment not counted, none
    // counted outside src/diagnose/.
    let steps = "fn f(o: &mut String) {\n    let _ = format!(\"a\");\n    let _ = write!(o, \"b\");\n    let _ = writeln!  (o);\n    let _ = \"format!(x)\";\n    // format!(y)\n    let _ = reformat!(z);\n}\n";
    files.insert("diagnose/steps/x.rs".into(), steps.into());
    files.insert("render/x.rs".into(), steps.into());
    assert_eq!(diagnose_formats(&files), 3);

    files.insert(
        "service/worker.rs".into(),
        "fn f(v: &V) -> bool {\n    v.missing.iter().any(|m| m.contains(\"query failed\"))\n}\nfn g(v: &V) -> bool {\n    v.notes.len() > 1; x.contains(\"a\")\n}\nfn h(v: &V) -> bool { v.missing_kinds.contains(\"a\") }\nfn k(d: &D) -> String { format!( \"{:?}\", d.kind) }\nfn l(d: &D) -> String { format!(\"{:?} {}\", d.kind, 1) }\n".into(),
    );
    // Line 2 only: line 5's `;` ends the condition, line 7's word is `missing_kinds`.
    assert_eq!(decisions_reading_english(&files), ["service/worker.rs:2"]);
    // Line 8 (`"{:?}"` alone is the Debug text of a value); line 9 formats more.
    assert_eq!(debug_keys(&files), ["service/worker.rs:8"]);
}
