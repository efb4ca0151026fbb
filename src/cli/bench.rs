//! `tantivy-dedup bench`: the figures of BENCHMARKS.md, printed as JSON.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use tantivy_dedup::bench::{self, engine, http, ordinals};
use tantivy_dedup::engine::DedupSearcher;
use tantivy_dedup::index::BlockLayout;
use tantivy_dedup::{DedupConfig, Mode, input};

use super::ConfigArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    /// Fingerprinting throughput on one core over the news corpus.
    Fingerprint,
    /// Lookup latency, linear-scan ratio and memory at each --sizes (for each --tables).
    Lookup,
    /// `dedup` end to end on the labeled set.
    Dedup,
    /// Default mode's memory per live document: a forest of --memory-documents generated
    /// texts, all live (fresh process).
    Memory,
    /// Ingest of the news corpus into a fresh index against plain Tantivy + tantivy-jieba.
    Ingest,
    /// Collapse on broad queries against Tantivy's terms aggregation on `root`.
    Collapse,
    /// Detail-page (similar documents) latency.
    Detail,
    /// The HTTP service on loopback: ingest of --corpus with durable answers, then list pages
    /// under concurrent clients.
    Http,
    /// A commit's cluster numbers, from scratch and kept, at each --ordinals-documents.
    Ordinals,
    /// Reopening time: a default-mode forest of --restart-documents generated texts saved as
    /// a checkpoint, loaded cold and warm, and the replay rate after it.
    Restart,
    /// The index split into shards by story: ingest of --corpus and list, story and detail
    /// pages at --search-clients, one process against a coordinator with each of
    /// --shard-counts shards (placing on the Redis Cluster of --store), and every list page
    /// compared with the one process's.
    Shards,
    /// Shards held by replica sets: ingest of --replica-documents of --corpus through a
    /// coordinator with 2 shards of 1 and of 2 replica processes (on the Redis Cluster of
    /// --store), the second replica's lag under that load, and a replica killed, written past
    /// (--replica-down-documents) and restarted: the time until it answers again.
    Replicas,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Which parts to run (repeat the flag for several) [default: every part]
    #[arg(long, value_enum)]
    only: Vec<Part>,
    /// News corpus (JSON Lines with `content`) for the fingerprint, ingest, collapse, detail
    /// and HTTP parts; the default is the project's evaluation data, kept beside the clone and
    /// not shipped with the repository (README "Evaluation data" says where it comes from)
    #[arg(long, default_value = "../shared/data/xwlb-news.jsonl.gz")]
    corpus: PathBuf,
    /// Articles (JSON Lines) for the end-to-end dedup part; the default is the project's
    /// labeled evaluation set, likewise not shipped with the repository
    #[arg(long, default_value = "../shared/data/neardup-dev.jsonl.gz")]
    labeled: PathBuf,
    /// Use only the first N corpus documents for fingerprinting
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Stored fingerprints for the lookup benchmark, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000000,10000000,50000000"
    )]
    sizes: Vec<usize>,
    /// Table counts of the layouts the lookup benchmark measures, comma-separated (for k = 3:
    /// 4, 10, 16, 20, 35 or 56; see docs/tables.md) [default: `[dedup] tables` of --config, else
    /// the k + 1 tables of the default layout]
    #[arg(long, value_delimiter = ',', value_name = "N")]
    tables: Vec<usize>,
    /// Lookups timed at each size
    #[arg(long, default_value_t = 100_000)]
    queries: usize,
    /// Linear scans timed at each size (each reads every stored fingerprint)
    #[arg(long, default_value_t = 20)]
    scans: usize,
    /// Generated documents the memory part places
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    memory_documents: usize,
    /// Keep the memory part's sketches on the heap, as `Deduplicator::new` does, instead of in
    /// mapped files of the temporary directory, as an index does
    #[arg(long)]
    sketches_on_heap: bool,
    /// Generated documents the restart part saves and loads
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    restart_documents: usize,
    /// Inserts the restart part places after each load (timed: a replay's rate)
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    restart_probes: usize,
    /// Rounds of the ingest comparison (alternating plain and dedup)
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// An existing index (of the news corpus) for the collapse and detail parts [default: the
    /// index the ingest part builds, or a fresh one built from --corpus]
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// Broad queries for the collapse part, comma-separated ("" is every document)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "中国,发展,会议,经济,工作,"
    )]
    collapse_queries: Vec<String>,
    /// Timed repetitions of each collapse query
    #[arg(long, default_value_t = 20)]
    repeats: usize,
    /// Detail pages timed
    #[arg(long, default_value_t = 2000)]
    detail_queries: usize,
    /// Documents per POST in the HTTP ingest
    #[arg(long, default_value_t = 500)]
    http_batch: usize,
    /// Clients posting at once in the HTTP ingest
    #[arg(long, default_value_t = 4)]
    http_clients: usize,
    /// The server's group-commit delay in the HTTP ingest
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100ms")]
    commit_delay: std::time::Duration,
    /// Measure a running server at this address (e.g. http://127.0.0.1:7700) instead of a
    /// fresh one on loopback; --corpus is posted into its index unless --no-http-ingest
    #[arg(long, value_name = "URL")]
    http_url: Option<String>,
    /// The Redis Cluster the shards part places in (scripts/redis-cluster.sh start prints it);
    /// its keys go under a prefix of the run's own, left behind
    #[arg(long, value_name = "URLS")]
    store: Option<String>,
    /// Shard counts the shards part measures behind a coordinator, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,3")]
    shard_counts: Vec<usize>,
    /// Clients posting at once in the shards part's second ingest into each setup: the
    /// --limit documents after the first --limit, after the pages are compared (0: none)
    #[arg(long, default_value_t = 4, value_name = "N")]
    shard_ingest_clients: usize,
    /// Documents the replicas part loads through the coordinator, the corpus over again
    /// (with ids of their own) when it has fewer
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    replica_documents: usize,
    /// Of those, the last ones, written while a replica is down
    #[arg(long, default_value_t = 2_000, value_name = "N")]
    replica_down_documents: usize,
    /// Skip the HTTP ingest (search what the server already holds)
    #[arg(long)]
    no_http_ingest: bool,
    /// Clients searching at once in the HTTP search
    #[arg(long, default_value_t = 32)]
    search_clients: usize,
    /// List pages each search client asks for
    #[arg(long, default_value_t = 200)]
    search_requests: usize,
    /// Also time list pages that count facets and a histogram over all matches
    /// (`facets=source&histogram=1d`), reported as "search_faceted"
    #[arg(long)]
    faceted_search: bool,
    /// Generated documents the ordinals part indexes before its commits, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    ordinals_documents: Vec<u64>,
    /// Commits the ordinals part times, each of 1,000 new documents and --ordinals-deletes
    /// deletes
    #[arg(long, default_value_t = 50)]
    ordinals_commits: usize,
    /// Deletes of random earlier documents in each of the ordinals part's commits
    #[arg(long, default_value_t = 10)]
    ordinals_deletes: usize,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args)]
