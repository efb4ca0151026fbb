//! Default mode's memory per live document at scale: a forest built from generated news-like
//! texts, every document live, with heap and resident memory read before and after.

use std::path::Path;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;

use crate::Result;
use crate::article::Article;
use crate::bench::process_status_bytes;
use crate::config::{DedupConfig, Mode};
use crate::dedup::Deduplicator;
use crate::forest::{Signature, Timestamp};

/// What [`memory`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// Documents placed, all live at the end.
    pub documents: usize,
    /// Forest nodes (distinct fingerprints) among them.
    pub nodes: usize,
    /// Of the documents, those generated as an edited copy of a recent one.
    pub copies_generated: usize,
    /// Documents that joined a cluster.
    pub duplicates: usize,
    /// Whether sketches were kept in mapped files (else on the heap).
    pub sketches_mapped: bool,
    /// Mean hashes a sketch kept.
    pub mean_sketch_hashes: f64,
    /// Heap the forest reports holding (by capacity), per live document.
    pub heap_bytes_per_document: f64,
    /// The same, per node.
    pub heap_bytes_per_node: f64,
    /// Anonymous resident memory the process gained (the heap as the kernel sees it,
    /// allocator overhead included), per live document (Linux only).
    pub anonymous_rss_bytes_per_document: Option<f64>,
    /// File-backed resident memory the process gained (the page cache's share of the mapped
    /// sketch files that is mapped in right now), per live document (Linux only).
    pub file_rss_bytes_per_document: Option<f64>,
    /// Bytes of mapped sketch files, per live document (disk, not heap).
    pub mapped_bytes_per_document: f64,
    /// Wall time of signing and placing, seconds.
    pub seconds: f64,
    /// Documents signed and placed per second (signing on every core, placing on one).
    pub documents_per_second: f64,
}

/// Documents signed at once (in parallel), then placed in order.
const BATCH: usize = 20_000;

/// Documents that arrive in one second of event time: about 1.4 million a day, the platform's
/// rate (the expiry queue keeps one slot a second, so the rate moves its cost per document).
const DOCUMENTS_PER_SECOND: usize = 16;

/// Of every hundred documents, how many are edited copies of a recent one.
const COPIES_PERCENT: u32 = 20;

/// Builds a default-mode forest of `documents` generated documents, all live, with sketches
/// in files of `sketch_dir` (or on the heap, when `None`), printing progress to stderr; the
/// forest's memory per document.
pub fn memory(
    documents: usize,
    config: DedupConfig,
    sketch_dir: Option<&Path>,
) -> Result<MemoryReport> {
    let config = all_live(config);
    let mut dedup = match sketch_dir {
        Some(dir) => Deduplicator::with_sketches_in(config, dir)?,
        None => Deduplicator::new(config)?,
    };
    let mut texts = NewsLikeTexts::new(0x6d65_6d6f);
    let before = ProcessMemory::read();
    let start = Instant::now();
    let Grown {
        placed,
        duplicates,
        hashes,
    } = grow(&mut dedup, &mut texts, documents, "memory")?;
    let seconds = start.elapsed().as_secs_f64();
    let after = ProcessMemory::read();
    let stats = dedup.stats();
    let per_document = |bytes: f64| bytes / placed.max(1) as f64;
    let gained = |field: fn(&ProcessMemory) -> u64| {
        let (before, after) = (before.as_ref()?, after.as_ref()?);
        Some(per_document(
            field(after).saturating_sub(field(before)) as f64
        ))
    };
    Ok(MemoryReport {
        documents: placed,
        nodes: stats.nodes,
        copies_generated: texts.copies,
        duplicates,
        sketches_mapped: sketch_dir.is_some(),
        mean_sketch_hashes: hashes as f64 / placed.max(1) as f64,
        heap_bytes_per_document: per_document(stats.heap_bytes as f64),
        heap_bytes_per_node: stats.heap_bytes as f64 / stats.nodes.max(1) as f64,
        anonymous_rss_bytes_per_document: gained(|memory| memory.anonymous),
        file_rss_bytes_per_document: gained(|memory| memory.file),
        mapped_bytes_per_document: per_document(stats.mapped_bytes as f64),
        seconds,
        documents_per_second: placed as f64 / seconds,
    })
}

/// Default mode with `config`'s other settings and a window that keeps every generated
/// document live.
pub(super) fn all_live(config: DedupConfig) -> DedupConfig {
    DedupConfig {
        mode: Mode::Default,
        window: std::time::Duration::from_secs(100 * 365 * 86_400),
        ..config
    }
}

/// What [`grow`] placed.
pub(super) struct Grown {
    pub(super) placed: usize,
    pub(super) duplicates: usize,
    /// Sketch hashes over all documents.
    pub(super) hashes: usize,
}

/// The event time of the `placed`-th generated document.
pub(super) fn generated_time(placed: usize) -> Timestamp {
    1_700_000_000 + (placed / DOCUMENTS_PER_SECOND) as Timestamp
}

