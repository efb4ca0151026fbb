//! The read-only commands over an index: `search`, `similar`, `story`, `near-duplicates`,
//! `stats`, `check`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use clap::builder::TypedValueParser as _;
use serde::Serialize;
use tantivy_dedup::config::format_duration;
use tantivy_dedup::engine::{
    DEFAULT_FACET_LIMIT, DEFAULT_FRAGMENT_CHARS, DEFAULT_FRAGMENTS, DEFAULT_PAGE_SIZE,
    DedupSearcher, DocumentView, FOREST_DIR, FRAGMENT_CHARS, Interval, ListOrder, MAX_FACET_LIMIT,
    MAX_FRAGMENTS, MAX_MEMBERS, MAX_PAGE_SIZE, SearchRequest, StoryRequest, StorySort, TrendSpan,
    check_index, list_items,
};
use tantivy_dedup::forest::Timestamp;
use tantivy_dedup::local_time::{RangeEnd, TimeZone};
use tantivy_dedup::{Article, Fingerprint};

use super::{counted, print, size};

/// A `--limit` of a page: 0 to [`MAX_PAGE_SIZE`], as over HTTP.
fn page_size() -> impl clap::builder::TypedValueParser<Value = usize> {
    clap::value_parser!(u16)
        .range(0..=MAX_PAGE_SIZE as i64)
        .map(usize::from)
}

