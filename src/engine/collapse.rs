//! The collapse collector: keyword hits grouped by cluster root, one representative each; and
//! the cluster numbers it groups by, kept from one searcher generation to the next.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use std::sync::{Arc, Mutex};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;

use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::{DocAddress, DocId, Score, Searcher, SegmentOrdinal, SegmentReader};

use crate::Fingerprint;
use crate::engine::schema::{EVENT_TIME, ROOT, SEQUENCE};
use crate::engine::sort_field::{SortColumn, SortField, SortValue, compare_values, first_of};
use crate::engine::trend::{Joined, StoryTrends, popularity};
use crate::forest::Timestamp;
use crate::simhash::FingerprintHasher;

/// A map keyed by root hash.
pub type RootMap<V> = HashMap<u64, V, BuildHasherDefault<FingerprintHasher>>;

/// Dense numbers for the clusters of one searcher generation's live documents, with each
/// cluster's size.
///
/// A generation is a searcher's set of segments with their deletes. Collapsing needs no
/// hashing per hit, only array accesses, and a cluster's size is a lookup. Tombstones have no
/// root and no number.
///
/// Made by a [`ClusterNumbering`], which carries its work over from one generation to the next
/// (or from scratch, by [`build`](Self::build)). For the generation it was made for:
/// - every live document with a root has its root's number, the same in every segment, and
///   no two roots share a number; a deleted document has its former cluster's number or
///   [`NO_CLUSTER`] (collectors never see deleted documents);
/// - [`size`](Self::size) is exact: a cluster's live documents. A number of size 0 is *dead*
///   (every document of its cluster was deleted; the number stays its root's in case the root
///   comes back); at most half the numbers are dead, so every number is below
///   [`number_bound`](Self::number_bound), at most twice [`clusters`](Self::clusters);
/// - nothing changes once made: a later generation shares what stayed the same (each
///   segment's numbers, the chunks of sizes and roots that kept their values), so a searcher
///   still in use keeps its own sizes.
#[derive(Debug)]
pub struct ClusterOrdinals {
    /// The generation: each segment's id and number of deleted documents.
    generation: Vec<(SegmentId, u32)>,
    /// Per segment, per document: its cluster's number, or [`NO_CLUSTER`].
    documents: Vec<Arc<[u32]>>,
    /// Per cluster number: its root hash.
    roots: Chunks<u64>,
    /// Per cluster number: its live documents.
    sizes: Chunks<u32>,
    /// Live documents with a root.
    live_documents: u64,
    /// Cluster numbers with live documents.
    live_clusters: usize,
    /// Emptied buffers for the next queries (at most [`MAX_SPARE_BUFFERS`]), shared by the
    /// generations of one numbering.
    spare: Arc<Mutex<Vec<ClusterHits>>>,
}

/// How many emptied buffers of cluster slots are kept between queries (one per query running
/// at once), while bounding memory (a buffer takes 24 bytes per cluster number).
const MAX_SPARE_BUFFERS: usize = 4;

/// The number of a document without a cluster (a tombstone, or a deleted document).
pub const NO_CLUSTER: u32 = u32::MAX;

impl ClusterOrdinals {
    /// Numbers the clusters of `searcher`'s live documents from scratch, reading the `root`
    /// fast field of every live document ([`ClusterNumbering`] reuses the work of earlier
    /// generations).
    pub fn build(searcher: &Searcher) -> tantivy::Result<Self> {
        let mut numbering = ClusterNumbering::default();
        numbering.update(searcher)?;
        Ok(numbering.publish())
    }

