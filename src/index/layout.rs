//! Which bits of a 64-bit fingerprint key each table of the index.
//!
//! The default layout is the pigeonhole one: `k + 1` contiguous blocks, one table per block.
//! The others are the permuted tables of Manku, Jain and Das Sarma ("Detecting near-duplicates
//! for web crawling", WWW 2007): `b > k + 1` blocks, one table per choice of `b - k` of them,
//! and a two-level variant that cuts the bits outside the chosen blocks again. Every table's key
//! is a fixed set of fingerprint bits, a union of contiguous runs ([`TableKey`]).

use std::fmt;

use crate::Error;

/// The largest Hamming radius an index can be built for. At `k = 15` the blocks are 4 bits
/// wide; beyond that every bucket would hold a large share of all fingerprints.
pub const MAX_DISTANCE: u32 = 15;

/// The most tables a layout may have: each table holds every fingerprint again.
pub const MAX_TABLES: usize = 64;

/// The widest key a layout other than the default may have. A 48-bit key already leaves one
/// fingerprint a bucket up to 2^48 stored, so wider keys would add tables without saving
/// candidates.
const MAX_KEY_BITS: u32 = 48;

/// Key bits that address a table's array of buckets directly (65,536 buckets). A table with a
/// wider key keeps the rest of the key with each fingerprint (see `table.rs`). `k = 3`'s
/// 16-bit blocks are direct.
pub(crate) const DENSE_BLOCK_BITS: u32 = 16;

/// One contiguous run of bits of a fingerprint: a block of a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The lowest bit of the block.
    pub shift: u32,
    /// How many bits the block has (1 to 64).
    pub width: u32,
}

impl Block {
    /// The block's bits of `fingerprint`, shifted down to start at bit 0.
    #[inline]
    pub fn key(self, fingerprint: u64) -> u64 {
        (fingerprint >> self.shift) & low_mask(self.width)
    }

    /// The other `64 - width` bits of `fingerprint`, closed up.
    #[inline]
    fn remainder(self, fingerprint: u64) -> u64 {
        let below = fingerprint & low_mask(self.shift);
        let above = fingerprint
            .checked_shr(self.shift + self.width)
            .unwrap_or(0);
        below | above.checked_shl(self.shift).unwrap_or(0)
    }

    /// The fingerprint whose key is `key` and remainder `remainder`.
    #[inline]
    fn restore(self, key: u64, remainder: u64) -> u64 {
        let below = remainder & low_mask(self.shift);
        let above = (remainder >> self.shift)
            .checked_shl(self.shift + self.width)
            .unwrap_or(0);
        below | (key << self.shift) | above
    }
}

/// A mask of the lowest `bits` bits (all 64 for `bits >= 64`).
#[inline]
fn low_mask(bits: u32) -> u64 {
    1u64.checked_shl(bits).map_or(u64::MAX, |bit| bit - 1)
}

/// Room for the runs of a key or a remainder (the test `every_layout_keeps_its_promises` builds
/// every layout on offer: they need at most four; the rest is headroom).
const MAX_RUNS: usize = 6;

/// `width` bits at `shift` of a fingerprint, packed at `offset` of a key or remainder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Run {
    shift: u8,
    offset: u8,
    /// 1 to 64.
    width: u8,
}

impl Run {
    #[inline]
    fn mask(self) -> u64 {
        u64::MAX >> (64 - u32::from(self.width))
    }
}

/// The set bits of a mask as runs, lowest first, packed one after another from bit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Runs {
    len: u8,
    runs: [Run; MAX_RUNS],
}

