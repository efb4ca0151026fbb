//! [`DedupSearcher`]: list pages (collapsed search), detail pages (the rest of a cluster),
//! near-duplicate checks and statistics, over what the writer committed.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tantivy::collector::{Count, DocSetCollector};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, EnableScoring, Occur, Query, QueryParser,
    QueryParserError, RangeQuery, TermQuery,
};
use tantivy::query_grammar::{self, UserInputAst, UserInputLeaf};
use tantivy::schema::{Field, IndexRecordOption, Schema, Value};
use tantivy::{
    DateTime, DocAddress, Index, IndexReader, ReloadPolicy, Score, SegmentOrdinal, TantivyDocument,
    Term,
};

use crate::article::Article;
use crate::config::Config;
use crate::dedup::Signer;
use crate::engine::answers::{
    ClusterHit, DocumentView, IndexStats, NearDuplicate, NearDuplicates, SearchPage, SimilarPage,
    StoryTrend,
};
use crate::engine::collapse::{
    ClusterNumbering, ClusterOrdinals, CollapseCollector, CollapsedCluster, ListOrder, NO_CLUSTER,
    Sort,
};
use crate::engine::cursor::Cursor;
use crate::engine::deadline::DeadlineCollector;
use crate::engine::directory::{self, CommitFiles, index_error, open_tantivy, stored_settings};
use crate::engine::facets::{DEFAULT_FACET_LIMIT, Dimension, FacetCollector};
use crate::engine::filter::Filter;
use crate::engine::histogram::{HistogramWidth, Interval, TimeSpan};
use crate::engine::schema::{self, NewsFields, fast_value};
use crate::engine::shards::{self, PageShape, ShardCount, ShardPage, TermStatistics};
use crate::engine::snapshot::{Snapshot, Snapshots, snapshot_id};
use crate::engine::snippet::{
    DEFAULT_FRAGMENT_CHARS, DEFAULT_FRAGMENTS, FRAGMENT_CHARS, FieldText, Highlighter,
    MAX_FRAGMENTS, Marks,
};
use crate::engine::sort_field::SortField;
use crate::engine::trend::{StoryTrends, TrendSpan, TrendWindow};
use crate::forest::Timestamp;
use crate::index::BlockLayout;
use crate::local_time::TimeZone;
use crate::text::AnalyzedText;
use crate::verify::{Sketch, Verifier};
use crate::{Error, Fingerprint, Result};

/// The most results one page may ask for.
pub const MAX_PAGE_SIZE: usize = 1000;

/// The most members a list page lists per story ([`SearchRequest::members`]).
pub const MAX_MEMBERS: usize = 100;

/// The results of a page that does not say how many: the same for list and detail pages, on
/// the command line and over HTTP, so that the two show the same page.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// The deepest page a list page may start at: the collapse keeps `offset + limit` clusters in
/// memory, so deep paging is bounded (as in Elasticsearch's result window).
pub const MAX_OFFSET: usize = 10_000;

/// Checks a page's `limit` against [`MAX_PAGE_SIZE`].
pub(crate) fn check_limit(limit: usize) -> Result<()> {
    if limit > MAX_PAGE_SIZE {
        return Err(Error::Query(format!(
            "limit must be at most {MAX_PAGE_SIZE}, got {limit}"
        )));
    }
    Ok(())
}

/// Checks a page of a list that is ranked before it is cut: its `limit`, and its `offset`
/// against [`MAX_OFFSET`].
pub(crate) fn check_page(offset: usize, limit: usize) -> Result<()> {
    check_limit(limit)?;
    if offset > MAX_OFFSET {
        return Err(Error::Query(format!(
            "offset must be at most {MAX_OFFSET}, got {offset}; walk deeper with a cursor \
             (cursor=*, then each page's next_cursor) or narrow the query"
        )));
    }
    Ok(())
}

/// The most values a facet may list ([`SearchRequest::facet_limit`]).
pub const MAX_FACET_LIMIT: usize = 1000;

/// Refuses a list page over the limits: its page, its facets' values, its members; and a
/// cursor with an offset or of another list.
fn check_request(request: &SearchRequest) -> Result<()> {
    check_page(request.offset, request.limit)?;
    if let Some(cursor) = &request.cursor {
        if request.offset > 0 {
            return Err(Error::Query(
                "a page with a cursor starts right after the cursor: offset must be 0 (or \
                 absent)"
                    .to_owned(),
            ));
        }
        if request.limit == 0 {
            return Err(Error::Query(
                "a page with a cursor needs a limit of 1 or more: its next cursor is after \
                 its last story"
                    .to_owned(),
            ));
        }
        cursor.check_list(request.list_digest())?;
    }
    match (request.sort.descending_field(), &request.sort_field) {
        (Some(_), None) => {
            return Err(Error::Query(
                "an order by a field needs the field: FIELD:desc or FIELD:asc".to_owned(),
            ));
        }
        (None, Some(field)) => {
            return Err(Error::Query(format!(
                "a sort field ({field:?}) goes with an order by a field (FIELD:desc or \
                 FIELD:asc), not with {}",
                ListOrder::from(request.sort)
            )));
        }
        _ => {}
    }
    if request.facet_limit > MAX_FACET_LIMIT {
        return Err(Error::Query(format!(
            "facet_limit must be at most {MAX_FACET_LIMIT}, got {}",
            request.facet_limit
        )));
    }
    if request.highlight_fragments > MAX_FRAGMENTS {
        return Err(Error::Query(format!(
            "highlight_fragments must be 0 (the snippet alone) to {MAX_FRAGMENTS}, got {}",
            request.highlight_fragments
        )));
    }
    if !FRAGMENT_CHARS.contains(&request.highlight_chars) {
        return Err(Error::Query(format!(
            "highlight_chars must be {} to {} characters, got {}",
            FRAGMENT_CHARS.start(),
            FRAGMENT_CHARS.end(),
            request.highlight_chars
        )));
    }
    if request.members > MAX_MEMBERS {
        return Err(Error::Query(format!(
            "members must be at most {MAX_MEMBERS}, got {}; the story page lists them all",
            request.members
        )));
    }
    Ok(())
}

/// A list-page request: a keyword query, filters, an order, a page of clusters, and what to
/// count over all the matches.
///
/// ```
/// use tantivy_dedup::engine::{SearchRequest, Sort};
///
/// let request = SearchRequest::new("防汛")
///     .sort(Sort::SimilarDesc)
///     .page(0, 20)
///     .source("新华网")
///     .filter("published_at:[2024-05-01 TO *]".parse()?)
///     .exclude("广告")
///     .fields(["title"])
///     .min_cluster_size(2)
///     .facets(["source"])
///     .histogram("1d".parse()?)
///     .highlight(true);
/// assert_eq!(request.limit, 20);
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// Keywords in Tantivy's query syntax over the text fields; all words must match. Empty:
    /// every document.
    pub query: String,
    /// The order of clusters.
    pub sort: Sort,
    /// The field that [`Sort::FieldDesc`] and [`Sort::FieldAsc`] order by (a number, date or
    /// boolean field of one's own: [`SortField::find`]); `None` in the other orders.
    pub sort_field: Option<String>,
    /// Clusters to skip.
    pub offset: usize,
    /// Clusters to return (at most [`MAX_PAGE_SIZE`]).
    pub limit: usize,
    /// Only documents published at or after this time (Unix seconds).
    pub from: Option<Timestamp>,
    /// Only documents published at or before this time (Unix seconds).
    pub to: Option<Timestamp>,
    /// Only documents from this source.
    pub source: Option<String>,
    /// Only documents every one of these filters keeps (on declared non-text fields).
    pub filters: Vec<Filter>,
    /// Words none of the matching documents may contain, in any text field.
    pub exclude: Vec<String>,
    /// The text fields the keywords search (names); empty: every indexed text field.
    pub fields: Vec<String>,
    /// Only clusters of at least this many indexed documents (0 or 1: every cluster).
    pub min_cluster_size: u64,
    /// Fields whose values are counted over all matching documents ([`SearchPage::facets`]).
    pub facets: Vec<String>,
    /// How many values each facet lists, most articles first (at most [`MAX_FACET_LIMIT`]).
    pub facet_limit: usize,
    /// The width of the buckets of [`SearchPage::histogram`]; `None`: no histogram.
    pub histogram: Option<HistogramWidth>,
    /// Whether each representative (and member) gets a [`DocumentView::snippet`] and its
    /// [`DocumentView::highlights`].
    pub highlight: bool,
    /// How many fragments each field's highlights have, at most (0, no highlights but the
    /// snippet, to [`MAX_FRAGMENTS`]; default [`DEFAULT_FRAGMENTS`]).
    pub highlight_fragments: usize,
    /// About how many characters a fragment shows ([`FRAGMENT_CHARS`], default
    /// [`DEFAULT_FRAGMENT_CHARS`]).
    pub highlight_chars: usize,
    /// The length of the trend window that [`Sort::Trending`], [`Sort::Hot`] and
    /// [`min_recent`](Self::min_recent) read (default 6 hours).
    pub trend: TrendSpan,
    /// When the trend window ends (Unix seconds, inclusive); `None`: when the search runs.
    pub trend_end: Option<Timestamp>,
    /// Only stories with at least this many articles (matching or not) that joined within
    /// the trend window; 0: every story.
    pub min_recent: u64,
    /// How many of each story's other matching documents the page lists with it
    /// ([`ClusterHit::members`]; at most [`MAX_MEMBERS`]); 0: none.
    pub members: usize,
    /// A walk through the list's stories past [`MAX_OFFSET`] ([`Cursor`]): the start
    /// ([`Cursor::start`]) or the [`SearchPage::next_cursor`] of the page before. `None`: the
    /// page at [`offset`](Self::offset) of the index as it is now.
    pub cursor: Option<Cursor>,
    /// When the search must be over: past it, it stops and answers
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded), never a partial page.
    /// `None`: no limit.
    pub deadline: Option<Instant>,
}

