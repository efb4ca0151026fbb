//! Rebuilding the forest from the index on open.
//!
//! The forest's decisions depend on every insert and its order, including inserts whose
//! documents were later deleted or replaced (a deleted document may be where a live cluster's
//! root came from). Every live document and every tombstone keeps its insert's sequence
//! number, simhash, event time and (default mode) sketch in fast fields, so replaying them in sequence order rebuilds
//! the very forest the writer had at its last commit, and later inserts decide exactly as they
//! would have without the restart.
//!
//! Replaying every insert costs time in proportion to all inserts ever made, so a writer with a
//! checkpoint directory also saves its forest there at some commits ([`save_checkpoint`]): the
//! forest as it was after every insert numbered below the checkpoint's sequence number, with
//! the tombstones the index held then. Opening loads it and replays only the inserts numbered
//! from there on; a delete made after the checkpoint of an insert made before it takes its
//! document off the node's count, as a full replay would. A delete is replayed where the writer
//! made it, right before the insert its tombstone names ([`DELETED_AT`]): replayed at the end,
//! it could find its node expired and a node of the same value made by a later insert, and
//! take the document off that one. (A tombstone of an index made before that field existed is
//! still replayed at the end, and counted in [`RecoveryReport::deletes_at_end`].) The forest
//! that gives is the one a full replay gives (tested; but for such a node's count), and a
//! checkpoint that cannot be used (missing, damaged, of other settings, newer than the
//! index's last commit) means a full replay. Damaged includes
//! its sketch chunk files: each one's words the checkpoint covers must match the checksum it
//! recorded of them, so that zeroed or overwritten sketches are never loaded as real ones.
//!
//! Once a checkpoint is durable, the tombstones it lists whose inserts are older than the
//! window at that checkpoint are no longer needed to reopen, and the writer deletes them from
//! the index ([`prune`](super::prune)), which keeps an index whose documents are deleted as
//! they age from growing without bound. The checkpoint is then the only record of those
//! inserts: a full replay of such an index misses them ([`RecoveryReport::pruned_inserts`]),
//! and gives a forest close to the writer's, not the same one.
//!
//! What the stream taught of each source's chrome ([`crate::chrome`]) is read again from the
//! pages themselves: the stored texts of the live documents of the last
//! [`FORGET_AFTER`] inserts, each source's latest [`RECENT_PAGES`] of them
//! ([`latest_pages`]), as the writer remembered them. A document deleted or replaced since
//! is not there to read: its source's older pages take its place.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use tantivy::Searcher;

use std::collections::HashMap;

use tantivy::schema::{Field, Value};
use tantivy::{DocAddress, TantivyDocument};

use crate::chrome::{FORGET_AFTER, PageLines, RECENT_PAGES};
use crate::dedup::{Deduplicator, Signer};
use crate::engine::schema::{DELETED_AT, EVENT_TIME, ROOT, SEQUENCE, SIMHASH, SKETCH, sketch_in};
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter, SavedCheckpoint};
use crate::forest::{Forest, Signature, Timestamp};
use crate::verify::Sketch;
use crate::verify::SketchStore;
use crate::{DedupConfig, Fingerprint};

/// The checkpoint's file in a checkpoint directory (the sketch chunks it names lie beside it).
pub const CHECKPOINT_FILE: &str = "forest.checkpoint";

/// What identifies the `[dedup]` settings in a checkpoint: a forest saved under other
/// settings would not decide as this one does.
pub(crate) fn settings_id(config: &DedupConfig) -> u64 {
    let settings = serde_json::to_vec(config).unwrap_or_default();
    xxhash_rust::xxh3::xxh3_64(&settings)
}

/// Where a checkpoint stands in the index's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CheckpointMark {
    /// The opstamp of the commit it was taken at.
    pub(crate) opstamp: u64,
    /// It holds every insert numbered below this, and no other.
    pub(crate) next_sequence: u64,
    /// The sequence numbers of the tombstones the index held then, sorted: their deletes are
    /// in the checkpoint's node counts already.
    pub(crate) tombstones: Vec<u64>,
}

