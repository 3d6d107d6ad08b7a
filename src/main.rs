//! The `culprit` binary: a thin shim over the library.

use clap::Parser;

/// mimalloc, not glibc's malloc: webhook intake spent 13 % of its CPU in malloc/free
/// (perf, `examples/webhook_bench.rs`); the bench uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = culprit::cli::Cli::parse();
    // Not locked for the whole run: `culprit mcp` writes the protocol to stdout from the
    // runtime's threads.
    let mut out = std::io::stdout();
    match culprit::cli::run(cli, &mut out) {
        Ok(()) => std::process::exit(culprit::cli::EXIT_OK),
        Err(e) => {
            // Messages quote names from alerts and backends: no control character reaches
            // the terminal raw.
            eprintln!("culprit: {}", culprit::cli::logging::escape_controls(&e.message));
            std::process::exit(e.code);
        }
    }
}
