//! `culprit record`: a recording of one job's metrics (and its Flink REST answers) to
//! replay offline.

use super::*;

/// What Flink REST gave for the recorded job, written beside the recording.
struct Recorded<'a> {
    graph: &'a Option<crate::model::graph::JobGraph>,
    checkpoint_config: &'a Option<crate::model::snapshot::CheckpointConfig>,
    exceptions: &'a Option<crate::model::failover::JobExceptions>,
    rescales: &'a Option<crate::model::rescales::RescaleHistory>,
}

/// `culprit record`: a live diagnosis whose series are written as a recording.
pub async fn record_command(args: &RecordArgs, now_ms: i64) -> Result<String, CliError> {
    check_job(Some(&args.job))?;
    let mut config = load_config(Some(&args.config))?;
    let lookback = args.lookback.parse::<Millis>().map_err(|e| CliError::usage(format!("--lookback {e}")))?;
    config.diagnosis.trend_lookback = lookback;
    let window_ms = parse_window(args.window.as_deref())?;
    if window_ms.unwrap_or(config.diagnosis.window.as_ms()) > lookback.as_ms() {
        return Err(CliError::usage("--lookback must be at least the window"));
    }
    let at_ms = args.at.as_deref().map(parse_at).transpose()?.unwrap_or(now_ms);
    let mut live = crate::service::pipeline::Live::new(config.clone()).map_err(|e| CliError::usage(e.to_string()))?;
    live.announce_retries(announce_on_stderr());
    let prometheus = live
        .prometheus()
        .ok_or_else(|| CliError::usage(format!("{}: no [prometheus] section", args.config.display())))?;
    let labels = cluster_labels(args.cluster.as_deref());
    let crate::service::pipeline::JobContext {
        job_id,
        mut graph,
        checkpoint_config,
        exceptions,
        rescales,
        notes: context_notes,
    } = live.job_context(Some(&args.job), &labels, &labels).await;
    let why_missing =
        if context_notes.is_empty() { "no Flink cluster configured".into() } else { context_notes.join("; ") };
    let mut job = job_id.unwrap_or_else(|| args.job.clone());
    let source =
        crate::collect::recorder::RecordingSource::new(crate::collect::prometheus::PromSource::new(prometheus, at_ms));
    // The job's runs, looked up once (and recorded): for the configured plan and round 1.
    let lookup = live.look_up(&source, at_ms).await;
    if graph.is_none()
        && let Some((run_id, plan, _)) = live.configured_plan(&lookup, &job)
    {
        graph = plan.ok();
        job = run_id.unwrap_or(job);
    }
    let request =
        DiagnosisRequest { job: Some(job), at_ms: Some(at_ms), window_ms, labels: parse_labels(&args.label)? };
    let snapshot = crate::collect::collector::collect_after(
        &source,
        CollectInput {
            request: &request,
            graph: graph.clone(),
            checkpoint_config: checkpoint_config.clone(),
            exceptions: exceptions.clone(),
            rescales: rescales.clone(),
            config: &config,
            catalog: &config.metrics,
        },
        Some(lookup),
    )
    .await
    .map_err(|e| CliError::pipeline(e.into()))?;
    let verdict = crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis));
    let file = std::fs::File::create(&args.out)
        .map_err(|e| CliError::usage(format!("{}: cannot create: {e}", args.out.display())))?;
    let mut marker = vec![("job_id", snapshot.job.id.as_str()), ("job_name", snapshot.job.name.as_str())];
    marker.extend(snapshot.job.deployment.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (series, samples) = source
        .write_recording(std::io::BufWriter::new(file), at_ms, snapshot.at_ms, &marker)
        .await
        .map_err(|e| CliError::usage(e.message))?;
    let mut lines =
        vec![format!("wrote {} ({series} series, {samples} samples up to {})", args.out.display(), verdict.at)];
    let context =
        Recorded { graph: &graph, checkpoint_config: &checkpoint_config, exceptions: &exceptions, rescales: &rescales };
    lines.extend(write_side_files(args, &context, &why_missing)?);
    lines.push(format!("verdict: {}", verdict.summary));
    lines.push(replay_line(args, &context));
    Ok(lines.join("\n") + "\n")
}

