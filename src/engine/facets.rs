//! Counts over all the matches of a list page, not just its page: per value of a field (a
//! facet), or per time bucket (a histogram, see [`crate::engine::histogram`]), how many
//! matching documents have it (`articles`) and how many distinct clusters they belong to
//! (`clusters`).
//!
//! [`FacetCollector`] reads fast columns only (never stored documents) and numbers clusters by
//! the same [`ClusterOrdinals`] the collapse uses, so it runs beside [`CollapseCollector`] in
//! the one pass over the matches (a tuple of collectors).
//!
//! [`CollapseCollector`]: crate::engine::CollapseCollector

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use serde::Serialize;
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, ColumnIndex, StrColumn};
use tantivy::fastfield::FacetReader;
use tantivy::schema::{Facet, Schema};
use tantivy::{DateTime, DocId, Score, SegmentOrdinal, SegmentReader};

use crate::engine::collapse::{ClusterOrdinals, StoryFilter};
use crate::engine::filter::{ValueField, ValueKind};
use crate::engine::histogram::{self, HistogramBucket, Interval};
use crate::simhash::FingerprintHasher;
use crate::{Error, Result};

/// The facet values a list page returns per field unless told otherwise.
pub const DEFAULT_FACET_LIMIT: usize = 20;

/// A value of a field, as answers show it: text for strings and facets (`/a/b`), numbers,
/// booleans, and times as Unix seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FacetValue {
    /// A string or a facet path.
    Text(String),
    /// An unsigned integer.
    Unsigned(u64),
    /// A signed integer, or a time (Unix seconds).
    Signed(i64),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
}

/// In the OpenAPI document: any of a string, a number or a boolean. Written by hand because
/// the derived schema would be `oneOf` its variants, which a whole number matches several
/// of (unsigned, signed, and a number), so that no value would validate.
#[cfg(feature = "server")]
impl utoipa::PartialSchema for FacetValue {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Type};
        AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("A string, or a facet's path (`/a/b`)")),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .description(Some("A number; a time as Unix seconds")),
            )
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .description(Some("A value of a field, as answers show it"))
            .into()
    }
}

#[cfg(feature = "server")]
impl utoipa::ToSchema for FacetValue {}

impl std::fmt::Display for FacetValue {
    /// The value as a person reads it: text as it is, numbers and booleans as JSON writes them.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FacetValue::Text(text) => formatter.write_str(text),
            FacetValue::Unsigned(number) => write!(formatter, "{number}"),
            FacetValue::Signed(number) => write!(formatter, "{number}"),
            FacetValue::Float(number) => write!(formatter, "{number}"),
            FacetValue::Bool(value) => write!(formatter, "{value}"),
        }
    }
}

/// One value's counts over all matching documents.
///
/// ```
/// use tantivy_dedup::engine::{FacetCount, FacetValue};
///
/// let count = FacetCount { value: FacetValue::Text("新华网".into()), articles: 12, clusters: 5 };
/// assert_eq!(
///     serde_json::to_string(&count)?,
///     r#"{"value":"新华网","articles":12,"clusters":5}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "server",
    schema(description = "One value's counts over all matching documents.")
)]
pub struct FacetCount {
    /// The value.
    pub value: FacetValue,
    /// Matching documents with this value.
    pub articles: u64,
    /// Distinct clusters among them.
    pub clusters: u64,
}

/// What one dimension of a [`FacetCollector`] counts by.
#[derive(Debug, Clone)]
pub struct Dimension {
    /// The field's name (a fast field).
    name: String,
    kind: ValueKind,
    /// `Some((interval, origin))`: a date field counted by buckets of `interval` aligned on
    /// `origin` ([`Interval::bucket_start`]).
    buckets: Option<(Interval, i64)>,
}

