//! A Flink REST URL built from a job's labels: on Kubernetes the Flink Kubernetes Operator
//! serves each deployment's REST API as the service `<deployment>-rest` in its namespace,
//! so `http://{deployment}-rest.{namespace}:8081` names it once the labels are known.
//!
//! Label values come from alerts and series: untrusted. Each one must be a DNS label (RFC
//! 1123: 1–63 of `a-z`, `0-9`, `-`, starting and ending with a letter or digit, as
//! Kubernetes names are) that is neither all digits nor hexadecimal with `0x` (URL parsers
//! read `2130706433` and `0x7f000001` as the IPv4 address 127.0.0.1), before it goes into
//! a URL. The filled URL is then parsed as HTTP clients parse it (WHATWG, the `url` crate):
//! its host must be a DNS name, never an IP address in any form, and must be exactly the
//! template's host with the values put in. So no value can add or choose another host, a
//! port, a path, a query or credentials; a cluster's `allowed_host_suffixes` can narrow
//! the hosts further. Pure.
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

/// Whether a URL parser may read `label` as a number (all digits, decimal or octal, or
/// `0x` and hexadecimal digits): the WHATWG URL standard's IPv4 parser takes a host whose
/// last label is such a number as an IPv4 address ("ends in a number",
/// <https://url.spec.whatwg.org/#ends-in-a-number-checker>), so `2852039166` is
/// 169.254.169.254.
pub fn is_numeric_label(label: &str) -> bool {
    let hex = label.strip_prefix("0x").or_else(|| label.strip_prefix("0X"));
    match hex {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// A value as a message may show it: quoted, escaped, at most 64 characters.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(64).collect();
    let more = if cut.len() < v.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

/// The host of `template` as written (placeholders left in): after `://`, before the
/// first `/`, `?`, `#` or `\`, without user info and port. `None` without `://`.
fn template_host(template: &str) -> Option<&str> {
    let rest = &template[template.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return Some(&host_port[..host_port.find(']').map_or(host_port.len(), |i| i + 1)]);
    }
    Some(host_port.rsplit_once(':').map_or(host_port, |(h, _)| h))
}

/// Whether `host` is `suffix` or ends with `.` + `suffix` (whole labels; a leading `.` of
/// the suffix is ignored; case-insensitive).
fn has_suffix(host: &str, suffix: &str) -> bool {
    let (host, suffix) = (host.to_ascii_lowercase(), suffix.trim_start_matches('.').to_ascii_lowercase());
    host == suffix || host.strip_suffix(&suffix).is_some_and(|head| head.ends_with('.'))
}

/// Whether `suffix` can be an entry of `allowed_host_suffixes`: dot-separated DNS labels
/// (a leading `.` allowed), the last not numeric.
pub fn is_host_suffix(suffix: &str) -> bool {
    let labels: Vec<&str> = suffix.strip_prefix('.').unwrap_or(suffix).split('.').collect();
    labels.iter().all(|l| is_dns_label(l)) && labels.last().is_some_and(|l| !is_numeric_label(l))
}

/// `template` with each placeholder replaced by the value of its label in `labels`
/// (mapped by `configured`, else [`DEFAULT_LABELS`]), once the result is known to name a
/// DNS host: the template's host with the values put in, and, when `allowed_suffixes` is
/// not empty, one ending in one of them. Errors, one sentence each: a placeholder without
/// a label, a label the job's labels lack, a value that is not a DNS label or is numeric
/// (shown quoted and cut, never put in a URL), a URL that does not parse, whose host is an
/// IP address or another host, or is not allowed.
pub fn fill(
    template: &str,
    configured: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    allowed_suffixes: &[String],
) -> Result<String, String> {
    let mut url = template.to_string();
    let mut host = template_host(template).unwrap_or("").to_string();
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
        if is_numeric_label(value) {
            return Err(format!(
                "the value {} of label `{label}` is a number, which a URL parser may read as an IP address; it is not put in a URL",
                shown(value)
            ));
        }
        let slot = format!("{{{placeholder}}}");
        url = url.replacen(&slot, value, 1);
        host = host.replacen(&slot, value, 1);
    }
    check_host(&url, &host, allowed_suffixes)?;
    Ok(url)
}

/// That `url` parses and its host is the DNS name `expected` (an allowed one).
fn check_host(url: &str, expected: &str, allowed_suffixes: &[String]) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("the filled template is not a URL ({e})"))?;
    match parsed.host() {
        Some(url::Host::Domain(host)) if host.eq_ignore_ascii_case(expected) => {
            if allowed_suffixes.is_empty() || allowed_suffixes.iter().any(|s| has_suffix(host, s)) {
                Ok(())
            } else {
                Err(format!("the host `{host}` does not end in one of allowed_host_suffixes; it is not asked"))
            }
        }
        Some(url::Host::Domain(host)) => {
            Err(format!("the filled template names the host `{host}`, not the template's own; it is not asked"))
        }
        Some(url::Host::Ipv4(ip)) => {
            Err(format!("the filled template's host is the IP address {ip}, not a DNS name; it is not asked"))
        }
        Some(url::Host::Ipv6(ip)) => {
            Err(format!("the filled template's host is the IP address [{ip}], not a DNS name; it is not asked"))
        }
        None => Err("the filled template has no host".to_string()),
    }
}

