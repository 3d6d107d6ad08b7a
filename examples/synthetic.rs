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

use std::fs::File;
use std::io::Write;
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
    /// Recording to write (OpenMetrics text); `-` is standard output.
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
    let out: Box<dyn Write> =
        if a.out.as_os_str() == "-" { Box::new(std::io::stdout().lock()) } else { Box::new(File::create(&a.out)?) };
    let written = match job.write_openmetrics(Counting { inner: out, bytes: 0 }) {
        Ok(w) => w.bytes,
        // A closed pipe (the reader gave up) is the reader's story to tell.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(e),
    };
    eprintln!("wrote {written} bytes to {} and {}", a.out.display(), a.plan_out.display());
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
