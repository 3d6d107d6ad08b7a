//! `[route]`: which destinations a job's notices go to, as a tree like Alertmanager's
//! (<https://prometheus.io/docs/alerting/latest/configuration/#route>), over the labels of
//! the job's alerts and the job's own (`job_name`, `job_id`).
//!
//! * The root route takes every notice; its `destinations` default to every configured
//!   destination, so a configuration without `[route]` sends everything everywhere, as
//!   before routes existed.
//! * A route's children (`[[route.routes]]`) are tried in order; the first whose matchers
//!   all hold takes the notice, and the ones after it are tried too only when it has
//!   `continue = true`. A route none of whose children takes the notice sends it to its own
//!   `destinations`. A child leaves out what it inherits: `destinations`, `min_confidence`
//!   and `could_not_diagnose` come from its parent unless it sets them.
//! * Matchers are Alertmanager's: `name = value`, `!=`, `=~` and `!~` (an RE2-style regular
//!   expression matching the whole value, as Alertmanager anchors it), the value bare or in
//!   double quotes with `\"` and `\\` escapes. A label the alert does not carry has the
//!   value "" (so `team != "payments"` holds for an alert without `team`).
//! * Per route, which verdicts go out: `min_confidence` (verdicts below it are not sent to
//!   that route's destinations) and `could_not_diagnose = false`. A destination reached
//!   by several routes takes a notice any of them lets through. A group's resolution and
//!   the ties between groups always go where the episode went. What a destination never
//!   takes stays its own rule (PagerDuty: never "could not diagnose").
//!
//! Pure: the decision is data in, data out; the service applies it when it plans a
//! diagnosis's notices, `check-config --route` prints it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::notice::{Notice, NoticeKind};
use crate::model::verdict::{Confidence, JobRef};

/// The root of the tree, `[route]`: takes every alert.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RouteConfig {
    /// The destinations by name: `slack`, `pagerduty`, `alertmanager`, and a list's
    /// sections as `<kind>:<name>` (`webhook:ops`, `teams:payments`). Unset: every
    /// configured destination. `[]`: none.
    pub destinations: Option<Vec<String>>,
    /// Verdicts below this confidence (`low` < `medium` < `high`) are not sent. Unset:
    /// every verdict.
    pub min_confidence: Option<Confidence>,
    /// Whether "could not diagnose" notices are sent. Unset: true (PagerDuty never takes
    /// them anyway).
    pub could_not_diagnose: Option<bool>,
    /// Child routes, tried in order.
    pub routes: Vec<Route>,
}

/// One route below the root (`[[route.routes]]`, nested as `routes` again).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Route {
    /// Label matchers that must all hold, Alertmanager's syntax: `team = "payments"`,
    /// `namespace =~ "pay-.*"`, `severity != info`; one string may hold several, separated
    /// by commas (`'team = "a", env = "prod"'`, optionally in `{…}`). Empty: every alert.
    #[serde(deserialize_with = "matcher_lists")]
    pub matchers: Vec<Matcher>,
    /// The destinations by name, as `[route]`'s. Unset: the parent's. `[]`: none (a
    /// route that silences).
    pub destinations: Option<Vec<String>>,
    /// After this route takes a notice, go on trying its later siblings. Default false.
    #[serde(rename = "continue")]
    pub continue_matching: bool,
    /// Verdicts below this confidence are not sent to this route's destinations. Unset:
    /// the parent's.
    pub min_confidence: Option<Confidence>,
    /// Whether "could not diagnose" notices go to this route's destinations. Unset: the
    /// parent's.
    pub could_not_diagnose: Option<bool>,
    /// Child routes, tried in order: each a route like this one, nested to any depth.
    pub routes: Vec<Route>,
}

/// How a matcher compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Regex,
    NotRegex,
}

impl MatchOp {
    fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }
}

/// One label matcher, `name op value`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    /// The regular expression of `=~` / `!~`, anchored at both ends.
    regex: Option<regex::Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, self.op, &self.value) == (&other.name, other.op, &other.value)
    }
}