    /// An empty buffer with a slot per cluster number: a spare one if there is one.
    fn buffer(&self) -> ClusterHits {
        let mut buffer = self
            .spare
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop()
            .unwrap_or_default();
        // A spare buffer may come from another generation, with other numbers: its slots are
        // all empty, so only their count changes.
        buffer.slots.resize(self.number_bound(), Slot::default());
        buffer
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

    /// Whether these numbers were made for `searcher`'s segments as they are.
    pub fn is_for(&self, searcher: &Searcher) -> bool {
        self.generation.len() == searcher.segment_readers().len()
            && self.generation.iter().zip(searcher.segment_readers()).all(
                |(&(id, deleted), segment)| {
                    id == segment.segment_id() && deleted == segment.num_deleted_docs()
                },
            )
    }

    /// Live documents in the index (tombstones excluded).
    pub fn documents(&self) -> u64 {
        self.live_documents
    }

    /// Distinct clusters among them.
    pub fn clusters(&self) -> usize {
        self.live_clusters
    }

    /// Every cluster number is below this: the slots a buffer indexed by cluster number needs.
    /// Dead numbers included, so at most twice [`clusters`](Self::clusters).
    pub fn number_bound(&self) -> usize {
        self.sizes.len
    }

    /// The cluster number of live document `doc` of segment `segment` ([`NO_CLUSTER`] for a
    /// tombstone; for a deleted document, its former cluster's or [`NO_CLUSTER`]).
    #[inline]
    pub fn number(&self, segment: SegmentOrdinal, doc: DocId) -> u32 {
        self.documents[segment as usize][doc as usize]
    }

    /// The live documents of cluster `number`.
    #[inline]
    pub fn size(&self, number: u32) -> u64 {
        u64::from(self.sizes.get(number as usize))
    }

    /// The root of cluster `number` (a dead number's too).
    #[inline]
    pub fn root(&self, number: u32) -> Fingerprint {
        Fingerprint(self.roots.get(number as usize))
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

/// Cluster numbers kept from one searcher generation to the next, so that a new generation
/// costs its changes: its new segments are read (their live documents' roots), a segment
/// with new deletes has those documents taken off their clusters, a segment gone (merged
/// away, or emptied) has its live documents taken off, and every other segment is reused as
/// it was. A merge therefore costs its merged documents, and a commit its new ones.
///
/// Invariants, between calls:
/// - a root keeps its number for as long as the numbering lives (the map from roots to
///   numbers only grows), except when dead numbers (clusters with no live document left)
///   outnumber live ones: the live ones are then renumbered in their order (every segment's
///   numbers rewritten, a pass over the documents, paid once per at least as many cluster
///   deaths as there are live clusters) and the dead roots forgotten;
/// - each segment of the last generation is known with its deletes, its alive documents
///   (as 64-bit words, read from its delete file) and its numbers; deletes only grow, so a segment seen
///   again with more deletes loses exactly the documents alive then and not now (a word-wise
///   comparison, a 64th of a pass over its documents), and one seen with fewer (an older
///   searcher asked for after a newer one) is read again;
/// - the sizes and roots of every generation handed out stay as they were: they are kept in
///   chunks of 1,024 numbers, and a chunk is copied when first changed after it was handed
///   out; a new generation copies the chunks changed since the last (and a pointer per
///   chunk). The last two generations are kept at hand, for the queries that took their
///   searcher just before a commit.
///
/// [`DedupSearcher`](super::DedupSearcher) keeps one for its index; an application collapsing
/// its own schema keeps one beside its reader.
///
/// ```
/// use tantivy_dedup::engine::{ClusterNumbering, ClusterOrdinals, DedupIndex};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let text = "今天北京天气晴朗，气温回升，适合出行。";
/// let article = |id: &str, content: &str| Article { id: id.into(), content: content.into(), ..Default::default() };
/// let story = index.add_article(article("1", text))?.root;
/// index.add_article(article("2", "央行宣布下调存款准备金率零点五个百分点。"))?;
/// index.commit()?;
///
/// let mut numbering = ClusterNumbering::default();
/// let before = numbering.ordinals(&index.searcher().tantivy_searcher())?;
/// assert_eq!((before.documents(), before.clusters()), (2, 2));
///
/// // The next commit: its new segment is read, the deleted document is taken off its cluster.
/// index.add_article(article("3", text))?;
/// index.delete("2")?;
/// index.commit()?;
/// let after = numbering.ordinals(&index.searcher().tantivy_searcher())?;
/// assert_eq!((after.documents(), after.clusters()), (2, 1));
/// // The story kept its number; the earlier generation still has its own sizes.
/// let number = |ordinals: &ClusterOrdinals| {
///     (0..ordinals.number_bound() as u32).find(|&number| ordinals.root(number) == story)
/// };
/// assert_eq!(number(&after), number(&before));
/// assert_eq!(number(&after).map(|number| after.size(number)), Some(2));
/// assert_eq!(number(&before).map(|number| before.size(number)), Some(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct ClusterNumbering {
    clusters: Clusters,
    /// The segments of the last generation, in its order.
    segments: Vec<NumberedSegment>,
    /// The last [`RECENT_GENERATIONS`] generations' numbers, newest first, handed out again
    /// for their searchers.
    recent: Vec<Arc<ClusterOrdinals>>,
    /// The buffers of the generations' queries.
    spare: Arc<Mutex<Vec<ClusterHits>>>,
}

/// Generations whose numbers a [`ClusterNumbering`] keeps at hand: the last, and the one
/// before for the queries that took their searcher just before a commit (going back to it
/// would read again every segment that has more deletes now).
const RECENT_GENERATIONS: usize = 2;

impl ClusterNumbering {
    /// The cluster numbers of `searcher`'s generation: those handed out last or just before
    /// if they are for it, else the last ones brought up to it. After an error the numbering
    /// starts again from scratch at the next call.
    pub fn ordinals(&mut self, searcher: &Searcher) -> tantivy::Result<Arc<ClusterOrdinals>> {
        if let Some(recent) = self.recent.iter().find(|recent| recent.is_for(searcher)) {
            return Ok(Arc::clone(recent));
        }
        if let Err(error) = self.update(searcher) {
            *self = ClusterNumbering {
                spare: Arc::clone(&self.spare),
                ..ClusterNumbering::default()
            };
            return Err(error);
        }
        let ordinals = Arc::new(self.publish());
        self.recent.insert(0, Arc::clone(&ordinals));
        self.recent.truncate(RECENT_GENERATIONS);
        Ok(ordinals)
    }

    /// Brings the numbering from its last generation to `searcher`'s. An error leaves it
    /// half done.
    fn update(&mut self, searcher: &Searcher) -> tantivy::Result<()> {
        let readers = searcher.segment_readers();
        let mut before = std::mem::take(&mut self.segments);
        let reused: Vec<Option<NumberedSegment>> = readers
            .iter()
            .map(|segment| {
                let position = before.iter().position(|known| {
                    known.id == segment.segment_id() && known.deleted <= segment.num_deleted_docs()
                })?;
                Some(before.swap_remove(position))
            })
            .collect();
        // What is left is gone from the searcher (or is read again): its live documents leave.
        for gone in &before {
            let alive = words(gone.alive.as_deref(), gone.numbers.len() as DocId);
            for number in numbers_of(&gone.numbers, documents_in(alive)) {
                self.clusters.leave(number);
            }
        }
        for (segment, known) in readers.iter().zip(reused) {
            let numbered = match known {
                Some(known) => self.clusters.take_off_deleted(known, segment),
                None => self.clusters.read(segment)?,
            };
            self.segments.push(numbered);
        }
        if self.clusters.dead() > self.clusters.live {
            self.renumber();
        }
        Ok(())
    }

    /// Numbers the live clusters again, densely and in their order, and forgets the dead ones.
    fn renumber(&mut self) {
        let clusters = &mut self.clusters;
        let mut renumbered = vec![NO_CLUSTER; clusters.sizes.len];
        let (mut roots, mut sizes) = (Chunked::default(), Chunked::default());
        for (number, new) in renumbered.iter_mut().enumerate() {
            let size = clusters.sizes.get(number);
            if size > 0 {
                *new = sizes.len as u32;
                roots.push(clusters.roots.get(number));
                sizes.push(size);
            }
        }
        clusters.roots = roots;
        clusters.sizes = sizes;
        clusters.numbers.retain(|_, number| {
            *number = renumbered[*number as usize];
            *number != NO_CLUSTER
        });
        clusters.numbers.shrink_to_fit();
        for segment in &mut self.segments {
            segment.numbers = segment
                .numbers
                .iter()
                .map(|&number| {
                    renumbered
                        .get(number as usize)
                        .copied()
                        .unwrap_or(NO_CLUSTER)
                })
                .collect();
        }
    }

    /// The current generation's numbers, handed out: later changes copy what they change.
    fn publish(&mut self) -> ClusterOrdinals {
        ClusterOrdinals {
            generation: self
                .segments
                .iter()
                .map(|segment| (segment.id, segment.deleted))
                .collect(),
            documents: self
                .segments
                .iter()
                .map(|segment| Arc::clone(&segment.numbers))
                .collect(),
            roots: self.clusters.roots.publish(),
            sizes: self.clusters.sizes.publish(),
            live_documents: self.clusters.documents,
            live_clusters: self.clusters.live,
            spare: Arc::clone(&self.spare),
        }
    }
}

/// The clusters of a [`ClusterNumbering`]: each root's number, and per number its root and
/// live documents.
#[derive(Debug, Default)]
struct Clusters {
    numbers: RootMap<u32>,
    roots: Chunked<u64>,
    sizes: Chunked<u32>,
    /// Live documents with a root.
    documents: u64,
    /// Numbers of size > 0.
    live: usize,
}

impl Clusters {
    /// Numbers whose clusters have no live document left.
    fn dead(&self) -> usize {
        self.sizes.len - self.live
    }

    /// A live document of cluster `root` is counted, under the root's number (a new one if
    /// the root has none), which is returned.
    fn enter(&mut self, root: u64) -> u32 {
        let number = *self.numbers.entry(root).or_insert_with(|| {
            self.roots.push(root);
            self.sizes.push(0);
            (self.sizes.len - 1) as u32
        });
        let size = self.sizes.get_mut(number as usize);
        if *size == 0 {
            self.live += 1;
        }
        *size += 1;
        self.documents += 1;
        number
    }

    /// A live document of cluster `number` is deleted or gone.
    fn leave(&mut self, number: u32) {
        let size = self.sizes.get_mut(number as usize);
        *size -= 1;
        if *size == 0 {
            self.live -= 1;
        }
        self.documents -= 1;
    }

    /// Reads a segment's live documents' roots: each is counted in its cluster.
    fn read(&mut self, segment: &SegmentReader) -> tantivy::Result<NumberedSegment> {
        let column = segment.fast_fields().u64(ROOT)?;
        let alive = alive_words(segment);
        let mut numbers = vec![NO_CLUSTER; segment.max_doc() as usize];
        for doc in documents_in(words(alive.as_deref(), segment.max_doc())) {
            if let Some(root) = column.first(doc) {
                numbers[doc as usize] = self.enter(root);
            }
        }
        Ok(NumberedSegment {
            id: segment.segment_id(),
            deleted: segment.num_deleted_docs(),
            alive,
            numbers: numbers.into(),
        })
    }

    /// A known segment as it is now, with at least as many deletes: the documents deleted
    /// since leave their clusters.
    fn take_off_deleted(
        &mut self,
        known: NumberedSegment,
        segment: &SegmentReader,
    ) -> NumberedSegment {
        if known.deleted == segment.num_deleted_docs() {
            return known;
        }
        let alive = alive_words(segment);
        let max_doc = segment.max_doc();
        let deleted = words(known.alive.as_deref(), max_doc)
            .zip(words(alive.as_deref(), max_doc))
            .map(|(was, is)| was & !is);
        for number in numbers_of(&known.numbers, documents_in(deleted)) {
            self.leave(number);
        }
        NumberedSegment {
            deleted: segment.num_deleted_docs(),
            alive,
            ..known
        }
    }
}

/// What a [`ClusterNumbering`] knows of a segment of its last generation.
#[derive(Debug)]
struct NumberedSegment {
    id: SegmentId,
    /// Its deleted documents then.
    deleted: u32,
    /// Its alive documents then, as [`alive_words`] gives them (`None`: all).
    alive: Option<Arc<[u64]>>,
    /// Per document: its cluster's number, or [`NO_CLUSTER`] (no root, or deleted when the
    /// segment was read).
    numbers: Arc<[u32]>,
}

/// The numbers of `docs` in `numbers`, those without one left out.
fn numbers_of(numbers: &[u32], docs: impl Iterator<Item = DocId>) -> impl Iterator<Item = u32> {
    docs.map(|doc| numbers[doc as usize])
        .filter(|&number| number != NO_CLUSTER)
}

/// A segment's alive documents as 64-bit words, document `d` being bit `d % 64` of word
/// `d / 64`; `None` when none is deleted. Read from the segment's delete file, the bytes
/// Tantivy's `AliveBitSet` is opened from, so that comparing two generations costs a word per
/// 64 documents; built from the alive documents if that file does not hold them as expected.
fn alive_words(segment: &SegmentReader) -> Option<Arc<[u64]>> {
    let alive = segment.alive_bitset()?;
    Some(
        delete_file_words(segment)
            .unwrap_or_else(|| words_of(alive.iter_alive(), segment.max_doc())),
    )
}

/// The words of a segment's delete file: a 4-byte little-endian document count, then the
/// alive bits in little-endian 64-bit words. `None` if the file cannot be read or does not
/// agree with the reader (its document count, word count and alive count).
fn delete_file_words(segment: &SegmentReader) -> Option<Arc<[u64]>> {
    let bytes = segment
        .open_read(SegmentComponent::Delete)
        .ok()?
        .read_bytes()
        .ok()?;
    let (max_doc, words) = bytes.as_slice().split_first_chunk::<4>()?;
    let (words, rest) = words.as_chunks::<8>();
    let words: Arc<[u64]> = words.iter().map(|word| u64::from_le_bytes(*word)).collect();
    let max_doc = u32::from_le_bytes(*max_doc);
    let alive: u64 = words.iter().map(|word| u64::from(word.count_ones())).sum();
    let beyond = match (words.last(), max_doc % 64) {
        (Some(last), bits) if bits > 0 => last >> bits,
        _ => 0,
    };
    let agrees = rest.is_empty()
        && max_doc == segment.max_doc()
        && words.len() == max_doc.div_ceil(64) as usize
        && alive == u64::from(segment.num_docs())
        && beyond == 0;
    agrees.then_some(words)
}

/// Words (as [`alive_words`]) with the bits of `docs` set.
fn words_of(docs: impl Iterator<Item = DocId>, max_doc: DocId) -> Arc<[u64]> {
    let mut words = vec![0u64; max_doc.div_ceil(64) as usize];
    for doc in docs {
        words[doc as usize / 64] |= 1 << (doc % 64);
    }
    words.into()
}

/// The words of a segment's alive documents, from [`alive_words`] (`None`: all of them).
fn words(alive: Option<&[u64]>, max_doc: DocId) -> impl Iterator<Item = u64> + '_ {
    let all = (0..max_doc.div_ceil(64)).map(move |word| match max_doc - word * 64 {
        left @ 0..64 => (1 << left) - 1,
        _ => u64::MAX,
    });
    let (listed, all) = match alive {
        Some(words) => (Some(words.iter().copied()), None),
        None => (None, Some(all)),
    };
    listed
        .into_iter()
        .flatten()
        .chain(all.into_iter().flatten())
}

/// The documents whose bits are set in `words`.
fn documents_in(words: impl Iterator<Item = u64>) -> impl Iterator<Item = DocId> {
    words.enumerate().flat_map(|(index, mut word)| {
        let first = index as DocId * 64;
        std::iter::from_fn(move || {
            (word != 0).then(|| {
                let bit = word.trailing_zeros();
                word &= word - 1;
                first + bit
            })
        })
    })
}

/// Numbers per chunk of [`Chunked`] and [`Chunks`]: 4 KiB of sizes, 8 KiB of roots.
const CHUNK: usize = 1024;

/// An array that a [`ClusterNumbering`] changes in place and hands out as read-only
/// [`Chunks`]: a chunk handed out is copied when next changed, so handing out again costs
/// the chunks changed since the last time (and a pointer per chunk).
#[derive(Debug, Default)]
struct Chunked<T> {
    /// Every chunk as last handed out (the last one padded with default values).
    shared: Vec<Arc<[T; CHUNK]>>,
    /// Per chunk: its copy, if it changed since.
    changed: Vec<Option<Box<[T; CHUNK]>>>,
    len: usize,
}

impl<T: Copy + Default> Chunked<T> {
    fn get(&self, index: usize) -> T {
        let (chunk, at) = (index / CHUNK, index % CHUNK);
        match &self.changed[chunk] {
            Some(values) => values[at],
            None => self.shared[chunk][at],
        }
    }

