//! The `culprit` command line: parsing, the documented exit codes, and the wiring of
//! inputs (recordings, scrape dumps, plans) to the collector, the diagnosis and a renderer.

pub mod check;
pub mod check_store;
pub mod logging;
pub mod mcp;
mod record;
pub use record::record_command;
pub mod store;

use crate::model::failover::JobExceptions;
use crate::model::rescales::RescaleHistory;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::collect::block_on;
use crate::collect::collector::{CollectInput, collect};
use crate::collect::store::SeriesStore;
use crate::config::{Config, Millis};
use crate::diagnose::diagnose;
use crate::model::graph::JobGraph;
use crate::model::request::DiagnosisRequest;
use crate::model::snapshot::CheckpointConfig;
use crate::model::verdict::Verdict;
use crate::render::{Format, Options, render_with};

/// Exit code: a verdict was produced, whatever it says.
pub const EXIT_OK: i32 = 0;
/// Exit code: an unexpected internal failure.
pub const EXIT_INTERNAL: i32 = 1;
/// Exit code: bad usage or bad input (the message names the file and line).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: a backend is unreachable: Prometheus, Flink REST given with `--flink`, a
/// `--scrape` endpoint (or, for `check-config --connect`, any backend or destination)
/// could not be reached or did not answer in time.
pub const EXIT_BACKEND: i32 = 3;

const EXIT_CODES: &str = "Exit codes:\n  0  a verdict was produced (whatever it says)\n  1  internal error\n  2  bad usage or bad input; the message names the file and line\n  3  a backend failed (Prometheus, --flink, --scrape): it refused the connection, timed out,\n     failed until its deadline, or refused the query (the message quotes its answer);\n     stderr says when retrying starts";
const RECORD_EXIT_CODES: &str = "Exit codes:\n  0  the recording was written\n  1  internal error\n  2  bad usage or bad configuration\n  3  Prometheus (or Flink REST) is unreachable; stderr says when retrying starts";
const CHECK_EXIT_CODES: &str = "Exit codes:\n  0  the configuration is valid (and, with --connect, everything answered)\n  1  internal error\n  2  the configuration cannot be used (the message names the key and the fix)\n  3  with --connect: a backend or destination could not be reached or refused the credentials";
const SERVE_EXIT_CODES: &str = "Exit codes:\n  0  stopped by SIGTERM or Ctrl-C after draining\n  1  internal error\n  2  bad configuration, or the listen address could not be bound";

/// Finds the Apache Flink operator that really slows a backpressured job, why, and the fix.
#[derive(Debug, Parser)]
#[command(name = "culprit", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Text and Markdown verdicts in full: the cause, every number, the runbook's steps,
    /// what was missing and the notes (by default a text verdict is at most 20 lines).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose one job from a recording or scrape dumps and its job plan.
    #[command(after_help = EXIT_CODES)]
    Diagnose(DiagnoseArgs),
    /// Write a recording of one job from Prometheus (and its plan from Flink REST): a bundle
    /// from which `diagnose --recording` gives the same verdict, to attach to a bug report.
    #[command(after_help = RECORD_EXIT_CODES)]
    Record(RecordArgs),
    /// Replay the real Flink recordings bundled with culprit and print each verdict.
    /// Needs no network, Prometheus or Flink.
    #[command(after_help = EXIT_CODES)]
    Demo(DemoArgs),
    /// Run the service: Alertmanager webhooks in, verdicts out to Slack, PagerDuty,
    /// Alertmanager and webhooks; the HTTP API; until SIGTERM. Logs go to stderr
    /// (RUST_LOG=debug for more).
    #[command(after_help = SERVE_EXIT_CODES)]
    Serve(ServeArgs),
    /// Validate a configuration and say what it sets up (backends, Flink clusters,
    /// destinations, how serve would listen); with --connect, reach each of them without
    /// posting anything.
    #[command(after_help = CHECK_EXIT_CODES)]
    CheckConfig(CheckConfigArgs),
    /// The MCP server over stdio, for an agent (Claude, HolmesGPT, …): tools that diagnose
    /// a job, list backpressured jobs, read stored verdicts and explain a vertex. Logs go to
    /// stderr. `serve` answers the same tools at `POST /mcp`.
    #[command(after_help = mcp::MCP_EXIT_CODES)]
    Mcp(mcp::McpArgs),
    /// The SQLite store: `backup` (a consistent copy while serve runs), `acknowledge`
    /// (losses a start found in its files).
    #[command(after_help = store::STORE_EXIT_CODES)]
    Store(store::StoreArgs),
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The configuration (TOML; see config/culprit.example.toml); `--config FILE` as the
    /// other commands take it works too.
    #[arg(value_name = "FILE", required_unless_present = "config", conflicts_with = "config")]
    pub file: Option<PathBuf>,
    /// The same as FILE.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Reach Prometheus, each Flink cluster and each destination. Nothing is posted:
    /// Slack's token is checked with auth.test (an incoming webhook with an empty post it
    /// refuses), Alertmanager with GET /api/v2/status, Opsgenie, JSM and Grafana with a
    /// read, email with an SMTP session that sends no mail; PagerDuty, webhooks and the
    /// chat webhooks have no dry run, so only that they answer is checked (an empty or
    /// keyless post the vendor refuses, a HEAD or GET). The README's table says each.
    #[arg(long)]
    pub connect: bool,
    /// Instead of the report: the destinations a job whose alerts carry these labels is
    /// notified at under `[route]`, one per line (`namespace=payments,team=fraud`).
    #[arg(long, value_name = "LABELS", conflicts_with = "connect")]
    pub route: Option<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The configuration (TOML; see config/culprit.example.toml).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

