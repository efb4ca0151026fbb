//! `tantivy-dedup dedup`: decisions for a JSON Lines file, no index.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tantivy_dedup::{Deduplicator, input};

use super::ConfigArgs;

#[derive(Args)]
pub struct DedupArgs {
    /// Articles as JSON Lines, plain or gzip-compressed; `-` reads standard input
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(args: DedupArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let mut dedup = Deduplicator::new(config)?;
    let reader = input::open(&args.file)?;

    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} documents  {per_sec}  {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut out = BufWriter::new(io::stdout().lock());
    let (mut decided, mut rejected) = (0u64, 0u64);
    let mut write_error = None;
    let start = Instant::now();
    dedup
        .run(reader, |line, result| {
            if write_error.is_some() {
                return;
            }
            match result {
                Ok(decision) => {
                    decided += 1;
                    let written = serde_json::to_writer(&mut out, &decision)
                        .map_err(io::Error::from)
                        .and_then(|()| out.write_all(b"\n"));
                    if let Err(error) = written {
                        write_error = Some(error);
                    }
                }
                Err(error) => {
                    rejected += 1;
                    progress
                        .suspend(|| eprintln!("{}:{line}: skipped: {error}", args.file.display()));
                }
            }
            progress.inc(1);
        })
        .with_context(|| format!("reading {}", args.file.display()))?;
    if let Some(error) = write_error.or_else(|| out.flush().err()) {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        if error.kind() == io::ErrorKind::BrokenPipe {
            return Ok(ExitCode::SUCCESS);
        }
        return Err(error).context("writing decisions");
    }
    progress.finish_and_clear();

    let seconds = start.elapsed().as_secs_f64();
    let stats = dedup.forest().stats();
    eprintln!(
        "dedup: {decided} documents, {rejected} skipped, {} clusters, {:.1} s, {:.0} documents/s",
        stats.roots,
        seconds,
        decided as f64 / seconds.max(1e-9),
    );
    Ok(if rejected > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