impl Runs {
    /// The runs of `mask`'s set bits. Panics if it has more than [`MAX_RUNS`]: layouts are
    /// built here, never from outside input, and a test builds every one.
    fn of(mask: u64) -> Runs {
        let mut runs = [Run::default(); MAX_RUNS];
        let (mut len, mut offset, mut rest) = (0, 0, mask);
        while rest != 0 {
            let shift = rest.trailing_zeros();
            let width = (rest >> shift).trailing_ones();
            assert!(len < MAX_RUNS, "a table key of more than {MAX_RUNS} runs");
            // Shifts and widths are at most 64.
            runs[len] = Run {
                shift: shift as u8,
                offset: offset as u8,
                width: width as u8,
            };
            len += 1;
            offset += width;
            rest &= !(low_mask(width) << shift);
        }
        Runs {
            len: len as u8,
            runs,
        }
    }

    #[inline]
    fn as_slice(&self) -> &[Run] {
        &self.runs[..usize::from(self.len)]
    }

    /// The bits of `fingerprint` under the runs, packed from bit 0.
    #[inline]
    fn gather(&self, fingerprint: u64) -> u64 {
        self.as_slice().iter().fold(0, |packed, run| {
            packed | ((fingerprint >> run.shift) & run.mask()) << run.offset
        })
    }

    /// The inverse of [`gather`](Self::gather): packed bits put back in place, zero elsewhere.
    #[inline]
    fn scatter(&self, packed: u64) -> u64 {
        self.as_slice().iter().fold(0, |fingerprint, run| {
            fingerprint | ((packed >> run.offset) & run.mask()) << run.shift
        })
    }
}

/// The key of one table: a fixed set of fingerprint bits (a union of contiguous runs).
///
/// Invariants: the key bits and the remainder bits partition the 64 bits; [`key`](Self::key)
/// packs the key bits lowest first into the low [`key_bits`](Self::key_bits) bits,
/// [`remainder`](Self::remainder) packs the others into the low `64 - key_bits` bits, and
/// [`restore`](Self::restore) inverts the pair.
///
/// ```
/// use tantivy_dedup::index::BlockLayout;
///
/// let layout = BlockLayout::with_tables(3, 10).unwrap();
/// let table = &layout.tables()[4];
/// let fingerprint = 0x0123_4567_89ab_cdef;
/// let (key, remainder) = (table.key(fingerprint), table.remainder(fingerprint));
/// assert!(key < 1 << table.key_bits() && remainder < 1 << (64 - table.key_bits()));
/// assert_eq!(table.restore(key, remainder), fingerprint);
/// assert_eq!(table.key_mask().count_ones(), table.key_bits());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableKey {
    bits: KeyBits,
}

/// The bits of a key: one contiguous run, in closed form (every table of the default
/// layouts), or any runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyBits {
    Block(Block),
    Runs { key: Runs, rest: Runs },
}

impl TableKey {
    /// The table keyed by the set bits of `mask` (not zero).
    fn of_mask(mask: u64) -> TableKey {
        let key = Runs::of(mask);
        let bits = match key.as_slice() {
            [run] => KeyBits::Block(Block {
                shift: u32::from(run.shift),
                width: u32::from(run.width),
            }),
            _ => KeyBits::Runs {
                key,
                rest: Runs::of(!mask),
            },
        };
        TableKey { bits }
    }

    /// The key bits of `fingerprint`, packed lowest first from bit 0.
    #[inline]
    pub fn key(&self, fingerprint: u64) -> u64 {
        match &self.bits {
            KeyBits::Block(block) => block.key(fingerprint),
            KeyBits::Runs { key, .. } => key.gather(fingerprint),
        }
    }

    /// The other `64 - key_bits` bits of `fingerprint`, closed up: what the table stores, since
    /// the key says the rest.
    #[inline]
    pub fn remainder(&self, fingerprint: u64) -> u64 {
        match &self.bits {
            KeyBits::Block(block) => block.remainder(fingerprint),
            KeyBits::Runs { rest, .. } => rest.gather(fingerprint),
        }
    }

