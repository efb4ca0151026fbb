//! The read-only commands over an index: `search`, `similar`, `stats`, `check`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clap::builder::TypedValueParser as _;
use serde::Serialize;
use tantivy_dedup::article::parse_time;
use tantivy_dedup::engine::{
    DedupSearcher, DocumentView, MAX_PAGE_SIZE, SearchRequest, Sort, check_index,
};
use tantivy_dedup::forest::Timestamp;

use super::plural;

#[derive(Args)]
pub struct IndexArg {
    /// Index directory (as written by `ingest`)
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
}

impl IndexArg {
    fn open(&self) -> anyhow::Result<DedupSearcher> {
        DedupSearcher::open(&self.index)
            .with_context(|| format!("opening {}", self.index.display()))
    }
}

#[derive(Args)]
pub struct SearchArgs {
    #[command(flatten)]
    index: IndexArg,
    /// Keywords; every word must match. Words are jieba's (a query for part of a word, such
    /// as 四百 in 四百万, finds nothing). Tantivy query syntax: "a phrase", -excluded,
    /// title:word. Left out: every document
    #[arg(value_name = "QUERY", default_value = "")]
    query: String,
    /// Order of clusters: relevance (best score first), similar_desc (most similar articles
    /// first), similar_asc (fewest first), newest (most recent matching article first)
    #[arg(long, default_value = "relevance",
          value_parser = clap::builder::PossibleValuesParser::new(Sort::ALL.map(|(name, _)| name)))]
    sort: String,
    /// Clusters to skip
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Clusters to show, at most 1000
    #[arg(long, default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(0..=MAX_PAGE_SIZE as i64).map(usize::from))]
    limit: usize,
    /// Only documents published at or after this time (RFC 3339 or Unix seconds)
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    from: Option<Timestamp>,
    /// Only documents published at or before this time (RFC 3339 or Unix seconds)
    #[arg(long, value_name = "TIME", value_parser = parse_time_arg)]
    to: Option<Timestamp>,
    /// Only documents from this source
    #[arg(long)]
    source: Option<String>,
    /// Print the page as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SimilarArgs {
    #[command(flatten)]
    index: IndexArg,
    /// The document's id
    #[arg(value_name = "ID")]
    id: String,
    /// Documents to skip
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Documents to show, at most 1000
    #[arg(long, default_value_t = 20,
          value_parser = clap::value_parser!(u16).range(0..=MAX_PAGE_SIZE as i64).map(usize::from))]
    limit: usize,
    /// Print the page as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct StatsArgs {
    #[command(flatten)]
    index: IndexArg,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    index: IndexArg,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
}

fn parse_time_arg(text: &str) -> Result<Timestamp, String> {
    parse_time(&serde_json::Value::String(text.to_owned())).map_err(|error| error.to_string())
}

pub fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let mut request = SearchRequest::new(args.query.as_str())
        .sort(args.sort.parse()?)
        .page(args.offset, args.limit)
        .published(args.from, args.to);
    request.source = args.source;
    let page = searcher.search(&request)?;
    output(args.json, &page, |out| {
        let (documents, clusters) = (page.total_hits, page.total_clusters);
        if page.clusters.is_empty() {
            writeln!(
                out,
                "no clusters on this page ({documents} matching documents in {clusters} {})",
                plural(clusters, "cluster", "clusters")
            )?;
        } else {
            writeln!(
                out,
                "{documents} matching documents in {clusters} {}; clusters {} to {}:",
                plural(clusters, "cluster", "clusters"),
                args.offset + 1,
                args.offset + page.clusters.len()
            )?;
        }
        for (rank, cluster) in page.clusters.iter().enumerate() {
            write!(out, "{:>3}. ", args.offset + rank + 1)?;
            write_document(out, &cluster.representative)?;
            writeln!(
                out,
                "     {} similar, {} matching, score {:.2}, root {}; sources: {}",
                cluster.cluster_size.saturating_sub(1),
                cluster.hits,
                cluster.score,
                cluster.root,
                cluster.sources.join(", ")
            )?;
        }
        Ok(())
    })
}

