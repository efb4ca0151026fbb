//! Bucket storage for one pigeonhole table: a dense array for narrow keys, a hash map for wide.

use std::collections::HashMap;

/// Buckets addressed by a block key.
///
/// Invariant: in the sparse form no bucket is empty (removing the last entry removes the
/// bucket), so memory follows the number of distinct keys in use.
pub(crate) enum Table<B> {
    Dense(Vec<B>),
    Sparse(HashMap<u64, B>),
}

/// What a bucket must offer so that a table can drop it once it holds nothing.
pub(crate) trait Bucket: Default {
    fn is_empty(&self) -> bool;
}

impl<B: Bucket> Table<B> {
    /// A table for keys of `width` bits: dense when `width <= dense_bits`.
    pub(crate) fn new(width: u32, dense_bits: u32) -> Self {
        if width <= dense_bits {
            Table::Dense((0..1usize << width).map(|_| B::default()).collect())
        } else {
            Table::Sparse(HashMap::new())
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<&B> {
        match self {
            // Keys come from `Block::key`, which masks them to the table's width.
            Table::Dense(buckets) => buckets.get(key as usize),
            Table::Sparse(buckets) => buckets.get(&key),
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut B> {
        match self {
            Table::Dense(buckets) => buckets.get_mut(key as usize),
            Table::Sparse(buckets) => buckets.get_mut(&key),
        }
    }

    /// The bucket for `key`, created empty if the table has none yet.
    #[inline]
    pub(crate) fn bucket_mut(&mut self, key: u64) -> &mut B {
        match self {
            Table::Dense(buckets) => &mut buckets[key as usize],
            Table::Sparse(buckets) => buckets.entry(key).or_default(),
        }
    }

    /// Drops the bucket for `key` if it has become empty (sparse tables only).
    pub(crate) fn forget_if_empty(&mut self, key: u64) {
        if let Table::Sparse(buckets) = self
            && buckets.get(&key).is_some_and(B::is_empty)
        {
            buckets.remove(&key);
        }
    }

    /// Every bucket with its key.
    pub(crate) fn buckets(&self) -> Box<dyn Iterator<Item = (u64, &B)> + '_> {
        match self {
            Table::Dense(buckets) => Box::new(
                buckets
                    .iter()
                    .enumerate()
                    .map(|(key, bucket)| (key as u64, bucket)),
            ),
            Table::Sparse(buckets) => Box::new(buckets.iter().map(|(&key, bucket)| (key, bucket))),
        }
    }

    /// Bytes of the table's own bucket headers (not what the buckets point to).
    pub(crate) fn header_bytes(&self) -> usize {
        let slot = std::mem::size_of::<B>();
        match self {
            Table::Dense(buckets) => buckets.capacity() * slot,
            // hashbrown keeps one control byte per slot beside the (key, bucket) pair.
            Table::Sparse(buckets) => buckets.capacity() * (slot + 8 + 1),
        }
    }
}

/// Appends to a vector that grows by an eighth rather than doubling.
///
/// Buckets are many and small, so doubling would leave a third of the memory unused on average;
/// growing by an eighth keeps the slack near 6% at the cost of a few more (amortised O(1))
/// reallocations.
#[inline]
pub(crate) fn push_compact<T>(vec: &mut Vec<T>, value: T) {
    if vec.len() == vec.capacity() {
        vec.reserve_exact((vec.len() / 8).max(4));
    }
    vec.push(value);
}

/// Gives back memory a bucket no longer needs after removals: once a quarter of its room is
/// unused, it shrinks to an eighth above its length (the same slack growth leaves, so a bucket
/// that shrinks and grows again does not reallocate on every change).
#[inline]
pub(crate) fn shrink_compact<T>(vec: &mut Vec<T>) {
    let len = vec.len();
    if vec.capacity() > len + len / 4 + 4 {
        vec.shrink_to(len + len / 8);
    }
}
