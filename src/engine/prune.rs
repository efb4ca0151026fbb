//! Pruning tombstones: deleting from the index the tombstones that a durable forest checkpoint
//! made unnecessary.
//!
//! A tombstone keeps a deleted document's insert so that a replay places it as the writer did
//! (see [`recovery`](super::recovery)). Reopening replays only the inserts made after the
//! checkpoint, and takes the deletes the checkpoint did not list off their nodes; so a
//! tombstone the checkpoint lists is never read again. The writer prunes those whose inserts
//! are older than the window at the checkpoint, at the next commit: with `[index] retention`
//! every document ends as a tombstone, and without pruning the index would keep one per
//! document ever written. A tombstone made after the checkpoint, even of an older insert, is
//! not listed, and stays until a later checkpoint lists it.

use std::sync::Arc;

use tantivy::query::{
    BitSetDocSet, ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight,
};
use tantivy::{BitSet, DocId, Score, Searcher, SegmentReader, TantivyError};

use crate::engine::schema::{EVENT_TIME, ROOT, SEQUENCE};
use crate::forest::Timestamp;

/// What a durable checkpoint lets the writer prune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrunePlan {
    /// The sequence numbers of the tombstones the checkpoint lists, sorted.
    pub(crate) listed: Vec<u64>,
    /// Those whose insert's event time is before this (the checkpoint's newest time less the
    /// window) may go.
    pub(crate) before: Timestamp,
}

/// Calls `visit` with the document, insert sequence number and event time of each tombstone
/// among `docs` of `segment`.
fn for_each_tombstone(
    segment: &SegmentReader,
    docs: impl Iterator<Item = DocId>,
    mut visit: impl FnMut(DocId, u64, Timestamp),
) -> tantivy::Result<()> {
    let fast = segment.fast_fields();
    let (sequences, times, roots) = (fast.u64(SEQUENCE)?, fast.i64(EVENT_TIME)?, fast.u64(ROOT)?);
    for doc in docs {
        if roots.first(doc).is_some() {
            continue;
        }
        if let (Some(sequence), Some(time)) = (sequences.first(doc), times.first(doc)) {
            visit(doc, sequence, time);
        }
    }
    Ok(())
}

/// The sequence numbers of the tombstones of `searcher` that `plan` lets go, sorted.
pub(crate) fn prunable(searcher: &Searcher, plan: &PrunePlan) -> tantivy::Result<Arc<[u64]>> {
    let mut found = Vec::new();
    for segment in searcher.segment_readers() {
        for_each_tombstone(segment, segment.doc_ids_alive(), |_, sequence, time| {
            if time < plan.before && plan.listed.binary_search(&sequence).is_ok() {
                found.push(sequence);
            }
        })?;
    }
    found.sort_unstable();
    Ok(found.into())
}

/// The tombstones of some inserts, by sequence number (sorted): what a prune deletes. Each
/// insert has at most one tombstone, and a live document never matches.
#[derive(Debug, Clone)]
pub(crate) struct TombstonesQuery {
    sequences: Arc<[u64]>,
}

impl TombstonesQuery {
    pub(crate) fn new(sequences: Arc<[u64]>) -> Self {
        TombstonesQuery { sequences }
    }
}

impl Query for TombstonesQuery {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl TombstonesQuery {
    /// The documents of `segment` that match.
    fn matching(&self, segment: &SegmentReader) -> tantivy::Result<BitSet> {
        let mut matching = BitSet::with_max_value(segment.max_doc());
        for_each_tombstone(segment, 0..segment.max_doc(), |doc, sequence, _| {
            if self.sequences.binary_search(&sequence).is_ok() {
                matching.insert(doc);
            }
        })?;
        Ok(matching)
    }
}

impl Weight for TombstonesQuery {
    fn scorer(&self, segment: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let matching = BitSetDocSet::from(self.matching(segment)?);
        Ok(Box::new(ConstScorer::new(matching, boost)))
    }