impl Default for SearchRequest {
    fn default() -> Self {
        SearchRequest {
            query: String::new(),
            sort: Sort::Relevance,
            sort_field: None,
            offset: 0,
            limit: DEFAULT_PAGE_SIZE,
            from: None,
            to: None,
            source: None,
            filters: Vec::new(),
            exclude: Vec::new(),
            fields: Vec::new(),
            min_cluster_size: 0,
            facets: Vec::new(),
            facet_limit: DEFAULT_FACET_LIMIT,
            histogram: None,
            highlight: false,
            highlight_fragments: DEFAULT_FRAGMENTS,
            highlight_chars: DEFAULT_FRAGMENT_CHARS,
            trend: TrendSpan::default(),
            trend_end: None,
            min_recent: 0,
            members: 0,
            cursor: None,
            deadline: None,
        }
    }
}

impl SearchRequest {
    /// A request for `query`, first page of 20, by relevance.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("防汛").limit, 20);
    /// ```
    pub fn new(query: impl Into<String>) -> Self {
        SearchRequest {
            query: query.into(),
            ..Default::default()
        }
    }

    /// Sets the order.
    ///
    /// ```
    /// use tantivy_dedup::engine::{SearchRequest, Sort};
    ///
    /// assert_eq!(SearchRequest::new("").sort(Sort::Newest).sort, Sort::Newest);
    /// ```
    pub fn sort(mut self, sort: Sort) -> Self {
        self.sort = sort;
        if sort.descending_field().is_none() {
            self.sort_field = None;
        }
        self
    }

    /// Sets the order as written ([`ListOrder`]): one of [`Sort::ALL`], or a field of one's
    /// own with its direction.
    ///
    /// ```
    /// use tantivy_dedup::engine::{SearchRequest, Sort};
    ///
    /// let request = SearchRequest::new("").order("likes:desc".parse()?);
    /// assert_eq!((request.sort, request.sort_field.as_deref()), (Sort::FieldDesc, Some("likes")));
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn order(mut self, order: ListOrder) -> Self {
        self.sort = order.sort;
        self.sort_field = order.field;
        self
    }

    /// Sets the page.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").page(40, 20).offset, 40);
    /// ```
    pub fn page(mut self, offset: usize, limit: usize) -> Self {
        self.offset = offset;
        self.limit = limit;
        self
    }

    /// Keeps documents published in `from..=to` (either end may be open).
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").published(Some(1), None).from, Some(1));
    /// ```
    pub fn published(mut self, from: Option<Timestamp>, to: Option<Timestamp>) -> Self {
        self.from = from;
        self.to = to;
        self
    }

