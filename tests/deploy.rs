//! The deployment files in `deploy/` are checked with the tools that will read them:
//! `promtool` (Debian package `prometheus`) for the alerting rules and their unit tests,
//! `amtool` (Debian package `prometheus-alertmanager`) for the Alertmanager configuration
//! and its routing, and culprit's own loader for every `culprit.toml`. The Kubernetes
//! manifests are read here (with yaml-rust2) so that the names that tie them together
//! (volumes, Secret keys, environment variables, ports, paths) are checked without a cluster,
//! and the two kustomizations are built here too (the subset of kustomize they use, see
//! `kustomize()`): Debian's kubectl (bookworm's kubernetes-client, 1.20, kustomize 2.0.3)
//! refuses the `patches:` of deploy/kubernetes-ha, so it is not what checks them. When a
//! recent `kubectl` is on PATH, `kubectl kustomize` must build the same resources, field for
//! field (kubectl 1.32 does).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use culprit::config::{Config, Millis};
use support::capture::Capture;

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn the_prometheus_rules_pass_promtool_check_rules() {
    let out =
        run(&tool("promtool", "prometheus"), &["check", "rules", "deploy/prometheus/flink-backpressure.rules.yml"]);
    assert!(out.contains("SUCCESS: 3 rules found"), "promtool check rules:\n{out}");
}

#[test]
fn the_prometheus_rule_unit_tests_pass_promtool_test_rules() {
    let out =
        run(&tool("promtool", "prometheus"), &["test", "rules", "deploy/prometheus/flink-backpressure.rules.test.yml"]);
    assert!(out.contains("SUCCESS"), "promtool test rules:\n{out}");
}

#[test]
fn the_example_alertmanager_config_passes_amtool_check_config() {
    let out = run(
        &tool("amtool", "prometheus-alertmanager"),
        &["check-config", "deploy/alertmanager/alertmanager.example.yml"],
    );
    assert!(out.contains("SUCCESS"), "amtool check-config:\n{out}");
}

#[test]
fn the_example_alertmanager_config_embeds_the_culprit_snippet_unchanged() {
    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let example = yaml_file("deploy/alertmanager/alertmanager.example.yml");

    let routes = snippet.at(&["route", "routes"]).seq();
    let example_routes = example.at(&["route", "routes"]).seq();
    assert!(
        example_routes.len() > routes.len() && example_routes[..routes.len()] == routes[..],
        "the snippet's routes must be the first children of the example's root route, in order \
         (routes are tried top to bottom: culprit's own alert must be stopped first)"
    );
    for receiver in snippet.at(&["receivers"]).seq() {
        assert!(
            example.at(&["receivers"]).seq().contains(receiver),
            "receiver {} of the snippet differs in the example",
            receiver.at(&["name"]).str()
        );
    }
    for rule in snippet.at(&["inhibit_rules"]).seq() {
        assert!(
            example.at(&["inhibit_rules"]).seq().contains(rule),
            "an inhibit rule of the snippet differs in the example"
        );
    }
}

#[test]
fn the_snippet_receiver_posts_every_alert_and_resolutions_with_auth_from_a_file() {
    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let receiver = culprit_receiver(&snippet);
    let webhook = &receiver.at(&["webhook_configs"]).seq()[0];
    assert_eq!(webhook.at(&["send_resolved"]).str(), "true");
    assert_eq!(webhook.at(&["max_alerts"]).str(), "0");
    let auth = webhook.at(&["http_config", "authorization"]);
    assert_eq!(auth.at(&["type"]).str(), "Bearer");
    assert!(auth.get("credentials_file").is_some(), "the bearer token must come from a file");
    assert!(auth.get("credentials").is_none(), "no token may be written in the config");
    let text = read("deploy/alertmanager/culprit-receiver.yml");
    assert!(text.contains("# basic_auth:") && text.contains("password_file:"), "the basic_auth variant is documented");
}

#[test]
fn the_culprit_route_takes_the_job_alert_of_the_rules_grouped_by_job_id_and_continues() {
    let rules = yaml_file("deploy/prometheus/flink-backpressure.rules.yml");
    let rules: Vec<&Y> = rules.at(&["groups"]).seq().iter().flat_map(|g| g.at(&["rules"]).seq().iter()).collect();
    let alert = |name: &str| {
        assert!(
            rules.iter().any(|r| r.get("alert").is_some_and(|a| a.str() == name)),
            "flink-backpressure.rules.yml has no alert {name}"
        )
    };
    for r in &rules {
        assert!(r.at(&["expr"]).str().contains("job_id"), "every alert keeps job_id: {}", r.at(&["alert"]).str());
    }

    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let route = culprit_route(&snippet);
    let matchers = matcher_set(route);
    let routed: Vec<&str> = matchers.iter().filter_map(|m| m.strip_prefix("alertname=\"")?.strip_suffix('"')).collect();
    assert_eq!(
        routed,
        ["FlinkJobBackpressured"],
        "culprit takes the job-level alert (one group, one verdict per job run)"
    );
    alert(routed[0]);
    assert!(matchers.contains("culprit!=\"true\""), "culprit's own alert must never match the culprit route");
    assert_eq!(route.at(&["continue"]).str(), "true", "the page and the normal receivers must still get the alert");
    assert_eq!(
        group_by(route),
        BTreeSet::from(["alertname", "job_id"]),
        "grouped by job id: job names are reused across runs"
    );

    // The inhibit rule names alerts the rules define, and ties them by job run.
    for rule in snippet.at(&["inhibit_rules"]).seq() {
        for side in ["source_matchers", "target_matchers"] {
            for m in rule.at(&[side]).seq() {
                if let Some(name) = m.str().strip_prefix("alertname=\"").and_then(|n| n.strip_suffix('"')) {
                    alert(name);
                }
            }
        }
        assert_eq!(rule.at(&["equal"]).seq()[0].str(), "job_id");
    }
}

