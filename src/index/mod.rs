//! The pigeonhole index: every stored fingerprint within Hamming distance `k` of a query, found
//! by probing `k + 1` exact-match tables instead of scanning everything.
//!
//! Two fingerprints within distance `k` differ in at most `k` bits, so of `k + 1` disjoint blocks
//! at least one holds no differing bit: the two agree exactly on that block. Table `t` files each
//! fingerprint under its block `t`; a lookup reads one bucket per table and checks the Hamming
//! distance of what it finds there. With 16-bit blocks (k = 3) a bucket holds about `n / 65,536`
//! fingerprints, so a lookup at 50 million reads some 3,000 instead of 50 million.

mod layout;
mod remainders;
pub mod scan;
mod table;

pub use layout::{Block, BlockLayout, MAX_DISTANCE};

use crate::{Error, Fingerprint};
use layout::DENSE_BLOCK_BITS;
use remainders::{Encoded, Remainders};
pub(crate) use table::push_compact;
use table::{Bucket, Table, shrink_compact};

/// The first table's buckets: fingerprints and, in step with them, each one's value.
struct Entries<V> {
    remainders: Remainders,
    values: Vec<V>,
}

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Entries {
            remainders: Remainders::default(),
            values: Vec::new(),
        }
    }
}

impl<V> Bucket for Entries<V> {
    fn is_empty(&self) -> bool {
        self.remainders.is_empty()
    }
}

/// A map from fingerprint to `V` that answers "which stored fingerprints are within distance
/// `k` of this one?" exactly.
///
/// Invariants: each fingerprint is stored at most once; every table holds the same set of
/// fingerprints, each under the key of its own block and as the remainder of the other bits;
/// the first table also holds each fingerprint's value; a lookup visits each stored fingerprint
/// within `k` exactly once and nothing farther.
///
/// With k = 3 a stored fingerprint costs 6 bytes in each of the 4 tables plus
/// `size_of::<V>()`, plus the few percent of slack that buckets keep for growth.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::index::PigeonholeIndex;
///
/// let mut index = PigeonholeIndex::new(3).unwrap();
/// index.insert(Fingerprint(0b1111), "four bits");
/// index.insert(Fingerprint(0b1_1111_1111), "nine bits");
///
/// let mut found = Vec::new();
/// index.for_each_within(Fingerprint(0), |fingerprint, distance| found.push((fingerprint, distance)));
/// assert_eq!(found, vec![]); // both are more than 3 bits from zero
///
/// index.for_each_within(Fingerprint(0b0111), |fingerprint, distance| found.push((fingerprint, distance)));
/// assert_eq!(found, vec![(Fingerprint(0b1111), 1)]);
/// assert_eq!(index.get(Fingerprint(0b1111)), Some(&"four bits"));
/// ```
pub struct PigeonholeIndex<V> {
    layout: BlockLayout,
    /// Keyed by block 0; holds the values.
    primary: Table<Entries<V>>,
    /// Keyed by blocks 1..=k, in order.
    secondary: Vec<Table<Remainders>>,
    /// Whether remainders are wider than 48 bits (blocks narrower than 16, k > 3).
    wide: bool,
    len: usize,
}

impl<V> PigeonholeIndex<V> {
    /// An empty index for Hamming radius `max_distance` (`k`, 0 to [`MAX_DISTANCE`]).
    pub fn new(max_distance: u32) -> Result<Self, Error> {
        Ok(Self::with_layout(BlockLayout::new(max_distance)?))
    }

    /// An empty index over the given layout.
    pub fn with_layout(layout: BlockLayout) -> Self {
        let blocks = layout.blocks();
        let primary = Table::new(blocks[0].width, DENSE_BLOCK_BITS);
        let secondary = blocks[1..]
            .iter()
            .map(|block| Table::new(block.width, DENSE_BLOCK_BITS))
            .collect();
        let wide = blocks.iter().any(|block| block.width < 16);
        PigeonholeIndex {
            layout,
            primary,
            secondary,
            wide,
            len: 0,
        }
    }

    /// The layout the index was built with.
    pub fn layout(&self) -> &BlockLayout {
        &self.layout
    }

    /// The radius `k` of [`for_each_within`](Self::for_each_within).
    pub fn max_distance(&self) -> u32 {
        self.layout.max_distance()
    }

    /// How many fingerprints are stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where exactly this fingerprint sits in the first table: its bucket key and position.
    #[inline]
    fn locate(&self, fingerprint: Fingerprint) -> Option<(u64, usize)> {
        let block = self.layout.blocks()[0];
        let key = block.key(fingerprint.0);
        let encoded = Encoded::new(block.remainder(fingerprint.0));
        let position = self.primary.get(key)?.remainders.position(encoded)?;
        Some((key, position))
    }