    /// Keeps documents from one source.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").source("新华网").source.as_deref(), Some("新华网"));
    /// ```
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Adds a filter; a document must pass every filter.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// let request = SearchRequest::new("").filter("source:新华网".parse()?);
    /// assert_eq!(request.filters[0].field(), "source");
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filters.push(filter);
        self
    }

    /// Leaves out documents that contain `word` in any text field (a word of several jieba
    /// words is looked for as a phrase).
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").exclude("广告").exclude, ["广告"]);
    /// ```
    pub fn exclude(mut self, word: impl Into<String>) -> Self {
        self.exclude.push(word.into());
        self
    }

    /// The text fields the keywords search (all indexed text fields when none are given).
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("防汛").fields(["title"]).fields, ["title"]);
    /// ```
    pub fn fields<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.fields = names.into_iter().map(Into::into).collect();
        self
    }

    /// Keeps only clusters of at least `size` indexed documents. The totals then count only
    /// those clusters and their matching documents, and so do facets and the histogram.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").min_cluster_size(3).min_cluster_size, 3);
    /// ```
    pub fn min_cluster_size(mut self, size: u64) -> Self {
        self.min_cluster_size = size;
        self
    }

    /// Counts the values of these fields (declared, not text, fast) over all matching
    /// documents.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").facets(["source"]).facets, ["source"]);
    /// ```
    pub fn facets<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.facets = names.into_iter().map(Into::into).collect();
        self
    }

    /// How many values each facet lists (20 unless set).
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("").facet_limit(5).facet_limit, 5);
    /// ```
    pub fn facet_limit(mut self, limit: usize) -> Self {
        self.facet_limit = limit;
        self
    }

    /// Adds a histogram of the matching documents' publication times by buckets of `width`
    /// (an [`Interval`], or [`HistogramWidth::Auto`]).
    ///
    /// ```
    /// use tantivy_dedup::engine::{HistogramWidth, Interval, SearchRequest};
    ///
    /// let request = SearchRequest::new("").histogram("1h".parse()?);
    /// assert_eq!(request.histogram, Some(HistogramWidth::Fixed(Interval::HOUR)));
    /// let request = SearchRequest::new("").histogram(HistogramWidth::Auto);
    /// assert_eq!(request.histogram, Some(HistogramWidth::Auto));
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn histogram(mut self, width: HistogramWidth) -> Self {
        self.histogram = Some(width);
        self
    }

    /// Whether representatives and members get a snippet and highlights.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert!(SearchRequest::new("").highlight(true).highlight);
    /// ```
    pub fn highlight(mut self, highlight: bool) -> Self {
        self.highlight = highlight;
        self
    }

    /// Highlights with at most `count` fragments a field, each of about `chars` characters
    /// (Elasticsearch's `number_of_fragments` and `fragment_size`), and turns highlighting on.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// let request = SearchRequest::new("防汛").highlight_fragments(5, 60);
    /// assert_eq!((request.highlight, request.highlight_fragments, request.highlight_chars), (true, 5, 60));
    /// ```
    pub fn highlight_fragments(mut self, count: usize, chars: usize) -> Self {
        self.highlight = true;
        self.highlight_fragments = count;
        self.highlight_chars = chars;
        self
    }

    /// Sets the trend window: `span` long, ending at `end` (Unix seconds; `None`: when the
    /// search runs).
    ///
    /// ```
    /// use tantivy_dedup::engine::{SearchRequest, Sort};
    ///
    /// let request = SearchRequest::new("").sort(Sort::Trending).trend("1h".parse()?, Some(1_700_000_000));
    /// assert_eq!(request.trend_window().recent(), 1_699_996_401..=1_700_000_000);
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn trend(mut self, span: TrendSpan, end: Option<Timestamp>) -> Self {
        self.trend = span;
        self.trend_end = end;
        self
    }

    /// Keeps only stories with at least `articles` that joined within the trend window (what
    /// `GET /v1/trending` sets to 1).
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert!(SearchRequest::new("").min_recent(1).reads_trends());
    /// assert!(!SearchRequest::new("").reads_trends());
    /// ```
    pub fn min_recent(mut self, articles: u64) -> Self {
        self.min_recent = articles;
        self
    }

    /// Lists up to `count` of each story's other matching documents with it, best first in
    /// the page's order ([`ClusterHit::members`]): the best scores (then the earliest), for
    /// [`Sort::Newest`] the newest, for [`Sort::Oldest`] the oldest. What Elasticsearch's `inner_hits` and Solr's
    /// `group.limit` give: a list page in one call.
    ///
    /// ```
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// assert_eq!(SearchRequest::new("防汛").members(3).members, 3);
    /// ```
    pub fn members(mut self, count: usize) -> Self {
        self.members = count;
        self
    }

    /// Walks the list with a cursor: [`Cursor::start`] for the first page, then each page's
    /// [`SearchPage::next_cursor`] until it is `None`. Each story comes once, as the list was
    /// when the walk started, whatever arrives or leaves in between.
    ///
    /// ```
    /// use tantivy_dedup::engine::{Cursor, DedupIndex, SearchRequest, Sort};
    /// use tantivy_dedup::{Article, config::Config};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut index = DedupIndex::create(dir.path(), Config::default())?;
    /// let stories = ["央行宣布下调存款准备金率零点五个百分点。", "南方多地持续强降雨，防汛应急响应提升至三级。",
    ///                "国产大飞机完成首次商业载客飞行，旅客顺利抵达。"];
    /// for (id, text) in stories.iter().enumerate() {
    ///     index.add_article(Article { id: id.to_string(), content: text.to_string(), ..Default::default() })?;
    /// }
    /// index.commit()?;
    /// let searcher = index.searcher();
    /// let mut request = SearchRequest::new("").sort(Sort::SimilarDesc).page(0, 2).cursor(Cursor::start());
    /// let first = searcher.search(&request)?;
    /// // A story that arrives now is not in this walk.
    /// index.add_article(Article { id: "9".into(), content: "新的一天，新的新闻，与前面的都不一样。".into(), ..Default::default() })?;
    /// index.commit()?;
    /// request.cursor = Some(first.next_cursor.unwrap().parse()?);
    /// let second = searcher.search(&request)?;
    /// assert_eq!((first.clusters.len(), second.clusters.len()), (2, 1));
    /// assert_eq!(second.next_cursor, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cursor(mut self, cursor: Cursor) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// A digest of what makes the list: its query, order, filters and the rest, but not how
    /// much of it a page shows (limit, facets, histogram, highlights, members) nor the end of
    /// its trend window, which a walk fixes when it starts. A [`Cursor`] keeps it, so that it
    /// is refused by another list.
    pub fn list_digest(&self) -> u64 {
        let definition = format!(
            "{:?}",
            (
                &self.query,
                self.sort,
                (self.from, self.to, &self.source),
                (&self.filters, &self.exclude, &self.fields),
                (self.min_cluster_size, self.trend, self.min_recent),
            )
        );
        // The field only when there is one, so that the lists before it had their digests.
        let definition = match &self.sort_field {
            Some(field) => format!("{definition} by {field:?}"),
            None => definition,
        };
        xxhash_rust::xxh3::xxh3_64(definition.as_bytes())
    }

    /// Whether the page counts the trend window's figures: its order reads them or it keeps
    /// only stories with recent articles.
    pub fn reads_trends(&self) -> bool {
        self.sort.reads_trends() || self.min_recent > 0
    }

    /// The trend window, ending at [`trend_end`](Self::trend_end) or now.
    pub fn trend_window(&self) -> TrendWindow {
        self.trend
            .ending_at(self.trend_end.unwrap_or_else(crate::dedup::now))
    }

    /// This request with the end of its trend window fixed: to the one its walk started with
    /// when it continues a cursor's, else to `now` when it had none, so that every part of one
    /// page (the shards of a coordinator, the figures and the answer's `trend_end`) and every
    /// page of a walk count the same window.
    pub fn fix_trend_end(mut self, now: Timestamp) -> SearchRequest {
        if let Some(cursor) = self.cursor.as_ref().filter(|cursor| cursor.is_pinned()) {
            self.trend_end = cursor.trend_end();
        } else if self.reads_trends() && self.trend_end.is_none() {
            self.trend_end = Some(now);
        }
        self
    }

    /// Stops the search at `deadline` ([`DeadlineCollector`]): a search still collecting
    /// then answers [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded). What a
    /// server sets from `[server] read_timeout`, so that a heavy page gives its core back.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tantivy_dedup::engine::SearchRequest;
    ///
    /// let at = Instant::now() + Duration::from_secs(10);
    /// assert_eq!(SearchRequest::new("").deadline(at).deadline, Some(at));
    /// ```
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// This request with an `auto` histogram width fixed for documents published over `span`
    /// ([`HistogramWidth::resolve`], the span clipped to `from`..`to`); any other width kept.
    ///
    /// ```
    /// use tantivy_dedup::engine::{HistogramWidth, SearchRequest, TimeSpan};
    /// use tantivy_dedup::local_time::TimeZone;
    ///
    /// let years = TimeSpan::new(0, 10 * 365 * 86_400);
    /// let request = SearchRequest::new("").histogram(HistogramWidth::Auto);
    /// let fixed = request.fix_histogram(Some(years), TimeZone::UTC);
    /// assert_eq!(fixed.shape().histogram.map(|width| width.seconds()), Some(30 * 86_400));
    /// ```
    pub fn fix_histogram(mut self, span: Option<TimeSpan>, zone: TimeZone) -> SearchRequest {
        if let Some(width @ HistogramWidth::Auto) = self.histogram {
            let span = span.and_then(|span| span.clip(self.from, self.to));
            self.histogram = Some(HistogramWidth::Fixed(width.resolve(span, zone)));
        }
        self
    }

    /// How the request's page is cut and counted. Its histogram's width is fixed first
    /// ([`SearchRequest::fix_histogram`]): an `auto` width has no buckets yet, so its shape has
    /// no histogram.
    pub fn shape(&self) -> PageShape {
        PageShape {
            sort: self.sort,
            offset: self.offset,
            limit: self.limit,
            facet_limit: self.facet_limit,
            histogram: match self.histogram {
                Some(HistogramWidth::Fixed(interval)) => Some(interval),
                Some(HistogramWidth::Auto) | None => None,
            },
            trend: self.reads_trends().then(|| self.trend_window()),
        }
    }
}

/// What [`DedupSearcher::page_details`] reads of a page's stories' members, besides their
/// sources.
struct MemberReads<'a> {
    /// The page's query (with its conditions).
    query: &'a dyn Query,
    /// How it scores: enabled (with the page's statistics) when members are listed.
    scoring: EnableScoring<'a>,
    /// Whether the newest and oldest matching members' times are read (an order that tracked
    /// them while collecting has them already).
    times: bool,
    /// How many matching members other than the representative are listed.
    members: usize,
    /// The order they are listed in.
    member_order: MemberOrder,
    /// The trend window, when the page reads it: its members' distinct sources are counted.
    recent: Option<std::ops::RangeInclusive<Timestamp>>,
}

/// The order of a story's members on a list page: the page's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberOrder {
    /// The best score first, then the earliest (as a representative is chosen).
    Best,
    /// The newest first.
    Newest,
    /// The oldest first.
    Oldest,
}

impl MemberOrder {
    fn of(sort: Sort) -> Self {
        match sort {
            Sort::Newest => MemberOrder::Newest,
            Sort::Oldest => MemberOrder::Oldest,
            _ => MemberOrder::Best,
        }
    }
}

/// What [`DedupSearcher::page_details`] reads of one story of a page from its members.
struct PageDetails {
    /// Its sources, most articles first.
    sources: Vec<String>,
    /// The oldest and newest event times of its members that match the page's query, when
    /// read.
    times: Option<(Timestamp, Timestamp)>,
    /// The distinct sources of its members within the trend window, when asked.
    recent_outlets: u64,
    /// Its best matching members but the representative, in order, when asked.
    members: Vec<DocAddress>,
}

