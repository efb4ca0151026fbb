//! An index split into shards by story, and the exact merge of their answers.
//!
//! A document lives on the shard that owns its root ([`ShardSpec::owner`]), so every story is
//! whole on one shard: its size, its members, its outlets and its newest and oldest hits are that shard's
//! alone. A list page is then exact across shards when each shard answers its best
//! `offset + limit` stories with their figures ([`ShardPage`]), untruncated facet counts and
//! raw histogram buckets, and the pages are merged in the page's order ([`merge_pages`]): a
//! story on the merged page is on its shard's page, and every count is a sum of disjoint parts.
//! Scores are the one figure a shard computes from its own documents (BM25's document
//! frequencies); passing the sums of every shard's [`TermStatistics`] makes them those of one
//! index.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use tantivy::Term;
use tantivy::query::{Bm25StatisticsProvider, Query};
use tantivy::schema::{Field, Schema};

use crate::engine::answers::{ClusterHit, NearDuplicate, NearDuplicates, SearchPage};
use crate::engine::collapse::{Sort, SortKey};
use crate::engine::facets::{FacetCount, FacetValue, lay_out, most_frequent};
use crate::engine::histogram::{Interval, TimeSpan};
use crate::engine::trend::{Joined, TrendWindow};
use crate::{Error, Fingerprint, Result};

/// Which shard of how many a server is (`--shard I/N`, I counted from 0).
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::engine::ShardSpec;
///
/// let spec: ShardSpec = "1/3".parse()?;
/// assert_eq!((spec.index, spec.count), (1, 3));
/// // Every root has one owner, the same wherever it is computed.
/// let owner = ShardSpec::owner(Fingerprint(0x1234_5678_9abc_def0), 3);
/// assert!(owner < 3);
/// assert!("3/3".parse::<ShardSpec>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpec {
    /// This shard, `0..count`.
    pub index: usize,
    /// How many shards the index is split into.
    pub count: usize,
}

/// The most shards an index may be split into.
pub const MAX_SHARDS: usize = 1024;

impl ShardSpec {
    /// The shard of `count` that owns the story `root`: a well-mixed hash of the root (a
    /// root's low bits are pigeonhole keys, so they are not used as they are), modulo `count`.
    pub fn owner(root: Fingerprint, count: usize) -> usize {
        // The finaliser of SplitMix64: every bit of the root moves about half of the output's.
        let mut mixed = root.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^= mixed >> 31;
        (mixed % count.max(1) as u64) as usize
    }

    /// Whether this shard owns the story `root`.
    pub fn owns(&self, root: Fingerprint) -> bool {
        Self::owner(root, self.count) == self.index
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for ShardSpec {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = || {
            Error::Config(format!(
                "a shard is I/N, this shard's number from 0 and how many there are (0/3, 1/3, \
                 2/3), at most {MAX_SHARDS}; got {text:?}"
            ))
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(invalid)?;
        let index: usize = index.trim().parse().map_err(|_| invalid())?;
        let count: usize = count.trim().parse().map_err(|_| invalid())?;
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(invalid());
        }
        Ok(ShardSpec { index, count })
    }
}

/// What BM25 reads of an index for one query: its document count, its token count per text
/// field and the document frequency of each of the query's terms. Summed over the shards
/// ([`add`](Self::add)) and passed back to each, they make every shard score as one index
/// holding all the documents would.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermStatistics {
    /// Documents (tombstones included, as Tantivy counts them).
    pub documents: u64,
    /// Tokens per text field, by field name.
    pub tokens: BTreeMap<String, u64>,
    /// Per term of the query: its field's name (which must name the term's field where the
    /// statistics are used), the term, its document frequency.
    pub terms: Vec<(String, Term, u64)>,
    /// The span of the index's publication times, which an `auto` histogram is sized to
    /// ([`DedupSearcher::publication_span`](crate::engine::DedupSearcher::publication_span)).
    #[serde(default)]
    pub published: Option<TimeSpan>,
    /// The snapshot read, when asked with a cursor (pinned when the cursor starts a walk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
}

