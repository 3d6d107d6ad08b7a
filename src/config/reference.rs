//! The configuration reference, derived from the types: every key of [`Config`] with its
//! type, default and doc comment, read from the JSON Schema `schemars` derives (serde's
//! names, defaults and `deny_unknown_fields` included). `docs/config-reference.md` is
//! [`markdown`]; a test keeps the checked-in file equal to it, and `tests/config_example.rs`
//! checks that `config/culprit.example.toml` documents every key at its default.
//!
//! Regenerate with `cargo run --example config_reference > docs/config-reference.md`.

use serde_json::{Map, Value};

use super::{Config, Millis};

/// One key of the file, as the types define it.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// Dotted path; `[]` marks an element of an array of tables: `flink.clusters[].name`.
    pub path: String,
    /// A table of settings (`[diagnosis.thresholds]`) rather than a value.
    pub table: bool,
    /// A table whose keys the user chooses (`[flink.plans]`, `match = { … }`).
    pub map: bool,
    /// A duration string (`"5m"`).
    pub duration: bool,
    /// The type, as the reference writes it (`duration`, `integer`, `"full" | "normal"`).
    pub kind: String,
    /// The default (JSON, as the types serialize it); `None` when the key has none.
    pub default: Option<Value>,
    /// Whether the key must be given (in an optional section or array element).
    pub required: bool,
    /// The doc comment: meaning, unit, default.
    pub doc: String,
}

impl Key {
    /// A default that sets something: not unset, empty string, empty list or empty table.
    pub fn meaningful_default(&self) -> Option<&Value> {
        self.default.as_ref().filter(|d| match d {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        })
    }

    /// Whether `value` (as JSON) is this key's default: durations compare as durations
    /// (`"7d"` is `"168h"`), numbers as numbers (`3` is `3.0`).
    pub fn is_default(&self, value: &Value) -> bool {
        self.default.as_ref().is_some_and(|d| same_value(d, value, self.duration))
    }
}

/// Whether two JSON values are the same setting.
fn same_value(a: &Value, b: &Value, duration: bool) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) if duration => {
            matches!((x.parse::<Millis>(), y.parse::<Millis>()), (Ok(p), Ok(q)) if p == q)
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q, duration))
        }
        _ => a == b,
    }
}

/// The JSON Schema of the configuration file.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(Config)).unwrap_or(Value::Null)
}

/// Every key of the file, tables and values, in schema order (alphabetical within a table).
pub fn keys() -> Vec<Key> {
    let schema = schema();
    let empty = Map::new();
    let defs = schema.get("$defs").and_then(Value::as_object).unwrap_or(&empty);
    let mut out = Vec::new();
    walk_table(&schema, "", defs, &mut Vec::new(), &mut out);
    out
}

/// The schema a property refers to: `$ref` followed, `Option`'s `anyOf [T, null]` unwrapped.
fn resolve<'a>(node: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        return defs.get(r.trim_start_matches("#/$defs/")).map_or(node, |d| resolve(d, defs));
    }
    if let Some(any) = node.get("anyOf").and_then(Value::as_array) {
        let not_null: Vec<&Value> = any.iter().filter(|v| v.get("type") != Some(&Value::from("null"))).collect();
        if let [one] = not_null[..] {
            return resolve(one, defs);
        }
        // A section written once or as a list of the same (`OneOrMany`): its keys are the
        // section's.
        if let [one, list] = not_null[..]
            && list.get("items") == Some(one)
        {
            return resolve(one, defs);
        }
    }
    node
}

/// Whether `node` (resolved) is a table of named settings.
fn is_struct(node: &Value) -> bool {
    node.get("properties").is_some()
}

/// `ancestors`: the tables being walked, outermost first. A table whose type holds itself
/// (`[route]` and its `[[route.routes]]`) is listed once: its nested copies have the same
/// keys.
fn walk_table<'a>(
    table: &'a Value,
    prefix: &str,
    defs: &'a Map<String, Value>,
    ancestors: &mut Vec<&'a Value>,
    out: &mut Vec<Key>,
) {
    if ancestors.iter().any(|a| std::ptr::eq(*a, table)) {
        return;
    }
    ancestors.push(table);
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    let props = table.get("properties").and_then(Value::as_object).unwrap_or(&EMPTY);
    let required: Vec<&str> =
        table.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    for (name, prop) in props {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let target = resolve(prop, defs);
        let element = target.get("items").map(|i| resolve(i, defs)).filter(|i| is_struct(i));
        let doc = [Some(prop), Some(target), element]
            .into_iter()
            .flatten()
            .find_map(|n| n.get("description").and_then(Value::as_str))
            .unwrap_or("")
            .split('\n')
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        let table = is_struct(target) || element.is_some();
        out.push(Key {
            path: if element.is_some() { format!("{path}[]") } else { path.clone() },
            table,
            map: target.get("additionalProperties").is_some_and(Value::is_object),
            duration: target.get("format") == Some(&Value::from("duration")),
            kind: if let Some(e) = element {
                format!("array of tables ({})", title(e))
            } else if table {
                "table".into()
            } else {
                kind(target, defs)
            },
            default: if table { None } else { prop.get("default").cloned() },
            required: required.contains(&name.as_str()),
            doc,
        });
        match element {
            Some(e) => walk_table(e, &format!("{path}[]"), defs, ancestors, out),
            None if table => walk_table(target, &path, defs, ancestors, out),
            None => {}
        }
    }
    ancestors.pop();
}