/// The names in a list parameter (`fields`, `facets`, `exclude`): separated by commas or white
/// space, empty ones left out.
///
/// ```
/// use tantivy_dedup::engine::list_items;
///
/// assert_eq!(list_items(" source, region ,,tag ").collect::<Vec<_>>(), ["source", "region", "tag"]);
/// ```
pub fn list_items(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|item| !item.is_empty())
}

/// What a view of a document carries besides its fields.
#[derive(Clone, Copy)]
pub(super) enum Extra<'a> {
    /// Nothing: list pages and checks.
    None,
    /// The stored body: document and detail pages.
    Content,
    /// A snippet by these words: list pages asked to highlight.
    Snippet(&'a Highlighter),
}

struct Shared {
    path: PathBuf,
    reader: IndexReader,
    fields: NewsFields,
    config: Config,
    layout: BlockLayout,
    signer: Signer,
    /// Default mode's rule for the check before publishing; `None` in seed mode.
    verifier: Option<Verifier>,
    parser: QueryParser,
    /// The cluster numbers, brought up to each searcher generation collapsed.
    ordinals: Mutex<ClusterNumbering>,
    /// The snapshots that cursors walk.
    snapshots: Snapshots,
}

/// Searches a news index: collapsed list pages, detail pages, near-duplicate checks.
///
/// A `DedupSearcher` sees what was committed when its reader was last reloaded (the writer
/// reloads it on every commit; a read-only searcher from [`DedupSearcher::open`] reloads
/// shortly after commits by other processes). Cloning is cheap and clones share caches.
///
/// ```
/// use tantivy_dedup::engine::{DedupIndex, SearchRequest, Sort};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let flood = "南方多地持续强降雨，防汛应急响应提升至三级，各地转移安置受灾群众，抢修受损道路。";
/// for (id, source) in [("1", "新华网"), ("2", "人民网"), ("3", "央视网")] {
///     let article = Article { id: id.into(), source: Some(source.into()), content: flood.into(), ..Default::default() };
///     index.add_article(article)?;
/// }
/// index.add_article(Article { id: "4".into(), content: "防汛物资储备充足，仓库管理规范有序。".into(), ..Default::default() })?;
/// index.commit()?;
///
/// let page = index.searcher().search(&SearchRequest::new("防汛").sort(Sort::SimilarDesc))?;
/// assert_eq!((page.total_hits, page.total_clusters), (4, 2));
/// assert_eq!(page.clusters[0].cluster_size, 3);
/// assert_eq!(page.clusters[0].sources.len(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct DedupSearcher {
    shared: Arc<Shared>,
}

impl DedupSearcher {
    pub(crate) fn new(
        path: PathBuf,
        index: Index,
        reader: IndexReader,
        fields: NewsFields,
        config: Config,
    ) -> Self {
        let layout = BlockLayout::new(config.dedup.max_distance)
            .unwrap_or_else(|_| unreachable!("validated when the index was opened"));
        let signer = Signer::new(&config.dedup);
        let verifier = config.dedup.verifier();
        let mut parser = QueryParser::for_index(&index, fields.searchable.clone());
        parser.set_conjunction_by_default();
        DedupSearcher {
            shared: Arc::new(Shared {
                path,
                reader,
                fields,
                config,
                layout,
                signer,
                verifier,
                parser,
                ordinals: Mutex::default(),
                snapshots: Snapshots::default(),
            }),
        }
    }

    /// Opens the index in `dir` for reading only (no writer lock is taken, so this works
    /// while another process writes). A missing or cut file of the last commit is refused
    /// ([`Error::Damaged`]), as the writer's open refuses it.
    pub fn open(dir: &Path) -> Result<Self> {
        let config = stored_settings(dir)?;
        let (index, fields) = open_tantivy(dir, &config)?;
        directory::check_files(dir, &index)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()
            .map_err(|source| index_error(dir, source))?;
        Ok(Self::new(dir.to_owned(), index, reader, fields, config))
    }

    /// The files of the index's last commit, kept on disk while the answer is held: to copy
    /// the index while it is written ([`CommitFiles`]).
    pub fn commit_files(&self) -> Result<CommitFiles> {
        CommitFiles::of(&self.shared.path, self.shared.reader.searcher().index())
    }

    /// The settings of the index.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Tantivy's searcher over the current commit, for queries of your own.
    pub fn tantivy_searcher(&self) -> tantivy::Searcher {
        self.shared.reader.searcher()
    }

    /// The field handles.
    pub fn fields(&self) -> &NewsFields {
        &self.shared.fields
    }

