//! [`DedupWriter`]: the forest beside a Tantivy `IndexWriter`, on any schema that has the dedup
//! fields ([`DedupFields`]). It is the one insert path: [`DedupIndex`](super::DedupIndex)
//! adds its news articles through it, and an application adds its own documents the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tantivy::collector::DocSetCollector;
use tantivy::query::{Query, TermQuery};
use tantivy::schema::{Field, FieldType, IndexRecordOption, Schema, Value};
use tantivy::{
    DateTime, DocAddress, Document, Index, IndexReader, IndexWriter, Opstamp, ReloadPolicy,
    Searcher, TantivyDocument, Term,
};

use crate::chrome::{ChromeLines, Mark, PageLines};
use crate::config::DedupConfig;
use crate::dedup::{Change, Decision, Deduplicator, Signer, now};
use crate::engine::directory::index_error;
use crate::engine::prune::{self, PrunePlan, TombstonesQuery};
use crate::engine::recovery::{self, CheckpointMark, RecoveryReport};
use crate::engine::schema::{self, DedupFields, fast_value, stored_sketch};
use crate::forest::{Forest, ForestStats, Pipeline, Placement, SharedForest, Signature, Timestamp};
use crate::index::BlockLayout;
use crate::verify::{Reason, Sketch, SketchStore};
use crate::{Error, Fingerprint, Result};

/// A Tantivy document type the dedup fields can be written into: Tantivy's own
/// [`TantivyDocument`], and the news index's documents.
///
/// ```
/// use tantivy::schema::{Schema, FAST};
/// use tantivy::TantivyDocument;
/// use tantivy_dedup::engine::DedupDocument;
///
/// let mut builder = Schema::builder();
/// let likes = builder.add_u64_field("likes", FAST);
/// let mut document = TantivyDocument::default();
/// DedupDocument::add_u64(&mut document, likes, 7);
/// assert_eq!(document.len(), 1);
/// ```
pub trait DedupDocument: Document + Default {
    /// Adds an unsigned integer value.
    fn add_u64(&mut self, field: Field, value: u64);
    /// Adds a signed integer value.
    fn add_i64(&mut self, field: Field, value: i64);
    /// Adds a flag.
    fn add_bool(&mut self, field: Field, value: bool);
    /// Adds a date.
    fn add_date(&mut self, field: Field, value: DateTime);
}

impl DedupDocument for TantivyDocument {
    fn add_u64(&mut self, field: Field, value: u64) {
        TantivyDocument::add_u64(self, field, value);
    }

    fn add_i64(&mut self, field: Field, value: i64) {
        TantivyDocument::add_i64(self, field, value);
    }

    fn add_bool(&mut self, field: Field, value: bool) {
        TantivyDocument::add_bool(self, field, value);
    }

    fn add_date(&mut self, field: Field, value: DateTime) {
        TantivyDocument::add_date(self, field, value);
    }
}

/// A document fingerprinted and ready for [`DedupWriter::add`]: the expensive part of an
/// insert, which needs only `&DedupWriter` (or nothing of it), so that many documents can be
/// prepared in parallel and then added in order.
///
/// ```
/// use tantivy::schema::{Schema, STORED, STRING, TEXT};
/// use tantivy::{Index, IndexWriter, doc};
/// use tantivy_dedup::DedupConfig;
/// use tantivy_dedup::engine::DedupWriter;
/// use tantivy_dedup::engine::schema::DedupFields;
///
/// let mut builder = Schema::builder();
/// let id = builder.add_text_field("id", STRING | STORED);
/// let body = builder.add_text_field("body", TEXT);
/// DedupFields::add_to(&mut builder, &DedupConfig::default())?;
/// let index = Index::create_in_ram(builder.build());
/// let mut writer: IndexWriter = index.writer(15_000_000)?;
/// let mut dedup = DedupWriter::builder(DedupConfig::default()).id_field(id).text_fields([body]).open(&index)?;
///
/// // Prepared on other threads (here two), added in order.
/// let texts = ["今天北京天气晴朗，气温回升，适合出行。", "央行宣布下调存款准备金率零点五个百分点。"];
/// let preparer = dedup.preparer();
/// let prepared: Vec<_> = std::thread::scope(|scope| {
///     let preparer = &preparer;
///     let handles: Vec<_> = texts.iter().enumerate()
///         .map(|(n, text)| scope.spawn(move || preparer.prepare(doc!(id => n.to_string(), body => *text))))
///         .collect();
///     handles.into_iter().map(|handle| handle.join().unwrap()).collect()
/// });
/// assert_eq!(prepared[1].id(), "1");
/// for document in prepared {
///     dedup.add(&writer, document)?;
/// }
/// dedup.commit(&mut writer)?;
/// assert_eq!(dedup.reader().searcher().num_docs(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct PreparedDocument<D> {
    id: String,
    time: Option<Timestamp>,
    signature: Signature,
    /// The sketch, shared with the insert that stores it in `_sketch` (default mode).
    sketch: Option<Arc<Sketch>>,
    digest: u64,
    document: D,
    /// Where another process placed it (a shard's documents), else `None`.
    placed: Option<Placed>,
    /// Its lines, for its source's chrome to be taken out when it is placed (boxed: a
    /// document without a source has none).
    page: Option<Box<PageLines>>,
}

/// A document on its way into the index ([`DedupWriter::add`]).
enum Begun<D> {
    /// A re-send of the live version of its id: its decision again, nothing to do.
    Unchanged(Decision),
    /// To be placed (unless `placed` is given), then added.
    ToPlace(Pending<D>),
}

/// A document to place and add, with what it replaces.
struct Pending<D> {
    /// The document; its signature is taken when its insert is sent ([`take_signature`]).
    prepared: PreparedDocument<D>,
    /// The insert of the live version of its id, which it replaces.
    replacing: Option<Insert>,
    /// Why its signature keeps it apart, if it does (degenerate texts).
    reason: Option<Reason>,
    /// Where the sources' chrome stood before its page was shown to it: if it is not
    /// placed, what its page (and the later ones) taught is taken back.
    chrome_mark: Option<Mark>,
}

/// The signature of a document being placed, for its insert: the document keeps the rest.
fn take_signature(signature: &mut Signature) -> Signature {
    std::mem::replace(signature, Fingerprint(0).into())
}

/// Where a document was placed by another process: a shard's documents are placed in the
/// shared forest by a coordinator, which sends each to the shard that owns its root with
/// this ([`PreparedDocument::placed`], [`DedupWriterBuilder::placed_elsewhere`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placed {
    /// The node it was counted on (what the index stores as its `simhash`).
    pub node: Fingerprint,
    /// Its story's root.
    pub root: Fingerprint,
    /// The node it attached through, for a new leaf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Fingerprint>,
    /// Whether it joined a story that was there.
    pub duplicate: bool,
    /// Its event time (its own, or its arrival at the coordinator).
    pub time: Timestamp,
    /// Why the forest kept it out of the stories its text verified against
    /// ([`Placement::reason`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The lines of its page that its placer took out as its source's chrome (it was placed
    /// by its text without them): the shard takes out the same before it stores the page's
    /// sketch and answers its reason, as one index would.
    #[serde(default, skip_serializing_if = "ChromeLines::is_empty")]
    pub chrome: ChromeLines,
}

impl Placed {
    /// What `placement`, made at event time `time`, tells a shard.
    pub fn new(placement: &Placement, time: Timestamp) -> Self {
        Placed {
            node: placement.node,
            root: placement.root,
            via: placement.via,
            duplicate: placement.is_duplicate(),
            time,
            reason: placement.reason,
            chrome: ChromeLines::default(),
        }
    }

    /// The same, with the chrome lines its placer took out of its page.
    pub fn with_chrome(self, chrome: ChromeLines) -> Self {
        Placed { chrome, ..self }
    }
}

