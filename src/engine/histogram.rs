//! A list page's histogram: matching documents and distinct clusters per interval of their
//! publication time, counted by a [`FacetCollector`](crate::engine::FacetCollector) dimension
//! of buckets, then laid out in time order with the empty buckets between.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::{format_duration, parse_duration};
use crate::local_time::TimeZone;
use crate::{Error, Result};

/// The most buckets a histogram may have, from its first to its last (empty ones included):
/// a bound on the answer's size and memory.
pub const MAX_HISTOGRAM_BUCKETS: usize = 10_000;

/// The most buckets an `auto` histogram has: a chart's worth, a few kilobytes of answer.
pub const AUTO_MAX_BUCKETS: u64 = 200;

/// The widths an `auto` histogram chooses from, finest first; past the last, whole numbers of
/// 365-day years.
const AUTO_WIDTHS: [u64; 8] = [
    3_600,
    3 * 3_600,
    6 * 3_600,
    12 * 3_600,
    DAY,
    7 * DAY,
    30 * DAY,
    YEAR,
];
const DAY: u64 = 86_400;
const YEAR: u64 = 365 * DAY;
/// 1970-01-05, the first Monday after the origin: weeks start on Mondays.
const FIRST_MONDAY: i64 = 4 * DAY as i64;

/// The width of a histogram's buckets, whole seconds (`1h`, `1d`, `30m`, or any duration).
///
/// Buckets are aligned on midnight in the index's time zone, so that `1d` buckets are that
/// zone's days (and `1h` its hours); a whole number of weeks starts on a Monday.
///
/// ```
/// use tantivy_dedup::engine::Interval;
/// use tantivy_dedup::local_time::TimeZone;
///
/// let day: Interval = "1d".parse()?;
/// assert_eq!(day.seconds(), 86_400);
/// // 2024-05-01T00:00:00+08:00 starts a day in China.
/// assert_eq!(day.origin(TimeZone::CHINA).rem_euclid(86_400), 1_714_492_800 % 86_400);
/// assert!("0s".parse::<Interval>().is_err());
/// assert!("often".parse::<Interval>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(u64);

impl FromStr for Interval {
    type Err = Error;

    fn from_str(text: &str) -> Result<Interval> {
        let duration = parse_duration(text)
            .map_err(|message| Error::Query(format!("histogram interval: {message}")))?;
        if duration.as_secs() == 0 || duration.subsec_nanos() != 0 {
            return Err(Error::Query(format!(
                "a histogram interval is a whole number of seconds, at least 1 (\"1h\", \"1d\", \
                 \"30m\"); got {text:?}"
            )));
        }
        Ok(Interval(duration.as_secs()))
    }
}

impl Interval {
    /// An hour.
    pub const HOUR: Interval = Interval(3600);

    /// An interval of `seconds` (none of 0).
    pub fn from_seconds(seconds: u64) -> Option<Interval> {
        (seconds > 0).then_some(Interval(seconds))
    }

    /// The width in seconds.
    pub fn seconds(self) -> u64 {
        self.0
    }

    /// A time at which a bucket starts: midnight of 1970-01-01 in `zone` (of Monday
    /// 1970-01-05 when the width is whole weeks).
    ///
    /// ```
    /// use tantivy_dedup::engine::Interval;
    /// use tantivy_dedup::local_time::TimeZone;
    ///
    /// let week: Interval = "7d".parse()?;
    /// // 2024-04-29 was a Monday.
    /// let monday = 1_714_348_800;
    /// assert_eq!(week.bucket_start(monday + 86_400, week.origin(TimeZone::UTC)), monday);
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn origin(self, zone: TimeZone) -> i64 {
        let midnight = -i64::from(zone.offset().whole_seconds());
        if self.0.is_multiple_of(7 * DAY) {
            midnight + FIRST_MONDAY
        } else {
            midnight
        }
    }

