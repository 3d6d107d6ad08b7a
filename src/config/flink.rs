//! `[flink]`: the clusters whose REST API gives job graphs, and which one a job runs on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{HttpAuth, Millis, check_backend_url};

/// Flink clusters whose REST API gives job graphs and checkpoint configuration.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FlinkConfig {
    /// Per-request timeout toward Flink REST. Default 5s.
    pub timeout: Millis,
    /// Total time one REST call may take with retries (young jobs answer 500 on some
    /// endpoints). Default 15s.
    pub deadline: Millis,
    /// Requests culprit has in flight at one JobManager at most, over every diagnosis at
    /// once: per REST URL (a cluster's `rest_url`, or each URL its `rest_url_template`
    /// fills in for a job). In an alert storm the requests wait in culprit, not at the
    /// JobManager; the wait counts against `deadline`. `/metrics` shows the requests in
    /// flight and waiting per cluster. Default 4.
    pub max_concurrency: usize,
    /// The clusters. A request or alert picks the first cluster whose `match` labels all
    /// equal its labels; a cluster without `match` is the default.
    pub clusters: Vec<FlinkCluster>,
    /// Job plans to use when Flink REST is not reachable: job name (as Flink shows it, or
    /// as the reporter writes it, filtered or not), job id, or the job id of an older run of
    /// the job → file holding the JSON of `GET /jobs/:id/plan`. Used however the request or
    /// alert names the job, live, in `serve` and by `diagnose --config`; never chooses which
    /// run is diagnosed. When none is the job's, a note lists the keys.
    pub plans: BTreeMap<String, std::path::PathBuf>,
    /// The alert label whose value names the cluster (by its `name`) that an alert's job
    /// runs on, e.g. `flink_cluster`. Unset (the default): alert labels choose a cluster
    /// only through `match`, so a `cluster` label added by Prometheus (kube-prometheus'
    /// external label) never fails a diagnosis. A value naming no configured cluster falls
    /// back to `match` and the default, with a note.
    pub cluster_label: Option<String>,
    /// Take a profile at alert time: when the finding is `unexplained` or the culprit is a
    /// chain of operators, ask Flink REST for the culprit vertex's flame graph
    /// (`GET /jobs/:id/vertices/:vid/flamegraph?type=full`, on-CPU and off-CPU samples in
    /// one answer; the cluster needs `rest.flamegraph.enabled: true`) and put its top frames
    /// in the verdict. Default false.
    pub flamegraph: bool,
    /// How long the profile may take: Flink samples in the background after the first
    /// request, so the answer is asked again every fifth of this time, at most 5 requests,
    /// until it has samples. Without samples by then the verdict has no profile and a note
    /// says why. Default 10s.
    pub flamegraph_deadline: Millis,
}

/// The default of `flink.max_concurrency`: 4, the JobManager's own REST threads
/// (`rest.server.numThreads`, default 4,
/// <https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#rest-server-numthreads>):
/// one diagnosis' round (plan, checkpoint configuration, exceptions, rescale history) goes
/// at once, and a storm of diagnoses never has more requests at the JobManager than it
/// has threads to serve them, so the web UI and the Kubernetes operator polling the same
/// JobManager (its handlers are asynchronous, answered from the job cache refreshed every
/// `web.refresh-interval`) keep being answered.
pub const FLINK_MAX_CONCURRENCY: usize = 4;

/// The key under which a request chooses a Flink cluster by name (the API's `cluster=`,
/// the CLI's `--cluster`): not a valid label name, so no alert label can be mistaken for it.
pub const CLUSTER_CHOICE: &str = "@cluster";

impl Default for FlinkConfig {
    fn default() -> Self {
        FlinkConfig {
            timeout: Millis::from_secs(5),
            deadline: Millis::from_secs(15),
            max_concurrency: FLINK_MAX_CONCURRENCY,
            clusters: Vec::new(),
            plans: BTreeMap::new(),
            cluster_label: None,
            flamegraph: false,
            flamegraph_deadline: Millis::from_secs(10),
        }
    }
}