impl<D> PreparedDocument<D> {
    /// A document with what the writer needs to know of it: its id (empty when the writer has
    /// no id field), its event time if it has one, its signature
    /// ([`Signer::sign_page`]), and a digest of its content (equal digests under one id
    /// mean a re-send, which changes nothing). The document itself holds the caller's fields;
    /// the writer adds the dedup fields.
    pub fn new(
        document: D,
        id: String,
        time: Option<Timestamp>,
        signature: Signature,
        digest: u64,
    ) -> Self {
        let signature = signature.for_document(&id);
        PreparedDocument {
            id,
            time,
            sketch: signature.sketch.clone().map(Arc::new),
            signature,
            digest,
            document,
            placed: None,
            page: None,
        }
    }

    /// The same document with the lines of its page ([`Signer::page_lines`]): when it is
    /// added, the lines its source repeats on its other pages (its chrome) are taken out and
    /// it is signed again without them (`[dedup] source_chrome`, [`crate::chrome`]).
    pub fn with_page(mut self, page: Option<PageLines>) -> Self {
        self.page = page.map(Box::new);
        self
    }

    /// The same document, placed by another process: [`DedupWriter::add`] then stores it
    /// there instead of placing it.
    pub fn placed(mut self, placed: Placed) -> Self {
        if placed.chrome.is_empty() {
            self.page = None; // nothing of it is taken out
        }
        self.placed = Some(placed);
        self
    }

    /// Its signature: what a forest places it by.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The digest of its fields (equal under one id: a re-send).
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its fingerprint.
    pub fn simhash(&self) -> Fingerprint {
        self.signature.fingerprint
    }

    /// Its event time, if it has one.
    pub fn time(&self) -> Option<Timestamp> {
        self.time
    }
}

/// Prepares documents of a [`DedupWriter`]'s schema on any thread
/// ([`DedupWriter::preparer`]).
#[derive(Clone)]
pub struct DocumentPreparer {
    signer: Signer,
    schema: Schema,
    id_field: Option<Field>,
    time_field: Option<Field>,
    text_fields: Vec<Field>,
    source_field: Option<Field>,
}

impl DocumentPreparer {
    /// Fingerprints a document: the values of the text fields, in order, are its text; the id
    /// and time fields give its id and event time, the source field its source; the digest
    /// is of all its values.
    pub fn prepare(&self, document: TantivyDocument) -> PreparedDocument<TantivyDocument> {
        let texts: Vec<&str> = self
            .text_fields
            .iter()
            .flat_map(|&field| document.get_all(field).filter_map(|value| value.as_str()))
            .collect();
        let source = self
            .source_field
            .and_then(|field| document.get_first(field))
            .and_then(|value| value.as_str());
        let (signature, page) = self.signer.sign_page(&texts, source);
        let id = self
            .id_field
            .and_then(|field| document.get_first(field))
            .and_then(|value| value.as_str())
            .unwrap_or_default()
            .to_owned();
        let time = self
            .time_field
            .and_then(|field| document.get_first(field))
            .and_then(|value| value.as_datetime())
            .map(DateTime::into_timestamp_secs);
        let digest = xxhash_rust::xxh3::xxh3_64(document.to_json(&self.schema).as_bytes());
        PreparedDocument::new(document, id, time, signature, digest).with_page(page)
    }
}

/// The insert that a live document or a tombstone records.
#[derive(Debug, Clone)]
struct Insert {
    sequence: u64,
    simhash: Fingerprint,
    time: Timestamp,
    /// The sketch it was verified with (default mode).
    sketch: Option<Arc<Sketch>>,
}

/// A live document: its insert, and what it was decided and made from.
#[derive(Debug, Clone)]
struct Live {
    insert: Insert,
    root: Fingerprint,
    duplicate: bool,
    digest: u64,
}

/// Builds a [`DedupWriter`]: which fields of the schema hold the id, the event time and the
/// texts to fingerprint, and where the forest lives.
///
/// ```
/// use tantivy::schema::{Schema, INDEXED, FAST, STORED, STRING, TEXT};
/// use tantivy::Index;
/// use tantivy_dedup::DedupConfig;
/// use tantivy_dedup::engine::DedupWriter;
/// use tantivy_dedup::engine::schema::DedupFields;
///
/// let mut builder = Schema::builder();
/// let id = builder.add_text_field("id", STRING | STORED);
/// let title = builder.add_text_field("title", TEXT | STORED);
/// let body = builder.add_text_field("body", TEXT | STORED);
/// let published = builder.add_date_field("published", INDEXED | FAST);
/// DedupFields::add_to(&mut builder, &DedupConfig::default())?;
/// let index = Index::create_in_ram(builder.build());
/// let dedup = DedupWriter::builder(DedupConfig::default())
///     .id_field(id)
///     .time_field(published)
///     .text_fields([title, body]) // fingerprint the title and the body, joined
///     .open(&index)?;
/// assert_eq!(dedup.recovery().replayed, 0);
/// // A field of the wrong kind is refused.
/// assert!(DedupWriter::builder(DedupConfig::default()).text_fields([published]).open(&index).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DedupWriterBuilder {
    config: DedupConfig,
    id_field: Option<Field>,
    time_field: Option<Field>,
    text_fields: Vec<Field>,
    source_field: Option<Field>,
    location: PathBuf,
    store: Option<Arc<dyn SharedForest>>,
    /// Where the forest keeps default mode's sketches; `None`: on the heap.
    sketch_dir: Option<PathBuf>,
    checkpoints: Option<Checkpoints>,
    prune_tombstones: bool,
    placed_elsewhere: bool,
    inserts_in_flight: usize,
}

/// Where and how often a writer saves its forest.
#[derive(Debug, Clone)]
struct Checkpoints {
    dir: PathBuf,
    every: u64,
}

/// Inserts between two checkpoints, by default: reopening then replays at most about this
/// many (a few seconds), and at 10M live documents each checkpoint writes about 1.5 GB.
pub const DEFAULT_CHECKPOINT_INSERTS: u64 = 200_000;

/// What the last checkpoint cost, or why it failed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckpointReport {
    /// The inserts it holds (those numbered below this).
    pub next_sequence: u64,
    /// The checkpoint file's size (sketch chunk files, which it names, not included).
    pub bytes: u64,
    /// How long the writer was held up writing it, in milliseconds.
    pub pause_ms: f64,
    /// How long until it was durable and in place, in milliseconds (a checkpoint due at a
    /// commit is made durable by a thread of its own while the writer goes on).
    pub elapsed_ms: f64,
    /// Why it failed; the previous checkpoint then stays in place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A checkpoint being made durable by a thread of its own, which gives its size and how long
/// it took from the start of the checkpoint.
#[derive(Debug)]
struct InFlight {
    thread: std::thread::JoinHandle<(std::io::Result<u64>, std::time::Duration)>,
    /// Its report, but for its size, duration and outcome.
    report: CheckpointReport,
    /// The tombstones it lets the writer prune once it is durable.
    prune: Option<PrunePlan>,
}

impl InFlight {
    /// Waits for it; its report, and what it lets the writer prune if it is durable.
    fn join(self) -> (CheckpointReport, Option<PrunePlan>) {
        let (outcome, elapsed) = self.thread.join().unwrap_or_else(|_| {
            let panicked = std::io::Error::other("the checkpoint's thread panicked");
            (Err(panicked), std::time::Duration::ZERO)
        });
        let prune = self.prune.filter(|_| outcome.is_ok());
        let report = CheckpointReport {
            bytes: *outcome.as_ref().unwrap_or(&0),
            elapsed_ms: elapsed.as_secs_f64() * 1e3,
            error: outcome.err().map(|error| error.to_string()),
            ..self.report
        };
        (report, prune)
    }
}

impl DedupWriterBuilder {
    /// The string field (indexed) holding each document's id. With one, adding a document
    /// whose id is already live replaces it, and [`DedupWriter::delete`] works; without one,
    /// every document is new.
    pub fn id_field(mut self, field: Field) -> Self {
        self.id_field = Some(field);
        self
    }

    /// The date field holding each document's event time (its publication time). A document
    /// without one gets the arrival time ([`DedupWriter::arrival_time`]) in this field.
    /// Without a time field every document arrives at the newest time seen.
    pub fn time_field(mut self, field: Field) -> Self {
        self.time_field = Some(field);
        self
    }