/// Which page of results to show: clusters for `search`, documents for `similar`, members for
/// `story`.
#[derive(Args)]
pub struct PageArgs {
    /// Results to skip: the page starts at result offset + 1
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Results to show, 0 to 1000 (the HTTP API's default too)
    #[arg(long, default_value_t = DEFAULT_PAGE_SIZE, value_parser = page_size())]
    limit: usize,
}

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
    /// first), similar_asc (fewest first), newest (most recent matching article first), oldest
    /// (the cluster whose first matching article is the oldest first), trending (most articles gained in --trend-window against the window before first), hot
    /// (score x (1 + ln size), halved per --trend-window of the newest match's age); or
    /// FIELD:desc / FIELD:asc, by a number, date or boolean field of your own (likes:desc: the
    /// story whose matching articles have the most likes first; stories without a value
    /// last)
    #[arg(long, value_name = "ORDER", default_value = "relevance",
          value_parser = option_value::<ListOrder>)]
    sort: ListOrder,
    #[command(flatten)]
    page: PageArgs,
    /// Only documents published at or after this time: a date (2024-04-21, from the start of
    /// that day), a date and time (2024-04-21 08:30[:00]), both in --time-zone, RFC 3339
    /// (2024-04-21T08:30:00+08:00) or Unix seconds
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// Only documents published at or before this time, in the forms of --from; a date alone
    /// means the END of that day (2024-04-21 is up to 23:59:59), so --from and --to of the same
    /// date give that whole day
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
    /// Only documents from this source
    #[arg(long)]
    source: Option<String>,
    /// Only documents this filter keeps, on a declared field that is not text (repeatable;
    /// all must pass): FIELD:VALUE, FIELD:[A TO B] (both ends included, * for an open end),
    /// or on a facet field FIELD:/facet/prefix. Dates take the forms of --from
    #[arg(long, value_name = "FILTER")]
    filter: Vec<String>,
    /// Leave out documents that contain these words in any text field (repeatable; words
    /// separated by commas or spaces)
    #[arg(long, value_name = "WORDS")]
    exclude: Vec<String>,
    /// The text fields the keywords search, separated by commas [default: all]
    #[arg(long, value_name = "FIELDS")]
    fields: Option<String>,
    /// Only clusters of at least this many indexed documents; the totals count only those
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_cluster_size: u64,
    /// Count the values of these fields (separated by commas) over all matching documents:
    /// articles and distinct clusters per value
    #[arg(long, value_name = "FIELDS")]
    facets: Option<String>,
    /// Values listed per facet, most articles first
    #[arg(long, value_name = "N", default_value_t = DEFAULT_FACET_LIMIT,
          value_parser = clap::value_parser!(u16).range(0..=MAX_FACET_LIMIT as i64).map(usize::from))]
    facet_limit: usize,
    /// Count matching documents and clusters per interval of publication time: `auto` (the
    /// finest of 1h, 3h, 6h, 12h, 1d, 7d, 30d, 365d showing the index's span in at most 200
    /// buckets) or 1h, 1d, 30m or any duration, aligned on midnight in the index's time zone
    #[arg(long, value_name = "INTERVAL")]
    histogram: Option<String>,
    /// Show each representative's (and member's) highlights: per field with a match (title,
    /// content), its fragments around the matched words in text order, the words in
    /// <em>...</em>, HTML-escaped
    #[arg(long)]
    highlight: bool,
    /// Fragments per field, at most: 0 (the snippet alone) to 10 [default: 3]; implies
    /// --highlight
    #[arg(long, value_name = "COUNT",
          value_parser = clap::value_parser!(u16).range(0..=MAX_FRAGMENTS as i64).map(usize::from))]
    highlight_fragments: Option<usize>,
    /// About how many characters a fragment shows: 20 to 1000 [default: 100]; implies
    /// --highlight
    #[arg(long, value_name = "CHARS",
          value_parser = clap::value_parser!(u16).range(*FRAGMENT_CHARS.start() as i64..=*FRAGMENT_CHARS.end() as i64).map(usize::from))]
    highlight_chars: Option<usize>,
    /// The trend window that --sort trending, --sort hot and --min-recent read: 6h, 30m, 1d
    /// or any whole number of seconds from 1s to 366d
    #[arg(long, value_name = "DURATION", default_value = "6h", value_parser = option_value::<TrendSpan>)]
    trend_window: TrendSpan,
    /// When the trend window ends, in the forms of --to [default: now]. An index of past
    /// articles has no trend now: give the time to look back from
    #[arg(long, value_name = "TIME")]
    trend_end: Option<String>,
    /// Only clusters with at least this many articles (matching or not) in the trend window
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_recent: u64,
    /// List up to N of each cluster's other matching articles under it, best first in the
    /// page's order (the best scores; the newest with --sort newest, the oldest with --sort
    /// oldest), at most 100
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=MAX_MEMBERS as i64).map(usize::from))]
    members: usize,
    /// Walk the list past --offset's 10,000 clusters: `*` for the first page, then the
    /// cursor each page prints for the next. A walk read by separate commands goes on while
    /// nothing is written to the index (a server keeps its snapshot 5 minutes instead)
    #[arg(long, value_name = "CURSOR")]
    cursor: Option<String>,
    #[command(flatten)]
    zone: ZoneArg,
    /// Print the page as JSON (times as Unix seconds); the same JSON as GET /v1/search
    #[arg(long)]
    json: bool,
}

/// The zone of times read and printed.
#[derive(Args)]
pub struct ZoneArg {
    /// Time zone of the times printed, and of --from/--to given without an offset: an offset
    /// from UTC such as "+08:00", "-05:00" or "UTC" [default: the index's [index] time_zone,
    /// +08:00 unless set when it was created]
    #[arg(long, value_name = "OFFSET")]
    time_zone: Option<TimeZone>,
}

impl ZoneArg {
    /// The zone: the flag's, else the index's.
    fn zone(&self, searcher: &DedupSearcher) -> TimeZone {
        self.time_zone.unwrap_or(searcher.config().index.time_zone)
    }
}