pub fn similar(args: SimilarArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let Some(page) = searcher.similar(&args.id, args.offset, args.limit)? else {
        eprintln!("tantivy-dedup: error: no document with id {:?}", args.id);
        return Ok(ExitCode::FAILURE);
    };
    output(args.json, &page, |out| {
        write_document(out, &page.document)?;
        writeln!(
            out,
            "cluster {}: {} documents; {} others, earliest first:",
            page.document.root, page.cluster_size, page.total
        )?;
        for (rank, document) in page.documents.iter().enumerate() {
            write!(out, "{:>3}. ", args.offset + rank + 1)?;
            write_document(out, document)?;
        }
        Ok(())
    })
}

pub fn stats(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let stats = searcher.stats()?;
    output(args.json, &stats, |out| {
        writeln!(out, "documents   {}", stats.documents)?;
        writeln!(
            out,
            "clusters    {} (stories: distinct roots among the documents; all of them, not only \
             those within the window)",
            stats.clusters
        )?;
        writeln!(
            out,
            "tombstones  {} (deleted or replaced; kept for recovery)",
            stats.tombstones
        )?;
        writeln!(out, "segments    {}", stats.segments)?;
        writeln!(out, "disk        {:.1} kB", stats.disk_bytes as f64 / 1e3)
    })
}

pub fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.index.index;
    let report = check_index(dir).with_context(|| format!("checking {}", dir.display()))?;
    let printed = output(args.json, &report, |out| {
        writeln!(
            out,
            "{} {}: {} documents, {} tombstones; {} files ({:.1} kB) checksummed, {} stored \
             documents and {} fast field values decoded",
            report.segments,
            plural(report.segments as u64, "segment", "segments"),
            report.documents,
            report.tombstones,
            report.files,
            report.bytes as f64 / 1e3,
            report.stored_documents,
            report.fast_values
        )?;
        match &report.replay {
            Some(replay) => writeln!(
                out,
                "forest replayed: {} inserts, {} roots differ from the stored ones",
                replay.replayed, replay.mismatched_roots
            )?,
            None => writeln!(out, "forest not replayed: the index is damaged")?,
        }
        for damage in &report.damaged {
            writeln!(
                out,
                "damaged: {}: {}",
                damage.path.display(),
                damage.problem
            )?;
        }
        if report.is_sound() {
            writeln!(out, "no damage found")?;
        }
        Ok(())
    })?;
    if report.is_sound() {
        return Ok(printed);
    }
    let damaged = report.damaged.len() as u64;
    eprintln!(
        "tantivy-dedup: error: {damaged} {} damaged in {}; restore the index from a backup",
        plural(damaged, "file", "files"),
        dir.display()
    );
    Ok(ExitCode::FAILURE)
}

/// One line for a document: title (or id), source, time, id.
fn write_document(out: &mut dyn Write, document: &DocumentView) -> io::Result<()> {
    let time = document
        .published_at
        .and_then(|seconds| time::OffsetDateTime::from_unix_timestamp(seconds).ok())
        .and_then(|time| {
            time.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    writeln!(
        out,
        "{}  [{}] {}  id {}{}",
        document.title.as_deref().unwrap_or("(no title)"),
        document.source.as_deref().unwrap_or("-"),
        time,
        document.id,
        document
            .url
            .as_deref()
            .map(|url| format!("  {url}"))
            .unwrap_or_default()
    )
}

/// Prints `value` as JSON, or as text through `text`; a closed pipe ends quietly.
fn output<T: Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    let written = if json {
        serde_json::to_string_pretty(value)
            .map_err(io::Error::from)
            .and_then(|json| writeln!(out, "{json}"))
    } else {
        text(&mut out)
    };
    match written {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
