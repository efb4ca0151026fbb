//! A bucket's fingerprints, stored without the bits the bucket's number already gives.
//!
//! A table keyed by a 16-bit block needs only the other 48 bits of each fingerprint: 6 bytes
//! instead of 8 (a table with a wider key stores 48 bits too, see `table.rs`). They are kept as
//! two arrays, the low 32 bits ("sketch") and the next 16, so a lookup first filters on the
//! sketch alone, half the bytes of whole fingerprints: a fingerprint within `k` bits must be
//! within `k` on any 32 of them, and for k = 3 only about one random sketch in a million is, so
//! the second array is read almost only for true neighbours. Tables keyed by fewer than 16
//! bits (the default layout for k > 3) keep the top 16 bits of a value in a third array; for
//! the others it stays empty.

use std::ops::Range;

use super::compact::{insert_compact, remove_compact};
use std::io;

use super::scan;
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter};

/// The widest stored value kept without the third array.
pub(crate) const NARROW_BITS: u32 = 48;

/// A stored value split the way [`Remainders`] stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Encoded {
    sketch: u32,
    middle: u16,
    high: u16,
}

impl Encoded {
    #[inline]
    pub(crate) fn new(value: u64) -> Self {
        Encoded {
            sketch: value as u32,
            middle: (value >> 32) as u16,
            high: (value >> 48) as u16,
        }
    }

    #[inline]
    pub(crate) fn value(self) -> u64 {
        u64::from(self.sketch) | (u64::from(self.middle) << 32) | (u64::from(self.high) << 48)
    }
}

/// The stored values of one bucket, in the order its table keeps them.
///
/// Invariant: `sketch` and `middle` have one element per entry; `high` too if the table's
/// values are wider than [`NARROW_BITS`], else it is empty.
#[derive(Default)]
pub(crate) struct Remainders {
    sketch: Vec<u32>,
    middle: Vec<u16>,
    high: Vec<u16>,
}