#[derive(Args)]
pub struct SimilarArgs {
    #[command(flatten)]
    index: IndexArg,
    /// The document's id
    #[arg(value_name = "ID")]
    id: String,
    #[command(flatten)]
    page: PageArgs,
    #[command(flatten)]
    zone: ZoneArg,
    /// Print the page as JSON (times as Unix seconds)
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct StoryArgs {
    #[command(flatten)]
    index: IndexArg,
    /// The story: its root hash (16 hex digits, as `search` prints it), or the id of one of its
    /// documents
    #[arg(value_name = "ROOT_OR_ID")]
    story: String,
    /// Members' order: `time` (earliest first) or `source` (by outlet, then time)
    #[arg(long, default_value = "time", value_parser = ["time", "source"])]
    sort: String,
    #[command(flatten)]
    page: PageArgs,
    /// The spread's bucket width: `auto` (the finest of 1h, 3h, 6h, 12h, 1d, 7d, 30d, 365d
    /// showing the story's span in at most 200 buckets), or `1h`, `1d`, `30m` or any duration
    #[arg(long, default_value = "auto", value_name = "INTERVAL")]
    histogram: String,
    /// Mark these keywords (a list's query) in each member's highlights: per field with a
    /// match, its fragments around the words, in <em>...</em>, HTML-escaped
    #[arg(long, value_name = "QUERY")]
    highlight: Option<String>,
    #[command(flatten)]
    zone: ZoneArg,
    /// Print the story as JSON (times as Unix seconds)
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct NearDuplicatesArgs {
    #[command(flatten)]
    index: IndexArg,
    /// The text to check (an article's body); `-` reads it from standard input
    #[arg(value_name = "TEXT")]
    content: String,
    /// Its headline (it counts when the index fingerprints titles: [dedup] fields)
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Near-duplicates to show, at most 1000
    #[arg(long, default_value_t = DEFAULT_PAGE_SIZE,
          value_parser = page_size())]
    limit: usize,
    #[command(flatten)]
    zone: ZoneArg,
    /// Print the answer as JSON (times as Unix seconds)
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

/// An option's value read as the API reads it (`--sort`, `--trend-window`); its error says
/// what the value must be, without the "invalid query" of an HTTP answer: the query is fine.
fn option_value<T: std::str::FromStr<Err = tantivy_dedup::Error>>(text: &str) -> Result<T, String> {
    text.parse().map_err(|error| match error {
        tantivy_dedup::Error::Query(message) => message,
        other => other.to_string(),
    })
}

/// `--from` or `--to` (named by `flag`) as Unix seconds, read in `zone`.
fn time_arg(
    flag: &str,
    text: Option<&str>,
    zone: TimeZone,
    end: RangeEnd,
) -> anyhow::Result<Option<Timestamp>> {
    text.map(|text| {
        zone.parse(text, end)
            .map_err(|error| anyhow!("{flag}: {error}"))
    })
    .transpose()
}

pub fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let zone = args.zone.zone(&searcher);
    let from = time_arg("--from", args.from.as_deref(), zone, RangeEnd::Start)?;
    let to = time_arg("--to", args.to.as_deref(), zone, RangeEnd::End)?;
    if let (Some(from), Some(to)) = (from, to)
        && from > to
    {
        bail!(
            "--from {} is after --to {}: no time is in between",
            zone.format(from),
            zone.format(to)
        );
    }
    let trend_end = time_arg(
        "--trend-end",
        args.trend_end.as_deref(),
        zone,
        RangeEnd::End,
    )?;
    let mut request = SearchRequest::new(args.query.as_str())
        .order(args.sort.clone())
        .trend(args.trend_window, trend_end)
        .min_recent(args.min_recent)
        .members(args.members)
        .page(args.page.offset, args.page.limit)
        .published(from, to)
        .min_cluster_size(args.min_cluster_size)
        .facet_limit(args.facet_limit)
        .fields(list_items(args.fields.as_deref().unwrap_or_default()))
        .facets(list_items(args.facets.as_deref().unwrap_or_default()))
        .highlight(args.highlight);
    if args.highlight_fragments.is_some() || args.highlight_chars.is_some() {
        request = request.highlight_fragments(
            args.highlight_fragments.unwrap_or(DEFAULT_FRAGMENTS),
            args.highlight_chars.unwrap_or(DEFAULT_FRAGMENT_CHARS),
        );
    }
    request.source = args.source;
    for filter in &args.filter {
        request = request.filter(filter.parse().context("--filter")?);
    }
    for words in &args.exclude {
        request.exclude.extend(list_items(words).map(str::to_owned));
    }
    if let Some(interval) = &args.histogram {
        request = request.histogram(interval.parse().context("--histogram")?);
    }
    if let Some(cursor) = &args.cursor {
        request = request.cursor(cursor.parse().context("--cursor")?);
    }
    let page = searcher.search(&request)?;
    output(args.json, &page, |out| {
        let (documents, clusters) = (page.total_hits, page.total_clusters);
        let found = format!(
            "{} in {}",
            counted(documents, "matching document", "matching documents"),
            counted(clusters, "cluster", "clusters")
        );
        if let (Some(seconds), Some(end)) = (page.trend_window, page.trend_end) {
            writeln!(
                out,
                "trend window: {} up to {}",
                format_duration(std::time::Duration::from_secs(seconds)),
                zone.format(end)
            )?;
        }
        let walking_on = request
            .cursor
            .as_ref()
            .is_some_and(|cursor| !cursor.is_start());
        if page.clusters.is_empty() {
            writeln!(out, "no clusters on this page ({found})")?;
        } else if walking_on {
            writeln!(
                out,
                "{found}; the next {} after the cursor:",
                counted(page.clusters.len() as u64, "cluster", "clusters")
            )?;
        } else {
            writeln!(
                out,
                "{found}; {}:",
                match page.clusters.len() {
                    1 => format!("cluster {}", args.page.offset + 1),
                    shown => format!(
                        "clusters {} to {}",
                        args.page.offset + 1,
                        args.page.offset + shown
                    ),
                }
            )?;
        }
        for (rank, cluster) in page.clusters.iter().enumerate() {
            write!(out, "{:>3}. ", args.page.offset + rank + 1)?;
            write_document(out, &cluster.representative, zone)?;
            writeln!(
                out,
                "     {} similar, {} matching, score {:.2}, root {}; {}",
                cluster.cluster_size.saturating_sub(1),
                cluster.hits,
                cluster.score,
                cluster.root,
                match cluster.sources.as_slice() {
                    [] => "source unknown".to_owned(),
                    [source] => format!("source: {source}"),
                    sources => format!("sources: {}", sources.join(", ")),
                }
            )?;
            if let (Some(value), Some(field)) = (&cluster.sort_value, &request.sort_field) {
                writeln!(out, "     {field}: {value}")?;
            }
            if let Some(trend) = &cluster.trend {
                writeln!(
                    out,
                    "     {:+} in the window: {} from {} against {} before{}",
                    trend.growth,
                    counted(trend.recent, "article", "articles"),
                    counted(trend.recent_outlets, "outlet", "outlets"),
                    trend.previous,
                    cluster
                        .hot
                        .map(|hot| format!("; hot {hot:.3}"))
                        .unwrap_or_default()
                )?;
            }
            write_highlights(out, &cluster.representative, "     ")?;
            for member in cluster.members.iter().flatten() {
                write!(out, "     - ")?;
                write_document(out, member, zone)?;
                write_highlights(out, member, "       ")?;
            }
        }
        for (field, counts) in page.facets.iter().flatten() {
            let values: Vec<String> = counts
                .iter()
                .map(|count| format!("{} {}/{}", count.value, count.articles, count.clusters))
                .collect();
            writeln!(
                out,
                "facet {field} (articles/clusters): {}",
                if values.is_empty() {
                    "none".to_owned()
                } else {
                    values.join(", ")
                }
            )?;
        }
        if let Some(buckets) = &page.histogram {
            writeln!(
                out,
                "histogram by {} (articles/clusters per interval start):",
                page.histogram_interval
                    .and_then(Interval::from_seconds)
                    .map(|interval| interval.to_string())
                    .unwrap_or_default()
            )?;
            for bucket in buckets {
                writeln!(
                    out,
                    "  {}  {}/{}",
                    zone.format(bucket.start),
                    bucket.articles,
                    bucket.clusters
                )?;
            }
        }
        match (&args.cursor, &page.next_cursor) {
            (Some(_), Some(next)) => writeln!(out, "next page: --cursor {next}")?,
            (Some(_), None) => writeln!(out, "the last page of the walk")?,
            (None, _) => {}
        }
        Ok(())
    })
}