    fn get_mut(&mut self, index: usize) -> &mut T {
        let (chunk, at) = (index / CHUNK, index % CHUNK);
        let shared = &self.shared[chunk];
        &mut self.changed[chunk].get_or_insert_with(|| Box::new(**shared))[at]
    }

    fn push(&mut self, value: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.shared.push(Arc::new([T::default(); CHUNK]));
            self.changed.push(None);
        }
        self.len += 1;
        *self.get_mut(self.len - 1) = value;
    }

    /// The array as it is now, for readers.
    fn publish(&mut self) -> Chunks<T> {
        for (shared, changed) in self.shared.iter_mut().zip(&mut self.changed) {
            if let Some(values) = changed.take() {
                *shared = Arc::from(values);
            }
        }
        Chunks {
            chunks: self.shared.clone(),
            len: self.len,
        }
    }
}

/// A version of a [`Chunked`] array, sharing its chunks with the versions that hold the
/// same values.
#[derive(Debug)]
struct Chunks<T> {
    chunks: Vec<Arc<[T; CHUNK]>>,
    len: usize,
}

impl<T: Copy> Chunks<T> {
    #[inline]
    fn get(&self, index: usize) -> T {
        self.chunks[index / CHUNK][index % CHUNK]
    }
}

/// The matching documents of one cluster, as the collector saw them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollapsedCluster {
    /// The cluster's root hash.
    pub root: Fingerprint,
    /// The best score among its matching documents.
    pub score: Score,
    /// The best-scoring matching document. On equal scores (every document of a search
    /// without keywords, identical reprints), the earliest published, then the first inserted
    /// (the smallest `_seq`): a story is headed by its first outlet, and the choice does not
    /// depend on how segments were merged, nor on which shard holds the story.
    pub representative: DocAddress,
    /// How many of its documents match.
    pub hits: u64,
    /// All its live documents, matching or not.
    pub size: u64,
    /// The newest event time among its matching documents (0 unless the collector tracked
    /// the hits' times: see [`CollapseCollector::tracking_times`]).
    pub newest: Timestamp,
    /// The oldest event time among its matching documents (0 unless the collector tracked
    /// the hits' times).
    pub oldest: Timestamp,
    /// The articles that joined it within the trend window and the window before (0 and 0
    /// unless the collector was given [`StoryTrends`]: see [`CollapseCollector::trends`]).
    pub joined: Joined,
    /// Its value in the [`Sort::Hot`] order ([`TrendWindow::hot`](crate::engine::TrendWindow::hot)),
    /// 0 in any other order.
    pub hot: f64,
    /// Its value in the order of a field ([`Sort::FieldDesc`], [`Sort::FieldAsc`]): of its
    /// matching documents' values, the first in that order; `None` in any other order, or
    /// when none of them has a value.
    pub value: Option<SortValue>,
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
    /// Matching clusters ranked after [`CollapseCollector::after`]'s key (all of them
    /// without one): those of the page and those after it.
    pub following: u64,
}