    /// The text fields whose values are fingerprinted, in this order (at least one).
    pub fn text_fields(mut self, fields: impl IntoIterator<Item = Field>) -> Self {
        self.text_fields = fields.into_iter().collect();
        self
    }

    /// The string field (stored) naming each document's source (its outlet or site). With
    /// one, and `[dedup] source_chrome`, the lines a source repeats at the ends of its pages
    /// are taken out of its documents before they are signed ([`crate::chrome`]), and what
    /// was learned is read again on open from the latest stored documents.
    pub fn source_field(mut self, field: Field) -> Self {
        self.source_field = Some(field);
        self
    }

    /// How errors name the index (its directory, say).
    pub fn location(mut self, location: impl Into<PathBuf>) -> Self {
        self.location = location.into();
        self
    }

    /// Keeps default mode's sketches in files of `dir` (mapped into memory, unlinked at once:
    /// see [`SketchStore::in_directory`](crate::verify::SketchStore::in_directory)) instead of
    /// on the heap, which saves about 800 bytes a node. The index's own directory is a good
    /// choice.
    pub fn sketches_in(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sketch_dir = Some(dir.into());
        self
    }

    /// Saves the forest to `dir` (created if missing; one writer's own directory) at a commit
    /// once `every` inserts were made since the last checkpoint, and at
    /// [`checkpoint`](DedupWriter::checkpoint); opening then loads it and replays only the
    /// inserts after it (see [`RecoveryReport`]). Default mode's sketches are kept in mapped
    /// files of `dir`, which the checkpoint names instead of copying (this replaces
    /// [`sketches_in`](Self::sketches_in)). Without it, opening replays every insert.
    ///
    /// Once a checkpoint is durable, the next commit deletes the tombstones it lists whose
    /// inserts are older than the window (see [`prune_tombstones`](Self::prune_tombstones)).
    pub fn checkpoints_in(mut self, dir: impl Into<PathBuf>, every: u64) -> Self {
        self.checkpoints = Some(Checkpoints {
            dir: dir.into(),
            every: every.max(1),
        });
        self
    }

    /// Whether the tombstones a durable checkpoint lists whose inserts are older than the
    /// window are deleted from the index (by default they are, with
    /// [`checkpoints_in`](Self::checkpoints_in)). They are not needed to reopen, and with
    /// deletes of aged documents they would otherwise grow without bound; but once they are
    /// gone only the checkpoint records those inserts, so a full replay (after the checkpoint
    /// was lost) gives a forest close to the writer's rather than the same one
    /// ([`RecoveryReport::pruned_inserts`]). Without checkpoints nothing is pruned.
    pub fn prune_tombstones(mut self, prune: bool) -> Self {
        self.prune_tombstones = prune;
        self
    }

    /// Keeps the forest in a store several processes share (each with its own index) instead
    /// of in memory; it is then not replayed from the index on open.
    pub fn shared_forest(mut self, store: Arc<dyn SharedForest>) -> Self {
        self.store = Some(store);
        self
    }

    /// With a [shared forest](Self::shared_forest), the inserts of one
    /// [`add_all`](DedupWriter::add_all) kept in flight at once (each on a connection of its
    /// own), deciding as placing them one at a time would; 1 (the default) places them one at
    /// a time.
    pub fn inserts_in_flight(mut self, inserts: usize) -> Self {
        self.inserts_in_flight = inserts.max(1);
        self
    }

    /// Keeps no forest: every document comes placed by another process
    /// ([`PreparedDocument::placed`]; one that does not is refused), and a delete or a
    /// replacement leaves the forest to it too. What a shard of an index split by story does:
    /// its coordinator places documents in the shared forest.
    pub fn placed_elsewhere(mut self) -> Self {
        self.placed_elsewhere = true;
        self
    }

    /// Opens the writer's side of `index`: checks the fields, and replays the index's inserts
    /// into a fresh forest (see [`RecoveryReport`]).
    pub fn open(self, index: &Index) -> Result<DedupWriter> {
        self.config.validate()?;
        let schema = index.schema();
        let fields = DedupFields::from_schema(&schema)?;
        fields.check(&self.config)?;
        self.check_fields(&schema)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|source| index_error(&self.location, source))?;
        let mut writer = DedupWriter {
            index: index.clone(),
            checkpoints: self.checkpoints,
            tombstones: Vec::new(),
            pending_tombstones: Vec::new(),
            committed_sequence: 0,
            checkpoint_sequence: 0,
            deletes_since_checkpoint: 0,
            last_checkpoint: None,
            in_flight: None,
            prunable: None,
            prune_tombstones: self.prune_tombstones,
            pruned_tombstones: 0,
            log_position: None,
            layout: BlockLayout::new(self.config.max_distance)?,
            signer: Signer::new(&self.config),
            dedup: Deduplicator::new(self.config.clone())?,
            config: self.config,
            sketch_dir: self.sketch_dir,
            fields,
            schema,
            id_field: self.id_field,
            time_field: self.time_field,
            text_fields: self.text_fields,
            source_field: self.source_field,
            location: self.location,
            store: self.store,
            placed_elsewhere: self.placed_elsewhere,
            inserts_in_flight: self.inserts_in_flight,
            reader,
            next_sequence: 0,
            uncommitted: HashMap::new(),
            recovery: RecoveryReport::default(),
        };
        writer.replay()?;
        Ok(writer)
    }

    fn check_fields(&self, schema: &Schema) -> Result<()> {
        let describe = |field: Field| schema.get_field_entry(field).name().to_owned();
        if self.text_fields.is_empty() {
            return Err(Error::Config(
                "name at least one text field to fingerprint (DedupWriterBuilder::text_fields)"
                    .to_owned(),
            ));
        }
        for &field in &self.text_fields {
            if !matches!(
                schema.get_field_entry(field).field_type(),
                FieldType::Str(_)
            ) {
                return Err(Error::Config(format!(
                    "`{}` cannot be fingerprinted: it is not a text field",
                    describe(field)
                )));
            }
        }
        if let Some(field) = self.id_field {
            let entry = schema.get_field_entry(field);
            if !matches!(entry.field_type(), FieldType::Str(_)) || !entry.is_indexed() {
                return Err(Error::Config(format!(
                    "the id field `{}` must be an indexed string field (STRING)",
                    describe(field)
                )));
            }
        }
        if let Some(field) = self.time_field
            && !matches!(
                schema.get_field_entry(field).field_type(),
                FieldType::Date(_)
            )
        {
            return Err(Error::Config(format!(
                "the time field `{}` must be a date field",
                describe(field)
            )));
        }
        Ok(())
    }
}