impl Remainders {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.sketch.len()
    }

    #[inline]
    pub(crate) fn get(&self, position: usize) -> Encoded {
        Encoded {
            sketch: self.sketch[position],
            middle: self.middle[position],
            high: self.high.get(position).copied().unwrap_or(0),
        }
    }

    /// Inserts at `position` (up to the length); `wide` says the table keeps the high array
    /// (values over [`NARROW_BITS`] bits).
    #[inline]
    pub(crate) fn insert(&mut self, position: usize, encoded: Encoded, wide: bool) {
        insert_compact(&mut self.sketch, position, encoded.sketch);
        insert_compact(&mut self.middle, position, encoded.middle);
        if wide {
            insert_compact(&mut self.high, position, encoded.high);
        }
    }

    /// The low `tag_bits` bits (1 to 48) of the value at `position`: in a bucket sorted by
    /// tag, the key bits beyond the bucket number.
    #[inline]
    fn tag(&self, position: usize, tag_bits: u32) -> u64 {
        let mask = !(u64::MAX << tag_bits);
        if tag_bits <= 32 {
            u64::from(self.sketch[position]) & mask
        } else {
            self.get(position).value() & mask
        }
    }

    /// In a bucket sorted by tag, the end of the run of `tag` that starts at `start`.
    #[inline]
    fn run_end(&self, start: usize, tag: u64, tag_bits: u32) -> usize {
        (start..self.len())
            .find(|&position| self.tag(position, tag_bits) != tag)
            .unwrap_or(self.len())
    }

    /// The position of exactly `encoded` within `range`, if it is there.
    #[inline]
    pub(crate) fn position(&self, range: Range<usize>, encoded: Encoded) -> Option<usize> {
        let start = range.start;
        self.sketch[range]
            .iter()
            .enumerate()
            .filter(|&(_, &sketch)| sketch == encoded.sketch)
            .map(|(offset, _)| start + offset)
            .find(|&position| self.get(position) == encoded)
    }

    /// Removes the entry at `position`, keeping the order of the others or moving the last
    /// entry into its place; a bucket left with a quarter of its room unused gives the memory
    /// back.
    pub(crate) fn remove(&mut self, position: usize, keep_order: bool) {
        remove_compact(&mut self.sketch, position, keep_order);
        remove_compact(&mut self.middle, position, keep_order);
        if position < self.high.len() {
            remove_compact(&mut self.high, position, keep_order);
        }
    }

    /// Calls `visit(position, distance)` for each entry of `range` within `max_distance` bits
    /// of `query`.
    #[inline]
    pub(crate) fn for_each_within(
        &self,
        range: Range<usize>,
        query: Encoded,
        max_distance: u32,
        mut visit: impl FnMut(usize, u32),
    ) {
        let start = range.start;
        scan::for_each_within(
            &self.sketch[range],
            query.sketch,
            max_distance,
            |offset, near| {
                let position = start + offset;
                let middle = (self.middle[position] ^ query.middle).count_ones();
                let high = self
                    .high
                    .get(position)
                    .map_or(0, |&high| (high ^ query.high).count_ones());
                let distance = near + middle + high;
                if distance <= max_distance {
                    visit(position, distance);
                }
            },
        );
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.sketch.capacity() * 4 + self.middle.capacity() * 2 + self.high.capacity() * 2
    }

    /// Writes the bucket's arrays to a checkpoint, without their length (the table writes the
    /// lengths of all its buckets first).
    pub(crate) fn save(&self, out: &mut CheckpointWriter) -> io::Result<()> {
        out.put_elements(&self.sketch)?;
        out.put_elements(&self.middle)?;
        out.put_elements(&self.high)
    }

    /// Reads what [`save`](Self::save) wrote for a bucket of `len` entries, in a table whose
    /// values are `wide` or not.
    pub(crate) fn load(input: &mut CheckpointReader, len: u64, wide: bool) -> io::Result<Self> {
        Ok(Remainders {
            sketch: input.get_elements(len)?,
            middle: input.get_elements(len)?,
            high: input.get_elements(if wide { len } else { 0 })?,
        })
    }
}

/// The search for the run of one tag in a bucket: a binary search in a bucket sorted by tag,
/// advanced one halving at a time so that the searches of several tables can go in lockstep
/// and their cache misses overlap; the whole bucket, at once, when there are no tags
/// (`tag_bits == 0`).
///
/// Invariant: the run starts in `base..=base + width` (`width` is 0 without tags or in an
/// empty bucket); `step` selects rather than branches.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunSearch {
    tag: u64,
    tag_bits: u32,
    base: usize,
    width: usize,
}

impl RunSearch {
    /// The search for `tag`, the low `tag_bits` bits (0 to 48) of the values filed under the
    /// wanted key, in `bucket`.
    #[inline]
    pub(crate) fn new(bucket: &Remainders, tag: u64, tag_bits: u32) -> Self {
        let width = if tag_bits == 0 { 0 } else { bucket.len() };
        RunSearch {
            tag,
            tag_bits,
            base: 0,
            width,
        }
    }

    /// One halving of the search; whether there was one to do.
    #[inline]
    pub(crate) fn step(&mut self, bucket: &Remainders) -> bool {
        if self.width <= 1 {
            return false;
        }
        let half = self.width / 2;
        if bucket.tag(self.base + half, self.tag_bits) < self.tag {
            self.base += half;
        }
        self.width -= half;
        true
    }

    /// Runs the search to its end; the positions of the run.
    #[inline]
    pub(crate) fn run(mut self, bucket: &Remainders) -> Range<usize> {
        while self.step(bucket) {}
        if self.tag_bits == 0 {
            return 0..bucket.len();
        }
        let below = self.width == 1 && bucket.tag(self.base, self.tag_bits) < self.tag;
        let start = self.base + usize::from(below);
        start..bucket.run_end(start, self.tag, self.tag_bits)
    }
}