#[test]
fn the_page_route_is_the_culprit_routes_twin_so_the_verdict_lands_on_the_pagerduty_incident() {
    // Alertmanager's PagerDuty dedup_key is sha256(groupKey); culprit sends sha256 of the
    // groupKey of the webhook it received. The groupKey is the route's path of matchers plus
    // the group labels: equal for sibling routes with the same matchers and group_by.
    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let routes = snippet.at(&["route", "routes"]).seq();
    let culprit = culprit_route(&snippet);
    let twins: Vec<&Y> = routes
        .iter()
        .filter(|r| {
            r.at(&["receiver"]).str() != "culprit"
                && r.get("matchers").is_some()
                && matcher_set(r) == matcher_set(culprit)
        })
        .collect();
    assert_eq!(twins.len(), 1, "exactly one route pages what culprit receives, with the same matchers");
    assert_eq!(group_by(twins[0]), group_by(culprit), "the page route must group like the culprit route");
    assert!(twins[0].at(&["receiver"]).str().contains("pagerduty"), "the twin route is the PagerDuty page");
}

#[test]
fn culprits_alert_is_refreshed_by_alertmanager_repeats_before_it_ends_by_itself() {
    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let repeat: Millis = culprit_route(&snippet).at(&["repeat_interval"]).str().parse().unwrap();
    for (name, text) in deploy_configs() {
        let config: toml::Value = toml::from_str(&text).unwrap();
        let Some(am) = config.get("notify").and_then(|n| n.get("alertmanager")) else { continue };
        let ends_after: Millis = am.get("ends_after").and_then(|e| e.as_str()).unwrap_or("15m").parse().unwrap();
        assert!(
            repeat < ends_after,
            "{name}: notify.alertmanager.ends_after ({ends_after}) must exceed the culprit route's repeat_interval ({repeat})"
        );
    }
}

#[test]
fn alertmanager_routes_the_job_alert_to_culprit_the_page_and_slack_and_the_rest_as_before() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["alertname=FlinkJobBackpressured", "job_id=3f1c", "job_name=fraud_detection", "severity=warning"],
            "culprit,pagerduty-oncall,slack-oncall",
        ),
        // Made critical, it is still paged once (by the page route, not also the critical one).
        (
            &["alertname=FlinkJobBackpressured", "job_id=3f1c", "severity=critical"],
            "culprit,pagerduty-oncall,slack-oncall",
        ),
        (&["alertname=FlinkTaskBackpressured", "job_id=3f1c", "task_name=parse", "severity=info"], "slack-oncall"),
        (&["alertname=FlinkCheckpointSlow", "job_id=3f1c", "severity=warning"], "slack-oncall"),
        // Unrelated alerts are untouched by culprit's routes.
        (&["alertname=KubePodCrashLooping", "severity=critical"], "pagerduty-oncall,slack-oncall"),
        (&["alertname=KubePodCrashLooping", "severity=warning"], "slack-oncall"),
    ];
    for (labels, receivers) in cases {
        assert_eq!(&routes_test(labels), receivers, "receivers of {labels:?}");
    }
}

#[test]
fn culprits_own_alert_goes_to_slack_only_never_back_to_culprit_nor_to_pagerduty() {
    let name = configured_alertname();
    let cases: Vec<Vec<String>> = vec![
        // As culprit posts it: its name, its label, the job's labels, a critical severity.
        vec![format!("alertname={name}"), "culprit=true".into(), "job_id=3f1c".into(), "severity=critical".into()],
        // Either marker alone is enough.
        vec![format!("alertname={name}"), "severity=critical".into()],
        vec!["alertname=SomethingElse".into(), "culprit=true".into(), "severity=critical".into()],
        // Even named like a source alert, culprit's label keeps it away from culprit.
        vec!["alertname=FlinkJobBackpressured".into(), "culprit=true".into(), "severity=critical".into()],
    ];
    for labels in cases {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        assert_eq!(routes_test(&labels), "slack-oncall", "receivers of {labels:?}");
    }
}

#[test]
fn every_culprit_toml_in_deploy_parses_with_culprits_own_loader() {
    let configs = deploy_configs();
    assert!(!configs.is_empty(), "no culprit.toml found in deploy/");
    let mut failures = Vec::new();
    for (name, text) in &configs {
        if let Err(e) = Config::from_toml(text, name) {
            let missing: Vec<&str> = ["server", "store", "service", "notify", "prometheus", "flink"]
                .into_iter()
                .filter(|s| e.problems.iter().any(|p| p.contains(&format!("unknown field `{s}`"))))
                .collect();
            let hint = if missing.is_empty() {
                String::new()
            } else {
                format!(" (src/config.rs has no section {})", missing.join(", "))
            };
            failures.push(format!("{e}{hint}"));
        }
    }
    assert!(failures.is_empty(), "culprit.toml files that culprit rejects:\n{}", failures.join("\n"));
}