impl schemars::JsonSchema for Matcher {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Matcher".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A label matcher: `name = value`, `name != value`, `name =~ regex`, `name !~ regex` (value bare or double-quoted)."
        })
    }
}

impl Matcher {
    /// Whether the matcher holds for these labels (a missing label is "").
    pub fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.name).map(String::as_str).unwrap_or("");
        match self.op {
            MatchOp::Equal => value == self.value,
            MatchOp::NotEqual => value != self.value,
            MatchOp::Regex => self.regex.as_ref().is_some_and(|r| r.is_match(value)),
            MatchOp::NotRegex => !self.regex.as_ref().is_some_and(|r| r.is_match(value)),
        }
    }
}

/// Every string of `matchers`, each holding one matcher or several separated by commas
/// outside quotes (Alertmanager's form), optionally in braces.
fn matcher_lists<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Matcher>, D::Error> {
    let texts = Vec::<String>::deserialize(d)?;
    let mut out = Vec::new();
    for text in &texts {
        out.extend(parse_matchers(text).map_err(serde::de::Error::custom)?);
    }
    Ok(out)
}

/// `team = "a", env =~ "prod|stage"` (or the same in `{…}`) as its matchers.
pub fn parse_matchers(text: &str) -> Result<Vec<Matcher>, String> {
    let t = text.trim();
    let t = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(t);
    let (mut parts, mut current, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in t.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let parts: Vec<&str> = parts.iter().map(|p| p.trim()).collect();
    if parts.iter().any(|p| p.is_empty()) && parts.len() > 1 {
        return Err(format!("matchers `{text}`: an empty matcher between commas"));
    }
    parts.into_iter().filter(|p| !p.is_empty()).map(str::parse).collect()
}

impl TryFrom<String> for Matcher {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<Matcher> for String {
    fn from(m: Matcher) -> String {
        m.to_string()
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let escaped = self.value.replace('\\', "\\\\").replace('"', "\\\"");
        write!(f, "{} {} \"{escaped}\"", self.name, self.op.as_str())
    }
}

impl std::str::FromStr for Matcher {
    type Err = String;

    /// `team = payments`, `namespace=~"pay-.*"`, `x != "a \"quoted\" value"`.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("matcher `{text}`: {why} (expected `label = value`, `!=`, `=~` or `!~`)");
        let t = text.trim();
        let name_end = t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(t.len());
        let name = &t[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("no label name"));
        }
        let rest = t[name_end..].trim_start();
        let (op, rest) = if let Some(r) = rest.strip_prefix("=~") {
            (MatchOp::Regex, r)
        } else if let Some(r) = rest.strip_prefix("!~") {
            (MatchOp::NotRegex, r)
        } else if let Some(r) = rest.strip_prefix("!=") {
            (MatchOp::NotEqual, r)
        } else if let Some(r) = rest.strip_prefix('=') {
            (MatchOp::Equal, r)
        } else {
            return Err(bad("no operator"));
        };
        let rest = rest.trim();
        let value = match rest.strip_prefix('"') {
            Some(quoted) => {
                let mut out = String::new();
                let mut chars = quoted.chars();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some(n @ ('"' | '\\')) => out.push(n),
                            Some('n') => out.push('\n'),
                            Some(n) => {
                                out.push('\\');
                                out.push(n);
                            }
                            None => return Err(bad("an unfinished escape")),
                        },
                        '"' => {
                            closed = true;
                            break;
                        }
                        c => out.push(c),
                    }
                }
                if !closed {
                    return Err(bad("an unclosed quote"));
                }
                if !chars.as_str().trim().is_empty() {
                    return Err(bad("text after the quoted value"));
                }
                out
            }
            None => {
                // A bare value is one word of the value: a quote in it, or an operator
                // typed twice (`==`, `=~~`), is a mistake, never part of it.
                if rest.contains('"') || rest.starts_with(['=', '~']) {
                    return Err(bad("a bare value with a quote or an operator in it (quote the value)"));
                }
                rest.to_string()
            }
        };
        let regex = match op {
            MatchOp::Regex | MatchOp::NotRegex => Some(regex::Regex::new(&format!("^(?:{value})$")).map_err(|e| {
                bad(&format!("not a regular expression: {}", e.to_string().lines().last().unwrap_or("")))
            })?),
            _ => None,
        };
        Ok(Matcher { name: name.to_string(), op, value, regex })
    }
}