    /// The value stored for exactly this fingerprint.
    pub fn get(&self, fingerprint: Fingerprint) -> Option<&V> {
        let (key, position) = self.locate(fingerprint)?;
        self.primary.get(key)?.values.get(position)
    }

    /// The value stored for exactly this fingerprint, to change in place.
    pub fn get_mut(&mut self, fingerprint: Fingerprint) -> Option<&mut V> {
        let (key, position) = self.locate(fingerprint)?;
        self.primary.get_mut(key)?.values.get_mut(position)
    }

    /// Whether exactly this fingerprint is stored.
    pub fn contains(&self, fingerprint: Fingerprint) -> bool {
        self.locate(fingerprint).is_some()
    }

    /// Stores `value` under `fingerprint`; gives back the value it replaces, if any.
    pub fn insert(&mut self, fingerprint: Fingerprint, value: V) -> Option<V> {
        if let Some(slot) = self.get_mut(fingerprint) {
            return Some(std::mem::replace(slot, value));
        }
        let x = fingerprint.0;
        let blocks = self.layout.blocks();
        let entries = self.primary.bucket_mut(blocks[0].key(x));
        entries
            .remainders
            .push(Encoded::new(blocks[0].remainder(x)), self.wide);
        push_compact(&mut entries.values, value);
        for (block, table) in blocks[1..].iter().zip(&mut self.secondary) {
            table
                .bucket_mut(block.key(x))
                .push(Encoded::new(block.remainder(x)), self.wide);
        }
        self.len += 1;
        None
    }

    /// Removes `fingerprint`; gives back its value if it was stored. A bucket left with a
    /// quarter of its room unused gives the memory back.
    pub fn remove(&mut self, fingerprint: Fingerprint) -> Option<V> {
        let (key, position) = self.locate(fingerprint)?;
        let entries = self.primary.get_mut(key)?;
        entries.remainders.swap_remove(position);
        let value = entries.values.swap_remove(position);
        entries.remainders.shrink();
        shrink_compact(&mut entries.values);
        self.primary.forget_if_empty(key);
        let x = fingerprint.0;
        for (block, table) in self.layout.blocks()[1..].iter().zip(&mut self.secondary) {
            let key = block.key(x);
            let encoded = Encoded::new(block.remainder(x));
            if let Some(bucket) = table.get_mut(key)
                && let Some(position) = bucket.position(encoded)
            {
                bucket.swap_remove(position);
                bucket.shrink();
            }
            table.forget_if_empty(key);
        }
        self.len -= 1;
        Some(value)
    }

    /// Calls `visit(fingerprint, distance)` once for every stored fingerprint within distance `k`
    /// of `query` (the query itself included, at distance 0, if stored). The order is
    /// unspecified but deterministic for a given sequence of inserts and removals.
    #[inline]
    pub fn for_each_within(&self, query: Fingerprint, mut visit: impl FnMut(Fingerprint, u32)) {
        const NO_BUCKET: Option<&Remainders> = None;
        let x = query.0;
        let k = self.max_distance();
        let blocks = self.layout.blocks();
        // Find every bucket first: the loads of the k + 1 bucket headers, and of the first
        // sketch of each bucket, do not depend on each other, so their cache misses overlap
        // instead of following one another.
        let mut buckets = [NO_BUCKET; MAX_DISTANCE as usize + 1];
        buckets[0] = self
            .primary
            .get(blocks[0].key(x))
            .map(|entries| &entries.remainders);
        for (slot, (table, block)) in buckets[1..]
            .iter_mut()
            .zip(self.secondary.iter().zip(&blocks[1..]))
        {
            *slot = table.get(block.key(x));
        }
        let buckets = &buckets[..blocks.len()];
        let touched = buckets
            .iter()
            .flatten()
            .filter(|bucket| bucket.len() > 0)
            .fold(0u32, |acc, bucket| acc ^ bucket.get(0).remainder() as u32);
        std::hint::black_box(touched);

        for (table_number, (bucket, block)) in buckets.iter().zip(blocks).enumerate() {
            let Some(bucket) = bucket else { continue };
            let key = block.key(x);
            let query_remainder = Encoded::new(block.remainder(x));
            bucket.for_each_within(query_remainder, k, |position, distance| {
                let y = block.restore(key, bucket.get(position).remainder());
                // A fingerprint that also agrees on an earlier block was visited from that
                // block's table already.
                if !blocks[..table_number]
                    .iter()
                    .any(|earlier| earlier.key(x) == earlier.key(y))
                {
                    visit(Fingerprint(y), distance);
                }
            });
        }
    }