#[test]
fn the_kubernetes_config_names_no_secret_value_and_every_secret_reaches_the_pod() {
    let deployment = yaml_file("deploy/kubernetes/deployment.yaml");
    let secret = yaml_file("deploy/kubernetes/secret.example.yaml");
    let secret_name = secret.at(&["metadata", "name"]).str();
    let secret_keys: BTreeSet<&str> = secret.at(&["stringData"]).map().iter().map(|(k, _)| k.as_str()).collect();
    for (key, value) in secret.at(&["stringData"]).map() {
        assert!(value.str().starts_with("REPLACE_ME"), "secret.example.yaml: {key} must be a placeholder");
    }
    let pod = deployment.at(&["spec", "template", "spec"]);
    let container = &pod.at(&["containers"]).seq()[0];

    let (name, text) = kubernetes_config();
    let config: toml::Value = toml::from_str(&text).unwrap();
    let mut sources = Vec::new();
    secret_sources(&config, "", &mut sources);
    assert!(!sources.is_empty(), "{name}: expected secrets given as {{ env = … }} or {{ file = … }}");

    for (path, kind, value) in sources {
        match kind.as_str() {
            "env" => {
                let var = container
                    .at(&["env"])
                    .seq()
                    .iter()
                    .find(|e| e.at(&["name"]).str() == value)
                    .unwrap_or_else(|| panic!("{path} reads ${value}, which deployment.yaml does not set"));
                let reference = var.at(&["valueFrom", "secretKeyRef"]);
                assert_eq!(reference.at(&["name"]).str(), secret_name, "{path}: ${value} comes from another Secret");
                let key = reference.at(&["key"]).str();
                assert!(secret_keys.contains(key), "{path}: ${value} reads key {key}, absent from secret.example.yaml");
            }
            "file" => {
                let mount = container
                    .at(&["volumeMounts"])
                    .seq()
                    .iter()
                    .find(|m| value.starts_with(&format!("{}/", m.at(&["mountPath"]).str())))
                    .unwrap_or_else(|| panic!("{path} reads {value}, which no volume of deployment.yaml holds"));
                let volume = volume(pod, mount.at(&["name"]).str());
                assert_eq!(
                    volume.at(&["secret", "secretName"]).str(),
                    secret_name,
                    "{path} reads {value}, which is not on the Secret's volume"
                );
                let key = &value[mount.at(&["mountPath"]).str().len() + 1..];
                assert!(
                    secret_keys.contains(key),
                    "{path} reads {value}: key {key} is absent from secret.example.yaml"
                );
            }
            other => panic!("{path}: unexpected secret source {other}"),
        }
    }
}

#[test]
fn the_deployment_runs_one_non_root_replica_with_probes_a_volume_and_a_grace_period() {
    let deployment = yaml_file("deploy/kubernetes/deployment.yaml");
    assert_eq!(deployment.at(&["kind"]).str(), "Deployment");
    let spec = deployment.at(&["spec"]);
    assert_eq!(spec.at(&["replicas"]).str(), "1", "the SQLite store has a single writer");
    assert_eq!(
        spec.at(&["strategy", "type"]).str(),
        "Recreate",
        "never two pods on one database, even during a rollout"
    );
    let pod = spec.at(&["template", "spec"]);
    let grace: u64 = pod.at(&["terminationGracePeriodSeconds"]).str().parse().unwrap();
    assert!(grace >= 30, "a live diagnosis may take server.request_timeout (30s) before shutdown");
    assert_eq!(pod.at(&["securityContext", "runAsNonRoot"]).str(), "true");
    let container = &pod.at(&["containers"]).seq()[0];
    assert_eq!(container.at(&["securityContext", "readOnlyRootFilesystem"]).str(), "true");
    assert_eq!(container.at(&["securityContext", "allowPrivilegeEscalation"]).str(), "false");
    for kind in ["requests", "limits"] {
        let r = container.at(&["resources", kind]);
        assert!(r.get("memory").is_some(), "resources.{kind}.memory");
    }

    // Probes on the port culprit listens on.
    let (_, text) = kubernetes_config();
    let config = Config::from_toml(&text, "configmap.yaml").unwrap();
    let listen_port = config.server.listen.rsplit(':').next().unwrap().to_string();
    let port = &container.at(&["ports"]).seq()[0];
    assert_eq!(port.at(&["containerPort"]).str(), listen_port, "containerPort vs server.listen");
    let port_name = port.at(&["name"]).str();
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(container.at(&[probe, "httpGet", "path"]).str(), path, "{probe}");
        assert_eq!(container.at(&[probe, "httpGet", "port"]).str(), port_name, "{probe} port");
    }

    // The configuration: from the ConfigMap, at the path given to `serve --config`.
    let args: Vec<&str> = container.at(&["args"]).seq().iter().map(Y::str).collect();
    assert_eq!(args[..2], ["serve", "--config"]);
    let config_path = Path::new(args[2]);
    let configmap = yaml_file("deploy/kubernetes/configmap.yaml");
    let mount = mount_of(container, config_path);
    assert_eq!(
        volume(pod, mount.at(&["name"]).str()).at(&["configMap", "name"]).str(),
        configmap.at(&["metadata", "name"]).str()
    );
    let file_name = config_path.file_name().unwrap().to_str().unwrap();
    assert!(configmap.at(&["data"]).get(file_name).is_some(), "the ConfigMap has no key {file_name}");

    // The store: on the PersistentVolumeClaim.
    let pvc = yaml_file("deploy/kubernetes/pvc.yaml");
    let mount = mount_of(container, &config.store.path);
    assert_eq!(
        volume(pod, mount.at(&["name"]).str()).at(&["persistentVolumeClaim", "claimName"]).str(),
        pvc.at(&["metadata", "name"]).str(),
        "store.path {} must be on the PersistentVolumeClaim",
        config.store.path.display()
    );
    assert!(mount.get("readOnly").is_none_or(|r| r.str() == "false"), "the store's volume must be writable");
    assert_eq!(pvc.at(&["spec", "accessModes"]).seq()[0].str(), "ReadWriteOnce");
}

