//! [`DedupIndex`]: a Tantivy index on disk with the forest in front of it, and its one
//! ordered writer.

use std::io::BufRead;
use std::ops::{Bound, ControlFlow};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::query::RangeQuery;
use tantivy::{DateTime, Index, IndexWriter, Term};

use crate::article::{Article, ArticleError, ArticleReader, ArticleRecord, FieldValue};
use crate::chrome::PageLines;
use crate::config::{Config, FieldKind};
use crate::dedup::{BATCH_SIZE, Decision, Signer};
use crate::engine::dedup_writer::{DedupWriter, Placed, PreparedDocument};
use crate::engine::directory::{
    self, FOREST_DIR, SETTINGS_FILE, index_error, open_directory, open_tantivy, stored_settings,
};
use crate::engine::document::{NewsDocument, NewsValue};
use crate::engine::recovery::RecoveryReport;
use crate::engine::schema::{NewsFields, build_schema};
use crate::engine::search::DedupSearcher;
use crate::forest::{Forest, SharedForest, Timestamp};
use crate::index::BlockLayout;
use crate::input;
use crate::text::AnalyzedText;
use crate::{Error, Result};

/// An article analysed and fingerprinted, ready for [`DedupIndex::add`].
///
/// Preparing is the expensive part of an insert (normalising and segmenting the text once for
/// both the fingerprint and the index) and needs only `&DedupIndex`, so many articles can be
/// prepared in parallel and then added in order.
pub type PreparedArticle = PreparedDocument<NewsDocument>;

/// What preparing an article needs: a copy of the index's settings, so that articles can be
/// prepared on any thread while the index itself is busy adding (see [`DedupIndex::preparer`]).
#[derive(Clone)]
pub struct Preparer {
    signer: Signer,
    fingerprinted: Vec<String>,
    fields: NewsFields,
    analyze_title: bool,
    analyze_content: bool,
    /// Per field of one's own ([`NewsFields::own`]): whether its texts are analysed (an
    /// indexed or fingerprinted text field).
    analyze_own: Vec<bool>,
}

impl Preparer {
    /// Analyses and fingerprints an article (an [`Article`], or an [`ArticleRecord`] with
    /// values of the schema's own fields; values of fields the schema lacks are left out).
    pub fn prepare(&self, record: impl Into<ArticleRecord>) -> PreparedArticle {
        self.prepare_with(record.into(), None)
    }

    /// Prepares an article that another process placed (a coordinator, for the shard that
    /// stores it): its page is read only when the placer took lines out of it as its
    /// source's chrome, which are then taken out here too ([`Placed::chrome`]).
    pub fn prepare_placed(
        &self,
        record: impl Into<ArticleRecord>,
        placed: Placed,
    ) -> PreparedArticle {
        self.prepare_with(record.into(), Some(placed))
    }

    fn prepare_with(&self, record: ArticleRecord, placed: Option<Placed>) -> PreparedArticle {
        let digest = record.digest();
        let ArticleRecord {
            article,
            fields: mut own_values,
        } = record;
        let Article {
            id,
            title,
            content,
            source,
            url,
            published_at,
        } = article;
        let analyzed_title = title
            .as_deref()
            .filter(|_| self.analyze_title)
            .map(AnalyzedText::new);
        let analyzed_content = self.analyze_content.then(|| AnalyzedText::new(&content));
        // Each own field's values, with the analysis of each text that needs one.
        let own: Vec<Vec<(FieldValue, Option<AnalyzedText>)>> = self
            .fields
            .own
            .iter()
            .zip(&self.analyze_own)
            .map(|(field, &analyze)| {
                let values = own_values.remove(&field.name).unwrap_or_default();
                values
                    .into_iter()
                    .map(|value| {
                        let analysis = match &value {
                            FieldValue::Text(text) if analyze => Some(AnalyzedText::new(text)),
                            _ => None,
                        };
                        (value, analysis)
                    })
                    .collect()
            })
            .collect();
        let parts: Vec<&AnalyzedText> = self
            .fingerprinted
            .iter()
            .flat_map(|name| -> Box<dyn Iterator<Item = &AnalyzedText> + '_> {
                match name.as_str() {
                    "title" => Box::new(analyzed_title.iter()),
                    "content" => Box::new(analyzed_content.iter()),
                    _ => {
                        let position = self.fields.own.iter().position(|field| field.name == *name);
                        Box::new(
                            position
                                .and_then(|position| own.get(position))
                                .into_iter()
                                .flatten()
                                .filter_map(|(_, analysis)| analysis.as_ref()),
                        )
                    }
                }
            })
            .collect();
        let signature = self.signer.sign_analyzed(&parts, source.as_deref());
        let normalized = || {
            parts
                .iter()
                .map(|part| part.normalized().to_owned())
                .collect()
        };
        let page = match placed.map(|placed| placed.chrome) {
            Some(chrome) => (source.as_deref())
                .filter(|source| !chrome.is_empty() && !source.is_empty())
                .map(|source| PageLines::new(source, normalized())),
            None => self.signer.page_lines(source.as_deref(), normalized()),
        };