/// Groups matching documents by cluster (per cluster: the best-scoring document, its score,
/// the number of hits, the cluster's size and, when asked, the newest and oldest hits' times), orders the
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
    track_times: bool,
    min_cluster_size: u64,
    trends: Option<Arc<StoryTrends>>,
    min_recent: u64,
    after: Option<SortKey>,
    sort_field: Option<SortField>,
}

impl CollapseCollector {
    /// A collector for the searcher `ordinals` were built for, returning the clusters
    /// `offset..offset + limit` in `sort` order. The hits' times are tracked when the order
    /// reads the newest or the oldest.
    pub fn new(ordinals: Arc<ClusterOrdinals>, sort: Sort, offset: usize, limit: usize) -> Self {
        CollapseCollector {
            ordinals,
            sort,
            offset,
            limit,
            track_times: matches!(sort, Sort::Newest | Sort::Oldest | Sort::Hot),
            min_cluster_size: 0,
            trends: None,
            min_recent: 0,
            after: None,
            sort_field: None,
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

    /// Tracks the newest and oldest hits' times whatever the order (it costs a fast-field read
    /// per hit; [`CollapsedCluster::newest`] and [`CollapsedCluster::oldest`] are 0 when not
    /// tracked).
    pub fn tracking_times(mut self) -> Self {
        self.track_times = true;
        self
    }

    /// Gives each cluster its [`Joined`] figures from `trends` (counted for the same
    /// searcher's generation and the `ordinals`' numbers), which [`Sort::Trending`] orders by
    /// and [`min_recent`](Self::min_recent) reads; [`Sort::Hot`] decays by their window.
    /// Without them, every cluster's figures are 0 and `hot` does not decay.
    pub fn trends(mut self, trends: Arc<StoryTrends>) -> Self {
        self.trends = Some(trends);
        self
    }

    /// Keeps only clusters with at least `articles` that joined within the trend window
    /// (matching or not), skipping the others' hits as [`min_cluster_size`](Self::min_cluster_size)
    /// does. Read only with [`trends`](Self::trends); 0 keeps every cluster.
    pub fn min_recent(mut self, articles: u64) -> Self {
        self.min_recent = articles;
        self
    }

    /// Ranks only the clusters that the order puts after the one whose key is `key` (a
    /// [`Cursor`](crate::engine::Cursor)'s last story): the page is then the `limit` clusters
    /// that follow it, however deep, and the totals still count every cluster.
    pub fn after(mut self, key: SortKey) -> Self {
        self.after = Some(key);
        self
    }

    /// The field that [`Sort::FieldDesc`] and [`Sort::FieldAsc`] order by (without one, no
    /// story has a value in them, and they order by score). Read only in those orders.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tantivy::query::AllQuery;
    /// use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupIndex, Sort, SortField, SortValue};
    /// use tantivy_dedup::config::Config;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = Config::from_toml_str("[fields.likes]\ntype = \"u64\"\n")?;
    /// let mut index = DedupIndex::create(dir.path(), config)?;
    /// let reader = index.article_reader();
    /// for line in [
    ///     r#"{"id": "1", "content": "今天北京天气晴朗，气温回升，适合出行。", "likes": 7}"#,
    ///     r#"{"id": "2", "content": "央行宣布下调存款准备金率零点五个百分点。", "likes": 40}"#,
    /// ] {
    ///     index.add_article(reader.read_str(line)?)?;
    /// }
    /// index.commit()?;
    /// let searcher = index.searcher().tantivy_searcher();
    /// let ordinals = Arc::new(ClusterOrdinals::build(&searcher)?);
    /// let likes = SortField::find(searcher.schema(), "likes")?;
    /// let collector = CollapseCollector::new(ordinals, Sort::FieldDesc, 0, 10).sort_field(likes);
    /// let collapsed = searcher.search(&AllQuery, &collector)?;
    /// assert_eq!(collapsed.clusters[0].value, Some(SortValue::Unsigned(40)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sort_field(mut self, field: SortField) -> Self {
        self.sort_field = Some(field);
        self
    }

    /// The stories whose hits this collector keeps ([`min_cluster_size`](Self::min_cluster_size),
    /// [`min_recent`](Self::min_recent)): what a [`FacetCollector`](crate::engine::FacetCollector)
    /// beside it counts.
    pub fn stories(&self) -> StoryFilter {
        let stories =
            StoryFilter::new(Arc::clone(&self.ordinals)).min_cluster_size(self.min_cluster_size);
        match &self.trends {
            Some(trends) => stories.min_recent(Arc::clone(trends), self.min_recent),
            None => stories,
        }
    }

    /// A cluster as it goes to the ranking, its trend figures and `hot` value filled in.
    fn ranked(&self, number: u32, mut cluster: CollapsedCluster) -> CollapsedCluster {
        if let Some(trends) = &self.trends {
            cluster.joined = trends.of(number);
        }
        if self.sort == Sort::Hot {
            cluster.hot = match &self.trends {
                Some(trends) => trends
                    .window()
                    .hot(cluster.score, cluster.size, cluster.newest),
                None => popularity(cluster.score, cluster.size),
            };
        }
        cluster
    }
}

/// Which stories a list page keeps, asked of each hit by the collectors of one page (the
/// collapse, and the facets and histogram beside it), so that they count the same stories:
/// a document with a story number (not a tombstone), of a story of at least
/// `min_cluster_size` live documents and, with trend figures, at least `min_recent` articles
/// in the trend window.
#[derive(Debug, Clone)]
pub struct StoryFilter {
    ordinals: Arc<ClusterOrdinals>,
    min_cluster_size: u64,
    min_recent: Option<(Arc<StoryTrends>, u64)>,
}

impl StoryFilter {
    /// Every story of the generation `ordinals` numbers.
    pub fn new(ordinals: Arc<ClusterOrdinals>) -> Self {
        StoryFilter {
            ordinals,
            min_cluster_size: 0,
            min_recent: None,
        }
    }

