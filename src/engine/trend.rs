//! Trending stories: how many articles joined each story within a recent window against the
//! window before it, counted exactly over a searcher's live documents; and the `hot` blend of
//! relevance, size and recency.
//!
//! A story's figures are the story's own, whatever the query: like its size, they count all its
//! live documents, matching or not (a story is whole on one shard, so a shard's figures are the
//! index's). An article joins at its event time (publication, else arrival).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::RangeInclusive;
use std::str::FromStr;

use tantivy::{DocId, Score, Searcher, SegmentOrdinal};

use crate::config::{format_duration, parse_duration};
use crate::engine::schema::EVENT_TIME;
use crate::forest::Timestamp;
use crate::simhash::FingerprintHasher;
use crate::{Error, Result};

/// The default span of a trend: six hours, a shift of a monitoring desk.
pub const DEFAULT_TREND_SECONDS: u64 = 6 * 3600;

/// The longest trend span: a year.
pub const MAX_TREND_SECONDS: u64 = 366 * 86_400;

/// The length of a trend's window, whole seconds (`6h`, `30m`, `1d`), from 1 second to
/// [`MAX_TREND_SECONDS`].
///
/// ```
/// use tantivy_dedup::engine::TrendSpan;
///
/// let span: TrendSpan = "6h".parse()?;
/// assert_eq!(span.seconds(), 21_600);
/// assert_eq!(span, TrendSpan::default());
/// assert!("0s".parse::<TrendSpan>().is_err());
/// assert!("soon".parse::<TrendSpan>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrendSpan(u64);

impl Default for TrendSpan {
    fn default() -> Self {
        TrendSpan(DEFAULT_TREND_SECONDS)
    }
}

impl TrendSpan {
    /// A span of `seconds`, `None` outside 1..=[`MAX_TREND_SECONDS`].
    pub fn from_seconds(seconds: u64) -> Option<TrendSpan> {
        (1..=MAX_TREND_SECONDS)
            .contains(&seconds)
            .then_some(TrendSpan(seconds))
    }

    /// The length in seconds.
    pub fn seconds(self) -> u64 {
        self.0
    }

    /// The window of this length that ends at `end` (inclusive).
    pub fn ending_at(self, end: Timestamp) -> TrendWindow {
        TrendWindow { span: self, end }
    }
}

impl FromStr for TrendSpan {
    type Err = Error;

    fn from_str(text: &str) -> Result<TrendSpan> {
        let duration = parse_duration(text)
            .map_err(|message| Error::Query(format!("trend window: {message}")))?;
        (duration.subsec_nanos() == 0)
            .then(|| TrendSpan::from_seconds(duration.as_secs()))
            .flatten()
            .ok_or_else(|| {
                Error::Query(format!(
                    "a trend window is a whole number of seconds from 1s to {} (\"6h\", \"30m\", \
                     \"1d\"); got {text:?}",
                    format_duration(std::time::Duration::from_secs(MAX_TREND_SECONDS))
                ))
            })
    }
}

impl std::fmt::Display for TrendSpan {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&format_duration(std::time::Duration::from_secs(self.0)))
    }
}

/// The window a list page's trend figures are counted over: the last [`TrendSpan`] up to `end`
/// (Unix seconds, inclusive), and the window of the same length just before it.
///
/// ```
/// use tantivy_dedup::engine::TrendSpan;
///
/// let window = TrendSpan::from_seconds(3600).unwrap().ending_at(10_000);
/// assert_eq!(window.recent(), 6_401..=10_000);
/// assert_eq!(window.previous(), 2_801..=6_400);
/// // `hot` halves every span of age.
/// assert_eq!(window.decay(10_000), 1.0);
/// assert_eq!(window.decay(6_400), 0.5);
/// assert_eq!(window.decay(20_000), 1.0, "a future time is not younger than now");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrendWindow {
    span: TrendSpan,
    end: Timestamp,
}

impl TrendWindow {
    /// The span.
    pub fn span(self) -> TrendSpan {
        self.span
    }

