//! The cost of a commit's cluster numbers: an index of generated documents, then commits of a
//! small batch of new documents and a few deletes, each followed by its generation's numbers
//! made from scratch ([`ClusterOrdinals::build`], what every commit paid before numbers were
//! kept) and brought up from the last generation's ([`ClusterNumbering`], what
//! [`DedupSearcher`](crate::engine::DedupSearcher) does now).

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;
use tantivy::index::SegmentId;

use crate::bench::Latency;
use crate::bench::engine::index_error;
use crate::config::{Config, Mode};
use crate::engine::{ClusterNumbering, ClusterOrdinals, DedupIndex, PreparedArticle, Preparer};
use crate::forest::Timestamp;
use crate::{Article, Result};

/// Characters the generated texts are drawn from: common in news, so that jieba segments
/// them into ordinary words and single characters.
const CHARACTERS: &str = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研";

/// Stories a repost may copy: the most recent ones.
const RECENT_STORIES: usize = 4096;

/// Documents generated, prepared (in parallel) and added at once while building.
const BUILD_BATCH: u64 = 50_000;

/// Documents between commits while building (several segments, merged in the background as
/// Tantivy's merge policy decides).
const BUILD_COMMIT: u64 = 200_000;

/// The first generated document's time; each next one is a second later.
const FIRST_TIME: Timestamp = 1_700_000_000;

/// One commit's figures.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CommitFigures {
    /// Documents of the segments its generation brought (new and merged).
    pub documents_read: u64,
    /// Milliseconds to bring the numbers up from the last generation's.
    pub kept_ms: f64,
    /// Milliseconds to make them from scratch.
    pub scratch_ms: f64,
}

/// The cost of each commit's cluster numbers at one index size.
#[derive(Debug, Clone, Serialize)]
pub struct OrdinalsReport {
    /// Documents added while building the index (the commits add more).
    pub documents: u64,
    /// Live documents (with a root) after the last commit.
    pub live_documents: u64,
    /// Clusters among them.
    pub clusters: usize,
    /// Segments after the last commit.
    pub segments: usize,
    /// Seconds to build the index (seed mode: the numbering does not depend on the mode, and
    /// seed mode's forest fits in memory at any size).
    pub build_seconds: f64,
    /// Milliseconds to number the built index from scratch once.
    pub first_numbering_ms: f64,
    /// New documents per commit.
    pub added_per_commit: usize,
    /// Deletes per commit (of random earlier documents, so mostly in old, large segments).
    pub deleted_per_commit: usize,
    /// Numbers made from scratch, every commit.
    pub scratch: Latency,
    /// Numbers brought up from the last generation, every commit.
    pub kept: Latency,
    /// The same, over the commits whose generation brought no segment merged in the
    /// background.
    pub kept_without_merge: Latency,
    /// The same, over the commits whose generation did (the merged documents are read).
    pub kept_with_merge: Latency,
    /// Documents of the segments each generation brought (new and merged), on average.
    pub documents_read_per_commit: f64,
    /// The commit whose kept numbers took longest.
    pub slowest_kept: CommitFigures,
    /// Whether both numberings counted the same documents and clusters at every commit.
    pub agree: bool,
}