impl FlinkConfig {
    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        for c in &self.clusters {
            match (&c.rest_url_template, c.rest_url.is_empty()) {
                (None, _) => check_backend_url(
                    &format!("flink.clusters `{}`: rest_url", c.name),
                    &c.rest_url,
                    "`auth`",
                    problems,
                ),
                (Some(template), true) => match crate::model::rest_template::check(template, &c.template_labels) {
                    Ok(sample) => check_backend_url(
                        &format!("flink.clusters `{}`: rest_url_template", c.name),
                        &sample,
                        "`auth`",
                        problems,
                    ),
                    Err(e) => problems.push(format!("flink.clusters `{}`: rest_url_template: {e}", c.name)),
                },
                (Some(_), false) => {
                    problems.push(format!("flink.clusters `{}`: give rest_url or rest_url_template, not both", c.name))
                }
            }
            if !c.allowed_host_suffixes.is_empty() && c.rest_url_template.is_none() {
                problems.push(format!(
                    "flink.clusters `{}`: allowed_host_suffixes limits rest_url_template, which is not set",
                    c.name
                ));
            }
            for suffix in c.allowed_host_suffixes.iter().filter(|s| !crate::model::rest_template::is_host_suffix(s)) {
                problems.push(format!(
                    "flink.clusters `{}`: allowed_host_suffixes entry {suffix:?} is not a DNS name's end (labels of a-z, 0-9 and -, joined by dots)",
                    c.name
                ));
            }
        }
        if self.max_concurrency == 0 {
            problems.push("flink.max_concurrency must be at least 1 (0 would never ask Flink REST)".into());
        }
        if self.flamegraph_deadline.as_ms() <= 0 {
            problems.push("flink.flamegraph_deadline must be longer than 0".into());
        }
        let defaults = self.clusters.iter().filter(|c| c.r#match.is_empty()).count();
        if defaults > 1 {
            problems.push("flink.clusters: at most one cluster may have no `match` (the default)".into());
        }
        if let Some(label) = &self.cluster_label
            && !is_label_name(label)
        {
            problems.push(format!(
                "flink.cluster_label `{label}` is not a label name ([a-zA-Z_][a-zA-Z0-9_]*), e.g. \"flink_cluster\""
            ));
        }
    }

