//! The command line: argument definitions and one small function per command, each a thin
//! driver over the library.

mod bench;
mod copy;
mod dedup;
mod delete;
mod eval;
mod ingest;
mod load;
mod query;
mod serve;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use tantivy_dedup::config::Config;
use tantivy_dedup::forest::SharedForest;
use tantivy_dedup::forest::redis::RedisAddress;
use tantivy_dedup::{DedupConfig, Mode};

/// Near-duplicate detection and story clustering for Chinese news, on top of Tantivy.
#[derive(Parser)]
#[command(name = "tantivy-dedup", version, about, long_about = None)]
#[command(after_help = "Examples:\n  \
    tantivy-dedup serve --index news.idx --addr 127.0.0.1:7700\n  \
    tantivy-dedup openapi > openapi.json\n  \
    tantivy-dedup ingest --index news.idx articles.jsonl.gz\n  \
    tantivy-dedup load --url http://127.0.0.1:7700 articles.jsonl.gz\n  \
    tantivy-dedup search --index news.idx 防汛 --sort similar_desc\n  \
    tantivy-dedup similar --index news.idx ARTICLE_ID\n  \
    tantivy-dedup near-duplicates --index news.idx \"要发布的正文……\"\n  \
    tantivy-dedup delete --index news.idx ARTICLE_ID\n  \
    tantivy-dedup stats --index news.idx\n  \
    tantivy-dedup check --index news.idx\n  \
    tantivy-dedup dedup articles.jsonl.gz > decisions.jsonl\n  \
    cat articles.jsonl | tantivy-dedup dedup - --mode seed\n  \
    tantivy-dedup eval labeled.jsonl.gz --mode seed\n  \
    tantivy-dedup bench --only fingerprint --corpus news.jsonl.gz")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service over an index directory: ingest with durable answers, list pages,
    /// detail pages, near-duplicate checks, statistics and Prometheus metrics.
    ///
    /// Writes go through one ordered writer and are answered after the commit that makes them
    /// durable and searchable (commits are grouped, see --commit-delay). Prints "listening on
    /// http://HOST:PORT" on stdout once ready; logs go to stderr (level from RUST_LOG, default
    /// info). Ctrl-C or SIGTERM stops it after committing what is queued.
    Serve(serve::ServeArgs),
    /// Print the OpenAPI 3.1 document of the HTTP API: what `serve` answers at /openapi.json,
    /// without a server, to validate it or to generate a client from it.
    Openapi,
    /// Index articles: fingerprint each, place it in its cluster, and add it to a Tantivy
    /// index on disk (created if missing; reopening replays its history into the forest).
    ///
    /// Each input line is an article: {"id", "content", "title"?, "source"?, "url"?,
    /// "published_at"?}. Re-ingesting an id replaces that document; an identical article
    /// changes nothing and is counted as unchanged. Prints a summary; a bad line is reported on
    /// stderr with its number and skipped, and the exit status is then 1; so is it when a file
    /// cannot be read to its end (cut short, a broken gzip stream), after committing the
    /// documents read before. Ctrl-C or SIGTERM stops it after committing what was placed,
    /// with exit status 130.
    Ingest(ingest::IngestArgs),
    /// Send articles to a running server (`serve`) in gzip-compressed batches: what `ingest`
    /// does to an index directory, through the HTTP API.
    ///
    /// Each batch is answered once committed; a busy server (503) is waited for, and a batch
    /// left unanswered (a dropped connection, a restart) is sent again, which is safe: a
    /// document sent again unchanged changes nothing and is counted as unchanged. Prints a
    /// summary; each refused line is reported on stderr with its number, and the exit status
    /// is then 1.
    Load(load::LoadArgs),
    /// A list page: keyword search with one result per cluster (story), its number of similar
    /// articles and its sources.
    Search(query::SearchArgs),
    /// A detail page: the other articles of a document's cluster, earliest first.
    Similar(query::SimilarArgs),
    /// A story page: when and where a story spread. Its first outlet, each outlet's articles,
    /// the articles per hour (or `--histogram` interval), and its members, each with the
    /// member it came in through and the evidence (what `GET /v1/stories/{root}` answers).
    Story(query::StoryArgs),
    /// Check before publishing: the indexed near-duplicates of a text that is not indexed, by
    /// the rule the clusters follow, nearest first (what `POST /v1/near-duplicates` answers).
    NearDuplicates(query::NearDuplicatesArgs),
    /// Delete documents by id and commit. Their clusters keep their other documents; a
    /// cluster's root hash stays its id even when the document it came from is deleted. Takes
    /// the index's writer lock: with a server running, use `DELETE /v1/documents/{id}`.
    Delete(delete::DeleteArgs),
    /// Document, cluster and segment counts of an index.
    Stats(query::StatsArgs),
    /// Copy a running replica's last commit into a new index directory, to start a new
    /// replica of its shard from (`serve --shard I/N --replica NAME`); the sibling goes on
    /// writing meanwhile, and the new replica then applies the shard's log from the commit
    /// copied.
    ///
    /// Example: tantivy-dedup copy-replica --from http://127.0.0.1:7711 --replica c --index
    /// shard-0-c
    CopyReplica(copy::CopyReplicaArgs),
    /// Read every file of an index and report the damaged ones: each file's checksum, every
    /// stored document and fast field value, and the forest's replay.
    ///
    /// Every open already refuses an index with a file missing or cut short; only this finds
    /// garbage inside a file. Prints what it read and each damaged file; the exit status is 1
    /// when anything is damaged (restore the index from a backup). Takes the index's writer
    /// lock: stop the server or `ingest` writing to it first.
    Check(query::CheckArgs),
    /// Cluster a JSON Lines file without an index: one JSON decision a line, in input order.
    ///
    /// Each input line is an article: {"id", "content", "title"?, "source"?, "url"?,
    /// "published_at"?}. Each output line is {"id", "simhash", "root", "duplicate"}, hashes as
    /// 16 hex digits; `root` is the cluster id and `duplicate` says whether an earlier article
    /// of the same cluster came first. A bad line is reported on stderr with its number and
    /// skipped; the exit status is then 1.
    Dedup(dedup::DedupArgs),
    /// Score clustering on a labeled file: pairwise precision, recall and F1, overall, for long
    /// (>= 200 characters) and short texts, and recall per `kind`.
    ///
    /// The documents run in file order through the same pipeline as `dedup`. A pair is a "true
    /// pair" when both documents have the same `cluster` label, a "predicted pair" when they
    /// were given the same root. The long row scores the pairs of two long texts, the short row
    /// those of two short ones; a pair of one long and one short text counts in `all` only.
    /// Recall per kind is over the true pairs with at least one document of that kind.
    ///
    /// Example: tantivy-dedup eval ../shared/data/neardup-dev.jsonl.gz --mode seed (the
    /// project's labeled set, kept beside the clone and not shipped with the repository: README
    /// "Evaluation data" says where it comes from)
    Eval(eval::EvalArgs),
    /// Measure fingerprinting speed, lookup latency and memory, and `dedup` throughput, and
    /// print the figures as JSON.
    Bench(bench::BenchArgs),
    /// One lookup benchmark size in a fresh process (used by `bench`, so that each size's
    /// memory is measured from a clean start).
    #[command(hide = true)]
    BenchLookup(bench::LookupArgs),
    /// The memory benchmark in a fresh process (used by `bench`, so that the process's
    /// resident memory before the forest is a clean start).
    #[command(hide = true)]
    BenchMemory(bench::MemoryArgs),
}

