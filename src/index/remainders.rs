//! A bucket's fingerprints, stored without the bits the bucket's key already gives.
//!
//! A table keyed by a 16-bit block needs only the other 48 bits of each fingerprint: 6 bytes
//! instead of 8. They are kept as two arrays, the low 32 bits ("sketch") and the next 16, so a
//! lookup first filters on the sketch alone, half the bytes of whole fingerprints: a
//! fingerprint within `k` bits must be within `k` on any 32 of them, and for k = 3 only about
//! one random sketch in a million is, so the second array is read almost only for true
//! neighbours. Layouts with blocks narrower than 16 bits (k > 3) keep the top 16 bits of the
//! remainder in a third array; for k <= 3 it stays empty.

use super::scan;
use super::table::{Bucket, push_compact, shrink_compact};

/// A remainder split the way [`Remainders`] stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Encoded {
    sketch: u32,
    middle: u16,
    high: u16,
}

impl Encoded {
    #[inline]
    pub(crate) fn new(remainder: u64) -> Self {
        Encoded {
            sketch: remainder as u32,
            middle: (remainder >> 32) as u16,
            high: (remainder >> 48) as u16,
        }
    }

    #[inline]
    pub(crate) fn remainder(self) -> u64 {
        u64::from(self.sketch) | (u64::from(self.middle) << 32) | (u64::from(self.high) << 48)
    }
}

/// Remainders of one bucket, in insertion order (up to swap-removals).
#[derive(Default)]
pub(crate) struct Remainders {
    sketch: Vec<u32>,
    middle: Vec<u16>,
    /// Empty unless the table's remainders are wider than 48 bits.
    high: Vec<u16>,
}

impl Bucket for Remainders {
    fn is_empty(&self) -> bool {
        self.sketch.is_empty()
    }
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

    /// Appends; `wide` says the table keeps the high array (remainders over 48 bits).
    #[inline]
    pub(crate) fn push(&mut self, encoded: Encoded, wide: bool) {
        push_compact(&mut self.sketch, encoded.sketch);
        push_compact(&mut self.middle, encoded.middle);
        if wide {
            push_compact(&mut self.high, encoded.high);
        }
    }

    #[inline]
    pub(crate) fn position(&self, encoded: Encoded) -> Option<usize> {
        self.sketch
            .iter()
            .enumerate()
            .filter(|&(_, &sketch)| sketch == encoded.sketch)
            .map(|(position, _)| position)
            .find(|&position| self.get(position) == encoded)
    }

    /// Removes the entry at `position`, moving the last entry into its place.
    pub(crate) fn swap_remove(&mut self, position: usize) {
        self.sketch.swap_remove(position);
        self.middle.swap_remove(position);
        if position < self.high.len() {
            self.high.swap_remove(position);
        }
    }

    /// Calls `visit(position, distance)` for each entry within `max_distance` bits of `query`.
    #[inline]
    pub(crate) fn for_each_within(
        &self,
        query: Encoded,
        max_distance: u32,
        mut visit: impl FnMut(usize, u32),
    ) {
        scan::for_each_within(
            &self.sketch,
            query.sketch,
            max_distance,
            |position, near| {
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

    pub(crate) fn shrink(&mut self) {
        shrink_compact(&mut self.sketch);
        shrink_compact(&mut self.middle);
        shrink_compact(&mut self.high);
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.sketch.capacity() * 4 + self.middle.capacity() * 2 + self.high.capacity() * 2
    }
}