pub fn similar(args: SimilarArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let Some(page) = searcher.similar(&args.id, args.page.offset, args.page.limit)? else {
        eprintln!("tantivy-dedup: error: no document with id {:?}", args.id);
        return Ok(ExitCode::FAILURE);
    };
    let zone = args.zone.zone(&searcher);
    output(args.json, &page, |out| {
        write_document(out, &page.document, zone)?;
        match page.total {
            0 => writeln!(out, "cluster {}: this document alone", page.document.root)?,
            others => writeln!(
                out,
                "cluster {}: {}; {}, earliest first:",
                page.document.root,
                counted(page.cluster_size, "document", "documents"),
                counted(others, "other", "others")
            )?,
        }
        for (rank, document) in page.documents.iter().enumerate() {
            write!(out, "{:>3}. ", args.page.offset + rank + 1)?;
            write_document(out, document, zone)?;
        }
        Ok(())
    })
}

pub fn story(args: StoryArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let request = StoryRequest::default()
        .page(args.page.offset, args.page.limit)
        .sort(args.sort.parse::<StorySort>()?)
        .interval(args.histogram.parse()?)
        .highlight(args.highlight.clone().unwrap_or_default());
    // A root hash names a story; anything else (or a hash no story has) is a document's id.
    let by_root = match args.story.parse::<Fingerprint>() {
        Ok(root) if args.story.len() == 16 => searcher.story(root, &request)?,
        _ => None,
    };
    let story = match by_root {
        Some(story) => story,
        None => {
            let Some(document) = searcher.document(&args.story)? else {
                eprintln!(
                    "tantivy-dedup: error: no story has root {0:?} and no document has id {0:?}",
                    args.story
                );
                return Ok(ExitCode::FAILURE);
            };
            searcher
                .story(document.root, &request)?
                .ok_or_else(|| anyhow!("document {:?} has no story", args.story))?
        }
    };
    let zone = args.zone.zone(&searcher);
    output(args.json, &story, |out| {
        let first = &story.first_published;
        writeln!(
            out,
            "story {}: {} from {}",
            story.root,
            counted(story.cluster_size, "document", "documents"),
            counted(story.outlets.len() as u64, "outlet", "outlets")
        )?;
        writeln!(
            out,
            "first published {} by {} (id {})",
            zone.format(first.published_at),
            first.source.as_deref().unwrap_or("(no source)"),
            first.id
        )?;
        writeln!(out, "outlets, most articles first:")?;
        for outlet in &story.outlets {
            writeln!(
                out,
                "  {}  {}, first {}",
                outlet.source.as_deref().unwrap_or("(no source)"),
                counted(outlet.articles, "article", "articles"),
                zone.format(outlet.first_published_at)
            )?;
        }
        let width = Interval::from_seconds(story.interval)
            .map(|interval| interval.to_string())
            .unwrap_or_default();
        writeln!(out, "spread, articles per {width}:")?;
        for bucket in &story.histogram {
            let bar = "#".repeat(bucket.articles.min(60) as usize);
            let line = format!(
                "  {}  {:>4} {bar}",
                zone.format(bucket.start),
                bucket.articles
            );
            writeln!(out, "{}", line.trim_end())?;
        }
        writeln!(out, "members, by {}:", args.sort)?;
        for (rank, member) in story.members.iter().enumerate() {
            write!(out, "{:>3}. ", args.page.offset + rank + 1)?;
            write_document(out, &member.document, zone)?;
            let evidence = &member.evidence;
            let mut how = match &member.attached_to {
                None => format!("came in first; {} bits from the root", evidence.distance),
                Some(through) => format!(
                    "came in through {through}: {} bits from the root",
                    evidence.distance
                ),
            };
            if let (Some(similarity), Some(containment)) =
                (evidence.similarity, evidence.containment)
            {
                how.push_str(&format!(
                    ", similarity {similarity:.2}, containment {containment:.2}"
                ));
            }
            if let Some(reprint) = &member.reprint {
                for (label, value) in [
                    ("source named", &reprint.source),
                    ("original title", &reprint.original_title),
                ] {
                    if let Some(value) = value {
                        how.push_str(&format!("; {label}: {value}"));
                    }
                }
            }
            writeln!(out, "     {how}")?;
            if args.highlight.is_some() {
                write_highlights(out, &member.document, "     ")?;
            }
        }
        Ok(())
    })
}

