//! `culprit store`: the SQLite store's backup and the acknowledgement of losses a start
//! found in its files (PostgreSQL has its own tools: `pg_dump`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::{CliError, load_config, write_out};
use crate::service::store::sqlite_integrity;

pub const STORE_EXIT_CODES: &str = "Exit codes:\n  0  done\n  1  internal error\n  2  bad configuration, no SQLite store at store.path, or the store could not be read or written (the message says why)";

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy the SQLite store into one new, self-contained file, consistent while `serve`
    /// runs and writes (SQLite's `VACUUM INTO`: one read transaction; it never blocks
    /// serve). The copy is checked and its rows counted.
    #[command(after_help = STORE_EXIT_CODES)]
    Backup {
        /// The configuration (its `store.path` is backed up).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The new file to write (it must not exist).
        #[arg(value_name = "OUT")]
        out: PathBuf,
    },
    /// Acknowledge the losses a start found in the store's files (an empty or replaced
    /// database, a damaged, cut or missing WAL): they leave `/readyz` and the gauge
    /// `culprit_store_integrity_problems_unacknowledged`. Works while serve runs.
    #[command(after_help = STORE_EXIT_CODES)]
    Acknowledge {
        /// The configuration (its `store.path`).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

fn sqlite_path(config: &Path) -> Result<PathBuf, CliError> {
    let config = load_config(Some(config))?;
    if config.store.url.is_some() {
        return Err(CliError::usage(
            "store.url is set: the store is PostgreSQL; back it up with pg_dump (culprit store works on a SQLite store.path)",
        ));
    }
    Ok(config.store.path)
}

/// Runs `culprit store …`.
pub fn run(args: StoreArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let store_error = |e: crate::service::store::StoreError| CliError::usage(e.to_string());
    match args.command {
        StoreCommand::Backup { config, out: file } => {
            let path = sqlite_path(&config)?;
            let b = sqlite_integrity::backup(&path, &file).map_err(store_error)?;
            write_out(
                out,
                &format!(
                    "backed up {} into {} ({} bytes, one self-contained file): {} diagnoses waiting or running, {} notices waiting, {} verdicts\n",
                    path.display(),
                    file.display(),
                    b.bytes,
                    b.work,
                    b.outbox,
                    b.verdicts
                ),
            )
        }
        StoreCommand::Acknowledge { config } => {
            let path = sqlite_path(&config)?;
            let now = jiff::Timestamp::now().as_millisecond();
            let done = sqlite_integrity::acknowledge_at(&path, now).map_err(store_error)?;
            let mut text = match done.len() {
                0 => format!("{}: nothing to acknowledge\n", path.display()),
                n => format!("{}: acknowledged {n} problem(s):\n", path.display()),
            };
            for p in &done {
                text.push_str(&format!("  - {}\n", p.explain()));
            }
            write_out(out, &text)
        }
    }
}