#[test]
fn alertmanager_reaches_the_kubernetes_service_on_the_webhook_path() {
    let snippet = yaml_file("deploy/alertmanager/culprit-receiver.yml");
    let receiver = culprit_receiver(&snippet);
    let url = receiver.at(&["webhook_configs"]).seq()[0].at(&["url"]).str();
    let service = yaml_file("deploy/kubernetes/service.yaml");
    let kustomization = yaml_file("deploy/kubernetes/kustomization.yaml");
    let expected = format!(
        "http://{}.{}.svc.cluster.local:{}/webhook/alertmanager",
        service.at(&["metadata", "name"]).str(),
        kustomization.at(&["namespace"]).str(),
        service.at(&["spec", "ports"]).seq()[0].at(&["port"]).str()
    );
    assert_eq!(url, expected);
    let deployment = yaml_file("deploy/kubernetes/deployment.yaml");
    assert_eq!(
        service.at(&["spec", "selector"]),
        deployment.at(&["spec", "selector", "matchLabels"]),
        "the Service must select the Deployment's pod"
    );
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_example_secret() {
    let kustomization = yaml_file("deploy/kubernetes/kustomization.yaml");
    let listed: BTreeSet<&str> = kustomization.at(&["resources"]).seq().iter().map(Y::str).collect();
    let expected: BTreeSet<&str> = ["deployment.yaml", "service.yaml", "configmap.yaml", "pvc.yaml"].into();
    assert_eq!(listed, expected, "secret.example.yaml holds placeholders and must not be applied");
    for file in listed {
        let manifest = yaml_file(&format!("deploy/kubernetes/{file}"));
        for key in ["apiVersion", "kind"] {
            assert!(manifest.get(key).is_some(), "{file}: no {key}");
        }
        assert!(manifest.at(&["metadata"]).get("name").is_some(), "{file}: no metadata.name");
    }
}

#[test]
fn the_kustomization_builds_every_manifest_but_the_example_secret_into_its_namespace() {
    // Our reading of the kustomization (kustomize() below), run whether or not kubectl is
    // installed: the claim of the old test, which checked nothing without kubectl.
    let built = kustomize("deploy/kubernetes");
    assert_eq!(
        kinds(&built),
        ["ConfigMap", "Deployment", "PersistentVolumeClaim", "Service"],
        "the example Secret must not be applied"
    );
    for r in &built {
        assert_eq!(r.at(&["metadata", "namespace"]).str(), "monitoring", "{}", r.at(&["kind"]).str());
    }
    let deployment = resource(&built, "Deployment");
    let image = deployment.at(&["spec", "template", "spec", "containers"]).seq()[0].at(&["image"]).str();
    assert_eq!(image, "registry.example.com/culprit:0.1.0", "the images: entry names the pod's image");
}

#[test]
fn kubectl_kustomize_builds_what_our_reading_of_each_kustomization_builds() {
    // Debian's kubectl (kubernetes-client, 1.20 in bookworm) embeds kustomize 2.0.3, which
    // refuses the `patches:` of deploy/kubernetes-ha; scripts/test.sh therefore does not
    // install it, and the two tests above and below build the kustomizations themselves.
    // With a recent kubectl on PATH, its build must be ours.
    let Some(kubectl) = find_on_path("kubectl") else {
        eprintln!("kubectl is not installed: our reading of the kustomizations is not compared with kubectl's");
        return;
    };
    for dir in ["deploy/kubernetes", "deploy/kubernetes-ha"] {
        let out = run(&kubectl, &["kustomize", dir]);
        let theirs: Vec<Y> = yaml_rust2::YamlLoader::load_from_str(&out)
            .unwrap()
            .iter()
            .map(|d| sorted(&octal_modes(from_yaml(d).unwrap())))
            .collect();
        let ours: Vec<Y> = kustomize(dir).iter().map(sorted).collect();
        assert_eq!(kinds(&theirs), kinds(&ours), "{dir}");
        for t in &theirs {
            let kind = t.at(&["kind"]).str();
            assert_eq!(Some(t), ours.iter().find(|o| o.at(&["kind"]).str() == kind), "{dir}: {kind}");
        }
        if dir == "deploy/kubernetes" {
            for kind in ["kind: Deployment", "kind: Service", "kind: ConfigMap", "kind: PersistentVolumeClaim"] {
                assert!(out.contains(kind), "kubectl kustomize: no {kind}:\n{out}");
            }
            assert!(!out.contains("kind: Secret"), "the example Secret must not be applied");
        }
    }
}

#[test]
fn the_ha_variant_runs_two_replicas_on_postgres_with_a_budget_spread_over_nodes_and_ready_on_the_store() {
    let (name, text) = deploy_configs()
        .into_iter()
        .find(|(name, _)| name.starts_with("deploy/kubernetes-ha/configmap.yaml"))
        .expect("deploy/kubernetes-ha/configmap.yaml holds a culprit.toml");
    let config = Config::from_toml(&text, &name).unwrap();
    let url = config.store.url.as_deref().expect("the HA variant's store is PostgreSQL");
    // (The loader refuses a URL that holds a password.)
    assert!(url.starts_with("postgres://"), "{url}");
    assert_eq!(config.store.password, Some(culprit::config::SecretSource::Env("CULPRIT_DB_PASSWORD".into())));
    // The password's variable comes from the Secret's db-password key.
    let patch = yaml_file("deploy/kubernetes-ha/deployment.yaml");
    let container = &patch.at(&["spec", "template", "spec", "containers"]).seq()[0];
    let var = container.at(&["env"]).seq().iter().find(|e| e.at(&["name"]).str() == "CULPRIT_DB_PASSWORD").unwrap();
    let key = var.at(&["valueFrom", "secretKeyRef", "key"]).str();
    let secret = yaml_file("deploy/kubernetes/secret.example.yaml");
    assert!(secret.at(&["stringData"]).get(key).is_some(), "secret.example.yaml has no {key}");
    let pdb = yaml_file("deploy/kubernetes-ha/pdb.yaml");
    assert_eq!(pdb.at(&["kind"]).str(), "PodDisruptionBudget");
    // The variant as applied (our reading of kustomize; kubectl's is compared above when
    // installed), as YAML text to look for what kubectl's output was looked for in.
    let built = kustomize("deploy/kubernetes-ha");
    assert_eq!(kinds(&built), ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]);
    let out = built.iter().map(to_yaml).collect::<Vec<_>>().join("---\n");
    for want in ["replicas: 2", "kind: PodDisruptionBudget", "podAntiAffinity", "path: /readyz", "type: RollingUpdate"]
    {
        assert!(out.contains(want), "kubectl kustomize deploy/kubernetes-ha: no {want}:\n{out}");
    }
    for unwanted in ["kind: PersistentVolumeClaim", "claimName", "kind: Secret", "type: Recreate"] {
        assert!(!out.contains(unwanted), "kubectl kustomize deploy/kubernetes-ha: {unwanted}:\n{out}");
    }
}