    /// Only stories of at least `size` live documents (0 and 1: all).
    pub fn min_cluster_size(mut self, size: u64) -> Self {
        self.min_cluster_size = size;
        self
    }

    /// Only stories with at least `articles` in the trend window of `trends` (0: all).
    pub fn min_recent(mut self, trends: Arc<StoryTrends>, articles: u64) -> Self {
        self.min_recent = (articles > 0).then_some((trends, articles));
        self
    }

    /// The story number of `doc` of segment `segment` when its story is kept.
    #[inline]
    pub fn kept(&self, segment: SegmentOrdinal, doc: DocId) -> Option<u32> {
        let number = self.ordinals.number(segment, doc);
        // The size is looked up only when a minimum was asked for.
        let kept = number != NO_CLUSTER
            && (self.min_cluster_size <= 1 || self.ordinals.size(number) >= self.min_cluster_size)
            && self
                .min_recent
                .as_ref()
                .is_none_or(|(trends, minimum)| trends.of(number).recent >= *minimum);
        kept.then_some(number)
    }
}

/// What the hits of one cluster say.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    hits: u32,
    score: Score,
    /// The best document's address, packed as segment ordinal (high half) and doc id.
    best: u64,
    /// The best document's [`Seniority`]: of two equal scores the smaller wins.
    seniority: Seniority,
    newest: Timestamp,
    oldest: Timestamp,
    value: Option<SortValue>,
}