    /// The fingerprint whose key is `key` and remainder `remainder` (the inverse of
    /// [`key`](Self::key) and [`remainder`](Self::remainder)).
    #[inline]
    pub fn restore(&self, key: u64, remainder: u64) -> u64 {
        match &self.bits {
            KeyBits::Block(block) => block.restore(key, remainder),
            KeyBits::Runs { key: runs, rest } => runs.scatter(key) | rest.scatter(remainder),
        }
    }

    /// How many bits the key has (1 to 64).
    pub fn key_bits(&self) -> u32 {
        self.key_mask().count_ones()
    }

    /// The key bits in place in a fingerprint.
    pub fn key_mask(&self) -> u64 {
        match &self.bits {
            KeyBits::Block(block) => low_mask(block.width) << block.shift,
            KeyBits::Runs { key, .. } => key.scatter(u64::MAX),
        }
    }
}

/// How a layout cuts the bits: `cuts[0]` blocks, of which each key takes all but `k`; then,
/// if there is a second level, the bits outside a key's blocks cut into `cuts[1]` sub-blocks,
/// of which the key takes all but `k` as well.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    cuts: Vec<u32>,
}

/// The tables of a layout for radius `k`: which bits key each one.
///
/// The default ([`new`](Self::new)) is the pigeonhole layout: 64 bits cut into `k + 1`
/// contiguous blocks of near-equal width (the first `64 mod (k + 1)` one bit wider), one table
/// keyed by each block. [`with_tables`](Self::with_tables) picks one of Manku et al.'s permuted
/// layouts instead: `b` blocks and one table for each choice of `b - k` of them (`C(b, k)`
/// tables), or the two-level one that also cuts the bits outside each table's block into
/// `k + 1` sub-blocks and keys one table by each (`(k + 1)²` tables, 16 with 28-bit keys for
/// `k = 3`).
///
/// Invariants: every pair of fingerprints within distance `k` has the same key in at least
/// one table (two fingerprints differing in at most `k` bits differ in at most `k` of the
/// blocks, so they agree on all of at least one choice of `b - k`; in the two-level layout the
/// same holds again for the sub-blocks). [`blocks`](Self::blocks) are disjoint, contiguous,
/// cover all 64 bits and number more than `k`, so every such pair also agrees on a whole
/// block; for the default layout table `t` is keyed by exactly block `t`.
///
/// ```
/// use tantivy_dedup::index::BlockLayout;
///
/// let layout = BlockLayout::new(3).unwrap();
/// assert_eq!(layout.table_count(), 4);
/// assert!(layout.blocks().iter().all(|block| block.width == 16));
/// assert_eq!(layout.blocks()[1].key(0xaaaa_bbbb_cccc_dddd), 0xcccc);
/// assert_eq!(layout.tables()[1].key(0xaaaa_bbbb_cccc_dddd), 0xcccc);
///
/// let wider = BlockLayout::with_tables(3, 20).unwrap();
/// let keys: Vec<(usize, u64)> = wider.bucket_keys(0xaaaa_bbbb_cccc_dddd).collect();
/// assert_eq!(keys.len(), 20);
/// assert!(BlockLayout::with_tables(3, 12).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLayout {
    max_distance: u32,
    shape: Shape,
    blocks: Vec<Block>,
    tables: Vec<TableKey>,
}

impl BlockLayout {
    /// The default layout for Hamming radius `max_distance` (0 to [`MAX_DISTANCE`]): `k + 1`
    /// blocks, one table each.
    pub fn new(max_distance: u32) -> Result<Self, Error> {
        check_distance(max_distance)?;
        Ok(Self::build(max_distance, vec![max_distance + 1]))
    }

    /// The layout for radius `max_distance` with exactly `tables` tables; the message of the
    /// error lists the counts there are for that radius (see [`choices`](Self::choices)).
    pub fn with_tables(max_distance: u32, tables: usize) -> Result<Self, Error> {
        let choices = Self::choices(max_distance)?;
        let counts: Vec<String> = choices
            .iter()
            .map(|layout| layout.table_count().to_string())
            .collect();
        choices
            .into_iter()
            .find(|layout| layout.table_count() == tables)
            .ok_or_else(|| {
                Error::Config(format!(
                    "max_distance (k) {max_distance} has layouts of {} tables, not {tables}",
                    counts.join(", ")
                ))
            })
    }