    pub(super) fn error(&self) -> impl Fn(tantivy::TantivyError) -> Error + '_ {
        |source| index_error(&self.shared.path, source)
    }

    /// The Tantivy query a request runs: the keywords (all of them must match), with the
    /// filters added as conditions that do not change scores, and the excluded words as
    /// conditions that must not match.
    pub fn query(&self, request: &SearchRequest) -> Result<Box<dyn Query>> {
        let keywords = self.keywords(request)?;
        self.with_conditions(keywords, request)
    }

    /// The keywords' query, over the request's text fields.
    pub(super) fn keywords(&self, request: &SearchRequest) -> Result<Box<dyn Query>> {
        let fields = &self.shared.fields;
        // Checked even without keywords, so that a bad name is reported whatever the query.
        let searcher = self.tantivy_searcher();
        let schema = searcher.schema();
        let chosen = request
            .fields
            .iter()
            .map(|name| self.text_field(schema, name, "`fields`"))
            .collect::<Result<Vec<_>>>()?;
        if request.query.trim().is_empty() {
            return Ok(Box::new(AllQuery));
        }
        if fields.searchable.is_empty() {
            return Err(Error::Query(
                "no text field is indexed, so keywords cannot be searched".to_owned(),
            ));
        }
        let invalid =
            |error: QueryParserError| Error::Query(format!("{error} in {:?}", request.query));
        let parsed = query_grammar::parse_query(&request.query)
            .map_err(|_| invalid(QueryParserError::SyntaxError(request.query.clone())))?;
        self.check_named_fields(schema, &parsed)?;
        let narrowed;
        let parser = if chosen.is_empty() {
            &self.shared.parser
        } else {
            narrowed = {
                let mut parser = QueryParser::for_index(searcher.index(), chosen);
                parser.set_conjunction_by_default();
                parser
            };
            &narrowed
        };
        parser
            .build_query_from_user_input_ast(parsed)
            .map_err(invalid)
    }

    /// Refuses a query that names a field keywords may not search. Tantivy's parser takes any
    /// indexed field of the schema, the internal ones too (`_seq`, `root`, `block0`), which
    /// would let `q` read what `filter` refuses; and `field:*` (any value) needs a fast field,
    /// which no text field is, so Tantivy fails on it only when the search runs.
    fn check_named_fields(&self, schema: &Schema, query: &UserInputAst) -> Result<()> {
        let leaf = match query {
            UserInputAst::Clause(clauses) => {
                return clauses
                    .iter()
                    .try_for_each(|(_, clause)| self.check_named_fields(schema, clause));
            }
            UserInputAst::Boost(query, _) => return self.check_named_fields(schema, query),
            UserInputAst::Leaf(leaf) => leaf.as_ref(),
        };
        let named = match leaf {
            UserInputLeaf::All => None,
            UserInputLeaf::Literal(literal) => literal.field_name.as_deref(),
            UserInputLeaf::Range { field, .. }
            | UserInputLeaf::Set { field, .. }
            | UserInputLeaf::Regex { field, .. } => field.as_deref(),
            UserInputLeaf::Exists { field } => {
                return Err(Error::Query(format!(
                    "`q` cannot search `{field}:*` (any value of `{field}`): it searches \
                     words of the text fields, here {}",
                    self.searchable_names(schema)
                )));
            }
        };
        match named {
            Some(name) => self.text_field(schema, name, "`q`").map(|_| ()),
            None => Ok(()),
        }
    }

    /// The indexed text field called `name`, or an error saying that `parameter` takes only
    /// those, naming them.
    fn text_field(&self, schema: &Schema, name: &str, parameter: &str) -> Result<Field> {
        schema
            .get_field(name)
            .ok()
            .filter(|field| self.shared.fields.searchable.contains(field))
            .ok_or_else(|| {
                Error::Query(format!(
                    "{parameter} cannot search `{name}`: keywords search the indexed text \
                     fields, here {}",
                    self.searchable_names(schema)
                ))
            })
    }

    /// The names of the fields keywords search, for error messages.
    fn searchable_names(&self, schema: &Schema) -> String {
        let names: Vec<&str> = self
            .shared
            .fields
            .searchable
            .iter()
            .map(|&field| schema.get_field_name(field))
            .collect();
        names.join(", ")
    }

    /// `keywords` with the request's filters (score-free) and excluded words.
    fn with_conditions(
        &self,
        keywords: Box<dyn Query>,
        request: &SearchRequest,
    ) -> Result<Box<dyn Query>> {
        let fields = &self.shared.fields;
        let mut clauses = vec![(Occur::Must, keywords)];
        if request.from.is_some() || request.to.is_some() {
            if let (Some(from), Some(to)) = (request.from, request.to)
                && from > to
            {
                return Err(Error::Query(format!(
                    "the time range is empty: from ({from}) is after to ({to})"
                )));
            }
            let bound = |time: Option<Timestamp>| {
                time.map_or(Bound::Unbounded, |time| {
                    Bound::Included(Term::from_field_date(
                        fields.published_at,
                        DateTime::from_timestamp_secs(time),
                    ))
                })
            };
            let range = RangeQuery::new(bound(request.from), bound(request.to));
            clauses.push((Occur::Must, filter(range)));
        }
        if let Some(source) = &request.source {
            if !fields.source_indexed {
                return Err(Error::Query(
                    "the source filter needs `indexed = true` under [fields.source]".to_owned(),
                ));
            }
            let term = TermQuery::new(
                Term::from_field_text(fields.source, source),
                IndexRecordOption::Basic,
            );
            clauses.push((Occur::Must, filter(term)));
        }
        if !request.filters.is_empty() {
            let schema = self.tantivy_searcher().schema().clone();
            let zone = self.shared.config.index.time_zone;
            for condition in &request.filters {
                clauses.push((Occur::Must, filter(condition.query(&schema, zone)?)));
            }
        }
        for word in request
            .exclude
            .iter()
            .filter(|word| !word.trim().is_empty())
        {
            if fields.searchable.is_empty() {
                return Err(Error::Query(
                    "no text field is indexed, so no word can be excluded".to_owned(),
                ));
            }
            // Quoted, so that the word is text, not query syntax (a word of several jieba
            // words is then a phrase); quotes and backslashes in it could end the quote.
            let quoted = format!("\"{}\"", word.replace(['"', '\\'], " "));
            let excluded = self
                .shared
                .parser
                .parse_query(&quoted)
                .map_err(|error| Error::Query(format!("{error} in excluded word {word:?}")))?;
            clauses.push((Occur::MustNot, excluded));
        }
        Ok(if clauses.len() == 1 {
            clauses.remove(0).1
        } else {
            Box::new(BooleanQuery::new(clauses))
        })
    }

    /// A list page: matching documents collapsed by cluster, sorted, one page of clusters;
    /// with the facets, histogram and snippets asked for, counted in the same pass over the
    /// matches.
    ///
    /// ```
    /// use tantivy_dedup::engine::{DedupIndex, SearchRequest};
    /// use tantivy_dedup::{Article, config::Config};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut index = DedupIndex::create(dir.path(), Config::default())?;
    /// let story = "南方多地持续强降雨，防汛应急响应提升至三级，各地转移安置受灾群众。";
    /// for (id, source, time) in [("1", "新华网", 1_714_500_000), ("2", "人民网", 1_714_590_000)] {
    ///     let article = Article { id: id.into(), source: Some(source.into()), content: story.into(),
    ///                             published_at: Some(time), ..Default::default() };
    ///     index.add_article(article)?;
    /// }
    /// index.commit()?;
    /// let request = SearchRequest::new("防汛")
    ///     .filter("published_at:[2024-05-01 TO *]".parse()?)
    ///     .facets(["source"])
    ///     .histogram("1d".parse()?)
    ///     .highlight(true);
    /// let page = index.searcher().search(&request)?;
    /// assert_eq!(page.facets.unwrap()["source"].len(), 2);
    /// assert_eq!(page.histogram.unwrap().len(), 2);
    /// assert!(page.clusters[0].representative.snippet.as_ref().unwrap().contains("<em>防汛</em>"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn search(&self, request: &SearchRequest) -> Result<SearchPage> {
        check_request(request)?;
        let snapshot = self.snapshot_for(request)?;
        let request = &self.fix_request(request, &snapshot);
        let page = self.collect_page(&snapshot, request, request.offset, None)?;
        let following = page.following;
        let snapshots = page.snapshot.into_iter().collect();
        if request.cursor.is_some() && following > page.clusters.len() as u64 {
            self.pin(&snapshot)?;
        }
        // The collector cut the page already.
        let shape = PageShape {
            offset: 0,
            ..request.shape()
        };
        let mut answer = shards::finish_page(page, shape)?;
        answer.next_cursor =
            next_cursor(request, snapshots, following, &answer).map(|next| next.to_string());
        Ok(answer)
    }

    /// This index's part of a list page when it is one shard of several
    /// ([`shards::merge_pages`]): its first `offset + limit` stories, every facet value's
    /// counts and the histogram's buckets, scored with `statistics` when given (the sums of
    /// every shard's [`term_statistics`](Self::term_statistics)).
    pub fn shard_page(
        &self,
        request: &SearchRequest,
        statistics: Option<&TermStatistics>,
    ) -> Result<ShardPage> {
        check_request(request)?;
        self.sort_field(request)?;
        let snapshot = self.snapshot_for(request)?;
        let request = self.fix_request(request, &snapshot);
        // Pinned whether this shard has stories after its page or not: the walk goes on while
        // any shard has, and every page counts this shard's part of the totals and facets.
        if request.cursor.is_some() {
            self.pin(&snapshot)?;
        }
        self.collect_page(&snapshot, &request, 0, statistics)
    }

    /// What BM25 reads of this index for `request`'s query ([`TermStatistics`]), with the
    /// span of its publication times ([`publication_span`](Self::publication_span)), which an
    /// `auto` histogram over several shards is sized to; read from the snapshot of the
    /// request's cursor (pinned when it starts).
    pub fn term_statistics(&self, request: &SearchRequest) -> Result<TermStatistics> {
        check_request(request)?;
        self.sort_field(request)?;
        let keywords = self.keywords(request)?;
        let (searcher, snapshot) = match &request.cursor {
            Some(_) => {
                let snapshot = self.snapshot_for(request)?;
                self.pin(&snapshot)?;
                (snapshot.searcher, Some(snapshot.id))
            }
            None => (self.tantivy_searcher(), None),
        };
        let mut statistics = TermStatistics::of(&searcher, &*keywords).map_err(self.error())?;
        statistics.published = publication_span(&searcher, self.fields());
        statistics.snapshot = snapshot;
        Ok(statistics)
    }

    /// What a list page reads: the snapshot its cursor walks (pinned by its pages, or the
    /// index as it is now when it is that snapshot), or without a cursor the index as it is
    /// now. Pins are taken by the callers, once they know a page follows.
    fn snapshot_for(&self, request: &SearchRequest) -> Result<Snapshot> {
        let Some(cursor) = &request.cursor else {
            self.shared.snapshots.sweep();
            return self.current_snapshot();
        };
        let snapshots = &self.shared.snapshots;
        let wanted = match cursor.snapshots() {
            [] => None,
            [id] => Some(*id),
            more => {
                return Err(Error::Query(format!(
                    "the cursor was made for {} shards, and this is a whole index: start \
                     again with cursor=*",
                    more.len()
                )));
            }
        };
        if let Some(pinned) = wanted.and_then(|id| snapshots.get(id)) {
            return Ok(pinned);
        }
        let current = self.current_snapshot()?;
        // A walk goes on where the index is as it was (another process, a restart).
        if wanted.is_none_or(|id| id == current.id) {
            return Ok(current);
        }
        Err(Error::CursorExpired)
    }

    /// Pins `snapshot` for the next page of a walk.
    fn pin(&self, snapshot: &Snapshot) -> Result<()> {
        self.shared.snapshots.pin(snapshot)
    }

    /// The field of `request`'s order by a field, checked against the schema: before a walk
    /// pins a snapshot for a page it cannot give.
    fn sort_field(&self, request: &SearchRequest) -> Result<Option<SortField>> {
        request
            .sort_field
            .as_deref()
            .map(|name| SortField::find(self.tantivy_searcher().schema(), name))
            .transpose()
    }

    /// The index as the reader sees it now.
    fn current_snapshot(&self) -> Result<Snapshot> {
        let searcher = self.tantivy_searcher();
        Ok(Snapshot {
            id: snapshot_id(&searcher),
            ordinals: self.ordinals(&searcher)?,
            searcher,
        })
    }

    /// `request` as `snapshot` answers it: an `auto` histogram's width fixed to fit the
    /// snapshot's publication times, the trend window's end fixed.
    fn fix_request(&self, request: &SearchRequest, snapshot: &Snapshot) -> SearchRequest {
        let mut fixed = request.clone();
        if fixed.histogram == Some(HistogramWidth::Auto) {
            let span = publication_span(&snapshot.searcher, self.fields());
            fixed = fixed.fix_histogram(span, self.shared.config.index.time_zone);
        }
        fixed.fix_trend_end(crate::dedup::now())
    }

    /// The earliest and latest publication time of the documents in the index (those
    /// deleted but not yet merged away included: the span only sizes buckets), read from each
    /// segment's column bounds; `None` when no document has one.
    pub fn publication_span(&self) -> Option<TimeSpan> {
        publication_span(&self.tantivy_searcher(), self.fields())
    }

    /// The stories `skip..offset + limit` of `request` (after its cursor's last story, if it
    /// has a cursor) in `snapshot`, with their figures, and its counts.
    fn collect_page(
        &self,
        snapshot: &Snapshot,
        request: &SearchRequest,
        skip: usize,
        statistics: Option<&TermStatistics>,
    ) -> Result<ShardPage> {
        let keywords = self.keywords(request)?;
        let highlighter = request.highlight.then(|| {
            Highlighter::new(&*keywords)
                .fragments(request.highlight_fragments, request.highlight_chars)
        });
        let query = self.with_conditions(keywords, request)?;
        let searcher = &snapshot.searcher;
        let facet_names = distinct(&request.facets);
        // Fixed by the caller; an `auto` width left would count no histogram.
        let histogram = request.shape().histogram;
        let dimensions = self.dimensions(searcher, &facet_names, histogram)?;
        let ordinals = &snapshot.ordinals;
        let end = request.offset.saturating_add(request.limit);
        let mut collector = CollapseCollector::new(
            Arc::clone(ordinals),
            request.sort,
            skip,
            end.saturating_sub(skip),
        )
        .min_cluster_size(request.min_cluster_size);
        if let Some(field) = self.sort_field(request)? {
            collector = collector.sort_field(field);
        }
        if let Some(after) = request.cursor.as_ref().and_then(Cursor::after) {
            collector = collector.after(after);
        }
        let window = request.reads_trends().then(|| request.trend_window());
        if let Some(window) = window {
            let trends =
                StoryTrends::count(searcher, window, ordinals.number_bound(), |segment, doc| {
                    Some(ordinals.number(segment, doc)).filter(|number| *number != NO_CLUSTER)
                })
                .map_err(self.error())?;
            collector = collector
                .trends(Arc::new(trends))
                .min_recent(request.min_recent);
        }
        let provider =
            statistics.map(|statistics| statistics.provider(searcher.schema(), searcher));
        // One pass over the matches: the collapse and, when asked, the counts beside it,
        // until the deadline if there is one.
        let counter = (!dimensions.is_empty()).then(|| {
            FacetCollector::new(Arc::clone(ordinals), dimensions).stories(collector.stories())
        });
        let both = DeadlineCollector::new((collector, counter), request.deadline);
        let collected = match &provider {
            Some(provider) => searcher.search_with_statistics_provider(&*query, &both, provider),
            None => searcher.search(&*query, &both),
        }
        .map_err(self.error())?;
        let Some((collapsed, counts)) = collected else {
            return Err(Error::DeadlineExceeded);
        };
        let mut counts = counts.unwrap_or_default();
        let histogram = histogram.map(|_| {
            counts
                .pop()
                .unwrap_or_default()
                .into_iter()
                .map(ShardCount::from)
                .collect()
        });
        let facets = facet_names
            .iter()
            .map(|name| (*name).to_owned())
            .zip(counts)
            .map(|(name, counts)| (name, counts.into_iter().map(ShardCount::from).collect()))
            .collect();
        let page = &collapsed.clusters;
        // The newest and oldest hits: the collector tracked them for the orders that read
        // them; otherwise the members are checked against the query, a seek per member
        // instead of a fast-field read per hit of the whole collapse.
        let scoring = match (&provider, request.members) {
            (_, 0) => EnableScoring::disabled_from_searcher(searcher),
            (Some(provider), _) => {
                EnableScoring::enabled_from_statistics_provider(provider, searcher)
            }
            (None, _) => EnableScoring::enabled_from_searcher(searcher),
        };
        let reads = MemberReads {
            query: &*query,
            scoring,
            times: !matches!(request.sort, Sort::Newest | Sort::Oldest | Sort::Hot),
            members: request.members,
            member_order: MemberOrder::of(request.sort),
            recent: window.map(TrendWindow::recent),
        };
        let details = self.page_details(searcher, page, &reads)?;
        let extra = highlighter.as_ref().map_or(Extra::None, Extra::Snippet);
        let mut clusters = Vec::with_capacity(page.len());
        for (cluster, details) in collapsed.clusters.iter().zip(details) {
            let members = (request.members > 0)
                .then(|| {
                    details
                        .members
                        .iter()
                        .map(|&address| self.view(searcher, address, extra))
                        .collect::<Result<Vec<_>>>()
                })
                .transpose()?;
            clusters.push(ClusterHit {
                root: cluster.root,
                representative: self.view(searcher, cluster.representative, extra)?,
                score: cluster.score,
                hits: cluster.hits,
                cluster_size: cluster.size,
                sources: details.sources,
                newest: details.times.map_or(cluster.newest, |(_, newest)| newest),
                oldest: details.times.map_or(cluster.oldest, |(oldest, _)| oldest),
                trend: window.map(|_| StoryTrend {
                    recent: cluster.joined.recent,
                    recent_outlets: details.recent_outlets,
                    previous: cluster.joined.previous,
                    growth: cluster.joined.growth(),
                }),
                hot: (request.sort == Sort::Hot).then_some(cluster.hot),
                sort_value: cluster.value,
                members,
            });
        }
        Ok(ShardPage {
            total_hits: collapsed.total_hits,
            total_clusters: collapsed.total_clusters,
            clusters,
            facets,
            histogram,
            following: collapsed.following,
            snapshot: request.cursor.as_ref().map(|_| snapshot.id),
        })
    }

    /// What a list page counts: a dimension per facet field, in order, then the histogram's.
    fn dimensions(
        &self,
        searcher: &tantivy::Searcher,
        facets: &[&str],
        histogram: Option<Interval>,
    ) -> Result<Vec<Dimension>> {
        let schema = searcher.schema();
        let mut dimensions = facets
            .iter()
            .map(|name| Dimension::values(schema, name))
            .collect::<Result<Vec<_>>>()?;
        if let Some(interval) = histogram {
            let zone = self.shared.config.index.time_zone;
            dimensions.push(Dimension::buckets(
                schema,
                schema.get_field_name(self.shared.fields.published_at),
                interval,
                interval.origin(zone),
            )?);
        }
        Ok(dimensions)
    }

    /// The cluster numbers of `searcher`'s generation, for a [`CollapseCollector`]: brought
    /// up to each generation on its first collapse (from the last one's, at the cost of the
    /// segments and deletes that changed), then shared.
    pub fn cluster_ordinals(&self, searcher: &tantivy::Searcher) -> Result<Arc<ClusterOrdinals>> {
        self.ordinals(searcher)
    }

    fn ordinals(&self, searcher: &tantivy::Searcher) -> Result<Arc<ClusterOrdinals>> {
        let ordinals = &self.shared.ordinals;
        let mut numbering = ordinals.lock().unwrap_or_else(|poisoned| {
            // A panic while numbering may have left it half done: it starts again.
            ordinals.clear_poison();
            let mut numbering = poisoned.into_inner();
            *numbering = ClusterNumbering::default();
            numbering
        });
        numbering.ordinals(searcher).map_err(self.error())
    }

    /// All live documents of a cluster.
    fn members(&self, searcher: &tantivy::Searcher, root: Fingerprint) -> Result<Vec<DocAddress>> {
        let query = self.shared.fields.dedup.cluster_query(root);
        let members = searcher
            .search(&query, &DocSetCollector)
            .map_err(self.error())?;
        Ok(members.into_iter().collect())
    }

    /// For each cluster of a page: its sources (of all its documents, most frequent first)
    /// and what `reads` asks of its members. The members of all the page's clusters are found
    /// in one pass per segment (a union of term queries on `root`), so each segment's columns
    /// and scorers are opened once for the whole page; the page's query is seeked to each
    /// member when the newest and oldest matching members or the best ones are read.
    fn page_details(
        &self,
        searcher: &tantivy::Searcher,
        page: &[CollapsedCluster],
        reads: &MemberReads<'_>,
    ) -> Result<Vec<PageDetails>> {
        use tantivy::{DocSet, TERMINATED};
        let mut counts: Vec<HashMap<String, u64>> = vec![HashMap::new(); page.len()];
        let mut matched_times: Vec<Option<(Timestamp, Timestamp)>> = vec![None; page.len()];
        let mut recent_sources: Vec<std::collections::HashSet<String>> =
            vec![Default::default(); page.len()];
        // Per cluster, its matching members but the representative: (score, time, insert
        // number, address).
        let mut matching_members: Vec<Vec<(Score, Timestamp, u64, DocAddress)>> =
            vec![Vec::new(); page.len()];
        if !page.is_empty() {
            let positions: HashMap<u64, usize> = page
                .iter()
                .enumerate()
                .map(|(position, cluster)| (cluster.root.0, position))
                .collect();
            let roots = BooleanQuery::new(
                page.iter()
                    .map(|cluster| {
                        let term =
                            Term::from_field_u64(self.shared.fields.dedup.root, cluster.root.0);
                        let query: Box<dyn Query> =
                            Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                        (Occur::Should, query)
                    })
                    .collect(),
            );
            let unscored = tantivy::query::EnableScoring::disabled_from_searcher(searcher);
            let members = roots.weight(unscored).map_err(self.error())?;
            let matching = (reads.times || reads.members > 0)
                .then(|| reads.query.weight(reads.scoring))
                .transpose()
                .map_err(self.error())?;
            let mut name = String::new();
            for (segment_ord, reader) in searcher.segment_readers().iter().enumerate() {
                let mut scorer = members.scorer(reader, 1.0).map_err(self.error())?;
                if scorer.doc() == TERMINATED {
                    continue;
                }
                let fast = reader.fast_fields();
                let root_column = fast.u64(schema::ROOT).map_err(self.error())?;
                let sources = fast.str("source").map_err(self.error())?;
                let times = fast.i64(schema::EVENT_TIME).map_err(self.error())?;
                let sequences = fast.u64(schema::SEQUENCE).map_err(self.error())?;
                let mut matching = match &matching {
                    Some(weight) => Some(weight.scorer(reader, 1.0).map_err(self.error())?),
                    None => None,
                };
                let alive = reader.alive_bitset();
                while scorer.doc() != TERMINATED {
                    let doc = scorer.doc();
                    scorer.advance();
                    let position = root_column
                        .first(doc)
                        .and_then(|root| positions.get(&root).copied());
                    let Some(position) = position else { continue };
                    if alive.is_some_and(|alive| !alive.is_alive(doc)) {
                        continue;
                    }
                    let is_recent = reads.recent.as_ref().is_some_and(|recent| {
                        times.first(doc).is_some_and(|time| recent.contains(&time))
                    });
                    if let Some(column) = &sources {
                        for ordinal in column.term_ords(doc) {
                            name.clear();
                            if column.ord_to_str(ordinal, &mut name).unwrap_or(false) {
                                if is_recent && !recent_sources[position].contains(&name) {
                                    recent_sources[position].insert(name.clone());
                                }
                                *counts[position].entry(name.clone()).or_insert(0) += 1;
                            }
                        }
                    }
                    let Some(matching) = &mut matching else {
                        continue;
                    };
                    if matching.doc() < doc {
                        matching.seek(doc);
                    }
                    if matching.doc() != doc {
                        continue;
                    }
                    let time = times.first(doc);
                    if let (true, Some(time)) = (reads.times, time) {
                        let (oldest, newest) = matched_times[position].get_or_insert((time, time));
                        *oldest = (*oldest).min(time);
                        *newest = (*newest).max(time);
                    }
                    let address = DocAddress::new(segment_ord as SegmentOrdinal, doc);
                    if reads.members > 0 && address != page[position].representative {
                        matching_members[position].push((
                            matching.score(),
                            time.unwrap_or(Timestamp::MAX),
                            sequences.first(doc).unwrap_or(u64::MAX),
                            address,
                        ));
                    }
                }
            }
        }
        for members in &mut matching_members {
            match reads.member_order {
                MemberOrder::Newest => members.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2))),
                MemberOrder::Oldest => members.sort_by(|a, b| a.1.cmp(&b.1).then(a.2.cmp(&b.2))),
                MemberOrder::Best => members
                    .sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))),
            }
            members.truncate(reads.members);
        }
        Ok(counts
            .into_iter()
            .zip(matched_times)
            .zip(recent_sources)
            .zip(matching_members)
            .map(|(((counts, times), recent_sources), members)| {
                let mut sources: Vec<(String, u64)> = counts.into_iter().collect();
                sources.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                PageDetails {
                    sources: sources.into_iter().map(|(name, _)| name).collect(),
                    times,
                    recent_outlets: recent_sources.len() as u64,
                    members: members.into_iter().map(|member| member.3).collect(),
                }
            })
            .collect())
    }

    /// How many live documents a cluster has.
    pub fn cluster_size(&self, root: Fingerprint) -> Result<u64> {
        let query = self.shared.fields.dedup.cluster_query(root);
        let count = self
            .tantivy_searcher()
            .search(&query, &Count)
            .map_err(self.error())?;
        Ok(count as u64)
    }

    /// Where the live document with this id is.
    fn locate(&self, searcher: &tantivy::Searcher, id: &str) -> Result<Option<DocAddress>> {
        let query = TermQuery::new(
            Term::from_field_text(self.shared.fields.id, id),
            IndexRecordOption::Basic,
        );
        let found = searcher
            .search(&query, &DocSetCollector)
            .map_err(self.error())?;
        Ok(found.into_iter().min())
    }

    /// The document with this id.
    pub fn document(&self, id: &str) -> Result<Option<DocumentView>> {
        let searcher = self.tantivy_searcher();
        self.locate(&searcher, id)?
            .map(|address| self.view(&searcher, address, Extra::Content))
            .transpose()
    }

    /// A detail page: the other documents of the document's cluster, earliest first (then in
    /// insert order), `offset` and `limit` over them. `None` when no document has this id.
    pub fn similar(&self, id: &str, offset: usize, limit: usize) -> Result<Option<SimilarPage>> {
        check_limit(limit)?;
        let searcher = self.tantivy_searcher();
        let Some(address) = self.locate(&searcher, id)? else {
            return Ok(None);
        };
        let document = self.view(&searcher, address, Extra::Content)?;
        let members = self.members(&searcher, document.root)?;
        let cluster_size = members.len() as u64;
        let mut others = Vec::with_capacity(members.len());
        for member in members.into_iter().filter(|member| *member != address) {
            let time = fast_value::<i64>(&searcher, member, schema::EVENT_TIME);
            let sequence = fast_value::<u64>(&searcher, member, schema::SEQUENCE);
            others.push((
                time.map_err(self.error())?,
                sequence.map_err(self.error())?,
                member,
            ));
        }
        others.sort_unstable();
        let total = others.len() as u64;
        let documents = others
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, _, member)| self.view(&searcher, member, Extra::Content))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(SimilarPage {
            document,
            cluster_size,
            total,
            documents,
        }))
    }

    /// Check before publishing: the indexed near-duplicates of an article that is not indexed,
    /// by the rule the forest's edges follow, nearest fingerprint first, at most `limit`.
    /// Candidates come from the simhash's block fields (a term query per block) and, in
    /// default mode, the sketch's keys (`_keys`); seed mode keeps those within `k` (from the
    /// `simhash` fast field), default mode those whose stored sketch verifies.
    pub fn near_duplicates(&self, article: &Article, limit: usize) -> Result<NearDuplicates> {
        check_limit(limit)?;
        let shared = &self.shared;
        // Analysed as the index analyses (one dictionary in a process that indexes and checks).
        let parts: Vec<AnalyzedText> = shared
            .signer
            .parts(article)
            .into_iter()
            .map(AnalyzedText::new)
            .collect();
        let signature = shared
            .signer
            .sign_analyzed(&parts.iter().collect::<Vec<_>>(), article.source.as_deref());
        let simhash = signature.fingerprint;
        let block_terms = shared
            .fields
            .dedup
            .blocks
            .iter()
            .zip(shared.layout.blocks())
            .map(|(field, block)| Term::from_field_u64(*field, block.key(simhash.0)));
        let key_terms = signature
            .sketch
            .iter()
            .flat_map(Sketch::keys)
            .map(|&key| Term::from_field_u64(shared.fields.dedup.sketch_keys, u64::from(key)));
        let candidates_query: Vec<(Occur, Box<dyn Query>)> = block_terms
            .chain(key_terms)
            .map(|term| {
                let query: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                (Occur::Should, query)
            })
            .collect();
        let searcher = self.tantivy_searcher();
        let candidates = searcher
            .search(&BooleanQuery::new(candidates_query), &DocSetCollector)
            .map_err(self.error())?;
        let max_distance = shared.config.dedup.max_distance;
        let mut near = Vec::new();
        for address in candidates {
            let other = fast_value::<u64>(&searcher, address, schema::SIMHASH);
            let Some(other) = other.map_err(self.error())? else {
                continue;
            };
            let distance = simhash.distance(Fingerprint(other));
            let matches = match (&shared.verifier, &signature.sketch) {
                (Some(verifier), Some(sketch)) => {
                    let stored = schema::stored_sketch(&searcher, address).map_err(self.error())?;
                    stored.is_some_and(|other| verifier.matches(sketch, &other))
                }
                _ => distance <= max_distance,
            };
            if matches {
                near.push(NearDuplicate {
                    distance,
                    document: self.view(&searcher, address, Extra::None)?,
                });
            }
        }
        Ok(shards::merge_near_duplicates(
            simhash,
            vec![NearDuplicates {
                simhash,
                matches: near,
            }],
            limit,
        ))
    }

    /// A document's stored fields and cluster, with `extra`.
    pub(super) fn view(
        &self,
        searcher: &tantivy::Searcher,
        address: DocAddress,
        extra: Extra<'_>,
    ) -> Result<DocumentView> {
        let fields = &self.shared.fields;
        let document: TantivyDocument = searcher.doc(address).map_err(self.error())?;
        let stored = |field| document.get_first(field).and_then(|value| value.as_str());
        let text = |field| stored(field).map(str::to_owned);
        let root = fast_value::<u64>(searcher, address, schema::ROOT).map_err(self.error())?;
        let mut view = DocumentView {
            id: text(fields.id).unwrap_or_default(),
            title: text(fields.title),
            source: text(fields.source),
            url: text(fields.url),
            published_at: document
                .get_first(fields.published_at)
                .and_then(|value| value.as_datetime())
                .map(|time| time.into_timestamp_secs()),
            simhash: Fingerprint(
                document
                    .get_first(fields.dedup.simhash)
                    .and_then(|value| value.as_u64())
                    .unwrap_or(0),
            ),
            root: Fingerprint(root.unwrap_or(0)),
            fields: fields
                .own
                .iter()
                .filter_map(|field| Some((field.name.clone(), field.stored_json(&document)?)))
                .collect(),
            content: matches!(extra, Extra::Content)
                .then(|| text(fields.content))
                .flatten(),
            snippet: None,
            highlights: None,
        };
        if let Extra::Snippet(highlighter) = extra {
            let marks = self.marks(stored(fields.title), stored(fields.content), highlighter);
            view.snippet = marks.snippet;
            // None asked for (`highlight_fragments=0`): the snippet alone.
            view.highlights = highlighter.gives_fragments().then_some(marks.highlights);
        }
        Ok(view)
    }

    /// What `highlighter` marks in a document's `title` and stored body `content` (the title
    /// highlighted whole, the body in fragments).
    pub(super) fn marks(
        &self,
        title: Option<&str>,
        content: Option<&str>,
        highlighter: &Highlighter,
    ) -> Marks {
        let fields = &self.shared.fields;
        let texts: Vec<FieldText> = [
            ("title", fields.title, title, true),
            ("content", fields.content, content, false),
        ]
        .into_iter()
        .filter_map(|(name, field, raw, whole)| {
            Some(FieldText {
                name,
                field,
                raw: raw?,
                whole,
            })
        })
        .collect();
        highlighter.mark(&texts)
    }

    /// Document, cluster and tombstone counts, segments and disk use.
    pub fn stats(&self) -> Result<IndexStats> {
        let searcher = self.tantivy_searcher();
        let ordinals = self.ordinals(&searcher)?;
        let documents = ordinals.documents();
        let disk_bytes = std::fs::read_dir(&self.shared.path)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok()?.metadata().ok())
                    .filter(|metadata| metadata.is_file())
                    .map(|metadata| metadata.len())
                    .sum()
            })
            .unwrap_or(0);
        Ok(IndexStats {
            documents,
            clusters: ordinals.clusters() as u64,
            tombstones: searcher.num_docs().saturating_sub(documents),
            segments: searcher.segment_readers().len(),
            disk_bytes,
        })
    }
}