/// Per cluster number, what a query's hits say: a slot per number of the generation, and the
/// list of slots in use, so that a buffer is emptied in the time it took to fill and can
/// serve the next query.
#[derive(Debug, Default)]
pub struct ClusterHits {
    /// The numbers of the clusters hit, in the order first hit.
    touched: Vec<u32>,
    slots: Vec<Slot>,
}

impl ClusterHits {
    /// Adds a hit's slot to its cluster's; `descending` says which of two values a field's
    /// order goes by.
    #[inline]
    fn add(&mut self, number: usize, other: Slot, descending: bool) {
        let slot = &mut self.slots[number];
        if slot.hits == 0 {
            self.touched.push(number as u32);
            *slot = other;
            return;
        }
        // Equal scores keep the earliest document.
        if other.score > slot.score
            || (other.score == slot.score && other.seniority < slot.seniority)
        {
            slot.score = other.score;
            slot.best = other.best;
            slot.seniority = other.seniority;
        }
        slot.newest = slot.newest.max(other.newest);
        slot.oldest = slot.oldest.min(other.oldest);
        slot.value = first_of(slot.value, other.value, descending);
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
            stories: self.stories(),
            track_times: self.track_times,
            times: segment.fast_fields().i64(EVENT_TIME)?,
            sequences: segment.fast_fields().u64(SEQUENCE)?,
            sort_values: match (&self.sort_field, self.sort.descending_field()) {
                (Some(field), Some(descending)) => Some(field.open(segment, descending)?),
                _ => None,
            },
            collected: SegmentHits {
                segment_ord,
                hits: Vec::new(),
                times: Vec::new(),
                seniorities: Vec::new(),
                values: Vec::new(),
            },
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, segments: Vec<ClusterHitsFruit>) -> tantivy::Result<Collapsed> {
        let ordinals = &self.ordinals;
        let mut top = Top::new(self.sort, self.offset, self.limit, self.after);
        // A hit of a one-document cluster is that cluster, whole: it goes straight to the
        // ranking. The others gather in one buffer of slots per query, whatever the number
        // of segments (segments only list their hits, so a small segment costs in proportion
        // to its hits).
        let mut merged = ordinals.buffer();
        let mut total_hits = 0u64;
        let mut singles = 0u64;
        let descending = self.sort.descending_field().unwrap_or(true);
        for ClusterHitsFruit(segment) in &segments {
            total_hits += segment.hits.len() as u64;
            let address = u64::from(segment.segment_ord) << 32;
            let mut seniorities = segment.seniorities.iter();
            for (index, hit) in segment.hits.iter().enumerate() {
                let time = segment.times.get(index).copied().unwrap_or(0);
                let value = segment.values.get(index).copied().flatten();
                // A hit without a time (none is written so) is the newest of nothing and
                // the oldest of nothing.
                let oldest = if time == Timestamp::MIN {
                    Timestamp::MAX
                } else {
                    time
                };
                if ordinals.size(hit.number) == 1 {
                    singles += 1;
                    top.push(self.ranked(
                        hit.number,
                        CollapsedCluster {
                            root: ordinals.root(hit.number),
                            score: hit.score,
                            representative: DocAddress::new(segment.segment_ord, hit.doc),
                            hits: 1,
                            size: 1,
                            newest: time,
                            oldest,
                            joined: Joined::default(),
                            hot: 0.0,
                            value,
                        },
                    ));
                } else {
                    merged.add(
                        hit.number as usize,
                        Slot {
                            hits: 1,
                            score: hit.score,
                            best: address | u64::from(hit.doc),
                            seniority: seniorities.next().copied().unwrap_or(LAST),
                            newest: time,
                            oldest,
                            value,
                        },
                        descending,
                    );
                }
            }
        }
        for &number in &merged.touched {
            let slot = merged.slots[number as usize];
            top.push(self.ranked(
                number,
                CollapsedCluster {
                    root: ordinals.root(number),
                    score: slot.score,
                    representative: DocAddress::new(
                        (slot.best >> 32) as SegmentOrdinal,
                        slot.best as DocId,
                    ),
                    hits: u64::from(slot.hits),
                    size: ordinals.size(number),
                    newest: slot.newest,
                    oldest: slot.oldest,
                    joined: Joined::default(),
                    hot: 0.0,
                    value: slot.value,
                },
            ));
        }
        let total_clusters = merged.touched.len() as u64 + singles;
        ordinals.recycle(merged);
        let following = top.following;
        Ok(Collapsed {
            clusters: top.page(),
            total_hits,
            total_clusters,
            following,
        })
    }
}

/// The best `offset + limit` clusters of those pushed (of those ranked after `after`, when
/// set), in a [`Sort`]'s order: a heap whose top is the worst kept, so most clusters cost one
/// comparison.
struct Top {
    heap: std::collections::BinaryHeap<Ranked>,
    sort: Sort,
    offset: usize,
    keep: usize,
    after: Option<SortKey>,
    /// The clusters pushed that rank after `after` (all of them without it).
    following: u64,
}

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

impl Top {
    fn new(sort: Sort, offset: usize, limit: usize, after: Option<SortKey>) -> Top {
        let keep = offset.saturating_add(limit);
        Top {
            heap: std::collections::BinaryHeap::with_capacity(keep.min(1 << 16)),
            sort,
            offset,
            keep,
            after,
            following: 0,
        }
    }