/// The forest of a Tantivy index's clusters, kept beside its `IndexWriter`: every document
/// added through it gets its fingerprint, its cluster's root and the other dedup fields, so
/// that [`CollapseCollector`](super::CollapseCollector) can collapse any query on the index by
/// cluster with exact cluster sizes, and [`DedupFields::cluster_query`] lists a cluster.
///
/// Invariants (what makes a reopened index decide as it would have without the restart):
/// every change of the index's documents goes through this writer (adds, replacements,
/// deletes: a delete leaves a tombstone of its insert, see [`DedupFields`]), and the same
/// writer commits ([`commit`](Self::commit)). Inserts are numbered in the order they were
/// added; opening replays them in that order.
///
/// ```
/// use tantivy::collector::Count;
/// use tantivy::query::{AllQuery, TermQuery};
/// use tantivy::schema::{IndexRecordOption, Schema, STORED, STRING, TEXT};
/// use tantivy::{Index, IndexWriter, TantivyDocument, Term, doc};
/// use tantivy_dedup::DedupConfig;
/// use tantivy_dedup::engine::schema::DedupFields;
/// use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupWriter, Sort};
///
/// let config = DedupConfig::default();
/// let mut builder = Schema::builder();
/// let id = builder.add_text_field("id", STRING | STORED);
/// let body = builder.add_text_field("body", TEXT | STORED);
/// let platform = builder.add_text_field("platform", STRING | STORED);
/// let dedup_fields = DedupFields::add_to(&mut builder, &config)?;
/// let index = Index::create_in_ram(builder.build());
/// let mut writer: IndexWriter = index.writer(15_000_000)?;
/// let mut dedup = DedupWriter::builder(config).id_field(id).text_fields([body]).open(&index)?;
///
/// let story = "南方多地持续强降雨，防汛应急响应提升至三级，各地转移安置受灾群众，抢修受损道路，\
///              气象部门预计未来三天仍有大到暴雨，提醒公众注意防范山洪和地质灾害。";
/// let first = dedup.add_document(&writer, doc!(id => "1", body => story, platform => "weibo"))?;
/// let repost = dedup.add_document(&writer, doc!(id => "2", body => format!("转发：{story}"), platform => "news"))?;
/// dedup.add_document(&writer, doc!(id => "3", body => "央行宣布下调存款准备金率零点五个百分点。", platform => "news"))?;
/// dedup.commit(&mut writer)?;
/// assert_eq!(repost.root, first.root);
///
/// // Your own filter, collapsed by cluster, with whole-cluster sizes.
/// let searcher = dedup.reader().searcher();
/// let news = TermQuery::new(Term::from_field_text(platform, "news"), IndexRecordOption::Basic);
/// let ordinals = std::sync::Arc::new(ClusterOrdinals::build(&searcher)?);
/// let page = searcher.search(&news, &CollapseCollector::new(ordinals, Sort::SimilarDesc, 0, 10))?;
/// assert_eq!((page.total_hits, page.total_clusters), (2, 2));
/// assert_eq!(page.clusters[0].size, 2);
/// // The detail page: the whole cluster.
/// assert_eq!(searcher.search(&dedup_fields.cluster_query(first.root), &Count)?, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DedupWriter {
    config: DedupConfig,
    fields: DedupFields,
    schema: Schema,
    id_field: Option<Field>,
    time_field: Option<Field>,
    text_fields: Vec<Field>,
    source_field: Option<Field>,
    location: PathBuf,
    store: Option<Arc<dyn SharedForest>>,
    /// Documents come placed by another process ([`DedupWriterBuilder::placed_elsewhere`]).
    placed_elsewhere: bool,
    /// [`DedupWriterBuilder::inserts_in_flight`].
    inserts_in_flight: usize,
    /// Where the forest keeps default mode's sketches; `None`: on the heap.
    sketch_dir: Option<PathBuf>,
    reader: IndexReader,
    signer: Signer,
    dedup: Deduplicator,
    layout: BlockLayout,
    next_sequence: u64,
    /// Ids added or deleted since the last commit, with the document now live under each
    /// (`None`: deleted). The committed index answers for every other id.
    uncommitted: HashMap<String, Option<Live>>,
    recovery: RecoveryReport,
    index: Index,
    checkpoints: Option<Checkpoints>,
    /// The sequence numbers of the committed tombstones (what a checkpoint records).
    tombstones: Vec<u64>,
    /// Those of the tombstones added since the last commit.
    pending_tombstones: Vec<u64>,
    /// `next_sequence` at the last commit (or open).
    committed_sequence: u64,
    /// `next_sequence` at the last checkpoint saved or loaded.
    checkpoint_sequence: u64,
    /// Deletes committed since then.
    deletes_since_checkpoint: u64,
    last_checkpoint: Option<CheckpointReport>,
    in_flight: Option<InFlight>,
    /// Whether tombstones a durable checkpoint holds are pruned.
    prune_tombstones: bool,
    /// What the last durable checkpoint lets the next commit prune.
    prunable: Option<PrunePlan>,
    /// Tombstones this writer pruned.
    pruned_tombstones: u64,
    /// Where in an ordered log of writes the last change added came from
    /// ([`set_log_position`](Self::set_log_position)); recorded by each commit.
    log_position: Option<String>,
}

impl DedupWriter {
    /// A builder for a writer with these settings; the index must have been built with the
    /// same ones (an index stores no settings of its own: keep them with it).
    pub fn builder(config: DedupConfig) -> DedupWriterBuilder {
        DedupWriterBuilder {
            config,
            id_field: None,
            time_field: None,
            text_fields: Vec::new(),
            source_field: None,
            location: PathBuf::from("(tantivy index)"),
            store: None,
            sketch_dir: None,
            checkpoints: None,
            prune_tombstones: true,
            placed_elsewhere: false,
            inserts_in_flight: 1,
        }
    }

    /// Rebuilds the forest of the last commit, dropping uncommitted state: from the
    /// checkpoint and the inserts after it, or by replaying every insert into a fresh forest
    /// (or, with a shared store, which holds them already, reads back only the next sequence
    /// number).
    fn replay(&mut self) -> Result<()> {
        // A checkpoint in flight is finished, and the forest in use goes, first: its sketch
        // chunk files are the ones a checkpoint names.
        self.finish_checkpoint(true);
        self.dedup = Deduplicator::new(self.config.clone())?;
        let started = Instant::now();
        let (mut dedup, mark, refused) = self.open_forest()?;
        // The checkpoint loaded is durable: what it lets go can be pruned at the next commit.
        self.prunable = mark
            .as_ref()
            .and_then(|mark| self.prune_plan(mark.tombstones.clone(), dedup.newest_time()));
        let replay_into =
            (!dedup.is_shared() && !self.placed_elsewhere).then(|| dedup.forest_mut());
        let payload = self.last_commit()?.payload;
        let recorded_next = recovery::recorded_next_sequence(payload.as_deref());
        self.log_position = recovery::recorded_log_position(payload.as_deref());
        let replayed = recovery::replay(
            &self.reader.searcher(),
            replay_into,
            mark.as_ref(),
            recorded_next,
        )
        .map_err(|source| index_error(&self.location, source))?;
        self.dedup = dedup;
        if let Some(source_field) = self.source_field.filter(|_| self.signer.learns_chrome())
            && !self.placed_elsewhere
        {
            let pages = recovery::latest_pages(
                &self.reader.searcher(),
                source_field,
                &self.text_fields,
                &self.signer,
                replayed.next_sequence,
            )
            .map_err(|source| index_error(&self.location, source))?;
            let chrome = self.dedup.source_chrome_mut();
            for (sequence, page) in pages {
                chrome.remember(page, sequence);
            }
            chrome.settle();
        }
        self.recovery = RecoveryReport {
            checkpoint_refused: refused,
            elapsed: started.elapsed(),
            ..replayed.report
        };
        self.next_sequence = replayed.next_sequence;
        self.committed_sequence = replayed.next_sequence;
        let listed: &[u64] = mark.as_ref().map_or(&[], |mark| &mark.tombstones);
        let unlisted = replayed.tombstones.iter();
        let unlisted = unlisted.filter(|sequence| listed.binary_search(sequence).is_err());
        self.deletes_since_checkpoint = unlisted.count() as u64;
        self.checkpoint_sequence = mark.map_or(0, |mark| mark.next_sequence);
        self.tombstones = replayed.tombstones;
        self.pending_tombstones.clear();
        self.uncommitted.clear();
        Ok(())
    }

    /// The forest to replay into: a shared store; the checkpoint's forest with its mark; or
    /// an empty one, with why a checkpoint found could not be used.
    fn open_forest(&self) -> Result<(Deduplicator, Option<CheckpointMark>, Option<String>)> {
        let config = self.config.clone();
        if self.placed_elsewhere {
            // Unused: an empty forest, which checkpoints nothing.
            return Ok((Deduplicator::new(config)?, None, None));
        }
        if let Some(shared) = &self.store {
            let dedup = match self.inserts_in_flight {
                1 => Deduplicator::with_store(config.clone(), shared.connect(&config)?)?,
                inserts => {
                    let stores = shared.connect_several(&config, inserts)?;
                    Deduplicator::with_pipeline(config, Pipeline::new(stores)?)?
                }
            };
            return Ok((dedup, None, None));
        }
        let Some(checkpoints) = &self.checkpoints else {
            let dedup = match &self.sketch_dir {
                Some(dir) => Deduplicator::with_sketches_in(config, dir)?,
                None => Deduplicator::new(config)?,
            };
            return Ok((dedup, None, None));
        };
        let dir = &checkpoints.dir;
        let io_error = |source| Error::Io {
            path: dir.clone(),
            source,
        };
        let sketches = SketchStore::in_checkpoint_directory(dir).map_err(io_error)?;
        let last_opstamp = self.last_commit()?.opstamp;
        match recovery::open_checkpoint(dir, &config, last_opstamp, sketches)? {
            (dedup, Ok(Some(mark))) => Ok((dedup, Some(mark), None)),
            (dedup, unusable) => {
                drop(dedup);
                // Every insert is replayed: the chunk files there are no usable checkpoint's.
                let sketches =
                    SketchStore::in_cleared_checkpoint_directory(dir).map_err(io_error)?;
                let dedup = Deduplicator::with_sketches(config, sketches)?;
                Ok((
                    dedup,
                    None,
                    unusable.err().map(|refused| refused.to_string()),
                ))
            }
        }
    }