pub struct LookupArgs {
    #[arg(long)]
    stored: usize,
    #[arg(long, default_value_t = 100_000)]
    queries: usize,
    #[arg(long, default_value_t = 20)]
    scans: usize,
    #[arg(long, default_value_t = 3)]
    max_distance: u32,
    #[arg(long)]
    tables: Option<usize>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    // The whole settings (the index parts and the server use them all); `config` is its
    // dedup table.
    let settings = args.config.load_if_given()?.unwrap_or_default();
    let config = settings.dedup.clone();
    let wants = |part| args.only.is_empty() || args.only.contains(&part);
    // Before anything runs (the lookup part alone takes minutes): the data files the parts
    // asked for are there.
    let needs_corpus = wants(Part::Fingerprint)
        || wants(Part::Ingest)
        || ((wants(Part::Collapse) || wants(Part::Detail)) && args.index.is_none())
        || (wants(Part::Http) && !args.no_http_ingest)
        || wants(Part::Shards)
        || wants(Part::Replicas);
    if needs_corpus {
        input::require_file(&args.corpus)?;
    }
    if wants(Part::Dedup) {
        input::require_file(&args.labeled)?;
    }
    let mut report = serde_json::Map::new();
    report.insert("threads".into(), json!(rayon::current_num_threads()));

