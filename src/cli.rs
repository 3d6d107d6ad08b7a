//! The `culprit` command line: parsing, the documented exit codes, and the wiring of
//! inputs (recordings, scrape dumps, plans) to the collector, the diagnosis and a renderer.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::collect::catalog::MetricCatalog;
use crate::collect::collector::{CollectInput, collect};
use crate::collect::snapshot::CheckpointConfig;
use crate::collect::store::SeriesStore;
use crate::config::{Config, Millis};
use crate::diagnose::diagnose;
use crate::diagnose::graph::JobGraph;
use crate::render::{Format, render};
use crate::request::DiagnosisRequest;
use crate::verdict::Verdict;

/// Exit code: a verdict was produced, whatever it says.
pub const EXIT_OK: i32 = 0;
/// Exit code: an unexpected internal failure.
pub const EXIT_INTERNAL: i32 = 1;
/// Exit code: bad usage or bad input (the message names the file and line).
pub const EXIT_USAGE: i32 = 2;

const EXIT_CODES: &str = "Exit codes:\n  0  a verdict was produced (whatever it says)\n  1  internal error\n  2  bad usage or bad input; the message names the file and line";

/// Finds the Apache Flink operator that really slows a backpressured job, why, and the fix.
#[derive(Debug, Parser)]
#[command(name = "culprit", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose one job from a recording or scrape dumps and its job plan.
    #[command(after_help = EXIT_CODES)]
    Diagnose(DiagnoseArgs),
    /// Replay the real Flink recordings bundled with culprit and print each verdict.
    /// Needs no network, Prometheus or Flink.
    #[command(after_help = EXIT_CODES)]
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// A recording: Prometheus text exposition or OpenMetrics with timestamps, plain or
    /// gzip (e.g. exported from Prometheus, or written by `culprit record`).
    #[arg(long, value_name = "FILE", conflicts_with = "metrics")]
    pub recording: Option<PathBuf>,
    /// A plain scrape dump of a Flink reporter endpoint (no timestamps); repeat for the
    /// JobManager and every TaskManager. Samples are taken to be from --at, else now.
    #[arg(long, value_name = "FILE")]
    pub metrics: Vec<PathBuf>,
    /// The job graph: the JSON of Flink REST `GET /jobs/:id/plan` (with or without the
    /// `{"plan": …}` wrapper). Without it, culprit ranks busy vertices that are not
    /// backpressured and lowers its confidence.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// The job: its name as Flink shows it (`bp-lab-slow-sink`), as the reporter writes it
    /// (`bp_lab_slow_sink`), or its job id. Default: the plan's job, else the only job. When
    /// several runs share the name, the newest job id wins and the verdict says so.
    #[arg(long, value_name = "NAME_OR_ID")]
    pub job: Option<String>,
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
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
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
}

/// Runs a parsed command, writing the result to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Diagnose(args) => {
            let verdict = diagnose_command(&args, now_ms())?;
            write_out(out, &render(&verdict, args.format))
        }
        Command::Demo(args) => {
            for (i, capture) in crate::demo::CAPTURES.iter().enumerate() {
                let verdict = crate::demo::verdict(capture).map_err(|e| CliError {
                    code: EXIT_INTERNAL,
                    message: format!("bundled capture {}: {e}", capture.name),
                })?;
                let mut text = String::new();
                if args.format != Format::Json {
                    if i > 0 {
                        text.push('\n');
                    }
                    text.push_str(&format!("━━ {} — {}\n", capture.name, capture.what));
                }
                text.push_str(&render(&verdict, args.format));
                write_out(out, &text)?;
            }
            Ok(())
        }
    }
}

fn write_out(out: &mut dyn Write, s: &str) -> Result<(), CliError> {
    match out.write_all(s.as_bytes()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is not an error of ours.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError { code: EXIT_INTERNAL, message: format!("cannot write the output: {e}") }),
    }
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Parses an RFC 3339 time into Unix ms.
pub fn parse_at(s: &str) -> Result<i64, CliError> {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| CliError::usage(format!("--at `{s}` is not an RFC 3339 time such as 2026-11-29T10:36:00Z")))
}

fn read_text(path: &Path, what: &str) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("{}: cannot read the {what}: {e}", path.display())))
}

/// `culprit diagnose` over files. `now_ms` stamps scrape dumps without --at.
pub fn diagnose_command(args: &DiagnoseArgs, now_ms: i64) -> Result<Verdict, CliError> {
    let config = match &args.config {
        Some(path) => Config::load(path).map_err(|e| CliError::usage(e.to_string()))?,
        None => Config::default(),
    };
    let at_ms = args.at.as_deref().map(parse_at).transpose()?;
    let window_ms = args
        .window
        .as_deref()
        .map(|w| w.parse::<Millis>().map_err(|e| CliError::usage(format!("--window {e}"))))
        .transpose()?
        .map(|m| m.as_ms());
    if window_ms.is_some_and(|w| w <= 0) {
        return Err(CliError::usage("--window must be longer than 0"));
    }
    let graph = match &args.plan {
        Some(path) => Some(
            JobGraph::from_plan_json(&read_text(path, "job plan")?)
                .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?,
        ),
        None => None,
    };
    let checkpoint_config = match &args.checkpoint_config {
        Some(path) => Some(CheckpointConfig::from_rest_json(&read_text(path, "checkpoint configuration")?).ok_or_else(|| {
            CliError::usage(format!(
                "{}: not a Flink checkpoint configuration (expected `interval` and `timeout` from /jobs/:id/checkpoints/config)",
                path.display()
            ))
        })?),
        None => None,
    };

    let mut store = SeriesStore::new();
    let stamp = at_ms.unwrap_or(now_ms);
    match (&args.recording, args.metrics.as_slice()) {
        (Some(path), _) => {
            store.read_path(path, Some(stamp)).map_err(|e| CliError::usage(e.to_string()))?;
        }
        (None, []) => {
            return Err(CliError::usage(
                "give the metrics to diagnose: --recording FILE (a recording) or --metrics FILE (scrape dumps)",
            ));
        }
        (None, files) => {
            for path in files {
                store.read_path(path, Some(stamp)).map_err(|e| CliError::usage(e.to_string()))?;
            }
        }
    }
    store.finish();
    let request = DiagnosisRequest { job: args.job.clone(), at_ms, window_ms };
    let catalog = MetricCatalog::default();
    let snapshot = block_on(collect(
        &store,
        CollectInput { request: &request, graph, checkpoint_config, config: &config, catalog: &catalog },
    ))
    .map_err(|e| {
        let source =
            args.recording.as_ref().or(args.metrics.first()).map(|p| p.display().to_string()).unwrap_or_default();
        CliError::usage(format!("{source}: {e}"))
    })?;
    Ok(diagnose(&snapshot, &config.diagnosis))
}

/// Drives a future that never waits on IO (the recording source answers at once).
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("an in-memory metric source never waits"),
    }
}
