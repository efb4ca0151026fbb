//! One table of the index: an array of buckets addressed by the low bits of the table's key.

use std::ops::Range;

use super::layout::DENSE_BLOCK_BITS;
use super::remainders::{Encoded, NARROW_BITS, Remainders, RunSearch};

/// Where a fingerprint is filed in a table: its bucket, and the bits stored there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) bucket: usize,
    pub(crate) stored: u64,
}

/// How a table files fingerprints: the bucket a key picks, and the value stored there.
///
/// A key of at most [`DENSE_BLOCK_BITS`] bits numbers the bucket, which stores the table's
/// remainder of each fingerprint, in insertion order up to swap-removals. A wider key's low
/// [`DENSE_BLOCK_BITS`] bits number the bucket, and its other bits (the "tag") are stored in
/// the low bits of the value, below the remainder; such a bucket is kept sorted by tag, so the
/// fingerprints of one key are a run that a binary search finds, and the search and the scan
/// of the run read the same array (the sketches: tags of at most 32 bits lie within them).
/// Either way a stored value has `64 - min(key bits, 16)` bits: 48 for keys of 16 bits or
/// more, which the narrow encoding holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addressing {
    /// `key bits - 16`, or 0 when the key is the bucket number.
    tag_bits: u32,
    /// Whether stored values are wider than the narrow encoding.
    wide: bool,
}

const BUCKET_MASK: u64 = (1 << DENSE_BLOCK_BITS) - 1;

impl Addressing {
    /// The addressing of keys of `key_bits` bits (1 to 64).
    fn new(key_bits: u32) -> Self {
        let bucket_bits = key_bits.min(DENSE_BLOCK_BITS);
        Addressing {
            tag_bits: key_bits - bucket_bits,
            wide: 64 - bucket_bits > NARROW_BITS,
        }
    }

    /// Whether stored values are wider than the narrow encoding (buckets keep a third array).
    pub(crate) fn wide(self) -> bool {
        self.wide
    }

    /// Whether keys are wider than the bucket number (and the buckets sorted by tag).
    #[inline]
    pub(crate) fn sorted(self) -> bool {
        self.tag_bits > 0
    }

    /// Where a fingerprint with this key and remainder is filed.
    #[inline]
    pub(crate) fn address(self, key: u64, remainder: u64) -> Address {
        Address {
            bucket: (key & BUCKET_MASK) as usize,
            stored: key >> DENSE_BLOCK_BITS | remainder << self.tag_bits,
        }
    }

    /// The key and remainder filed at `bucket` as `stored` (the inverse of
    /// [`address`](Self::address)).
    #[inline]
    pub(crate) fn key_and_remainder(self, bucket: usize, stored: u64) -> (u64, u64) {
        let key = bucket as u64 | self.tag_of(stored) << DENSE_BLOCK_BITS;
        (key, self.remainder_of(stored))
    }

    /// The tag part of a stored value (0 without tags).
    #[inline]
    fn tag_of(self, stored: u64) -> u64 {
        stored & !(u64::MAX << self.tag_bits)
    }

    /// The remainder part of a stored value.
    #[inline]
    pub(crate) fn remainder_of(self, stored: u64) -> u64 {
        stored >> self.tag_bits
    }

    /// The position a lookup reads first in `bucket`: the middle, where a search starts, or
    /// the start of a scan of the whole bucket.
    #[inline]
    pub(crate) fn first_read(self, bucket: &Remainders) -> usize {
        if self.sorted() { bucket.len() / 2 } else { 0 }
    }

    /// The search for the positions in `bucket` of the fingerprints with the key of `stored`.
    #[inline]
    pub(crate) fn search(self, bucket: &Remainders, stored: u64) -> RunSearch {
        RunSearch::new(bucket, self.tag_of(stored), self.tag_bits)
    }

    /// The positions in `bucket` of the fingerprints with the key of `stored`: all of them
    /// without tags.
    #[inline]
    pub(crate) fn run(self, bucket: &Remainders, stored: u64) -> Range<usize> {
        if self.sorted() {
            self.search(bucket, stored).run(bucket)
        } else {
            0..bucket.len()
        }
    }
}

/// What a table's bucket holds: the stored values, and maybe more kept in step with them.
pub(crate) trait Bucket: Default {
    /// What removing an entry gives back.
    type Removed;
    fn remainders(&self) -> &Remainders;
    fn remainders_mut(&mut self) -> &mut Remainders;
    /// Removes the entry at `position`, keeping the order of the others or moving the last
    /// entry into its place.
    fn remove(&mut self, position: usize, keep_order: bool) -> Self::Removed;
    /// Heap bytes held (by capacity), the bucket's own size not included.
    fn heap_bytes(&self) -> usize;
}

impl Bucket for Remainders {
    type Removed = ();

    fn remainders(&self) -> &Remainders {
        self
    }

    fn remainders_mut(&mut self) -> &mut Remainders {
        self
    }

    fn remove(&mut self, position: usize, keep_order: bool) {
        Remainders::remove(self, position, keep_order);
    }

    fn heap_bytes(&self) -> usize {
        Remainders::heap_bytes(self)
    }
}

/// The buckets of one table (see [`Addressing`]).
///
/// Invariants: there are `2^min(key bits, 16)` buckets; in a table with tags every bucket is
/// in increasing order of tag.
pub(crate) struct Table<B> {
    addressing: Addressing,
    buckets: Vec<B>,
}

impl<B: Bucket> Table<B> {
    /// An empty table for keys of `key_bits` bits (1 to 64).
    pub(crate) fn new(key_bits: u32) -> Self {
        Table {
            addressing: Addressing::new(key_bits),
            buckets: (0..1usize << key_bits.min(DENSE_BLOCK_BITS))
                .map(|_| B::default())
                .collect(),
        }
    }

    #[inline]
    pub(crate) fn addressing(&self) -> Addressing {
        self.addressing
    }

    #[inline]
    pub(crate) fn bucket(&self, number: usize) -> &B {
        &self.buckets[number]
    }

    #[inline]
    pub(crate) fn bucket_mut(&mut self, number: usize) -> &mut B {
        &mut self.buckets[number]
    }

    /// Every bucket, by number.
    pub(crate) fn buckets(&self) -> &[B] {
        &self.buckets
    }

    /// Every bucket, by number, to change (keeping the invariants is the caller's part).
    pub(crate) fn buckets_mut(&mut self) -> &mut [B] {
        &mut self.buckets
    }

    /// The position of exactly `address`, if it is filed.
    #[inline]
    pub(crate) fn find(&self, address: Address) -> Option<usize> {
        let bucket = self.buckets[address.bucket].remainders();
        let run = self.addressing.run(bucket, address.stored);
        bucket.position(run, Encoded::new(address.stored))
    }

    /// Files `address` (not filed yet), at the end of its key's run; gives the position it
    /// took in its bucket.
    #[inline]
    pub(crate) fn insert(&mut self, address: Address) -> usize {
        let addressing = self.addressing;
        let bucket = self.buckets[address.bucket].remainders_mut();
        let position = addressing.run(bucket, address.stored).end;
        bucket.insert(position, Encoded::new(address.stored), addressing.wide);
        position
    }

    /// Removes the entry at `position` of bucket `bucket`, keeping the bucket sorted if it is.
    pub(crate) fn remove(&mut self, bucket: usize, position: usize) -> B::Removed {
        let keep_order = self.addressing.sorted();
        self.buckets[bucket].remove(position, keep_order)
    }

    /// Bytes of the table's bucket headers and of what they hold (by capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<B>()
            + self.buckets.iter().map(B::heap_bytes).sum::<usize>()
    }
}
