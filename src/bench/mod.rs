//! Measurements behind `tantivy-dedup bench` and the criterion benches: each function does the
//! work once, times it, and returns figures; nothing here asserts a speed.

pub mod engine;
pub mod http;
pub mod memory;
pub mod ordinals;
#[cfg(feature = "redis")]
pub mod replicas;
pub mod restart;
#[cfg(feature = "redis")]
pub mod shards;

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::article::{Article, ArticleError, ArticleReader};
use crate::config::DedupConfig;
use crate::dedup::Deduplicator;
use crate::forest::Forest;
use crate::index::BlockLayout;
use crate::input::{Lines, open};
use crate::text::Fingerprinter;
use crate::{Error, Fingerprint, Result};

/// Fingerprinting speed on one core.
#[derive(Debug, Clone, Serialize)]
pub struct FingerprintReport {
    /// Documents fingerprinted.
    pub documents: usize,
    /// UTF-8 bytes of their text.
    pub bytes: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Megabytes (10^6 bytes) of text per second.
    pub mb_per_second: f64,
    /// Documents per second.
    pub documents_per_second: f64,
}

/// Reads the `content` of up to `limit` articles of a JSON Lines file (lines that are not
/// articles are skipped).
pub fn load_contents(path: &Path, limit: Option<usize>) -> Result<Vec<String>> {
    let mut lines = Lines::new(open(path)?);
    let mut contents = Vec::new();
    while limit.is_none_or(|limit| contents.len() < limit) {
        let line = lines.next_line().map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let Some((_, line)) = line else { break };
        if let Ok(article) = line
            .map_err(ArticleError::from)
            .and_then(|line| Article::from_json_bytes(&line))
        {
            contents.push(article.content);
        }
    }
    Ok(contents)
}

/// Times fingerprinting `texts` on the calling thread (one core).
pub fn fingerprint_throughput(
    fingerprinter: &Fingerprinter,
    texts: &[String],
) -> FingerprintReport {
    // The dictionary (and IDF table) load once per process; keep that out of the timing.
    std::hint::black_box(fingerprinter.fingerprint("预热"));
    let bytes = texts.iter().map(String::len).sum();
    let start = Instant::now();
    for text in texts {
        std::hint::black_box(fingerprinter.fingerprint(text));
    }
    let seconds = start.elapsed().as_secs_f64();
    FingerprintReport {
        documents: texts.len(),
        bytes,
        seconds,
        mb_per_second: bytes as f64 / 1e6 / seconds,
        documents_per_second: texts.len() as f64 / seconds,
    }
}

/// Random fingerprints of which a share are planted near-duplicates of earlier ones.
pub struct PlantedFingerprints {
    rng: SmallRng,
    planted_share: f64,
    max_distance: u32,
    made: Vec<u64>,
}

impl PlantedFingerprints {
    /// A reproducible stream: `planted_share` (0 to 1) of the fingerprints are copies of an
    /// earlier one with 1 to `max_distance` bits flipped.
    pub fn new(seed: u64, planted_share: f64, max_distance: u32) -> Self {
        PlantedFingerprints {
            rng: SmallRng::seed_from_u64(seed),
            planted_share,
            max_distance,
            made: Vec::new(),
        }
    }

    /// `fingerprint` with `bits` distinct random bits flipped.
    pub fn flip(&mut self, fingerprint: u64, bits: u32) -> u64 {
        let mut mask = 0u64;
        while mask.count_ones() < bits {
            mask |= 1 << self.rng.random_range(0..64);
        }
        fingerprint ^ mask
    }

    /// The next fingerprint of the stream.
    pub fn next_fingerprint(&mut self) -> Fingerprint {
        let value = if !self.made.is_empty() && self.rng.random_bool(self.planted_share) {
            let original = self.made[self.rng.random_range(0..self.made.len())];
            let bits = self.rng.random_range(1..=self.max_distance.max(1));
            self.flip(original, bits)
        } else {
            self.rng.random()
        };
        self.made.push(value);
        Fingerprint(value)
    }

    /// A query: with probability `planted_share` within `max_distance + 1` bits of a fingerprint
    /// already made (so exactly-k and k+1 are both asked), else random.
    pub fn query(&mut self) -> Fingerprint {
        if !self.made.is_empty() && self.rng.random_bool(self.planted_share) {
            let original = self.made[self.rng.random_range(0..self.made.len())];
            let bits = self.rng.random_range(0..=self.max_distance + 1);
            Fingerprint(self.flip(original, bits))
        } else {
            Fingerprint(self.rng.random())
        }
    }

