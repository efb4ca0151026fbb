//! The collapse collector: keyword hits grouped by cluster root, one representative each.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use std::sync::{Arc, Mutex};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;

use tantivy::index::SegmentId;
use tantivy::{DocAddress, DocId, Score, Searcher, SegmentOrdinal, SegmentReader};

use crate::Fingerprint;
use crate::engine::schema::{EVENT_TIME, ROOT};
use crate::forest::Timestamp;
use crate::simhash::FingerprintHasher;

/// A map keyed by root hash.
pub type RootMap<V> = HashMap<u64, V, BuildHasherDefault<FingerprintHasher>>;

/// Dense numbers for the clusters of one searcher's documents, with each cluster's size.
///
/// Built once per searcher generation (the set of segments and their deletes) by scanning the
/// `root` fast field of every live document; collapsing then needs no hashing per hit, only
/// array accesses, and cluster sizes are a lookup. Tombstones have no root and no number.
#[derive(Debug)]
pub struct ClusterOrdinals {
    /// The generation: each segment's id and number of deleted documents.
    generation: Vec<(SegmentId, u32)>,
    /// Per segment, per document: its cluster's number, or [`NO_CLUSTER`].
    documents: Vec<Vec<u32>>,
    /// Per cluster number: its root hash.
    roots: Vec<u64>,
    /// Per cluster number: its live documents.
    sizes: Vec<u32>,
    /// Emptied buffers for the next queries (at most [`MAX_SPARE_BUFFERS`]).
    spare: Mutex<Vec<ClusterHits>>,
}

/// How many emptied buffers of cluster slots are kept between queries (one per query running
/// at once), while bounding memory (a buffer takes 24 bytes per cluster).
const MAX_SPARE_BUFFERS: usize = 4;

/// The number of a document without a cluster (a tombstone, or a deleted document).
pub const NO_CLUSTER: u32 = u32::MAX;

impl ClusterOrdinals {
    /// Numbers the clusters of `searcher`'s live documents.
    pub fn build(searcher: &Searcher) -> tantivy::Result<Self> {
        let mut numbers: RootMap<u32> = RootMap::default();
        let mut roots = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let mut documents = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let column = segment.fast_fields().u64(ROOT)?;
            let mut segment_numbers = vec![NO_CLUSTER; segment.max_doc() as usize];
            for doc in segment.doc_ids_alive() {
                let Some(root) = column.first(doc) else {
                    continue;
                };
                let number = *numbers.entry(root).or_insert_with(|| {
                    roots.push(root);
                    sizes.push(0);
                    (roots.len() - 1) as u32
                });
                sizes[number as usize] += 1;
                segment_numbers[doc as usize] = number;
            }
            documents.push(segment_numbers);
        }
        Ok(ClusterOrdinals {
            generation: generation(searcher),
            documents,
            roots,
            sizes,
            spare: Mutex::default(),
        })
    }

    /// An empty buffer with a slot per cluster: a spare one if there is one.
    fn buffer(&self) -> ClusterHits {
        self.spare
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop()
            .unwrap_or_else(|| ClusterHits::new(self.roots.len()))
    }

    /// Empties a buffer and keeps it for a later query, if fewer than the most are kept.
    fn recycle(&self, mut buffer: ClusterHits) {
        buffer.clear();
        let mut spare = self
            .spare
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if spare.len() < MAX_SPARE_BUFFERS {
            spare.push(buffer);
        }
    }

    /// Whether these numbers were built for `searcher`'s segments as they are.
    pub fn is_for(&self, searcher: &Searcher) -> bool {
        self.generation == generation(searcher)
    }

    /// Live documents in the index.
    pub fn documents(&self) -> u64 {
        self.sizes.iter().map(|&size| u64::from(size)).sum()
    }

    /// Distinct clusters among them.
    pub fn clusters(&self) -> usize {
        self.roots.len()
    }

    /// The cluster number of document `doc` of segment `segment` ([`NO_CLUSTER`] for a
    /// tombstone or a deleted document).
    #[inline]
    pub fn number(&self, segment: SegmentOrdinal, doc: DocId) -> u32 {
        self.documents[segment as usize][doc as usize]
    }

    /// The live documents of cluster `number`.
    #[inline]
    pub fn size(&self, number: u32) -> u64 {
        u64::from(self.sizes[number as usize])
    }

    /// Refuses a segment these numbers were not built for (a collector given the ordinals of
    /// another searcher), before any of its documents is looked up.
    pub fn check_segment(
        &self,
        segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<()> {
        let fits = self
            .documents
            .get(segment_ord as usize)
            .is_some_and(|numbers| numbers.len() == segment.max_doc() as usize);
        if fits {
            Ok(())
        } else {
            Err(tantivy::TantivyError::InvalidArgument(
                "a collector used with another searcher than its ClusterOrdinals'".to_owned(),
            ))
        }
    }
}