    /// The metadata of the index's last commit: its opstamp (what a checkpoint is tagged
    /// with) and payload.
    fn last_commit(&self) -> Result<tantivy::IndexMeta> {
        self.index
            .load_metas()
            .map_err(|source| index_error(&self.location, source))
    }

    /// Saves the forest of the last commit as the checkpoint, so that reopening replays only
    /// what comes after (with [`checkpoints_in`](DedupWriterBuilder::checkpoints_in); else
    /// `Ok(None)`), and returns once it is durable. Refused while anything added or deleted
    /// is uncommitted. A failure leaves the previous checkpoint in place.
    pub fn checkpoint(&mut self) -> Result<Option<CheckpointReport>> {
        let Some(in_flight) = self.start_checkpoint()? else {
            return Ok(None);
        };
        let report = self.take_in(in_flight);
        match &report.error {
            Some(error) => Err(Error::Io {
                path: self
                    .checkpoint_dir()
                    .unwrap_or(&self.location)
                    .to_path_buf(),
                source: std::io::Error::other(error.clone()),
            }),
            None => Ok(Some(report)),
        }
    }

    fn checkpoint_dir(&self) -> Option<&Path> {
        self.checkpoints
            .as_ref()
            .map(|checkpoints| checkpoints.dir.as_path())
    }

    /// Writes the checkpoint of the last commit (after the one in flight is done) and hands
    /// making it durable to a thread; `None` without checkpoints.
    fn start_checkpoint(&mut self) -> Result<Option<InFlight>> {
        self.finish_checkpoint(true);
        let Some(dir) = self.checkpoint_dir().map(Path::to_path_buf) else {
            return Ok(None);
        };
        if self.dedup.is_shared() {
            return Ok(None);
        }
        if self.next_sequence != self.committed_sequence || !self.pending_tombstones.is_empty() {
            return Err(Error::Config(
                "a checkpoint is of the last commit: commit first".to_owned(),
            ));
        }
        let started = Instant::now();
        let opstamp = self.last_commit()?.opstamp;
        self.tombstones.sort_unstable();
        let mark = CheckpointMark {
            opstamp,
            next_sequence: self.next_sequence,
            tombstones: self.tombstones.clone(),
        };
        let settings = recovery::settings_id(&self.config);
        let saved = recovery::save_checkpoint(&dir, settings, &mark, self.dedup.forest_mut())
            .map_err(|source| Error::Io { path: dir, source })?;
        let prune = self.prune_plan(mark.tombstones, self.dedup.newest_time());
        self.checkpoint_sequence = mark.next_sequence;
        self.deletes_since_checkpoint = 0;
        let report = CheckpointReport {
            next_sequence: mark.next_sequence,
            bytes: 0,
            pause_ms: started.elapsed().as_secs_f64() * 1e3,
            elapsed_ms: 0.0,
            error: None,
        };
        let thread = std::thread::Builder::new()
            .name("checkpoint".to_owned())
            .spawn(move || (saved.make_durable(), started.elapsed()))
            .map_err(|source| Error::Io {
                path: self.location.clone(),
                source,
            })?;
        Ok(Some(InFlight {
            thread,
            report,
            prune,
        }))
    }

    /// What a checkpoint listing the tombstones `listed`, taken when the newest time seen was
    /// `newest`, lets the writer prune once it is durable (`None` when pruning is off).
    fn prune_plan(&self, listed: Vec<u64>, newest: Option<Timestamp>) -> Option<PrunePlan> {
        let window = i64::try_from(self.config.window_seconds()).unwrap_or(i64::MAX);
        (self.prune_tombstones && !listed.is_empty()).then_some(PrunePlan {
            listed,
            before: newest?.saturating_sub(window),
        })
    }

    /// Takes in the checkpoint in flight once it is done (waiting for it with `wait`).
    fn finish_checkpoint(&mut self, wait: bool) {
        if self
            .in_flight
            .as_ref()
            .is_some_and(|in_flight| wait || in_flight.thread.is_finished())
            && let Some(in_flight) = self.in_flight.take()
        {
            self.take_in(in_flight);
        }
    }

    /// Waits for a checkpoint made durable by its own thread and takes in its report and what
    /// it lets the writer prune.
    fn take_in(&mut self, in_flight: InFlight) -> CheckpointReport {
        let (report, prune) = in_flight.join();
        if prune.is_some() {
            self.prunable = prune;
        }
        self.last_checkpoint = Some(report.clone());
        report
    }

    /// Asks `writer` to delete the tombstones the last durable checkpoint lets go, as part of
    /// the next commit; their sequence numbers. Pruning only saves space: when the committed
    /// tombstones cannot be read, nothing is pruned now and the next commit tries again.
    fn prune<D: DedupDocument>(&mut self, writer: &IndexWriter<D>) -> Arc<[u64]> {
        let Some(plan) = self.prunable.take() else {
            return Arc::from([]);
        };
        let found = prune::prunable(&self.reader.searcher(), &plan).and_then(|pruned| {
            if !pruned.is_empty() {
                let query = TombstonesQuery::new(Arc::clone(&pruned));
                writer.delete_query(Box::new(query))?;
            }
            Ok(pruned)
        });
        found.unwrap_or_else(|_| {
            self.prunable = Some(plan);
            Arc::from([])
        })
    }

    /// The last checkpoint this writer finished saving or failed to, if any.
    pub fn last_checkpoint(&self) -> Option<&CheckpointReport> {
        self.last_checkpoint.as_ref()
    }

    /// Tombstones this writer deleted from the index since it was opened, because a durable
    /// checkpoint held their inserts and they were older than the window
    /// ([`prune_tombstones`](DedupWriterBuilder::prune_tombstones)).
    pub fn pruned_tombstones(&self) -> u64 {
        self.pruned_tombstones
    }

    /// Whether anything was committed since the last checkpoint (inserts or deletes): then
    /// reopening would replay something, or take a delete off its node.
    pub fn changed_since_checkpoint(&self) -> bool {
        self.committed_sequence > self.checkpoint_sequence || self.deletes_since_checkpoint > 0
    }

    /// Inserts committed or not since the last checkpoint (all of them without one).
    pub fn inserts_since_checkpoint(&self) -> u64 {
        self.next_sequence - self.checkpoint_sequence
    }

    /// Brings the forest back to the index's last commit, after the `IndexWriter` was rolled
    /// back or reopened: everything added since the commit is forgotten, as the index forgot
    /// it, and the forest is replayed as on open.
    pub fn rebuild(&mut self) -> Result<()> {
        self.reload()?;
        self.replay()
    }

    /// The dedup fields' handles.
    pub fn fields(&self) -> &DedupFields {
        &self.fields
    }

    /// The settings in use.
    pub fn config(&self) -> &DedupConfig {
        &self.config
    }

    /// The reader this writer reloads at every commit: searchers over what was committed.
    pub fn reader(&self) -> &IndexReader {
        &self.reader
    }

    /// What makes a document's signature (thread-safe; clone it for other threads).
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// The in-memory forest of clusters in the window (empty when the forest is shared: see
    /// [`forest_stats`](Self::forest_stats)).
    pub fn forest(&self) -> &Forest {
        self.dedup.forest()
    }