/// Where the forest lives: in memory (the default), or on a Redis Cluster shared by several
/// processes.
#[derive(Args)]
struct StoreArgs {
    /// Keep the fingerprint tables and forest on a Redis Cluster shared with other processes,
    /// e.g. `redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002` (seed
    /// nodes; scripts/redis-cluster.sh starts a local one). Each ingesting process writes an
    /// index of its own, not a shard of one index (for that, `serve --shard` behind a
    /// `serve --coordinator`); all of them must use the same [dedup] settings (docs/scaling.md)
    /// [default: in memory, rebuilt from the index on open]
    #[arg(long, value_name = "URLS")]
    store: Option<String>,
    /// What every key in the store starts with, so that several deployments (or test runs)
    /// can share one Redis Cluster: all processes of one deployment must say the same
    #[arg(long, value_name = "PREFIX", default_value = "td:", requires = "store")]
    store_prefix: String,
}

/// How many documents a writer keeps in flight on the shared store (`dedup`, `ingest`).
#[derive(Args)]
struct InFlightArgs {
    /// With --store: how many documents are in flight on the store at once, each on a
    /// connection of its own that shares one link to each node with the others; decisions
    /// are those of placing the documents one after the other (docs/scaling.md, "Several
    /// inserts in flight"). 1 places them one at a time
    #[arg(long, value_name = "N", default_value_t = 32, requires = "store",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    in_flight: u16,
}