    /// Every stored fingerprint within distance `k` of `query`, nearest first (ties by value).
    pub fn within(&self, query: Fingerprint) -> Vec<(Fingerprint, u32)> {
        let mut found = Vec::new();
        self.for_each_within(query, |fingerprint, distance| {
            found.push((fingerprint, distance))
        });
        found.sort_unstable_by_key(|&(fingerprint, distance)| (distance, fingerprint));
        found
    }

    /// How many stored fingerprints a lookup of `query` compares against (the sizes of the
    /// buckets it reads): the work a lookup does, for capacity planning.
    pub fn candidates(&self, query: Fingerprint) -> usize {
        let x = query.0;
        let blocks = self.layout.blocks();
        let primary = self
            .primary
            .get(blocks[0].key(x))
            .map_or(0, |entries| entries.remainders.len());
        let secondary: usize = self
            .secondary
            .iter()
            .zip(&blocks[1..])
            .map(|(table, block)| table.get(block.key(x)).map_or(0, Remainders::len))
            .sum();
        primary + secondary
    }

    /// Every stored fingerprint with its value, in storage order.
    pub fn iter(&self) -> impl Iterator<Item = (Fingerprint, &V)> + '_ {
        let block = self.layout.blocks()[0];
        self.primary.buckets().flat_map(move |(key, entries)| {
            entries
                .values
                .iter()
                .enumerate()
                .map(move |(position, value)| {
                    let remainder = entries.remainders.get(position).remainder();
                    (Fingerprint(block.restore(key, remainder)), value)
                })
        })
    }

    /// Heap bytes held by the tables (allocated capacity, not only what is in use).
    pub fn heap_bytes(&self) -> usize {
        let value_size = std::mem::size_of::<V>();
        let primary: usize = self
            .primary
            .buckets()
            .map(|(_, entries)| {
                entries.remainders.heap_bytes() + entries.values.capacity() * value_size
            })
            .sum();
        let secondary: usize = self
            .secondary
            .iter()
            .map(|table| {
                table
                    .buckets()
                    .map(|(_, bucket)| bucket.heap_bytes())
                    .sum::<usize>()
            })
            .sum();
        let headers: usize = self.primary.header_bytes()
            + self
                .secondary
                .iter()
                .map(Table::header_bytes)
                .sum::<usize>();
        primary + secondary + headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(stored: &[u64], query: u64, k: u32) -> Vec<(Fingerprint, u32)> {
        let mut found: Vec<_> = stored
            .iter()
            .map(|&y| (Fingerprint(y), (query ^ y).count_ones()))
            .filter(|&(_, distance)| distance <= k)
            .collect();
        found.sort_unstable_by_key(|&(fingerprint, distance)| (distance, fingerprint));
        found
    }

    #[test]
    fn finds_exactly_k_and_not_k_plus_one() {
        for k in [0, 1, 2, 3, 5] {
            let mut index = PigeonholeIndex::new(k).unwrap();
            let query = 0x0123_4567_89ab_cdefu64;
            // Flip bits spread over all blocks so that no single block holds them all.
            let at_k = (0..k).fold(query, |f, i| f ^ (1 << (i * 13 % 64)));
            let at_k_plus_1 = at_k ^ (1 << 63);
            index.insert(Fingerprint(at_k), ());
            index.insert(Fingerprint(at_k_plus_1), ());
            assert_eq!(
                index.within(Fingerprint(query)),
                brute_force(&[at_k, at_k_plus_1], query, k),
                "k={k}"
            );
        }
    }

    #[test]
    fn insert_replace_remove() {
        let mut index = PigeonholeIndex::new(3).unwrap();
        assert_eq!(index.insert(Fingerprint(7), 1), None);
        assert_eq!(index.insert(Fingerprint(7), 2), Some(1));
        assert_eq!(index.len(), 1);
        assert_eq!(index.remove(Fingerprint(7)), Some(2));
        assert_eq!(index.remove(Fingerprint(7)), None);
        assert!(index.is_empty());
        assert!(index.within(Fingerprint(7)).is_empty());
        assert_eq!(index.candidates(Fingerprint(7)), 0);
    }

    #[test]
    fn sparse_tables_forget_empty_buckets() {
        let mut index = PigeonholeIndex::new(1).unwrap(); // two 32-bit blocks: hash-mapped
        index.insert(Fingerprint(u64::MAX), ());
        index.remove(Fingerprint(u64::MAX));
        assert_eq!(index.candidates(Fingerprint(u64::MAX)), 0);
        assert!(index.iter().next().is_none());
    }
}