/// Configuration problems of a template (bad placeholders, one without a label, a
/// mapping to no placeholder or to no label name, a host that is an IP address); else the
/// template filled with the DNS label `x`, for the caller to check as a URL.
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
    fill(template, configured, &sample, &[])
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
        let url =
            fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", "fraud-scoring"), ("namespace", "payments")]), &[]);
        assert_eq!(url.unwrap(), "http://fraud-scoring-rest.payments:8081");
    }

    #[test]
    fn configured_labels_fill_placeholders_instead_of_the_defaults() {
        let configured = labels(&[("deployment", "flink_deployment")]);
        let job = labels(&[("app", "other"), ("flink_deployment", "orders"), ("namespace", "shop")]);
        assert_eq!(fill(OPERATOR, &configured, &job, &[]).unwrap(), "http://orders-rest.shop:8081");
    }

    #[test]
    fn values_that_are_not_dns_labels_never_reach_a_url() {
        for hostile in
            ["evil.com:80/x?", "a@evil.com", "UPPER", "-dash", "dash-", "", "a b", "x/../y", "ünicode", &"a".repeat(64)]
        {
            let err =
                fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", hostile), ("namespace", "ns")]), &[]).unwrap_err();
            assert!(err.contains("is not a DNS label") && err.contains("`app`"), "{hostile}: {err}");
        }
        assert!(is_dns_label(&"a".repeat(63)) && is_dns_label("0") && is_dns_label("a-1"));
    }

    #[test]
    fn a_missing_label_says_which() {
        let err = fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", "a")]), &[]).unwrap_err();
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

    const BARE: &str = "http://{deployment}:8081";

    #[test]
    fn numbers_that_url_parsers_read_as_ipv4_addresses_never_reach_a_url() {
        // 2130706433 = 127·2^24 + 1 = 127.0.0.1; 0x7f000001 the same in hexadecimal;
        // 2852039166 = 169·2^24 + 254·2^16 + 169·2^8 + 254 = 169.254.169.254 (the cloud
        // metadata service); 0 = 0.0.0.0; 0177 is 127 in octal; 0x alone is 0.
        for numeric in ["2130706433", "0x7f000001", "2852039166", "0", "0177", "0x", "127", "0xff"] {
            let err = fill(BARE, &BTreeMap::new(), &labels(&[("app", numeric)]), &[]).unwrap_err();
            assert!(err.contains("is a number") && err.contains("`app`"), "{numeric}: {err}");
        }
        // In the namespace, the last label of the operator's host, too.
        let err = fill(OPERATOR, &BTreeMap::new(), &labels(&[("app", "a"), ("namespace", "1")]), &[]).unwrap_err();
        assert!(err.contains("is a number") && err.contains("`namespace`"), "{err}");
        // Names that merely hold digits or hex letters are names.
        for name in ["0xdead-job", "1e3", "k8s", "0x7g", "a0x1", "123abc"] {
            assert!(!is_numeric_label(name), "{name}");
            assert!(fill(BARE, &BTreeMap::new(), &labels(&[("app", name)]), &[]).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_template_whose_host_is_an_ip_address_or_not_its_own_is_refused() {
        // No value can make these, but the URL check stands behind the value check: the
        // host is whatever the WHATWG parser makes of the filled URL.
        let ip = check_host("http://0x7f.1:8081/", "0x7f.1", &[]).unwrap_err();
        assert!(ip.contains("IP address 127.0.0.1"), "{ip}");
        let short = check_host("http://127.1/", "127.1", &[]).unwrap_err();
        assert!(short.contains("IP address 127.0.0.1"), "{short}");
        let v6 = check_host("http://[::1]:8081/", "[::1]", &[]).unwrap_err();
        assert!(v6.contains("IP address [::1]"), "{v6}");
        let other = check_host("http://evil.example/", "x-rest.ns", &[]).unwrap_err();
        assert!(other.contains("names the host `evil.example`, not the template's own"), "{other}");
        // At load: a template with a literal IP host is refused, named as such.
        let err = check("http://10.0.0.5:8081/{deployment}", &BTreeMap::new()).unwrap_err();
        assert!(err.contains("IP address 10.0.0.5"), "{err}");
        assert_eq!(
            template_host("http://u@{deployment}-rest.{namespace}:8081/p?q"),
            Some("{deployment}-rest.{namespace}")
        );
        assert_eq!(template_host("http://[::1]:8081"), Some("[::1]"));
    }

    #[test]
    fn allowed_host_suffixes_limit_the_hosts_to_whole_labels_at_their_end() {
        let allowed = vec!["payments".to_string(), ".svc.cluster.local".to_string()];
        let job = |ns: &str| labels(&[("app", "fraud"), ("namespace", ns)]);
        assert!(fill(OPERATOR, &BTreeMap::new(), &job("payments"), &allowed).is_ok());
        let err = fill(OPERATOR, &BTreeMap::new(), &job("search"), &allowed).unwrap_err();
        assert!(err.contains("`fraud-rest.search` does not end in one of allowed_host_suffixes"), "{err}");
        // `xpayments` ends with the letters of `payments` but not with the label.
        assert!(fill(OPERATOR, &BTreeMap::new(), &job("xpayments"), &allowed).is_err());
        let fqdn = "http://{deployment}-rest.{namespace}.svc.cluster.local:8081";
        assert!(fill(fqdn, &BTreeMap::new(), &job("search"), &allowed).is_ok());
        assert!(is_host_suffix("svc.cluster.local") && is_host_suffix(".payments"));
        assert!(!is_host_suffix("") && !is_host_suffix("a..b") && !is_host_suffix("10.0.0.1") && !is_host_suffix("A"));
    }
}