/// `culprit diagnose`. The metrics come from exactly one of: --recording, --metrics,
/// --scrape, or (with none of them) the Prometheus in the configuration.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("source").args(["recording", "metrics", "scrape"]).multiple(false))]
pub struct DiagnoseArgs {
    /// A recording: Prometheus text exposition or OpenMetrics with timestamps, plain or
    /// gzip (written by `culprit record`, `promtool tsdb dump-openmetrics`, or the older
    /// `promtool tsdb dump`); `-` reads standard input. A sample without a timestamp is
    /// taken at the file's newest timestamp.
    #[arg(long, value_name = "FILE")]
    pub recording: Option<PathBuf>,
    /// A plain scrape dump of a Flink reporter endpoint (no timestamps); repeat for the
    /// JobManager and every TaskManager. Samples are taken to be from --at, else now.
    #[arg(long, value_name = "FILE")]
    pub metrics: Vec<PathBuf>,
    /// A Flink Prometheus reporter endpoint to read now, with no Prometheus at all
    /// (`http://taskmanager-1:9249/metrics`); repeat for the JobManager and every
    /// TaskManager. Flink's busy and backpressured times are already 60 s averages.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Flink REST `GET /jobs/:id/vertices/:vid/flamegraph` answer of the culprit's vertex,
    /// as `TYPE=FILE` with the `type` it was asked with (`off_cpu=`, `on_cpu=`, `full=`;
    /// a bare FILE is `full`): its top frames become the verdict's profile when the finding
    /// is `unexplained` or the culprit is a chain of operators (else a note says it was
    /// not used).
    #[arg(long, value_name = "[TYPE=]FILE")]
    pub flamegraph: Option<FlameGraphFile>,
    /// Flink REST endpoint (`http://jobmanager:8081`) for the job graph and checkpoint
    /// configuration, with --scrape or live; overrides the configured clusters.
    #[arg(long, value_name = "URL")]
    pub flink: Option<String>,
    /// The configured Flink cluster to ask (by name), live.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The job graph: the JSON of Flink REST `GET /jobs/:id/plan` (with or without the
    /// `{"plan": …}` wrapper). Without it, the job's entry of `[flink.plans]` in `--config`
    /// is used when there is one; with neither, culprit ranks busy vertices that are not
    /// backpressured and lowers its confidence.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// The job: its name as Flink shows it (`bp-lab-slow-sink`), as the reporter writes it
    /// (`bp_lab_slow_sink`), or its job id. Default: the plan's job, else the only job.
    /// Among several runs of the name, the run this id or the plan names, else the newest.
    /// A run that stopped reporting while a newer run of the same name and deployment
    /// reports (a redeploy from a savepoint under a new job id) gives way to the newer run,
    /// and the verdict's summary says which replaced which; the old run's plan is used only
    /// when its vertices are the new run's.
    #[arg(long, value_name = "NAME_OR_ID")]
    pub job: Option<String>,
    /// Which deployment is meant when two report the same job id (application mode with HA
    /// gives every job the id 000…0), by a label its series carry: `--label
    /// namespace=flink-us`. Repeat for more labels. Without it such a job is refused, not
    /// blended.
    #[arg(long, value_name = "LABEL=VALUE")]
    pub label: Vec<String>,
    /// The time the verdict is about, RFC 3339 (`2026-11-29T10:36:00Z`). Default: the
    /// recording's last sample.
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// The window before --at that averages cover, e.g. `5m`, `90s`. Default: from the
    /// configuration (5m).
    #[arg(long, value_name = "DURATION")]
    pub window: Option<String>,
    /// A configuration file (TOML; see config/culprit.example.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Flink REST `GET /jobs/:id/checkpoints/config` answer: checkpoint interval, timeout,
    /// unaligned checkpoints and the state backend. Without it the interval is estimated.
    #[arg(long, value_name = "FILE")]
    pub checkpoint_config: Option<PathBuf>,
    /// Flink REST `GET /jobs/:id/exceptions` answer: the job's exception history (which
    /// task failed, with what, when). Without it a job that restarts is seen by its
    /// `numRestarts` alone, and which task fails is unknown.
    #[arg(long, value_name = "FILE")]
    pub exceptions: Option<PathBuf>,
    /// Flink REST `GET /jobs/:id/rescales/history` answer (Flink 2.3, the Adaptive
    /// scheduler with `web.adaptive-scheduler.rescale-history.size` > 0): the scheduler's
    /// rescales, why each began and how it ended. Without it a rescale is seen by the
    /// subtasks reporting before and after it alone.
    #[arg(long, value_name = "FILE")]
    pub rescales: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// A recorded flame graph (`--flamegraph [TYPE=]FILE`): the file and the `type` it was
/// asked with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlameGraphFile {
    pub kind: crate::model::flamegraph::ProfileKind,
    pub path: PathBuf,
}

