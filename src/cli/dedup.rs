//! `tantivy-dedup dedup`: decisions for a JSON Lines file, no index.

use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tantivy_dedup::article::ArticleReader;
use tantivy_dedup::forest::{Pipeline, SharedForest};
use tantivy_dedup::{Deduplicator, input};

use super::{ConfigArgs, InFlightArgs, StoreArgs, counted};

#[derive(Args)]
pub struct DedupArgs {
    /// Articles as JSON Lines, plain or gzip-compressed; `-` reads standard input
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    in_flight: InFlightArgs,
}

pub fn run(args: DedupArgs) -> anyhow::Result<ExitCode> {
    let settings = args.config.load_if_given()?.unwrap_or_default();
    let articles = ArticleReader::for_config(&settings);
    let config = settings.dedup;
    let mut dedup = match args.store.address()? {
        Some(address) if args.in_flight.in_flight > 1 => {
            let stores = address
                .connect_several(&config, args.in_flight.in_flight.into())
                .with_context(|| format!("connecting to {address}"))?;
            Deduplicator::with_pipeline(config, Pipeline::new(stores)?)?
        }
        Some(address) => {
            let store = address
                .connect(&config)
                .with_context(|| format!("connecting to {address}"))?;
            Deduplicator::with_store(config, store)?
        }
        // Sketches off the heap: a large input's forest would otherwise hold about 800 bytes
        // a node more.
        None => Deduplicator::with_sketches_in(config, &std::env::temp_dir())?,
    };
    let reader = input::open(&args.file)?;

    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} documents  {per_sec}  {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut out = BufWriter::new(io::stdout().lock());
    let (mut decided, mut rejected, mut clusters) = (0u64, 0u64, 0u64);
    let mut write_error = None;
    let start = Instant::now();
    let read = dedup.run(reader, &articles, |line, result| {
        progress.inc(1);
        match result {
            Ok(decision) => {
                decided += 1;
                clusters += u64::from(!decision.duplicate);
                let written = serde_json::to_writer(&mut out, &decision)
                    .map_err(io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                if let Err(error) = written {
                    write_error = Some(error);
                    return ControlFlow::Break(());
                }
            }
            Err(error) => {
                rejected += 1;
                progress.suspend(|| eprintln!("{}:{line}: skipped: {error}", args.file.display()));
            }
        }
        ControlFlow::Continue(())
    });
    progress.finish_and_clear();
    if let Some(error) = write_error.or_else(|| out.flush().err()) {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        if error.kind() == io::ErrorKind::BrokenPipe {
            return Ok(ExitCode::SUCCESS);
        }
        return Err(error).context("writing decisions");
    }
    read.with_context(|| {
        format!(
            "reading {} (the decisions above were written)",
            args.file.display()
        )
    })?;

    let seconds = start.elapsed().as_secs_f64();
    eprintln!(
        "dedup: {}, {rejected} skipped, {} started, {:.1} s, {:.0} documents/s",
        counted(decided, "document", "documents"),
        counted(clusters, "cluster", "clusters"),
        seconds,
        decided as f64 / seconds.max(1e-9),
    );
    Ok(if rejected > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
