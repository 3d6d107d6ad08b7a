//! A Flink REST URL built from a job's labels: on Kubernetes the Flink Kubernetes Operator
//! serves each deployment's REST API as the service `<deployment>-rest` in its namespace,
//! so `http://{deployment}-rest.{namespace}:8081` names it once the labels are known.
//!
//! Label values come from alerts and series: untrusted. Each one must be a DNS label (RFC
//! 1123: 1–63 of `a-z`, `0-9`, `-`, starting and ending with a letter or digit, as
//! Kubernetes names are) before it goes into a URL, so no value can add a host, a port, a
//! path, a query or credentials. Pure.

use std::collections::BTreeMap;

/// Placeholders every template may use without mapping them, and the label that fills
/// each: `app` is the label Flink's native Kubernetes integration puts on its pods (the
/// cluster id, which the operator sets to the FlinkDeployment's name); `namespace` is the
/// label Prometheus' Kubernetes service discovery (PodMonitor, ServiceMonitor) adds.
pub const DEFAULT_LABELS: [(&str, &str); 2] = [("deployment", "app"), ("namespace", "namespace")];

/// The placeholders of `template` (`{name}`, name of `a-z`, `0-9`, `_`), in order; an
/// error for an unclosed `{`, a stray `}` or an empty or odd name.
pub fn placeholders(template: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err(format!("a `}}` without `{{` at byte {}", template.len() - rest.len() + open));
        }
        let close = rest[open..].find('}').ok_or("a `{` without `}`")? + open;
        let name = &rest[open + 1..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(format!("`{{{name}}}` is not a placeholder (names are a-z, 0-9 and _)"));
        }
        out.push(name.to_string());
        rest = &rest[close + 1..];
    }
    Ok(out)
}

/// The label that fills `placeholder`: the configured one, else the default.
pub fn label_for<'a>(placeholder: &str, configured: &'a BTreeMap<String, String>) -> Option<&'a str> {
    configured
        .get(placeholder)
        .map(String::as_str)
        .or_else(|| DEFAULT_LABELS.iter().find(|(p, _)| *p == placeholder).map(|(_, l)| *l))
}

/// Whether `v` is an RFC 1123 DNS label.
pub fn is_dns_label(v: &str) -> bool {
    let bytes = v.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
        && alnum(&bytes[0])
        && alnum(&bytes[bytes.len() - 1])
}

/// A value as a message may show it: quoted, escaped, at most 64 characters.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(64).collect();
    let more = if cut.len() < v.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

/// `template` with each placeholder replaced by the value of its label in `labels`
/// (mapped by `configured`, else [`DEFAULT_LABELS`]). Errors, one sentence each: a
/// placeholder without a label, a label the job's labels lack, a value that is not a DNS
/// label (shown quoted and cut, never put in a URL).
pub fn fill(
    template: &str,
    configured: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> Result<String, String> {
    let mut url = template.to_string();
    for placeholder in placeholders(template)? {
        let label = label_for(&placeholder, configured)
            .ok_or_else(|| format!("no label fills `{{{placeholder}}}` (set template_labels.{placeholder})"))?;
        let value = labels
            .get(label)
            .ok_or_else(|| format!("the job's labels have no `{label}` to fill `{{{placeholder}}}`"))?;
        if !is_dns_label(value) {
            return Err(format!(
                "the value {} of label `{label}` is not a DNS label (RFC 1123: 1–63 of a-z, 0-9 and -, starting and ending with a letter or digit); it is not put in a URL",
                shown(value)
            ));
        }
        url = url.replacen(&format!("{{{placeholder}}}"), value, 1);
    }
    Ok(url)
}

/// Configuration problems of a template (bad placeholders, one without a label, a
/// mapping to no placeholder or to no label name); else the template filled with the DNS
/// label `x`, for the caller to check as a URL.
pub fn check(template: &str, configured: &BTreeMap<String, String>) -> Result<String, String> {
    let names = placeholders(template)?;
    for (placeholder, label) in configured {
        if !names.contains(placeholder) {
            return Err(format!("template_labels.{placeholder} names no placeholder of the template"));
        }
        let valid = label.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("template_labels.{placeholder} = `{label}` is not a label name"));
        }
    }
    let sample: BTreeMap<String, String> =
        names.iter().filter_map(|p| label_for(p, configured).map(|l| (l.to_string(), "x".to_string()))).collect();
    fill(template, configured, &sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const OPERATOR: &str = "http://{deployment}-rest.{namespace}:8081";

    #[test]
    fn the_operators_service_follows_from_the_app_and_namespace_labels() {
        let url = fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", "fraud-scoring"), ("namespace", "payments")]));
        assert_eq!(url.unwrap(), "http://fraud-scoring-rest.payments:8081");
    }

    #[test]
    fn configured_labels_fill_placeholders_instead_of_the_defaults() {
        let configured = labels(&[("deployment", "flink_deployment")]);
        let job = labels(&[("app", "other"), ("flink_deployment", "orders"), ("namespace", "shop")]);
        assert_eq!(fill(OPERATOR, &configured, &job).unwrap(), "http://orders-rest.shop:8081");
    }

    #[test]
    fn values_that_are_not_dns_labels_never_reach_a_url() {
        for hostile in
            ["evil.com:80/x?", "a@evil.com", "UPPER", "-dash", "dash-", "", "a b", "x/../y", "ünicode", &"a".repeat(64)]
        {
            let err = fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", hostile), ("namespace", "ns")])).unwrap_err();
            assert!(err.contains("is not a DNS label") && err.contains("`app`"), "{hostile}: {err}");
        }
        assert!(is_dns_label(&"a".repeat(63)) && is_dns_label("0") && is_dns_label("a-1"));
    }

    #[test]
    fn a_missing_label_says_which() {
        let err = fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", "a")])).unwrap_err();
        assert_eq!(err, "the job's labels have no `namespace` to fill `{namespace}`");
    }

    #[test]
    fn templates_are_checked_when_the_configuration_loads() {
        assert_eq!(check(OPERATOR, &BTreeMap::new()).unwrap(), "http://x-rest.x:8081");
        assert!(check("http://{cluster}:8081", &BTreeMap::new()).unwrap_err().contains("template_labels.cluster"));
        assert_eq!(check("http://{cluster}:8081", &labels(&[("cluster", "flink_cluster")])).unwrap(), "http://x:8081");
        assert!(check("http://{deployment", &BTreeMap::new()).is_err());
        assert!(check("http://{Deployment}", &BTreeMap::new()).is_err());
        assert!(check(OPERATOR, &labels(&[("port", "p")])).unwrap_err().contains("names no placeholder"));
        assert!(check(OPERATOR, &labels(&[("deployment", "bad-name")])).unwrap_err().contains("not a label name"));
    }
}