impl Dimension {
    /// Counts by the values of field `name` of `schema`: a declared value field
    /// ([`ValueField`]) that is fast, or an [`Error::Query`] that says why not.
    ///
    /// ```
    /// use tantivy::schema::{Schema, FAST, STRING, TEXT};
    /// use tantivy_dedup::engine::Dimension;
    ///
    /// let mut builder = Schema::builder();
    /// builder.add_text_field("source", STRING | FAST);
    /// builder.add_text_field("url", STRING);
    /// builder.add_text_field("content", TEXT);
    /// let schema = builder.build();
    /// assert!(Dimension::values(&schema, "source").is_ok());
    /// assert!(Dimension::values(&schema, "url").unwrap_err().to_string().contains("not a fast field"));
    /// assert!(Dimension::values(&schema, "content").is_err());
    /// ```
    pub fn values(schema: &Schema, name: &str) -> Result<Dimension> {
        let field = ValueField::find(schema, name, "count")?;
        if !field.fast {
            return Err(Error::Query(format!(
                "cannot count the values of {name:?}: it is not a fast field (declare it \
                 `fast = true`, or count another field)"
            )));
        }
        Ok(Dimension {
            name: name.to_owned(),
            kind: field.kind,
            buckets: None,
        })
    }

    /// Counts the date field `name` of `schema` by buckets of `interval` aligned on `origin`
    /// (Unix seconds: a bucket starts there, and every interval before and after).
    pub fn buckets(
        schema: &Schema,
        name: &str,
        interval: Interval,
        origin: i64,
    ) -> Result<Dimension> {
        let dimension = Dimension::values(schema, name)?;
        if dimension.kind != ValueKind::Date {
            return Err(Error::Query(format!(
                "{name:?} is not a date field, so it has no histogram"
            )));
        }
        Ok(Dimension {
            buckets: Some((interval, origin)),
            ..dimension
        })
    }
}

/// Counts, per [`Dimension`], each value's matching documents and distinct clusters, over
/// every match (documents without a cluster, tombstones, are skipped; so are clusters below
/// the minimum size, as the collapse skips them). Its fruit has one list per dimension, in
/// the dimensions' order, each value once, in no particular order.
///
/// ```
/// use std::sync::Arc;
/// use tantivy::query::AllQuery;
/// use tantivy_dedup::engine::{ClusterOrdinals, DedupIndex, Dimension, FacetCollector, FacetValue};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let story = "今天北京天气晴朗，气温回升，适合出行。";
/// for (id, source) in [("1", "新华网"), ("2", "新华网"), ("3", "人民网")] {
///     let article = Article { id: id.into(), source: Some(source.into()), content: story.into(), ..Default::default() };
///     index.add_article(article)?;
/// }
/// index.commit()?;
/// let searcher = index.searcher().tantivy_searcher();
/// let ordinals = Arc::new(ClusterOrdinals::build(&searcher)?);
/// let sources = Dimension::values(&searcher.schema(), "source")?;
/// let counts = searcher.search(&AllQuery, &FacetCollector::new(ordinals, vec![sources]))?;
/// let xinhua = counts[0].iter().find(|count| count.value == FacetValue::Text("新华网".into())).unwrap();
/// assert_eq!((xinhua.articles, xinhua.clusters), (2, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct FacetCollector {
    ordinals: Arc<ClusterOrdinals>,
    dimensions: Vec<Dimension>,
    stories: StoryFilter,
}

impl FacetCollector {
    /// A collector for the searcher `ordinals` were built for.
    pub fn new(ordinals: Arc<ClusterOrdinals>, dimensions: Vec<Dimension>) -> Self {
        FacetCollector {
            stories: StoryFilter::new(Arc::clone(&ordinals)),
            ordinals,
            dimensions,
        }
    }

    /// Counts only the documents of the stories `stories` keeps (those of the page's
    /// [`CollapseCollector`](crate::engine::CollapseCollector), for numbers of the same
    /// generation as `ordinals`).
    pub fn stories(mut self, stories: StoryFilter) -> Self {
        self.stories = stories;
        self
    }
}

/// One value's tally in a segment or over all: its documents, how many of them are alone in
/// their cluster (each such document is a distinct cluster of its own), and the cluster number
/// of each of the others (repeated numbers are counted once, at the end, against a bit per
/// cluster).
#[derive(Debug, Default)]
struct Tally {
    articles: u64,
    alone: u64,
    clusters: Vec<u32>,
}

