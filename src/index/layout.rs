//! How a 64-bit fingerprint is cut into the blocks that key the pigeonhole tables.

use crate::Error;

/// The largest Hamming radius an index can be built for. At `k = 15` the blocks are 4 bits
/// wide; beyond that every bucket would hold a large share of all fingerprints.
pub const MAX_DISTANCE: u32 = 15;

/// Blocks at most this wide are looked up in a dense array of buckets; wider ones in a hash map.
/// `k = 3` (16-bit blocks, 65,536 buckets a table) is dense.
pub(crate) const DENSE_BLOCK_BITS: u32 = 16;

/// One contiguous run of bits of a fingerprint.
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
        let shifted = fingerprint >> self.shift;
        if self.width == 64 {
            shifted
        } else {
            shifted & ((1u64 << self.width) - 1)
        }
    }

    /// The other `64 - width` bits of `fingerprint`, closed up: what a table keyed by this
    /// block needs to store, since the key itself says the block's bits.
    #[inline]
    pub fn remainder(self, fingerprint: u64) -> u64 {
        let below = fingerprint & low_mask(self.shift);
        let above = fingerprint
            .checked_shr(self.shift + self.width)
            .unwrap_or(0);
        below | above.checked_shl(self.shift).unwrap_or(0)
    }

    /// The fingerprint whose key is `key` and remainder `remainder` (the inverse of
    /// [`key`](Self::key) and [`remainder`](Self::remainder)).
    #[inline]
    pub fn restore(self, key: u64, remainder: u64) -> u64 {
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

/// The pigeonhole layout for radius `k`: 64 bits cut into `k + 1` contiguous blocks of near-equal
/// width (the first `64 mod (k + 1)` blocks one bit wider).
///
/// Invariant: the blocks are disjoint, cover all 64 bits, and there are exactly `k + 1` of them,
/// so two fingerprints at distance `<= k` agree exactly on at least one block.
///
/// ```
/// use tantivy_dedup::index::BlockLayout;
///
/// let layout = BlockLayout::new(3).unwrap();
/// assert_eq!(layout.blocks().len(), 4);
/// assert!(layout.blocks().iter().all(|block| block.width == 16));
/// assert_eq!(layout.blocks()[1].key(0xaaaa_bbbb_cccc_dddd), 0xcccc);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLayout {
    max_distance: u32,
    blocks: Vec<Block>,
}

impl BlockLayout {
    /// The layout for Hamming radius `max_distance` (0 to [`MAX_DISTANCE`]).
    pub fn new(max_distance: u32) -> Result<Self, Error> {
        if max_distance > MAX_DISTANCE {
            return Err(Error::Config(format!(
                "max_distance (k) must be between 0 and {MAX_DISTANCE}, got {max_distance}"
            )));
        }
        let count = max_distance + 1;
        let (base, wider) = (64 / count, 64 % count);
        let mut shift = 0;
        let blocks = (0..count)
            .map(|i| {
                let width = base + u32::from(i < wider);
                let block = Block { shift, width };
                shift += width;
                block
            })
            .collect();
        Ok(BlockLayout {
            max_distance,
            blocks,
        })
    }

    /// The radius `k` the layout guarantees to find every neighbour within.
    pub fn max_distance(&self) -> u32 {
        self.max_distance
    }

    /// The blocks, lowest bits first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_all_bits_once() {
        for k in 0..=MAX_DISTANCE {
            let layout = BlockLayout::new(k).unwrap();
            assert_eq!(layout.blocks().len() as u32, k + 1);
            let mut covered = 0u64;
            for block in layout.blocks() {
                let mask = block.key(u64::MAX) << block.shift;
                assert_eq!(covered & mask, 0, "k={k}: blocks overlap");
                covered |= mask;
            }
            assert_eq!(covered, u64::MAX, "k={k}");
            for fingerprint in [0, u64::MAX, 0x0123_4567_89ab_cdef, 1 << 63, 1] {
                for block in layout.blocks() {
                    let remainder = block.remainder(fingerprint);
                    assert_eq!(remainder >> (64 - block.width), 0, "remainder too wide");
                    assert_eq!(
                        block.restore(block.key(fingerprint), remainder),
                        fingerprint
                    );
                }
            }
        }
        assert!(BlockLayout::new(MAX_DISTANCE + 1).is_err());
    }
}