    /// The cluster for a request with these labels: the one chosen by name
    /// ([`CLUSTER_CHOICE`], from the API or CLI); else the one the alert's
    /// `cluster_label` names, when that is configured and names one; else the first whose
    /// `match` labels all equal the alert's; else the default (no `match`).
    pub fn cluster_for(&self, labels: &BTreeMap<String, String>) -> Option<&FlinkCluster> {
        if let Some(name) = labels.get(CLUSTER_CHOICE) {
            return self.clusters.iter().find(|c| &c.name == name);
        }
        if let Some(name) = self.cluster_label.as_ref().and_then(|l| labels.get(l))
            && let Some(c) = self.clusters.iter().find(|c| &c.name == name)
        {
            return Some(c);
        }
        self.clusters
            .iter()
            .find(|c| !c.r#match.is_empty() && c.r#match.iter().all(|(k, v)| labels.get(k) == Some(v)))
            .or_else(|| self.clusters.iter().find(|c| c.r#match.is_empty()))
    }
}

/// Whether `s` is a Prometheus label name.
fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One Flink cluster.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlinkCluster {
    /// A name for messages and `cluster=` selection.
    pub name: String,
    /// The REST endpoint (JobManager), e.g. `http://flink-jobmanager:8081`. Either this or
    /// `rest_url_template`.
    #[serde(default)]
    pub rest_url: String,
    /// The REST endpoint of each job from its labels (the alert's, else its series'), e.g.
    /// `http://{deployment}-rest.{namespace}:8081`, the Flink Kubernetes Operator's REST
    /// service. Each value must be a DNS label, else Flink REST is not asked and the
    /// verdict says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_url_template: Option<String>,
    /// Placeholder → the label that fills it. Defaults: `deployment` ← `app` (the label
    /// Flink's native Kubernetes integration puts on its pods: the FlinkDeployment's name),
    /// `namespace` ← `namespace`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub template_labels: BTreeMap<String, String>,
    /// With `rest_url_template`: the hosts it may give, by their end (whole labels), e.g.
    /// `["payments", "svc.cluster.local"]`; a job whose host ends in none of them is not
    /// asked. Empty (the default): any DNS name the template's shape allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_host_suffixes: Vec<String>,
    /// Labels (on the alert or request) that select this cluster, e.g.
    /// `{ flink_cluster = "prod" }` or `{ namespace = "payments" }`.
    #[serde(default)]
    pub r#match: BTreeMap<String, String>,
    /// Optional authentication (e.g. behind an ingress).
    #[serde(default)]
    pub auth: Option<HttpAuth>,
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_cluster_has_a_rest_url_or_a_rest_url_template_whose_placeholders_are_filled_by_labels() {
        let problems = |toml: &str| match Config::from_toml(toml, "t.toml") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        let ok =
            "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"http://{deployment}-rest.{namespace}:8081\"\n";
        assert_eq!(problems(ok), "");
        let c = &Config::from_toml(ok, "t.toml").unwrap().flink.clusters[0];
        let labels: BTreeMap<String, String> =
            [("app", "orders"), ("namespace", "shop")].map(|(k, v)| (k.to_string(), v.to_string())).into();
        assert_eq!(
            crate::model::rest_template::fill(c.rest_url_template.as_ref().unwrap(), &c.template_labels, &labels, &[]),
            Ok("http://orders-rest.shop:8081".to_string())
        );
        let both = "[[flink.clusters]]\nname = \"k8s\"\nrest_url = \"http://jm:8081\"\nrest_url_template = \"http://{deployment}-rest.{namespace}:8081\"\n";
        assert!(problems(both).contains("give rest_url or rest_url_template, not both"), "{}", problems(both));
        let unmapped = "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"http://{cluster}:8081\"\n";
        assert!(problems(unmapped).contains("set template_labels.cluster"), "{}", problems(unmapped));
        let neither = "[[flink.clusters]]\nname = \"k8s\"\n";
        assert!(problems(neither).contains("rest_url"), "{}", problems(neither));
        let not_http = "[[flink.clusters]]\nname = \"k8s\"\nrest_url_template = \"{deployment}:8081\"\n";
        assert!(problems(not_http).contains("rest_url_template"), "{}", problems(not_http));
    }

    #[test]
    fn flink_max_concurrency_defaults_to_four_and_zero_is_refused() {
        let c =
            Config::from_toml("[[flink.clusters]]\nname = \"lab\"\nrest_url = \"http://jm:8081\"\n", "t.toml").unwrap();
        assert_eq!(c.flink.max_concurrency, 4);
        let e = Config::from_toml("[flink]\nmax_concurrency = 0\n", "t.toml").unwrap_err().to_string();
        assert!(e.contains("flink.max_concurrency must be at least 1"), "{e}");
    }

    #[test]
    fn prometheus_and_flink_sections_read_urls_auth_and_clusters() {
        let c = Config::from_toml(
            r#"
            [prometheus]
            url = "https://mimir.example.com/prometheus"
            tenant = "team-a"
            auth = { type = "bearer", token = { env = "PROM_TOKEN" } }
            [[flink.clusters]]
            name = "prod"
            rest_url = "http://jm:8081"
            match = { flink_cluster = "prod" }
            [[flink.clusters]]
            name = "default"
            rest_url = "http://jm-default:8081"
            "#,
            "c.toml",
        )
        .unwrap();
        let p = c.prometheus.as_ref().unwrap();
        assert_eq!(p.tenant.as_deref(), Some("team-a"));
        assert_eq!(p.auth, Some(HttpAuth::Bearer { token: SecretSource::Env("PROM_TOKEN".into()) }));
        let labels = |k: &str, v: &str| [(k.to_string(), v.to_string())].into_iter().collect::<BTreeMap<_, _>>();
        assert_eq!(c.flink.cluster_for(&labels("flink_cluster", "prod")).unwrap().name, "prod");
        assert_eq!(c.flink.cluster_for(&labels("flink_cluster", "dev")).unwrap().name, "default");
        // A `cluster` label (an external label of kube-prometheus) chooses nothing by
        // itself: the default cluster.
        assert_eq!(c.flink.cluster_for(&labels("cluster", "prod")).unwrap().name, "default");
        // The API's `cluster=` and the CLI's `--cluster` choose by name.
        assert_eq!(c.flink.cluster_for(&labels(CLUSTER_CHOICE, "prod")).unwrap().name, "prod");
        assert!(c.flink.cluster_for(&labels(CLUSTER_CHOICE, "prod-eu")).is_none());
        // With `cluster_label`, the alert's label chooses by name when it names a cluster.
        let mut flink = c.flink.clone();
        flink.cluster_label = Some("cluster".into());
        assert_eq!(flink.cluster_for(&labels("cluster", "prod")).unwrap().name, "prod");
        assert_eq!(flink.cluster_for(&labels("cluster", "prod-eu")).unwrap().name, "default");
    }

    #[test]
    fn a_bad_url_and_a_second_default_cluster_are_both_reported() {
        let err = Config::from_toml(
            "[prometheus]\nurl = \"prometheus:9090\"\n[[flink.clusters]]\nname = \"a\"\nrest_url = \"http://a\"\n[[flink.clusters]]\nname = \"b\"\nrest_url = \"http://b\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }
}