/// How a segment's values of one dimension are read: a key per value, turned into the value
/// at harvest (string ordinals into their text, once per distinct ordinal).
enum Keys {
    Strings(StrColumn),
    Facets(FacetReader),
    U64(Column<u64>),
    I64(Column<i64>),
    F64(Column<f64>),
    Bool(Column<bool>),
    Dates(Column<DateTime>),
    /// Time buckets, keyed by their number from `first`, the start of the segment's earliest
    /// bucket: (column, interval, first).
    Buckets(Column<DateTime>, Interval, i64),
    /// The segment has no value of the field.
    None,
}

impl Keys {
    fn open(dimension: &Dimension, segment: &SegmentReader) -> tantivy::Result<Keys> {
        let fast = segment.fast_fields();
        let name = dimension.name.as_str();
        Ok(match (dimension.kind, dimension.buckets) {
            (ValueKind::Date, Some((interval, origin))) => {
                match fast.column_opt::<DateTime>(name)? {
                    Some(column) => {
                        let earliest = column.min_value().into_timestamp_secs();
                        let first = interval.bucket_start(earliest, origin);
                        Keys::Buckets(column, interval, first)
                    }
                    None => Keys::None,
                }
            }
            (ValueKind::String, _) => fast.str(name)?.map_or(Keys::None, Keys::Strings),
            (ValueKind::Facet, _) => Keys::Facets(segment.facet_reader(name)?),
            (ValueKind::U64, _) => fast.column_opt(name)?.map_or(Keys::None, Keys::U64),
            (ValueKind::I64, _) => fast.column_opt(name)?.map_or(Keys::None, Keys::I64),
            (ValueKind::F64, _) => fast.column_opt(name)?.map_or(Keys::None, Keys::F64),
            (ValueKind::Bool, _) => fast.column_opt(name)?.map_or(Keys::None, Keys::Bool),
            (ValueKind::Date, None) => fast.column_opt(name)?.map_or(Keys::None, Keys::Dates),
        })
    }

    /// Appends the keys of `doc`'s values to `keys`.
    fn read(&self, doc: DocId, keys: &mut Vec<u64>) {
        match self {
            Keys::Strings(column) => each_value(column.ords(), doc, |ord| keys.push(ord)),
            Keys::Facets(reader) => keys.extend(reader.facet_ords(doc)),
            Keys::U64(column) => each_value(column, doc, |value| keys.push(value)),
            Keys::I64(column) => each_value(column, doc, |value| keys.push(value as u64)),
            Keys::F64(column) => each_value(column, doc, |value| keys.push(value.to_bits())),
            Keys::Bool(column) => each_value(column, doc, |value| keys.push(u64::from(value))),
            Keys::Dates(column) => each_value(column, doc, |time| {
                keys.push(time.into_timestamp_secs() as u64)
            }),
            // `first` starts a bucket and no time of the segment is earlier, so the distance
            // from it in whole intervals is the bucket's number.
            Keys::Buckets(column, interval, first) => each_value(column, doc, |time| {
                let since_first = time.into_timestamp_secs().saturating_sub(*first);
                keys.push((since_first / interval.width()) as u64)
            }),
            Keys::None => {}
        }
    }

    /// How many keys the segment can have, when they are the numbers `0..n` for a small
    /// enough `n` to tally them in a vector; `None` otherwise.
    fn dense_len(&self) -> Option<usize> {
        let len = match self {
            Keys::Strings(column) => column.num_terms(),
            Keys::Facets(reader) => reader.num_facets(),
            Keys::Bool(_) => 2,
            Keys::Buckets(column, interval, first) => {
                let latest = column.max_value().into_timestamp_secs();
                usize::try_from(latest.saturating_sub(*first) / interval.width())
                    .ok()?
                    .saturating_add(1)
            }
            _ => return None,
        };
        (len <= MAX_DENSE_KEYS).then_some(len)
    }