pub fn near_duplicates(args: NearDuplicatesArgs) -> anyhow::Result<ExitCode> {
    let searcher = args.index.open()?;
    let content = if args.content == "-" {
        io::read_to_string(io::stdin().lock()).context("reading the text from standard input")?
    } else {
        args.content
    };
    // Checked as a posted article is (an empty or invisible text is refused); it needs no id.
    let mut article = serde_json::json!({"id": "unindexed", "content": content});
    if let Some(title) = args.title {
        article["title"] = title.into();
    }
    let article = Article::from_json_value(article)?;
    let found = searcher.near_duplicates(&article, args.limit)?;
    let zone = args.zone.zone(&searcher);
    output(args.json, &found, |out| {
        writeln!(
            out,
            "simhash {}: {}",
            found.simhash,
            match found.matches.len() {
                0 => "no near-duplicate in the index".to_owned(),
                count => format!(
                    "{}, nearest first:",
                    counted(count as u64, "near-duplicate", "near-duplicates")
                ),
            }
        )?;
        for (rank, near) in found.matches.iter().enumerate() {
            write!(out, "{:>3}. {} bits away: ", rank + 1, near.distance)?;
            write_document(out, &near.document, zone)?;
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
        writeln!(out, "disk        {}", size(stats.disk_bytes))
    })
}

pub fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.index.index;
    let report = check_index(dir).with_context(|| format!("checking {}", dir.display()))?;
    let printed = output(args.json, &report, |out| {
        writeln!(
            out,
            "{}: {}, {}; {} ({}) checksummed, {} and {} decoded",
            counted(report.segments as u64, "segment", "segments"),
            counted(report.documents, "document", "documents"),
            counted(report.tombstones, "tombstone", "tombstones"),
            counted(report.files as u64, "file", "files"),
            size(report.bytes),
            counted(
                report.stored_documents,
                "stored document",
                "stored documents"
            ),
            counted(report.fast_values, "fast field value", "fast field values")
        )?;
        let differ = |roots: u64| match roots {
            1 => "1 root differs".to_owned(),
            roots => format!("{roots} roots differ"),
        };
        match &report.replay {
            Some(replay) if replay.pruned_inserts > 0 => writeln!(
                out,
                "forest replayed: {} ({} pruned), {} from the stored ones",
                counted(replay.replayed, "insert", "inserts"),
                replay.pruned_inserts,
                differ(replay.mismatched_roots)
            )?,
            Some(replay) => writeln!(
                out,
                "forest replayed: {}, {} from the stored ones",
                counted(replay.replayed, "insert", "inserts"),
                differ(replay.mismatched_roots)
            )?,
            None => writeln!(out, "forest not replayed: the index is damaged")?,
        }
        if let Some(replay) = report
            .replay
            .as_ref()
            .filter(|replay| replay.deletes_at_end > 0)
        {
            writeln!(
                out,
                "{} record no place among the inserts (tombstones of a build before \
                 _deleted_at): replayed at the end, so nodes' document counts are not compared",
                counted(replay.deletes_at_end, "delete", "deletes")
            )?;
        }
        if let Some(replay) = &report.checkpoint_replay {
            writeln!(
                out,
                "forest checkpoint of {} loaded, then {} replayed; {} from the stored ones",
                counted(replay.checkpoint_sequence.unwrap_or(0), "insert", "inserts"),
                replay.replayed,
                differ(replay.mismatched_roots)
            )?;
        }
        if report.sketches_compared > 0 {
            writeln!(
                out,
                "forest checkpoint's sketch chunks: {} compared with the index's _sketch column",
                counted(
                    report.sketches_compared,
                    "document's sketch",
                    "documents' sketches"
                )
            )?;
        }
        if let Some(why) = &report.checkpoint_refused {
            writeln!(
                out,
                "forest checkpoint not used ({why}): opening replays every insert"
            )?;
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
    // Damage to the forest checkpoint alone costs a replay, not the index.
    let forest = dir.join(FOREST_DIR);
    if report
        .damaged
        .iter()
        .all(|damage| damage.path.starts_with(&forest))
    {
        eprintln!(
            "tantivy-dedup: error: the forest checkpoint in {} is damaged (see above); the \
             index's own files are sound",
            forest.display()
        );
    } else {
        eprintln!(
            "tantivy-dedup: error: {} damaged in {}; restore the index from a backup",
            counted(report.damaged.len() as u64, "file", "files"),
            dir.display()
        );
    }
    Ok(ExitCode::FAILURE)
}

/// One line for a document: title, then what is known of source, time (in `zone`), id and
/// address; what is unknown is left out rather than shown as a placeholder.
fn write_document(out: &mut dyn Write, document: &DocumentView, zone: TimeZone) -> io::Result<()> {
    let mut line = document.title.as_deref().unwrap_or("(no title)").to_owned();
    if let Some(source) = &document.source {
        line.push_str(&format!("  [{source}]"));
    }
    if let Some(time) = document.published_at {
        line.push_str(&format!("  {}", zone.format(time)));
    }
    line.push_str(&format!("  id {}", document.id));
    if let Some(url) = &document.url {
        line.push_str(&format!("  {url}"));
    }
    writeln!(out, "{line}")
}

/// Prints `document`'s highlights, a line per field (`title: …` first, then `content: … |
/// …`), each line starting with `indent`; without any (no field matched, or none asked
/// for), its snippet, when it has one.
fn write_highlights(out: &mut dyn Write, document: &DocumentView, indent: &str) -> io::Result<()> {
    let highlights = document
        .highlights
        .as_ref()
        .filter(|fields| !fields.is_empty());
    if let (None, Some(snippet)) = (highlights, &document.snippet) {
        return writeln!(out, "{indent}{}", snippet.replace('\n', " "));
    }
    let mut fields: Vec<_> = highlights.into_iter().flatten().collect();
    fields.sort_by_key(|(field, _)| field.as_str() != "title");
    for (field, fragments) in fields {
        let fragments: Vec<String> = fragments
            .iter()
            .map(|fragment| fragment.replace('\n', " "))
            .collect();
        writeln!(out, "{indent}{field}: {}", fragments.join(" | "))?;
    }
    Ok(())
}

/// Prints `value` as JSON, or as text through `text`; a closed pipe ends quietly.
fn output<T: Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<ExitCode> {
    if json {
        print(|out| {
            let json = serde_json::to_string_pretty(value).map_err(io::Error::from)?;
            writeln!(out, "{json}")
        })
    } else {
        print(text)
    }
}
