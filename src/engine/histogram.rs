//! A list page's histogram: matching documents and distinct clusters per interval of their
//! publication time, counted by a [`FacetCollector`](crate::engine::FacetCollector) dimension
//! of buckets, then laid out in time order with the empty buckets between.

use std::str::FromStr;

use serde::Serialize;

use crate::config::parse_duration;
use crate::local_time::TimeZone;
use crate::{Error, Result};

/// The most buckets a histogram may have, from its first to its last (empty ones included):
/// a bound on the answer's size and memory.
pub const MAX_HISTOGRAM_BUCKETS: usize = 10_000;

/// The width of a histogram's buckets, whole seconds (`1h`, `1d`, `30m`, or any duration).
///
/// Buckets are aligned on midnight in the index's time zone, so that `1d` buckets are that
/// zone's days (and `1h` its hours).
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

    /// The width in seconds.
    pub fn seconds(self) -> u64 {
        self.0
    }

    /// A time at which a bucket starts: midnight of 1970-01-01 in `zone`.
    pub fn origin(self, zone: TimeZone) -> i64 {
        -i64::from(zone.offset().whole_seconds())
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