        let fields = &self.fields;
        let mut document = NewsDocument::default();
        document.add(fields.id, NewsValue::Str(id.clone()));
        if let Some(title) = title {
            document.add(fields.title, text_value(analyzed_title, title));
        }
        document.add(fields.content, text_value(analyzed_content, content));
        if let Some(source) = source {
            document.add(fields.source, NewsValue::Str(source));
        }
        if let Some(url) = url {
            document.add(fields.url, NewsValue::Str(url));
        }
        for (field, values) in fields.own.iter().zip(own) {
            for (value, analysis) in values {
                document.add(field.field, own_value(value, analysis));
            }
        }
        if let Some(time) = published_at {
            document.add(
                fields.published_at,
                NewsValue::Date(DateTime::from_timestamp_secs(time)),
            );
        }
        let prepared =
            PreparedDocument::new(document, id, published_at, signature, digest).with_page(page);
        match placed {
            Some(placed) => prepared.placed(placed),
            None => prepared,
        }
    }
}

/// A text field's value: with its analysis when the text was analysed (so Tantivy indexes the
/// tokens computed for the fingerprint instead of segmenting again), plain when it is only
/// stored.
fn text_value(analyzed: Option<AnalyzedText>, raw: String) -> NewsValue {
    match analyzed {
        Some(analyzed) => NewsValue::Analyzed(raw, Arc::new(analyzed)),
        None => NewsValue::Str(raw),
    }
}

/// The document value of a field of one's own (a text with its analysis, if it has one).
fn own_value(value: FieldValue, analysis: Option<AnalyzedText>) -> NewsValue {
    match value {
        FieldValue::Text(text) => text_value(analysis, text),
        FieldValue::I64(value) => NewsValue::I64(value),
        FieldValue::U64(value) => NewsValue::U64(value),
        FieldValue::F64(value) => NewsValue::F64(value),
        FieldValue::Bool(value) => NewsValue::Bool(value),
        FieldValue::Date(time) => NewsValue::Date(DateTime::from_timestamp_secs(time)),
        FieldValue::Facet(facet) => NewsValue::Facet(facet),
    }
}

/// Where an index's forest lives.
enum ForestHome {
    /// In memory, replayed from the index on open.
    Own,
    /// In a store several processes share, through this many connections (a batch's inserts
    /// in flight at once).
    Shared(Arc<dyn SharedForest>, usize),
    /// With a coordinator that places the documents: the index is a shard.
    Elsewhere,
}

/// The most lines [`DedupIndex::ingest`] adds together with several inserts in flight: enough
/// to keep them busy, few enough that a Ctrl-C stops it within a second.
const IN_FLIGHT_RUN: u64 = 512;

/// A Tantivy index of news articles with near-duplicate clustering: every document carries
/// its simhash, the simhash's blocks and its cluster's root, decided by the forest at insert
/// time.
///
/// There is one writer per index directory (Tantivy's lock enforces it), and inserts go
/// through it in order, which is what makes cluster decisions deterministic. Searching goes
/// through [`DedupSearcher`]s, which never block the writer; they see what was committed.
///
/// Opening an existing index replays its inserts into a fresh forest (see
/// [`RecoveryReport`]), so decisions after a restart equal those of a run without one.
///
/// ```
/// use tantivy_dedup::engine::DedupIndex;
/// use tantivy_dedup::config::Config;
/// use tantivy_dedup::Article;
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let story = "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，\
///              就业形势总体稳定，居民消费价格温和上涨，经济运行持续恢复向好。";
/// let article = |id: &str, source: &str, content: String| Article {
///     id: id.into(),
///     source: Some(source.into()),
///     content,
///     published_at: Some(1_700_000_000),
///     ..Default::default()
/// };
/// let first = index.add_article(article("a", "新华网", story.into()))?;
/// let repost = index.add_article(article("b", "人民网", format!("<p>{story}</p>")))?;
/// index.commit()?;
/// assert_eq!(repost.root, first.root);
///
/// let searcher = index.searcher();
/// assert_eq!(searcher.cluster_size(first.root)?, 2);
/// let others = searcher.similar("a", 0, 10)?.expect("a is indexed");
/// assert_eq!(others.documents[0].id, "b");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DedupIndex {
    path: PathBuf,
    index: Index,
    fields: NewsFields,
    config: Config,
    /// `None` after a failure closed it, until [`recover`](DedupIndex::recover) reopens it.
    writer: Option<IndexWriter<NewsDocument>>,
    /// The forest beside the writer: every add and delete goes through it.
    dedup: DedupWriter,
}