fn generation(searcher: &Searcher) -> Vec<(SegmentId, u32)> {
    searcher
        .segment_readers()
        .iter()
        .map(|segment| (segment.segment_id(), segment.num_deleted_docs()))
        .collect()
}

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
    /// All its live documents, matching or not.
    pub size: u64,
    /// The newest event time among its matching documents (0 unless the collector tracked
    /// it: see [`CollapseCollector::tracking_newest`]).
    pub newest: Timestamp,
}

/// What [`CollapseCollector`] returns: one page of clusters, in order, and the totals.
#[derive(Debug, Clone, Default)]
pub struct Collapsed {
    /// The page's clusters, in the collector's order.
    pub clusters: Vec<CollapsedCluster>,
    /// Matching documents, over all clusters.
    pub total_hits: u64,
    /// Matching clusters.
    pub total_clusters: u64,
}

/// Groups matching documents by cluster (per cluster: the best-scoring document, its score,
/// the number of hits, the cluster's size and, when asked, the newest hit's time), orders the
/// clusters by a [`Sort`], and returns one page of them with the totals.
///
/// Clusters are told apart by the dense numbers of a [`ClusterOrdinals`] built for the same
/// searcher: collecting a hit appends (cluster number, document, score) to its segment's list,
/// and merging gathers the lists in one slot buffer per query (hits of one-document clusters
/// skip it); only the page's clusters are ever materialised. Documents without a root
/// (tombstones) are skipped.
///
/// ```
/// use std::sync::Arc;
/// use tantivy::query::AllQuery;
/// use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupIndex, Sort};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// for (id, text) in [("1", "今天北京天气晴朗，气温回升，适合出行。"), ("2", "今天北京天气晴朗，气温回升，适合出行。"), ("3", "央行宣布下调存款准备金率零点五个百分点。")] {
///     index.add_article(Article { id: id.into(), content: text.into(), ..Default::default() })?;
/// }
/// index.commit()?;
/// let searcher = index.searcher().tantivy_searcher();
/// let ordinals = Arc::new(ClusterOrdinals::build(&searcher)?);
/// let collector = CollapseCollector::new(ordinals, Sort::SimilarDesc, 0, 10);
/// let collapsed = searcher.search(&AllQuery, &collector)?;
/// assert_eq!((collapsed.total_hits, collapsed.total_clusters), (3, 2));
/// assert_eq!(collapsed.clusters[0].size, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CollapseCollector {
    ordinals: Arc<ClusterOrdinals>,
    sort: Sort,
    offset: usize,
    limit: usize,
    track_newest: bool,
    min_cluster_size: u64,
}

impl CollapseCollector {
    /// A collector for the searcher `ordinals` were built for, returning the clusters
    /// `offset..offset + limit` in `sort` order. The newest hit's time is tracked when the
    /// order needs it.
    pub fn new(ordinals: Arc<ClusterOrdinals>, sort: Sort, offset: usize, limit: usize) -> Self {
        CollapseCollector {
            ordinals,
            sort,
            offset,
            limit,
            track_newest: sort == Sort::Newest,
            min_cluster_size: 0,
        }
    }

    /// Keeps only clusters of at least `size` live documents (matching or not): the others'
    /// hits are skipped as they are collected, so that [`Collapsed::total_hits`] and
    /// [`Collapsed::total_clusters`] count only the clusters kept, as the pages do. 0 and 1
    /// keep every cluster.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tantivy::query::AllQuery;
    /// use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupIndex, Sort};
    /// use tantivy_dedup::{Article, config::Config};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut index = DedupIndex::create(dir.path(), Config::default())?;
    /// let story = "今天北京天气晴朗，气温回升，适合出行。";
    /// for (id, text) in [("1", story), ("2", story), ("3", "央行宣布下调存款准备金率零点五个百分点。")] {
    ///     index.add_article(Article { id: id.into(), content: text.into(), ..Default::default() })?;
    /// }
    /// index.commit()?;
    /// let searcher = index.searcher().tantivy_searcher();
    /// let ordinals = Arc::new(ClusterOrdinals::build(&searcher)?);
    /// let collector = CollapseCollector::new(ordinals, Sort::Relevance, 0, 10).min_cluster_size(2);
    /// let collapsed = searcher.search(&AllQuery, &collector)?;
    /// assert_eq!((collapsed.total_hits, collapsed.total_clusters), (2, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn min_cluster_size(mut self, size: u64) -> Self {
        self.min_cluster_size = size;
        self
    }

    /// Tracks the newest hit's time whatever the order (it costs a fast-field read per hit;
    /// [`CollapsedCluster::newest`] is 0 when not tracked).
    pub fn tracking_newest(mut self) -> Self {
        self.track_newest = true;
        self
    }
}