    /// The end (inclusive).
    pub fn end(self) -> Timestamp {
        self.end
    }

    /// The event times of articles that joined within the window.
    pub fn recent(self) -> RangeInclusive<Timestamp> {
        let length = self.span.0 as i64;
        self.end.saturating_sub(length).saturating_add(1)..=self.end
    }

    /// The event times of the window before.
    pub fn previous(self) -> RangeInclusive<Timestamp> {
        let length = self.span.0 as i64;
        let end = self.end.saturating_sub(length);
        end.saturating_sub(length).saturating_add(1)..=end
    }

    /// How much `hot` keeps of a story whose newest matching article is at `newest`: one half
    /// per span of age (a story as old as the window counts half), 1 for one at or after the
    /// end.
    pub fn decay(self, newest: Timestamp) -> f64 {
        let age = self.end.saturating_sub(newest).max(0) as f64;
        0.5f64.powf(age / self.span.0 as f64)
    }

    /// The `hot` order's value of a story: its best `score` × (1 + ln `size`) × the
    /// [`decay`](Self::decay) of its newest matching article. The relevance of an
    /// Elasticsearch `function_score` with a log-of-popularity factor and an exponential time
    /// decay, in one documented formula.
    ///
    /// ```
    /// use tantivy_dedup::engine::TrendSpan;
    ///
    /// let window = TrendSpan::default().ending_at(100_000);
    /// let fresh_single = window.hot(2.0, 1, 100_000);
    /// let day_old_big = window.hot(2.0, 50, 100_000 - 86_400);
    /// assert_eq!(fresh_single, 2.0);
    /// assert!(day_old_big < fresh_single, "four half-lives outweigh 1 + ln 50");
    /// ```
    pub fn hot(self, score: Score, size: u64, newest: Timestamp) -> f64 {
        popularity(score, size) * self.decay(newest)
    }
}

/// `hot` before its decay: a story's best `score` × (1 + ln `size`), what [`Sort::Hot`]
/// orders by when no window is known.
///
/// [`Sort::Hot`]: crate::engine::Sort::Hot
pub fn popularity(score: Score, size: u64) -> f64 {
    f64::from(score) * (1.0 + (size.max(1) as f64).ln())
}

/// How many articles joined one story within a [`TrendWindow`] and within the window before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Joined {
    /// Articles whose event time is in [`TrendWindow::recent`].
    pub recent: u64,
    /// Articles whose event time is in [`TrendWindow::previous`].
    pub previous: u64,
}

impl Joined {
    /// `recent - previous`: how many more articles joined in the window than in the one
    /// before (negative for a story slowing down). The `trending` order's key.
    pub fn growth(self) -> i64 {
        // Saturating: the counts of a cursor are a client's to write.
        (self.recent as i64).saturating_sub(self.previous as i64)
    }
}

/// Per story number, the [`Joined`] figures of a searcher's live documents for one window:
/// every story with an article in either window, the others 0.
///
/// Counted by one pass per segment over the event-time column, restricted to the two windows,
/// so it costs in proportion to the articles of the last two windows, not to the index. When
/// those are many against the stories (a young index, a long window), the figures are kept in
/// an array by story number; when few, in a map.
///
/// ```
/// use tantivy_dedup::engine::{ClusterOrdinals, DedupIndex, NO_CLUSTER, StoryTrends, TrendSpan};
/// use tantivy_dedup::{Article, config::Config};
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let story = "今天北京天气晴朗，气温回升，适合出行。";
/// for (id, time) in [("1", 1_000), ("2", 5_000), ("3", 9_000)] {
///     let article = Article { id: id.into(), content: story.into(), published_at: Some(time), ..Default::default() };
///     index.add_article(article)?;
/// }
/// index.commit()?;
/// let searcher = index.searcher().tantivy_searcher();
/// let ordinals = ClusterOrdinals::build(&searcher)?;
/// let window = TrendSpan::from_seconds(4_000).unwrap().ending_at(9_000);
/// let trends = StoryTrends::count(&searcher, window, ordinals.number_bound(), |segment, doc| {
///     Some(ordinals.number(segment, doc)).filter(|number| *number != NO_CLUSTER)
/// })?;
/// let figures = trends.of(ordinals.number(0, 0));
/// assert_eq!((figures.recent, figures.previous), (1, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct StoryTrends {
    window: TrendWindow,
    counts: Counts,
}

