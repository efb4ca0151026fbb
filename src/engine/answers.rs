//! What the searcher answers: a document as results show it, a list page and its stories, a
//! detail page, near-duplicates, the index's counts. Plain data, serialised as the API shows
//! it and read back by a coordinator of shards.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Fingerprint;
use crate::engine::facets::FacetCount;
use crate::engine::histogram::HistogramBucket;
use crate::engine::sort_field::SortValue;
use crate::forest::Timestamp;

/// A document as results show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DocumentView {
    /// The external id.
    pub id: String,
    /// The headline, when stored.
    pub title: Option<String>,
    /// The outlet.
    pub source: Option<String>,
    /// The address.
    pub url: Option<String>,
    /// Publication time (the arrival time for articles sent without one), Unix seconds.
    #[cfg_attr(feature = "server", schema(value_type = Option<i64>))]
    pub published_at: Option<Timestamp>,
    /// The document's fingerprint.
    pub simhash: Fingerprint,
    /// Its cluster's root hash.
    pub root: Fingerprint,
    /// The stored values of the platform's own fields, by name: one value as it is, several
    /// as an array (dates as Unix seconds, facets as paths). Left out of JSON when empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, serde_json::Value>,
    /// The stored body, on document and detail pages only (list pages stay light).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// On a list page asked to highlight, the representative's snippet: up to about 160
    /// characters of its stored title or body around the first words the query matched,
    /// those in `<em>`, the rest HTML-escaped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// On a page asked to highlight (and a story page asked with `q`), per text field with a
    /// match (`title`, `content`), its fragments in text order: up to `highlight_fragments`
    /// pieces of about `highlight_chars` characters, each around matches no earlier piece
    /// shows, the matched words in `<em>`, the rest HTML-escaped, `…` where a piece is cut;
    /// the title whole, as one piece. Empty when no field has a match; absent with
    /// `highlight_fragments=0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highlights: Option<BTreeMap<String, Vec<String>>>,
}

/// One cluster of a list page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ClusterHit {
    /// The cluster's root hash.
    pub root: Fingerprint,
    /// The best-scoring matching document.
    pub representative: DocumentView,
    /// Its score.
    pub score: f32,
    /// The cluster's documents that match the query (and filters).
    pub hits: u64,
    /// All the cluster's documents in the index; `cluster_size - 1` are "similar articles".
    pub cluster_size: u64,
    /// The cluster's sources (of all its documents), most frequent first.
    pub sources: Vec<String>,
    /// The newest matching document's time.
    #[cfg_attr(feature = "server", schema(value_type = i64))]
    pub newest: Timestamp,
    /// The oldest matching document's time (the story's first article among those that
    /// match).
    #[cfg_attr(feature = "server", schema(value_type = i64))]
    #[serde(default)]
    pub oldest: Timestamp,
    /// On a page that reads the trend window (`sort=trending`, `sort=hot`, `min_recent`):
    /// the articles that joined the story within it and before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend: Option<StoryTrend>,
    /// On a `sort=hot` page, the story's value in that order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot: Option<f64>,
    /// On a page ordered by a field of one's own (`sort=likes:desc`), the story's value in
    /// that order: the largest of its matching documents' values for `desc`, the smallest
    /// for `asc`; absent when none of them has one (such stories come last). The
    /// representative stays the best-scoring article, which may hold another value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_value: Option<SortValue>,
    /// With `members=N`: up to N of the story's other documents that match, best first in the
    /// page's order (the best scores, then the earliest; for `newest`, the newest; for
    /// `oldest`, the oldest; for an order by a field, the best scores), each with
    /// its snippet when the page highlights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<DocumentView>>,
}

/// How a story grew within a list page's trend window (`trend_window`, ending at
/// `trend_end`): counts of all its articles, matching the query or not, by event time
/// (publication, else arrival).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct StoryTrend {
    /// Articles that joined within the window.
    pub recent: u64,
    /// Distinct outlets among them (articles without a source not counted).
    pub recent_outlets: u64,
    /// Articles that joined within the window of the same length just before.
    pub previous: u64,
    /// `recent - previous`: what `sort=trending` orders by (then `recent`).
    pub growth: i64,
}

/// A list page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SearchPage {
    /// Matching documents (with a minimum cluster size: those of the clusters kept).
    pub total_hits: u64,
    /// Matching clusters (with a minimum cluster size: those kept).
    pub total_clusters: u64,
    /// The clusters of the page, in order.
    pub clusters: Vec<ClusterHit>,
    /// Per field asked for, its values over all matching documents, most articles first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facets: Option<BTreeMap<String, Vec<FacetCount>>>,
    /// The matching documents per interval of publication time, in time order, empty
    /// intervals between the first and the last included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<Vec<HistogramBucket>>,
    /// The width of the histogram's buckets, seconds: the one asked for, or the one an
    /// `auto` width chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram_interval: Option<u64>,
    /// On a page that reads the trend window (`sort=trending`, `sort=hot`, `min_recent`): its
    /// length, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend_window: Option<u64>,
    /// And its end (inclusive), Unix seconds: the one asked for, or the time of the search.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<i64>))]
    pub trend_end: Option<Timestamp>,
    /// On a page asked with a cursor (`cursor=*` or an earlier page's `next_cursor`): the
    /// cursor of the next page, absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A detail page: a document and the other documents of its cluster, earliest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SimilarPage {
    /// The document asked for.
    pub document: DocumentView,
    /// All documents of its cluster, itself included.
    pub cluster_size: u64,
    /// The other documents (`cluster_size - 1`), before pagination.
    pub total: u64,
    /// The page of other documents.
    pub documents: Vec<DocumentView>,
}

/// An indexed document near an unindexed text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NearDuplicate {
    /// Hamming distance between the two fingerprints.
    pub distance: u32,
    /// The document.
    pub document: DocumentView,
}

/// The result of a check before publishing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NearDuplicates {
    /// The text's fingerprint.
    pub simhash: Fingerprint,
    /// Indexed near-duplicates (seed mode: within `k`; default mode: candidates whose texts
    /// verify, as the forest's edges), nearest fingerprint first (then earliest, then by id).
    pub matches: Vec<NearDuplicate>,
}

/// The index's size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct IndexStats {
    /// Live documents.
    pub documents: u64,
    /// Distinct clusters among them.
    pub clusters: u64,
    /// Records of deleted or replaced documents, kept for the forest's replay.
    pub tombstones: u64,
    /// Tantivy segments.
    pub segments: usize,
    /// Bytes of the index directory on disk.
    pub disk_bytes: u64,
}
