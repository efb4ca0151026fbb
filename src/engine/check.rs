//! [`check_index`]: everything an index is made of read and checked (`tantivy-dedup check`):
//! every file's checksum, every stored document and fast field, the forest checkpoint's sketch
//! chunks against the documents' sketches, and the forest's replay.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use tantivy::directory::error::LockError;
use tantivy::directory::{Directory, INDEX_WRITER_LOCK};
use tantivy::index::SegmentComponent;
use tantivy::schema::{Field, Value};
use tantivy::{
    DocAddress, IndexMeta, ReloadPolicy, Searcher, SegmentMeta, SegmentReader, TantivyDocument,
    TantivyError,
};

use crate::dedup::Deduplicator;
use crate::engine::directory::{
    FOREST_DIR, META_FILE, index_error, open_tantivy, read_failure, segment_files, stored_settings,
};
use crate::engine::recovery::{self, CHECKPOINT_FILE, CheckpointMark, RecoveryReport};
use crate::engine::schema::{EVENT_TIME, ROOT, SEQUENCE, SIMHASH, SKETCH, VIA, sketch_in};
use crate::forest::{Forest, NodeInfo, Timestamp, clamp_time};
use crate::verify::SketchStore;
use crate::{DedupConfig, Fingerprint};
use crate::{Error, Result};

/// How many ids of documents whose sketches differ a report names.
const IDS_NAMED: usize = 5;

/// A file [`check_index`] found missing or damaged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    /// The file (`<segment>.*` for a segment that cannot be opened at all; the index
    /// directory for a failed replay).
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// What [`check_index`] read, and the damage it found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Segments of the last commit.
    pub segments: usize,
    /// Live documents, in the segments that could be read.
    pub documents: u64,
    /// Records of deleted or replaced documents, kept for the replay, in those segments.
    pub tombstones: u64,
    /// Stored documents decoded: every one of those segments, deleted ones included.
    pub stored_documents: u64,
    /// Fast field values decoded in those segments.
    pub fast_values: u64,
    /// Live documents whose sketch in the forest checkpoint's chunks was compared with their
    /// `_sketch` column (default mode; see [`check_index`]).
    pub sketches_compared: u64,
    /// Files whose checksum matched.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// What replaying every insert the index records did; `None` when damage kept it from
    /// running.
    pub replay: Option<RecoveryReport>,
    /// What loading the forest checkpoint and replaying the inserts after it did, as opening
    /// does; `None` without a usable checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_replay: Option<RecoveryReport>,
    /// Why the forest checkpoint could not be used, on an index that records every insert
    /// (not damage: opening then replays every insert; written, for instance, by a run with
    /// another `window`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_refused: Option<String>,
    /// Everything found missing or damaged, in the order found; empty for a sound index.
    pub damaged: Vec<Damage>,
}

impl CheckReport {
    /// Whether nothing was found damaged.
    pub fn is_sound(&self) -> bool {
        self.damaged.is_empty()
    }
}