/// The earliest and latest publication time of `searcher`'s documents (those deleted but not
/// yet merged away included: the span only sizes buckets), read from each segment's column
/// bounds; `None` when no document has one.
fn publication_span(searcher: &tantivy::Searcher, fields: &NewsFields) -> Option<TimeSpan> {
    let name = searcher.schema().get_field_name(fields.published_at);
    let mut span: Option<TimeSpan> = None;
    for segment in searcher.segment_readers() {
        let Some(column) = segment
            .fast_fields()
            .date(name)
            .ok()
            .filter(|column| column.values.num_vals() > 0)
        else {
            continue;
        };
        let here = TimeSpan::new(
            column.min_value().into_timestamp_secs(),
            column.max_value().into_timestamp_secs(),
        );
        span = Some(span.map_or(here, |span| span.union(here)));
    }
    span
}

/// The cursor after `page` of a walk over `snapshots` (one per shard), when `request` walks
/// with a cursor and stories follow the page: `following` of them ranked after the cursor it
/// started from.
pub(crate) fn next_cursor(
    request: &SearchRequest,
    snapshots: Vec<u64>,
    following: u64,
    page: &SearchPage,
) -> Option<Cursor> {
    request.cursor.as_ref()?;
    let last = page.clusters.last()?;
    (following > page.clusters.len() as u64).then(|| {
        Cursor::after_story(
            request.list_digest(),
            snapshots,
            request.trend_end,
            &shards::sort_key(last),
        )
    })
}

/// The names of `names`, each once, in their first order.
fn distinct(names: &[String]) -> Vec<&str> {
    let mut seen = Vec::with_capacity(names.len());
    for name in names {
        if !seen.contains(&name.as_str()) {
            seen.push(name.as_str());
        }
    }
    seen
}

/// A condition that keeps or drops documents without adding to their score.
fn filter(query: impl Query) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(Box::new(query), 0.0))
}