/// A route that took a notice's labels, with what it inherited resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    /// Its key: `route`, `route.routes[1]`, `route.routes[1].routes[0]`.
    pub key: String,
    pub destinations: Vec<String>,
    pub min_confidence: Option<Confidence>,
    pub could_not_diagnose: bool,
}

/// Where one job's notices go: every route that took its labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub taken: Vec<Taken>,
}

impl Decision {
    /// Whether any route sends to `destination`.
    pub fn routes_to(&self, destination: &str) -> bool {
        self.taken.iter().any(|t| t.destinations.iter().any(|d| d == destination))
    }

    /// Every destination, in the order the routes name them, each once.
    pub fn destinations(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for d in self.taken.iter().flat_map(|t| &t.destinations) {
            if !out.contains(d) {
                out.push(d.clone());
            }
        }
        out
    }

    /// Whether `destination` takes this notice: some route that sends to it lets it
    /// through (its confidence floor, its "could not diagnose" switch).
    pub fn lets_through(&self, destination: &str, notice: &Notice) -> bool {
        self.taken.iter().filter(|t| t.destinations.iter().any(|d| d == destination)).any(|t| match notice.kind {
            NoticeKind::Verdict => match (t.min_confidence, &notice.verdict) {
                (Some(floor), Some(v)) => rank(v.confidence) >= rank(floor),
                _ => true,
            },
            NoticeKind::CouldNotDiagnose => t.could_not_diagnose,
            NoticeKind::Resolved | NoticeKind::Joined | NoticeKind::GroupResolved | NoticeKind::Incident => true,
        })
    }
}

fn rank(c: Confidence) -> u8 {
    match c {
        Confidence::Low => 0,
        Confidence::Medium => 1,
        Confidence::High => 2,
    }
}

/// The labels a job's notices are routed by: its alerts' common labels, with `job_name`
/// and `job_id` of the job added where the alerts do not carry them.
pub fn labels_of(alert_labels: &BTreeMap<String, String>, job: &JobRef) -> BTreeMap<String, String> {
    let mut out = alert_labels.clone();
    if !job.name.is_empty() {
        out.entry("job_name".into()).or_insert_with(|| job.name.clone());
    }
    if !job.id.is_empty() {
        out.entry("job_id".into()).or_insert_with(|| job.id.clone());
    }
    out
}

/// Inherited settings on the way down the tree.
struct Inherited<'a> {
    destinations: &'a [String],
    min_confidence: Option<Confidence>,
    could_not_diagnose: bool,
}

/// A route as the walk sees it: the root is one without matchers.
struct Node<'a> {
    destinations: Option<&'a [String]>,
    continue_matching: bool,
    min_confidence: Option<Confidence>,
    could_not_diagnose: Option<bool>,
    matchers: &'a [Matcher],
    routes: &'a [Route],
}

impl<'a> From<&'a Route> for Node<'a> {
    fn from(r: &'a Route) -> Self {
        Node {
            destinations: r.destinations.as_deref(),
            continue_matching: r.continue_matching,
            min_confidence: r.min_confidence,
            could_not_diagnose: r.could_not_diagnose,
            matchers: &r.matchers,
            routes: &r.routes,
        }
    }
}

impl RouteConfig {
    fn node(&self) -> Node<'_> {
        Node {
            destinations: self.destinations.as_deref(),
            continue_matching: false,
            min_confidence: self.min_confidence,
            could_not_diagnose: self.could_not_diagnose,
            matchers: &[],
            routes: &self.routes,
        }
    }

    /// Where notices with these labels go; `configured` is every configured destination's
    /// name (the root's default).
    pub fn decide(&self, labels: &BTreeMap<String, String>, configured: &[String]) -> Decision {
        let root = Inherited { destinations: configured, min_confidence: None, could_not_diagnose: true };
        let mut taken = Vec::new();
        self.node().walk("route".into(), &root, labels, &mut taken);
        Decision { taken }
    }

    /// Problems: a destination named that is not configured.
    pub fn validate(&self, configured: &[String], problems: &mut Vec<String>) {
        self.node().check("route", configured, problems);
    }

    /// The tree, one route per line, indented by depth, each with what it inherits
    /// resolved: what `check-config` prints.
    pub fn describe(&self, configured: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let root = Inherited { destinations: configured, min_confidence: None, could_not_diagnose: true };
        self.node().describe_into("route", 0, &root, &mut out);
        out
    }
}

