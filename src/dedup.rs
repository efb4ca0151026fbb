//! The dedup pipeline without an index: fingerprint each article and place it in the forest,
//! in input order.

use std::io::{self, BufRead};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::article::{Article, ArticleError, ArticleReader, ArticleRecord};
use crate::chrome::{Mark, PageLines, SourceChrome, Stripped};
use crate::config::DedupConfig;
use crate::forest::{
    Forest, ForestStats, ForestStore, Pipeline, Placement, Signature, Timestamp, new_token, place,
};
use crate::input;
use crate::text::{AnalyzedText, Fingerprinter, Names, normalize};
use crate::verify::{Reason, Sketch, SketchStore, degenerate_sketch};
use crate::{Error, Fingerprint, Result};

/// The verdict on one document: its fingerprint, its cluster, and whether an earlier document
/// of that cluster came first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The document's id.
    pub id: String,
    /// Its node in the forest: its text's fingerprint, or the nearest free value
    /// ([`node_candidates`](crate::forest::node_candidates)) when that value already names a
    /// node whose text does not verify against this one (default mode), or was the root of a
    /// story of another text that has expired and this document starts a story (a story id is
    /// never another story's).
    pub simhash: Fingerprint,
    /// The root hash of its cluster.
    pub root: Fingerprint,
    /// Whether it joined an existing cluster.
    pub duplicate: bool,
    /// What adding it did to the index: always [`Change::Added`] without one. Left out of the
    /// JSON when it is `Added`, so that `dedup`'s lines stay `{id, simhash, root, duplicate}`.
    #[serde(skip_serializing_if = "Change::is_added")]
    pub change: Change,
    /// Why the document was kept out of every other story, when it was: its text has too
    /// little of its own ([`Reason::Degenerate`]), or is a part of several stories
    /// ([`Reason::Boilerplate`]). A platform may hide such documents. Left out of the JSON
    /// when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

impl Decision {
    /// The decision on document `id`, newly placed at `placement`: the signer's `reason` to
    /// keep it apart, else the placement's.
    fn added(id: String, reason: Option<Reason>, placement: &Placement) -> Self {
        Decision {
            id,
            simhash: placement.node,
            root: placement.root,
            duplicate: placement.is_duplicate(),
            change: Change::Added,
            reason: reason.or(placement.reason),
        }
    }
}

/// What adding an article did to an index ([`DedupIndex::add`](crate::engine::DedupIndex::add)),
/// told apart so that a re-send is not counted as new work: only `Added` and `Replaced`
/// placed the article in the forest and wrote a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// No live document had its id: a new document.
    Added,
    /// It replaced the live document with its id, which differed in some field; the old one
    /// was deleted (its tombstone kept) and the new one placed afresh.
    Replaced,
    /// It equals the live document with its id in every field (a client's retry, a file
    /// ingested again): nothing was written, and the decision is that document's.
    Unchanged,
}

impl Change {
    /// Whether the article was added as a new document.
    pub fn is_added(&self) -> bool {
        *self == Change::Added
    }

    /// Whether nothing was done (an unchanged re-send).
    pub fn is_unchanged(&self) -> bool {
        *self == Change::Unchanged
    }
}

/// Fingerprints articles and places them in a forest, one at a time, in the order given.
///
/// Fingerprinting is a pure function of the article ([`Deduplicator::fingerprint`] takes
/// `&self`), so callers may fingerprint many articles in parallel; placing ([`Deduplicator::place`])
/// takes `&mut self`, which makes the forest's single ordered writer a compile-time fact.
///
/// ```
/// use tantivy_dedup::{Article, DedupConfig, Deduplicator};
///
/// let mut dedup = Deduplicator::new(DedupConfig::default()).unwrap();
/// let story = "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，\
///              就业形势总体稳定，居民消费价格温和上涨，经济运行持续恢复向好。";
/// let first = dedup.add_article(&Article { id: "a".into(), content: story.into(), ..Default::default() }, 0).unwrap();
/// let repost = dedup.add_article(
///     &Article { id: "b".into(), content: format!("<p>{story}</p>"), ..Default::default() },
///     60,
/// ).unwrap();
/// assert!(!first.duplicate);
/// assert!(repost.duplicate);
/// assert_eq!(repost.root, first.root);
/// ```
pub struct Deduplicator {
    config: DedupConfig,
    signer: Signer,
    forest: Forest,
    /// The store that replaces `forest` when several processes share the forest (such as
    /// `forest::redis::RedisStore`, feature `redis`).
    shared: Option<Shared>,
    /// What each source repeats on its pages, learned from the articles placed so far (by
    /// this process: with a shared forest, each process learns from its own stream).
    chrome: SourceChrome,
    /// How many articles [`add_article`](Self::add_article) and [`run`](Self::run) placed:
    /// the next one's position in the stream, for [`SourceChrome`].
    added: u64,
}