impl StoreArgs {
    fn address(&self) -> anyhow::Result<Option<RedisAddress>> {
        let address = self.store.as_deref().map(RedisAddress::parse).transpose()?;
        Ok(address.map(|address| RedisAddress {
            prefix: self.store_prefix.clone(),
            ..address
        }))
    }

    /// The shared forest an index connects to, if any.
    fn shared(&self) -> anyhow::Result<Option<Arc<dyn SharedForest>>> {
        Ok(self.address()?.map(shared_forest))
    }
}

/// A Redis address as the shared forest an index connects to.
fn shared_forest(address: RedisAddress) -> Arc<dyn SharedForest> {
    Arc::new(address)
}

/// Where the dedup settings come from: a TOML file, then flags over it.
#[derive(Args)]
struct ConfigArgs {
    /// Settings file such as schema/news.toml ([dedup], [fields.*], [index], [server]) [default:
    /// built-in settings, the same as schema/news.toml; commands on an existing index use the
    /// settings it was created with]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// `seed`: exactly the documented simhash algorithm, nothing added; `default`: the simhash
    /// and shingle keys propose candidates, shingle sketches verify them (README "Quality")
    /// [default: the config's, else default]
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(Mode::ALL.map(|(name, _)| name)))]
    mode: Option<String>,
}

impl ConfigArgs {
    /// The dedup settings: the file's, or the defaults, with the flags over them.
    fn load(&self) -> anyhow::Result<DedupConfig> {
        Ok(self.load_if_given()?.unwrap_or_default().dedup)
    }

    /// The whole settings file with the flags over it; `None` when neither was given (an
    /// existing index then keeps its own settings).
    fn load_if_given(&self) -> anyhow::Result<Option<Config>> {
        let mut config = match &self.config {
            Some(path) => Config::from_path(path)?,
            None if self.mode.is_none() => return Ok(None),
            None => Config::default(),
        };
        if let Some(mode) = &self.mode {
            config.dedup.mode = mode.parse::<Mode>()?;
        }
        // Before anything is split: the commands that fingerprint without an index need it.
        if let Some(user_dict) = &config.index.user_dict {
            tantivy_dedup::text::use_user_dictionary(user_dict)?;
        }
        Ok(Some(config))
    }
}

/// Writes to standard output through `write`; a closed pipe (`| head`) is the reader's choice,
/// not a failure, and ends quietly.
fn print(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<ExitCode> {
    match write(&mut io::stdout().lock()) {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A count with its noun in the right number: `1 document`, `2 documents`.
fn counted(count: u64, singular: &str, plural: &str) -> String {
    format!("{count} {}", if count == 1 { singular } else { plural })
}

/// A size in bytes in the binary unit its magnitude calls for, to one decimal: `512 B`,
/// `19.2 KiB`, `44.5 MiB`, `1.3 GiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // 1023.95 would print as 1024.0 of the smaller unit.
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Runs the command line; the binary's `main` is just this.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Ingest(_) | Command::Dedup(_) | Command::Eval(_) | Command::Bench(_)
    ) {
        crate::allocator::keep_freed_memory();
    }
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Openapi => serve::openapi(),
        Command::Ingest(args) => ingest::run(args),
        Command::Load(args) => load::run(args),
        Command::Search(args) => query::search(args),
        Command::Similar(args) => query::similar(args),
        Command::Story(args) => query::story(args),
        Command::NearDuplicates(args) => query::near_duplicates(args),
        Command::Delete(args) => delete::run(args),
        Command::Stats(args) => query::stats(args),
        Command::CopyReplica(args) => copy::run(args),
        Command::Check(args) => query::check(args),
        Command::Dedup(args) => dedup::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchLookup(args) => bench::run_lookup(args),
        Command::BenchMemory(args) => bench::run_memory(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("tantivy-dedup: error: {error:#}");
            ExitCode::from(2)
        }
    }
}