/// Signs `count` of `texts`' next texts, in parallel.
pub(super) fn sign_next(
    dedup: &Deduplicator,
    texts: &mut NewsLikeTexts,
    count: usize,
) -> Vec<Signature> {
    let batch: Vec<String> = (0..count).map(|_| texts.next_text()).collect();
    let signer = dedup.signer();
    batch
        .into_par_iter()
        .map(|content| {
            signer.sign(&Article {
                content,
                ..Article::default()
            })
        })
        .collect()
}

/// Places `documents` generated documents in `dedup`, signed in parallel batches, reporting
/// progress as `part` on stderr every million.
pub(super) fn grow(
    dedup: &mut Deduplicator,
    texts: &mut NewsLikeTexts,
    documents: usize,
    part: &str,
) -> Result<Grown> {
    let start = Instant::now();
    let (mut placed, mut duplicates, mut hashes) = (0usize, 0usize, 0usize);
    while placed < documents {
        for signature in sign_next(dedup, texts, BATCH.min(documents - placed)) {
            hashes += signature
                .sketch
                .as_ref()
                .map_or(0, |sketch| sketch.hashes().len());
            duplicates += usize::from(
                dedup
                    .place(signature, generated_time(placed))?
                    .is_duplicate(),
            );
            placed += 1;
        }
        if placed % 1_000_000 < BATCH || placed == documents {
            eprintln!(
                "bench: {part}: {placed} documents, {:.0} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
    Ok(Grown {
        placed,
        duplicates,
        hashes,
    })
}

/// Resident memory of this process by kind (Linux only).
struct ProcessMemory {
    anonymous: u64,
    file: u64,
}

impl ProcessMemory {
    fn read() -> Option<ProcessMemory> {
        Some(ProcessMemory {
            anonymous: process_status_bytes(&["RssAnon"])?,
            file: process_status_bytes(&["RssFile", "RssShmem"])?,
        })
    }
}

/// An endless stream of generated news-like Chinese texts of about 300 characters (a dozen
/// sentences of common characters), a fifth of them edited copies of one of the last
/// thousand: a prefix added, a sentence dropped, a character changed.
pub(super) struct NewsLikeTexts {
    rng: SmallRng,
    recent: Vec<String>,
    next_recent: usize,
    pub(super) copies: usize,
}

/// Texts kept to copy from.
const RECENT: usize = 1_000;

/// The characters texts are made of: the first 3,500 of the CJK block, which holds the most
/// common ones.
const CHARACTERS: u32 = 3_500;

impl NewsLikeTexts {
    pub(super) fn new(seed: u64) -> Self {
        NewsLikeTexts {
            rng: SmallRng::seed_from_u64(seed),
            recent: Vec::with_capacity(RECENT),
            next_recent: 0,
            copies: 0,
        }
    }

    fn next_text(&mut self) -> String {
        let text = match self.recent.is_empty() || self.rng.random_range(0..100) >= COPIES_PERCENT {
            true => self.original(),
            false => {
                self.copies += 1;
                let source = self.recent[self.rng.random_range(0..self.recent.len())].clone();
                self.edited(&source)
            }
        };
        if self.recent.len() < RECENT {
            self.recent.push(text.clone());
        } else {
            self.recent[self.next_recent] = text.clone();
            self.next_recent = (self.next_recent + 1) % RECENT;
        }
        text
    }

    fn character(&mut self) -> char {
        char::from_u32(0x4e00 + self.rng.random_range(0..CHARACTERS)).unwrap_or('中')
    }

    fn original(&mut self) -> String {
        let mut text = String::new();
        for _ in 0..self.rng.random_range(8..16) {
            for _ in 0..self.rng.random_range(14..32) {
                text.push(self.character());
            }
            text.push(if self.rng.random_bool(0.3) {
                '，'
            } else {
                '。'
            });
        }
        text
    }

    fn edited(&mut self, source: &str) -> String {
        match self.rng.random_range(0..3) {
            0 => format!("转发：{source}（来源：新华网）"),
            1 => {
                // The last sentence dropped.
                let body = source.trim_end_matches('。');
                match body.rfind('。') {
                    Some(end) => body[..end + '。'.len_utf8()].to_owned(),
                    None => source.to_owned(),
                }
            }
            _ => {
                let mut characters: Vec<char> = source.chars().collect();
                let at = self.rng.random_range(0..characters.len().max(1));
                if let Some(slot) = characters.get_mut(at) {
                    *slot = self.character();
                }
                characters.into_iter().collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_keeps_everything_live_and_finds_copies() {
        let dir = tempfile::tempdir().unwrap();
        let report = memory(3_000, DedupConfig::default(), Some(dir.path())).unwrap();
        assert_eq!(report.documents, 3_000);
        assert!(report.copies_generated > 300, "{report:?}");
        // Most copies are found (some edits of a short source change too much to verify).
        assert!(
            report.duplicates * 10 > report.copies_generated * 8,
            "{report:?}"
        );
        assert!(report.mapped_bytes_per_document > 0.0 && report.mean_sketch_hashes > 100.0);
    }
}
