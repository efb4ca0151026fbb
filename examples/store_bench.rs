//! Inserts per second and scan latency of the forest on a Redis Cluster, next to the in-memory
//! store, and Redis's bytes per fingerprint (the `INFO memory` delta).
//!
//! ```sh
//! scripts/redis-cluster.sh start
//! cargo run --release --example store_bench -- \
//!     --store redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     --documents 50000 --writers 8 [--in-flight 32] [--mode seed]
//! ```
//!
//! `--in-flight N` gives each writer N inserts in flight at once (a `Pipeline` of N
//! connections, its share placed in batches of 500, in order), as a coordinator does; the
//! round trips are then counted for all inserts together.
//!
//! The documents are generated news-like texts (stories of 1 to 10 reposts, shuffled), signed by the
//! library's own pipeline, so default mode stores real sketches. Each run writes under a key
//! prefix of its own and deletes nothing: flush the cluster between runs when memory matters.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tantivy_dedup::bench::percentile;
use tantivy_dedup::dedup::Signer;
use tantivy_dedup::forest::redis::{RedisAddress, RedisStore};
use tantivy_dedup::forest::{
    ForestStore, Pipeline, PlacementKind, Signature, StoreError, Timestamp, new_token, place,
};
use tantivy_dedup::{Article, DedupConfig, Forest, Mode};

const T0: Timestamp = 1_750_000_000;

struct Options {
    store: String,
    documents: usize,
    writers: usize,
    in_flight: usize,
    mode: Mode,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        store: String::new(),
        documents: 50_000,
        writers: 8,
        in_flight: 1,
        mode: Mode::Default,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--store" => options.store = value()?,
            "--documents" => {
                options.documents = value()?.parse().map_err(|e| format!("--documents: {e}"))?
            }
            "--writers" => {
                options.writers = value()?.parse().map_err(|e| format!("--writers: {e}"))?
            }
            "--in-flight" => {
                options.in_flight = value()?.parse().map_err(|e| format!("--in-flight: {e}"))?
            }
            "--mode" => {
                options.mode = match value()?.as_str() {
                    "seed" => Mode::Seed,
                    "default" => Mode::Default,
                    other => return Err(format!("--mode: seed or default, not {other}")),
                }
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; see the file's doc comment"
                ));
            }
        }
    }
    if options.store.is_empty() {
        return Err("--store redis://HOST:PORT,... is required".into());
    }
    Ok(options)
}

/// Stories of 1 to 10 reposts (header, source line, a changed character, a cut sentence).
fn signatures(config: &DedupConfig, count: usize) -> Vec<Signature> {
    const VOCABULARY: &str = "国家发展改革委员会今日召开新闻发布会介绍经济运行情况记者从有关部门获悉\
        全省各地持续推进重点项目建设工业生产保持稳定增长消费市场回暖明显农业农村工作扎实推进\
        科技创新能力不断提升城乡居民收入稳步增加生态环境质量持续改善交通运输网络加快完善";
    let characters: Vec<char> = VOCABULARY.chars().collect();
    let signer = Signer::new(config);
    let mut rng = SmallRng::seed_from_u64(5);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut base = String::new();
        for _ in 0..rng.random_range(8..16) {
            for _ in 0..rng.random_range(14..31) {
                base.push(characters[rng.random_range(0..characters.len())]);
            }
            base.push('。');
        }
        for copy in 0..rng.random_range(1..=10) {
            let content = match copy % 3 {
                0 => base.clone(),
                1 => format!("【转载】{base}"),
                _ => format!("{base}（来源：新华网）"),
            };
            let article = Article {
                id: String::new(),
                content,
                ..Default::default()
            };
            out.push(signer.sign(&article));
        }
    }
    out.truncate(count);
    // Reposts arrive spread over the stream, as in a feed, not back to back.
    out.shuffle(&mut rng);
    out
}

/// `used_memory` summed over the cluster's masters.
fn used_memory(address: &RedisAddress) -> Result<u64, Box<dyn std::error::Error>> {
    let mut total = 0;
    for node in &address.nodes {
        let mut connection = redis::Client::open(node.as_str())?.get_connection()?;
        let info: String = redis::cmd("INFO").arg("memory").query(&mut connection)?;
        total += info
            .lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("no used_memory in INFO memory of {node}"))?;
    }
    Ok(total)
}