    fn push(&mut self, cluster: CollapsedCluster) {
        if let Some(after) = &self.after
            && self.sort.compare_keys(&SortKey::of(&cluster), after) != Ordering::Greater
        {
            return;
        }
        self.following += 1;
        if self.heap.len() < self.keep {
            self.heap.push(Ranked(cluster, self.sort));
        } else if let Some(mut worst) = self.heap.peek_mut()
            && self.sort.compare(&cluster, &worst.0) == Ordering::Less
        {
            worst.0 = cluster;
        }
    }

    /// The clusters `offset..offset + limit` in order.
    fn page(self) -> Vec<CollapsedCluster> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .skip(self.offset)
            .map(|ranked| ranked.0)
            .collect()
    }
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

/// A segment's hits in the order collected, with their event times when tracked, their
/// values in a field's order when ordered by one, and the [`Seniority`] of the hits of
/// clusters of several documents (in the same order), which breaks ties between their equal
/// scores.
struct SegmentHits {
    segment_ord: SegmentOrdinal,
    hits: Vec<Hit>,
    times: Vec<Timestamp>,
    seniorities: Vec<Seniority>,
    values: Vec<Option<SortValue>>,
}

/// Which of two documents came first: its event time (publication, else arrival), then its
/// insert number (`_seq`); the smaller is the elder.
type Seniority = (Timestamp, u64);

/// The seniority of a document without the values: after every other.
const LAST: Seniority = (Timestamp::MAX, u64::MAX);

/// [`CollapseCollector`]'s work on one segment.
pub struct CollapseSegmentCollector {
    ordinals: Arc<ClusterOrdinals>,
    /// The stories whose hits are kept.
    stories: StoryFilter,
    /// Whether each hit's event time is kept, for the newest and oldest hit of each cluster.
    track_times: bool,
    /// The event times.
    times: Column<i64>,
    /// The insert numbers (`_seq`).
    sequences: Column<u64>,
    /// The sort field's column, in a field's order.
    sort_values: Option<SortColumn>,
    collected: SegmentHits,
}

impl SegmentCollector for CollapseSegmentCollector {
    type Fruit = ClusterHitsFruit;

    #[inline]
    fn collect(&mut self, doc: DocId, score: Score) {
        let collected = &mut self.collected;
        let Some(number) = self.stories.kept(collected.segment_ord, doc) else {
            return;
        };
        collected.hits.push(Hit { number, doc, score });
        if let Some(column) = &self.sort_values {
            collected.values.push(column.value(doc));
        }
        let several = self.ordinals.size(number) > 1;
        if !several && !self.track_times {
            return;
        }
        let time = self.times.first(doc);
        if several {
            collected.seniorities.push((
                time.unwrap_or(Timestamp::MAX),
                self.sequences.first(doc).unwrap_or(u64::MAX),
            ));
        }
        if self.track_times {
            collected.times.push(time.unwrap_or(Timestamp::MIN));
        }
    }

    fn harvest(self) -> ClusterHitsFruit {
        ClusterHitsFruit(self.collected)
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
    /// The cluster whose earliest matching document is the oldest first (the stories in the
    /// order they broke).
    Oldest,
    /// The cluster that gained the most articles in the trend window against the window
    /// before first ([`Joined::growth`]), then the one with the most articles in the window.
    Trending,
    /// The highest [`TrendWindow::hot`](crate::engine::TrendWindow::hot) first: relevance ×
    /// (1 + ln size) × a decay that halves per trend window of the newest match's age.
    Hot,
    /// By a field of one's own, the largest value first: a story's value is the largest
    /// among its matching documents' ([`CollapseCollector::sort_field`]); stories without
    /// one last. Written `FIELD:desc` ([`ListOrder`]).
    FieldDesc,
    /// By a field of one's own, the smallest value first: a story's value is the smallest
    /// among its matching documents'; stories without one last. Written `FIELD:asc`.
    FieldAsc,
}

impl Sort {
    /// Every sort, by the name the API and the command line use.
    pub const ALL: [(&'static str, Sort); 7] = [
        ("relevance", Sort::Relevance),
        ("similar_desc", Sort::SimilarDesc),
        ("similar_asc", Sort::SimilarAsc),
        ("newest", Sort::Newest),
        ("trending", Sort::Trending),
        ("hot", Sort::Hot),
        ("oldest", Sort::Oldest),
    ];

    /// Whether the order reads the trend window's figures ([`Joined`], or its decay).
    pub fn reads_trends(self) -> bool {
        matches!(self, Sort::Trending | Sort::Hot)
    }

    /// For an order by a field, whether it is descending; `None` for the other orders.
    pub fn descending_field(self) -> Option<bool> {
        match self {
            Sort::FieldDesc => Some(true),
            Sort::FieldAsc => Some(false),
            _ => None,
        }
    }

    /// The order of two clusters: the sort's key, then the better score, then the smaller
    /// root, so that the order is total and repeatable.
    pub fn compare(self, a: &CollapsedCluster, b: &CollapsedCluster) -> Ordering {
        self.compare_keys(&SortKey::of(a), &SortKey::of(b))
    }

    /// [`compare`](Self::compare) on what the order reads of a cluster, wherever it was
    /// collected: the same order for the clusters of one index and for those that the shards
    /// of an index split by story answered.
    pub fn compare_keys(self, a: &SortKey, b: &SortKey) -> Ordering {
        let primary = match self {
            Sort::Relevance => Ordering::Equal,
            Sort::SimilarDesc => b.size.cmp(&a.size),
            Sort::SimilarAsc => a.size.cmp(&b.size),
            Sort::Newest => b.newest.cmp(&a.newest),
            Sort::Oldest => a.oldest.cmp(&b.oldest),
            Sort::Trending => (b.joined.growth().cmp(&a.joined.growth()))
                .then_with(|| b.joined.recent.cmp(&a.joined.recent)),
            Sort::Hot => b.hot.total_cmp(&a.hot),
            Sort::FieldDesc => compare_values(a.value, b.value, true),
            Sort::FieldAsc => compare_values(a.value, b.value, false),
        };
        primary
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.root.cmp(&b.root))
    }
}

/// What a [`Sort`] orders clusters by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SortKey {
    /// Live documents.
    pub size: u64,
    /// The newest matching document's event time (read only by [`Sort::Newest`]).
    pub newest: Timestamp,
    /// The oldest matching document's event time (read only by [`Sort::Oldest`]).
    pub oldest: Timestamp,
    /// The best score.
    pub score: Score,
    /// The articles that joined within the trend window and before (read only by
    /// [`Sort::Trending`]).
    pub joined: Joined,
    /// The [`Sort::Hot`] value.
    pub hot: f64,
    /// The value in a field's order (read only by [`Sort::FieldDesc`] and [`Sort::FieldAsc`]).
    pub value: Option<SortValue>,
    /// The root, the last tie-break.
    pub root: Fingerprint,
}

