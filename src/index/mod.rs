//! The pigeonhole index: every stored fingerprint within Hamming distance `k` of a query, found
//! by probing a few exact-match tables instead of scanning everything.
//!
//! Two fingerprints within distance `k` differ in at most `k` bits, so of `k + 1` disjoint blocks
//! at least one holds no differing bit: the two agree exactly on that block. Table `t` files each
//! fingerprint under its key (in the default layout, its block `t`); a lookup reads one bucket
//! per table and checks the Hamming distance of what it finds there. With 16-bit blocks (k = 3) a bucket holds about `n / 65,536`
//! fingerprints, so a lookup at 50 million reads some 3,000 instead of 50 million. Other
//! layouts ([`BlockLayout::with_tables`]) key more tables by wider sets of bits, trading memory
//! for fewer fingerprints read.

mod compact;
mod layout;
mod remainders;
pub mod scan;
mod table;

pub use layout::{Block, BlockLayout, MAX_DISTANCE, MAX_TABLES, TableKey};

use std::io;

use bytemuck::Pod;

use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter};
use crate::{Error, Fingerprint};
pub(crate) use compact::push_compact;
use compact::{insert_compact, remove_compact};
use remainders::{Encoded, Remainders, RunSearch};
use table::{Addressing, Bucket, Table};

/// Tables whose buckets a lookup finds before it scans any (so that their cache misses
/// overlap): all of them for every default layout.
const PROBES: usize = MAX_DISTANCE as usize + 1;

/// Table 0's buckets: fingerprints and, in step with them, each one's value.
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
    type Removed = V;

    fn remainders(&self) -> &Remainders {
        &self.remainders
    }

    fn remainders_mut(&mut self) -> &mut Remainders {
        &mut self.remainders
    }

    fn remove(&mut self, position: usize, keep_order: bool) -> V {
        self.remainders.remove(position, keep_order);
        remove_compact(&mut self.values, position, keep_order)
    }

    fn heap_bytes(&self) -> usize {
        self.remainders.heap_bytes() + self.values.capacity() * std::mem::size_of::<V>()
    }
}

/// One table's part of a lookup: the bucket, and the query's value and key there.
#[derive(Clone, Copy)]
struct Probe<'a> {
    addressing: Addressing,
    bucket: &'a Remainders,
    stored: u64,
    key: u64,
}

impl<'a> Probe<'a> {
    /// Where `x` is filed in `table`, keyed by `table_key`.
    #[inline(always)]
    fn new<B: Bucket>(table: &'a Table<B>, table_key: &TableKey, x: u64) -> Self {
        let addressing = table.addressing();
        let key = table_key.key(x);
        let address = addressing.address(key, table_key.remainder(x));
        Probe {
            addressing,
            bucket: table.bucket(address.bucket).remainders(),
            stored: address.stored,
            key,
        }
    }
}

/// A map from fingerprint to `V` that answers "which stored fingerprints are within distance
/// `k` of this one?" exactly.
///
/// Invariants: each fingerprint is stored at most once; every table holds the same set of
/// fingerprints, each under its key in that table (see [`BlockLayout`]) and as the remainder of
/// the other bits; the values are kept in step with table 0, bucket by bucket and position by
/// position; a lookup visits each stored fingerprint within `k` exactly once and nothing
/// farther.
///
/// With k = 3 a stored fingerprint costs 6 bytes in each of the 4 tables plus
/// `size_of::<V>()`, plus the few percent of slack that buckets keep for growth; every table of
/// the other layouts costs 6 bytes a fingerprint too.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::index::{BlockLayout, PigeonholeIndex};
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
///
/// // Ten tables with 25- and 26-bit keys find the same.
/// let mut wider = PigeonholeIndex::with_layout(BlockLayout::with_tables(3, 10).unwrap());
/// wider.insert(Fingerprint(0b1111), "four bits");
/// assert_eq!(wider.within(Fingerprint(0b0111)), vec![(Fingerprint(0b1111), 1)]);
/// ```
pub struct PigeonholeIndex<V> {
    layout: BlockLayout,
    /// Table 0; its buckets also hold the values.
    primary: Table<Entries<V>>,
    /// Tables 1 and on, in order.
    secondary: Vec<Table<Remainders>>,
    /// Whether some table's buckets are sorted (keys wider than the bucket numbers).
    sorted: bool,
    len: usize,
}