    /// Node and root counts of the forest in use.
    pub fn forest_stats(&self) -> ForestStats {
        self.dedup.stats()
    }

    /// Whether the forest is a store several processes share ([`DedupWriterBuilder::shared_forest`]).
    pub fn is_shared(&self) -> bool {
        self.dedup.is_shared()
    }

    /// What opening (or the last [`rebuild`](Self::rebuild)) replayed.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The newest event time the forest has seen, if any.
    pub fn newest_time(&self) -> Option<Timestamp> {
        self.dedup.newest_time()
    }

    /// The event time to give a document without one: the newest time seen, or the wall
    /// clock when nothing was seen yet (so a file replays the same whatever the day).
    pub fn arrival_time(&self) -> Timestamp {
        self.newest_time().unwrap_or_else(now)
    }

    /// How errors name the index.
    pub fn location(&self) -> &Path {
        &self.location
    }

    fn error(&self) -> impl Fn(tantivy::TantivyError) -> Error + '_ {
        |source| index_error(&self.location, source)
    }

    /// Fingerprints a document of the caller's schema ([`DocumentPreparer::prepare`]).
    pub fn prepare(&self, document: TantivyDocument) -> PreparedDocument<TantivyDocument> {
        self.preparer().prepare(document)
    }

    /// What preparing needs, apart from the writer: send it to other threads, prepare there,
    /// then [`add`](Self::add) in order here.
    pub fn preparer(&self) -> DocumentPreparer {
        DocumentPreparer {
            signer: self.signer.clone(),
            schema: self.schema.clone(),
            id_field: self.id_field,
            time_field: self.time_field,
            text_fields: self.text_fields.clone(),
            source_field: self.source_field,
        }
    }

    /// [`prepare`](Self::prepare) then [`add`](Self::add).
    pub fn add_document(
        &mut self,
        writer: &IndexWriter<TantivyDocument>,
        document: TantivyDocument,
    ) -> Result<Decision> {
        let prepared = self.prepare(document);
        self.add(writer, prepared)
    }

    /// Places a prepared document in its cluster and adds it to `writer` with its dedup fields,
    /// replacing the live document with its id (when there is an id field). It becomes
    /// searchable at the next [`commit`](Self::commit).
    ///
    /// A document whose id and digest equal the live document's (a client retrying a request
    /// whose answer it lost) changes nothing and gets that document's decision again, marked
    /// [`Change::Unchanged`], so re-sending is safe and does not disturb the clusters.
    pub fn add<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        prepared: PreparedDocument<D>,
    ) -> Result<Decision> {
        let begun = self.begin(prepared)?;
        let mut decisions = Vec::with_capacity(1);
        self.place_run(writer, vec![begun], &mut decisions)?;
        decisions
            .pop()
            .ok_or_else(|| Error::Config("a document placed was not added".into()))
    }

    /// [`add`](Self::add) for each document in order, deciding as that would. When the forest
    /// is shared through several connections ([`DedupWriterBuilder::inserts_in_flight`]), the
    /// inserts of documents whose ids differ are in flight together. Returns the decisions of
    /// the documents added, in order, and the error that stopped the others if one did. The
    /// documents after it are not added; on a shared store some of them may have been placed
    /// (sent again, they are placed again), and the earlier version of any such document's id
    /// is deleted, as when [`add`](Self::add) fails to place a replacement.
    pub fn add_all<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        prepared: Vec<PreparedDocument<D>>,
    ) -> (Vec<Decision>, Option<Error>) {
        let mut decisions = Vec::with_capacity(prepared.len());
        if !self.places_in_flight() {
            for document in prepared {
                match self.add(writer, document) {
                    Ok(decision) => decisions.push(decision),
                    Err(error) => return (decisions, Some(error)),
                }
            }
            return (decisions, None);
        }
        let mut run: Vec<Begun<D>> = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for document in prepared {
            // An id that comes again waits for the run before it: its first version must be
            // live before the second is compared with it. (Without an id field, every id is
            // empty and none is compared.)
            if self.id_field.is_some() && !ids.insert(document.id.clone()) {
                let run = std::mem::take(&mut run);
                if let Err(error) = self.place_run(writer, run, &mut decisions) {
                    return (decisions, Some(error));
                }
                ids.clear();
                ids.insert(document.id.clone());
            }
            match self.begin(document) {
                Ok(begun) => run.push(begun),
                Err(error) => {
                    let placed = self.place_run(writer, run, &mut decisions);
                    return (decisions, Some(placed.err().unwrap_or(error)));
                }
            }
        }
        let placed = self.place_run(writer, run, &mut decisions);
        (decisions, placed.err())
    }

    /// Whether [`add_all`](Self::add_all) keeps several inserts in flight.
    pub fn places_in_flight(&self) -> bool {
        self.dedup.places_in_flight()
    }

    /// Places a run of documents of different ids (their inserts in flight together through a
    /// pipeline) and adds them in order, each decision pushed onto `decisions`. As in `add`,
    /// the version a document replaces leaves the forest's count first, then the index; a
    /// document not placed for a store's failure still leaves its id deleted, so that a retry
    /// never takes that version off the count twice.
    fn place_run<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        mut run: Vec<Begun<D>>,
        decisions: &mut Vec<Decision>,
    ) -> Result<()> {
        let mut failure = None;
        for (position, begun) in run.iter().enumerate() {
            if let Begun::ToPlace(pending) = begun
                && let Some(replaced) = &pending.replacing
                && let Err(error) = self.uncount(replaced)
            {
                // The documents from here on are left as they were.
                run.truncate(position);
                failure = Some(error);
                break;
            }
        }
        self.strip_chrome(&mut run);
        // Each document's event time as placing them one after the other gives it: its own,
        // else the newest placed before it.
        let mut newest = self.dedup.newest_time();
        let mut inserts = Vec::new();
        for begun in &mut run {
            if let Begun::ToPlace(pending) = begun
                && pending.prepared.placed.is_none()
            {
                let time = pending
                    .prepared
                    .time
                    .unwrap_or_else(|| newest.unwrap_or_else(now));
                newest = Some(newest.map_or(time, |newest| newest.max(time)));
                inserts.push((take_signature(&mut pending.prepared.signature), time));
            }
        }
        let (placements, placing_failure) = self.dedup.place_in_order(&inserts);
        failure = failure.or(placing_failure);
        let mut placements = placements
            .into_iter()
            .zip(inserts.iter().map(|(_, time)| *time));
        // Decisions are pushed up to the first document not placed (`failure` says why) or
        // not added (`unadded` does). After it nothing is added: only the versions already
        // taken off the forest's count are deleted, as far as the index still lets them be.
        let mut unadded = None;
        let mut stopped = false;
        // The chrome's mark before the first page of a document not added.
        let mut untaught: Option<Mark> = None;
        for begun in run {
            let mut pending = match begun {
                Begun::Unchanged(decision) => {
                    if !stopped {
                        decisions.push(decision);
                    }
                    continue;
                }
                Begun::ToPlace(pending) => pending,
            };
            let placed = match pending.prepared.placed.take() {
                Some(placed) => Some(placed),
                None => placements
                    .next()
                    .map(|(placement, time)| Placed::new(&placement, time)),
            };
            let chrome_mark = pending.chrome_mark;
            match placed {
                Some(placed) if !stopped => match self.finish(writer, pending, placed) {
                    Ok(decision) => decisions.push(decision),
                    Err(error) => {
                        unadded = Some(error);
                        stopped = true;
                        untaught = untaught.or(chrome_mark);
                    }
                },
                _ => {
                    stopped = true;
                    untaught = untaught.or(chrome_mark);
                    if let Some(replaced) = &pending.replacing {
                        // The run has failed already; this failure would say no more.
                        let _ = self.delete_live(writer, &pending.prepared.id, replaced);
                    }
                }
            }
        }
        // The pages of the documents not added teach nothing.
        let chrome = self.dedup.source_chrome_mut();
        if let Some(mark) = untaught {
            chrome.forget_since(mark);
        }
        chrome.settle();
        unadded.or(failure).map_or(Ok(()), Err)
    }

    /// What adding `prepared` takes before it is placed: nothing more for a re-send of the
    /// live version of its id (its decision again), else the document with its sketch's keys.
    fn begin<D: DedupDocument>(&self, prepared: PreparedDocument<D>) -> Result<Begun<D>> {
        if self.placed_elsewhere && prepared.placed.is_none() {
            return Err(Error::Config(format!(
                "{:?} was not placed: this index is a shard, whose documents are placed by its \
                 coordinator (send them there)",
                prepared.id
            )));
        }
        let reason = prepared.signature.reason;
        let replacing = match self.live(&prepared.id)? {
            Some(live) if live.digest == prepared.digest => {
                return Ok(Begun::Unchanged(Decision {
                    id: prepared.id,
                    simhash: live.insert.simhash,
                    root: live.root,
                    duplicate: live.duplicate,
                    change: Change::Unchanged,
                    reason,
                }));
            }
            live => live.map(|live| live.insert),
        };
        Ok(Begun::ToPlace(Pending {
            prepared,
            replacing,
            reason,
            chrome_mark: None,
        }))
    }

    /// Before a run is placed, in order: each document's page shown to the sources' chrome
    /// at the sequence number it takes if all before it are added, and signed again without
    /// the chrome when it had some (a document placed elsewhere without the lines its placer
    /// took out, [`Placed::chrome`]); then its sketch's keys added to it.
    fn strip_chrome<D: DedupDocument>(&mut self, run: &mut [Begun<D>]) {
        let mut position = self.next_sequence;
        for begun in run {
            let Begun::ToPlace(pending) = begun else {
                continue;
            };
            let prepared = &mut pending.prepared;
            if let Some(page) = prepared.page.take() {
                let source = page.source_name().to_owned();
                let stripped = match &prepared.placed {
                    Some(placed) => page.without(placed.chrome),
                    None => {
                        let chrome = self.dedup.source_chrome_mut();
                        pending.chrome_mark = Some(chrome.mark());
                        chrome.strip(*page, position)
                    }
                };
                let signer = &self.signer;
                if let Some(signature) =
                    signer.without_chrome(&prepared.signature, stripped, Some(&source))
                {
                    let signature = signature.for_document(&prepared.id);
                    prepared.sketch = signature.sketch.clone().map(Arc::new);
                    pending.reason = signature.reason;
                    prepared.signature = signature;
                }
            }
            position += 1;
            for &key in prepared.signature.sketch.iter().flat_map(Sketch::keys) {
                prepared
                    .document
                    .add_u64(self.fields.sketch_keys, u64::from(key));
            }
        }
    }

    /// Adds a document placed as `placed` to `writer`, with its dedup fields, in place of the
    /// version it replaces.
    fn finish<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        pending: Pending<D>,
        placed: Placed,
    ) -> Result<Decision> {
        let Pending {
            prepared:
                PreparedDocument {
                    id,
                    time,
                    sketch,
                    digest,
                    mut document,
                    ..
                },
            replacing,
            reason,
            chrome_mark: _,
        } = pending;
        let change = match &replacing {
            Some(replaced) => {
                self.delete_live(writer, &id, replaced)?;
                Change::Replaced
            }
            None => Change::Added,
        };
        // The document is stored under its node, which is what a replay places it by.
        let simhash = placed.node;
        let live = Live {
            insert: Insert {
                sequence: self.next_sequence,
                simhash,
                time: placed.time,
                sketch,
            },
            root: placed.root,
            duplicate: placed.duplicate,
            digest,
        };
        self.next_sequence += 1;
        if let (Some(field), None) = (self.time_field, time) {
            document.add_date(field, DateTime::from_timestamp_secs(placed.time));
        }
        let fields = &self.fields;
        for (field, block) in fields.blocks.iter().zip(self.layout.blocks()) {
            document.add_u64(*field, block.key(simhash.0));
        }
        document.add_u64(fields.root, live.root.0);
        if let (Some(field), Some(via)) = (fields.via, placed.via) {
            document.add_u64(field, via.0);
        }
        document.add_u64(fields.digest, digest);
        document.add_bool(fields.duplicate, live.duplicate);
        add_insert_fields(&mut document, fields, &live.insert);
        writer.add_document(document).map_err(self.error())?;
        let decision = Decision {
            id: id.clone(),
            simhash,
            root: live.root,
            duplicate: live.duplicate,
            change,
            reason: reason.or(placed.reason),
        };
        if self.id_field.is_some() {
            self.uncommitted.insert(id, Some(live));
        }
        Ok(decision)
    }

    /// Deletes the live document with this id; returns whether there was one. Takes effect at
    /// the next commit. Its cluster stays in the forest until it expires. Without an id field
    /// there is nothing to find by: `Ok(false)`.
    pub fn delete<D: DedupDocument>(&mut self, writer: &IndexWriter<D>, id: &str) -> Result<bool> {
        let Some(live) = self.live(id)? else {
            return Ok(false);
        };
        self.remove(writer, id, &live.insert)?;
        Ok(true)
    }

    /// Deletes every committed document `query` matches, leaving tombstones; returns how many.
    /// Takes effect at the next commit. Refused while anything added or deleted is
    /// uncommitted: Tantivy would delete matching uncommitted documents too, and those would
    /// leave no tombstone, so a reopened index would decide differently.
    ///
    /// ```
    /// use tantivy::collector::Count;
    /// use tantivy::query::AllQuery;
    /// use tantivy::schema::{Schema, STORED, STRING, TEXT};
    /// use tantivy::{Index, IndexWriter, doc};
    /// use tantivy_dedup::DedupConfig;
    /// use tantivy_dedup::engine::DedupWriter;
    /// use tantivy_dedup::engine::schema::DedupFields;
    ///
    /// let mut builder = Schema::builder();
    /// let id = builder.add_text_field("id", STRING | STORED);
    /// let body = builder.add_text_field("body", TEXT);
    /// DedupFields::add_to(&mut builder, &DedupConfig::default())?;
    /// let index = Index::create_in_ram(builder.build());
    /// let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
    /// let mut dedup = DedupWriter::builder(DedupConfig::default())
    ///     .id_field(id)
    ///     .text_fields([body])
    ///     .open(&index)?;
    /// dedup.add_document(&writer, doc!(id => "a", body => "国务院召开常务会议，部署下半年经济工作。"))?;
    /// dedup.add_document(&writer, doc!(id => "b", body => "气象台发布暴雨蓝色预警，提醒市民雨天注意出行安全。"))?;
    /// dedup.commit(&mut writer)?;
    /// // A match-all query deletes both documents, not the tombstones they leave.
    /// assert_eq!(dedup.delete_query(&writer, Box::new(AllQuery))?, 2);
    /// dedup.commit(&mut writer)?;
    /// let searcher = dedup.reader().searcher();
    /// assert_eq!(searcher.search(&dedup.fields().live(Box::new(AllQuery)), &Count)?, 0);
    /// assert_eq!(searcher.num_docs(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_query<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        query: Box<dyn Query>,
    ) -> Result<u64> {
        if !self.uncommitted.is_empty() {
            return Err(Error::Query(
                "delete by query applies to committed documents: commit first".to_owned(),
            ));
        }
        let searcher = self.reader.searcher();
        let matched = searcher
            .search(query.as_ref(), &DocSetCollector)
            .map_err(self.error())?;
        let mut inserts = Vec::with_capacity(matched.len());
        for address in &matched {
            // Tombstones match no term; a query that matches them anyway has nothing to remove.
            if let Some(live) = read_live(&searcher, *address).map_err(self.error())? {
                inserts.push(live.insert);
            }
        }
        for insert in &inserts {
            add_tombstone(writer, &self.fields, insert, self.next_sequence)
                .map_err(self.error())?;
            self.pending_tombstones.push(insert.sequence);
            if !self.placed_elsewhere {
                self.dedup.remove_document(insert.simhash)?;
            }
        }
        // Only the live documents matched: the query could match the tombstones just added.
        let live = self.fields.live(query);
        writer.delete_query(Box::new(live)).map_err(self.error())?;
        Ok(inserts.len() as u64)
    }

    /// Records that the changes added so far come from an ordered log of writes up to
    /// `position` (opaque here; a shard's replica gives its log's entry ids), so that the next
    /// commit records it in its payload and a writer reopened at that commit says where to
    /// resume ([`log_position`](Self::log_position)).
    pub fn set_log_position(&mut self, position: String) {
        self.log_position = Some(position);
    }

    /// The log position of the last change added ([`set_log_position`](Self::set_log_position)),
    /// or after an open or a recovery, the last commit's; `None` when none was ever set.
    pub fn log_position(&self) -> Option<&str> {
        self.log_position.as_deref()
    }

    /// Makes everything added and deleted so far durable (Tantivy's commit), without yet
    /// showing it to searchers ([`reload`](Self::reload) does). An `Err` leaves the last
    /// commit as it was.
    ///
    /// With [`checkpoints_in`](DedupWriterBuilder::checkpoints_in), a commit that ends a run
    /// of that many inserts also writes a checkpoint, which a thread of its own then makes
    /// durable; its failure does not fail the commit
    /// ([`last_checkpoint`](Self::last_checkpoint) reports it).
    pub fn persist<D: DedupDocument>(&mut self, writer: &mut IndexWriter<D>) -> Result<Opstamp> {
        self.finish_checkpoint(false);
        let pruned = self.prune(writer);
        let mut commit = writer.prepare_commit().map_err(self.error())?;
        commit.set_payload(&recovery::commit_payload(
            self.next_sequence,
            self.log_position.as_deref(),
        ));
        let opstamp = commit.commit().map_err(self.error())?;
        self.uncommitted.clear();
        self.committed_sequence = self.next_sequence;
        self.deletes_since_checkpoint += self.pending_tombstones.len() as u64;
        self.tombstones.append(&mut self.pending_tombstones);
        if !pruned.is_empty() {
            self.tombstones
                .retain(|sequence| pruned.binary_search(sequence).is_err());
            self.pruned_tombstones += pruned.len() as u64;
        }
        let due = self
            .checkpoints
            .as_ref()
            .is_some_and(|checkpoints| self.inserts_since_checkpoint() >= checkpoints.every);
        if due {
            // The commit itself is done: a checkpoint that fails is only reported.
            match self.start_checkpoint() {
                Ok(in_flight) => self.in_flight = in_flight,
                Err(error) => {
                    self.last_checkpoint = Some(CheckpointReport {
                        next_sequence: self.next_sequence,
                        bytes: 0,
                        pause_ms: 0.0,
                        elapsed_ms: 0.0,
                        error: Some(error.to_string()),
                    })
                }
            }
        }
        Ok(opstamp)
    }

    /// Shows what was persisted to searchers of [`reader`](Self::reader).
    pub fn reload(&self) -> Result<()> {
        self.reader.reload().map_err(self.error())
    }

    /// [`persist`](Self::persist) then [`reload`](Self::reload).
    pub fn commit<D: DedupDocument>(&mut self, writer: &mut IndexWriter<D>) -> Result<Opstamp> {
        let opstamp = self.persist(writer)?;
        self.reload()?;
        Ok(opstamp)
    }

    /// The live document with this id, committed or not.
    fn live(&self, id: &str) -> Result<Option<Live>> {
        let Some(id_field) = self.id_field else {
            return Ok(None);
        };
        if let Some(pending) = self.uncommitted.get(id) {
            return Ok(pending.clone());
        }
        let searcher = self.reader.searcher();
        let query = TermQuery::new(
            Term::from_field_text(id_field, id),
            IndexRecordOption::Basic,
        );
        let found = searcher
            .search(&query, &DocSetCollector)
            .map_err(self.error())?;
        match found.into_iter().next() {
            Some(address) => read_live(&searcher, address).map_err(self.error()),
            None => Ok(None),
        }
    }

    /// Deletes the live document `id` and leaves a tombstone of its insert in its place. The
    /// forest goes first: a shared store's failure then leaves nothing done, and once it is
    /// done `id` is recorded as gone, so that a retry never takes the document off twice.
    fn remove<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        id: &str,
        insert: &Insert,
    ) -> Result<()> {
        self.uncount(insert)?;
        self.delete_live(writer, id, insert)
    }

    /// Takes a live document's insert off its node's count in the forest (none for a shard's
    /// or without an id field, where nothing is replaced or deleted).
    fn uncount(&mut self, insert: &Insert) -> Result<()> {
        if self.id_field.is_some() && !self.placed_elsewhere {
            self.dedup.remove_document(insert.simhash)?;
        }
        Ok(())
    }

    /// [`remove`](Self::remove)'s part in the index, once its insert is off the forest's count.
    fn delete_live<D: DedupDocument>(
        &mut self,
        writer: &IndexWriter<D>,
        id: &str,
        insert: &Insert,
    ) -> Result<()> {
        let Some(id_field) = self.id_field else {
            return Ok(());
        };
        self.uncommitted.insert(id.to_owned(), None);
        writer.delete_term(Term::from_field_text(id_field, id));
        self.pending_tombstones.push(insert.sequence);
        add_tombstone(writer, &self.fields, insert, self.next_sequence).map_err(self.error())
    }
}

