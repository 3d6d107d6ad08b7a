//! The shape of `src/` (docs/architecture.md): every import between its rooms points one
//! way, and no function is longer than a screenful or two.
//!
//! A room is a top-level file or folder of `src/` (`config.rs`, `collect/`). An edge
//! `a → b` is a `crate::b` path in code of room `a` (comments and `#[cfg(test)]` code
//! left out, as tests may reach anywhere). The rooms must form no cycle. Functions are
//! measured from their `fn` line to the closing brace at the same indentation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Longest function allowed in `src/`, in lines (tests aside).
const MAX_FN_LINES: usize = 120;

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

/// The code of a file that counts: before its first `#[cfg(test)]`, comment lines out.
/// Line numbers are kept (comment lines become empty).
fn code(text: &str) -> Vec<&str> {
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
    before_tests.lines().map(|l| if l.trim_start().starts_with("//") { "" } else { l }).collect()
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

/// A function's name when `line` opens a function body (`pub(crate) async fn name(`).
fn fn_name(line: &str) -> Option<&str> {
    if line.trim_end().ends_with(';') {
        return None;
    }
    let mut rest = line.trim_start();
    loop {
        let before = rest;
        for q in ["pub ", "async ", "const ", "unsafe "] {
            rest = rest.strip_prefix(q).unwrap_or(rest);
        }
        if rest.starts_with("pub(") {
            rest = rest.split_once(") ").map(|(_, r)| r).unwrap_or(rest);
        }
        if rest == before {
            break;
        }
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !is_ident(c)).unwrap_or(name.len());
    (end > 0).then(|| &name[..end])
}

/// Functions longer than `limit` lines: (lines, `file`, name).
fn long_functions(files: &Files, limit: usize) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (path, text) in files {
        let lines = code(text);
        for (k, line) in lines.iter().enumerate() {
            let Some(name) = fn_name(line) else { continue };
            let indent = &line[..line.len() - line.trim_start().len()];
            let close = format!("{indent}}}");
            if let Some(j) = (k + 1..lines.len()).find(|&j| lines[j] == close) {
                let len = j - k + 1;
                if len > limit {
                    out.push((len, path.clone(), name.to_string()));
                }
            }
        }
    }
    out.sort_by(|a, b| b.cmp(a));
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
