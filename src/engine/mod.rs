//! The Tantivy integration: a news index whose documents carry their simhash, its blocks and
//! their cluster's root, with collapsed search, detail pages and near-duplicate checks.
//!
//! - [`schema`]: the Tantivy schema built from `[fields.*]` plus the dedup fields;
//! - [`NewsTokenizer`]: the tokenizer registered on every open (normalise + jieba);
//! - [`schema::DedupFields`] and [`DedupWriter`]: dedup on any Tantivy schema: the fields, and
//!   the forest beside an `IndexWriter` (the one insert path, with recovery on open);
//! - [`DedupIndex`]: the news index: its one ordered writer over a [`DedupWriter`];
//! - [`CollapseCollector`]: hits grouped by root;
//! - [`SortField`]: a list ordered by a number, date or boolean field of one's own;
//! - [`StoryTrends`]: the articles that joined each story within a trend window and before
//!   it (`sort=trending`, `/v1/trending`), and the `hot` blend ([`TrendWindow::hot`]);
//! - [`Filter`]: a list page's conditions on declared non-text fields;
//! - [`FacetCollector`]: values and time buckets counted over all matches (facets, histogram);
//! - [`DeadlineCollector`]: any collector stopped at a deadline (a list page's time limit);
//! - [`Highlighter`]: snippets of stored raw text with the matched words marked;
//! - [`DedupSearcher`]: list pages, detail pages, near-duplicate checks, statistics;
//! - [`ShardSpec`] and [`merge_pages`]: an index split into shards by story, and the exact
//!   merge of their answers;
//! - [`check_index`]: every file of an index read and checked (`tantivy-dedup check`);
//! - recovery and pruning (private): the forest rebuilt on open from its checkpoint and the
//!   inserts after it, and the tombstones a checkpoint made unnecessary deleted.

mod answers;
mod check;
mod collapse;
mod cursor;
mod deadline;
mod dedup_writer;
mod directory;
mod document;
mod facets;
mod filter;
mod histogram;
mod prune;
mod recovery;
pub mod schema;
mod search;
mod shards;
mod snapshot;
mod snippet;
mod sort_field;
mod story;
pub(crate) mod tokenizer;
mod trend;
mod writer;

pub use answers::{
    ClusterHit, DocumentView, IndexStats, NearDuplicate, NearDuplicates, SearchPage, SimilarPage,
    StoryTrend,
};
pub use check::{CheckReport, Damage, check_index};
pub use collapse::{
    ClusterHitsFruit, ClusterNumbering, ClusterOrdinals, CollapseCollector,
    CollapseSegmentCollector, Collapsed, CollapsedCluster, ListOrder, NO_CLUSTER, RootMap, Sort,
    SortKey, StoryFilter,
};
pub use cursor::{CURSOR_START, Cursor, MAX_WALK_SHARDS};
pub use deadline::{DeadlineCollector, DeadlineSegmentCollector};
pub use dedup_writer::{
    CheckpointReport, DEFAULT_CHECKPOINT_INSERTS, DedupDocument, DedupWriter, DedupWriterBuilder,
    DocumentPreparer, Placed, PreparedDocument,
};
pub use directory::{CommitFiles, FOREST_DIR, SETTINGS_FILE, stored_settings};
pub use facets::{
    DEFAULT_FACET_LIMIT, Dimension, FacetCollector, FacetCount, FacetFruit, FacetSegmentCollector,
    FacetValue, lay_out, most_frequent,
};
pub use filter::{Filter, ValueField, ValueKind};
pub use histogram::{
    AUTO_MAX_BUCKETS, HistogramBucket, HistogramWidth, Interval, MAX_HISTOGRAM_BUCKETS, TimeSpan,
};
pub use recovery::{CHECKPOINT_FILE, RecoveryReport};
#[cfg(feature = "redis")]
pub(crate) use search::next_cursor;
pub use search::{
    DEFAULT_PAGE_SIZE, DedupSearcher, MAX_FACET_LIMIT, MAX_MEMBERS, MAX_OFFSET, MAX_PAGE_SIZE,
    SearchRequest, list_items,
};
pub use shards::{
    GlobalStatistics, MAX_SHARDS, PageShape, ShardCount, ShardPage, ShardSpec, TermStatistics,
    finish_page, merge_near_duplicates, merge_pages,
};
pub use snapshot::{KEEP_ALIVE, MAX_PINNED, snapshot_id};
pub use snippet::{
    DEFAULT_FRAGMENT_CHARS, DEFAULT_FRAGMENTS, FRAGMENT_CHARS, FieldText, Highlighter,
    MAX_FRAGMENTS, Marks, SNIPPET_CHARS,
};
pub use sort_field::{SortField, SortValue, compare_values};
pub use story::{
    Evidence, FirstPublished, Outlet, Reprint, SpreadBucket, Story, StoryMember, StoryRequest,
    StorySort, reprint_line,
};
pub use tokenizer::{NewsTokenizer, register as register_tokenizer};
pub use trend::{
    DEFAULT_TREND_SECONDS, Joined, MAX_TREND_SECONDS, StoryTrends, TrendSpan, TrendWindow,
    popularity,
};
pub use writer::{DedupIndex, PreparedArticle, Preparer};