/// What the hits of one cluster say.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    hits: u32,
    score: Score,
    /// The best document's address, packed as segment ordinal (high half) and doc id.
    best: u64,
    newest: Timestamp,
}

/// Per cluster number, what a query's hits say: a slot per cluster of the generation, and the
/// list of slots in use, so that a buffer is emptied in the time it took to fill and can
/// serve the next query.
#[derive(Debug)]
pub struct ClusterHits {
    /// The numbers of the clusters hit, in the order first hit.
    touched: Vec<u32>,
    slots: Vec<Slot>,
}

impl ClusterHits {
    fn new(clusters: usize) -> Self {
        ClusterHits {
            touched: Vec::new(),
            slots: vec![Slot::default(); clusters],
        }
    }

    #[inline]
    fn add(&mut self, number: usize, other: Slot) {
        let slot = &mut self.slots[number];
        if slot.hits == 0 {
            self.touched.push(number as u32);
            *slot = other;
            return;
        }
        // Equal scores keep the first document in index order.
        if other.score > slot.score || (other.score == slot.score && other.best < slot.best) {
            slot.score = other.score;
            slot.best = other.best;
        }
        slot.newest = slot.newest.max(other.newest);
        slot.hits += other.hits;
    }

    /// Empties the slots in use.
    fn clear(&mut self) {
        for &number in &self.touched {
            self.slots[number as usize] = Slot::default();
        }
        self.touched.clear();
    }
}

impl Collector for CollapseCollector {
    type Fruit = Collapsed;
    type Child = CollapseSegmentCollector;