/// Writes the plan, checkpoint configuration, exception and rescale history files asked
/// for; one line each: written, or why not.
fn write_side_files(args: &RecordArgs, r: &Recorded<'_>, why_missing: &str) -> Result<Vec<String>, CliError> {
    let Recorded { graph, checkpoint_config, exceptions, rescales } = r;
    let mut lines = Vec::new();
    if let (Some(path), Some(graph)) = (&args.plan_out, &graph) {
        let json = serde_json::json!({ "plan": {
            "jid": graph.job_id, "name": graph.job_name,
            "nodes": graph.vertices.iter().map(|v| serde_json::json!({
                "id": v.id, "parallelism": v.parallelism, "description": v.operators.join("<br/>+- "),
                "inputs": graph.edges.iter().filter(|e| e.to == v.id).map(|e| serde_json::json!({"id": e.from, "ship_strategy": e.ship_strategy})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }});
        std::fs::write(path, serde_json::to_string_pretty(&json).expect("json"))
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        lines.push(format!("wrote {}", path.display()));
    }
    if let (Some(path), None) = (&args.plan_out, &graph) {
        lines.push(format!("{} not written: no job plan from Flink REST ({why_missing})", path.display()));
    }
    if let (Some(path), None) = (&args.checkpoint_config_out, &checkpoint_config) {
        lines.push(format!(
            "{} not written: no checkpoint configuration from Flink REST ({why_missing})",
            path.display()
        ));
    }
    if let (Some(path), Some(c)) = (&args.checkpoint_config_out, &checkpoint_config) {
        let json = serde_json::json!({"interval": c.interval_ms, "timeout": c.timeout_ms, "unaligned_checkpoints": c.unaligned, "state_backend": c.state_backend});
        std::fs::write(path, serde_json::to_string_pretty(&json).expect("json"))
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        lines.push(format!("wrote {}", path.display()));
    }
    match (&args.exceptions_out, &exceptions) {
        (Some(path), None) => {
            lines.push(format!("{} not written: no exception history from Flink REST ({why_missing})", path.display()))
        }
        (Some(path), Some(x)) => {
            std::fs::write(path, serde_json::to_string_pretty(&x.to_rest_json()).expect("json"))
                .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
            lines.push(format!("wrote {}", path.display()));
        }
        _ => {}
    }
    match (&args.rescales_out, &rescales) {
        (Some(path), None) => lines.push(format!(
            "{} not written: no rescale history from Flink REST (only Flink 2.3+ on the Adaptive scheduler with web.adaptive-scheduler.rescale-history.size > 0 keeps one; {why_missing})",
            path.display()
        )),
        (Some(path), Some(r)) => {
            std::fs::write(path, serde_json::to_string_pretty(&r.to_rest_json()).expect("json"))
                .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
            lines.push(format!("wrote {}", path.display()));
        }
        _ => {}
    }
    Ok(lines)
}

/// `replay: culprit diagnose --recording … --plan …`: the command that replays it.
fn replay_line(args: &RecordArgs, r: &Recorded<'_>) -> String {
    let Recorded { graph, checkpoint_config, exceptions, rescales } = r;
    let mut replay = format!("replay: culprit diagnose --recording {}", args.out.display());
    if let (Some(p), Some(_)) = (&args.plan_out, &graph) {
        replay.push_str(&format!(" --plan {}", p.display()));
    }
    if let (Some(p), Some(_)) = (&args.checkpoint_config_out, &checkpoint_config) {
        replay.push_str(&format!(" --checkpoint-config {}", p.display()));
    }
    if let (Some(p), Some(_)) = (&args.exceptions_out, &exceptions) {
        replay.push_str(&format!(" --exceptions {}", p.display()));
    }
    if let (Some(p), Some(_)) = (&args.rescales_out, &rescales) {
        replay.push_str(&format!(" --rescales {}", p.display()));
    }
    replay
}