impl SortKey {
    fn of(cluster: &CollapsedCluster) -> Self {
        SortKey {
            size: cluster.size,
            newest: cluster.newest,
            oldest: cluster.oldest,
            score: cluster.score,
            joined: cluster.joined,
            hot: cluster.hot,
            value: cluster.value,
            root: cluster.root,
        }
    }
}

impl std::str::FromStr for Sort {
    type Err = crate::Error;

    /// One of the names of [`Sort::ALL`]; an order by a field is a [`ListOrder`].
    fn from_str(text: &str) -> crate::Result<Self> {
        Sort::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|&(_, sort)| sort)
            .ok_or_else(|| {
                let names: Vec<&str> = Sort::ALL.iter().map(|(name, _)| *name).collect();
                crate::Error::Query(format!(
                    "sort must be one of {}, or FIELD:desc / FIELD:asc for a number, date or \
                     boolean field of your own (likes:desc); got {text:?}",
                    names.join(", ")
                ))
            })
    }
}

/// A list page's order as the API and the command line write it: a name of [`Sort::ALL`], or
/// `FIELD:desc` / `FIELD:asc` for a field of one's own ([`Sort::FieldDesc`],
/// [`Sort::FieldAsc`]; which fields qualify: [`SortField::find`]).
///
/// ```
/// use tantivy_dedup::engine::{ListOrder, Sort};
///
/// let likes: ListOrder = "likes:desc".parse()?;
/// assert_eq!((likes.sort, likes.field.as_deref()), (Sort::FieldDesc, Some("likes")));
/// assert_eq!(likes.to_string(), "likes:desc");
/// assert_eq!("newest".parse::<ListOrder>()?, ListOrder::from(Sort::Newest));
/// assert!("likes:up".parse::<ListOrder>().is_err());
/// assert!("likes".parse::<ListOrder>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOrder {
    /// The order.
    pub sort: Sort,
    /// The field of [`Sort::FieldDesc`] and [`Sort::FieldAsc`]; `None` for the others.
    pub field: Option<String>,
}

impl From<Sort> for ListOrder {
    fn from(sort: Sort) -> Self {
        ListOrder { sort, field: None }
    }
}

impl std::str::FromStr for ListOrder {
    type Err = crate::Error;

    fn from_str(text: &str) -> crate::Result<Self> {
        let Some((field, direction)) = text.rsplit_once(':') else {
            return text.parse::<Sort>().map(ListOrder::from);
        };
        let sort = match direction {
            "desc" => Sort::FieldDesc,
            "asc" => Sort::FieldAsc,
            other => {
                return Err(crate::Error::Query(format!(
                    "sort {text:?}: a field's order is FIELD:desc (largest first) or FIELD:asc \
                     (smallest first), not {other:?}"
                )));
            }
        };
        if field.is_empty() {
            return Err(crate::Error::Query(format!(
                "sort {text:?} names no field: write FIELD:{direction}, such as likes:{direction}"
            )));
        }
        Ok(ListOrder {
            sort,
            field: Some(field.to_owned()),
        })
    }
}

impl std::fmt::Display for ListOrder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Sort::ALL.iter().find(|(_, sort)| *sort == self.sort);
        match (name, &self.field, self.sort.descending_field()) {
            (Some((name, _)), _, _) => formatter.write_str(name),
            (None, Some(field), Some(true)) => write!(formatter, "{field}:desc"),
            (None, Some(field), _) => write!(formatter, "{field}:asc"),
            (None, None, _) => write!(formatter, "{:?}", self.sort),
        }
    }
}

#[cfg(test)]
mod tests {
    use tantivy::schema::{STRING, Schema};
    use tantivy::{Index, IndexWriter, Term, doc};

    use super::*;

    #[test]
    fn all_documents_as_words() {
        for max_doc in [0, 1, 63, 64, 65, 130] {
            let all: Vec<DocId> = documents_in(words(None, max_doc)).collect();
            assert_eq!(all, (0..max_doc).collect::<Vec<_>>());
        }
    }

    /// The delete file read as words holds the alive documents Tantivy's bitset holds (were
    /// it read otherwise, every comparison would fall back to a pass over the documents).
    #[test]
    fn delete_file_words_are_the_alive_documents() -> tantivy::Result<()> {
        let mut builder = Schema::builder();
        let id = builder.add_text_field("id", STRING);
        let index = Index::create_in_ram(builder.build());
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
        for number in 0..200 {
            writer.add_document(doc!(id => number.to_string()))?;
        }
        writer.commit()?;
        let deleted = (0..200).filter(|number| number % 7 == 3 || *number > 190);
        for number in deleted.clone() {
            writer.delete_term(Term::from_field_text(id, &number.to_string()));
        }
        writer.commit()?;
        let searcher = index.reader()?.searcher();
        let segment = &searcher.segment_readers()[0];
        let alive = segment.alive_bitset().map(|alive| alive.iter_alive());
        let expected = alive.map(|alive| words_of(alive, segment.max_doc()));
        assert_eq!(segment.num_docs() as usize, 200 - deleted.count());
        assert!(expected.is_some());
        assert_eq!(delete_file_words(segment), expected);
        assert_eq!(alive_words(segment), expected);
        Ok(())
    }
}