    /// Every layout on offer for radius `max_distance`, fewest tables first, one per table
    /// count; the first is the default. On offer: `b` blocks for each `b > k` while `C(b, k)`
    /// is at most [`MAX_TABLES`] and keys at most 48 bits wide, and the two-level layout when
    /// its `(k + 1)²` tables are that few and no one-level layout has as many.
    pub fn choices(max_distance: u32) -> Result<Vec<Self>, Error> {
        check_distance(max_distance)?;
        let k = max_distance;
        let fits = |layout: &BlockLayout| {
            layout.table_count() <= MAX_TABLES
                && layout
                    .tables
                    .iter()
                    .all(|table| table.key_bits() <= MAX_KEY_BITS)
        };
        let mut choices = vec![Self::new(k)?];
        // C(b, k) and the key width both grow with b: stop at the first that is too much.
        for blocks in k + 2..=64 {
            if binomial(blocks, k) > MAX_TABLES as u64 {
                break;
            }
            let layout = Self::build(k, vec![blocks]);
            if !fits(&layout) {
                break;
            }
            choices.push(layout);
        }
        if (k as usize + 1).pow(2) <= MAX_TABLES {
            let layout = Self::build(k, vec![k + 1, k + 1]);
            let count = layout.table_count();
            if fits(&layout) && choices.iter().all(|other| other.table_count() != count) {
                choices.push(layout);
            }
        }
        choices.sort_by_key(Self::table_count);
        Ok(choices)
    }

    /// The layout that cuts the bits as `cuts` says; callers drop those over `MAX_TABLES` or
    /// `MAX_KEY_BITS`.
    fn build(max_distance: u32, cuts: Vec<u32>) -> Self {
        let blocks = split(u64::MAX, cuts[0])
            .into_iter()
            .map(|mask| Block {
                shift: mask.trailing_zeros(),
                width: mask.count_ones(),
            })
            .collect();
        let mut masks = Vec::new();
        key_masks(max_distance, u64::MAX, 0, &cuts, &mut masks);
        BlockLayout {
            max_distance,
            shape: Shape { cuts },
            blocks,
            tables: masks.into_iter().map(TableKey::of_mask).collect(),
        }
    }

    /// The radius `k` the layout guarantees to find every neighbour within.
    pub fn max_distance(&self) -> u32 {
        self.max_distance
    }

    /// The first-level blocks, lowest bits first: `k + 1` for the default layout, whose table
    /// `t` is keyed by block `t`; more for the one-level permuted layouts.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The tables' keys, in table order.
    pub fn tables(&self) -> &[TableKey] {
        &self.tables
    }

    /// How many tables the layout has.
    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// `(table number, key)` of each table for `fingerprint`, in table order: the buckets a
    /// fingerprint is filed under, and the ones a lookup of it reads.
    pub fn bucket_keys(&self, fingerprint: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.tables
            .iter()
            .map(move |table| table.key(fingerprint))
            .enumerate()
    }

    /// The narrowest and widest key.
    pub fn key_bits(&self) -> (u32, u32) {
        let widths = self.tables.iter().map(TableKey::key_bits);
        let min = widths.clone().min().unwrap_or(0);
        (min, widths.max().unwrap_or(0))
    }
}

/// E.g. "10 tables: 5 blocks, keys of 2 blocks (25-26 bits)".
impl fmt::Display for BlockLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.max_distance;
        let plural = |n: u32, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        write!(f, "{} tables: ", self.table_count())?;
        let cuts = &self.shape.cuts;
        write!(f, "{}, keys of {}", plural(cuts[0], "block"), cuts[0] - k)?;
        if let Some(&sub) = cuts.get(1) {
            write!(
                f,
                " and {} of the other bits cut into {sub}",
                plural(sub - k, "sub-block")
            )?;
        }
        match self.key_bits() {
            (min, max) if min == max => write!(f, " ({min} bits)"),
            (min, max) => write!(f, " ({min}-{max} bits)"),
        }
    }
}