    /// The finest of 1h, 3h, 6h, 12h, 1d, 7d, 30d and 365d (then whole numbers of 365d) whose
    /// buckets, aligned in `zone`, cover `span` in at most [`AUTO_MAX_BUCKETS`].
    ///
    /// ```
    /// use tantivy_dedup::engine::{Interval, TimeSpan};
    /// use tantivy_dedup::local_time::TimeZone;
    ///
    /// let fitting = |days: i64| Interval::fitting(TimeSpan::new(0, days * 86_400), TimeZone::UTC).seconds();
    /// assert_eq!(fitting(2), 3_600);
    /// assert_eq!(fitting(100), 86_400);
    /// assert_eq!(fitting(5 * 365), 30 * 86_400);
    /// assert_eq!(fitting(36 * 365), 365 * 86_400);
    /// assert_eq!(fitting(1_000 * 365), 6 * 365 * 86_400);
    /// ```
    pub fn fitting(span: TimeSpan, zone: TimeZone) -> Interval {
        let fits = |interval: Interval| interval.buckets(span, zone) <= AUTO_MAX_BUCKETS;
        if let Some(width) = AUTO_WIDTHS
            .into_iter()
            .map(Interval)
            .find(|&width| fits(width))
        {
            return width;
        }
        let years = u64::try_from(span.last.saturating_sub(span.first)).unwrap_or(u64::MAX) / YEAR;
        // Enough years a bucket for the span, one more for the alignment: then it fits.
        let mut width = Interval(YEAR.saturating_mul(years / AUTO_MAX_BUCKETS + 1));
        while !fits(width) {
            width = Interval(width.0.saturating_add(YEAR));
        }
        width
    }

    /// How many buckets, aligned in `zone`, `span` covers.
    fn buckets(self, span: TimeSpan, zone: TimeZone) -> u64 {
        let origin = self.origin(zone);
        let first = self.bucket_start(span.first, origin);
        let last = self.bucket_start(span.last, origin);
        u64::try_from(last.saturating_sub(first)).unwrap_or(0) / self.0 + 1
    }

    /// The width in seconds, as a time difference.
    pub(crate) fn width(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// The start of the bucket holding `time`, buckets starting at `origin` and every
    /// [`seconds`](Self::seconds) before and after it.
    ///
    /// ```
    /// use tantivy_dedup::engine::Interval;
    ///
    /// let hour = Interval::HOUR;
    /// assert_eq!(hour.bucket_start(7_300, 0), 7_200);
    /// assert_eq!(hour.bucket_start(-1, 0), -3_600);
    /// assert_eq!(hour.bucket_start(7_300, 1_800), 5_400);
    /// ```
    pub fn bucket_start(self, time: i64, origin: i64) -> i64 {
        let width = self.width();
        origin.saturating_add(time.saturating_sub(origin).div_euclid(width) * width)
    }
}

/// Written as it is read ([`format_duration`]: `1d`, `3h`, `1h 30m`).
///
/// ```
/// use tantivy_dedup::engine::Interval;
///
/// let widths = ["30d", "12h", "90m", "1d 1s"].map(|text| text.parse::<Interval>().unwrap().to_string());
/// assert_eq!(widths, ["30d", "12h", "1h 30m", "1d 1s"]);
/// ```
impl std::fmt::Display for Interval {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&format_duration(std::time::Duration::from_secs(self.0)))
    }
}

/// How wide a histogram's buckets are: a fixed [`Interval`], or `auto`, the finest that
/// shows the matching documents' time span in at most [`AUTO_MAX_BUCKETS`]
/// ([`Interval::fitting`]); what a page asks for unless the reader chose.
///
/// ```
/// use tantivy_dedup::engine::{HistogramWidth, Interval, TimeSpan};
/// use tantivy_dedup::local_time::TimeZone;
///
/// let auto: HistogramWidth = "auto".parse()?;
/// let week = TimeSpan::new(0, 7 * 86_400);
/// assert_eq!(auto.resolve(Some(week), TimeZone::UTC), Interval::HOUR);
/// let fixed: HistogramWidth = "1d".parse()?;
/// assert_eq!(fixed.resolve(Some(week), TimeZone::UTC).seconds(), 86_400);
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistogramWidth {
    /// Buckets of this width, whatever the span.
    Fixed(Interval),
    /// Buckets sized to the span.
    Auto,
}