impl std::str::FromStr for FlameGraphFile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use crate::model::flamegraph::ProfileKind;
        let typed = [ProfileKind::Full, ProfileKind::OnCpu, ProfileKind::OffCpu]
            .into_iter()
            .find_map(|k| s.strip_prefix(k.as_str()).and_then(|r| r.strip_prefix('=')).map(|r| (k, r)));
        let (kind, path) = typed.unwrap_or((ProfileKind::Full, s));
        if path.is_empty() {
            return Err("give a file: [TYPE=]FILE, TYPE one of full, on_cpu, off_cpu".into());
        }
        Ok(FlameGraphFile { kind, path: PathBuf::from(path) })
    }
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The job: its name as Flink shows it, as the reporter writes it, or its job id.
    #[arg(long, value_name = "NAME_OR_ID")]
    pub job: String,
    /// Which deployment is meant when two report the same job id, by a label its series
    /// carry (`--label namespace=flink-us`); repeatable.
    #[arg(long, value_name = "LABEL=VALUE")]
    pub label: Vec<String>,
    /// How far back the recording reaches (the trend lookback), e.g. `1h`.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub lookback: String,
    /// The time to record up to, RFC 3339. Default: now.
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<String>,
    /// The diagnosis window, e.g. `5m`. Default: from the configuration.
    #[arg(long, value_name = "DURATION")]
    pub window: Option<String>,
    /// The configuration with the `[prometheus]` to read from (and `[flink]` clusters).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The configured Flink cluster to ask (by name).
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Where to write the recording (gzip OpenMetrics), e.g. `job.om.gz`.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Where to write the job plan JSON (when Flink REST gives it).
    #[arg(long, value_name = "FILE")]
    pub plan_out: Option<PathBuf>,
    /// Where to write the checkpoint configuration JSON (when Flink REST gives it).
    #[arg(long, value_name = "FILE")]
    pub checkpoint_config_out: Option<PathBuf>,
    /// Where to write the job's exception history (when Flink REST gives it), for
    /// `culprit diagnose --exceptions`.
    #[arg(long, value_name = "FILE")]
    pub exceptions_out: Option<PathBuf>,
    /// Where to write Flink's rescale history (when Flink REST gives it), for
    /// `culprit diagnose --rescales`.
    #[arg(long, value_name = "FILE")]
    pub rescales_out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// An error for the user: one sentence, and the exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    fn usage(message: impl Into<String>) -> Self {
        CliError { code: EXIT_USAGE, message: message.into() }
    }

    fn backend(message: impl Into<String>) -> Self {
        CliError { code: EXIT_BACKEND, message: message.into() }
    }

    /// A failed live diagnosis: a backend that did not answer is [`EXIT_BACKEND`], anything
    /// else (no such job, a plan of another job) [`EXIT_USAGE`].
    fn pipeline(e: crate::service::pipeline::PipelineError) -> Self {
        use crate::collect::collector::CollectError;
        use crate::service::pipeline::PipelineError;
        match e {
            PipelineError::Collect(CollectError::Source(_)) => CliError::backend(e.to_string()),
            _ => CliError::usage(e.to_string()),
        }
    }
}

/// Prints on stderr, once per backend, that retrying has started (a backend that is down is
/// not silence).
fn announce_on_stderr() -> crate::collect::prometheus::Announce {
    std::sync::Arc::new(|line: String| eprintln!("culprit: {}", logging::escape_controls(&line)))
}

/// `--flink URL` given but unreachable: the user asked for it, so it is an error
/// ([`EXIT_BACKEND`]), not a note.
async fn require_flink(rest: &crate::collect::flink_rest::FlinkRest, url: &str) -> Result<(), CliError> {
    match rest.jobs().await {
        Err(e) if e.is_unreachable() => Err(CliError::backend(format!("--flink {url}: {e}"))),
        _ => Ok(()),
    }
}