    /// The value a key stands for; `None` for an ordinal the dictionary does not hold.
    fn value(&self, key: u64) -> tantivy::Result<Option<FacetValue>> {
        Ok(Some(match self {
            Keys::Strings(column) => {
                let mut text = String::new();
                if !column.ord_to_str(key, &mut text)? {
                    return Ok(None);
                }
                FacetValue::Text(text)
            }
            Keys::Facets(reader) => {
                let mut facet = Facet::root();
                reader.facet_from_ord(key, &mut facet)?;
                FacetValue::Text(facet.to_string())
            }
            Keys::U64(_) => FacetValue::Unsigned(key),
            Keys::I64(_) | Keys::Dates(_) => FacetValue::Signed(key as i64),
            Keys::Buckets(_, interval, first) => {
                FacetValue::Signed(first.saturating_add(key as i64 * interval.width()))
            }
            Keys::F64(_) => FacetValue::Float(f64::from_bits(key)),
            Keys::Bool(_) => FacetValue::Bool(key != 0),
            Keys::None => return Ok(None),
        }))
    }
}

/// Calls `each` with `doc`'s values in `column`. A column with a value in every document (a
/// document's time, a single-valued field filled everywhere) is read at the document's row
/// directly, without the iterator over its row range: this runs once per match and field.
#[inline]
fn each_value<T>(column: &Column<T>, doc: DocId, mut each: impl FnMut(T))
where
    T: PartialOrd + Copy + std::fmt::Debug + Send + Sync + 'static,
{
    match column.index {
        ColumnIndex::Full => each(column.values.get_val(doc)),
        _ => column.values_for_doc(doc).for_each(each),
    }
}

/// [`FacetCollector`]'s work on one segment.
pub struct FacetSegmentCollector {
    ordinals: Arc<ClusterOrdinals>,
    segment_ord: SegmentOrdinal,
    stories: StoryFilter,
    keys: Vec<Keys>,
    tallies: Vec<KeyTallies>,
    /// The current document's keys of one dimension (reused).
    scratch: Vec<u64>,
}

/// The most keys tallied in a vector: a dictionary or time range larger than this is tallied
/// in a map instead, so that a segment's tallies never take more memory than its matches.
const MAX_DENSE_KEYS: usize = 1 << 16;

/// A segment's tallies of one dimension by key, touched once per matching document: in a
/// vector indexed by key when keys are dense (ordinals, bucket numbers), grown to the largest
/// key seen; else in a map (keys are numbers, so one multiplication spreads them well).
enum KeyTallies {
    Dense(Vec<Tally>),
    Sparse(HashMap<u64, Tally, BuildHasherDefault<FingerprintHasher>>),
}

impl KeyTallies {
    fn for_keys(keys: &Keys) -> KeyTallies {
        match keys.dense_len() {
            Some(_) => KeyTallies::Dense(Vec::new()),
            None => KeyTallies::Sparse(HashMap::default()),
        }
    }

    fn tally(&mut self, key: u64) -> &mut Tally {
        match self {
            KeyTallies::Dense(tallies) => {
                let at = key as usize;
                if at >= tallies.len() {
                    tallies.resize_with(at + 1, Tally::default);
                }
                &mut tallies[at]
            }
            KeyTallies::Sparse(tallies) => tallies.entry(key).or_default(),
        }
    }

    /// The keys that were tallied, with their tallies.
    fn into_tallies(self) -> Box<dyn Iterator<Item = (u64, Tally)>> {
        match self {
            KeyTallies::Dense(tallies) => Box::new(
                tallies
                    .into_iter()
                    .enumerate()
                    .filter(|(_, tally)| tally.articles > 0)
                    .map(|(key, tally)| (key as u64, tally)),
            ),
            KeyTallies::Sparse(tallies) => Box::new(tallies.into_iter()),
        }
    }
}

/// One segment's tallies per dimension, as (value, tally) pairs in `compare_values` order
/// with each value once (opaque outside this module).
pub struct FacetFruit(Vec<Vec<(FacetValue, Tally)>>);