    /// Forgets what was made (to free its memory before measuring).
    pub fn forget(&mut self) {
        self.made = Vec::new();
    }
}

/// Lookups in a forest of `stored` fingerprints, against a linear scan of the same set.
#[derive(Debug, Clone, Serialize)]
pub struct LookupReport {
    /// Fingerprints stored.
    pub stored: usize,
    /// Radius `k`.
    pub max_distance: u32,
    /// Tables of the layout.
    pub tables: usize,
    /// The layout: blocks, and the bits of a key.
    pub layout: String,
    /// Inserts per second while building the forest (each one a lookup and a placement).
    pub inserts_per_second: f64,
    /// Lookups timed.
    pub queries: usize,
    /// Median lookup time, nanoseconds.
    pub p50_ns: f64,
    /// 99th-percentile lookup time, nanoseconds.
    pub p99_ns: f64,
    /// Mean lookup time, nanoseconds.
    pub mean_ns: f64,
    /// Mean fingerprints compared per lookup.
    pub mean_candidates: f64,
    /// Mean time of a linear popcount scan over all stored fingerprints, nanoseconds.
    pub linear_scan_ns: f64,
    /// `linear_scan_ns / mean_ns`.
    pub speedup: f64,
    /// Resident memory added by building the forest, per fingerprint (Linux only).
    pub rss_bytes_per_fingerprint: Option<f64>,
    /// Heap the index reports holding, per fingerprint.
    pub heap_bytes_per_fingerprint: f64,
    /// Whether lookups found exactly the fingerprints a linear scan finds, checked on up to
    /// `scans` queries with neighbours and as many without.
    pub agrees_with_scan: bool,
}

/// Resident set size of this process in bytes (Linux `/proc`; `None` elsewhere).
pub fn resident_bytes() -> Option<u64> {
    process_status_bytes(&["VmRSS"])
}

/// The sum of sizes that Linux's `/proc/self/status` gives in kB (such as `VmRSS` or
/// `RssAnon`), in bytes; `None` elsewhere, or when one is missing.
pub fn process_status_bytes(names: &[&str]) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    names.iter().try_fold(0, |sum, name| {
        let line = status.lines().find(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(':'))
        })?;
        let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(sum + kilobytes * 1024)
    })
}

/// Builds a forest over `layout` with `stored` fingerprints (1% planted near-duplicates, seed
/// mode: all at one time, nothing expires), then times `queries` lookups and `scans` linear
/// scans.
pub fn lookup(
    stored: usize,
    queries: usize,
    scans: usize,
    layout: BlockLayout,
) -> Result<LookupReport> {
    let max_distance = layout.max_distance();
    let (tables, description) = (layout.table_count(), layout.to_string());
    let mut stream = PlantedFingerprints::new(0x5eed, 0.01, max_distance);
    let before = resident_bytes();
    let mut forest = Forest::with_layout(layout, 7 * 86_400)?;
    let start = Instant::now();
    for _ in 0..stored {
        let fingerprint = stream.next_fingerprint();
        forest.place(fingerprint, 0);
    }
    let build_seconds = start.elapsed().as_secs_f64();
    let query_set: Vec<Fingerprint> = (0..queries).map(|_| stream.query()).collect();
    stream.forget();
    let rss = match (before, resident_bytes()) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before) as f64 / stored as f64),
        _ => None,
    };
    let heap = forest.stats().heap_bytes as f64 / stored as f64;

    let mut times = Vec::with_capacity(queries);
    let mut candidates = 0usize;
    let mut found_by_lookup = Vec::with_capacity(queries);
    for &query in &query_set {
        let start = Instant::now();
        let mut found = 0usize;
        forest.for_each_within(query, |_, _| found += 1);
        times.push(start.elapsed().as_nanos() as f64);
        found_by_lookup.push(std::hint::black_box(found));
        candidates += forest.candidates(query);
    }
    let flat: Vec<u64> = forest.fingerprints().map(|f| f.0).collect();
    let scans = scans.clamp(1, queries.max(1));
    let start = Instant::now();
    for query in query_set.iter().take(scans) {
        std::hint::black_box(linear_scan(&flat, *query, max_distance));
    }
    let linear_scan_ns = start.elapsed().as_nanos() as f64 / scans as f64;

    // Untimed check: the full result sets of the queries that found something (the planted
    // ones), and as many that found nothing, equal a scan's.
    let with_neighbours = query_set
        .iter()
        .zip(&found_by_lookup)
        .filter(|&(_, &found)| found > 0)
        .take(scans);
    let without = query_set
        .iter()
        .zip(&found_by_lookup)
        .filter(|&(_, &found)| found == 0)
        .take(scans);
    let agrees = with_neighbours.chain(without).all(|(&query, _)| {
        let mut by_lookup = Vec::new();
        forest.for_each_within(query, |fingerprint, _| by_lookup.push(fingerprint.0));
        by_lookup.sort_unstable();
        let mut by_scan: Vec<u64> = flat
            .iter()
            .copied()
            .filter(|&y| (query.0 ^ y).count_ones() <= max_distance)
            .collect();
        by_scan.sort_unstable();
        by_lookup == by_scan
    });

    times.sort_by(f64::total_cmp);
    let mean_ns = times.iter().sum::<f64>() / times.len().max(1) as f64;
    Ok(LookupReport {
        stored,
        max_distance,
        tables,
        layout: description,
        inserts_per_second: stored as f64 / build_seconds,
        queries,
        p50_ns: percentile(&times, 0.50),
        p99_ns: percentile(&times, 0.99),
        mean_ns,
        mean_candidates: candidates as f64 / queries.max(1) as f64,
        linear_scan_ns,
        speedup: linear_scan_ns / mean_ns,
        rss_bytes_per_fingerprint: rss,
        heap_bytes_per_fingerprint: heap,
        agrees_with_scan: agrees,
    })
}

