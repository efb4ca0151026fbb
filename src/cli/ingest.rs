//! `tantivy-dedup ingest`: articles into an index, with a progress bar and a summary.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tantivy_dedup::engine::{DedupIndex, RecoveryReport};
use tantivy_dedup::input;

use super::{ConfigArgs, StoreArgs, counted};

#[derive(Args)]
pub struct IngestArgs {
    /// Index directory; created with the settings of --config (or the defaults) when it is
    /// missing or empty; other files without an index's meta.json are refused
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Articles as JSON Lines, plain or gzip-compressed; `-` reads standard input
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Commit (make durable and searchable) every N documents, besides at the end
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    commit_every: u64,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

/// What `ingest` did.
#[derive(Serialize)]
struct Summary {
    index: PathBuf,
    documents: u64,
    duplicates: u64,
    clusters_started: u64,
    skipped: u64,
    retention_deleted: u64,
    seconds: f64,
    documents_per_second: f64,
    forest_nodes: usize,
    forest_roots: usize,
    recovered: RecoveryReport,
}

pub fn run(args: IngestArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load_if_given()?;
    // Before an index directory is created: a mistyped input should leave nothing behind.
    if let Some(missing) = args
        .files
        .iter()
        .find(|file| file.as_os_str() != "-" && !file.is_file())
    {
        bail!("{}: no such file", missing.display());
    }
    let mut index =
        DedupIndex::open_or_create_with_store(&args.index, config, args.store.shared()?)
            .with_context(|| format!("opening {}", args.index.display()))?;
    let recovered = index.recovery().clone();
    if recovered.replayed > 0 {
        eprintln!(
            "ingest: reopened {}: replayed {} into the forest in {:.2} s",
            args.index.display(),
            counted(recovered.replayed, "insert", "inserts"),
            recovered.elapsed.as_secs_f64()
        );
    }
    if recovered.mismatched_roots > 0 {
        eprintln!(
            "ingest: warning: {} another root than the replay gives; the index was written \
             with other settings (window?)",
            counted(recovered.mismatched_roots, "document has", "documents have")
        );
    }

    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} documents  {per_sec}  {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let start = Instant::now();
    let (mut documents, mut duplicates, mut skipped) = (0u64, 0u64, 0u64);
    for file in &args.files {
        progress.set_message(file.display().to_string());
        let reader = input::open(file)?;
        index.ingest(reader, file, Some(args.commit_every), |line, outcome| {
            progress.inc(1);
            match outcome {
                Ok(decision) => {
                    documents += 1;
                    duplicates += u64::from(decision.duplicate);
                }
                Err(error) => {
                    skipped += 1;
                    progress.suspend(|| eprintln!("{}:{line}: skipped: {error}", file.display()));
                }
            }
            ControlFlow::Continue(())
        })?;
    }
    progress.set_message("committing");
    let retention_deleted = index.commit()?;
    progress.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let forest = index.forest_stats();
    let summary = Summary {
        index: args.index.clone(),
        documents,
        duplicates,
        clusters_started: documents - duplicates,
        skipped,
        retention_deleted,
        seconds,
        documents_per_second: documents as f64 / seconds.max(1e-9),
        forest_nodes: forest.nodes,
        forest_roots: forest.roots,
        recovered,
    };
    index.close()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "ingest: indexed {} into {}: {} joined an earlier story, {} started one; \
             skipped {}; {:.1} s, {:.0} documents/s",
            counted(summary.documents, "document", "documents"),
            summary.index.display(),
            summary.duplicates,
            summary.clusters_started,
            summary.skipped,
            summary.seconds,
            summary.documents_per_second
        );
        if retention_deleted > 0 {
            println!(
                "ingest: retention deleted {}",
                counted(retention_deleted, "old document", "old documents")
            );
        }
        println!(
            "ingest: the forest holds {} in {} within the window",
            counted(summary.forest_nodes as u64, "fingerprint", "fingerprints"),
            counted(summary.forest_roots as u64, "cluster", "clusters")
        );
    }
    Ok(if skipped > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
