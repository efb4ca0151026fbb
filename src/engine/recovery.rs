//! Rebuilding the forest from the index on open.
//!
//! The forest's decisions depend on every insert and its order, including inserts whose
//! documents were later deleted or replaced (a deleted document may be where a live cluster's
//! root came from). Every live document and every tombstone keeps its insert's sequence
//! number, simhash, event time and (default mode) sketch in fast fields, so replaying them in sequence order rebuilds
//! the very forest the writer had at its last commit, and later inserts decide exactly as they
//! would have without the restart.

use std::time::{Duration, Instant};

use tantivy::Searcher;

use crate::Fingerprint;
use crate::engine::schema::{EVENT_TIME, ROOT, SEQUENCE, SIMHASH, SKETCH, sketch_in};
use crate::forest::{Forest, Signature, Timestamp};
use crate::verify::Sketch;

/// What opening an index replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RecoveryReport {
    /// Inserts replayed into the forest (live documents and tombstones).
    pub replayed: u64,
    /// Of those, the inserts of documents since deleted or replaced.
    pub tombstones: u64,
    /// Live documents whose stored root differs from the replayed one. Always 0 unless the
    /// index was written with other dedup settings (such as a different window).
    pub mismatched_roots: u64,
    /// How long the replay took (`elapsed_ms` in JSON).
    #[serde(rename = "elapsed_ms", serialize_with = "serialize_millis")]
    #[cfg_attr(feature = "server", schema(value_type = f64))]
    pub elapsed: Duration,
}

fn serialize_millis<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1e3)
}

/// One insert as the index remembers it.
#[derive(Debug, Clone)]
struct InsertEvent {
    sequence: u64,
    simhash: Fingerprint,
    time: Timestamp,
    sketch: Option<Sketch>,
    /// The stored root; `None` for a tombstone.
    root: Option<Fingerprint>,
}

/// One past the largest sequence number of a live insert (what [`replay`] gives), read
/// without decoding anything else.
fn next_sequence(searcher: &Searcher) -> tantivy::Result<u64> {
    let mut next = 0;
    for segment in searcher.segment_readers() {
        let fast = segment.fast_fields();
        let (sequences, simhashes, times) = (
            fast.u64(SEQUENCE)?,
            fast.u64(SIMHASH)?,
            fast.i64(EVENT_TIME)?,
        );
        for doc in segment.doc_ids_alive() {
            if let (Some(sequence), Some(_), Some(_)) =
                (sequences.first(doc), simhashes.first(doc), times.first(doc))
            {
                next = next.max(sequence + 1);
            }
        }
    }
    Ok(next)
}

/// Replays every insert the index remembers into `forest` (which must be empty), and returns
/// what it did with the next free sequence number. Without a forest (the forest is shared and
/// already holds them) only the sequence number is read.
pub fn replay(
    searcher: &Searcher,
    forest: Option<&mut Forest>,
) -> tantivy::Result<(RecoveryReport, u64)> {
    let started = Instant::now();
    let Some(forest) = forest else {
        let report = RecoveryReport {
            elapsed: started.elapsed(),
            ..RecoveryReport::default()
        };
        return Ok((report, next_sequence(searcher)?));
    };
    let mut events = Vec::with_capacity(searcher.num_docs() as usize);
    for segment in searcher.segment_readers() {
        let fast = segment.fast_fields();
        let sequences = fast.u64(SEQUENCE)?;
        let simhashes = fast.u64(SIMHASH)?;
        let times = fast.i64(EVENT_TIME)?;
        let roots = fast.u64(ROOT)?;
        let sketches = fast.column_opt::<u64>(SKETCH)?;
        for doc in segment.doc_ids_alive() {
            let (Some(sequence), Some(simhash), Some(time)) =
                (sequences.first(doc), simhashes.first(doc), times.first(doc))
            else {
                continue;
            };
            let sketch = match &sketches {
                Some(column) => sketch_in(column, doc)?,
                None => None,
            };
            events.push(InsertEvent {
                sequence,
                simhash: Fingerprint(simhash),
                time,
                sketch,
                root: roots.first(doc).map(Fingerprint),
            });
        }
    }
    events.sort_unstable_by_key(|event| event.sequence);
    let mut report = RecoveryReport::default();
    let next_sequence = events.last().map_or(0, |event| event.sequence + 1);
    for event in &mut events {
        let signature = Signature {
            fingerprint: event.simhash,
            sketch: event.sketch.take(),
        };
        let placement = forest.try_place(signature, event.time).map_err(|error| {
            tantivy::TantivyError::SystemError(format!(
                "replaying insert {}: {error}",
                event.sequence
            ))
        })?;
        report.replayed += 1;
        match event.root {
            Some(root) if root != placement.root => report.mismatched_roots += 1,
            Some(_) => {}
            None => report.tombstones += 1,
        }
    }
    // Deleted documents no longer count on their nodes (the nodes stay: they may tie later
    // leaves to their trees).
    for event in events.iter().filter(|event| event.root.is_none()) {
        forest.remove_document(event.simhash);
    }
    report.elapsed = started.elapsed();
    Ok((report, next_sequence))
}