/// Latencies (ms) of `edges()` for the first `queries` signatures, sorted.
fn scan_latencies(
    store: &mut dyn ForestStore,
    signatures: &[Signature],
    queries: usize,
) -> Result<Vec<f64>, StoreError> {
    let mut latencies = signatures
        .iter()
        .take(queries)
        .map(|signature| {
            let start = Instant::now();
            let edges =
                store.edges(signature.fingerprint, signature.sketch.as_ref(), &|_| false)?;
            std::hint::black_box(edges);
            Ok(start.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<Vec<f64>, StoreError>>()?;
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let config = DedupConfig {
        mode: options.mode,
        ..Default::default()
    };
    let signatures = Arc::new(signatures(&config, options.documents));
    println!(
        "{} documents, mode {:?}, {} writers, {} in flight each",
        signatures.len(),
        options.mode,
        options.writers,
        options.in_flight
    );

    let mut forest = match config.verifier() {
        Some(verifier) => {
            Forest::with_verifier(config.max_distance, config.window_seconds(), verifier)?
        }
        None => Forest::new(config.max_distance, config.window_seconds())?,
    };
    let start = Instant::now();
    for (i, signature) in signatures.iter().enumerate() {
        forest.place(signature.clone(), T0 + i as Timestamp / 100);
    }
    let memory_rate = signatures.len() as f64 / start.elapsed().as_secs_f64();
    let latencies = scan_latencies(&mut forest, &signatures, 5_000)?;
    println!(
        "in memory: {memory_rate:.0} inserts/s (one writer), scan p50 {:.4} ms p99 {:.4} ms, {} nodes",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        forest.stats().nodes
    );

    let mut address = RedisAddress::parse(&options.store)?;
    address.prefix = format!("bench{}:", std::process::id());
    let before = used_memory(&address)?;
    let start = Instant::now();
    let writers: Vec<_> = (0..options.writers)
        .map(|writer| {
            let signatures = Arc::clone(&signatures);
            let writers = options.writers;
            if options.in_flight > 1 {
                let stores = RedisStore::connect_several(&address, &config, options.in_flight)?
                    .into_iter()
                    .map(|store| Box::new(store) as Box<dyn ForestStore + Send>)
                    .collect();
                let mut pipeline = Pipeline::new(stores)?;
                return Ok(std::thread::spawn(move || -> Result<RoundTrips, String> {
                    let share: Vec<(Signature, Timestamp)> = (writer..signatures.len())
                        .step_by(writers)
                        .map(|i| (signatures[i].clone(), T0 + i as Timestamp / 100))
                        .collect();
                    let mut round_trips = RoundTrips::default();
                    for batch in share.chunks(500) {
                        for placement in pipeline
                            .place_all(batch)
                            .map_err(|error| error.to_string())?
                        {
                            round_trips.add(placement.kind, 0);
                        }
                    }
                    round_trips.total = pipeline.stats().round_trips;
                    Ok(round_trips)
                }));
            }
            let mut store = RedisStore::connect(&address, &config)?;
            Ok(std::thread::spawn(move || -> Result<RoundTrips, String> {
                let mut round_trips = RoundTrips::default();
                for i in (writer..signatures.len()).step_by(writers) {
                    let before = store.round_trips();
                    let placement = place(
                        &mut store,
                        &signatures[i],
                        T0 + i as Timestamp / 100,
                        new_token(),
                    )
                    .map_err(|error| error.to_string())?;
                    round_trips.add(placement.kind, store.round_trips() - before);
                }
                Ok(round_trips)
            }))
        })
        .collect::<Result<_, tantivy_dedup::forest::StoreError>>()?;
    let mut round_trips = RoundTrips::default();
    for writer in writers {
        round_trips.merge(&writer.join().map_err(|_| "a writer panicked")??);
    }
    let redis_rate = signatures.len() as f64 / start.elapsed().as_secs_f64();
    let after = used_memory(&address)?;
    let mut store = RedisStore::connect(&address, &config)?;
    let nodes = store.dump()?.len();
    let latencies = scan_latencies(&mut store, &signatures, 5_000)?;
    println!(
        "redis cluster: {redis_rate:.0} inserts/s ({} writers), scan p50 {:.3} ms p99 {:.3} ms, {nodes} nodes, {:.0} bytes per fingerprint (used_memory {} -> {} bytes)",
        options.writers,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        (after.saturating_sub(before)) as f64 / nodes.max(1) as f64,
        before,
        after
    );
    println!("round trips per insert: {round_trips}");
    Ok(())
}

/// Round trips to the cluster ([`RedisStore::round_trips`]) and inserts, by what the insert
/// did: the paths of the protocol cost different numbers of steps.
#[derive(Default)]
struct RoundTrips {
    /// Inserts and round trips: joined an existing node, made a new root, made a new leaf.
    by_kind: [(u64, u64); 3],
    /// With several inserts in flight, their round trips together (not told apart by kind).
    total: u64,
}

impl RoundTrips {
    fn slot(kind: PlacementKind) -> usize {
        match kind {
            PlacementKind::ExistingNode => 0,
            // A resumed story's root is made as a new one is.
            PlacementKind::NewRoot | PlacementKind::ResumedRoot => 1,
            PlacementKind::NewLeaf => 2,
        }
    }

    fn add(&mut self, kind: PlacementKind, round_trips: u64) {
        let (inserts, total) = &mut self.by_kind[Self::slot(kind)];
        *inserts += 1;
        *total += round_trips;
    }

    fn merge(&mut self, other: &RoundTrips) {
        for (mine, theirs) in self.by_kind.iter_mut().zip(other.by_kind) {
            mine.0 += theirs.0;
            mine.1 += theirs.1;
        }
        self.total += other.total;
    }
}

impl std::fmt::Display for RoundTrips {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mean = |(inserts, total): (u64, u64)| total as f64 / inserts.max(1) as f64;
        let all = self
            .by_kind
            .iter()
            .fold((0, 0), |(inserts, total), &(i, t)| (inserts + i, total + t));
        let [existing, root, leaf] = self.by_kind;
        if self.total > 0 {
            return write!(
                formatter,
                "{:.2} (inserts in flight: not told apart by kind; existing node {} inserts, new root {}, new leaf {})",
                mean((all.0, self.total)),
                existing.0,
                root.0,
                leaf.0
            );
        }
        write!(
            formatter,
            "{:.2} (existing node {:.2} over {} inserts, new root {:.2} over {}, new leaf {:.2} over {})",
            mean(all),
            mean(existing),
            existing.0,
            mean(root),
            root.0,
            mean(leaf),
            leaf.0
        )
    }
}