/// Writes `forest` as the checkpoint of `dir` at `mark` (into memory: the forest is held up
/// only while it is copied); `settings` identifies the `[dedup]` settings. It replaces the
/// checkpoint there once [`SavedCheckpoint::make_durable`] is done.
pub(crate) fn save_checkpoint(
    dir: &Path,
    settings: u64,
    mark: &CheckpointMark,
    forest: &mut Forest,
) -> io::Result<SavedCheckpoint> {
    let mut out = CheckpointWriter::in_memory(&dir.join(CHECKPOINT_FILE))?;
    out.put_u64(settings)?;
    out.put_u64(mark.opstamp)?;
    out.put_u64(mark.next_sequence)?;
    out.put_slice(&mark.tombstones)?;
    forest.save(&mut out)?;
    out.finish()
}

/// A deduplicator of `config` whose forest keeps its sketches in `sketches` (an empty store
/// of the checkpoint directory `dir`, or a read-only snapshot of it), with the checkpoint of
/// `dir` loaded into it when there is one: then its mark, or why it cannot be used (and the
/// deduplicator must be dropped). The outer error is one that keeps any deduplicator from
/// being made. `last_opstamp` is the index's last commit.
pub(crate) fn open_checkpoint(
    dir: &Path,
    config: &DedupConfig,
    last_opstamp: u64,
    sketches: SketchStore,
) -> crate::Result<(Deduplicator, io::Result<Option<CheckpointMark>>)> {
    let mut dedup = Deduplicator::with_sketches(config.clone(), sketches)?;
    let mark = load_checkpoint(dir, settings_id(config), last_opstamp, dedup.forest_mut());
    Ok((dedup, mark))
}

/// What a commit records in Tantivy's commit payload: the next free sequence number, which
/// the documents alone may not tell once the newest inserts' tombstones were pruned; and, for
/// an index that applies an ordered log of writes (a shard's replica), the position in that
/// log of the last write the commit holds, where applying resumes after a restart.
pub(crate) fn commit_payload(next_sequence: u64, log_position: Option<&str>) -> String {
    let mut payload = serde_json::json!({ NEXT_SEQUENCE_KEY: next_sequence });
    if let Some(position) = log_position {
        payload[LOG_POSITION_KEY] = serde_json::Value::from(position);
    }
    payload.to_string()
}

/// The keys of [`commit_payload`].
const NEXT_SEQUENCE_KEY: &str = "tantivy_dedup_next_sequence";
const LOG_POSITION_KEY: &str = "tantivy_dedup_log_position";

fn payload_value(payload: Option<&str>, key: &str) -> Option<serde_json::Value> {
    let mut payload: serde_json::Value = serde_json::from_str(payload?).ok()?;
    Some(payload.get_mut(key)?.take())
}

/// The next sequence number a commit's payload records, if it is one of ours.
pub(crate) fn recorded_next_sequence(payload: Option<&str>) -> Option<u64> {
    payload_value(payload, NEXT_SEQUENCE_KEY)?.as_u64()
}

/// The log position a commit's payload records, if it records one.
pub(crate) fn recorded_log_position(payload: Option<&str>) -> Option<String> {
    match payload_value(payload, LOG_POSITION_KEY)? {
        serde_json::Value::String(position) => Some(position),
        _ => None,
    }
}

/// Loads the checkpoint of `dir` into `forest` (new and empty, its sketches in `dir`), if there
/// is one; an error when it cannot be used: then `forest` must be dropped. `last_opstamp` is
/// the index's last commit.
fn load_checkpoint(
    dir: &Path,
    settings: u64,
    last_opstamp: u64,
    forest: &mut Forest,
) -> io::Result<Option<CheckpointMark>> {
    let Some(mut input) = CheckpointReader::open(&dir.join(CHECKPOINT_FILE))? else {
        return Ok(None);
    };
    if input.get_u64()? != settings {
        return Err(input.invalid("taken with other [dedup] settings"));
    }
    let opstamp = input.get_u64()?;
    if opstamp > last_opstamp {
        return Err(input.invalid(format!(
            "taken at commit {opstamp}, after the index's last commit {last_opstamp}"
        )));
    }
    let next_sequence = input.get_u64()?;
    let tombstones: Vec<u64> = input.get_vec()?;
    if !tombstones.is_sorted() {
        return Err(input.invalid("tombstones out of order"));
    }
    forest.load(&mut input)?;
    input.finish()?;
    Ok(Some(CheckpointMark {
        opstamp,
        next_sequence,
        tombstones,
    }))
}