fn check_distance(max_distance: u32) -> Result<(), Error> {
    if max_distance > MAX_DISTANCE {
        return Err(Error::Config(format!(
            "max_distance (k) must be between 0 and {MAX_DISTANCE}, got {max_distance}"
        )));
    }
    Ok(())
}

/// `C(n, k)`, saturating.
fn binomial(n: u32, k: u32) -> u64 {
    (0..u64::from(k)).fold(1u64, |acc, i| {
        acc.saturating_mul(u64::from(n) - i) / (i + 1)
    })
}

/// The set bits of `mask` cut into `parts` runs of consecutive set bits (lowest first) of
/// near-equal count, the first `count mod parts` one bit larger.
fn split(mask: u64, parts: u32) -> Vec<u64> {
    let total = mask.count_ones();
    let (base, larger) = (total / parts, total % parts);
    let mut rest = mask;
    (0..parts)
        .map(|part| {
            let mut piece = 0;
            for _ in 0..base + u32::from(part < larger) {
                let lowest = rest & rest.wrapping_neg();
                piece |= lowest;
                rest ^= lowest;
            }
            piece
        })
        .collect()
}

/// Appends to `out` the key masks of every table whose key holds `chosen` and, of the bits of
/// `free`, all but `k` of the `cuts[0]` parts (then, recursively, of the next cut of the parts
/// left out).
fn key_masks(k: u32, free: u64, chosen: u64, cuts: &[u32], out: &mut Vec<u64>) {
    let Some((&parts, next)) = cuts.split_first() else {
        out.push(chosen);
        return;
    };
    let pieces = split(free, parts);
    for choice in combinations(parts, parts - k) {
        let taken = pieces
            .iter()
            .enumerate()
            .filter(|&(part, _)| choice >> part & 1 == 1)
            .fold(0, |mask, (_, piece)| mask | piece);
        key_masks(k, free & !taken, chosen | taken, next, out);
    }
}