/// A table's one-line title: the first sentence of its type's doc.
fn title(node: &Value) -> String {
    let doc = node.get("description").and_then(Value::as_str).unwrap_or("");
    doc.split(". ").next().unwrap_or(doc).trim_end_matches('.').replace('\n', " ")
}

/// A value's type as the reference writes it.
fn kind(node: &Value, defs: &Map<String, Value>) -> String {
    let node = resolve(node, defs);
    if let Some(c) = node.get("const") {
        return c.to_string();
    }
    if let Some(variants) = node.get("oneOf").and_then(Value::as_array) {
        return variants.iter().map(|v| variant(v, defs)).collect::<Vec<_>>().join(" | ");
    }
    let ty = match node.get("type") {
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or(""),
        Some(t) => t.as_str().unwrap_or(""),
        None => "",
    };
    match ty {
        "string" if node.get("format") == Some(&Value::from("duration")) => "duration".into(),
        "array" => format!("array of {}", node.get("items").map_or("any".into(), |i| kind(i, defs))),
        "object" => match node.get("additionalProperties") {
            Some(v) if v.is_object() => format!("table of {}", kind(v, defs)),
            _ => "table".into(),
        },
        "" => "any".into(),
        t => t.into(),
    }
}

/// One variant of an enum: a constant, or an inline table with its keys.
fn variant(node: &Value, defs: &Map<String, Value>) -> String {
    let node = resolve(node, defs);
    let Some(props) = node.get("properties").and_then(Value::as_object) else { return kind(node, defs) };
    // The tag (`type = "bearer"`) first.
    let mut props: Vec<(&String, &Value)> = props.iter().collect();
    props.sort_by_key(|(_, v)| v.get("const").is_none());
    let fields: Vec<String> = props
        .into_iter()
        .map(|(k, v)| match v.get("const") {
            Some(c) => format!("{k} = {c}"),
            None => match resolve(v, defs).get("oneOf") {
                Some(_) => format!("{k} = secret"),
                None => format!("{k} = {}", kind(v, defs)),
            },
        })
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// A default as TOML writes it.
fn toml_value(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!("[{}]", a.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        Value::Object(o) if o.is_empty() => "{}".into(),
        Value::Object(o) => {
            format!(
                "{{ {} }}",
                o.iter().map(|(k, v)| format!("{k} = {}", toml_value(v))).collect::<Vec<_>>().join(", ")
            )
        }
        other => other.to_string(),
    }
}

/// A table cell: one line, pipes escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `docs/config-reference.md`: one section per table, one row per key.
pub fn markdown() -> String {
    let keys = keys();
    let mut out = String::from(
        "# Configuration reference\n\n\
         Every key of `culprit.toml`, derived from the types in `src/config/` (their doc comments,\n\
         serde defaults and names); `config/culprit.example.toml` is the same file as a commented\n\
         example. Generated: do not edit by hand, run\n\
         `cargo run --example config_reference > docs/config-reference.md`\n\
         (a test fails when this file differs from the types).\n\n\
         Durations are strings such as `\"20s\"`, `\"5m\"`, `\"1h30m\"`, `\"7d\"` (a day is 24 h);\n\
         defaults are written as culprit prints them (`\"168h\"` is `\"7d\"`). A secret is\n\
         `{ env = \"VARIABLE\" }` or `{ file = \"/path\" }`, never an inline value. Unknown keys are\n\
         rejected.\n",
    );
    let mut sections: Vec<(&str, Vec<&Key>)> = vec![("", Vec::new())];
    for k in &keys {
        if k.table && !k.map {
            sections.push((&k.path, Vec::new()));
        } else {
            let parent = k.path.rsplit_once('.').map_or("", |(p, _)| p);
            if let Some((_, rows)) = sections.iter_mut().find(|(p, _)| *p == parent) {
                rows.push(k);
            }
        }
    }
    for (path, rows) in sections.iter().filter(|(p, _)| !p.is_empty()) {
        let key = keys.iter().find(|k| k.path == *path);
        let header = match path.strip_suffix("[]") {
            Some(p) => format!("[[{p}]]"),
            None => format!("[{path}]"),
        };
        out.push_str(&format!("\n## `{header}`\n\n{}\n", key.map_or("", |k| k.doc.as_str())));
        if rows.is_empty() {
            continue;
        }
        out.push_str("\n| Key | Type | Default | Meaning |\n|---|---|---|---|\n");
        for k in rows {
            let name = k.path.rsplit_once('.').map_or(k.path.as_str(), |(_, n)| n);
            let default = match (&k.default, k.required) {
                (_, true) => "required".to_string(),
                (Some(Value::Null) | None, _) => "unset".to_string(),
                (Some(d), _) => format!("`{}`", toml_value(d)),
            };
            out.push_str(&format!("| `{name}` | {} | {} | {} |\n", cell(&k.kind), cell(&default), cell(&k.doc)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_types_define_has_a_doc_comment() {
        let undocumented: Vec<String> = keys().into_iter().filter(|k| k.doc.is_empty()).map(|k| k.path).collect();
        assert!(undocumented.is_empty(), "keys without a doc comment: {undocumented:?}");
    }

    /// The default a doc comment states, as JSON: "Default 5m.", "Default `job_id`.",
    /// "Default 1 MiB", "Default [`CONSTANT`] (64 MiB)"; `None` when it states none.
    fn stated_default(doc: &str) -> Option<Value> {
        let rest = doc.split_once("Default ")?.1;
        let bytes = |unit: &str| match unit {
            "KiB" => Some(1024.0),
            "MiB" => Some(1024.0 * 1024.0),
            "GiB" => Some(1024.0 * 1024.0 * 1024.0),
            _ => None,
        };
        let rest = match rest.strip_prefix("[`") {
            // A constant, its value in parentheses after it.
            Some(r) => r.split_once('(')?.1.split(')').next()?,
            None => rest,
        };
        if let Some(code) = rest.strip_prefix('`') {
            let code = code.split('`').next()?;
            return Some(serde_json::from_str(code).unwrap_or_else(|_| Value::from(code)));
        }
        let mut words = rest.split_whitespace();
        let word = words.next()?.trim_end_matches(['.', ',', ';', ')', ':']);
        let unit = words.next().map(|u| u.trim_end_matches(['.', ',', ';', ')']));
        if let (Ok(n), Some(b)) = (word.parse::<f64>(), unit.and_then(bytes)) {
            return Some(Value::from(n * b));
        }
        Some(match word {
            "true" | "false" => Value::from(word == "true"),
            _ => word.parse::<f64>().map_or_else(|_| Value::from(word), Value::from),
        })
    }

    #[test]
    fn every_default_a_doc_comment_states_is_the_types_default() {
        let keys = keys();
        let stated: Vec<(&Key, Value)> = keys
            .iter()
            .filter_map(|k| Some((k, stated_default(&k.doc)?)))
            .filter(|(k, _)| k.default.is_some())
            .collect();
        // Most keys say their default in their doc (and so in the reference).
        assert!(stated.len() > 70, "{} keys state a default", stated.len());
        let wrong: Vec<String> = stated
            .iter()
            .filter(|(k, d)| !k.is_default(d))
            .map(|(k, d)| format!("{}: the doc says {d}, the type's default is {:?}", k.path, k.default))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
        // The forms it reads: a size, a constant's value, code, a duration the type prints
        // otherwise ("7d" is "168h"), a number written otherwise ("0.10" is 0.1).
        assert_eq!(stated_default("Largest body, bytes. Default 1 MiB."), Some(Value::from(1_048_576.0)));
        assert_eq!(stated_default("Default [`C`] (64 MiB)."), Some(Value::from(67_108_864.0)));
        assert_eq!(stated_default("Default `[\"a\"]`."), Some(serde_json::json!(["a"])));
        assert_eq!(stated_default("Default 7d."), Some(Value::from("7d")));
        assert_eq!(stated_default("Defaults: `deployment` ← `app`"), None);
    }

    #[test]
    fn the_checked_in_reference_is_the_one_the_types_give() {
        let checked_in = include_str!("../../docs/config-reference.md");
        let generated = markdown();
        let first = checked_in.lines().zip(generated.lines()).position(|(a, b)| a != b);
        assert!(
            checked_in == generated,
            "docs/config-reference.md differs from the types (from line {}): run `cargo run --example config_reference > docs/config-reference.md`",
            first.map_or(checked_in.lines().count().min(generated.lines().count()), |i| i) + 1
        );
    }

    #[test]
    fn the_walk_finds_the_keys_of_every_kind_with_their_defaults() {
        let keys = keys();
        let key = |p: &str| keys.iter().find(|k| k.path == p).unwrap_or_else(|| panic!("no key {p}"));
        // A duration at its default, 5 minutes.
        let window = key("diagnosis.window");
        assert!(window.duration && window.is_default(&Value::from("300s")) && !window.is_default(&"6m".into()));
        // A threshold: 0.10.
        assert_eq!(key("diagnosis.thresholds.backpressured_ratio").default, Some(Value::from(0.1)));
        // An optional section's key with a default of its own (10 s), and its required URL.
        assert!(key("prometheus.timeout").is_default(&"10s".into()));
        assert!(key("prometheus.url").required);
        // An array of tables and a key of its elements.
        assert!(key("flink.clusters[]").table && key("flink.clusters[].name").required);
        // User-chosen keys.
        assert!(key("flink.plans").map && key("flink.clusters[].match").map);
        assert_eq!(key("store.synchronous").kind, "\"full\" | \"normal\"");
        assert_eq!(key("store.synchronous").default, Some(Value::from("full")));
        // Every key once.
        let mut paths: Vec<&str> = keys.iter().map(|k| k.path.as_str()).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), keys.len());
    }
}