/// The figures by story number: `[recent, previous]`.
#[derive(Debug, Clone)]
enum Counts {
    /// Indexed by number.
    Dense(Vec<[u32; 2]>),
    /// By number (widened: the map's hasher mixes 64-bit keys).
    Sparse(HashMap<u64, [u32; 2], BuildHasherDefault<FingerprintHasher>>),
}

impl Counts {
    #[inline]
    fn add(&mut self, number: u32, which: usize) {
        match self {
            Counts::Dense(counts) => {
                if let Some(count) = counts.get_mut(number as usize) {
                    count[which] += 1;
                }
            }
            Counts::Sparse(counts) => counts.entry(u64::from(number)).or_default()[which] += 1,
        }
    }

    fn get(&self, number: u32) -> [u32; 2] {
        match self {
            Counts::Dense(counts) => counts.get(number as usize).copied(),
            Counts::Sparse(counts) => counts.get(&u64::from(number)).copied(),
        }
        .unwrap_or_default()
    }
}

impl StoryTrends {
    /// Counts the live documents of `searcher` that joined within `window` or the window
    /// before, per story number; `number` gives a document's story number, below
    /// `number_bound` (`None`: a document without a story, such as a tombstone).
    pub fn count(
        searcher: &Searcher,
        window: TrendWindow,
        number_bound: usize,
        number: impl Fn(SegmentOrdinal, DocId) -> Option<u32>,
    ) -> tantivy::Result<Self> {
        let (recent, previous) = (window.recent(), window.previous());
        let both = *previous.start()..=*recent.end();
        // The documents in range, per segment; then the figures, in an array when the
        // documents are an eighth of the numbers or more (an array costs 8 bytes a number).
        let mut in_range = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let times = segment.fast_fields().i64(EVENT_TIME)?;
            let mut docs = Vec::new();
            times.get_docids_for_value_range(both.clone(), 0..segment.max_doc(), &mut docs);
            in_range.push((times, docs));
        }
        let documents: usize = in_range.iter().map(|(_, docs)| docs.len()).sum();
        let mut counts = if documents.saturating_mul(8) >= number_bound {
            Counts::Dense(vec![[0; 2]; number_bound])
        } else {
            Counts::Sparse(HashMap::with_capacity_and_hasher(
                documents,
                BuildHasherDefault::default(),
            ))
        };
        let mut times_of = Vec::new();
        for (segment_ord, (segment, (times, docs))) in
            searcher.segment_readers().iter().zip(&in_range).enumerate()
        {
            times_of.clear();
            times_of.resize(docs.len(), None);
            times.first_vals(docs, &mut times_of);
            let alive = segment.alive_bitset();
            for (&doc, time) in docs.iter().zip(&times_of) {
                let Some(time) = *time else { continue };
                // The column's range is a first cut: each time is checked.
                let which = if recent.contains(&time) {
                    0
                } else if previous.contains(&time) {
                    1
                } else {
                    continue;
                };
                if alive.is_some_and(|alive| !alive.is_alive(doc)) {
                    continue;
                }
                if let Some(number) = number(segment_ord as SegmentOrdinal, doc) {
                    counts.add(number, which);
                }
            }
        }
        Ok(StoryTrends { window, counts })
    }

    /// The window counted.
    pub fn window(&self) -> TrendWindow {
        self.window
    }

    /// The figures of the story `number` (0 and 0 for a story with no article in either
    /// window).
    pub fn of(&self, number: u32) -> Joined {
        let [recent, previous] = self.counts.get(number);
        Joined {
            recent: u64::from(recent),
            previous: u64::from(previous),
        }
    }
}