impl TermStatistics {
    /// The statistics `query` reads of `searcher`'s index.
    pub fn of(searcher: &tantivy::Searcher, query: &dyn Query) -> tantivy::Result<Self> {
        let schema = searcher.schema();
        let mut terms: Vec<Term> = Vec::new();
        query.query_terms(&mut |term, _| terms.push(term.clone()));
        terms.sort();
        terms.dedup();
        let mut statistics = TermStatistics {
            documents: searcher.total_num_docs()?,
            ..TermStatistics::default()
        };
        for term in &terms {
            let field = term.field();
            let name = schema.get_field_name(field).to_owned();
            if !statistics.tokens.contains_key(&name) {
                let tokens = Bm25StatisticsProvider::total_num_tokens(searcher, field)?;
                statistics.tokens.insert(name.clone(), tokens);
            }
            let frequency = searcher.doc_freq(term)?;
            statistics.terms.push((name, term.clone(), frequency));
        }
        Ok(statistics)
    }

    /// Adds another shard's statistics for the same query.
    pub fn add(&mut self, other: &TermStatistics) {
        self.documents += other.documents;
        self.published = match (self.published, other.published) {
            (Some(mine), Some(theirs)) => Some(mine.union(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        for (field, tokens) in &other.tokens {
            *self.tokens.entry(field.clone()).or_default() += tokens;
        }
        let mut positions: HashMap<Term, usize> = self
            .terms
            .iter()
            .enumerate()
            .map(|(position, (_, term, _))| (term.clone(), position))
            .collect();
        for (field, term, frequency) in &other.terms {
            match positions.get(term) {
                Some(&position) => self.terms[position].2 += frequency,
                None => {
                    positions.insert(term.clone(), self.terms.len());
                    self.terms.push((field.clone(), term.clone(), *frequency));
                }
            }
        }
    }

    /// A statistics provider over `schema`'s fields, falling back to `local` for what these
    /// statistics do not hold.
    pub fn provider<'a>(
        &self,
        schema: &Schema,
        local: &'a tantivy::Searcher,
    ) -> GlobalStatistics<'a> {
        let field = |name: &str| schema.get_field(name).ok();
        GlobalStatistics {
            documents: self.documents,
            tokens: self
                .tokens
                .iter()
                .filter_map(|(name, tokens)| Some((field(name)?, *tokens)))
                .collect(),
            frequencies: self
                .terms
                .iter()
                // A term numbered by another schema is not this one's.
                .filter(|(name, term, _)| field(name) == Some(term.field()))
                .map(|(_, term, frequency)| (term.clone(), *frequency))
                .collect(),
            local,
        }
    }
}

/// [`TermStatistics`] as Tantivy's scorer reads them (see [`TermStatistics::provider`]).
pub struct GlobalStatistics<'a> {
    documents: u64,
    tokens: HashMap<Field, u64>,
    frequencies: HashMap<Term, u64>,
    local: &'a tantivy::Searcher,
}

impl Bm25StatisticsProvider for GlobalStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match self.tokens.get(&field) {
            Some(tokens) => Ok(*tokens),
            None => Bm25StatisticsProvider::total_num_tokens(self.local, field),
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.documents)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        match self.frequencies.get(term) {
            Some(frequency) => Ok(*frequency),
            None => self.local.doc_freq(term),
        }
    }
}

/// A value's count with its kind kept (answers print values untagged, where 5 could be an
/// unsigned or a signed number; a merge must not mix the two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardCount {
    /// The value.
    #[serde(with = "TaggedValue")]
    pub value: FacetValue,
    /// Matching documents with this value.
    pub articles: u64,
    /// Distinct clusters among them.
    pub clusters: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "FacetValue")]