/// Runs a parsed command, writing the result to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    let view = Options { width: output_width(), verbose: cli.verbose };
    match cli.command {
        Command::Diagnose(args) => {
            let verdict = if args.recording.is_some() || !args.metrics.is_empty() {
                diagnose_command(&args, now_ms())?
            } else {
                runtime()?.block_on(diagnose_live_command(&args, now_ms()))?
            };
            let verdict = with_recorded_profile(verdict, &args)?;
            write_out(out, &render_with(&verdict, args.format, &view))
        }
        Command::Record(args) => {
            let summary = runtime()?.block_on(record_command(&args, now_ms()))?;
            write_out(out, &summary)
        }
        Command::Serve(args) => {
            let config = load_config(Some(&args.config))?;
            logging::init(config.redactor());
            runtime()?.block_on(async {
                let mcp: crate::service::server::Mount = Box::new(crate::mcp::http_routes);
                let app = crate::service::server::Application::build_with(config, Some(mcp))
                    .await
                    .map_err(CliError::usage)?;
                app.run_until_stopped().await;
                Ok::<(), CliError>(())
            })
        }
        Command::Mcp(args) => mcp::run(args),
        Command::Store(args) => store::run(args, out),
        Command::CheckConfig(args) => {
            let file = args.file.or(args.config).expect("clap requires FILE or --config");
            check::run(&file, args.connect, args.route.as_deref(), out)
        }
        Command::Demo(args) => {
            if args.format == Format::Html {
                // One page per document: nineteen HTML documents in one stream open as none.
                return Err(CliError::usage(
                    "demo writes many verdicts: use --format text, markdown or json; for one verdict page run `culprit diagnose --recording examples/captures/hot-key/recording.om.gz --plan examples/captures/hot-key/plan.json --format html > verdict.html`",
                ));
            }
            let verdicts = crate::samples::captures::CAPTURES.iter().map(|capture| {
                crate::samples::captures::verdict(capture).map(|v| (capture, v)).map_err(|e| CliError {
                    code: EXIT_INTERNAL,
                    message: format!("bundled capture {}: {e}", capture.name),
                })
            });
            if args.format == Format::Json {
                // One JSON document (an array of verdicts), so that `| jq` reads it.
                let all = verdicts.map(|r| r.map(|(_, v)| v)).collect::<Result<Vec<_>, _>>()?;
                return write_out(out, &(serde_json::to_string_pretty(&all).expect("json") + "\n"));
            }
            for (i, r) in verdicts.enumerate() {
                let (capture, verdict) = r?;
                let mut text = String::new();
                if i > 0 {
                    text.push('\n');
                }
                text.push_str(&format!("━━ {} — {}\n", capture.name, capture.what));
                text.push_str(&render_with(&verdict, args.format, &view));
                write_out(out, &text)?;
            }
            Ok(())
        }
    }
}

pub(crate) fn write_out(out: &mut dyn Write, s: &str) -> Result<(), CliError> {
    match out.write_all(s.as_bytes()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is not an error of ours.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError { code: EXIT_INTERNAL, message: format!("cannot write the output: {e}") }),
    }
}

/// Columns of text output: `COLUMNS` when set, else the terminal's width when standard
/// output is one, else [`crate::render::text::DEFAULT_WIDTH`].
fn output_width() -> usize {
    use std::io::IsTerminal as _;
    if let Some(n) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|n| *n > 0) {
        return n;
    }
    if std::io::stdout().is_terminal()
        && let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size()
    {
        return usize::from(w);
    }
    crate::render::text::DEFAULT_WIDTH
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError { code: EXIT_INTERNAL, message: format!("cannot start the runtime: {e}") })
}

fn load_config(path: Option<&Path>) -> Result<Config, CliError> {
    match path {
        Some(path) => Config::load(path).map_err(|e| CliError::usage(e.to_string())),
        None => Ok(Config::default()),
    }
}

fn parse_window(window: Option<&str>) -> Result<Option<i64>, CliError> {
    window
        .map(|w| {
            crate::config::parse_window(w).map(|m| m.as_ms()).map_err(|e| CliError::usage(format!("--window {e}")))
        })
        .transpose()
}

fn check_job(job: Option<&str>) -> Result<(), CliError> {
    match job {
        Some(j) if j.trim().is_empty() => Err(CliError::usage("--job is empty: give the job's name or id")),
        _ => Ok(()),
    }
}