/// What opening an index replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RecoveryReport {
    /// Inserts replayed into the forest (live documents and tombstones).
    pub replayed: u64,
    /// Of those, the inserts of documents since deleted or replaced.
    pub tombstones: u64,
    /// Live documents whose stored root differs from the replayed one. Always 0 unless the
    /// index was written with other dedup settings (such as a different window), the replay
    /// missed pruned inserts, or a build before 2026-11-27 gave a story an expired story's id
    /// (the replay gives the later story an id of its own).
    pub mismatched_roots: u64,
    /// Inserts this replay should have started from that the index no longer records (their
    /// tombstones were pruned once a checkpoint held them): only a full replay, after the
    /// checkpoint was refused or removed, misses any, and its forest then differs a little
    /// from the writer's. (Exact for indexes whose commits record the next sequence number
    /// in their payload; for older ones, pruned inserts numbered after every recorded one go
    /// uncounted.)
    pub pruned_inserts: u64,
    /// Deletes whose tombstone records no place among the inserts (written in an index made
    /// before [`DELETED_AT`]), taken off their nodes at the end of the replay: where a node
    /// expired after such a delete and a later insert made one of the same value, that
    /// node's document count differs from the writer's (nothing else does).
    pub deletes_at_end: u64,
    /// Inserts numbered below this came from the forest checkpoint, not from a replay; `None`
    /// when no checkpoint was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_sequence: Option<u64>,
    /// Why the checkpoint found was not used (the replay then started from the first insert).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_refused: Option<String>,
    /// How long the replay took, the checkpoint's loading included (`elapsed_ms` in JSON).
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