#[test]
fn the_dockerfile_builds_the_locked_release_and_runs_culprit_serve_as_the_deployments_user() {
    let text = read("deploy/Dockerfile");
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));

    let manifest: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    let rust = manifest["package"]["rust-version"].as_str().unwrap();
    assert!(has(&format!("FROM rust:{rust}-bookworm AS builder")), "the builder uses Cargo.toml's rust-version {rust}");
    assert!(has("cargo build --release --locked"));
    assert!(has("FROM debian:bookworm-slim"));
    assert!(has("ca-certificates"));
    assert!(has("EXPOSE 9187"));
    assert!(has(r#"ENTRYPOINT ["culprit"]"#));
    assert!(has(r#"CMD ["serve", "--config", "/etc/culprit/culprit.toml"]"#));

    let user = lines.iter().rev().find_map(|l| l.strip_prefix("USER ")).expect("a USER line");
    let uid = user.split(':').next().unwrap();
    assert!(uid != "0" && uid != "root", "the image runs as root");
    let deployment = yaml_file("deploy/kubernetes/deployment.yaml");
    assert_eq!(deployment.at(&["spec", "template", "spec", "securityContext", "runAsUser"]).str(), uid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_alertmanager_sends_culprit_one_group_per_job_run_and_pages_on_the_incident_culprit_will_update() {
    let dir = tempfile::tempdir().unwrap();
    let capture = Capture::start().await;
    let base = capture.url.clone();

    // The example config, with its secret files in the temporary directory, culprit and the
    // SaaS endpoints on the capture server, and short waits.
    let secrets = dir.path().join("secrets");
    for (file, value) in [
        ("culprit/webhook-token", "test-webhook-token".to_string()),
        ("slack/webhook-url", format!("{base}/slack")),
        ("pagerduty/routing-key", "0123456789abcdef0123456789abcdef".to_string()),
    ] {
        let path = secrets.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value).unwrap();
    }
    let example = read("deploy/alertmanager/alertmanager.example.yml");
    let culprit_url = "http://culprit.monitoring.svc.cluster.local:9187";
    assert!(example.contains(culprit_url) && example.contains("/etc/alertmanager/secrets/"));
    let config: String = example
        .replace(culprit_url, &base)
        .replace("/etc/alertmanager/secrets/", &format!("{}/", secrets.display()))
        .replacen("global:\n", &format!("global:\n  pagerduty_url: {base}/pagerduty\n"), 1)
        .lines()
        .map(|l| match l.find("group_wait:") {
            Some(at) => format!("{}group_wait: 1s\n", &l[..at]),
            None => format!("{l}\n"),
        })
        .collect();
    let port = support::free_port();
    let _am = support::alertmanager(&config, port);

    // Two runs of one job name, backpressured; the task alert and the slow checkpoints of
    // the first; culprit's own alert for the first (labels as culprit renders them).
    let (run1, run2) = ("3f1c0a2b9d8e7f6a5b4c3d2e1f0a9b8c", "7e6d5c4b3a291807f6e5d4c3b2a19081");
    let alerts = serde_json::json!([
        {"labels": {"alertname": "FlinkJobBackpressured", "job_id": run1, "job_name": "fraud_detection", "severity": "warning"}},
        {"labels": {"alertname": "FlinkJobBackpressured", "job_id": run2, "job_name": "fraud_detection", "severity": "warning"}},
        {"labels": {"alertname": "FlinkTaskBackpressured", "job_id": run1, "job_name": "fraud_detection", "task_id": "0a44", "task_name": "parse", "severity": "info"}},
        {"labels": {"alertname": "FlinkCheckpointSlow", "job_id": run1, "job_name": "fraud_detection", "severity": "warning"}},
        {"labels": {"alertname": configured_alertname(), "culprit": "true", "job_id": run1, "job_name": "fraud-detection",
                    "culprit_vertex": "Sink: alerts", "finding": "sink", "status": "culprit_found"},
         "annotations": {"summary": "the sink is slow"}}
    ]);
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/v2/alerts"))
        .json(&alerts)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "posting alerts: {}", answer.text().await.unwrap_or_default());

    // Expected: 2 webhooks to culprit, 2 PagerDuty events, 4 Slack messages (two job runs,
    // the task alert, culprit's alert); the checkpoint alert is inhibited.
    let count = |path: &str| capture.on(path).len();
    support::wait_for("every notification", std::time::Duration::from_secs(30), || {
        count("/webhook/alertmanager") >= 2 && count("/pagerduty") >= 2 && count("/slack") >= 4
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await; // anything extra would come now

    let webhooks = capture.on("/webhook/alertmanager");
    assert_eq!(webhooks.len(), 2, "one notification per job run");
    let mut job_ids = BTreeSet::new();
    let mut dedup_keys = BTreeSet::new();
    for w in &webhooks {
        let auth = w.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert_eq!(auth, Some("Bearer test-webhook-token"), "the token from credentials_file");
        let body = &w.body;
        assert_eq!(body["version"], "4");
        assert_eq!(body["receiver"], "culprit");
        assert_eq!(body["groupLabels"]["alertname"], "FlinkJobBackpressured");
        let alerts = body["alerts"].as_array().unwrap();
        assert_eq!(alerts.len(), 1, "{body}");
        assert_eq!(alerts[0]["labels"]["alertname"], "FlinkJobBackpressured", "culprit gets the job alert only");
        assert!(alerts[0]["labels"].get("culprit").is_none(), "culprit must never receive its own alert");
        job_ids.insert(body["groupLabels"]["job_id"].as_str().unwrap().to_string());
        dedup_keys.insert(culprit::render::pagerduty::dedup_key(body["groupKey"].as_str().unwrap()));
    }
    assert_eq!(job_ids, BTreeSet::from([run1.to_string(), run2.to_string()]), "two runs of one name, two groups");

    let pages: BTreeSet<String> =
        capture.on("/pagerduty").iter().map(|r| r.body["dedup_key"].as_str().unwrap().to_string()).collect();
    assert_eq!(count("/pagerduty"), 2, "one page per job run, none for culprit's own alert");
    assert_eq!(pages, dedup_keys, "culprit's PagerDuty dedup_key (sha256 of its groupKey) must be the page's");

    let slack = capture.on("/slack");
    assert_eq!(slack.len(), 4, "{:?}", slack.iter().map(|r| &r.body).collect::<Vec<_>>());
    let mentions = |name: &str| slack.iter().filter(|r| r.body.to_string().contains(name)).count();
    assert_eq!(mentions("FlinkJobBackpressured"), 2);
    assert_eq!(mentions("FlinkTaskBackpressured"), 1);
    assert_eq!(mentions(&configured_alertname()), 1);
    assert_eq!(mentions("FlinkCheckpointSlow"), 0, "inhibited while the job run is backpressured");
}
// ---------------------------------------------------------------------------------------
// Tools and files
// ---------------------------------------------------------------------------------------

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn find_on_path(binary: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(binary)).find(|p| p.is_file()))
        .unwrap_or_default()
}

/// The binary, or a failure that says how to install it.
fn tool(binary: &str, package: &str) -> PathBuf {
    find_on_path(binary).unwrap_or_else(|| {
        panic!("`{binary}` is not installed: `apt-get install -y {package}` (scripts/test.sh installs it)")
    })
}

/// Runs a tool in the repository root; fails with its whole output unless it succeeds.
fn run(binary: &Path, args: &[&str]) -> String {
    let out = Command::new(binary)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "`{} {}` failed ({}):\n{text}", binary.display(), args.join(" "), out.status);
    text
}

/// The receivers `amtool config routes test` finds for a label set in the example config.
fn routes_test(labels: &[&str]) -> String {
    let mut args = vec!["config", "routes", "test", "--config.file=deploy/alertmanager/alertmanager.example.yml"];
    args.extend_from_slice(labels);
    let amtool = tool("amtool", "prometheus-alertmanager");
    let out = Command::new(&amtool).args(&args).current_dir(repo()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "amtool {}: {}{}", args.join(" "), stdout, String::from_utf8_lossy(&out.stderr));
    stdout.trim().lines().last().unwrap_or_default().to_string()
}

/// Every culprit configuration in deploy/: `*.toml` files, and `*.toml: |` blocks of
/// Kubernetes ConfigMaps. (name, text).
fn deploy_configs() -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![repo().join("deploy")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(repo()).unwrap().display().to_string();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if path.is_dir() {
                stack.push(path);
            } else if ext == "toml" {
                found.push((rel, std::fs::read_to_string(&path).unwrap()));
            } else if ext == "yaml" || ext == "yml" {
                let text = std::fs::read_to_string(&path).unwrap();
                if !text.lines().any(|l| l.trim() == "kind: ConfigMap") {
                    continue;
                }
                let doc = parse_yaml(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
                if doc.get("kind").is_some_and(|k| k.str() == "ConfigMap") {
                    for (key, value) in doc.at(&["data"]).map() {
                        if key.ends_with(".toml") {
                            found.push((format!("{rel} (data.{key})"), value.str().to_string()));
                        }
                    }
                }
            }
        }
    }
    found.sort();
    found
}

/// The culprit.toml of the Kubernetes ConfigMap.
fn kubernetes_config() -> (String, String) {
    deploy_configs()
        .into_iter()
        .find(|(name, _)| name.starts_with("deploy/kubernetes/configmap.yaml"))
        .expect("deploy/kubernetes/configmap.yaml holds a culprit.toml")
}

/// The alertname culprit posts to Alertmanager (notify.alertmanager.alertname).
fn configured_alertname() -> String {
    let (_, text) = kubernetes_config();
    let config: toml::Value = toml::from_str(&text).unwrap();
    let name = config
        .get("notify")
        .and_then(|n| n.get("alertmanager"))
        .and_then(|a| a.get("alertname"))
        .and_then(|a| a.as_str())
        .unwrap_or("FlinkBackpressureCulprit")
        .to_string();
    let ignored = config.get("service").and_then(|s| s.get("ignore_alertnames")).and_then(|a| a.as_array());
    if let Some(ignored) = ignored {
        assert!(ignored.iter().any(|a| a.as_str() == Some(&name)), "service.ignore_alertnames must hold {name}");
    }
    name
}

/// Every `{ env = "…" }` / `{ file = "…" }` secret source: (key path, "env"|"file", value).
fn secret_sources(value: &toml::Value, path: &str, out: &mut Vec<(String, String, String)>) {
    match value {
        toml::Value::Table(t) => {
            if t.len() == 1
                && let Some((kind, toml::Value::String(v))) = t.iter().next()
                && (kind == "env" || kind == "file")
            {
                out.push((path.to_string(), kind.clone(), v.clone()));
                return;
            }
            for (k, v) in t {
                secret_sources(v, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                secret_sources(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn culprit_receiver(am: &Y) -> &Y {
    am.at(&["receivers"]).seq().iter().find(|r| r.at(&["name"]).str() == "culprit").expect("a receiver named culprit")
}

fn culprit_route(am: &Y) -> &Y {
    am.at(&["route", "routes"])
        .seq()
        .iter()
        .find(|r| r.at(&["receiver"]).str() == "culprit")
        .expect("a route to culprit")
}

fn matcher_set(route: &Y) -> BTreeSet<&str> {
    route.at(&["matchers"]).seq().iter().map(Y::str).collect()
}

fn group_by(route: &Y) -> BTreeSet<&str> {
    route.at(&["group_by"]).seq().iter().map(Y::str).collect()
}

fn volume<'a>(pod: &'a Y, name: &str) -> &'a Y {
    pod.at(&["volumes"])
        .seq()
        .iter()
        .find(|v| v.at(&["name"]).str() == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// The volume mount that holds a path (the longest mountPath that is a parent of it).
fn mount_of<'a>(container: &'a Y, path: &Path) -> &'a Y {
    container
        .at(&["volumeMounts"])
        .seq()
        .iter()
        .filter(|m| path.starts_with(m.at(&["mountPath"]).str()))
        .max_by_key(|m| m.at(&["mountPath"]).str().len())
        .unwrap_or_else(|| panic!("no volume holds {}", path.display()))
}

fn yaml_file(rel: &str) -> Y {
    parse_yaml(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------------------------------
// YAML, read with yaml-rust2 into a small tree whose scalars stay strings (`1`, `true` and
// `0440` included), so tests compare what the files say.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Y {
    Map(Vec<(String, Y)>),
    Seq(Vec<Y>),
    Str(String),
}

impl Y {
    fn get(&self, key: &str) -> Option<&Y> {
        match self {
            Y::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn at(&self, path: &[&str]) -> &Y {
        path.iter()
            .fold(self, |y, k| y.get(k).unwrap_or_else(|| panic!("no key `{}` (looking for {})", k, path.join("."))))
    }
    fn str(&self) -> &str {
        match self {
            Y::Str(s) => s,
            other => panic!("expected a scalar, found {other:?}"),
        }
    }
    fn seq(&self) -> &[Y] {
        match self {
            Y::Seq(s) => s,
            other => panic!("expected a sequence, found {other:?}"),
        }
    }
    fn map(&self) -> &[(String, Y)] {
        match self {
            Y::Map(m) => m,
            other => panic!("expected a mapping, found {other:?}"),
        }
    }
}

fn parse_yaml(text: &str) -> Result<Y, String> {
    let docs = yaml_rust2::YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    match docs.as_slice() {
        [] => Ok(Y::Map(Vec::new())),
        [doc] => from_yaml(doc),
        _ => Err("one YAML document per file".into()),
    }
}

fn from_yaml(y: &yaml_rust2::Yaml) -> Result<Y, String> {
    use yaml_rust2::Yaml;
    Ok(match y {
        Yaml::Hash(h) => {
            let mut out = Vec::new();
            for (k, v) in h {
                let Y::Str(key) = from_yaml(k)? else { return Err(format!("a key that is not a scalar: {k:?}")) };
                out.push((key, from_yaml(v)?));
            }
            Y::Map(out)
        }
        Yaml::Array(a) => Y::Seq(a.iter().map(from_yaml).collect::<Result<_, _>>()?),
        Yaml::String(s) | Yaml::Real(s) => Y::Str(s.clone()),
        Yaml::Integer(i) => Y::Str(i.to_string()),
        Yaml::Boolean(b) => Y::Str(b.to_string()),
        Yaml::Null => Y::Str(String::new()),
        other => return Err(format!("unsupported YAML: {other:?}")),
    })
}

// ---------------------------------------------------------------------------------------
// Kustomize, read here: the part of it the two kustomizations use (resources: files and
// directories; namespace; images; patches: a file or inline, a strategic merge by kind and
// name with `$patch: delete`). Any other key of a kustomization fails, so that a feature we
// do not read is never ignored. Lists of mappings merge by `name` (or `mountPath` for
// volume mounts), as Kubernetes' strategic merge does for containers, env, volumes and
// volume mounts; other lists are replaced.
// ---------------------------------------------------------------------------------------

fn kustomize(dir: &str) -> Vec<Y> {
    let k = yaml_file(&format!("{dir}/kustomization.yaml"));
    for (key, _) in k.map() {
        let known = ["apiVersion", "kind", "namespace", "resources", "images", "patches"];
        assert!(
            known.contains(&key.as_str()),
            "{dir}/kustomization.yaml: `{key}` is not read by this test's kustomize"
        );
    }
    let mut out = Vec::new();
    for r in k.get("resources").map(Y::seq).unwrap_or_default() {
        let path = format!("{dir}/{}", r.str());
        if repo().join(&path).is_dir() {
            out.extend(kustomize(&path));
        } else {
            out.push(yaml_file(&path));
        }
    }
    for p in k.get("patches").map(Y::seq).unwrap_or_default() {
        let patch = match (p.get("path"), p.get("patch")) {
            (Some(path), None) => yaml_file(&format!("{dir}/{}", path.str())),
            (None, Some(text)) => parse_yaml(text.str()).unwrap(),
            _ => panic!("{dir}: a patch is a path or an inline patch: {p:?}"),
        };
        let id = |y: &Y| (y.at(&["kind"]).str().to_string(), y.at(&["metadata", "name"]).str().to_string());
        let at = out
            .iter()
            .position(|r| id(r) == id(&patch))
            .unwrap_or_else(|| panic!("{dir}: no target for {:?}", id(&patch)));
        if patch.get("$patch").is_some_and(|d| d.str() == "delete") {
            out.remove(at);
        } else {
            out[at] = merge(&out[at], &patch);
        }
    }
    if let Some(ns) = k.get("namespace") {
        for r in &mut out {
            set(r, &["metadata", "namespace"], ns.clone());
        }
    }
    for image in k.get("images").map(Y::seq).unwrap_or_default() {
        let name = image.at(&["name"]).str();
        let new = format!("{}:{}", image.at(&["newName"]).str(), image.at(&["newTag"]).str());
        for r in &mut out {
            if let Some(Y::Map(spec)) = get_mut(r, &["spec", "template", "spec"]) {
                for (_, v) in spec.iter_mut().filter(|(k, _)| k == "containers" || k == "initContainers") {
                    if let Y::Seq(cs) = v {
                        for c in cs.iter_mut() {
                            if c.get("image").is_some_and(|i| i.str().split(':').next() == Some(name)) {
                                set(c, &["image"], Y::Str(new.clone()));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// A strategic merge of `patch` into `base` (the subset described above).
fn merge(base: &Y, patch: &Y) -> Y {
    match (base, patch) {
        (Y::Map(b), Y::Map(p)) => {
            let mut out = b.clone();
            for (k, v) in p {
                match out.iter_mut().find(|(bk, _)| bk == k) {
                    Some((_, bv)) => *bv = merge(bv, v),
                    None => out.push((k.clone(), v.clone())),
                }
            }
            Y::Map(out)
        }
        (Y::Seq(b), Y::Seq(p)) if p.iter().all(|x| matches!(x, Y::Map(_))) && !p.is_empty() => {
            let key = ["name", "mountPath"].into_iter().find(|k| p.iter().all(|x| x.get(k).is_some()));
            let Some(key) = key else { return patch.clone() };
            // Items new to the list come first, in the patch's order (as kubectl builds it).
            let (mut out, mut new) = (b.clone(), Vec::new());
            for item in p {
                let same = out.iter().position(|x| x.get(key) == item.get(key));
                let delete = item.get("$patch").is_some_and(|d| d.str() == "delete");
                match (same, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (Some(i), false) => out[i] = merge(&out[i], item),
                    (None, true) => {}
                    (None, false) => new.push(item.clone()),
                }
            }
            new.extend(out);
            Y::Seq(new)
        }
        _ => patch.clone(),
    }
}

fn get_mut<'a>(y: &'a mut Y, path: &[&str]) -> Option<&'a mut Y> {
    path.iter().try_fold(y, |y, k| match y {
        Y::Map(m) => m.iter_mut().find(|(key, _)| key == k).map(|(_, v)| v),
        _ => None,
    })
}

fn set(y: &mut Y, path: &[&str], value: Y) {
    let (last, parents) = path.split_last().unwrap();
    let mut at = y;
    for k in parents {
        let Y::Map(m) = at else { panic!("not a mapping at {k}") };
        if !m.iter().any(|(key, _)| key == k) {
            m.push((k.to_string(), Y::Map(Vec::new())));
        }
        at = &mut m.iter_mut().find(|(key, _)| key == k).unwrap().1;
    }
    let Y::Map(m) = at else { panic!("not a mapping at {last}") };
    match m.iter_mut().find(|(key, _)| key == last) {
        Some((_, v)) => *v = value,
        None => m.push((last.to_string(), value)),
    }
}

/// The kinds of built resources, sorted.
fn kinds(built: &[Y]) -> Vec<&str> {
    let mut k: Vec<&str> = built.iter().map(|r| r.at(&["kind"]).str()).collect();
    k.sort();
    k
}

fn resource<'a>(built: &'a [Y], kind: &str) -> &'a Y {
    built.iter().find(|r| r.at(&["kind"]).str() == kind).unwrap_or_else(|| panic!("no {kind}"))
}

/// kubectl reads YAML 1.1, where `defaultMode: 0440` is octal (it prints 288); yaml-rust2
/// reads YAML 1.2 digits (440). kubectl's modes are written back in octal to compare.
fn octal_modes(y: Y) -> Y {
    match y {
        Y::Map(m) => Y::Map(
            m.into_iter()
                .map(|(k, v)| match (k.as_str(), &v) {
                    ("defaultMode" | "mode", Y::Str(n)) => {
                        let octal = format!("{:o}", n.parse::<u32>().unwrap());
                        (k, Y::Str(octal))
                    }
                    _ => (k, octal_modes(v)),
                })
                .collect(),
        ),
        Y::Seq(s) => Y::Seq(s.into_iter().map(octal_modes).collect()),
        other => other,
    }
}

/// Mapping keys sorted at every level (kubectl prints them sorted).
fn sorted(y: &Y) -> Y {
    match y {
        Y::Map(m) => {
            let mut m: Vec<(String, Y)> = m.iter().map(|(k, v)| (k.clone(), sorted(v))).collect();
            m.sort_by(|a, b| a.0.cmp(&b.0));
            Y::Map(m)
        }
        Y::Seq(s) => Y::Seq(s.iter().map(sorted).collect()),
        Y::Str(s) => Y::Str(s.clone()),
    }
}

/// A resource as block YAML, `key: value` per line (what the checks look for).
fn to_yaml(y: &Y) -> String {
    fn write(y: &Y, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match y {
            Y::Map(m) => {
                for (k, v) in m {
                    match v {
                        Y::Str(s) => out.push_str(&format!("{pad}{k}: {s}\n")),
                        _ => {
                            out.push_str(&format!("{pad}{k}:\n"));
                            write(v, indent + 2, out);
                        }
                    }
                }
            }
            Y::Seq(s) => {
                for v in s {
                    out.push_str(&format!("{pad}-\n"));
                    write(v, indent + 2, out);
                }
            }
            Y::Str(s) => out.push_str(&format!("{pad}{s}\n")),
        }
    }
    let mut out = String::new();
    write(y, 0, &mut out);
    out
}