impl SegmentCollector for FacetSegmentCollector {
    type Fruit = FacetFruit;

    fn collect(&mut self, doc: DocId, _score: Score) {
        let Some(number) = self.stories.kept(self.segment_ord, doc) else {
            return;
        };
        let alone = self.ordinals.size(number) == 1;
        for (keys, tallies) in self.keys.iter().zip(&mut self.tallies) {
            self.scratch.clear();
            keys.read(doc, &mut self.scratch);
            if self.scratch.len() > 1 {
                // A document counts once per value, however often it holds it.
                self.scratch.sort_unstable();
                self.scratch.dedup();
            }
            for &key in &self.scratch {
                let tally = tallies.tally(key);
                tally.articles += 1;
                if alone {
                    tally.alone += 1;
                } else {
                    tally.clusters.push(number);
                }
            }
        }
    }

    fn harvest(self) -> FacetFruit {
        let mut fruit = Vec::with_capacity(self.keys.len());
        for (keys, tallies) in self.keys.iter().zip(self.tallies) {
            // A dictionary that cannot be read leaves its values out rather than failing the
            // page (harvest cannot fail); `check` reports such damage.
            let mut by_value: Vec<(FacetValue, Tally)> = tallies
                .into_tallies()
                .filter_map(|(key, tally)| Some((keys.value(key).ok()??, tally)))
                .collect();
            // Ordinals and bucket numbers come in value order already, which the sort finds
            // in one pass.
            by_value.sort_by(|(a, _), (b, _)| compare_values(a, b));
            fruit.push(by_value);
        }
        FacetFruit(fruit)
    }
}

/// The segments' tallies of one dimension merged: each value once, in [`compare_values`]
/// order. The segments' lists are each sorted, so the sort merges runs.
fn merge_segments(segments: Vec<Vec<(FacetValue, Tally)>>) -> Vec<(FacetValue, Tally)> {
    let mut all: Vec<(FacetValue, Tally)> = segments.into_iter().flatten().collect();
    all.sort_by(|(a, _), (b, _)| compare_values(a, b));
    let mut merged: Vec<(FacetValue, Tally)> = Vec::with_capacity(all.len());
    for (value, tally) in all {
        match merged.last_mut() {
            Some((last, into)) if compare_values(last, &value).is_eq() => {
                into.articles += tally.articles;
                into.alone += tally.alone;
                into.clusters.extend(tally.clusters);
            }
            _ => merged.push((value, tally)),
        }
    }
    merged
}

impl Collector for FacetCollector {
    type Fruit = Vec<Vec<FacetCount>>;
    type Child = FacetSegmentCollector;