/// Makes a new, empty index in `dir` with `config`'s schema and settings file. `dir` must be
/// missing or empty ([`directory::holds_index`]); if making the index fails, what was written
/// is removed, so that the directory is empty again for a retry.
fn create_files(dir: &Path, config: &Config) -> Result<()> {
    config.validate()?;
    if directory::holds_index(dir)? {
        return Err(Error::Config(format!(
            "{} already holds an index; open it instead",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })?;
    let layout = BlockLayout::new(config.dedup.max_distance)?;
    let (schema, _) = build_schema(&config.fields, &layout);
    // The user dictionary is copied into the index, whose settings name the copy (a relative
    // path in them is read from the index's directory).
    let mut settings = config.clone();
    let dictionary = match &config.index.user_dict {
        Some(user_dict) => {
            settings.index.user_dict = Some(PathBuf::from(directory::USER_DICT_FILE));
            Some(std::fs::read(user_dict).map_err(|source| Error::Io {
                path: user_dict.clone(),
                source,
            })?)
        }
        None => None,
    };
    let created = dictionary
        .map_or(Ok(()), |words| {
            directory::write_atomically(&dir.join(directory::USER_DICT_FILE), &words)
        })
        .and_then(|()| {
            directory::write_atomically(&dir.join(SETTINGS_FILE), settings.to_toml().as_bytes())
        })
        .and_then(|()| {
            let directory = open_directory(dir)?;
            Index::create(directory, schema, Default::default())
                .map_err(|source| index_error(dir, source))
        });
    if let Err(error) = created {
        for file in [
            SETTINGS_FILE,
            directory::USER_DICT_FILE,
            directory::META_FILE,
            directory::MANAGED_FILE,
        ] {
            // Best effort: the error that matters is the one returned.
            let _ = std::fs::remove_file(dir.join(file));
        }
        return Err(error);
    }
    Ok(())
}

impl DedupIndex {
    /// Creates a new index in `dir`, which must be missing (it is created) or empty.
    pub fn create(dir: &Path, config: Config) -> Result<Self> {
        create_files(dir, &config)?;
        Self::open_with(dir, config, ForestHome::Own)
    }

    /// Opens the index in `dir` with the settings it was created with.
    pub fn open(dir: &Path) -> Result<Self> {
        let config = stored_settings(dir)?;
        Self::open_with(dir, config, ForestHome::Own)
    }

    /// Opens the index in `dir`, or creates it with `config` when `dir` is missing or empty. A
    /// directory with files but no meta.json is refused, naming some of them: it may be an
    /// index that lost its meta.json, whose old segments a new index would delete.
    /// An existing index keeps its settings: `config` must agree on everything that shapes
    /// fingerprints and fields, and only the window and the `[index]` settings may change.
    pub fn open_or_create(dir: &Path, config: Option<Config>) -> Result<Self> {
        Self::open_or_create_as(dir, config, ForestHome::Own)
    }

    /// [`open_or_create`](Self::open_or_create), with the forest on a Redis Cluster when
    /// `store` is given: the index is then one shard of several, and the forest (shared by every
    /// shard's writer) is not replayed from it. A batch's inserts
    /// ([`ingest`](Self::ingest), [`add_all`](Self::add_all)) are then placed
    /// `inserts_in_flight` at a time, deciding as one at a time would.
    pub fn open_or_create_with_store(
        dir: &Path,
        config: Option<Config>,
        store: Option<Arc<dyn SharedForest>>,
        inserts_in_flight: usize,
    ) -> Result<Self> {
        let forest = match store {
            Some(store) => ForestHome::Shared(store, inserts_in_flight),
            None => ForestHome::Own,
        };
        Self::open_or_create_as(dir, config, forest)
    }

    /// [`open_or_create`](Self::open_or_create) for one shard of an index split by story:
    /// the index keeps no forest, and takes only documents placed by its coordinator
    /// ([`PreparedDocument::placed`](crate::engine::PreparedDocument::placed)).
    pub fn open_or_create_shard(dir: &Path, config: Option<Config>) -> Result<Self> {
        Self::open_or_create_as(dir, config, ForestHome::Elsewhere)
    }

    fn open_or_create_as(dir: &Path, config: Option<Config>, forest: ForestHome) -> Result<Self> {
        if !directory::holds_index(dir)? {
            let config = config.unwrap_or_default();
            create_files(dir, &config)?;
            return Self::open_with(dir, config, forest);
        }
        let stored = stored_settings(dir)?;
        let config = match config {
            Some(mut config) => {
                check_compatible(&stored, &config)?;
                // The index's words were split with its own dictionary (or none): so are this
                // run's. Settings that name another are refused (a process given one has
                // loaded it already, and splits with nothing else).
                if let (Some(given), Some(kept)) =
                    (&config.index.user_dict, &stored.index.user_dict)
                    && !crate::text::same_user_dictionary(given, kept)?
                {
                    return Err(Error::Config(format!(
                        "the index keeps the user dictionary it was made with ({}), and {} \
                         holds other words: an index's dictionary does not change. Re-index \
                         into a new directory to use the edited one",
                        kept.display(),
                        given.display()
                    )));
                }
                config.index.user_dict = stored.index.user_dict;
                config.dedup.source_chrome = stored.dedup.source_chrome;
                config
            }
            None => stored,
        };
        Self::open_with(dir, config, forest)
    }

    /// Opens the index: its files checked ([`directory::check_files`]), the writer's lock
    /// taken, the temporaries a crash left removed, every segment opened, the forest replayed.
    fn open_with(dir: &Path, config: Config, forest: ForestHome) -> Result<Self> {
        config.validate()?;
        let (index, fields) = open_tantivy(dir, &config)?;
        directory::check_files(dir, &index)?;
        let writer = open_writer(&index, &config, dir)?;
        // Only with the writer's lock held: no other process is writing them now.
        directory::remove_temporaries(dir)?;
        // The fields the fingerprint reads (validated as text fields of this schema).
        let schema = index.schema();
        let text_fields = config
            .dedup
            .fields
            .iter()
            .filter_map(|name| schema.get_field(name).ok());
        let mut builder = DedupWriter::builder(config.dedup.clone())
            .id_field(fields.id)
            .time_field(fields.published_at)
            .text_fields(text_fields)
            .source_field(fields.source)
            .location(dir);
        // A run with another window or tables (all `check_compatible` lets change) can use
        // no checkpoint of the index's own settings, and must not replace it with one of its
        // own, which the next run with the index's settings could not use either: it replays
        // every insert, keeps its sketches in unlinked files, and neither checkpoints nor
        // prunes.
        builder = if matches!(forest, ForestHome::Elsewhere) {
            builder.placed_elsewhere()
        } else if stored_settings(dir)?.dedup == config.dedup {
            builder
                .checkpoints_in(dir.join(FOREST_DIR), config.index.checkpoint_inserts)
                .prune_tombstones(config.index.prune_tombstones)
        } else {
            builder.sketches_in(dir)
        };
        if let ForestHome::Shared(store, inserts_in_flight) = forest {
            builder = builder
                .shared_forest(store)
                .inserts_in_flight(inserts_in_flight);
        }
        let dedup = builder.open(&index)?;
        Ok(DedupIndex {
            path: dir.to_owned(),
            index,
            fields,
            config,
            writer: Some(writer),
            dedup,
        })
    }

    /// Brings the index back to its last commit after a failed write or commit (a transient
    /// cause such as too many open files or a full disk): the writer is closed, dropping
    /// everything since the last commit, then reopened, and the forest is rebuilt from the
    /// committed index as on open. Nothing committed is lost; the changes dropped were never
    /// acknowledged as durable. While the cause lasts this fails and can be called again;
    /// until it succeeds, writes are refused.
    pub fn recover(&mut self) -> Result<()> {
        // Its error is the failure being recovered from, or a merge that is simply dropped.
        let _ = self.close_writer();
        let writer = open_writer(&self.index, &self.config, &self.path)?;
        self.dedup.rebuild()?;
        self.writer = Some(writer);
        Ok(())
    }

    /// The open writer with the forest beside it, or the error of a writer closed by a
    /// failure.
    fn writers(&mut self) -> Result<(&mut IndexWriter<NewsDocument>, &mut DedupWriter)> {
        match &mut self.writer {
            Some(writer) => Ok((writer, &mut self.dedup)),
            None => Err(Error::Server(format!(
                "the writer of {} was closed by a failure; it reopens at the last commit when recovered",
                self.path.display()
            ))),
        }
    }

    /// The settings in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The index directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The in-memory forest of clusters in the window (empty when the forest is shared on a
    /// Redis Cluster: see [`forest_stats`](Self::forest_stats)).
    pub fn forest(&self) -> &Forest {
        self.dedup.forest()
    }

    /// The last forest checkpoint the writer finished saving or failed to (a checkpoint due
    /// at a commit is reported at a later commit, once its thread is done).
    pub fn last_checkpoint(&self) -> Option<&crate::engine::CheckpointReport> {
        self.dedup.last_checkpoint()
    }

    /// Tombstones this writer deleted from the index since it was opened
    /// (`[index] prune_tombstones`).
    pub fn pruned_tombstones(&self) -> u64 {
        self.dedup.pruned_tombstones()
    }

    /// Node and root counts of the forest in use.
    pub fn forest_stats(&self) -> crate::forest::ForestStats {
        self.dedup.forest_stats()
    }

    /// Whether the forest is shared on a Redis Cluster (`--store`) rather than in memory.
    pub fn is_shared(&self) -> bool {
        self.dedup.is_shared()
    }

    /// What opening the index replayed.
    pub fn recovery(&self) -> &RecoveryReport {
        self.dedup.recovery()
    }

    /// The event time to give an article without `published_at`: the newest time seen, or the
    /// wall clock when nothing was seen yet (so a file replays the same whatever the day).
    pub fn arrival_time(&self) -> Timestamp {
        self.dedup.arrival_time()
    }

    /// A searcher over what was committed. Cheap; clone it freely, across threads too.
    pub fn searcher(&self) -> DedupSearcher {
        DedupSearcher::new(
            self.path.clone(),
            self.index.clone(),
            self.dedup.reader().clone(),
            self.fields.clone(),
            self.config.clone(),
        )
    }

    /// Analyses and fingerprints an article (the parallel part of an insert).
    pub fn prepare(&self, article: impl Into<ArticleRecord>) -> PreparedArticle {
        self.preparer().prepare(article)
    }

    /// The reader of input articles by this index's `[fields]`.
    pub fn article_reader(&self) -> ArticleReader {
        ArticleReader::for_config(&self.config)
    }

    /// A preparer that works without the index, for preparing on other threads.
    pub fn preparer(&self) -> Preparer {
        let schema = self.index.schema();
        let fingerprinted = |name: &str| self.config.dedup.fields.iter().any(|f| f == name);
        Preparer {
            signer: self.dedup.signer().clone(),
            fingerprinted: self.config.dedup.fields.clone(),
            fields: self.fields.clone(),
            analyze_title: schema.get_field_entry(self.fields.title).is_indexed()
                || fingerprinted("title"),
            analyze_content: schema.get_field_entry(self.fields.content).is_indexed()
                || fingerprinted("content"),
            analyze_own: self
                .fields
                .own
                .iter()
                .map(|field| {
                    field.kind == FieldKind::Text && (field.indexed || fingerprinted(&field.name))
                })
                .collect(),
        }
    }

    /// Places a prepared article in its cluster and adds it to the index, replacing any
    /// document with the same id ([`DedupWriter::add`]). An article without `published_at`
    /// is dated by [`arrival_time`](Self::arrival_time). The document becomes searchable at
    /// the next [`commit`](Self::commit).
    ///
    /// An article identical to the live document with its id (every field the same: a client
    /// retrying a request whose answer it lost) changes nothing and gets that document's
    /// decision again, marked [`Change::Unchanged`](crate::Change::Unchanged), so re-sending is safe, does not disturb
    /// the clusters, and is not counted as new work.
    pub fn add(&mut self, prepared: PreparedArticle) -> Result<Decision> {
        let (writer, dedup) = self.writers()?;
        dedup.add(writer, prepared)
    }

    /// [`add`](Self::add) for each article in order ([`DedupWriter::add_all`]: on a shared
    /// store, several inserts in flight): the decisions of the articles added, and the
    /// error that stopped the others if one did.
    pub fn add_all(&mut self, prepared: Vec<PreparedArticle>) -> (Vec<Decision>, Option<Error>) {
        match self.writers() {
            Ok((writer, dedup)) => dedup.add_all(writer, prepared),
            Err(error) => (Vec::new(), Some(error)),
        }
    }

    /// [`prepare`](Self::prepare) then [`add`](Self::add).
    pub fn add_article(&mut self, article: impl Into<ArticleRecord>) -> Result<Decision> {
        let prepared = self.prepare(article);
        self.add(prepared)
    }

    /// Whether a batch's inserts are placed several at a time ([`add_all`](Self::add_all)).
    pub fn places_in_flight(&self) -> bool {
        self.dedup.places_in_flight()
    }

    /// Ingests JSON Lines or a JSON array ([`input::Records`]) from `reader` (named `name` in
    /// errors): articles are read by the index's `[fields]`, parsed and prepared in parallel
    /// batches, then added in input order, and `report` hears each line's number with its
    /// decision or why the line was skipped, until the input ends or `report` says to stop.
    /// An article without `published_at` is dated by [`arrival_time`](Self::arrival_time);
    /// the answer counts those that had one, for a warning when none had.
    ///
    /// Commits every `commit_every` documents, if given; the caller commits at the end. A
    /// read error is returned after every line read before it was added. With several
    /// inserts in flight ([`places_in_flight`](Self::places_in_flight)), up to 512 lines are
    /// added together, and `report` hears all of them even when it asks to stop at an earlier
    /// one.
    pub fn ingest(
        &mut self,
        reader: impl BufRead + Send,
        name: &Path,
        commit_every: Option<u64>,
        mut report: impl FnMut(u64, std::result::Result<Decision, ArticleError>) -> ControlFlow<()>,
    ) -> Result<input::TimeCoverage> {
        let mut failure = None;
        let mut since_commit = 0u64;
        let mut coverage = input::TimeCoverage::default();
        // Preparation runs on other threads while the handler below holds the index mutably,
        // so it works from its own copy of what it reads.
        let preparer = self.preparer();
        let articles = self.article_reader();
        let read = input::for_each_batch(
            reader,
            &articles,
            BATCH_SIZE,
            |record| preparer.prepare(record),
            |batch| {
                // With several inserts in flight on a shared store, up to `IN_FLIGHT_RUN`
                // lines (and none past the next commit) are added together, then each is
                // reported in order, even when `report` asks to stop before the last: it was
                // added. Otherwise one line at a time, each reported as it is added.
                let together = if self.dedup.places_in_flight() {
                    IN_FLIGHT_RUN
                } else {
                    1
                };
                let mut batch = batch.into_iter().peekable();
                let mut flow = ControlFlow::Continue(());
                while flow.is_continue() && batch.peek().is_some() {
                    let room = commit_every.map_or(together, |every| {
                        every.saturating_sub(since_commit).min(together)
                    });
                    let mut lines = Vec::new();
                    let mut good = Vec::new();
                    for (number, prepared) in batch.by_ref() {
                        match prepared {
                            Ok(prepared) => {
                                coverage.count(prepared.time());
                                good.push(prepared);
                                lines.push((number, None));
                            }
                            Err(error) => lines.push((number, Some(error))),
                        }
                        if lines.len() as u64 >= room {
                            break;
                        }
                    }
                    let (decisions, error) = self.add_all(good);
                    let mut decisions = decisions.into_iter();
                    for (number, bad) in lines {
                        let outcome = match bad {
                            Some(bad) => Err(bad),
                            None => match decisions.next() {
                                Some(decision) => Ok(decision),
                                None => break, // added no further: `error` says why
                            },
                        };
                        if report(number, outcome).is_break() {
                            flow = ControlFlow::Break(());
                        }
                        since_commit += 1;
                    }
                    if let Some(error) = error {
                        failure = Some(error);
                        return ControlFlow::Break(());
                    }
                    if flow.is_break() {
                        break; // the caller commits
                    }
                    if commit_every.is_some_and(|every| since_commit >= every) {
                        since_commit = 0;
                        if let Err(error) = self.commit() {
                            failure = Some(error);
                            return ControlFlow::Break(());
                        }
                    }
                }
                flow
            },
        );
        if let Some(error) = failure {
            return Err(error);
        }
        read.map_err(|source| Error::Io {
            path: name.to_owned(),
            source,
        })?;
        Ok(coverage)
    }

    /// Deletes the document with this id; returns whether there was one. Takes effect at the
    /// next commit. Its cluster stays in the forest until it expires.
    pub fn delete(&mut self, id: &str) -> Result<bool> {
        let (writer, dedup) = self.writers()?;
        dedup.delete(writer, id)
    }

    /// Records where in an ordered log of writes the changes added so far come from, for the
    /// next commit's payload ([`DedupWriter::set_log_position`]).
    pub fn set_log_position(&mut self, position: String) {
        self.dedup.set_log_position(position);
    }

    /// The log position of the last change added, or after an open or a recovery, the last
    /// commit's ([`DedupWriter::log_position`]).
    pub fn log_position(&self) -> Option<&str> {
        self.dedup.log_position()
    }

    /// Makes everything added and deleted so far durable and visible to searchers, then
    /// applies the retention setting. Returns how many documents retention deleted.
    /// [`persist`](Self::persist) then [`publish`](Self::publish), for a caller that need not
    /// know which of the two failed.
    pub fn commit(&mut self) -> Result<u64> {
        self.persist()?;
        self.publish()
    }

    /// The first half of [`commit`](Self::commit): Tantivy's commit. Once it returns `Ok`,
    /// everything added and deleted so far survives a crash, whatever happens after; an
    /// `Err` leaves the last commit as it was.
    pub fn persist(&mut self) -> Result<()> {
        let (writer, dedup) = self.writers()?;
        dedup.persist(writer).map(drop)
    }

    /// The second half of [`commit`](Self::commit): makes what was persisted visible to
    /// searchers, then applies the retention setting (itself committed). Returns how many
    /// documents retention deleted. A failure here loses nothing persisted.
    pub fn publish(&mut self) -> Result<u64> {
        self.dedup.reload()?;
        let Some(retention) = self.config.index.retention_seconds() else {
            return Ok(0);
        };
        let Some(newest) = self.dedup.newest_time() else {
            return Ok(0);
        };
        let cutoff = newest.saturating_sub(retention as Timestamp);
        let deleted = self.delete_published_before(cutoff)?;
        if deleted > 0 {
            self.persist()?;
            self.dedup.reload()?;
        }
        Ok(deleted)
    }

    /// Deletes every committed document published before `cutoff` (Unix seconds), leaving
    /// tombstones; returns how many. Takes effect at the next commit; refused while anything
    /// is uncommitted ([`DedupWriter::delete_query`]).
    pub fn delete_published_before(&mut self, cutoff: Timestamp) -> Result<u64> {
        let query = RangeQuery::new(
            Bound::Unbounded,
            Bound::Excluded(Term::from_field_date(
                self.fields.published_at,
                DateTime::from_timestamp_secs(cutoff),
            )),
        );
        let (writer, dedup) = self.writers()?;
        dedup.delete_query(writer, Box::new(query))
    }

    /// Saves a checkpoint of the forest if inserts or deletes were committed since the last
    /// one (so that the next open replays nothing), waits for background merges to finish (they continue
    /// in the background otherwise) and releases the writer. A failed checkpoint is not an
    /// error: the next open replays more.
    pub fn close(mut self) -> Result<()> {
        if self.dedup.changed_since_checkpoint() {
            let _ = self.dedup.checkpoint();
        }
        self.close_writer()
            .map_err(|source| index_error(&self.path, source))
    }

    /// Closes the Tantivy writer, if it is open, once its background merges have finished.
    ///
    /// Only then does its directory lock pass on: a writer merely dropped releases the lock
    /// while a merge it started may still save the index's metadata, racing the next writer
    /// to open in the same process.
    fn close_writer(&mut self) -> tantivy::Result<()> {
        match self.writer.take() {
            Some(writer) => writer.wait_merging_threads(),
            None => Ok(()),
        }
    }
}

impl Drop for DedupIndex {
    /// Drops what was not committed, as a crash would, but lets the writer's background work
    /// finish first, so whoever opens the index next finds no thread of this one still
    /// writing. [`close`](DedupIndex::close) also saves a checkpoint and reports errors.
    fn drop(&mut self) {
        let _ = self.close_writer();
    }
}

/// The index's writer with the threads and memory of `config`.
fn open_writer(index: &Index, config: &Config, dir: &Path) -> Result<IndexWriter<NewsDocument>> {
    index
        .writer_with_num_threads(config.index.threads(), config.index.writer_memory_mb << 20)
        .map_err(|source| match source {
            tantivy::TantivyError::LockFailure(..) => Error::Busy(dir.to_owned()),
            source => index_error(dir, source),
        })
}

/// Checks that `requested` may open an index created with `stored`.
fn check_compatible(stored: &Config, requested: &Config) -> Result<()> {
    let mut stored_dedup = stored.dedup.clone();
    stored_dedup.window = requested.dedup.window;
    // The index keeps learning sources' chrome as it was made to (`open_or_create_as`
    // takes its value): an index made before the setting existed opens with any settings.
    stored_dedup.source_chrome = requested.dedup.source_chrome;
    // The tables are rebuilt on open and find the same neighbours whatever their layout.
    stored_dedup.tables = requested.dedup.tables;
    if stored_dedup != requested.dedup {
        return Err(Error::Config(format!(
            "the index was created with other [dedup] settings; only `window` and `tables` may change.\n\
             index:     {}\nrequested: {}",
            toml::to_string(&stored.dedup)
                .unwrap_or_default()
                .replace('\n', "; "),
            toml::to_string(&requested.dedup)
                .unwrap_or_default()
                .replace('\n', "; "),
        )));
    }
    let (stored_fields, requested_fields) = (stored.fields.resolved(), requested.fields.resolved());
    if stored_fields != requested_fields {
        let differing: std::collections::BTreeSet<&str> = stored_fields
            .iter()
            .chain(&requested_fields)
            .filter(|field| !stored_fields.contains(field) || !requested_fields.contains(field))
            .map(|field| field.name.as_str())
            .collect();
        return Err(Error::Config(format!(
            "the index was created with other [fields] settings; fields cannot change (they \
             differ in: {})",
            differing.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::{Change, Deduplicator};

    fn article(id: &str, content: &str) -> Article {
        Article {
            id: id.into(),
            content: content.into(),
            published_at: Some(1_700_000_000),
            ..Default::default()
        }
    }

    const STORY: &str = "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，\
                         就业形势总体稳定，居民消费价格温和上涨，经济运行持续恢复向好。";
    const OTHER: &str = "东港市今年前十个月港口货物吞吐量达到一亿两千万吨，同比增长百分之六点八，\
                         集装箱吞吐量首次突破三百万标准箱，新建的两个十万吨级泊位已经投入使用。";

    /// An identical article is `Unchanged` with the first decision, before and after the
    /// commit; a changed one under the same id is `Replaced`, and is no re-send.
    #[test]
    fn re_sends_and_replacements_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = DedupIndex::create(dir.path(), Config::default()).unwrap();
        let first = index.add_article(article("a", STORY)).unwrap();
        assert_eq!(first.change, Change::Added);

        let again = index.add_article(article("a", STORY)).unwrap();
        assert_eq!(again.change, Change::Unchanged, "uncommitted");
        assert_eq!((again.simhash, again.root), (first.simhash, first.root));
        index.commit().unwrap();
        let committed = index.add_article(article("a", STORY)).unwrap();
        assert_eq!(committed.change, Change::Unchanged, "committed");
        assert_eq!(
            Decision {
                change: Change::Added,
                ..committed
            },
            first
        );

        let replaced = index.add_article(article("a", OTHER)).unwrap();
        assert_eq!(replaced.change, Change::Replaced);
        assert_ne!(replaced.root, first.root);
        let back = index.add_article(article("a", STORY)).unwrap();
        assert_eq!(
            back.change,
            Change::Replaced,
            "a change again, not a re-send"
        );
        index.commit().unwrap();
        assert_eq!(index.searcher().stats().unwrap().documents, 1);
    }

    /// Without an index every decision is `Added`, which its JSON leaves out, so `dedup`'s
    /// lines keep their four keys.
    #[test]
    fn an_added_decision_keeps_its_four_json_keys() {
        let mut dedup = Deduplicator::new(crate::DedupConfig::default()).unwrap();
        let decision = dedup.add_article(&article("a", STORY), 0).unwrap();
        assert_eq!(decision.change, Change::Added);
        let json = serde_json::to_value(&decision).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["duplicate", "id", "root", "simhash"]);
        let unchanged = Decision {
            change: Change::Unchanged,
            ..decision
        };
        assert_eq!(
            serde_json::to_value(&unchanged).unwrap()["change"],
            "unchanged"
        );
    }
}