impl HistogramWidth {
    /// The interval the buckets have over `span` (the times there are to show; `None`: none,
    /// and an `auto` width is then an hour).
    pub fn resolve(self, span: Option<TimeSpan>, zone: TimeZone) -> Interval {
        match (self, span) {
            (HistogramWidth::Fixed(interval), _) => interval,
            (HistogramWidth::Auto, Some(span)) => Interval::fitting(span, zone),
            (HistogramWidth::Auto, None) => Interval::HOUR,
        }
    }
}

impl From<Interval> for HistogramWidth {
    fn from(interval: Interval) -> Self {
        HistogramWidth::Fixed(interval)
    }
}

impl FromStr for HistogramWidth {
    type Err = Error;

    fn from_str(text: &str) -> Result<HistogramWidth> {
        if text.trim() == "auto" {
            Ok(HistogramWidth::Auto)
        } else {
            text.parse().map(HistogramWidth::Fixed)
        }
    }
}

/// The first and last of some publication times (Unix seconds), both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSpan {
    /// The earliest.
    pub first: i64,
    /// The latest (at least `first`).
    pub last: i64,
}

impl TimeSpan {
    /// The span from `first` to `last` (in either order).
    pub fn new(first: i64, last: i64) -> TimeSpan {
        TimeSpan {
            first: first.min(last),
            last: first.max(last),
        }
    }

    /// The span covering both.
    pub fn union(self, other: TimeSpan) -> TimeSpan {
        TimeSpan::new(self.first.min(other.first), self.last.max(other.last))
    }

    /// The part from `from` to `to` (each included when given); `None` when nothing is left.
    pub fn clip(self, from: Option<i64>, to: Option<i64>) -> Option<TimeSpan> {
        let first = from.map_or(self.first, |from| self.first.max(from));
        let last = to.map_or(self.last, |to| self.last.min(to));
        (first <= last).then_some(TimeSpan { first, last })
    }
}

/// One bucket of a histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct HistogramBucket {
    /// Where the bucket starts, Unix seconds; it ends where the next one starts.
    pub start: i64,
    /// Matching documents published in it.
    pub articles: u64,
    /// Distinct clusters among them.
    pub clusters: u64,
}

/// Counts keyed by their bucket's start, from the first to the last in time order, the
/// buckets between filled with `T::default()`; more than [`MAX_HISTOGRAM_BUCKETS`] is an
/// [`Error::Query`]. What [`lay_out`](crate::engine::lay_out) and the story view's spread
/// share.
pub(crate) fn fill_gaps<T: Default>(
    mut counted: Vec<(i64, T)>,
    interval: Interval,
) -> Result<Vec<(i64, T)>> {
    counted.sort_unstable_by_key(|(start, _)| *start);
    let (Some(&(first, _)), Some(&(last, _))) = (counted.first(), counted.last()) else {
        return Ok(Vec::new());
    };
    let width = interval.width();
    let span = (last.saturating_sub(first) / width).saturating_add(1);
    if span > MAX_HISTOGRAM_BUCKETS as i64 {
        return Err(Error::Query(format!(
            "the histogram would have {span} buckets (at most {MAX_HISTOGRAM_BUCKETS}); ask for \
             a wider interval or a narrower time range"
        )));
    }
    let mut buckets = Vec::with_capacity(span as usize);
    let mut counted = counted.into_iter().peekable();
    for step in 0..span {
        let start = first + step * width;
        match counted.next_if(|(at, _)| *at == start) {
            Some(bucket) => buckets.push(bucket),
            None => buckets.push((start, T::default())),
        }
    }
    Ok(buckets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_whole_seconds() {
        assert_eq!("30m".parse::<Interval>().unwrap().seconds(), 1800);
        assert_eq!(" 1h ".parse::<Interval>().unwrap().seconds(), 3600);
        for bad in ["", "0s", "1.5s", "500ms", "1 fortnight", "-1h"] {
            assert!(bad.parse::<Interval>().is_err(), "{bad}");
        }
        assert_eq!(
            "1d".parse::<Interval>().unwrap().origin(TimeZone::CHINA),
            -28_800
        );
    }
}