    fn for_segment(
        &self,
        segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<FacetSegmentCollector> {
        self.ordinals.check_segment(segment_ord, segment)?;
        let keys = self
            .dimensions
            .iter()
            .map(|dimension| Keys::open(dimension, segment))
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(FacetSegmentCollector {
            ordinals: Arc::clone(&self.ordinals),
            segment_ord,
            stories: self.stories.clone(),
            tallies: keys.iter().map(KeyTallies::for_keys).collect(),
            keys,
            scratch: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, segments: Vec<FacetFruit>) -> tantivy::Result<Vec<Vec<FacetCount>>> {
        let mut by_dimension: Vec<Vec<Vec<(FacetValue, Tally)>>> =
            self.dimensions.iter().map(|_| Vec::new()).collect();
        for FacetFruit(dimensions) in segments {
            for (into, tallies) in by_dimension.iter_mut().zip(dimensions) {
                into.push(tallies);
            }
        }
        // Distinct clusters of a value: a bit per cluster number, set on first sight and
        // cleared again after the value (linear in the hits; a sort would be n log n).
        let mut seen = vec![0u64; self.ordinals.number_bound().div_ceil(64)];
        Ok(by_dimension
            .into_iter()
            .map(|segments| {
                merge_segments(segments)
                    .into_iter()
                    .map(|(value, tally)| FacetCount {
                        value,
                        articles: tally.articles,
                        clusters: tally.alone + count_distinct(&tally.clusters, &mut seen),
                    })
                    .collect()
            })
            .collect())
    }
}

/// How many distinct numbers `clusters` holds, with `seen` (a bit per cluster number, all clear)
/// as scratch; leaves `seen` clear.
fn count_distinct(clusters: &[u32], seen: &mut [u64]) -> u64 {
    let mut distinct = 0;
    for &number in clusters {
        let (word, bit) = (number as usize / 64, 1u64 << (number % 64));
        if seen[word] & bit == 0 {
            seen[word] |= bit;
            distinct += 1;
        }
    }
    for &number in clusters {
        seen[number as usize / 64] = 0;
    }
    distinct
}

/// The `limit` values with most articles (then most clusters, then the smallest value, so
/// that the order is repeatable), in that order.
pub fn most_frequent(mut counts: Vec<FacetCount>, limit: usize) -> Vec<FacetCount> {
    counts.sort_by(|a, b| {
        b.articles
            .cmp(&a.articles)
            .then(b.clusters.cmp(&a.clusters))
            .then_with(|| compare_values(&a.value, &b.value))
    });
    counts.truncate(limit);
    counts
}

/// The buckets from the first counted to the last, in time order, those without documents
/// included with zero counts. `counts` are a bucket dimension's counts (each value the start
/// of its bucket, a multiple of `interval` from its origin). More than
/// [`MAX_HISTOGRAM_BUCKETS`](crate::engine::MAX_HISTOGRAM_BUCKETS) is an [`Error::Query`](crate::Error::Query) asking for a wider interval or a narrower
/// time range.
pub fn lay_out(counts: Vec<FacetCount>, interval: Interval) -> Result<Vec<HistogramBucket>> {
    let counted = counts
        .into_iter()
        .filter_map(|count| match count.value {
            FacetValue::Signed(start) => Some((start, (count.articles, count.clusters))),
            _ => None,
        })
        .collect();
    Ok(histogram::fill_gaps(counted, interval)?
        .into_iter()
        .map(|(start, (articles, clusters))| HistogramBucket {
            start,
            articles,
            clusters,
        })
        .collect())
}

/// A total order of values: by kind, then by value (floats by `total_cmp`).
fn compare_values(a: &FacetValue, b: &FacetValue) -> std::cmp::Ordering {
    use FacetValue::*;
    match (a, b) {
        (Text(a), Text(b)) => a.cmp(b),
        (Unsigned(a), Unsigned(b)) => a.cmp(b),
        (Signed(a), Signed(b)) => a.cmp(b),
        (Float(a), Float(b)) => a.total_cmp(b),
        (Bool(a), Bool(b)) => a.cmp(b),
        _ => a.rank().cmp(&b.rank()),
    }
}

impl FacetValue {
    /// The kind's place in [`compare_values`]'s order.
    fn rank(&self) -> u8 {
        match self {
            FacetValue::Unsigned(_) => 0,
            FacetValue::Signed(_) => 1,
            FacetValue::Float(_) => 2,
            FacetValue::Bool(_) => 3,
            FacetValue::Text(_) => 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(start: i64, articles: u64) -> FacetCount {
        FacetCount {
            value: FacetValue::Signed(start),
            articles,
            clusters: 1,
        }
    }

    #[test]
    fn empty_buckets_fill_the_gaps() {
        let hour: Interval = "1h".parse().unwrap();
        let buckets = lay_out(vec![count(7200, 2), count(0, 1)], hour).unwrap();
        let starts: Vec<(i64, u64)> = buckets.iter().map(|b| (b.start, b.articles)).collect();
        assert_eq!(starts, [(0, 1), (3600, 0), (7200, 2)]);
        assert!(lay_out(Vec::new(), hour).unwrap().is_empty());
        let second: Interval = "1s".parse().unwrap();
        assert!(lay_out(vec![count(0, 1), count(1_000_000, 1)], second).is_err());
    }
}
