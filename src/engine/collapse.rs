//! The collapse collector: keyword hits grouped by cluster root, one representative each.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

use crate::Fingerprint;
use crate::engine::schema::{EVENT_TIME, ROOT};
use crate::forest::Timestamp;

/// A hasher for keys that are already hashes (roots): one multiplication to spread them.
#[derive(Default, Clone, Copy)]
pub struct RootHasher(u64);

impl Hasher for RootHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by root hash.
pub type RootMap<V> = HashMap<u64, V, BuildHasherDefault<RootHasher>>;

/// The matching documents of one cluster, as the collector saw them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollapsedCluster {
    /// The cluster's root hash.
    pub root: Fingerprint,
    /// The best score among its matching documents.
    pub score: Score,
    /// The best-scoring matching document (on equal scores, the first in index order).
    pub representative: DocAddress,
    /// How many of its documents match.
    pub hits: u64,
    /// The newest event time among its matching documents.
    pub newest: Timestamp,
}

impl CollapsedCluster {
    /// Takes in another document (or group of documents) of the same cluster.
    fn absorb(&mut self, other: &CollapsedCluster) {
        if other.score > self.score
            || (other.score == self.score && other.representative < self.representative)
        {
            self.score = other.score;
            self.representative = other.representative;
        }
        self.hits += other.hits;
        self.newest = self.newest.max(other.newest);
    }
}

/// What [`CollapseCollector`] returns: every matching cluster, in no particular order.
#[derive(Debug, Clone, Default)]
pub struct Collapsed {
    /// The clusters.
    pub clusters: Vec<CollapsedCluster>,
    /// Matching documents, over all clusters.
    pub total_hits: u64,
}

/// Groups matching documents by the `root` fast field: per cluster the best-scoring document,
/// its score, the number of hits and the newest hit's time. Sorting and pagination over
/// clusters, and cluster sizes, come after (see `DedupSearcher::search`), since they need the
/// whole grouping.
///
/// Documents without a root (tombstones) are skipped.
///
/// ```
/// use tantivy::query::AllQuery;
/// use tantivy_dedup::engine::{CollapseCollector, DedupIndex};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// for (id, text) in [("1", "今天北京天气晴朗，气温回升，适合出行。"), ("2", "今天北京天气晴朗，气温回升，适合出行。"), ("3", "央行宣布下调存款准备金率零点五个百分点。")] {
///     index.add_article(Article { id: id.into(), content: text.into(), ..Default::default() })?;
/// }
/// index.commit()?;
/// let collapsed = index.searcher().tantivy_searcher().search(&AllQuery, &CollapseCollector)?;
/// assert_eq!(collapsed.total_hits, 3);
/// assert_eq!(collapsed.clusters.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CollapseCollector;

impl Collector for CollapseCollector {
    type Fruit = Collapsed;
    type Child = CollapseSegmentCollector;

    fn for_segment(
        &self,
        segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<CollapseSegmentCollector> {
        Ok(CollapseSegmentCollector {
            segment_ord,
            roots: segment.fast_fields().u64(ROOT)?,
            times: segment.fast_fields().i64(EVENT_TIME)?,
            clusters: RootMap::default(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, segments: Vec<Vec<CollapsedCluster>>) -> tantivy::Result<Collapsed> {
        let capacity = segments.iter().map(Vec::len).max().unwrap_or(0);
        let mut merged: RootMap<CollapsedCluster> =
            RootMap::with_capacity_and_hasher(capacity, Default::default());
        for cluster in segments.into_iter().flatten() {
            match merged.entry(cluster.root.0) {
                Entry::Occupied(mut entry) => entry.get_mut().absorb(&cluster),
                Entry::Vacant(entry) => {
                    entry.insert(cluster);
                }
            }
        }
        let clusters: Vec<CollapsedCluster> = merged.into_values().collect();
        let total_hits = clusters.iter().map(|cluster| cluster.hits).sum();
        Ok(Collapsed {
            clusters,
            total_hits,
        })
    }
}

/// [`CollapseCollector`]'s work on one segment.
pub struct CollapseSegmentCollector {
    segment_ord: SegmentOrdinal,
    roots: Column<u64>,
    times: Column<i64>,
    clusters: RootMap<CollapsedCluster>,
}

impl SegmentCollector for CollapseSegmentCollector {
    type Fruit = Vec<CollapsedCluster>;

    fn collect(&mut self, doc: DocId, score: Score) {
        let Some(root) = self.roots.first(doc) else {
            return;
        };
        let time = self.times.first(doc).unwrap_or(Timestamp::MIN);
        match self.clusters.entry(root) {
            Entry::Occupied(mut entry) => {
                let cluster = entry.get_mut();
                // Documents come in increasing id order, so on equal scores the first stays.
                if score > cluster.score {
                    cluster.score = score;
                    cluster.representative = DocAddress::new(self.segment_ord, doc);
                }
                cluster.hits += 1;
                cluster.newest = cluster.newest.max(time);
            }
            Entry::Vacant(entry) => {
                entry.insert(CollapsedCluster {
                    root: Fingerprint(root),
                    score,
                    representative: DocAddress::new(self.segment_ord, doc),
                    hits: 1,
                    newest: time,
                });
            }
        }
    }

    fn harvest(self) -> Vec<CollapsedCluster> {
        self.clusters.into_values().collect()
    }
}

/// How a list page orders its clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Best score first.
    #[default]
    Relevance,
    /// Largest cluster first ("most reposted").
    SimilarDesc,
    /// Smallest cluster first (exclusive stories).
    SimilarAsc,
    /// The cluster with the most recent matching document first.
    Newest,
}

impl Sort {
    /// Every sort, by the name the API and the command line use.
    pub const ALL: [(&'static str, Sort); 4] = [
        ("relevance", Sort::Relevance),
        ("similar_desc", Sort::SimilarDesc),
        ("similar_asc", Sort::SimilarAsc),
        ("newest", Sort::Newest),
    ];

    /// Whether this order needs every cluster's size before it can pick a page.
    pub fn needs_sizes(self) -> bool {
        matches!(self, Sort::SimilarDesc | Sort::SimilarAsc)
    }

    /// The order of two clusters with their sizes: the sort's key, then the better score,
    /// then the smaller root, so that the order is total and repeatable.
    pub fn compare(
        self,
        (a, a_size): (&CollapsedCluster, u64),
        (b, b_size): (&CollapsedCluster, u64),
    ) -> Ordering {
        let primary = match self {
            Sort::Relevance => Ordering::Equal,
            Sort::SimilarDesc => b_size.cmp(&a_size),
            Sort::SimilarAsc => a_size.cmp(&b_size),
            Sort::Newest => b.newest.cmp(&a.newest),
        };
        primary
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.root.cmp(&b.root))
    }
}

impl std::str::FromStr for Sort {
    type Err = crate::Error;

    fn from_str(text: &str) -> crate::Result<Self> {
        Sort::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|&(_, sort)| sort)
            .ok_or_else(|| {
                crate::Error::Query(format!(
                    "sort must be one of relevance, similar_desc, similar_asc, newest; got {text:?}"
                ))
            })
    }
}