/// `--label name=value` flags as labels; a bad one is a usage error naming it.
fn parse_labels(flags: &[String]) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    flags
        .iter()
        .map(|f| {
            let (k, v) = f.split_once('=').unwrap_or((f, ""));
            let valid = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || v.is_empty() {
                return Err(CliError::usage(format!("--label `{f}` is not LABEL=VALUE, such as namespace=flink-us")));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// `--cluster NAME` chooses the Flink cluster by name.
fn cluster_labels(cluster: Option<&str>) -> std::collections::BTreeMap<String, String> {
    crate::service::Service::request_labels(cluster)
}

/// An ad-hoc Flink REST client for `--flink URL`.
fn flink_from_url(url: &str, config: &Config) -> Result<crate::collect::flink_rest::FlinkRest, CliError> {
    let cluster =
        crate::config::FlinkCluster { name: url.to_string(), rest_url: url.to_string(), ..Default::default() };
    let mut rest = crate::collect::flink_rest::FlinkRest::new(&cluster, &config.flink)
        .map_err(|e| CliError::usage(format!("--flink {url}: {e}")))?;
    rest.announce_retries(announce_on_stderr());
    Ok(rest)
}

/// `culprit diagnose` live (Prometheus from the configuration) or over `--scrape`.
pub async fn diagnose_live_command(args: &DiagnoseArgs, now_ms: i64) -> Result<Verdict, CliError> {
    let mut config = load_config(args.config.as_deref())?;
    if let Some(url) = &args.flink {
        config.flink.clusters =
            vec![crate::config::FlinkCluster { name: url.clone(), rest_url: url.clone(), ..Default::default() }];
    }
    let at_ms = args.at.as_deref().map(parse_at).transpose()?;
    let window_ms = parse_window(args.window.as_deref())?;
    check_job(args.job.as_deref())?;
    let request = DiagnosisRequest { job: args.job.clone(), at_ms, window_ms, labels: parse_labels(&args.label)? };
    if !args.scrape.is_empty() {
        return scrape_command(args, &config, &request, now_ms).await;
    }
    if config.prometheus.is_none() {
        return Err(CliError::usage(
            "nothing to diagnose: give --recording FILE, --metrics FILE or --scrape URL, or a --config with a [prometheus] section",
        ));
    }
    if args.job.is_none() {
        return Err(CliError::usage("a live diagnosis needs --job NAME_OR_ID"));
    }
    let mut live = crate::service::pipeline::Live::new(config).map_err(|e| CliError::usage(e.to_string()))?;
    live.announce_retries(announce_on_stderr());
    let mut labels = cluster_labels(args.cluster.as_deref());
    if let Some(url) = &args.flink {
        labels.insert(crate::config::CLUSTER_CHOICE.into(), url.clone());
        if let Some(rest) = live.flink_for(&labels) {
            require_flink(rest, url).await?;
        }
    }
    let overrides = crate::service::pipeline::Overrides {
        graph: read_plan(args)?,
        checkpoint_config: read_checkpoint_config(args)?,
        exceptions: read_exceptions(args)?,
        rescales: read_rescales(args)?,
    };
    live.diagnose_with(&request, &labels, now_ms, overrides).await.map_err(CliError::pipeline)
}

/// Reads Flink reporter endpoints now and diagnoses from that one scrape.
async fn scrape_command(
    args: &DiagnoseArgs,
    config: &Config,
    request: &DiagnosisRequest,
    now_ms: i64,
) -> Result<Verdict, CliError> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(config.flink.timeout.as_ms() as u64))
        .build()
        .map_err(|e| CliError { code: EXIT_INTERNAL, message: e.to_string() })?;
    let stamp = request.at_ms.unwrap_or(now_ms);
    let mut store = SeriesStore::new();
    for url in &args.scrape {
        match reqwest::Url::parse(url) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
            _ => {
                return Err(CliError::usage(format!(
                    "--scrape {url}: not an http(s) URL such as http://taskmanager:9249/metrics"
                )));
            }
        }
        let failed = |e: reqwest::Error| match e.status() {
            // A wrong path is bad usage; no answer, or a server error, an unreachable backend.
            Some(status) if !status.is_server_error() => {
                CliError::usage(format!("--scrape {url}: the endpoint answered {status}"))
            }
            Some(status) => CliError::backend(format!("--scrape {url}: the endpoint answered {status}")),
            None => CliError::backend(format!("--scrape {url}: {}", crate::collect::prometheus::without_url(&e))),
        };
        let body = client
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(failed)?
            .bytes()
            .await
            .map_err(failed)?;
        store.read_from(&body[..], url, Some(stamp)).map_err(|e| CliError::usage(e.to_string()))?;
    }
    store.finish();
    let mut graph = read_plan(args)?;
    let mut checkpoint_config = read_checkpoint_config(args)?;
    let mut exceptions = read_exceptions(args)?;
    let mut rescales = read_rescales(args)?;
    let mut notes = Vec::new();
    let mut request = request.clone();
    if let Some(url) = &args.flink {
        let rest = flink_from_url(url, config)?;
        require_flink(&rest, url).await?;
        let wanted = request.job.clone();
        match wanted {
            Some(wanted) => match rest.jobs().await {
                Ok(jobs) => {
                    if let Some(job) = crate::collect::flink_rest::pick_job(&jobs, &wanted) {
                        request.job = Some(job.id.clone());
                        if graph.is_none() {
                            match rest.plan(&job.id).await {
                                Ok(g) => graph = Some(g),
                                Err(e) => notes.push(format!("no job graph from Flink REST: {e}")),
                            }
                        }
                        if checkpoint_config.is_none() {
                            checkpoint_config = rest.checkpoint_config(&job.id).await.ok();
                        }
                        if exceptions.is_none() {
                            match rest.exceptions(&job.id).await {
                                Ok(x) => exceptions = Some(x),
                                Err(e) => notes.push(format!("no exception history from Flink REST: {e}")),
                            }
                        }
                        if rescales.is_none() {
                            match rest.rescales(&job.id).await {
                                Ok(r) => rescales = Some(r),
                                // 404: no history for this job (most jobs); see Live::job_context
                                Err(e) if e.status() == Some(404) => {}
                                Err(e) => notes.push(format!("no rescale history from Flink REST: {e}")),
                            }
                        }
                    }
                }
                Err(e) => notes.push(format!("Flink REST did not list the jobs: {e}")),
            },
            None => notes.push("no --job given: Flink REST not asked".into()),
        }
    }
    let naming = naming_in_store(&store, &config.metrics).map_err(CliError::usage)?;
    let snapshot = collect(
        &store,
        CollectInput {
            request: &request,
            graph,
            checkpoint_config,
            exceptions,
            rescales,
            config,
            catalog: &naming.catalog,
        },
    )
    .await
    .map_err(|e| CliError::usage(format!("{e}{}", naming.hint_after_error())))?;
    refuse_plan_mismatch(args, &snapshot)?;
    let mut snapshot = snapshot;
    snapshot.notes.extend(naming.note);
    snapshot.notes.extend(notes);
    Ok(crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis)))
}

