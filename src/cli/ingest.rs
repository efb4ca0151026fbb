//! `tantivy-dedup ingest`: articles into an index, with a progress bar and a summary.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tantivy_dedup::config::format_duration;
use tantivy_dedup::engine::{DedupIndex, RecoveryReport};
use tantivy_dedup::input;
use tantivy_dedup::{Change, Error};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::{ConfigArgs, InFlightArgs, StoreArgs, counted};

#[derive(Args)]
pub struct IngestArgs {
    /// Index directory; created with the settings of --config (or the defaults) when it is
    /// missing or empty; other files without an index's meta.json are refused
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Articles as JSON Lines or a JSON array of objects, plain or gzip-compressed; `-` reads
    /// standard input
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Commit (make durable and searchable) every N documents, besides at the end (and on
    /// Ctrl-C)
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    commit_every: u64,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    in_flight: InFlightArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

/// What `ingest` did.
#[derive(Serialize)]
struct Summary {
    index: PathBuf,
    /// Documents written: added, or replacing the document with their id.
    documents: u64,
    /// Of those, the ones that joined an earlier story.
    duplicates: u64,
    /// Of those, the ones that started a story (`documents - duplicates`).
    clusters_started: u64,
    /// Of `documents`, the ones that replaced an earlier version of their id.
    replaced: u64,
    /// Articles equal in every field to the document already indexed under their id: nothing
    /// was done (not counted in `documents`).
    unchanged: u64,
    skipped: u64,
    retention_deleted: u64,
    seconds: f64,
    documents_per_second: f64,
    /// Live documents in the index after the run, as `stats` counts them.
    index_documents: u64,
    /// Clusters in the index after the run, as `stats` counts them (distinct roots of the live
    /// documents), and before it.
    index_clusters: u64,
    index_clusters_before: u64,
    /// The forest: what was seen within the window (with `--store`, this process's share).
    forest_nodes: usize,
    forest_roots: usize,
    /// Nodes that left the forest because the window passed them by (since the index was
    /// opened, its replay included); their documents stay in the index.
    forest_expired: u64,
    window_seconds: u64,
    recovered: RecoveryReport,
    /// Where a Ctrl-C or SIGTERM stopped the run (absent when it ran to the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted: Option<Interruption>,
    /// The files that could not be read to their end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<Unreadable>,
}

/// A file that could not be read to its end: the lines up to `line` were placed and
/// committed, the rest of the file was not read.
#[derive(Serialize)]
struct Unreadable {
    file: PathBuf,
    /// The last line read, from 1; 0 when none could be.
    line: u64,
    error: String,
}

/// Where an interrupted run stopped: everything up to this line was placed and committed.
#[derive(Serialize)]
struct Interruption {
    file: PathBuf,
    /// The last line handled, from 1; 0 when the file was not started.
    line: u64,
}

/// The exit status of a run stopped by Ctrl-C or SIGTERM, as a shell reports a process killed
/// by SIGINT (128 + 2), so that scripts see that it did not finish.
const INTERRUPTED: u8 = 130;

/// Counts of one run, per kind of outcome.
#[derive(Default)]
struct Counts {
    documents: u64,
    duplicates: u64,
    replaced: u64,
    unchanged: u64,
    skipped: u64,
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
    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} documents  {per_sec}  {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    // From before the index is opened, so that a Ctrl-C during the replay also ends cleanly.
    let interrupted = watch_signals(progress.clone())?;
    let mut index = DedupIndex::open_or_create_with_store(
        &args.index,
        config,
        args.store.shared()?,
        args.in_flight.in_flight.into(),
    )
    .with_context(|| format!("opening {}", args.index.display()))?;
    let recovered = index.recovery().clone();
    if let Some(why) = &recovered.checkpoint_refused {
        eprintln!(
            "ingest: warning: the forest checkpoint was not used ({why}); replaying every insert"
        );
    }
    let took = recovered.elapsed.as_secs_f64();
    let index_name = args.index.display();
    match recovered.checkpoint_sequence {
        Some(from) => eprintln!(
            "ingest: reopened {index_name}: loaded the forest's checkpoint of {} and replayed {} \
             after it in {took:.2} s",
            counted(from, "insert", "inserts"),
            counted(recovered.replayed, "insert", "inserts"),
        ),
        None if recovered.replayed > 0 => eprintln!(
            "ingest: reopened {index_name}: replayed {} into the forest in {took:.2} s",
            counted(recovered.replayed, "insert", "inserts"),
        ),
        None => {}
    }
    if recovered.pruned_inserts > 0 {
        eprintln!(
            "ingest: warning: the index no longer records {} (their tombstones were pruned \
             after a checkpoint held them) and that checkpoint was not used: the forest is \
             close to, not the same as, the one the writer had",
            counted(recovered.pruned_inserts, "insert", "inserts"),
        );
    }
    if recovered.mismatched_roots > 0 {
        let why = if recovered.pruned_inserts > 0 {
            "the replay missed the pruned inserts"
        } else {
            "the index was written with other settings (window?)"
        };
        eprintln!(
            "ingest: warning: {} another root than the replay gives; {why}",
            counted(recovered.mismatched_roots, "document has", "documents have")
        );
    }
    let clusters_before = index.searcher().stats()?.clusters;

    let start = Instant::now();
    let mut counts = Counts::default();
    let mut stopped = None;
    let mut unreadable = Vec::new();
    for file in &args.files {
        if interrupted.load(Ordering::SeqCst) {
            stopped = Some(Interruption {
                file: file.clone(),
                line: 0,
            });
            break;
        }
        progress.set_message(file.display().to_string());
        let reader = input::open(file)?;
        let mut last_line = 0;
        let ingested = index.ingest(reader, file, Some(args.commit_every), |line, outcome| {
            progress.inc(1);
            last_line = line;
            match outcome {
                Ok(decision) => match decision.change {
                    Change::Unchanged => counts.unchanged += 1,
                    change => {
                        counts.documents += 1;
                        counts.duplicates += u64::from(decision.duplicate);
                        counts.replaced += u64::from(change == Change::Replaced);
                    }
                },
                Err(error) => {
                    counts.skipped += 1;
                    progress.suspend(|| eprintln!("{}:{line}: skipped: {error}", file.display()));
                }
            }
            // Checked after the line is counted: what was placed up to here is committed below.
            if interrupted.load(Ordering::SeqCst) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        let coverage = match ingested {
            Ok(coverage) => coverage,
            // A file that cannot be read to its end (cut short, a bad sector, a broken gzip
            // stream): what was read before is placed and gets committed below with the rest;
            // the other files are still read.
            Err(Error::Io { path, source }) if path == *file => {
                unreadable.push(Unreadable {
                    file: file.clone(),
                    line: last_line,
                    error: source.to_string(),
                });
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if let Some(warning) = coverage.warning(index.article_reader().time_key()) {
            progress.suspend(|| eprintln!("{}: warning: {warning}", file.display()));
        }
        if interrupted.load(Ordering::SeqCst) {
            stopped = Some(Interruption {
                file: file.clone(),
                line: last_line,
            });
            break;
        }
    }
    progress.set_message("committing");
    let retention_deleted = index.commit()?;
    progress.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let forest = index.forest_stats();
    let after = index.searcher().stats()?;
    let summary = Summary {
        index: args.index.clone(),
        documents: counts.documents,
        duplicates: counts.duplicates,
        clusters_started: counts.documents - counts.duplicates,
        replaced: counts.replaced,
        unchanged: counts.unchanged,
        skipped: counts.skipped,
        retention_deleted,
        seconds,
        documents_per_second: counts.documents as f64 / seconds.max(1e-9),
        index_documents: after.documents,
        index_clusters: after.clusters,
        index_clusters_before: clusters_before,
        forest_nodes: forest.nodes,
        forest_roots: forest.roots,
        forest_expired: forest.expired,
        window_seconds: index.config().dedup.window_seconds(),
        recovered,
        interrupted: stopped,
        unreadable,
    };
    // Waits for merges, so that no file of a merge in progress is left behind.
    index.close()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary, args.store.store.is_some());
    }
    if let Some(stop) = &summary.interrupted {
        eprintln!("ingest: {}", interruption_message(&summary, stop));
        return Ok(ExitCode::from(INTERRUPTED));
    }
    for file in &summary.unreadable {
        eprintln!(
            "ingest: {}: reading failed after {} ({}): they are committed, the rest of the \
             file was not read; ingest the repaired file again (documents already indexed as \
             they are count as unchanged)",
            file.file.display(),
            counted(file.line, "line", "lines"),
            file.error
        );
    }
    Ok(if summary.skipped > 0 || !summary.unreadable.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The summary as text: what this run did, what the index holds now (the numbers `stats`
/// prints), and what the forest holds.
fn print_summary(summary: &Summary, shared: bool) {
    println!(
        "ingest: indexed {} into {}: {} joined an earlier story, {} started one, {} replaced \
         an earlier version of their id; {} unchanged (already indexed as they are); skipped \
         {}; {:.1} s, {:.0} documents/s",
        counted(summary.documents, "document", "documents"),
        summary.index.display(),
        summary.duplicates,
        summary.clusters_started,
        summary.replaced,
        summary.unchanged,
        summary.skipped,
        summary.seconds,
        summary.documents_per_second
    );
    if summary.retention_deleted > 0 {
        println!(
            "ingest: retention deleted {}",
            counted(summary.retention_deleted, "old document", "old documents")
        );
    }
    println!("ingest: {}", index_line(summary, shared));
    let window = format_duration(std::time::Duration::from_secs(summary.window_seconds));
    let (nodes, roots) = (summary.forest_nodes as u64, summary.forest_roots as u64);
    if shared {
        println!(
            "ingest: in the shared forest, this process created {} and started {} still \
             within the window ({window})",
            counted(nodes, "fingerprint", "fingerprints"),
            counted(roots, "cluster", "clusters")
        );
    } else {
        let expired = match summary.forest_expired {
            0 => String::new(),
            expired => format!(
                "; {} expired from it, and their documents stay searchable in the index",
                counted(expired, "older fingerprint", "older fingerprints")
            ),
        };
        println!(
            "ingest: the forest holds {} in {} seen within the last {window} (the \
             window){expired}",
            counted(nodes, "fingerprint", "fingerprints"),
            counted(roots, "cluster", "clusters")
        );
    }
}

/// What the index holds after the run, as `stats` counts it, and why its clusters did not grow
/// by the stories started when they did not (`shared`: the forest is shared with other
/// writers, which start stories of their own).
fn index_line(summary: &Summary, shared: bool) -> String {
    let (before, after) = (summary.index_clusters_before, summary.index_clusters);
    let change = if after >= before {
        format!("{} more", after - before)
    } else {
        format!("{} fewer", before - after)
    };
    let mut line = format!(
        "the index holds {} in {} (as `stats` counts them), {change} than before",
        counted(summary.index_documents, "document", "documents"),
        counted(after, "cluster", "clusters")
    );
    let expected = before + summary.clusters_started;
    if after < expected {
        line.push_str(&format!(
            "; {} fewer than the stories started: replacements and retention remove clusters \
             left without documents",
            expected - after
        ));
    } else if after > expected {
        let why = if shared {
            "documents joined stories that other writers of the shared store started (their \
             first documents are in other indexes)"
        } else {
            "documents joined stories whose earlier documents were all replaced or deleted"
        };
        line.push_str(&format!(
            "; {} more than the stories started: {why}",
            after - expected
        ));
    }
    line
}

/// What an interrupted run kept, and how to go on.
fn interruption_message(summary: &Summary, stop: &Interruption) -> String {
    let place = if stop.line == 0 {
        format!("before {}", stop.file.display())
    } else {
        format!("at line {} of {}", stop.line, stop.file.display())
    };
    let kept = match summary.documents {
        0 => "no document was placed before it, so the index is as it was".to_owned(),
        1 => "committed the 1 document placed up to there".to_owned(),
        documents => format!("committed the {documents} documents placed up to there"),
    };
    format!(
        "interrupted {place}: {kept}; run the same command again to go on: documents already \
         indexed are recognised as unchanged"
    )
}

/// Watches for SIGINT (Ctrl-C) and SIGTERM on a thread of its own; the flag returned is set by
/// the first, so that `ingest` stops reading, commits what it placed and closes the index (a
/// signal's default action would kill the process and lose everything since the last commit,
/// leaving its segment files behind). A second signal exits at once with status 130, keeping
/// only the last commit (the next commit removes the files it leaves).
///
/// SIGINT is left alone when it was ignored at start, as a shell without job control does for
/// a command it runs in the background (`ingest … &` in a script): a Ctrl-C at the terminal
/// is not meant for such a command.
fn watch_signals(progress: ProgressBar) -> anyhow::Result<Arc<AtomicBool>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .context("starting the signal watcher")?;
    // Registered here, before the index is touched, rather than on the thread.
    let (mut interrupt, mut terminate) = {
        let _entered = runtime.enter();
        let interrupt = if interrupt_ignored() {
            None
        } else {
            Some(signal(SignalKind::interrupt()).context("watching for Ctrl-C")?)
        };
        (
            interrupt,
            signal(SignalKind::terminate()).context("watching for SIGTERM")?,
        )
    };
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async {
                next_signal(&mut interrupt, &mut terminate).await;
                set.store(true, Ordering::SeqCst);
                progress.suspend(|| {
                    eprintln!(
                        "ingest: stopping: committing what was placed (Ctrl-C again quits at \
                         once, keeping only the last commit)"
                    )
                });
                next_signal(&mut interrupt, &mut terminate).await;
                progress.suspend(|| eprintln!("ingest: quit at once: kept only the last commit"));
                std::process::exit(i32::from(INTERRUPTED));
            })
        })
        .context("starting the signal watcher")?;
    Ok(flag)
}

/// Waits for the next SIGINT (when it is watched) or SIGTERM.
async fn next_signal(interrupt: &mut Option<Signal>, terminate: &mut Signal) {
    match interrupt {
        Some(interrupt) => {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        None => {
            terminate.recv().await;
        }
    }
}

/// Whether SIGINT is ignored (inherited from the parent: signals ignored stay ignored across
/// `exec`).
fn interrupt_ignored() -> bool {
    // SAFETY: an all-zero `sigaction` is a valid value of the plain C struct; with a null new
    // action, sigaction only writes the current one into `current`.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    let status = unsafe { libc::sigaction(libc::SIGINT, std::ptr::null(), &mut current) };
    status == 0 && current.sa_sigaction == libc::SIG_IGN
}
