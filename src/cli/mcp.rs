//! `culprit mcp`: the MCP server over stdio ([`crate::mcp`]).

use std::path::PathBuf;

use clap::Args;

use super::{CliError, load_config, runtime};

pub const MCP_EXIT_CODES: &str =
    "Exit codes:\n  0  the client closed the session\n  1  internal error\n  2  bad usage or bad configuration";

/// `culprit mcp`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("metrics").args(["config", "capture"]).multiple(true).required(true))]
pub struct McpArgs {
    /// The configuration (TOML): the `[prometheus]` to diagnose from, the Flink clusters,
    /// thresholds and the `[store]` whose verdicts the stored-verdict tools read.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Instead of Prometheus, a recording bundled with culprit (as `culprit demo` replays
    /// them: `slow-sink`, `hot-key`, …), offline; its last sample stands for "now".
    #[arg(long, value_name = "NAME")]
    pub capture: Option<String>,
}

/// Serves the MCP tools on stdin and stdout until the client closes the session.
pub fn run(args: McpArgs) -> Result<(), CliError> {
    let config = load_config(args.config.as_deref())?;
    super::logging::init(config.redactor());
    let capture = match args.capture.as_deref() {
        None => None,
        Some(name) => Some(crate::samples::captures::CAPTURES.iter().find(|c| c.name == name).ok_or_else(|| {
            let names: Vec<&str> = crate::samples::captures::CAPTURES.iter().map(|c| c.name).collect();
            CliError::usage(format!("--capture {name}: no bundled capture has that name ({})", names.join(", ")))
        })?),
    };
    runtime()?.block_on(async {
        let backend = crate::mcp::Backend::standalone(config, capture).map_err(CliError::usage)?;
        crate::mcp::serve_stdio(std::sync::Arc::new(backend))
            .await
            .map_err(|message| CliError { code: super::EXIT_INTERNAL, message })
    })
}