/// Parses an RFC 3339 time into Unix ms.
pub fn parse_at(s: &str) -> Result<i64, CliError> {
    crate::config::parse_time(s).map_err(|e| CliError::usage(format!("--at {e}")))
}

fn read_text(path: &Path, what: &str) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("{}: cannot read the {what}: {e}", path.display())))
}

/// The `--plan` file, parsed.
fn read_plan(args: &DiagnoseArgs) -> Result<Option<JobGraph>, CliError> {
    let Some(path) = &args.plan else { return Ok(None) };
    JobGraph::from_plan_json(&read_text(path, "job plan")?)
        .map(Some)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
}

/// The `--checkpoint-config` file, parsed.
fn read_checkpoint_config(args: &DiagnoseArgs) -> Result<Option<CheckpointConfig>, CliError> {
    let Some(path) = &args.checkpoint_config else { return Ok(None) };
    CheckpointConfig::from_rest_json(&read_text(path, "checkpoint configuration")?).map(Some).ok_or_else(|| {
        CliError::usage(format!(
            "{}: not a Flink checkpoint configuration (expected `interval` and `timeout` from /jobs/:id/checkpoints/config)",
            path.display()
        ))
    })
}

/// The `--exceptions` file, parsed.
fn read_exceptions(args: &DiagnoseArgs) -> Result<Option<JobExceptions>, CliError> {
    let Some(path) = &args.exceptions else { return Ok(None) };
    JobExceptions::from_rest_json(&read_text(path, "exception history")?).map(Some).map_err(|e| {
        CliError::usage(format!(
            "{}: not a Flink exception history (expected the answer of /jobs/:id/exceptions): {e}",
            path.display()
        ))
    })
}

/// The `--rescales` file, parsed.
fn read_rescales(args: &DiagnoseArgs) -> Result<Option<RescaleHistory>, CliError> {
    let Some(path) = &args.rescales else { return Ok(None) };
    RescaleHistory::from_rest_json(&read_text(path, "rescale history")?).map(Some).map_err(|e| {
        CliError::usage(format!(
            "{}: not a Flink rescale history (expected the answer of /jobs/:id/rescales/history): {e}",
            path.display()
        ))
    })
}