/// Reads everything an index is made of, and reports what it read and every file it found
/// missing or damaged:
///
/// - meta.json and the settings file, as every open does;
/// - every file of the last commit: its footer, and the checksum of its whole content (the
///   CRC32 Tantivy wrote into the footer);
/// - in each segment whose files are sound: every stored document and every value of every
///   fast field, decoded, and the live documents counted against meta.json's;
/// - when nothing is damaged, the forest's replays, with their invariants checked: of every
///   insert the index records, and, with a forest checkpoint, of the checkpoint (read
///   without changing it) and the inserts after it, as an open does. The two must give the
///   same forest while the index records every insert (but for nodes' document counts when
///   the full replay took deletes off at its end, [`RecoveryReport::deletes_at_end`]: it
///   knows no better place for them); once tombstones were pruned, only the checkpoint
///   records those inserts, so it must be there and usable;
/// - the checkpoint's sketch chunk files: each must be there, a chunk long, with the checksum
///   the checkpoint recorded of the words it covers (opening refuses the checkpoint
///   otherwise), and the sketch each live document's node has in them must be the document's
///   own `_sketch` (or, for a document that joined a node of its text, verify against it).
///   That is compared for the documents whose insert the checkpoint holds and whose event
///   time is inside its window: their nodes cannot have expired since, so each must be there
///   (older ones' nodes may have expired and been made again by another text). Damaged
///   chunks end the check of the checkpoint there: a forest built on them decides otherwise.
///
/// Holds the index's writer lock meanwhile, so that no merge or garbage collection changes
/// files under it: while a server or an `ingest` writes, it fails with [`Error::Busy`]. An
/// error is what keeps the check from running at all (no index, meta.json or the settings
/// unreadable, another writer); damage is in the report.
pub fn check_index(dir: &Path) -> Result<CheckReport> {
    let config = stored_settings(dir)?;
    let (index, fields) = open_tantivy(dir, &config)?;
    let _lock =
        index
            .directory()
            .acquire_lock(&INDEX_WRITER_LOCK)
            .map_err(|error| match error {
                LockError::LockBusy => Error::Busy(dir.to_owned()),
                error => index_error(dir, TantivyError::LockFailure(error, None)),
            })?;
    let metas = index
        .load_metas()
        .map_err(|source| index_error(dir, source))?;
    let mut report = CheckReport {
        segments: metas.segments.len(),
        ..CheckReport::default()
    };
    for (segment, files) in segment_files(&metas) {
        let damaged_before = report.damaged.len();
        for file in files {
            let path = dir.join(&file);
            let problem = match index.directory().validate_checksum(&file) {
                Ok(true) => {
                    let metadata = std::fs::metadata(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                    report.files += 1;
                    report.bytes += metadata.len();
                    continue;
                }
                Ok(false) => {
                    "its checksum does not match: the content is not what Tantivy wrote".to_owned()
                }
                Err(error) => read_failure(&error).0,
            };
            report.damaged.push(Damage { path, problem });
        }
        if report.damaged.len() == damaged_before
            && let Err(damage) = read_segment(dir, &index, segment, &mut report)
        {
            report.damaged.push(damage);
        }
    }
    if report.is_sound() {
        replay_both_ways(dir, &index, &config.dedup, fields.id, &metas, &mut report)?;
    }
    Ok(report)
}

/// Replays the forest and checks what it gives: every insert the index records into an empty
/// forest, and, when the index has a checkpoint, the checkpoint (read, never changed) and the
/// inserts after it, as opening does. Both must keep the forest's invariants; while the index
/// still records every insert the two forests must be the same; once tombstones were pruned,
/// only the checkpoint holds those inserts, and a pruned index without a usable checkpoint is
/// damaged. A checkpoint refused on an index that records every insert is only noted: opening
/// replays every insert then, and loses nothing.
fn replay_both_ways(
    dir: &Path,
    index: &tantivy::Index,
    config: &DedupConfig,
    id_field: Field,
    metas: &IndexMeta,
    report: &mut CheckReport,
) -> Result<()> {
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(|source| index_error(dir, source))?;
    let searcher = reader.searcher();
    let recorded_next = recovery::recorded_next_sequence(metas.payload.as_deref());
    let checkpoint_dir = dir.join(FOREST_DIR);
    let checkpoint_file = checkpoint_dir.join(CHECKPOINT_FILE);
    let has_checkpoint = checkpoint_file.exists();
    // One forest at a time: the full replay's goes before the checkpoint is loaded, and only
    // its nodes stay for the comparison (with whether their document counts can be compared).
    let (full_report, full_nodes) = match replay_every_insert(&searcher, config, recorded_next) {
        Ok((dedup, full)) => {
            let compare = has_checkpoint && full.pruned_inserts == 0;
            let counts_known = full.deletes_at_end == 0;
            let nodes =
                compare.then(|| (comparable_nodes(dedup.forest(), counts_known), counts_known));
            (Some(full), nodes)
        }
        Err(problem) => {
            report.damaged.push(Damage {
                path: dir.to_owned(),
                problem: format!("the forest's replay failed: {problem}"),
            });
            (None, None)
        }
    };
    let pruned = full_report.as_ref().map_or(0, |full| full.pruned_inserts);
    let from_checkpoint = has_checkpoint.then(|| {
        replay_from_checkpoint(
            &checkpoint_dir,
            &searcher,
            config,
            id_field,
            metas.opstamp,
            recorded_next,
        )
    });
    if let Some(Ok(checked)) = &from_checkpoint {
        report.sketches_compared = checked.sketches.compared;
        let reopened = without_checkpoint(pruned);
        for damage in &checked.chunk_damage {
            report.damaged.push(Damage {
                path: damage.path.clone(),
                problem: format!(
                    "{}. Opening the index refuses the checkpoint: {reopened}",
                    damage.problem
                ),
            });
        }
        if checked.sketches.differing > 0 {
            report.damaged.push(Damage {
                path: checkpoint_file.clone(),
                problem: differing_sketches(&checked.sketches, &checkpoint_file, &reopened),
            });
        }
    }
    let mut damage = |path: &Path, problem: String| {
        report.damaged.push(Damage {
            path: path.to_owned(),
            problem,
        })
    };
    match from_checkpoint {
        Some(Ok(CheckpointCheck {
            replayed: Some((dedup, replayed)),
            ..
        })) => {
            if full_nodes.is_some_and(|(nodes, counts_known)| {
                nodes != comparable_nodes(dedup.forest(), counts_known)
            }) {
                damage(
                    &checkpoint_file,
                    "it and the inserts after it give another forest than replaying every \
                     insert"
                        .to_owned(),
                );
            }
            report.checkpoint_replay = Some(replayed);
        }
        // Its chunks are damaged, which is reported above.
        Some(Ok(_)) => {}
        Some(Err(problem)) if pruned > 0 => damage(
            &checkpoint_file,
            format!(
                "it cannot be used ({problem}), and only it records the {pruned} inserts whose \
                 tombstones were pruned: opening rebuilds a forest close to the writer's, not \
                 the same one"
            ),
        ),
        Some(Err(problem)) => report.checkpoint_refused = Some(problem),
        None if pruned > 0 => damage(
            dir,
            format!(
                "the forest checkpoint is missing, and only it recorded the {pruned} inserts \
                 whose tombstones were pruned: opening rebuilds a forest close to the writer's, \
                 not the same one"
            ),
        ),
        None => {}
    }
    report.replay = full_report;
    Ok(())
}

/// A forest's nodes in order, for comparing two replays: without their document counts when
/// `counts_known` is false (a replay took deletes off at its end, where it may have found a
/// node of the same value made again; see [`RecoveryReport::deletes_at_end`]).
fn comparable_nodes(forest: &Forest, counts_known: bool) -> Vec<NodeInfo> {
    let mut nodes = forest.nodes_in_order();
    if !counts_known {
        for node in &mut nodes {
            node.documents = 0;
        }
    }
    nodes
}

/// Every insert the index records, replayed into an empty forest.
fn replay_every_insert(
    searcher: &Searcher,
    config: &DedupConfig,
    recorded_next: Option<u64>,
) -> std::result::Result<(Deduplicator, RecoveryReport), String> {
    // Sketches in the temporary directory: the index's own may be read-only here.
    let mut dedup = Deduplicator::with_sketches_in(config.clone(), &std::env::temp_dir())
        .map_err(|error| error.to_string())?;
    let replayed = recovery::replay(searcher, Some(dedup.forest_mut()), None, recorded_next)
        .map_err(|error| error.to_string())?;
    dedup.forest().check_invariants()?;
    Ok((dedup, replayed.report))
}

/// The checkpoint of `dir` read without changing anything there, its sketch chunks checked,
/// and, unless they are damaged, the inserts after it replayed.
struct CheckpointCheck {
    /// Its chunk files that are missing, cut or changed in the words it covers.
    chunk_damage: Vec<Damage>,
    /// Its chunks' sketches compared with the index's.
    sketches: SketchComparison,
    /// Its forest with the inserts after it replayed, and what the replay did; `None` when
    /// its chunks are damaged.
    replayed: Option<(Deduplicator, RecoveryReport)>,
}

/// See [`CheckpointCheck`]; the error is why the checkpoint cannot be used.
fn replay_from_checkpoint(
    dir: &Path,
    searcher: &Searcher,
    config: &DedupConfig,
    id_field: Field,
    opstamp: u64,
    recorded_next: Option<u64>,
) -> std::result::Result<CheckpointCheck, String> {
    let started = Instant::now();
    let sketches = SketchStore::snapshot_of_checkpoint_directory(dir);
    let (mut dedup, mark) = recovery::open_checkpoint(dir, config, opstamp, sketches)
        .map_err(|error| error.to_string())?;
    let mark = mark
        .map_err(|error| error.to_string())?
        .ok_or("it is gone")?;
    let chunk_damage: Vec<Damage> = dedup
        .forest()
        .sketches()
        .map_or(&[][..], SketchStore::chunk_damage)
        .iter()
        .map(|damage| Damage {
            path: damage.path.clone(),
            problem: damage.problem.clone(),
        })
        .collect();
    let sketches = compare_sketches(searcher, dedup.forest(), &mark, config, id_field)
        .map_err(|error| error.to_string())?;
    if !chunk_damage.is_empty() || sketches.differing > 0 {
        return Ok(CheckpointCheck {
            chunk_damage,
            sketches,
            replayed: None,
        });
    }
    let replayed = recovery::replay(
        searcher,
        Some(dedup.forest_mut()),
        Some(&mark),
        recorded_next,
    )
    .map_err(|error| error.to_string())?;
    dedup.forest().check_invariants()?;
    let report = RecoveryReport {
        elapsed: started.elapsed(),
        ..replayed.report
    };
    Ok(CheckpointCheck {
        chunk_damage,
        sketches,
        replayed: Some((dedup, report)),
    })
}

/// What comparing a checkpoint's sketches with the index's found.
#[derive(Debug, Default)]
struct SketchComparison {
    /// Live documents compared.
    compared: u64,
    /// Those whose sketch differs.
    differing: u64,
    /// The ids of the first [`IDS_NAMED`] of them, in insert order.
    first_ids: Vec<String>,
}

/// Compares the sketch of each live document whose insert `mark`'s checkpoint holds with the
/// one its node has in `forest`, just loaded from that checkpoint (see [`check_index`] for
/// which documents). A node's sketch is that of the document that made it: equal to a
/// document's own when the document made the node (a new story or a new leaf), verified
/// against it when the document joined a node of its text (its `_via` is its own node;
/// either, in an index made before `_via`).
fn compare_sketches(
    searcher: &Searcher,
    forest: &Forest,
    mark: &CheckpointMark,
    config: &DedupConfig,
    id_field: Field,
) -> tantivy::Result<SketchComparison> {
    let mut comparison = SketchComparison::default();
    let (Some(verifier), Some(sketches), Some(newest)) =
        (config.verifier(), forest.sketches(), forest.newest_time())
    else {
        return Ok(comparison);
    };
    // Nodes last seen before this have expired; a node is last seen no earlier than the
    // (clamped) event time of any document placed at it.
    let cutoff = newest - config.window_seconds() as Timestamp;
    let mut differing = Vec::new();
    for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
        let fast = segment.fast_fields();
        let Some(own_sketches) = fast.column_opt::<u64>(SKETCH)? else {
            continue;
        };
        let (sequences, nodes, times, roots) = (
            fast.u64(SEQUENCE)?,
            fast.u64(SIMHASH)?,
            fast.i64(EVENT_TIME)?,
            fast.u64(ROOT)?,
        );
        let vias = fast.column_opt::<u64>(VIA)?;
        for doc in segment.doc_ids_alive() {
            let (Some(sequence), Some(node), Some(time), Some(_)) = (
                sequences.first(doc),
                nodes.first(doc),
                times.first(doc),
                roots.first(doc),
            ) else {
                continue;
            };
            if sequence >= mark.next_sequence || Timestamp::from(clamp_time(time)) < cutoff {
                continue;
            }
            let Some(own) = sketch_in(&own_sketches, doc)? else {
                continue;
            };
            comparison.compared += 1;
            let node = Fingerprint(node);
            let joined = vias
                .as_ref()
                .is_none_or(|vias| vias.first(doc) == Some(node.0));
            let agrees = sketches.get(node).is_some_and(|stored| {
                stored == own.view() || (joined && verifier.matches(own.view(), stored))
            });
            if !agrees {
                differing.push((sequence, DocAddress::new(ordinal as u32, doc)));
            }
        }
    }
    differing.sort_unstable_by_key(|&(sequence, _)| sequence);
    for &(_, address) in differing.iter().take(IDS_NAMED) {
        let document: TantivyDocument = searcher.doc(address)?;
        let id = document
            .get_first(id_field)
            .and_then(|value| value.as_str());
        comparison.first_ids.push(id.unwrap_or_default().to_owned());
    }
    comparison.differing = differing.len() as u64;
    Ok(comparison)
}