/// How many of `stored` are within `max_distance` of `query`, by comparing against every one.
#[inline(never)]
pub fn linear_scan(stored: &[u64], query: Fingerprint, max_distance: u32) -> usize {
    crate::index::scan::count_within(stored, query.0, max_distance)
}

/// Times in milliseconds (of requests, commits, ...), summarised: how many, and percentiles.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Times measured.
    pub samples: usize,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest (like the percentiles, not a number, `null` in JSON, with no samples).
    pub max_ms: f64,
}

impl Latency {
    /// The summary of `millis`, in any order.
    pub fn of(mut millis: Vec<f64>) -> Self {
        millis.sort_by(f64::total_cmp);
        Latency {
            samples: millis.len(),
            p50_ms: percentile(&millis, 0.5),
            p90_ms: percentile(&millis, 0.9),
            p99_ms: percentile(&millis, 0.99),
            max_ms: millis.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// The value at quantile `q` of sorted `values` (nearest rank).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The `dedup` pipeline end to end on a file.
#[derive(Debug, Clone, Serialize)]
pub struct DedupReport {
    /// Documents decided.
    pub documents: usize,
    /// Lines that were not valid articles.
    pub rejected: usize,
    /// Documents that started a cluster (the rest joined one).
    pub clusters_started: usize,
    /// Nodes that expired during the run.
    pub expired_nodes: u64,
    /// Wall time, seconds, reading and parsing included.
    pub seconds: f64,
    /// Documents per second.
    pub documents_per_second: f64,
    /// Forest nodes (distinct fingerprints) alive at the end.
    pub nodes: usize,
    /// Heap the forest reports holding at the end (tables, expiry queue and, in default mode,
    /// sketches and key postings, by capacity), per node.
    pub heap_bytes_per_node: f64,
}

/// Runs [`Deduplicator::run`] over a file and times it.
pub fn dedup_throughput(path: &Path, config: DedupConfig) -> Result<DedupReport> {
    let mut dedup = Deduplicator::new(config)?;
    std::hint::black_box(dedup.fingerprint(&Article::default()));
    let (mut documents, mut rejected, mut clusters_started) = (0, 0, 0);
    let start = Instant::now();
    dedup
        .run(open(path)?, ArticleReader::default_schema(), |_, result| {
            match result {
                Ok(decision) => {
                    documents += 1;
                    clusters_started += usize::from(!decision.duplicate);
                }
                Err(_) => rejected += 1,
            }
            ControlFlow::Continue(())
        })
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
    let seconds = start.elapsed().as_secs_f64();
    let stats = dedup.forest().stats();
    Ok(DedupReport {
        documents,
        rejected,
        clusters_started,
        expired_nodes: stats.expired,
        seconds,
        documents_per_second: documents as f64 / seconds,
        nodes: stats.nodes,
        heap_bytes_per_node: stats.heap_bytes as f64 / stats.nodes.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&values, 1.0), 100.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn small_lookup_run_agrees_with_scan() {
        for tables in [4, 10] {
            let layout = BlockLayout::with_tables(3, tables).unwrap();
            let report = lookup(20_000, 500, 500, layout).unwrap();
            assert!(report.agrees_with_scan, "{tables} tables");
            assert_eq!((report.stored, report.tables), (20_000, tables));
        }
    }
}
