//! A time limit on a search: [`DeadlineCollector`] wraps any Tantivy collector and stops it
//! once a given instant has passed, so that a heavy read gives its core back instead of
//! making every read behind it wait.
//!
//! Invariant: the wrapped collector's fruit is returned only when it saw every match; a cut
//! search has no fruit at all ([`None`]), never a partial one, so an answer is exact or is
//! not given.

use std::time::Instant;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::{DocId, Score, SegmentOrdinal, SegmentReader};

/// Matches collected between two looks at the clock: a look costs some tens of nanoseconds,
/// a match about as much, so the check is a small fraction of the work however long the
/// search. The first match is looked at too, so a deadline already past cuts any search that
/// matches something.
const MATCHES_PER_CHECK: u32 = 1024;

/// Runs `inner` until a deadline, if it has one: its fruit is `Some` when the search
/// finished in time, `None` when it was cut.
///
/// Past the deadline the segment collectors ignore the matches still coming: Tantivy walks
/// them to the end of each segment (a collector cannot stop a search), which costs a small
/// part of collecting them.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tantivy::collector::Count;
/// use tantivy::query::AllQuery;
/// use tantivy::schema::{Schema, STORED, TEXT};
/// use tantivy::{Index, doc};
/// use tantivy_dedup::engine::DeadlineCollector;
///
/// # fn main() -> tantivy::Result<()> {
/// let mut schema = Schema::builder();
/// let title = schema.add_text_field("title", TEXT | STORED);
/// let index = Index::create_in_ram(schema.build());
/// let mut writer = index.writer_with_num_threads(1, 15_000_000)?;
/// writer.add_document(doc!(title => "one"))?;
/// writer.add_document(doc!(title => "two"))?;
/// writer.commit()?;
/// let searcher = index.reader()?.searcher();
///
/// let in_time = DeadlineCollector::new(Count, Instant::now() + Duration::from_secs(60));
/// assert_eq!(searcher.search(&AllQuery, &in_time)?, Some(2));
/// let too_late = DeadlineCollector::new(Count, Instant::now());
/// assert_eq!(searcher.search(&AllQuery, &too_late)?, None);
/// # Ok(())
/// # }
/// ```
pub struct DeadlineCollector<C> {
    inner: C,
    deadline: Option<Instant>,
}

impl<C: Collector> DeadlineCollector<C> {
    /// `inner`, stopped at `deadline` (an `Instant`, or an `Option` of one: `None` never
    /// stops it).
    pub fn new(inner: C, deadline: impl Into<Option<Instant>>) -> Self {
        DeadlineCollector {
            inner,
            deadline: deadline.into(),
        }
    }
}

impl<C: Collector> Collector for DeadlineCollector<C> {
    type Fruit = Option<C::Fruit>;
    type Child = DeadlineSegmentCollector<C::Child>;

    fn for_segment(
        &self,
        segment_ordinal: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<Self::Child> {
        Ok(DeadlineSegmentCollector {
            inner: self.inner.for_segment(segment_ordinal, segment)?,
            deadline: self.deadline,
            until_check: 0,
            cut: false,
        })
    }

    fn requires_scoring(&self) -> bool {
        self.inner.requires_scoring()
    }

    fn merge_fruits(
        &self,
        segment_fruits: Vec<Option<<C::Child as SegmentCollector>::Fruit>>,
    ) -> tantivy::Result<Self::Fruit> {
        // One segment cut makes the whole answer incomplete.
        let Some(whole) = segment_fruits.into_iter().collect::<Option<Vec<_>>>() else {
            return Ok(None);
        };
        self.inner.merge_fruits(whole).map(Some)
    }
}

/// [`DeadlineCollector`]'s collector of one segment: the inner one's, until the deadline.
pub struct DeadlineSegmentCollector<S> {
    inner: S,
    deadline: Option<Instant>,
    /// Matches left before the next look at the clock.
    until_check: u32,
    /// Whether the deadline passed: matches are ignored from then on.
    cut: bool,
}

impl<S: SegmentCollector> SegmentCollector for DeadlineSegmentCollector<S> {
    type Fruit = Option<S::Fruit>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if self.cut {
            return;
        }
        if let Some(deadline) = self.deadline {
            if self.until_check == 0 {
                if Instant::now() >= deadline {
                    self.cut = true;
                    return;
                }
                self.until_check = MATCHES_PER_CHECK;
            }
            self.until_check -= 1;
        }
        self.inner.collect(doc, score);
    }

    fn harvest(self) -> Self::Fruit {
        (!self.cut).then(|| self.inner.harvest())
    }
}