    if wants(Part::Fingerprint) {
        eprintln!("bench: loading {}", args.corpus.display());
        let texts = bench::load_contents(&args.corpus, args.limit)?;
        let fingerprinter = config.fingerprinter();
        eprintln!(
            "bench: fingerprinting {} documents on one core",
            texts.len()
        );
        let figures = bench::fingerprint_throughput(&fingerprinter, &texts);
        report.insert("fingerprint".into(), serde_json::to_value(figures)?);
    }
    if wants(Part::Lookup) {
        let exe = std::env::current_exe().context("finding this program to re-run it")?;
        let layouts = match args.tables.as_slice() {
            [] => vec![config.layout()?],
            counts => counts
                .iter()
                .map(|&tables| BlockLayout::with_tables(config.max_distance, tables))
                .collect::<Result<_, _>>()?,
        };
        let mut sizes = Vec::new();
        for layout in &layouts {
            for &stored in &args.sizes {
                eprintln!(
                    "bench: lookup at {stored} stored fingerprints, {layout} (fresh process)"
                );
                let output = Command::new(&exe)
                    .args(["bench-lookup", "--stored", &stored.to_string()])
                    .args(["--queries", &args.queries.to_string()])
                    .args(["--scans", &args.scans.to_string()])
                    .args(["--max-distance", &config.max_distance.to_string()])
                    .args(["--tables", &layout.table_count().to_string()])
                    .output()
                    .context("running the lookup benchmark")?;
                if !output.status.success() {
                    bail!(
                        "lookup benchmark at {stored} failed: {}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
                sizes.push(serde_json::from_slice::<Value>(&output.stdout)?);
            }
        }
        report.insert("lookup".into(), Value::Array(sizes));
    }
    if wants(Part::Dedup) {
        let mut modes = serde_json::Map::new();
        for mode in [Mode::Default, Mode::Seed] {
            eprintln!(
                "bench: dedup over {} in {} mode",
                args.labeled.display(),
                mode.name()
            );
            let mode_config = DedupConfig {
                mode,
                ..config.clone()
            };
            let figures = bench::dedup_throughput(&args.labeled, mode_config)?;
            modes.insert(mode.name().into(), serde_json::to_value(figures)?);
        }
        report.insert("dedup".into(), Value::Object(modes));
    }
    if wants(Part::Memory) {
        let exe = std::env::current_exe().context("finding this program to re-run it")?;
        eprintln!(
            "bench: memory of {} generated documents in default mode (fresh process)",
            args.memory_documents
        );
        let mut child = Command::new(&exe);
        child.args([
            "bench-memory",
            "--documents",
            &args.memory_documents.to_string(),
        ]);
        if args.sketches_on_heap {
            child.arg("--sketches-on-heap");
        }
        if let Some(path) = &args.config.config {
            child.arg("--config").arg(path);
        }
        let output = child
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running the memory benchmark")?;
        if !output.status.success() {
            bail!("the memory benchmark failed");
        }
        report.insert("memory".into(), serde_json::from_slice(&output.stdout)?);
    }
    let scratch = tempfile::Builder::new()
        .prefix("tantivy-dedup-bench")
        .tempdir()
        .context("creating a scratch directory")?;
    if wants(Part::Restart) {
        eprintln!(
            "bench: restart of a forest of {} generated documents in default mode",
            args.restart_documents
        );
        let figures = bench::restart::restart(
            args.restart_documents,
            args.restart_probes,
            config.clone(),
            &scratch.path().join("forest"),
        )?;
        report.insert("restart".into(), serde_json::to_value(figures)?);
    }
    if wants(Part::Ingest) {
        eprintln!(
            "bench: ingesting {} with tantivy-dedup and with plain Tantivy, {} rounds",
            args.corpus.display(),
            args.rounds
        );
        let figures =
            engine::ingest_comparison(&args.corpus, scratch.path(), &settings, args.rounds)?;
        report.insert("ingest".into(), serde_json::to_value(figures)?);
    }
    if wants(Part::Collapse) || wants(Part::Detail) {
        let index_dir = match &args.index {
            Some(dir) => dir.clone(),
            None => {
                let built = scratch.path().join("dedup");
                if !built.exists() {
                    eprintln!("bench: building an index of {}", args.corpus.display());
                    engine::dedup_ingest(&args.corpus, &built, &settings)?;
                }
                built
            }
        };
        let searcher = DedupSearcher::open(&index_dir)?;
        if wants(Part::Collapse) {
            eprintln!(
                "bench: collapse vs terms aggregation on {}",
                index_dir.display()
            );
            let queries: Vec<&str> = args.collapse_queries.iter().map(String::as_str).collect();
            let figures = engine::collapse_comparison(&searcher, &queries, args.repeats)?;
            report.insert("collapse".into(), serde_json::to_value(figures)?);
        }
        if wants(Part::Detail) {
            eprintln!("bench: detail pages on {}", index_dir.display());
            let figures = engine::detail_latency(&searcher, args.detail_queries)?;
            report.insert("detail".into(), serde_json::to_value(figures)?);
        }
    }
    if wants(Part::Ordinals) {
        let mut sizes = Vec::new();
        for &documents in &args.ordinals_documents {
            eprintln!("bench: cluster numbers per commit at {documents} generated documents");
            let dir = scratch.path().join("ordinals");
            let figures = ordinals::ordinals_per_commit(
                &dir,
                &settings,
                documents,
                args.ordinals_commits,
                1000,
                args.ordinals_deletes,
            )?;
            sizes.push(serde_json::to_value(figures)?);
        }
        report.insert("ordinals".into(), Value::Array(sizes));
    }
    if wants(Part::Http) {
        let local = match &args.http_url {
            Some(_) => None,
            None => {
                let mut config = settings.clone();
                config.server.commit_delay = args.commit_delay;
                Some(http::LocalServer::start(
                    &scratch.path().join("http"),
                    config,
                )?)
            }
        };
        let url = match (&local, &args.http_url) {
            (Some(server), _) => server.url(),
            (None, url) => url.clone().unwrap_or_default(),
        };
        let mut figures = serde_json::Map::new();
        if !args.no_http_ingest {
            eprintln!(
                "bench: HTTP ingest of {} in batches of {} from {} clients",
                args.corpus.display(),
                args.http_batch,
                args.http_clients
            );
            let ingest = http::http_ingest(
                &url,
                &args.corpus,
                args.http_batch,
                args.http_clients,
                args.commit_delay,
                0..args.limit.unwrap_or(usize::MAX),
            )?;
            figures.insert("ingest".into(), serde_json::to_value(ingest)?);
        }
        eprintln!(
            "bench: HTTP search, {} clients x {} list pages",
            args.search_clients, args.search_requests
        );
        let search = http::http_search(
            &url,
            &args.collapse_queries,
            "",
            args.search_clients,
            args.search_requests,
        )?;
        figures.insert("search".into(), serde_json::to_value(search)?);
        eprintln!(
            "bench: HTTP similar_desc, trending and members=3 pages, {} clients x {} pages each",
            args.search_clients, args.search_requests
        );
        let kinds = http::http_list_page_kinds(
            &url,
            &args.collapse_queries,
            args.search_clients,
            args.search_requests,
        )?;
        figures.insert("page_kinds".into(), serde_json::to_value(kinds)?);
        if args.faceted_search {
            eprintln!(
                "bench: HTTP search with {}, {} clients x {} list pages",
                http::FACETED_LIST_PAGE,
                args.search_clients,
                args.search_requests
            );
            let faceted = http::http_search(
                &url,
                &args.collapse_queries,
                http::FACETED_LIST_PAGE,
                args.search_clients,
                args.search_requests,
            )?;
            figures.insert("search_faceted".into(), serde_json::to_value(faceted)?);
        }
        if let Some(server) = local {
            server.stop()?;
        }
        report.insert("http".into(), Value::Object(figures));
    }
    if wants(Part::Shards) {
        let store = cluster_for("shards", args.store.as_deref())?;
        let settings = dated_settings(&settings, &args.corpus);
        let plan = bench::shards::ShardsBench {
            counts: args.shard_counts.clone(),
            batch: args.http_batch,
            // One ordered stream: every setup then decides alike, so that their answers can
            // be compared page for page (the coordinator places one batch at a time anyway).
            ingest_clients: 1,
            concurrent_ingest_clients: args.shard_ingest_clients,
            clients: args.search_clients,
            requests: args.search_requests,
            queries: args.collapse_queries.clone(),
            limit: args.limit,
        };
        let figures =
            bench::shards::shards(&args.corpus, &settings, &store, scratch.path(), &plan)?;
        report.insert("shards".into(), serde_json::to_value(figures)?);
    }
    if wants(Part::Replicas) {
        let store = cluster_for("replicas", args.store.as_deref())?;
        let settings = dated_settings(&settings, &args.corpus);
        let total = args.replica_documents;
        let Some(documents) = total.checked_sub(args.replica_down_documents) else {
            bail!(
                "the replicas part loads --replica-documents documents, of which the last \
                 --replica-down-documents are written while a replica is down: {total} is fewer \
                 than {}",
                args.replica_down_documents
            );
        };
        let plan = bench::replicas::ReplicasBench {
            batch: args.http_batch,
            documents,
            written_while_down: args.replica_down_documents,
        };
        let figures =
            bench::replicas::replicas(&args.corpus, &settings, &store, scratch.path(), &plan)?;
        report.insert("replicas".into(), serde_json::to_value(figures)?);
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}

/// The Redis Cluster of `--store`, which the part `part` needs.
fn cluster_for(
    part: &str,
    store: Option<&str>,
) -> anyhow::Result<tantivy_dedup::forest::redis::RedisAddress> {
    let Some(store) = store else {
        bail!(
            "the {part} part needs a Redis Cluster: --store URLS (scripts/redis-cluster.sh \
             start prints them), or leave it out with --only"
        );
    };
    Ok(tantivy_dedup::forest::redis::RedisAddress::parse(store)?)
}

/// `settings`, reading `published_at` from `date` when the corpus dates its articles so, so
/// that every setup of a part that compares answers dates them alike.
fn dated_settings(
    settings: &tantivy_dedup::config::Config,
    corpus: &std::path::Path,
) -> tantivy_dedup::config::Config {
    let mut settings = settings.clone();
    if settings.fields.published_at.from.is_none() && corpus_dates_by("date", corpus) {
        eprintln!(
            "bench: the corpus dates its articles by `date`: read as published_at, so that every \
             setup dates them alike"
        );
        settings.fields.published_at.from = Some("date".to_owned());
    }
    settings
}

/// Whether the corpus's first article has the key `key` and no `published_at`.
fn corpus_dates_by(key: &str, corpus: &std::path::Path) -> bool {
    let Ok(reader) = input::open(corpus) else {
        return false;
    };
    let first = std::io::BufRead::lines(reader).next();
    let Some(Ok(line)) = first else {
        return false;
    };
    serde_json::from_str::<Value>(&line)
        .is_ok_and(|article| article.get(key).is_some() && article.get("published_at").is_none())
}

#[derive(Args)]
pub struct MemoryArgs {
    #[arg(long)]
    documents: usize,
    #[arg(long)]
    sketches_on_heap: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run_memory(args: MemoryArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let scratch = std::env::temp_dir();
    let sketch_dir = (!args.sketches_on_heap).then_some(scratch.as_path());
    let figures = bench::memory::memory(args.documents, config, sketch_dir)?;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(ExitCode::SUCCESS)
}

pub fn run_lookup(args: LookupArgs) -> anyhow::Result<ExitCode> {
    let layout = match args.tables {
        Some(tables) => BlockLayout::with_tables(args.max_distance, tables)?,
        None => BlockLayout::new(args.max_distance)?,
    };
    let figures = bench::lookup(args.stored, args.queries, args.scans, layout)?;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(ExitCode::SUCCESS)
}