/// Every choice of `r` of `n` items (`r <= n < 64`) as a bit set, in increasing order
/// (Gosper's hack: the next larger number with as many set bits).
fn combinations(n: u32, r: u32) -> impl Iterator<Item = u64> {
    assert!(r <= n && n < 64, "choosing {r} of {n}");
    std::iter::successors(Some((1u64 << r) - 1), move |&choice| {
        let lowest = choice & choice.wrapping_neg();
        let ripple = choice.checked_add(lowest).filter(|_| lowest != 0)?;
        let next = (((ripple ^ choice) >> 2) / lowest) | ripple;
        (next < 1 << n).then_some(next)
    })
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The block's bits in place.
    fn block_mask(block: &Block) -> u64 {
        low_mask(block.width) << block.shift
    }

    fn all_layouts() -> Vec<BlockLayout> {
        (0..=MAX_DISTANCE)
            .flat_map(|k| BlockLayout::choices(k).unwrap())
            .collect()
    }

    /// `distance` distinct random bits.
    fn random_bits(rng: &mut SmallRng, distance: u32) -> u64 {
        let mut positions: Vec<u32> = (0..64).collect();
        positions.shuffle(rng);
        positions[..distance as usize]
            .iter()
            .fold(0, |mask, &bit| mask | 1 << bit)
    }

    #[test]
    fn default_blocks_cover_all_bits_once_and_key_the_tables() {
        for k in 0..=MAX_DISTANCE {
            let layout = BlockLayout::new(k).unwrap();
            assert_eq!(layout.blocks().len() as u32, k + 1);
            assert_eq!(layout.table_count() as u32, k + 1);
            let mut covered = 0u64;
            let mut shift = 0;
            for (block, table) in layout.blocks().iter().zip(layout.tables()) {
                assert_eq!(block.shift, shift, "k={k}: blocks are contiguous, in order");
                shift += block.width;
                assert_eq!(covered & block_mask(block), 0, "k={k}: blocks overlap");
                covered |= block_mask(block);
                assert_eq!(table.key_mask(), block_mask(block), "k={k}");
                for fingerprint in [0, u64::MAX, 0x0123_4567_89ab_cdef, 1 << 63, 1] {
                    assert_eq!(table.key(fingerprint), block.key(fingerprint));
                }
            }
            assert_eq!(covered, u64::MAX, "k={k}");
            let widths: Vec<u32> = layout.blocks().iter().map(|block| block.width).collect();
            assert!(widths.windows(2).all(|pair| pair[0] >= pair[1]));
            assert!(widths[0] - widths[k as usize] <= 1);
        }
        assert!(BlockLayout::new(MAX_DISTANCE + 1).is_err());
        assert!(BlockLayout::choices(MAX_DISTANCE + 1).is_err());
    }

    #[test]
    fn choices_are_the_documented_ones() {
        let counts = |k| -> Vec<usize> {
            BlockLayout::choices(k)
                .unwrap()
                .iter()
                .map(BlockLayout::table_count)
                .collect()
        };
        assert_eq!(counts(0), [1]);
        assert_eq!(counts(1), [2, 3, 4]);
        assert_eq!(counts(3), [4, 10, 16, 20, 35, 56]);
        assert_eq!(counts(7), [8, 36, 64]);
        assert_eq!(counts(15), [16]);
        let described = |k, tables| BlockLayout::with_tables(k, tables).unwrap().to_string();
        assert_eq!(described(3, 4), "4 tables: 4 blocks, keys of 1 (16 bits)");
        assert_eq!(
            described(3, 10),
            "10 tables: 5 blocks, keys of 2 (25-26 bits)"
        );
        assert_eq!(
            described(3, 16),
            "16 tables: 4 blocks, keys of 1 and 1 sub-block of the other bits cut into 4 \
             (28 bits)"
        );
        assert_eq!(
            described(3, 20),
            "20 tables: 6 blocks, keys of 3 (31-33 bits)"
        );
        let error = BlockLayout::with_tables(3, 12).unwrap_err().to_string();
        assert!(
            error.contains("4, 10, 16, 20, 35, 56 tables, not 12"),
            "{error}"
        );
        assert_eq!(
            BlockLayout::with_tables(3, 4).unwrap(),
            BlockLayout::new(3).unwrap()
        );
    }

    #[test]
    fn every_layout_keeps_its_promises() {
        let mut rng = SmallRng::seed_from_u64(0x1a70);
        for layout in all_layouts() {
            let k = layout.max_distance();
            let name = format!("k={k}, {layout}");
            assert!(layout.table_count() <= MAX_TABLES, "{name}");
            // Blocks: contiguous, in order, covering all bits, more than k.
            assert!(layout.blocks().len() as u32 > k, "{name}");
            let covered = layout.blocks().iter().try_fold(0u64, |covered, block| {
                (block.shift == covered.count_ones()).then_some(covered | block_mask(block))
            });
            assert_eq!(covered, Some(u64::MAX), "{name}");
            // Keys: distinct tables, each a partition of the bits that round-trips.
            let mut masks: Vec<u64> = layout.tables().iter().map(TableKey::key_mask).collect();
            masks.sort_unstable();
            masks.dedup();
            assert_eq!(masks.len(), layout.table_count(), "{name}: tables repeat");
            for table in layout.tables() {
                assert_eq!(table.key_mask().count_ones(), table.key_bits());
                for _ in 0..50 {
                    let fingerprint = rng.random::<u64>();
                    let (key, remainder) = (table.key(fingerprint), table.remainder(fingerprint));
                    let above_key = key.checked_shr(table.key_bits()).unwrap_or(0);
                    assert_eq!(above_key, 0, "{name}: key too wide");
                    assert_eq!(key, table.key(fingerprint & table.key_mask()));
                    assert_eq!(table.key(!table.key_mask()), 0);
                    if table.key_bits() > 0 && table.key_bits() < 64 {
                        assert_eq!(remainder >> (64 - table.key_bits()), 0, "{name}");
                    }
                    assert_eq!(table.restore(key, remainder), fingerprint, "{name}");
                }
            }
            // bucket_keys lists the tables' keys in order.
            let fingerprint = rng.random::<u64>();
            let keys: Vec<(usize, u64)> = layout.bucket_keys(fingerprint).collect();
            let expected: Vec<(usize, u64)> = layout
                .tables()
                .iter()
                .map(|table| table.key(fingerprint))
                .enumerate()
                .collect();
            assert_eq!(keys, expected);
        }
    }

    /// Whether some table's key holds none of the bits of `differing`.
    fn shares_a_key(layout: &BlockLayout, differing: u64) -> bool {
        layout
            .tables()
            .iter()
            .any(|table| table.key_mask() & differing == 0)
    }

    /// The recall guarantee over the combinatorics: however `k` differing bits fall on the
    /// pieces a layout cuts the bits into, some table's key holds none of them.
    #[test]
    fn every_spread_of_k_bits_leaves_a_table_key_whole() {
        for layout in all_layouts() {
            let k = layout.max_distance();
            // The classes of bits that every key takes whole or not at all (the common
            // refinement of the keys: the blocks and, for two levels, their intersections
            // with the sub-blocks). Whether a key holds a differing bit depends only on which
            // classes the bits touch, so one bit per class stands for every placement, and
            // touching exactly k classes (or all, if fewer) covers touching fewer.
            let mut classes: Vec<u64> = vec![u64::MAX];
            for table in layout.tables() {
                classes = classes
                    .iter()
                    .flat_map(|&class| [class & table.key_mask(), class & !table.key_mask()])
                    .filter(|&class| class != 0)
                    .collect();
            }
            let n = classes.len() as u32;
            let mut checked = 0;
            for choice in combinations(n, k.min(n)) {
                let differing = classes
                    .iter()
                    .enumerate()
                    .filter(|&(class, _)| choice >> class & 1 == 1)
                    .fold(0, |bits, (_, &class)| bits | class & class.wrapping_neg());
                assert!(
                    shares_a_key(&layout, differing),
                    "k={k}, {layout}: bits {differing:016x} touch every key"
                );
                checked += 1;
            }
            assert_eq!(checked, binomial(n, k.min(n)), "k={k}, {layout}");
        }
    }

    /// The same at random, at distance exactly `k` (always a shared key) and `k + 1` (the
    /// guarantee stops there: for the default layout some spreads touch every table).
    #[test]
    fn random_pairs_at_k_share_a_key() {
        let mut rng = SmallRng::seed_from_u64(0x1a71);
        for layout in all_layouts() {
            let k = layout.max_distance();
            for _ in 0..2_000 {
                let x = rng.random::<u64>();
                let y = x ^ random_bits(&mut rng, k);
                assert!(
                    layout
                        .bucket_keys(x)
                        .zip(layout.bucket_keys(y))
                        .any(|(a, b)| a == b),
                    "k={k}, {layout}: {x:016x} and {y:016x}"
                );
            }
        }
        // At k + 1, one bit in each of the k + 1 blocks of the default layout shares no key.
        for k in 0..=MAX_DISTANCE {
            let layout = BlockLayout::new(k).unwrap();
            let spread = layout
                .blocks()
                .iter()
                .fold(0, |mask, block| mask | 1 << block.shift);
            assert!(!shares_a_key(&layout, spread), "k={k}");
        }
    }
}