impl Drop for DedupWriter {
    /// Waits for a checkpoint in flight, so that whoever opens the index next finds it in
    /// place (or not begun), never half done.
    fn drop(&mut self) {
        self.finish_checkpoint(true);
    }
}

/// Adds the tombstone of `insert`, whose document is deleted before the insert numbered
/// `next_sequence` (see [`schema::DELETED_AT`]).
fn add_tombstone<D: DedupDocument>(
    writer: &IndexWriter<D>,
    fields: &DedupFields,
    insert: &Insert,
    next_sequence: u64,
) -> tantivy::Result<()> {
    let mut tombstone = D::default();
    add_insert_fields(&mut tombstone, fields, insert);
    if let Some(field) = fields.deleted_at {
        tombstone.add_u64(field, next_sequence);
    }
    writer.add_document(tombstone).map(drop)
}

/// The fields that let the forest be rebuilt: on live documents and tombstones alike.
fn add_insert_fields<D: DedupDocument>(document: &mut D, fields: &DedupFields, insert: &Insert) {
    document.add_u64(fields.sequence, insert.sequence);
    document.add_u64(fields.simhash, insert.simhash.0);
    document.add_i64(fields.event_time, insert.time);
    for value in insert
        .sketch
        .iter()
        .flat_map(|sketch| sketch.to_packed_values())
    {
        document.add_u64(fields.sketch, value);
    }
}