/// The verdict with the profile of the `--flamegraph` file, when the verdict wants one
/// ([`crate::model::flamegraph::wants_profile`]); a note when it does not or the file has
/// no samples. A file that is not a flame graph is bad input.
pub fn with_recorded_profile(mut verdict: Verdict, args: &DiagnoseArgs) -> Result<Verdict, CliError> {
    use crate::model::flamegraph::{FlameGraph, parse, profile, wants_profile};
    let Some(FlameGraphFile { kind, path }) = &args.flamegraph else { return Ok(verdict) };
    let graph =
        parse(&read_text(path, "flame graph")?).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    let Some(culprit) = wants_profile(&verdict) else {
        verdict.notes.push(
            "the --flamegraph file was not used: a profile is for an unexplained finding or a culprit of chained operators"
                .into(),
        );
        return Ok(verdict);
    };
    verdict.profile = profile(&culprit.clone(), *kind, &graph, crate::model::verdict::rfc3339);
    if verdict.profile.is_none() {
        let why = match graph {
            FlameGraph::Disabled => "Flink had flame graphs disabled",
            FlameGraph::Terminated => "the vertex's tasks were no longer running",
            _ => "it has no samples",
        };
        verdict.notes.push(format!("the --flamegraph file gives no profile: {why}"));
    }
    Ok(verdict)
}

/// A `--plan` the user gave that belongs to another job is bad input, not a note.
fn refuse_plan_mismatch(args: &DiagnoseArgs, snapshot: &crate::model::snapshot::Snapshot) -> Result<(), CliError> {
    match (&args.plan, &snapshot.plan_mismatch) {
        (Some(path), Some(why)) => Err(CliError::usage(format!("{}: {why}", path.display()))),
        _ => Ok(()),
    }
}

/// Reads one metrics file into `store` (`-`: standard input); samples without a
/// timestamp get `stamp`. A JSON file (a plan given in the wrong place) says so.
fn read_metrics(
    store: &mut SeriesStore,
    path: &Path,
    stamp: i64,
    flag: &str,
) -> Result<crate::collect::exposition::ReadSummary, CliError> {
    let read = if path.as_os_str() == "-" {
        store.read_from(std::io::stdin().lock(), "stdin", Some(stamp))
    } else {
        store.read_path(path, Some(stamp))
    };
    read.map_err(|e| {
        if e.json {
            CliError::usage(format!(
                "{e}; {flag} takes metrics: did you mean --plan {} (a job plan) or --checkpoint-config?",
                path.display()
            ))
        } else {
            CliError::usage(e.to_string())
        }
    })
}

/// `culprit diagnose` over files. `now_ms` stamps scrape dumps without --at.
pub fn diagnose_command(args: &DiagnoseArgs, now_ms: i64) -> Result<Verdict, CliError> {
    let config = load_config(args.config.as_deref())?;
    let at_ms = args.at.as_deref().map(parse_at).transpose()?;
    let window_ms = parse_window(args.window.as_deref())?;
    check_job(args.job.as_deref())?;
    let graph = read_plan(args)?;
    let checkpoint_config = read_checkpoint_config(args)?;

    let mut store = SeriesStore::new();
    let stamp = at_ms.unwrap_or(now_ms);
    match (&args.recording, args.metrics.as_slice()) {
        (Some(path), _) => {
            read_metrics(&mut store, path, stamp, "--recording")?;
        }
        (None, []) => {
            return Err(CliError::usage(
                "give the metrics to diagnose: --recording FILE (a recording) or --metrics FILE (scrape dumps)",
            ));
        }
        (None, files) => {
            for path in files {
                read_metrics(&mut store, path, stamp, "--metrics")?;
            }
        }
    }
    store.finish();
    let source = args.recording.as_ref().or(args.metrics.first()).map(|p| p.display().to_string()).unwrap_or_default();
    let naming = naming_in_store(&store, &config.metrics).map_err(|m| CliError::usage(format!("{source}: {m}")))?;
    let mut request = DiagnosisRequest { job: args.job.clone(), at_ms, window_ms, labels: parse_labels(&args.label)? };
    let (graph, lookup, plan_notes) = configured_plan_offline(&store, &config, &naming.catalog, &mut request, graph);
    let snapshot = block_on(crate::collect::collector::collect_after(
        &store,
        CollectInput {
            request: &request,
            graph,
            checkpoint_config,
            exceptions: read_exceptions(args)?,
            rescales: read_rescales(args)?,
            config: &config,
            catalog: &naming.catalog,
        },
        lookup,
    ))
    .map_err(|e| CliError::usage(format!("{source}: {e}{}", naming.hint_after_error())))?;
    refuse_plan_mismatch(args, &snapshot)?;
    let mut snapshot = snapshot;
    snapshot.notes.extend(plan_notes);
    snapshot.notes.extend(naming.note);
    snapshot.notes.extend(untimed_notes(store.untimed(), at_ms, stamp));
    warn_unmatched_operator_kinds(&snapshot, &config);
    Ok(crate::render::words::verdict(&diagnose(&snapshot, &config.diagnosis)))
}