enum TaggedValue {
    Text(String),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Bool(bool),
}

impl From<FacetCount> for ShardCount {
    fn from(count: FacetCount) -> Self {
        ShardCount {
            value: count.value,
            articles: count.articles,
            clusters: count.clusters,
        }
    }
}

impl From<ShardCount> for FacetCount {
    fn from(count: ShardCount) -> Self {
        FacetCount {
            value: count.value,
            articles: count.articles,
            clusters: count.clusters,
        }
    }
}

/// One shard's part of a list page: its best stories in the page's order (from the first, so
/// `offset + limit` of them when asked by a coordinator), its totals, every facet value's
/// counts and the histogram's buckets that have documents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardPage {
    /// Matching documents.
    pub total_hits: u64,
    /// Matching stories.
    pub total_clusters: u64,
    /// Its stories, in the page's order.
    pub clusters: Vec<ClusterHit>,
    /// Per facet asked for, in the order asked, every value's counts.
    pub facets: Vec<(String, Vec<ShardCount>)>,
    /// The histogram's buckets that have documents, when one was asked for.
    pub histogram: Option<Vec<ShardCount>>,
    /// Its stories ranked after the cursor the page was asked with (all of them without
    /// one), of which the page holds the first: whether a walk goes on.
    #[serde(default)]
    pub following: u64,
    /// The snapshot its cursor walks, when asked with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
}

/// How a merged page is cut and counted: the request's order, page and facet limit.
#[derive(Debug, Clone, Copy)]
pub struct PageShape {
    /// The order of the stories.
    pub sort: Sort,
    /// Stories skipped.
    pub offset: usize,
    /// Stories kept after them.
    pub limit: usize,
    /// Values kept per facet.
    pub facet_limit: usize,
    /// The histogram's bucket width, when one was asked for.
    pub histogram: Option<Interval>,
    /// The trend window, when the page reads it (its end fixed).
    pub trend: Option<TrendWindow>,
}

/// The list page of the shards' pages together: their stories in `shape`'s order, cut to
/// `offset..offset + limit`, and every total, facet count and bucket summed. Exact when every
/// story is whole on one shard and each page holds its shard's first `offset + limit`
/// stories.
pub fn merge_pages(pages: Vec<ShardPage>, shape: PageShape) -> Result<SearchPage> {
    let mut merged = ShardPage {
        histogram: shape.histogram.map(|_| Vec::new()),
        ..ShardPage::default()
    };
    let mut facets: Vec<(String, HashMap<TaggedKey, ShardCount>)> = Vec::new();
    let mut buckets: HashMap<TaggedKey, ShardCount> = HashMap::new();
    for page in pages {
        merged.total_hits += page.total_hits;
        merged.total_clusters += page.total_clusters;
        merged.clusters.extend(page.clusters);
        for (position, (name, counts)) in page.facets.into_iter().enumerate() {
            if facets.len() <= position {
                facets.push((name, HashMap::new()));
            }
            let values = &mut facets[position].1;
            for count in counts {
                add_count(values.entry(TaggedKey::of(&count.value)), count);
            }
        }
        for count in page.histogram.into_iter().flatten() {
            add_count(buckets.entry(TaggedKey::of(&count.value)), count);
        }
    }
    if let (Sort::Hot, Some(window)) = (shape.sort, shape.trend) {
        // Computed again from what it is made of, as one index computes it: a float that
        // came through JSON may have lost its last bit.
        for cluster in &mut merged.clusters {
            cluster.hot = Some(window.hot(cluster.score, cluster.cluster_size, cluster.newest));
        }
    }
    merged
        .clusters
        .sort_by(|a, b| shape.sort.compare_keys(&sort_key(a), &sort_key(b)));
    merged.clusters = merged
        .clusters
        .into_iter()
        .skip(shape.offset)
        .take(shape.limit)
        .collect();
    merged.facets = facets
        .into_iter()
        .map(|(name, values)| (name, values.into_values().collect()))
        .collect();
    if merged.histogram.is_some() {
        // Laid out in time order by `finish_page`.
        merged.histogram = Some(buckets.into_values().collect());
    }
    finish_page(merged, shape)
}