impl<V> PigeonholeIndex<V> {
    /// An empty index for Hamming radius `max_distance` (`k`, 0 to [`MAX_DISTANCE`]) with the
    /// default layout.
    pub fn new(max_distance: u32) -> Result<Self, Error> {
        Ok(Self::with_layout(BlockLayout::new(max_distance)?))
    }

    /// An empty index over the given layout.
    pub fn with_layout(layout: BlockLayout) -> Self {
        let keys = layout.tables();
        let primary = Table::new(keys[0].key_bits());
        let secondary: Vec<Table<Remainders>> = keys[1..]
            .iter()
            .map(|key| Table::new(key.key_bits()))
            .collect();
        let sorted = primary.addressing().sorted()
            || secondary.iter().any(|table| table.addressing().sorted());
        PigeonholeIndex {
            layout,
            primary,
            secondary,
            sorted,
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

    /// How table `number` files fingerprints.
    #[inline]
    fn addressing(&self, number: usize) -> Addressing {
        match number {
            0 => self.primary.addressing(),
            _ => self.secondary[number - 1].addressing(),
        }
    }

    /// The fingerprints of bucket `bucket` of table `number`.
    #[inline]
    fn remainders(&self, number: usize, bucket: usize) -> &Remainders {
        match number {
            0 => self.primary.bucket(bucket).remainders(),
            _ => self.secondary[number - 1].bucket(bucket),
        }
    }

    /// Where `fingerprint` is filed in table `number`.
    #[inline]
    fn address(&self, number: usize, fingerprint: u64) -> table::Address {
        let key = &self.layout.tables()[number];
        self.addressing(number)
            .address(key.key(fingerprint), key.remainder(fingerprint))
    }

    /// Where exactly this fingerprint sits in table 0: its bucket and position.
    #[inline]
    fn locate(&self, fingerprint: Fingerprint) -> Option<(usize, usize)> {
        let address = self.address(0, fingerprint.0);
        let position = self.primary.find(address)?;
        Some((address.bucket, position))
    }

    /// The value stored for exactly this fingerprint.
    pub fn get(&self, fingerprint: Fingerprint) -> Option<&V> {
        let (bucket, position) = self.locate(fingerprint)?;
        self.primary.bucket(bucket).values.get(position)
    }

    /// The value stored for exactly this fingerprint, to change in place.
    pub fn get_mut(&mut self, fingerprint: Fingerprint) -> Option<&mut V> {
        let (bucket, position) = self.locate(fingerprint)?;
        self.primary.bucket_mut(bucket).values.get_mut(position)
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
        let address = self.address(0, fingerprint.0);
        let position = self.primary.insert(address);
        let values = &mut self.primary.bucket_mut(address.bucket).values;
        insert_compact(values, position, value);
        let x = fingerprint.0;
        for (table, key) in self.secondary.iter_mut().zip(&self.layout.tables()[1..]) {
            table.insert(table.addressing().address(key.key(x), key.remainder(x)));
        }
        self.len += 1;
        None
    }

    /// Removes `fingerprint`; gives back its value if it was stored. A bucket left with a
    /// quarter of its room unused gives the memory back.
    pub fn remove(&mut self, fingerprint: Fingerprint) -> Option<V> {
        let (bucket, position) = self.locate(fingerprint)?;
        let value = self.primary.remove(bucket, position);
        let x = fingerprint.0;
        for (table, key) in self.secondary.iter_mut().zip(&self.layout.tables()[1..]) {
            let address = table.addressing().address(key.key(x), key.remainder(x));
            if let Some(position) = table.find(address) {
                table.remove(address.bucket, position);
            }
        }
        self.len -= 1;
        Some(value)
    }

    /// Calls `visit(fingerprint, distance)` once for every stored fingerprint within distance `k`
    /// of `query` (the query itself included, at distance 0, if stored). The order is
    /// unspecified but deterministic for a given sequence of inserts and removals.
    #[inline]
    pub fn for_each_within(&self, query: Fingerprint, visit: impl FnMut(Fingerprint, u32)) {
        // Two copies, so that the default layouts' lookups carry no code for sorted buckets.
        if self.sorted {
            self.lookup::<true>(query, visit);
        } else {
            self.lookup::<false>(query, visit);
        }
    }

    /// [`for_each_within`](Self::for_each_within), for an index with sorted buckets or without.
    #[inline]
    fn lookup<const SORTED: bool>(
        &self,
        query: Fingerprint,
        mut visit: impl FnMut(Fingerprint, u32),
    ) {
        let x = query.0;
        let k = self.max_distance();
        let keys = self.layout.tables();
        for first in (0..keys.len()).step_by(PROBES) {
            let numbers = first..keys.len().min(first + PROBES);
            // Find every bucket, then every run of the query's key, before scanning any: the
            // loads of the bucket headers, of the sketch a search or a scan reads first, and of
            // each later step of the searches, do not depend on those of the other tables, so
            // their cache misses overlap instead of following one another.
            let mut probes = [None; PROBES];
            for (probe, number) in probes.iter_mut().zip(numbers.clone()) {
                *probe = Some(match number {
                    0 => Probe::new(&self.primary, &keys[0], x),
                    _ => Probe::new(&self.secondary[number - 1], &keys[number], x),
                });
            }
            let probes = &probes[..numbers.len()];
            let touched = probes
                .iter()
                .flatten()
                .map(|probe| {
                    let position = match SORTED {
                        true => probe.addressing.first_read(probe.bucket),
                        false => 0,
                    };
                    (probe.bucket, position)
                })
                .filter(|&(bucket, position)| position < bucket.len())
                .fold(0u32, |acc, (bucket, position)| {
                    acc ^ bucket.get(position).value() as u32
                });
            std::hint::black_box(touched);

            let mut scan = |number: usize, probe: &Probe, run| {
                let table_key = &keys[number];
                let query = Encoded::new(probe.stored);
                probe
                    .bucket
                    .for_each_within(run, query, k, |position, distance| {
                        let stored = probe.bucket.get(position).value();
                        let y = table_key.restore(probe.key, probe.addressing.remainder_of(stored));
                        // A fingerprint that also has the query's key in an earlier table was
                        // visited from that table already.
                        if !keys[..number]
                            .iter()
                            .any(|earlier| earlier.key(x) == earlier.key(y))
                        {
                            visit(Fingerprint(y), distance);
                        }
                    });
            };
            if SORTED {
                let mut searches = [RunSearch::default(); PROBES];
                for (search, probe) in searches.iter_mut().zip(probes.iter().flatten()) {
                    *search = probe.addressing.search(probe.bucket, probe.stored);
                }
                let mut searching = true;
                while searching {
                    searching = false;
                    for (search, probe) in searches.iter_mut().zip(probes.iter().flatten()) {
                        searching |= search.step(probe.bucket);
                    }
                }
                for ((probe, search), number) in probes.iter().flatten().zip(&searches).zip(numbers)
                {
                    scan(number, probe, search.run(probe.bucket));
                }
            } else {
                for (probe, number) in probes.iter().flatten().zip(numbers) {
                    scan(number, probe, 0..probe.bucket.len());
                }
            }
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

    /// How many stored fingerprints a lookup of `query` compares against (the fingerprints
    /// filed under its key in each table): the work a lookup does, for capacity planning.
    pub fn candidates(&self, query: Fingerprint) -> usize {
        (0..self.layout.table_count())
            .map(|number| {
                let address = self.address(number, query.0);
                let bucket = self.remainders(number, address.bucket);
                self.addressing(number).run(bucket, address.stored).len()
            })
            .sum()
    }

    /// Every stored fingerprint with its value, in storage order.
    pub fn iter(&self) -> impl Iterator<Item = (Fingerprint, &V)> + '_ {
        let (addressing, key) = (self.primary.addressing(), &self.layout.tables()[0]);
        self.primary
            .buckets()
            .iter()
            .enumerate()
            .flat_map(move |(number, entries)| {
                entries
                    .values
                    .iter()
                    .enumerate()
                    .map(move |(position, value)| {
                        let stored = entries.remainders.get(position).value();
                        let (table_key, remainder) = addressing.key_and_remainder(number, stored);
                        (Fingerprint(key.restore(table_key, remainder)), value)
                    })
            })
    }

    /// Heap bytes held by the tables (allocated capacity, not only what is in use).
    pub fn heap_bytes(&self) -> usize {
        self.primary.heap_bytes() + self.secondary.iter().map(Table::heap_bytes).sum::<usize>()
    }
}

impl<V: Pod> PigeonholeIndex<V> {
    /// Writes the tables to a checkpoint as they are, bucket by bucket, so that
    /// [`load`](Self::load) gives back the same buckets in the same order: for each table the
    /// lengths of its buckets, then their contents one after the other.
    pub(crate) fn save(&self, out: &mut CheckpointWriter) -> io::Result<()> {
        out.put_u64(self.len as u64)?;
        let key_bits: Vec<u32> = self
            .layout
            .tables()
            .iter()
            .map(TableKey::key_bits)
            .collect();
        out.put_slice(&key_bits)?;
        let lens = |buckets: &mut dyn Iterator<Item = &Remainders>| -> Vec<u32> {
            buckets.map(|bucket| bucket.len() as u32).collect()
        };
        out.put_slice(&lens(
            &mut self.primary.buckets().iter().map(|e| &e.remainders),
        ))?;
        for entries in self.primary.buckets() {
            entries.remainders.save(out)?;
            out.put_elements(&entries.values)?;
        }
        for table in &self.secondary {
            out.put_slice(&lens(&mut table.buckets().iter()))?;
            for bucket in table.buckets() {
                bucket.save(out)?;
            }
        }
        Ok(())
    }

    /// Reads what [`save`](Self::save) wrote into this index, which must be empty and have the
    /// layout of the one saved.
    pub(crate) fn load(&mut self, input: &mut CheckpointReader) -> io::Result<()> {
        let len = input.get_usize(usize::MAX)?;
        let key_bits: Vec<u32> = input.get_vec()?;
        if !self.is_empty()
            || !key_bits
                .iter()
                .copied()
                .eq(self.layout.tables().iter().map(TableKey::key_bits))
        {
            return Err(input.invalid(format!(
                "tables keyed by {key_bits:?} bits, not by this layout's"
            )));
        }
        let lens = |input: &mut CheckpointReader, buckets: usize| -> io::Result<Vec<u32>> {
            let lens: Vec<u32> = input.get_vec()?;
            let total: u64 = lens.iter().map(|&len| u64::from(len)).sum();
            if lens.len() != buckets || total != len as u64 {
                return Err(input.invalid(format!(
                    "a table of {} buckets holding {total} fingerprints, not {buckets} and {len}",
                    lens.len()
                )));
            }
            Ok(lens)
        };
        let wide = self.primary.addressing().wide();
        let primary_lens = lens(input, self.primary.buckets().len())?;
        for (entries, &bucket_len) in self.primary.buckets_mut().iter_mut().zip(&primary_lens) {
            entries.remainders = Remainders::load(input, u64::from(bucket_len), wide)?;
            entries.values = input.get_elements(u64::from(bucket_len))?;
        }
        for table in &mut self.secondary {
            let wide = table.addressing().wide();
            let table_lens = lens(input, table.buckets().len())?;
            for (bucket, &bucket_len) in table.buckets_mut().iter_mut().zip(&table_lens) {
                *bucket = Remainders::load(input, u64::from(bucket_len), wide)?;
            }
        }
        self.len = len;
        Ok(())
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
            for layout in BlockLayout::choices(k).unwrap() {
                let name = format!("k={k}, {layout}");
                let mut index = PigeonholeIndex::with_layout(layout);
                let query = 0x0123_4567_89ab_cdefu64;
                // Flip bits spread over all blocks so that no single block holds them all.
                let at_k = (0..k).fold(query, |f, i| f ^ (1 << (i * 13 % 64)));
                let at_k_plus_1 = at_k ^ (1 << 63);
                index.insert(Fingerprint(at_k), ());
                index.insert(Fingerprint(at_k_plus_1), ());
                assert_eq!(
                    index.within(Fingerprint(query)),
                    brute_force(&[at_k, at_k_plus_1], query, k),
                    "{name}"
                );
                assert_eq!(index.remove(Fingerprint(at_k)), Some(()), "{name}");
                assert!(index.within(Fingerprint(query)).is_empty(), "{name}");
            }
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
    fn wide_keys_share_buckets_in_sorted_runs() {
        // Two 32-bit blocks, whose low 16 bits number a bucket. In table 0 the fingerprints
        // share one bucket, each under its own key; in table 1 all have key 0.
        let mut index = PigeonholeIndex::new(1).unwrap();
        let same_bucket: Vec<u64> = (0..200u64).map(|i| (i << 16) | 0xabcd).rev().collect();
        for (value, &fingerprint) in same_bucket.iter().enumerate() {
            index.insert(Fingerprint(fingerprint), value);
        }
        for (value, &fingerprint) in same_bucket.iter().enumerate() {
            assert_eq!(index.get(Fingerprint(fingerprint)), Some(&value));
            assert_eq!(index.candidates(Fingerprint(fingerprint)), 1 + 200);
        }
        let mut listed: Vec<u64> = index.iter().map(|(fingerprint, _)| fingerprint.0).collect();
        listed.sort_unstable();
        let mut expected = same_bucket.clone();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        for &fingerprint in &same_bucket {
            index.remove(Fingerprint(fingerprint));
        }
        assert_eq!(index.candidates(Fingerprint(u64::MAX)), 0);
        assert!(index.iter().next().is_none());
        assert!(index.is_empty());
    }

    #[test]
    fn the_highest_key_of_a_sorted_bucket_is_found() {
        // Keys wider than 16 bits sort their buckets by the bits above; all ones is the last
        // run of its bucket (k = 0: one 64-bit key; k = 1: two of 32 bits; and so on).
        let top = u64::MAX;
        let stored = [
            top,
            top ^ 1 << 40,
            top ^ 1 << 3,
            top ^ 0b11,
            top ^ 0b111 << 20,
        ];
        for k in 0..=3 {
            for layout in BlockLayout::choices(k).unwrap() {
                let name = format!("k={k}, {layout}");
                let mut index = PigeonholeIndex::with_layout(layout);
                for fingerprint in stored {
                    index.insert(Fingerprint(fingerprint), ());
                }
                for query in stored {
                    let expected = brute_force(&stored, query, k);
                    assert_eq!(index.within(Fingerprint(query)), expected, "{name}");
                }
                assert_eq!(index.remove(Fingerprint(top)), Some(()), "{name}");
                assert!(!index.contains(Fingerprint(top)), "{name}");
            }
        }
        // Two 32-bit keys: in table 0, top and top ^ 1 << 40 share the key of all ones; in
        // table 1, top, top ^ 1 << 3 and top ^ 0b11 do.
        let mut index = PigeonholeIndex::new(1).unwrap();
        for fingerprint in &stored[..4] {
            index.insert(Fingerprint(*fingerprint), ());
        }
        assert_eq!(index.candidates(Fingerprint(top)), 2 + 3);
    }
}
