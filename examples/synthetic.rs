//! Writes a synthetic Flink job's recording and plan, for benchmarks and load tests:
//!
//! ```sh
//! cargo run --release --example synthetic -- --vertices 1000 --subtasks 128 --samples 60 \
//!     --out /tmp/job.om --plan-out /tmp/job-plan.json
//! /usr/bin/time -v target/release/culprit diagnose --recording /tmp/job.om --plan /tmp/job-plan.json
//! ```
//!
//! `--out -` writes the recording to standard output, so a recording larger than the disk
//! can be streamed into `culprit diagnose --recording -` (see `benches/recording.sh`).
//!
//! `--storm N --storm-dir DIR` writes a storm of N jobs instead ([`culprit::samples::storm`],
//! for `benches/storm.sh`): `DIR/storm.om` (every job's series), `DIR/plans/<job>.json` and
//! `DIR/jobs.json` (each job's id, name, cause, and the finding and culprit vertex its
//! verdict should have), the samples `--interval-ms` apart from `--start-ms`.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use culprit::samples::storm::{StormJob, storm, write_openmetrics};
use culprit::samples::synthetic::SyntheticJob;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    vertices: usize,
    #[arg(long, default_value_t = 128)]
    subtasks: usize,
    #[arg(long, default_value_t = 60)]
    samples: usize,
    /// Recording to write (OpenMetrics text); `-` is standard output.
    #[arg(long, required_unless_present = "storm")]
    out: Option<PathBuf>,
    /// Plan JSON to write.
    #[arg(long, required_unless_present = "storm")]
    plan_out: Option<PathBuf>,
    /// Writes a storm of this many jobs into --storm-dir instead of one job.
    #[arg(long, requires = "storm_dir", conflicts_with_all = ["out", "plan_out"])]
    storm: Option<usize>,
    #[arg(long)]
    storm_dir: Option<PathBuf>,
    /// Time of a storm's first sample, Unix ms.
    #[arg(long, default_value_t = 1_795_000_000_000)]
    start_ms: i64,
    /// A storm's scrape interval, ms.
    #[arg(long, default_value_t = 15_000)]
    interval_ms: i64,
}

fn main() -> std::io::Result<()> {
    let a = Args::parse();
    if let (Some(n), Some(dir)) = (a.storm, &a.storm_dir) {
        return write_storm(&storm(n, a.start_ms, a.samples, a.interval_ms), dir);
    }
    let (Some(out), Some(plan_out)) = (a.out, a.plan_out) else { unreachable!("clap requires both") };
    let job = SyntheticJob {
        vertices: a.vertices,
        subtasks: a.subtasks,
        samples: a.samples,
        start_ms: 1_795_000_000_000,
        job: 0,
    };
    std::fs::write(&plan_out, job.plan_json())?;
    let writer: Box<dyn Write> =
        if out.as_os_str() == "-" { Box::new(std::io::stdout().lock()) } else { Box::new(File::create(&out)?) };
    let written = match job.write_openmetrics(Counting { inner: writer, bytes: 0 }) {
        Ok(w) => w.bytes,
        // A closed pipe (the reader gave up) is the reader's story to tell.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(e),
    };
    eprintln!("wrote {written} bytes to {} and {}", out.display(), plan_out.display());
    Ok(())
}

/// The storm's recording, plans and manifest in `dir`.
fn write_storm(jobs: &[StormJob], dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("plans"))?;
    let recording = dir.join("storm.om");
    let written =
        write_openmetrics(jobs, Counting { inner: std::io::BufWriter::new(File::create(&recording)?), bytes: 0 })?;
    let mut manifest = Vec::new();
    for job in jobs {
        let plan = dir.join("plans").join(format!("{}.json", job.job_name()));
        std::fs::write(&plan, job.plan_json())?;
        manifest.push(serde_json::json!({
            "index": job.index,
            "job_id": job.job_id(),
            "job_name": job.job_name(),
            "plan": plan,
            "cause": job.cause.label(),
            "finding": job.cause.finding(),
            "culprit_vertex_id": job.vertex_id(job.culprit()),
            "culprit_vertex_name": job.vertex_name(job.culprit()),
            "vertices": job.vertices,
            "subtasks": job.subtasks,
        }));
    }
    std::fs::write(dir.join("jobs.json"), serde_json::to_string_pretty(&manifest)?)?;
    eprintln!("wrote {} jobs, {} bytes to {}", jobs.len(), written.bytes, recording.display());
    Ok(())
}

/// Counts the bytes of the recording (benches/recording.sh reports throughput from it).
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
