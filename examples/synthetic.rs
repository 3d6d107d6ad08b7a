//! Writes a synthetic Flink job's recording and plan, for benchmarks and load tests:
//!
//! ```sh
//! cargo run --release --example synthetic -- --vertices 1000 --subtasks 128 --samples 60 \
//!     --out /tmp/job.om --plan-out /tmp/job-plan.json
//! /usr/bin/time -v target/release/culprit diagnose --recording /tmp/job.om --plan /tmp/job-plan.json
//! ```

use std::path::PathBuf;

use clap::Parser;
use culprit::samples::synthetic::SyntheticJob;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    vertices: usize,
    #[arg(long, default_value_t = 128)]
    subtasks: usize,
    #[arg(long, default_value_t = 60)]
    samples: usize,
    /// Recording to write (OpenMetrics text).
    #[arg(long)]
    out: PathBuf,
    /// Plan JSON to write.
    #[arg(long)]
    plan_out: PathBuf,
}

fn main() -> std::io::Result<()> {
    let a = Args::parse();
    let job = SyntheticJob {
        vertices: a.vertices,
        subtasks: a.subtasks,
        samples: a.samples,
        start_ms: 1_795_000_000_000,
        job: 0,
    };
    std::fs::write(&a.plan_out, job.plan_json())?;
    job.write_openmetrics(std::fs::File::create(&a.out)?)?;
    eprintln!("wrote {} and {}", a.out.display(), a.plan_out.display());
    Ok(())
}