impl Node<'_> {
    fn walk(&self, key: String, parent: &Inherited<'_>, labels: &BTreeMap<String, String>, out: &mut Vec<Taken>) {
        let me = Inherited {
            destinations: self.destinations.unwrap_or(parent.destinations),
            min_confidence: self.min_confidence.or(parent.min_confidence),
            could_not_diagnose: self.could_not_diagnose.unwrap_or(parent.could_not_diagnose),
        };
        let mut any = false;
        for (i, child) in self.routes.iter().enumerate() {
            if child.matchers.iter().all(|m| m.holds(labels)) {
                any = true;
                Node::from(child).walk(format!("{key}.routes[{i}]"), &me, labels, out);
                if !child.continue_matching {
                    break;
                }
            }
        }
        if !any {
            out.push(Taken {
                key,
                destinations: me.destinations.to_vec(),
                min_confidence: me.min_confidence,
                could_not_diagnose: me.could_not_diagnose,
            });
        }
    }

    fn check(&self, key: &str, configured: &[String], problems: &mut Vec<String>) {
        for d in self.destinations.into_iter().flatten() {
            if !configured.contains(d) {
                let known =
                    if configured.is_empty() { "none is configured".to_string() } else { configured.join(", ") };
                problems.push(format!("{key}.destinations: `{d}` is not a configured destination ({known})"));
            }
        }
        for (i, child) in self.routes.iter().enumerate() {
            Node::from(child).check(&format!("{key}.routes[{i}]"), configured, problems);
        }
    }

    fn describe_into(&self, key: &str, depth: usize, parent: &Inherited<'_>, out: &mut Vec<String>) {
        let me = Inherited {
            destinations: self.destinations.unwrap_or(parent.destinations),
            min_confidence: self.min_confidence.or(parent.min_confidence),
            could_not_diagnose: self.could_not_diagnose.unwrap_or(parent.could_not_diagnose),
        };
        let destinations = me.destinations;
        let mut parts = Vec::new();
        if depth > 0 {
            let m: Vec<String> = self.matchers.iter().map(|m| m.to_string()).collect();
            parts.push(if m.is_empty() { "every alert".to_string() } else { m.join(", ") });
        }
        parts.push(format!(
            "→ {}",
            if destinations.is_empty() { "nowhere".to_string() } else { destinations.join(", ") }
        ));
        if let Some(c) = me.min_confidence {
            parts.push(format!("confidence ≥ {}", c.as_str()));
        }
        if !me.could_not_diagnose {
            parts.push("no \"could not diagnose\"".into());
        }
        if self.continue_matching {
            parts.push("continue".into());
        }
        out.push(format!("{}{key}: {}", "  ".repeat(depth), parts.join("; ")));
        for (i, child) in self.routes.iter().enumerate() {
            Node::from(child).describe_into(&format!("{key}.routes[{i}]"), depth + 1, &me, out);
        }
    }
}