/// Without `--plan`, the configured plan (`[flink.plans]` of `--config`) of the job the
/// request names, found as a live diagnosis finds it
/// ([`crate::service::pipeline::configured_plan`]): the graph, the job lookup it asked (for
/// round 1 to reuse) and notes; `request.job` becomes the run's id when a plan was looked
/// up.
fn configured_plan_offline(
    store: &SeriesStore,
    config: &Config,
    catalog: &crate::model::catalog::MetricCatalog,
    request: &mut DiagnosisRequest,
    graph: Option<JobGraph>,
) -> (Option<JobGraph>, Option<crate::collect::collector::JobLookup>, Vec<String>) {
    use crate::collect::collector::MetricSource;
    let at = request.at_ms.or_else(|| store.latest_ms());
    let (Some(at), None, false) = (at, &graph, config.flink.plans.is_empty()) else { return (graph, None, Vec::new()) };
    let d = &config.diagnosis;
    let lookup = block_on(crate::collect::collector::JobLookup::find(
        store,
        catalog,
        at,
        d.trend_lookback.as_ms(),
        d.step.as_ms(),
    ));
    match crate::service::pipeline::configured_plan(&config.flink.plans, &lookup, request.job.as_deref()) {
        Some((run_id, plan, notes)) => {
            request.job = run_id.or(request.job.take());
            (plan.ok(), Some(lookup), notes)
        }
        None => (None, Some(lookup), Vec::new()),
    }
}

/// The metric names to read a store with: the configured ones, or another naming scheme's
/// when the store holds those instead ([`crate::collect::naming`]).
struct StoreNaming {
    catalog: crate::model::catalog::MetricCatalog,
    /// Says that another scheme was used.
    note: Option<String>,
    /// Says that the store holds Flink metrics under names no scheme maps, for an error.
    hint: Option<String>,
}

impl StoreNaming {
    fn hint_after_error(&self) -> String {
        self.hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default()
    }
}

fn naming_in_store(
    store: &SeriesStore,
    configured: &crate::model::catalog::MetricCatalog,
) -> Result<StoreNaming, String> {
    use crate::collect::naming::Detection;
    let keep = |hint| StoreNaming { catalog: configured.clone(), note: None, hint };
    match crate::collect::naming::detect_in_store(store, configured) {
        Detection::Configured => Ok(keep(None)),
        Detection::Absent { hint } => Ok(keep(hint)),
        Detection::Other { catalog, note } => Ok(StoreNaming { catalog: *catalog, note: Some(note), hint: None }),
        Detection::Ambiguous(message) => Err(message),
    }
}

/// What became of samples without a timestamp: in a file with timestamps they were taken at
/// its newest one; in a file without any, at `stamp` (--at, else now, which is worth a note).
fn untimed_notes(untimed: crate::collect::store::UntimedStamps, at_ms: Option<i64>, stamp: i64) -> Vec<String> {
    let samples = |n: u64| if n == 1 { "1 sample carries".to_string() } else { format!("{n} samples carry") };
    let mut notes = Vec::new();
    if let (n @ 1.., Some(newest)) = (untimed.at_newest, untimed.newest_ms) {
        notes.push(format!(
            "{} no timestamp in a file whose other samples do: taken at the file's newest timestamp ({})",
            samples(n),
            crate::model::verdict::rfc3339(newest)
        ));
    }
    match (untimed.at_default, at_ms) {
        (0, _) => {}
        // Ages (time since the last checkpoint, Kafka lag age) are measured from this stamp.
        (n, None) => notes.push(format!(
            "{} no timestamp: taken as sampled now ({}); give --at with the time of the scrape if it was earlier",
            samples(n),
            crate::model::verdict::rfc3339(stamp)
        )),
        // The user said when the scrape was: nothing to add.
        (_, Some(_)) => {}
    }
    notes
}

/// `[diagnosis.operator_kinds]` keys that match no operator of the job diagnosed: a typo or
/// a stale name, said on stderr (the verdict is about the job, not the configuration).
fn warn_unmatched_operator_kinds(snapshot: &crate::model::snapshot::Snapshot, config: &Config) {
    if config.diagnosis.operator_kinds.is_empty() {
        return;
    }
    let signals = crate::diagnose::signals::JobSignals::derive(snapshot, &config.diagnosis);
    for key in crate::diagnose::signals::unmatched_operator_kinds(&config.diagnosis, &signals) {
        eprintln!(
            "warning: [diagnosis.operator_kinds] key {key:?} matches no vertex or operator of job {} (names as Flink shows them or as the reporter writes them)",
            snapshot.job.name
        );
    }
}