    fn for_segment(
        &self,
        segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<CollapseSegmentCollector> {
        self.ordinals.check_segment(segment_ord, segment)?;
        Ok(CollapseSegmentCollector {
            ordinals: Arc::clone(&self.ordinals),
            min_cluster_size: self.min_cluster_size,
            times: if self.track_newest {
                Some(segment.fast_fields().i64(EVENT_TIME)?)
            } else {
                None
            },
            collected: SegmentHits {
                segment_ord,
                hits: Vec::new(),
                times: Vec::new(),
            },
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, segments: Vec<ClusterHitsFruit>) -> tantivy::Result<Collapsed> {
        let ordinals = &self.ordinals;
        let single = |hit: &Hit| ordinals.sizes[hit.number as usize] == 1;
        // A hit of a one-document cluster is that cluster, whole: it goes straight to the
        // ranking. The others gather in one buffer of slots per query, whatever the number
        // of segments (segments only list their hits, so a small segment costs in proportion
        // to its hits).
        let mut merged = ordinals.buffer();
        let mut total_hits = 0u64;
        let mut singles = 0u64;
        for ClusterHitsFruit(segment) in &segments {
            total_hits += segment.hits.len() as u64;
            let address = u64::from(segment.segment_ord) << 32;
            for (index, hit) in segment.hits.iter().enumerate() {
                if single(hit) {
                    singles += 1;
                    continue;
                }
                merged.add(
                    hit.number as usize,
                    Slot {
                        hits: 1,
                        score: hit.score,
                        best: address | u64::from(hit.doc),
                        newest: segment.times.get(index).copied().unwrap_or(0),
                    },
                );
            }
        }
        let gathered = merged.touched.iter().map(|&number| {
            let slot = merged.slots[number as usize];
            CollapsedCluster {
                root: Fingerprint(ordinals.roots[number as usize]),
                score: slot.score,
                representative: DocAddress::new(
                    (slot.best >> 32) as SegmentOrdinal,
                    slot.best as DocId,
                ),
                hits: u64::from(slot.hits),
                size: u64::from(ordinals.sizes[number as usize]),
                newest: slot.newest,
            }
        });
        let alone = segments.iter().flat_map(|ClusterHitsFruit(segment)| {
            segment
                .hits
                .iter()
                .enumerate()
                .filter(|(_, hit)| single(hit))
                .map(|(index, hit)| CollapsedCluster {
                    root: Fingerprint(ordinals.roots[hit.number as usize]),
                    score: hit.score,
                    representative: DocAddress::new(segment.segment_ord, hit.doc),
                    hits: 1,
                    size: 1,
                    newest: segment.times.get(index).copied().unwrap_or(0),
                })
        });
        let total_clusters = merged.touched.len() as u64 + singles;
        let clusters = top(gathered.chain(alone), self.sort, self.offset, self.limit);
        ordinals.recycle(merged);
        Ok(Collapsed {
            clusters,
            total_hits,
            total_clusters,
        })
    }
}

/// The clusters `offset..offset + limit` of `clusters` in `sort` order, keeping only the best
/// `offset + limit` at any time (a heap whose top is the worst kept, so most clusters cost one
/// comparison).
fn top(
    clusters: impl Iterator<Item = CollapsedCluster>,
    sort: Sort,
    offset: usize,
    limit: usize,
) -> Vec<CollapsedCluster> {
    /// A cluster ordered so that the heap's top is the one to drop first.
    struct Ranked(CollapsedCluster, Sort);
    impl PartialEq for Ranked {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other) == Ordering::Equal
        }
    }
    impl Eq for Ranked {}
    impl PartialOrd for Ranked {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Ranked {
        fn cmp(&self, other: &Self) -> Ordering {
            self.1.compare(&self.0, &other.0)
        }
    }

    let keep = offset.saturating_add(limit);
    if keep == 0 {
        return Vec::new();
    }
    let mut heap = std::collections::BinaryHeap::with_capacity(keep.min(1 << 16));
    for cluster in clusters {
        if heap.len() < keep {
            heap.push(Ranked(cluster, sort));
        } else if let Some(mut worst) = heap.peek_mut()
            && sort.compare(&cluster, &worst.0) == Ordering::Less
        {
            worst.0 = cluster;
        }
    }
    heap.into_sorted_vec()
        .into_iter()
        .skip(offset)
        .map(|ranked| ranked.0)
        .collect()
}

/// One segment's hits (opaque outside this module).
pub struct ClusterHitsFruit(SegmentHits);

/// A hit: its cluster's number, the document and its score.
#[derive(Debug, Clone, Copy)]
struct Hit {
    number: u32,
    doc: DocId,
    score: Score,
}

/// A segment's hits in the order collected, with their event times when tracked.
struct SegmentHits {
    segment_ord: SegmentOrdinal,
    hits: Vec<Hit>,
    times: Vec<Timestamp>,
}

/// [`CollapseCollector`]'s work on one segment.
pub struct CollapseSegmentCollector {
    ordinals: Arc<ClusterOrdinals>,
    /// Clusters smaller than this are skipped.
    min_cluster_size: u64,
    /// The event times, when the newest hit is tracked.
    times: Option<Column<i64>>,
    collected: SegmentHits,
}

impl SegmentCollector for CollapseSegmentCollector {
    type Fruit = ClusterHitsFruit;

    #[inline]
    fn collect(&mut self, doc: DocId, score: Score) {
        let collected = &mut self.collected;
        let number = self.ordinals.number(collected.segment_ord, doc);
        // The size is looked up only when a minimum was asked for.
        if number == NO_CLUSTER
            || (self.min_cluster_size > 1 && self.ordinals.size(number) < self.min_cluster_size)
        {
            return;
        }
        collected.hits.push(Hit { number, doc, score });
        if let Some(times) = &self.times {
            collected
                .times
                .push(times.first(doc).unwrap_or(Timestamp::MIN));
        }
    }

    fn harvest(self) -> ClusterHitsFruit {
        ClusterHitsFruit(self.collected)
    }
}

/// How a list page orders its clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
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

    /// The order of two clusters: the sort's key, then the better score, then the smaller
    /// root, so that the order is total and repeatable.
    pub fn compare(self, a: &CollapsedCluster, b: &CollapsedCluster) -> Ordering {
        let primary = match self {
            Sort::Relevance => Ordering::Equal,
            Sort::SimilarDesc => b.size.cmp(&a.size),
            Sort::SimilarAsc => a.size.cmp(&b.size),
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