/// The damage of a checkpoint whose chunks' sketches differ from the index's, and what to do
/// (`reopened`: [`without_checkpoint`]).
fn differing_sketches(sketches: &SketchComparison, checkpoint: &Path, reopened: &str) -> String {
    let count = sketches.differing;
    let documents = if count == 1 { "document" } else { "documents" };
    format!(
        "the sketches of {count} {documents} in its sketch chunks differ from their {SKETCH} \
         column (first: {}): its chunks do not hold what it saved. Delete {} and open the \
         index: {reopened}",
        sketches.first_ids.join(", "),
        checkpoint.display()
    )
}

/// What opening an index does without its checkpoint, for the messages about a damaged one;
/// `pruned` inserts are recorded by the checkpoint alone.
fn without_checkpoint(pruned: u64) -> String {
    match pruned {
        0 => "it then replays every insert from the index".to_owned(),
        pruned => format!(
            "it then replays every insert the index records, which misses the {pruned} whose \
             tombstones were pruned (only the checkpoint records them): a forest close to the \
             writer's, not the same"
        ),
    }
}

/// Decodes every stored document and every fast field value of a segment whose files are
/// sound, and counts its live documents and tombstones into `report`. The damage names the
/// file that failed.
fn read_segment(
    dir: &Path,
    index: &tantivy::Index,
    segment: &SegmentMeta,
    report: &mut CheckReport,
) -> std::result::Result<(), Damage> {
    let damage = |component, problem: &dyn Display| Damage {
        path: dir.join(segment.relative_path(component)),
        problem: problem.to_string(),
    };
    let reader = SegmentReader::open(&index.segment(segment.clone())).map_err(|error| Damage {
        path: dir.join(format!("{}.*", segment.id().uuid_string())),
        problem: format!("the segment cannot be opened: {error}"),
    })?;
    if reader.num_docs() != segment.num_docs() {
        return Err(damage(
            SegmentComponent::Delete,
            &format!(
                "{} live documents where {META_FILE} records {}",
                reader.num_docs(),
                segment.num_docs()
            ),
        ));
    }

    let store = reader
        .get_store_reader(1)
        .map_err(|error| damage(SegmentComponent::Store, &error))?;
    let mut stored = 0;
    for document in store.iter::<TantivyDocument>(None) {
        document.map_err(|error| damage(SegmentComponent::Store, &error))?;
        stored += 1;
    }
    if stored != u64::from(reader.max_doc()) {
        return Err(damage(
            SegmentComponent::Store,
            &format!(
                "{stored} documents where {META_FILE} records {}",
                reader.max_doc()
            ),
        ));
    }

    let fast = reader.fast_fields();
    let fast_damage = |error: &dyn Display| damage(SegmentComponent::FastFields, error);
    let mut values = 0;
    for (_, entry) in reader
        .schema()
        .fields()
        .filter(|(_, entry)| entry.is_fast())
    {
        for handle in fast
            .dynamic_column_handles(entry.name())
            .map_err(|error| fast_damage(&error))?
        {
            let column = handle
                .open_u64_lenient()
                .map_err(|error| fast_damage(&error))?;
            if let Some(column) = column {
                for doc in 0..reader.max_doc() {
                    values += column.values_for_doc(doc).count() as u64;
                }
            }
        }
    }
    let roots = fast.u64(ROOT).map_err(|error| fast_damage(&error))?;
    let live = reader
        .doc_ids_alive()
        .filter(|&doc| roots.first(doc).is_some())
        .count() as u64;

    report.stored_documents += stored;
    report.fast_values += values;
    report.documents += live;
    report.tombstones += u64::from(reader.num_docs()) - live;
    Ok(())
}