    fn explain(&self, segment: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        if self.matching(segment)?.contains(doc) {
            Ok(Explanation::new("a tombstone to prune", 1.0))
        } else {
            Err(TantivyError::InvalidArgument(format!(
                "document {doc} is not a tombstone to prune"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use tantivy::collector::DocSetCollector;
    use tantivy::schema::Schema;
    use tantivy::{Index, IndexWriter, TantivyDocument};

    use super::*;
    use crate::DedupConfig;
    use crate::engine::schema::DedupFields;

    /// An index of live documents (with a root) and tombstones: (sequence, time, live).
    fn index_of(documents: &[(u64, i64, bool)]) -> Index {
        let mut builder = Schema::builder();
        let fields = DedupFields::add_to(&mut builder, &DedupConfig::default()).unwrap();
        let index = Index::create_in_ram(builder.build());
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        for &(sequence, time, live) in documents {
            let mut document = TantivyDocument::default();
            document.add_u64(fields.sequence, sequence);
            document.add_i64(fields.event_time, time);
            if live {
                document.add_u64(fields.root, 7);
            }
            writer.add_document(document).unwrap();
        }
        writer.commit().unwrap();
        index
    }

    fn sequences(index: &Index, query: &dyn Query) -> Vec<u64> {
        let searcher = index.reader().unwrap().searcher();
        let mut found: Vec<u64> = searcher
            .search(query, &DocSetCollector)
            .unwrap()
            .into_iter()
            .map(|address| {
                let segment = searcher.segment_reader(address.segment_ord);
                let column = segment.fast_fields().u64(SEQUENCE).unwrap();
                column.first(address.doc_id).unwrap()
            })
            .collect();
        found.sort_unstable();
        found
    }

    #[test]
    fn only_listed_tombstones_older_than_the_cut_are_prunable_and_matched() {
        // Tombstones 1 (old, listed), 2 (old, not listed: deleted after the checkpoint),
        // 3 (listed, too recent); live 4 (old); tombstone 5 (old, listed).
        let index = index_of(&[
            (1, 100, false),
            (2, 100, false),
            (3, 900, false),
            (4, 100, true),
            (5, 200, false),
        ]);
        let plan = PrunePlan {
            listed: vec![1, 3, 4, 5],
            before: 500,
        };
        let searcher = index.reader().unwrap().searcher();
        let prunable = prunable(&searcher, &plan).unwrap();
        assert_eq!(&*prunable, &[1, 5]);
        // The query matches tombstones by number, never a live document of the same number.
        let query = TombstonesQuery::new(Arc::from([1, 4, 5]));
        assert_eq!(sequences(&index, &query), [1, 5]);
    }

    #[test]
    fn deleting_by_the_query_removes_exactly_its_tombstones_in_every_segment() {
        let mut builder = Schema::builder();
        let fields = DedupFields::add_to(&mut builder, &DedupConfig::default()).unwrap();
        let index = Index::create_in_ram(builder.build());
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let add = |writer: &mut IndexWriter, sequence: u64, live: bool| {
            let mut document = TantivyDocument::default();
            document.add_u64(fields.sequence, sequence);
            document.add_i64(fields.event_time, 100);
            if live {
                document.add_u64(fields.root, 7);
            }
            writer.add_document(document).unwrap();
        };
        // Two segments, each with tombstones and live documents.
        for (sequence, live) in [(1, false), (2, true), (3, false)] {
            add(&mut writer, sequence, live);
        }
        writer.commit().unwrap();
        for (sequence, live) in [(4, false), (5, true), (6, false)] {
            add(&mut writer, sequence, live);
        }
        writer.commit().unwrap();
        writer
            .delete_query(Box::new(TombstonesQuery::new(Arc::from([1, 2, 6, 9]))))
            .unwrap();
        // Added after the delete in the same commit: Tantivy applies the delete only to
        // documents added before it.
        add(&mut writer, 9, false);
        writer.commit().unwrap();
        let everything = tantivy::query::AllQuery;
        assert_eq!(sequences(&index, &everything), [2, 3, 4, 5, 9]);
    }
}