/// `namespace=payments,team=fraud` as labels (what `check-config --route` takes).
pub fn parse_label_set(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("`{pair}` is not label=value"))?;
        let (k, v) = (k.trim(), v.trim().trim_matches('"'));
        if k.is_empty() {
            return Err(format!("`{pair}` has no label name"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn all() -> Vec<String> {
        ["slack", "pagerduty", "slack:payments", "opsgenie:payments", "teams:fraud"].map(String::from).to_vec()
    }

    const TREE: &str = r#"
        destinations = ["slack", "pagerduty"]
        [[routes]]
        matchers = ['team = "payments"']
        destinations = ["slack:payments"]
        continue = true
        [[routes]]
        matchers = ['team =~ "pay.*"', 'severity != info']
        destinations = ["opsgenie:payments"]
        min_confidence = "medium"
        could_not_diagnose = false
        [[routes]]
        matchers = ['namespace = fraud']
        destinations = ["teams:fraud"]
        [[routes.routes]]
        matchers = ['cluster = "eu-1"']
    "#;

    #[test]
    fn matchers_read_alertmanagers_syntax_quoted_or_bare() {
        let m: Matcher = "team=payments".parse().unwrap();
        assert_eq!((m.name.as_str(), m.op, m.value.as_str()), ("team", MatchOp::Equal, "payments"));
        let m: Matcher = r#"x != "a \"b\" \\c""#.parse().unwrap();
        assert_eq!((m.op, m.value.as_str()), (MatchOp::NotEqual, r#"a "b" \c"#));
        // Display writes it back in a form that reads the same.
        assert_eq!(m.to_string().parse::<Matcher>().unwrap(), m);
        let m: Matcher = "ns =~ pay-.*".parse().unwrap();
        // Anchored: the whole value must match.
        assert!(m.holds(&labels(&[("ns", "pay-eu")])) && !m.holds(&labels(&[("ns", "old-pay-eu")])));
        for bad in [
            "= x",
            "team",
            "team ~ x",
            r#"team = "open"#,
            "team =~ (",
            r#"t = "a" b"#,
            "team == x",
            r#"team = pay"ments"#,
        ] {
            assert!(bad.parse::<Matcher>().is_err(), "{bad}");
        }
        // A missing label is "": `!=` holds, `=` to "" holds.
        assert!("team != payments".parse::<Matcher>().unwrap().holds(&BTreeMap::new()));
        assert!(r#"team = """#.parse::<Matcher>().unwrap().holds(&BTreeMap::new()));
    }

    #[test]
    fn one_string_may_hold_several_matchers_as_alertmanager_writes_them() {
        let r: Route =
            toml::from_str(r#"matchers = ['team != payments, severity = "info, low"', '{env=~"prod|stage"}']"#)
                .unwrap();
        let m: Vec<String> = r.matchers.iter().map(|m| m.to_string()).collect();
        // The comma inside quotes belongs to the value; outside, it separates matchers.
        assert_eq!(m, [r#"team != "payments""#, r#"severity = "info, low""#, r#"env =~ "prod|stage""#]);
        assert!(toml::from_str::<Route>("matchers = ['team = a,, env = b']").is_err());
    }

    #[test]
    fn the_first_matching_child_takes_the_alert_and_continue_tries_the_next() {
        let tree: RouteConfig = toml::from_str(TREE).unwrap();
        // payments: route 0 (continue) and route 1 (pay.*, severity "" != info).
        let d = tree.decide(&labels(&[("team", "payments")]), &all());
        assert_eq!(d.destinations(), ["slack:payments", "opsgenie:payments"]);
        assert_eq!(d.taken.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["route.routes[0]", "route.routes[1]"]);
        // payments at severity info: only route 0 (route 1's matcher fails), not the root.
        let d = tree.decide(&labels(&[("team", "payments"), ("severity", "info")]), &all());
        assert_eq!(d.destinations(), ["slack:payments"]);
        // fraud in eu-1: route 2, then its child (which inherits teams:fraud).
        let d = tree.decide(&labels(&[("namespace", "fraud"), ("cluster", "eu-1")]), &all());
        assert_eq!(d.taken.len(), 1);
        assert_eq!(
            (d.taken[0].key.as_str(), d.destinations()),
            ("route.routes[2].routes[0]", vec!["teams:fraud".into()])
        );
        // Nobody's: the root's own.
        assert_eq!(tree.decide(&labels(&[("team", "search")]), &all()).destinations(), ["slack", "pagerduty"]);
    }

    #[test]
    fn no_route_section_sends_everything_everywhere_as_before() {
        let d = RouteConfig::default().decide(&labels(&[("team", "x")]), &all());
        assert_eq!(d.destinations(), all());
        assert_eq!(d.taken[0].min_confidence, None);
        assert!(d.taken[0].could_not_diagnose);
    }

    #[test]
    fn a_route_lets_verdicts_through_by_confidence_and_could_not_diagnose_by_its_switch() {
        let tree: RouteConfig = toml::from_str(TREE).unwrap();
        let d = tree.decide(&labels(&[("team", "payments")]), &all());
        let mut n = crate::samples::notice(NoticeKind::Verdict);
        let v = n.verdict.as_mut().unwrap();
        v.confidence = Confidence::Low;
        // Low: Slack's route has no floor, Opsgenie's wants medium.
        assert!(d.lets_through("slack:payments", &n) && !d.lets_through("opsgenie:payments", &n));
        n.verdict.as_mut().unwrap().confidence = Confidence::Medium;
        assert!(d.lets_through("opsgenie:payments", &n));
        let cnd = crate::samples::notice(NoticeKind::CouldNotDiagnose);
        assert!(d.lets_through("slack:payments", &cnd) && !d.lets_through("opsgenie:payments", &cnd));
        // A resolution goes wherever the episode went.
        let resolved = crate::samples::notice(NoticeKind::Resolved);
        assert!(d.lets_through("opsgenie:payments", &resolved));
        // A destination no route names takes nothing.
        assert!(!d.routes_to("slack") && !d.lets_through("slack", &resolved));
    }

    #[test]
    fn destinations_that_are_not_configured_are_problems_and_the_root_takes_no_matchers() {
        let tree: RouteConfig = toml::from_str(TREE).unwrap();
        let mut problems = Vec::new();
        tree.validate(&["slack".to_string(), "pagerduty".into()], &mut problems);
        assert_eq!(
            problems,
            [
                "route.routes[0].destinations: `slack:payments` is not a configured destination (slack, pagerduty)",
                "route.routes[1].destinations: `opsgenie:payments` is not a configured destination (slack, pagerduty)",
                "route.routes[2].destinations: `teams:fraud` is not a configured destination (slack, pagerduty)",
            ]
        );
        // The root takes every alert: matchers there are refused when the file is read.
        assert!(toml::from_str::<RouteConfig>("matchers = ['a = b']").is_err());
    }

    #[test]
    fn the_tree_is_described_one_route_per_line() {
        let tree: RouteConfig = toml::from_str(TREE).unwrap();
        assert_eq!(
            tree.describe(&all()),
            [
                "route: → slack, pagerduty",
                "  route.routes[0]: team = \"payments\"; → slack:payments; continue",
                "  route.routes[1]: team =~ \"pay.*\", severity != \"info\"; → opsgenie:payments; confidence ≥ medium; no \"could not diagnose\"",
                "  route.routes[2]: namespace = \"fraud\"; → teams:fraud",
                "    route.routes[2].routes[0]: cluster = \"eu-1\"; → teams:fraud",
            ]
        );
        // A child shows what it inherits: its parent's floor applies to it.
        let nested: RouteConfig = toml::from_str(
            "[[routes]]\nmatchers = ['team = a']\nmin_confidence = 'medium'\n[[routes.routes]]\nmatchers = ['env = prod']\n",
        )
        .unwrap();
        assert_eq!(
            nested.describe(&["slack".to_string()])[2],
            "    route.routes[0].routes[0]: env = \"prod\"; → slack; confidence ≥ medium"
        );
    }

    #[test]
    fn a_label_set_reads_comma_separated_pairs() {
        assert_eq!(
            parse_label_set("namespace=payments, team=\"fraud\"").unwrap(),
            labels(&[("namespace", "payments"), ("team", "fraud")])
        );
        assert!(parse_label_set("team").is_err() && parse_label_set("=x").is_err());
    }

    #[test]
    fn the_job_name_and_id_join_the_alert_labels_without_overriding_them() {
        let job = JobRef { name: "orders".into(), id: "abc".into() };
        let l = labels_of(&labels(&[("job_name", "from-alert")]), &job);
        assert_eq!(l, labels(&[("job_name", "from-alert"), ("job_id", "abc")]));
    }
}