/// Builds an index of `documents` generated documents in `dir` (removed first and after),
/// then makes `commits` commits of `added` new documents and `deleted` deletes, timing each
/// generation's cluster numbers from scratch and kept.
pub fn ordinals_per_commit(
    dir: &Path,
    settings: &Config,
    documents: u64,
    commits: usize,
    added: usize,
    deleted: usize,
) -> Result<OrdinalsReport> {
    let _ = std::fs::remove_dir_all(dir);
    let mut config = settings.clone();
    config.dedup.mode = Mode::Seed;
    let mut index = DedupIndex::create(dir, config)?;
    let preparer = index.preparer();
    let mut stories = Stories::new(17);
    let started = Instant::now();
    while stories.generated < documents {
        let batch = BUILD_BATCH.min(documents - stories.generated);
        add(&mut index, &preparer, &mut stories, batch)?;
        if stories.generated.is_multiple_of(BUILD_COMMIT) || stories.generated == documents {
            index.commit()?;
            let seconds = started.elapsed().as_secs_f64();
            eprintln!(
                "bench: ordinals: {} of {documents} documents in {seconds:.0} s ({:.0}/s)",
                stories.generated,
                stories.generated as f64 / seconds
            );
        }
    }
    let build_seconds = started.elapsed().as_secs_f64();

    let searcher = index.searcher();
    let mut numbering = ClusterNumbering::default();
    let tantivy = searcher.tantivy_searcher();
    let started = Instant::now();
    numbering.ordinals(&tantivy).map_err(index_error)?;
    let first_numbering_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut known = segment_ids(&tantivy);
    let mut rng = SmallRng::seed_from_u64(23);
    let (mut scratch, mut kept, mut with_merge, mut without_merge) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut read = 0u64;
    let mut slowest_kept = CommitFigures::default();
    let mut agree = true;
    let mut last = None;
    for commit in 1..=commits {
        add(&mut index, &preparer, &mut stories, added as u64)?;
        for _ in 0..deleted {
            let id = rng.random_range(0..stories.generated);
            index.delete(&Stories::id(id))?;
        }
        index.commit()?;
        let tantivy = searcher.tantivy_searcher();
        // The documents of the segments this generation brought: the commit's own (its
        // documents and tombstones), and any merged in the background since the last.
        let brought: u64 = tantivy
            .segment_readers()
            .iter()
            .filter(|segment| !known.contains(&segment.segment_id()))
            .map(|segment| u64::from(segment.max_doc()))
            .sum();
        known = segment_ids(&tantivy);
        read += brought;
        let started = Instant::now();
        let incremental = numbering.ordinals(&tantivy).map_err(index_error)?;
        let kept_ms = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let fresh = ClusterOrdinals::build(&tantivy).map_err(index_error)?;
        let scratch_ms = started.elapsed().as_secs_f64() * 1e3;
        agree &= (incremental.documents(), incremental.clusters())
            == (fresh.documents(), fresh.clusters());
        if kept_ms > slowest_kept.kept_ms {
            slowest_kept = CommitFigures {
                documents_read: brought,
                kept_ms,
                scratch_ms,
            };
        }
        scratch.push(scratch_ms);
        kept.push(kept_ms);
        if brought > (added + deleted) as u64 {
            with_merge.push(kept_ms);
        } else {
            without_merge.push(kept_ms);
        }
        if commit.is_multiple_of(10) || commit == commits {
            eprintln!(
                "bench: ordinals: commit {commit} of {commits}: {brought} documents read, \
                 kept {kept_ms:.2} ms, from scratch {scratch_ms:.1} ms"
            );
        }
        last = Some((incremental, tantivy.segment_readers().len()));
    }
    let (live_documents, clusters, segments) = match &last {
        Some((ordinals, segments)) => (ordinals.documents(), ordinals.clusters(), *segments),
        None => (0, 0, 0),
    };
    drop(last);
    index.close()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(OrdinalsReport {
        documents,
        live_documents,
        clusters,
        segments,
        build_seconds,
        first_numbering_ms,
        added_per_commit: added,
        deleted_per_commit: deleted,
        scratch: Latency::of(scratch),
        kept: Latency::of(kept),
        kept_without_merge: Latency::of(without_merge),
        kept_with_merge: Latency::of(with_merge),
        documents_read_per_commit: read as f64 / commits.max(1) as f64,
        slowest_kept,
        agree,
    })
}

fn segment_ids(searcher: &tantivy::Searcher) -> HashSet<SegmentId> {
    searcher
        .segment_readers()
        .iter()
        .map(|segment| segment.segment_id())
        .collect()
}

/// Generates `count` documents, prepares them in parallel and adds them in order.
fn add(
    index: &mut DedupIndex,
    preparer: &Preparer,
    stories: &mut Stories,
    count: u64,
) -> Result<()> {
    let articles: Vec<Article> = (0..count).map(|_| stories.next_article()).collect();
    let prepared: Vec<PreparedArticle> = articles
        .into_par_iter()
        .map(|article| preparer.prepare(article))
        .collect();
    for prepared in prepared {
        index.add(prepared)?;
    }
    Ok(())
}

/// Short generated news: half the documents start a story (a random sentence), the other half
/// repost a recent one word for word (recent ones far more often), so that clusters range
/// from one document to thousands.
struct Stories {
    rng: SmallRng,
    characters: Vec<char>,
    recent: VecDeque<String>,
    generated: u64,
}

impl Stories {
    fn new(seed: u64) -> Stories {
        Stories {
            rng: SmallRng::seed_from_u64(seed),
            characters: CHARACTERS.chars().collect(),
            recent: VecDeque::with_capacity(RECENT_STORIES),
            generated: 0,
        }
    }

    fn id(number: u64) -> String {
        format!("g{number}")
    }

    fn next_article(&mut self) -> Article {
        let content = match self.recent.len() {
            0 => self.new_story(),
            _ if self.rng.random_bool(0.5) => self.new_story(),
            recent => {
                let back = (recent as f64 * self.rng.random::<f64>().powi(3)) as usize;
                self.recent[recent - 1 - back.min(recent - 1)].clone()
            }
        };
        let article = Article {
            id: Stories::id(self.generated),
            content,
            published_at: Some(FIRST_TIME + self.generated as Timestamp),
            ..Article::default()
        };
        self.generated += 1;
        article
    }

    /// A sentence of two clauses of 6 to 11 characters.
    fn new_story(&mut self) -> String {
        let mut text = String::new();
        for end in ['，', '。'] {
            for _ in 0..self.rng.random_range(6..12) {
                text.push(self.characters[self.rng.random_range(0..self.characters.len())]);
            }
            text.push(end);
        }
        if self.recent.len() == RECENT_STORIES {
            self.recent.pop_front();
        }
        self.recent.push_back(text.clone());
        text
    }
}