/// One delete as its tombstone remembers it.
#[derive(Debug, Clone, Copy)]
struct Delete {
    /// The insert it came before ([`DELETED_AT`]; `u64::MAX` when not recorded).
    before: u64,
    /// The node it took the document off.
    simhash: Fingerprint,
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

/// What [`replay`] found and did.
pub(crate) struct Replayed {
    pub(crate) report: RecoveryReport,
    /// The next free sequence number.
    pub(crate) next_sequence: u64,
    /// The sequence numbers of every tombstone in the index, sorted.
    pub(crate) tombstones: Vec<u64>,
}

/// Replays the inserts the index remembers into `forest`: every one into an empty forest, or,
/// with `checkpoint` (the forest was loaded from it), those numbered from its sequence number
/// on. Without a forest (the forest is shared and already holds them) only the sequence number
/// is read. `recorded_next` is the next sequence number the last commit recorded
/// ([`recorded_next_sequence`]; `None` for an index written before it was recorded).
pub(crate) fn replay(
    searcher: &Searcher,
    forest: Option<&mut Forest>,
    checkpoint: Option<&CheckpointMark>,
    recorded_next: Option<u64>,
) -> tantivy::Result<Replayed> {
    let started = Instant::now();
    let Some(forest) = forest else {
        let report = RecoveryReport {
            elapsed: started.elapsed(),
            ..RecoveryReport::default()
        };
        return Ok(Replayed {
            report,
            next_sequence: next_sequence(searcher)?.max(recorded_next.unwrap_or(0)),
            tombstones: Vec::new(),
        });
    };
    let start = checkpoint.map_or(0, |mark| mark.next_sequence);
    let mut events = Vec::new();
    let mut tombstones = Vec::new();
    // The deletes to replay: those of inserts replayed, and those since the checkpoint of
    // inserts it holds. They change node counts only, each where the writer made it.
    let mut deletes = Vec::new();
    for segment in searcher.segment_readers() {
        let fast = segment.fast_fields();
        let sequences = fast.u64(SEQUENCE)?;
        let simhashes = fast.u64(SIMHASH)?;
        let times = fast.i64(EVENT_TIME)?;
        let roots = fast.u64(ROOT)?;
        let sketches = fast.column_opt::<u64>(SKETCH)?;
        let deleted_at = fast.column_opt::<u64>(DELETED_AT)?;
        for doc in segment.doc_ids_alive() {
            let (Some(sequence), Some(simhash), Some(time)) =
                (sequences.first(doc), simhashes.first(doc), times.first(doc))
            else {
                continue;
            };
            let root = roots.first(doc).map(Fingerprint);
            if root.is_none() {
                tombstones.push(sequence);
                let known = sequence < start
                    && checkpoint
                        .is_some_and(|mark| mark.tombstones.binary_search(&sequence).is_ok());
                if !known {
                    let place = deleted_at.as_ref().and_then(|column| column.first(doc));
                    deletes.push(Delete {
                        // After its own insert whatever the field says; a tombstone written
                        // before its place was recorded: at the end.
                        before: place.map_or(u64::MAX, |before| before.max(sequence + 1)),
                        simhash: Fingerprint(simhash),
                    });
                }
            }
            if sequence < start {
                continue;
            }
            let sketch = match &sketches {
                Some(column) => sketch_in(column, doc)?,
                None => None,
            };
            events.push(InsertEvent {
                sequence,
                simhash: Fingerprint(simhash),
                time,
                sketch,
                root,
            });
        }
    }
    tombstones.sort_unstable();
    events.sort_unstable_by_key(|event| event.sequence);
    deletes.sort_by_key(|delete| delete.before);
    let mut deletes = deletes.into_iter().peekable();
    let mut report = RecoveryReport {
        checkpoint_sequence: checkpoint.map(|mark| mark.next_sequence),
        ..RecoveryReport::default()
    };
    // Never below what the commit recorded: the newest inserts' tombstones may have been
    // pruned, and their numbers must not be handed out again.
    let next_sequence = events
        .last()
        .map_or(start, |event| event.sequence + 1)
        .max(recorded_next.unwrap_or(0));
    // Sequence numbers are handed out one by one, and every insert leaves a live document or
    // a tombstone: a number missing is a pruned tombstone.
    report.pruned_inserts = (next_sequence - start).saturating_sub(events.len() as u64);
    for event in &mut events {
        while let Some(delete) = deletes.next_if(|delete| delete.before <= event.sequence) {
            forest.remove_document(delete.simhash);
        }
        let signature = Signature {
            fingerprint: event.simhash,
            sketch: event.sketch.take(),
            reason: None,
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
    for delete in deletes {
        report.deletes_at_end += u64::from(delete.before == u64::MAX);
        forest.remove_document(delete.simhash);
    }
    report.elapsed = started.elapsed();
    Ok(Replayed {
        report,
        next_sequence,
        tombstones,
    })
}

/// The pages of the live documents placed in the last [`FORGET_AFTER`] inserts (numbered
/// below `next_sequence`), at most [`RECENT_PAGES`] of each source, each with its sequence
/// number, in the order they were placed: the texts of `text_fields`, as stored, and the
/// source `source_field` names. A document whose texts are not stored, or cannot be read,
/// gives nothing.
pub(crate) fn latest_pages(
    searcher: &Searcher,
    source_field: Field,
    text_fields: &[Field],
    signer: &Signer,
    next_sequence: u64,
) -> tantivy::Result<Vec<(u64, PageLines)>> {
    let oldest = next_sequence.saturating_sub(FORGET_AFTER);
    let mut latest: Vec<(u64, DocAddress)> = Vec::new();
    for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
        let sequences = segment.fast_fields().u64(SEQUENCE)?;
        for doc in segment.doc_ids_alive() {
            if let Some(sequence) = sequences.first(doc).filter(|&sequence| sequence >= oldest) {
                latest.push((sequence, DocAddress::new(ordinal as u32, doc)));
            }
        }
    }
    latest.sort_unstable_by(|a, b| b.cmp(a));
    let mut per_source: HashMap<String, usize> = HashMap::new();
    let mut pages = Vec::new();
    for (sequence, address) in latest {
        // A document that cannot be read (a damaged store, which `check` names) teaches
        // nothing: opening never depends on the stored documents.
        let Ok(document) = searcher.doc::<TantivyDocument>(address) else {
            continue;
        };
        let Some(source) = document
            .get_first(source_field)
            .and_then(|value| value.as_str())
        else {
            continue;
        };
        let count = per_source.entry(source.to_owned()).or_default();
        if *count == RECENT_PAGES {
            continue;
        }
        let texts: Vec<&str> = text_fields
            .iter()
            .flat_map(|&field| document.get_all(field).filter_map(|value| value.as_str()))
            .collect();
        let normalized = texts
            .iter()
            .map(|text| crate::text::normalize(text))
            .collect();
        if let Some(page) = signer
            .page_lines(Some(source), normalized)
            .filter(PageLines::has_lines)
        {
            *count += 1;
            pages.push((sequence, page));
        }
    }
    pages.reverse();
    Ok(pages)
}