/// A page whose stories are already cut: its facets cut to `facet_limit` values each (most
/// articles first), its histogram laid out with the empty buckets between.
pub fn finish_page(page: ShardPage, shape: PageShape) -> Result<SearchPage> {
    let histogram = match (page.histogram, shape.histogram) {
        (Some(counts), Some(interval)) => Some(lay_out(
            counts.into_iter().map(FacetCount::from).collect(),
            interval,
        )?),
        _ => None,
    };
    let facets = (!page.facets.is_empty()).then(|| {
        page.facets
            .into_iter()
            .map(|(name, counts)| {
                let counts = counts.into_iter().map(FacetCount::from).collect();
                (name, most_frequent(counts, shape.facet_limit))
            })
            .collect()
    });
    Ok(SearchPage {
        total_hits: page.total_hits,
        total_clusters: page.total_clusters,
        clusters: page.clusters,
        facets,
        histogram,
        histogram_interval: shape.histogram.map(Interval::seconds),
        trend_window: shape.trend.map(|window| window.span().seconds()),
        trend_end: shape.trend.map(TrendWindow::end),
        next_cursor: None,
    })
}

fn add_count<K>(entry: std::collections::hash_map::Entry<'_, K, ShardCount>, count: ShardCount)
where
    K: Eq + std::hash::Hash,
{
    entry
        .and_modify(|sum| {
            sum.articles += count.articles;
            sum.clusters += count.clusters;
        })
        .or_insert(count);
}

/// A facet value as a map key: floats by their bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TaggedKey {
    Text(String),
    Unsigned(u64),
    Signed(i64),
    Float(u64),
    Bool(bool),
}

impl TaggedKey {
    fn of(value: &FacetValue) -> Self {
        match value {
            FacetValue::Text(text) => TaggedKey::Text(text.clone()),
            FacetValue::Unsigned(value) => TaggedKey::Unsigned(*value),
            FacetValue::Signed(value) => TaggedKey::Signed(*value),
            FacetValue::Float(value) => TaggedKey::Float(value.to_bits()),
            FacetValue::Bool(value) => TaggedKey::Bool(*value),
        }
    }
}

/// What the page's order reads of a story of an answer.
pub(crate) fn sort_key(cluster: &ClusterHit) -> SortKey {
    SortKey {
        size: cluster.cluster_size,
        newest: cluster.newest,
        oldest: cluster.oldest,
        score: cluster.score,
        joined: cluster.trend.map_or_else(Joined::default, |trend| Joined {
            recent: trend.recent,
            previous: trend.previous,
        }),
        hot: cluster.hot.unwrap_or(0.0),
        value: cluster.sort_value,
        root: cluster.root,
    }
}

/// The near-duplicates of one text that several shards found, nearest first (then earliest,
/// then by id, the order one index gives), at most `limit`.
pub fn merge_near_duplicates(
    simhash: Fingerprint,
    answers: Vec<NearDuplicates>,
    limit: usize,
) -> NearDuplicates {
    let mut matches: Vec<NearDuplicate> = answers
        .into_iter()
        .flat_map(|answer| answer.matches)
        .collect();
    matches.sort_by(near_duplicate_order);
    matches.truncate(limit);
    NearDuplicates { simhash, matches }
}

/// The order of near-duplicates: nearest fingerprint, then earliest published, then by id.
pub(crate) fn near_duplicate_order(a: &NearDuplicate, b: &NearDuplicate) -> std::cmp::Ordering {
    a.distance
        .cmp(&b.distance)
        .then_with(|| a.document.published_at.cmp(&b.document.published_at))
        .then_with(|| a.document.id.cmp(&b.document.id))
}