/// The insert a document (live or tombstone) records.
fn read_insert(searcher: &Searcher, address: DocAddress) -> tantivy::Result<Option<Insert>> {
    Ok(
        match (
            fast_value::<u64>(searcher, address, schema::SEQUENCE)?,
            fast_value::<u64>(searcher, address, schema::SIMHASH)?,
            fast_value::<i64>(searcher, address, schema::EVENT_TIME)?,
        ) {
            (Some(sequence), Some(simhash), Some(time)) => Some(Insert {
                sequence,
                simhash: Fingerprint(simhash),
                time,
                sketch: stored_sketch(searcher, address)?.map(Arc::new),
            }),
            _ => None,
        },
    )
}

/// A live document's insert and decision (`None` for a tombstone).
fn read_live(searcher: &Searcher, address: DocAddress) -> tantivy::Result<Option<Live>> {
    let Some(insert) = read_insert(searcher, address)? else {
        return Ok(None);
    };
    let Some(root) = fast_value::<u64>(searcher, address, schema::ROOT)? else {
        return Ok(None);
    };
    Ok(Some(Live {
        insert,
        root: Fingerprint(root),
        duplicate: fast_value::<bool>(searcher, address, schema::DUPLICATE)?.unwrap_or(false),
        digest: fast_value::<u64>(searcher, address, schema::DIGEST)?.unwrap_or(0),
    }))
}