/// A forest that several processes share, as this process reaches it.
enum Shared {
    /// One connection: one insert at a time.
    Store(Box<dyn ForestStore + Send>),
    /// Several connections of one writer: several inserts of a batch in flight
    /// ([`run`](Deduplicator::run), [`place_in_order`](Deduplicator::place_in_order)),
    /// deciding as one at a time would.
    Pipeline(Pipeline),
}

impl Deduplicator {
    /// A deduplicator with an empty forest, all in memory.
    pub fn new(config: DedupConfig) -> Result<Self> {
        Self::with_sketches(config, SketchStore::default())
    }

    /// A deduplicator whose forest keeps default mode's sketches in files of `dir`, mapped
    /// into memory and unlinked at once ([`SketchStore::in_directory`]): about 800 bytes a
    /// node off the heap. Decisions are the same as [`new`](Self::new)'s.
    ///
    /// ```
    /// use tantivy_dedup::{Article, DedupConfig, Deduplicator};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut dedup = Deduplicator::with_sketches_in(DedupConfig::default(), dir.path())?;
    /// let story = "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，\
    ///              就业形势总体稳定，居民消费价格温和上涨，经济运行持续恢复向好。";
    /// let article = |id: &str, content: String| Article { id: id.into(), content, ..Default::default() };
    /// let first = dedup.add_article(&article("a", story.into()), 0)?;
    /// assert!(dedup.add_article(&article("b", format!("{story}（完）")), 60)?.duplicate);
    /// assert!(dedup.stats().mapped_bytes > 0);
    /// assert_eq!(std::fs::read_dir(dir.path())?.count(), 0); // nothing left in the directory
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_sketches_in(config: DedupConfig, dir: &Path) -> Result<Self> {
        let sketches = SketchStore::in_directory(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Self::with_sketches(config, sketches)
    }

    /// A deduplicator whose forest keeps default mode's sketches in `sketches` (an empty
    /// store, such as [`SketchStore::in_checkpoint_directory`]'s, which a forest checkpoint can
    /// name). Decisions are the same as [`new`](Self::new)'s.
    pub fn with_sketches(config: DedupConfig, sketches: SketchStore) -> Result<Self> {
        config.validate()?;
        let layout = config.layout()?;
        let forest = match config.verifier() {
            None => Forest::with_layout(layout, config.window_seconds())?,
            Some(verifier) => {
                Forest::with_sketches(layout, config.window_seconds(), verifier, sketches)?
            }
        };
        Ok(Deduplicator {
            signer: Signer::new(&config),
            config,
            forest,
            shared: None,
            chrome: SourceChrome::default(),
            added: 0,
        })
    }

    /// A deduplicator whose forest lives in `store`, shared with every other process that
    /// uses it (a Redis Cluster: `SharedForest::connect` of `forest::redis::RedisAddress`, see
    /// docs/scaling.md). The store must have been made for `config`'s `[dedup]` settings.
    pub fn with_store(config: DedupConfig, store: Box<dyn ForestStore + Send>) -> Result<Self> {
        let mut dedup = Deduplicator::new(config)?;
        dedup.shared = Some(Shared::Store(store));
        Ok(dedup)
    }

    /// A deduplicator whose forest lives in the store of `pipeline`'s connections, as
    /// [`with_store`](Self::with_store)'s, and whose [`run`](Self::run) places each batch of
    /// the input with as many inserts in flight as the pipeline has connections (on a Redis
    /// Cluster: `RedisStore::connect_several`), deciding as one insert at a time would
    /// ([`Pipeline`] has the rare exceptions).
    pub fn with_pipeline(config: DedupConfig, pipeline: Pipeline) -> Result<Self> {
        let mut dedup = Deduplicator::new(config)?;
        dedup.shared = Some(Shared::Pipeline(pipeline));
        Ok(dedup)
    }

    /// Whether the forest is shared (else it is the in-memory [`forest`](Self::forest)).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Whether [`place_in_order`](Self::place_in_order) keeps several inserts in flight (a
    /// [pipeline](Self::with_pipeline)).
    pub fn places_in_flight(&self) -> bool {
        matches!(self.shared, Some(Shared::Pipeline(_)))
    }

    /// Node and root counts of the store in use (for a shared store: what this process
    /// settled and swept).
    pub fn stats(&self) -> ForestStats {
        match &self.shared {
            None => self.forest.stats(),
            Some(Shared::Store(store)) => store.stats(),
            Some(Shared::Pipeline(pipeline)) => pipeline.stats(),
        }
    }

    /// The newest event time seen.
    pub fn newest_time(&self) -> Option<Timestamp> {
        match &self.shared {
            None => self.forest.newest_time(),
            Some(Shared::Store(store)) => store.newest_time(),
            Some(Shared::Pipeline(pipeline)) => pipeline.newest_time(),
        }
    }

    /// Takes one document off the count of its node (after a delete).
    pub fn remove_document(&mut self, fingerprint: Fingerprint) -> Result<bool> {
        Ok(match &mut self.shared {
            None => ForestStore::remove_document(&mut self.forest, fingerprint)?,
            Some(Shared::Store(store)) => store.remove_document(fingerprint)?,
            Some(Shared::Pipeline(pipeline)) => pipeline.remove_document(fingerprint)?,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &DedupConfig {
        &self.config
    }

    /// The in-memory forest of clusters (empty when the forest is [shared](Self::is_shared)).
    pub fn forest(&self) -> &Forest {
        &self.forest
    }

    /// The in-memory forest, for callers that rebuild it (the index's recovery).
    pub fn forest_mut(&mut self) -> &mut Forest {
        &mut self.forest
    }

    /// The fingerprint of an article's configured fields, taken together.
    pub fn fingerprint(&self, article: &Article) -> Fingerprint {
        self.signer.sign(article).fingerprint
    }

    /// What the configuration makes of an article for the forest.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Places a signature (a bare fingerprint in seed mode) with event time `time` in the
    /// forest. Fails only on a shared store's error, in which case nothing was acknowledged
    /// and placing it again is safe.
    pub fn place(&mut self, signature: impl Into<Signature>, time: Timestamp) -> Result<Placement> {
        let signature = signature.into();
        match &mut self.shared {
            Some(Shared::Store(store)) => Ok(place(store.as_mut(), &signature, time, new_token())?),
            Some(Shared::Pipeline(pipeline)) => {
                let mut placed = pipeline.place_all(&[(signature, time)])?;
                placed.pop().ok_or_else(|| {
                    Error::Store(crate::forest::StoreError::Inconsistent(
                        "a pipeline placed nothing".into(),
                    ))
                })
            }
            None => Ok(self.forest.try_place(signature, time)?),
        }
    }

    /// Places signatures in order, each with its event time, as [`place`](Self::place) one
    /// after the other would (through a [pipeline](Self::with_pipeline), several in flight):
    /// the placements of the first ones, and the shared store's error that stopped the
    /// others if one did.
    pub fn place_in_order(
        &mut self,
        inserts: &[(Signature, Timestamp)],
    ) -> (Vec<Placement>, Option<Error>) {
        if let Some(Shared::Pipeline(pipeline)) = &mut self.shared {
            let (placed, error) = pipeline.place_in_order(inserts);
            return (placed, error.map(Error::from));
        }
        let mut placed = Vec::with_capacity(inserts.len());
        for (signature, time) in inserts {
            match self.place(signature.clone(), *time) {
                Ok(placement) => placed.push(placement),
                Err(error) => return (placed, Some(error)),
            }
        }
        (placed, None)
    }

    /// Signs and places one article; `arrival` is its time when it has no `published_at`.
    pub fn add_article(&mut self, article: &Article, arrival: Timestamp) -> Result<Decision> {
        let (mut signature, page) = self
            .signer
            .sign_page(&self.signer.parts(article), article.source.as_deref());
        let mark = self.chrome.mark();
        if let Some(page) = page {
            let stripped = self.chrome.strip(page, self.added);
            let source = article.source.as_deref();
            if let Some(without) = self.signer.without_chrome(&signature, stripped, source) {
                signature = without;
            }
        }
        let decision = self.decide(article, signature, arrival);
        self.placed_since(usize::from(decision.is_ok()), &[mark]);
        decision
    }

    /// What it learned of each source's chrome, for a caller that signs pages itself and
    /// places them in order (such as [`DedupWriter`](crate::engine::DedupWriter)).
    pub fn source_chrome_mut(&mut self) -> &mut SourceChrome {
        &mut self.chrome
    }

    /// After placing: the first `placed` of the articles whose pages were shown to the
    /// chrome (`marks[i]` its mark before the i-th) were placed; what the others taught is
    /// taken back, the rest kept.
    fn placed_since(&mut self, placed: usize, marks: &[Mark]) {
        if let Some(&unplaced) = marks.get(placed) {
            self.chrome.forget_since(unplaced);
        }
        self.added += placed as u64;
        self.chrome.settle();
    }

    /// A batch's pages shown to [`SourceChrome`] in order, each at the position it takes if
    /// all before it are placed; those that had some of their source's chrome signed again
    /// without it, in parallel. With the batch, the chrome's mark before each article.
    fn strip_batch(&mut self, batch: Vec<(u64, PagedLine)>) -> (Vec<(u64, SignedLine)>, Vec<Mark>) {
        use rayon::prelude::*;
        let mut marks = Vec::with_capacity(batch.len());
        let mut to_sign = Vec::new();
        let mut batch: Vec<(u64, SignedLine)> = batch
            .into_iter()
            .enumerate()
            .map(|(at, (number, line))| {
                let line = line.map(|(article, mut signature, page)| {
                    let position = self.added + marks.len() as u64;
                    marks.push(self.chrome.mark());
                    if let Some(page) = page {
                        let source = article.source.clone();
                        match self.chrome.strip(page, position) {
                            Stripped::Texts(texts) => to_sign.push((at, texts, source)),
                            stripped => {
                                if let Some(without) = self.signer.without_chrome(
                                    &signature,
                                    stripped,
                                    source.as_deref(),
                                ) {
                                    signature = without;
                                }
                            }
                        }
                    }
                    (article, signature)
                });
                (number, line)
            })
            .collect();
        let signer = &self.signer;
        let signed: Vec<(usize, Signature)> = to_sign
            .into_par_iter()
            .map(|(at, texts, source)| (at, signer.sign_stripped(&texts, source.as_deref())))
            .collect();
        for (at, signature) in signed {
            if let (_, Ok((_, old))) = &mut batch[at] {
                *old = signature;
            }
        }
        (batch, marks)
    }

    fn decide(
        &mut self,
        article: &Article,
        signature: Signature,
        arrival: Timestamp,
    ) -> Result<Decision> {
        let signature = signature.for_document(&article.id);
        let reason = signature.reason;
        let placement = self.place(signature, article.published_at.unwrap_or(arrival))?;
        Ok(Decision::added(article.id.clone(), reason, &placement))
    }

    /// Reads JSON Lines (or a JSON array) from `reader`, each article by `articles`, and calls `report` with each line's number and its
    /// decision or error, in input order, until the input ends or `report` says to stop.
    /// Articles are parsed and fingerprinted in parallel batches and placed in order (through
    /// a [pipeline](Self::with_pipeline), a batch's with several in flight, each reported once
    /// the batch is placed). A bad line costs only itself; a read error is returned after
    /// every line read before it has been reported. A shared store's error stops the run the
    /// same way, after the decisions placed before it in the input's order.
    ///
    /// An article without `published_at` takes the newest event time seen so far (the wall
    /// clock for the first), so a file gives the same decisions whatever day it is run.
    pub fn run(
        &mut self,
        reader: impl BufRead + Send,
        articles: &ArticleReader,
        mut report: impl FnMut(u64, std::result::Result<Decision, ArticleError>) -> ControlFlow<()>,
    ) -> io::Result<()> {
        let signer = self.signer.clone();
        let mut failure = None;
        input::for_each_batch(
            reader,
            articles,
            BATCH_SIZE,
            |record| {
                let (signature, page) = signer.sign_page(
                    &signer.record_parts(&record),
                    record.article.source.as_deref(),
                );
                (record.article, signature, page)
            },
            |batch| {
                let (batch, marks) = self.strip_batch(batch);
                if !self.places_in_flight() {
                    let mut placed = 0;
                    let flow = self.place_one_by_one(batch, &mut report, &mut failure, &mut placed);
                    self.placed_since(placed, &marks);
                    return flow;
                }
                // Each article's event time as placing one after the other gives it: its
                // own, else the newest placed before it.
                let mut newest = self.newest_time();
                let mut inserts = Vec::with_capacity(batch.len());
                let mut lines = Vec::with_capacity(batch.len());
                for (number, parsed) in batch {
                    match parsed {
                        Ok((article, signature)) => {
                            let time = article
                                .published_at
                                .unwrap_or_else(|| newest.unwrap_or_else(now));
                            newest = Some(newest.map_or(time, |newest| newest.max(time)));
                            let signature = signature.for_document(&article.id);
                            lines.push((number, Ok((article.id, signature.reason))));
                            inserts.push((signature, time));
                        }
                        Err(error) => lines.push((number, Err(error))),
                    }
                }
                let (placed, error) = self.place_in_order(&inserts);
                self.placed_since(placed.len(), &marks);
                let mut placed = placed.into_iter();
                for (number, line) in lines {
                    let outcome = match line {
                        Ok((id, reason)) => match placed.next() {
                            Some(placement) => Ok(Decision::added(id, reason, &placement)),
                            // Placed no further: the store's error stops the run here.
                            None => break,
                        },
                        Err(error) => Err(error),
                    };
                    report(number, outcome)?;
                }
                match error {
                    Some(error) => {
                        failure = Some(error);
                        ControlFlow::Break(())
                    }
                    None => ControlFlow::Continue(()),
                }
            },
        )?;
        failure.map_or(Ok(()), |error| Err(io::Error::other(error)))
    }

    /// [`run`](Self::run)'s batch placed and reported one article at a time (a forest in
    /// memory, or one store connection): an article without `published_at` takes the newest
    /// time the store has seen, and placing stops as soon as `report` says so.
    fn place_one_by_one(
        &mut self,
        batch: Vec<(u64, SignedLine)>,
        report: &mut impl FnMut(u64, std::result::Result<Decision, ArticleError>) -> ControlFlow<()>,
        failure: &mut Option<Error>,
        placed: &mut usize,
    ) -> ControlFlow<()> {
        for (number, parsed) in batch {
            let outcome = match parsed {
                Ok((article, signature)) => {
                    let arrival = self.newest_time().unwrap_or_else(now);
                    match self.decide(&article, signature, arrival) {
                        Ok(decision) => {
                            *placed += 1;
                            Ok(decision)
                        }
                        Err(error) => {
                            *failure = Some(error);
                            return ControlFlow::Break(());
                        }
                    }
                }
                Err(error) => Err(error),
            };
            report(number, outcome)?;
        }
        ControlFlow::Continue(())
    }
}

/// A line of [`Deduplicator::run`]'s input, parsed and signed, or why it was not.
type SignedLine = std::result::Result<(Article, Signature), ArticleError>;

/// A [`SignedLine`] with its page's lines, before its source's chrome is taken out.
type PagedLine = std::result::Result<(Article, Signature, Option<PageLines>), ArticleError>;

/// Articles parsed and fingerprinted together, in parallel, before they are placed in order.
pub const BATCH_SIZE: usize = 2048;

/// Makes an article's [`Signature`]: the fingerprint of its configured fields, taken
/// together, and in default mode the [`Sketch`] of the same text. Cheap to clone; signing is a
/// pure function of the article, so it runs on any thread.
///
/// ```
/// use tantivy_dedup::{Article, DedupConfig, Mode};
/// use tantivy_dedup::dedup::Signer;
///
/// let article = Article { id: "1".into(), content: "国务院常务会议今天召开。".into(), ..Default::default() };
/// let default = Signer::new(&DedupConfig::default()).sign(&article);
/// let seed = Signer::new(&DedupConfig { mode: Mode::Seed, ..Default::default() }).sign(&article);
/// assert_eq!(default.fingerprint, seed.fingerprint);
/// assert!(default.sketch.is_some() && seed.sketch.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct Signer {
    fingerprinter: Fingerprinter,
    fields: Vec<String>,
    sketch_capacity: Option<usize>,
    source_chrome: bool,
}

impl Signer {
    /// The signer a configuration asks for.
    pub fn new(config: &DedupConfig) -> Self {
        Signer {
            fingerprinter: config.fingerprinter(),
            fields: config.fields.clone(),
            sketch_capacity: config.sketch_capacity(),
            source_chrome: config.source_chrome && config.mode == crate::Mode::Default,
        }
    }

    /// Whether it gives pages' lines ([`page_lines`](Self::page_lines)): `[dedup]
    /// source_chrome`, in default mode (seed mode signs every text as it is).
    pub fn learns_chrome(&self) -> bool {
        self.source_chrome
    }

    /// The fingerprinter in use.
    pub fn fingerprinter(&self) -> &Fingerprinter {
        &self.fingerprinter
    }

    /// The fingerprinted fields' texts of an article, in the configured order (its built-in
    /// fields: see [`record_parts`](Self::record_parts) for one with fields of one's own).
    pub fn parts<'a>(&self, article: &'a Article) -> Vec<&'a str> {
        self.fields
            .iter()
            .filter_map(|field| article.field_text(field))
            .collect()
    }

    /// The fingerprinted fields' texts of an article with its own fields, in the configured
    /// order (a field of several values gives one part a value).
    pub fn record_parts<'a>(&'a self, record: &'a ArticleRecord) -> Vec<&'a str> {
        self.fields
            .iter()
            .flat_map(|field| record.texts(field))
            .collect()
    }

    /// Signs an article (its `source` is the name of the site whose page it is: see
    /// [`sign_page`](Self::sign_page)).
    pub fn sign(&self, article: &Article) -> Signature {
        self.sign_of(&self.parts(article), article.source.as_deref())
    }

    /// Signs an article with the values of its own fields, which feed the fingerprint when
    /// `[dedup] fields` names them.
    pub fn sign_record(&self, record: &ArticleRecord) -> Signature {
        let source = record.article.source.as_deref();
        self.sign_of(&self.record_parts(record), source)
    }

    /// Signs a text given as parts (the values of the fingerprinted fields, in order; joined
    /// by a line break), as an article's fields are when it has no `source`.
    ///
    /// ```
    /// use tantivy_dedup::{Article, DedupConfig, dedup::Signer};
    ///
    /// let signer = Signer::new(&DedupConfig::default());
    /// let article = Article { id: "1".into(), content: "今天北京天气晴朗。".into(), ..Default::default() };
    /// assert_eq!(signer.sign_texts(&["今天北京天气晴朗。"]), signer.sign(&article));
    /// ```
    pub fn sign_texts(&self, raw: &[&str]) -> Signature {
        self.sign_of(raw, None)
    }

    /// Signs texts of a page of `source` (see [`sign_page`](Self::sign_page)).
    fn sign_of(&self, raw: &[&str], source: Option<&str>) -> Signature {
        let normalized: Vec<String> = raw.iter().map(|part| normalize(part)).collect();
        self.sign_normalized(raw, &normalized, source)
    }

    /// [`sign_texts`](Self::sign_texts) of a page of `source`, whose name's words are no
    /// names of its text (a page names its own site), and when the configuration learns
    /// sources' chrome and the text has a source, the [`PageLines`] of the same texts, for the
    /// [`SourceChrome`] of the ordered stream to strip.
    pub fn sign_page(&self, raw: &[&str], source: Option<&str>) -> (Signature, Option<PageLines>) {
        let normalized: Vec<String> = raw.iter().map(|part| normalize(part)).collect();
        let signature = self.sign_normalized(raw, &normalized, source);
        (signature, self.page_lines(source, normalized))
    }

    /// The lines of a page of `source` whose fingerprinted texts, normalised, are
    /// `normalized`: `None` without a source, or when the configuration does not learn
    /// sources' chrome.
    pub fn page_lines(&self, source: Option<&str>, normalized: Vec<String>) -> Option<PageLines> {
        let source = source.filter(|source| self.source_chrome && !source.is_empty())?;
        Some(PageLines::new(source, normalized))
    }

    /// A page's signature once [`SourceChrome::strip`] read it, when it is not `signature`,
    /// the page's own: its texts without the chrome signed again when it had some (a page of
    /// `source`, as [`sign_page`](Self::sign_page) signs it); when it
    /// is chrome alone, [`Reason::Boilerplate`] with a sketch that only the same page
    /// verifies against (unless its text had no shingle, which keeps it apart already).
    pub fn without_chrome(
        &self,
        signature: &Signature,
        stripped: Stripped,
        source: Option<&str>,
    ) -> Option<Signature> {
        match stripped {
            Stripped::Nothing => None,
            Stripped::Texts(texts) => Some(self.sign_stripped(&texts, source)),
            Stripped::Everything(page) => (!signature.verifies_nothing()).then(|| Signature {
                fingerprint: signature.fingerprint,
                sketch: self.sketch_capacity.map(|_| Sketch::of_whole_text(page)),
                reason: Some(Reason::Boilerplate),
            }),
        }
    }

    /// Signs a page's texts without its source's chrome (normalised, as it read them).
    fn sign_stripped(&self, texts: &[String], source: Option<&str>) -> Signature {
        let raw: Vec<&str> = texts.iter().map(String::as_str).collect();
        // The page may name its site beyond the lines taken out: its names are those the
        // whole page gives.
        self.sign_normalized(&raw, texts, source)
    }

    /// Signs texts already normalised (`normalized[i]` is [`normalize`]`(raw[i])`) of a page
    /// of `source`.
    fn sign_normalized(
        &self,
        raw: &[&str],
        normalized: &[String],
        source: Option<&str>,
    ) -> Signature {
        if self.sketch_capacity.is_none() {
            return Signature {
                fingerprint: self.fingerprinter.fingerprint_normalized(raw, normalized),
                sketch: None,
                reason: None,
            };
        }
        let (fingerprint, names) = self
            .fingerprinter
            .fingerprint_normalized_with_names(raw, normalized, source);
        let (sketch, reason) = self.sketch(normalized.iter().map(String::as_str), &names);
        Signature {
            fingerprint,
            sketch,
            reason,
        }
    }

    /// Signs the fingerprinted fields of an article of `source` (see
    /// [`sign_page`](Self::sign_page)), already analysed (the index's insert path).
    pub fn sign_analyzed(&self, parts: &[&AnalyzedText], source: Option<&str>) -> Signature {
        if self.sketch_capacity.is_none() {
            return Signature {
                fingerprint: self.fingerprinter.fingerprint_analyzed(parts),
                sketch: None,
                reason: None,
            };
        }
        let (fingerprint, names) = self
            .fingerprinter
            .fingerprint_analyzed_with_names(parts, source);
        let (sketch, reason) = self.sketch(parts.iter().map(|part| part.normalized()), &names);
        Signature {
            fingerprint,
            sketch,
            reason,
        }
    }

    /// The sketch of the texts (default mode) with the names they repeat, and why they are
    /// kept apart, if they are: a text with too little of its own gets its
    /// [`degenerate_sketch`].
    fn sketch<'a>(
        &self,
        normalized: impl Iterator<Item = &'a str>,
        names: &Names,
    ) -> (Option<Sketch>, Option<Reason>) {
        let Some(capacity) = self.sketch_capacity else {
            return (None, None);
        };
        let texts: Vec<&str> = normalized.collect();
        match degenerate_sketch(&texts) {
            Some(sketch) => (Some(sketch), Some(Reason::Degenerate)),
            None => (Some(Sketch::of(&texts, capacity).with_names(names)), None),
        }
    }
}

/// The wall-clock time in Unix seconds: the arrival time of a document without `published_at`.
pub fn now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as Timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_read_before_a_read_error_are_still_decided() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        for i in 0..100 {
            writeln!(
                encoder,
                r#"{{"id": "{i}", "content": "第{i}条消息正文内容"}}"#
            )
            .unwrap();
        }
        let mut packed = encoder.finish().unwrap();
        packed.truncate(packed.len() - 20);
        let reader = crate::input::decompressing(std::io::Cursor::new(packed)).unwrap();
        let mut dedup = Deduplicator::new(DedupConfig::default()).unwrap();
        let mut decided = 0;
        let result = dedup.run(reader, &ArticleReader::default(), |_, decision| {
            decided += usize::from(decision.is_ok());
            ControlFlow::Continue(())
        });
        assert!(result.is_err(), "a truncated stream is an error");
        assert!(
            decided > 90,
            "only {decided} of the lines before the damage were decided"
        );
    }
}
