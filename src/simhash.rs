//! 64-bit fingerprints and the weighted simhash that makes them (Charikar 2002).
//!
//! Every feature is hashed to 64 bits with xxh3; each bit position sums `+weight` where the
//! feature's bit is 1 and `-weight` where it is 0, and bit `i` of the fingerprint is 1 iff that
//! sum is strictly positive. Similar feature multisets therefore give fingerprints a small
//! Hamming distance apart.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 64-bit simhash fingerprint.
///
/// In all JSON it is written as a 16-digit lowercase hex string, because JavaScript clients lose
/// integers above 2^53.
///
/// ```
/// use tantivy_dedup::Fingerprint;
///
/// let a = Fingerprint(0x00ff_0000_0000_0001);
/// let b = Fingerprint(0x00ff_0000_0000_0007);
/// assert_eq!(a.distance(b), 2);
/// assert_eq!(a.to_string(), "00ff000000000001");
/// assert_eq!("00ff000000000001".parse::<Fingerprint>().unwrap(), a);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// Hamming distance: the number of bit positions in which the two fingerprints differ.
    #[inline]
    pub fn distance(self, other: Fingerprint) -> u32 {
        (self.0 ^ other.0).count_ones()
    }
}

/// A hasher for keys that are already hashes (fingerprints, roots): one multiplication to
/// spread them, where the standard library's SipHash would cost more than the lookup.
///
/// ```
/// use std::collections::HashMap;
/// use std::hash::BuildHasherDefault;
/// use tantivy_dedup::simhash::FingerprintHasher;
///
/// let mut sizes: HashMap<u64, u32, BuildHasherDefault<FingerprintHasher>> = HashMap::default();
/// *sizes.entry(0xffff_0000_0000_0000).or_default() += 1;
/// assert_eq!(sizes[&0xffff_0000_0000_0000], 1);
/// ```
#[derive(Default, Clone, Copy)]
pub struct FingerprintHasher(u64);

impl std::hash::Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({:016x})", self.0)
    }
}

/// The error of parsing a fingerprint that is not 1 to 16 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint is 16 hex digits, got {0:?}")]
pub struct ParseFingerprintError(String);

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseFingerprintError(s.to_owned()));
        }
        u64::from_str_radix(s, 16)
            .map(Fingerprint)
            .map_err(|_| ParseFingerprintError(s.to_owned()))
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// In the OpenAPI document of the HTTP API: a string of 16 lowercase hex digits, as it is
/// written (the type is a number only inside the library).
#[cfg(feature = "server")]
impl utoipa::PartialSchema for Fingerprint {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .pattern(Some("^[0-9a-f]{16}$"))
            .description(Some(
                "A 64-bit simhash fingerprint as 16 lowercase hex digits (a string, because \
                 JavaScript loses integers above 2^53).",
            ))
            .examples(["00ff000000000001"])
            .into()
    }
}

#[cfg(feature = "server")]
impl utoipa::ToSchema for Fingerprint {}

/// Accumulates weighted features into a simhash.
///
/// Weights are summed in fixed point (1/65,536 steps), exactly, so the order in which features
/// are added never matters (floating-point sums would round differently when a paragraph
/// moves); adding the same feature twice with weight `w` is the same as adding it once with
/// weight `2w` (which is how term frequency weighting falls out without counting terms first).
///
/// ```
/// use tantivy_dedup::simhash::SimhashBuilder;
///
/// let mut builder = SimhashBuilder::new();
/// builder.add_feature(b"news", 1.0);
/// builder.add_feature(b"story", 2.0);
/// let once = builder.finish();
///
/// let mut again = SimhashBuilder::new();
/// again.add_feature(b"story", 1.0);
/// again.add_feature(b"news", 1.0);
/// again.add_feature(b"story", 1.0);
/// assert_eq!(again.finish(), once);
/// ```
#[derive(Clone)]
pub struct SimhashBuilder {
    /// Per bit: the total weight of the features whose hash has that bit set.
    ones: [i64; 64],
    /// The total weight of all features.
    total: i64,
    /// Features of weight exactly 1 (every feature under TF weights), counted per bit eight
    /// bits at a time: byte `j` of `unit_counts[k]` counts the set bits `8k + j`. Folded into
    /// `ones` before a count can overflow, and when finishing.
    unit_counts: [u64; 8],
    /// Features in `unit_counts` (at most [`MAX_UNIT_COUNT`]).
    units: u32,
}

/// How many unit features a byte lane of `unit_counts` can count.
const MAX_UNIT_COUNT: u32 = u8::MAX as u32;

/// For each byte value, its eight bits spread one per byte: adding `SPREAD[b]` to a `u64`
/// counts the bits of `b` in eight lanes with one addition.
const SPREAD: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte] |= (((byte >> bit) & 1) as u64) << (8 * bit);
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// Fixed-point steps per unit of weight.
const WEIGHT_SCALE: f32 = (1u32 << WEIGHT_BITS) as f32;

/// The fixed point's fractional bits.
const WEIGHT_BITS: u32 = 16;

impl Default for SimhashBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SimhashBuilder {
    /// An empty builder; `finish` on it gives the all-zero fingerprint.
    pub fn new() -> Self {
        SimhashBuilder {
            ones: [0; 64],
            total: 0,
            unit_counts: [0; 8],
            units: 0,
        }
    }

    /// Adds one feature, hashed with xxh3, with the given weight.
    #[inline]
    pub fn add_feature(&mut self, feature: &[u8], weight: f32) {
        self.add_hash(xxhash_rust::xxh3::xxh3_64(feature), weight);
    }

    /// Adds a feature by its 64-bit hash. Weights are non-negative (negative ones count as 0)
    /// and kept to 1/65,536.
    #[inline]
    pub fn add_hash(&mut self, hash: u64, weight: f32) {
        if weight == 1.0 {
            self.add_unit_hash(hash);
            return;
        }
        // `as` saturates: NaN gives 0, and absurdly large weights stay finite.
        let weight = (weight.max(0.0) * WEIGHT_SCALE).round() as i32;
        let weight = i64::from(weight);
        // Summing only the "1" side keeps the loop branch-free and vectorisable: the signed sum
        // of the definition (docs/algorithm.md, "Weights and the simhash") is `2 * ones - total`.
        // A mask, not a multiplication: 64-bit lanes multiply slowly or not at all in SIMD.
        for (bit, ones) in self.ones.iter_mut().enumerate() {
            *ones += weight & ((hash >> bit) & 1).wrapping_neg() as i64;
        }
        self.total += weight;
    }

    /// A feature of weight 1: eight table lookups and additions instead of 64.
    #[inline]
    fn add_unit_hash(&mut self, hash: u64) {
        for (k, counts) in self.unit_counts.iter_mut().enumerate() {
            *counts += SPREAD[((hash >> (8 * k)) & 0xff) as usize];
        }
        self.units += 1;
        if self.units == MAX_UNIT_COUNT {
            let (ones, total) = self.with_units();
            (self.ones, self.total) = (ones, total);
            self.unit_counts = [0; 8];
            self.units = 0;
        }
    }

    /// Adds every feature of `other` again, its weight multiplied by `factor`. When `other`
    /// holds only features of weight 1, this equals adding each of them with weight `factor`
    /// (the same fixed-point sums), at 64 multiplications for all of them instead of 64 steps
    /// for each: features of one term frequency share their weight.
    ///
    /// ```
    /// use tantivy_dedup::simhash::SimhashBuilder;
    ///
    /// let mut repeated = SimhashBuilder::new();
    /// repeated.add_feature(b"story", 1.0);
    /// repeated.add_feature(b"news", 1.0);
    /// let mut scaled = SimhashBuilder::new();
    /// scaled.add_feature(b"report", 1.0);
    /// scaled.add_scaled(&repeated, 1.7);
    ///
    /// let mut each = SimhashBuilder::new();
    /// each.add_feature(b"report", 1.0);
    /// each.add_feature(b"story", 1.7);
    /// each.add_feature(b"news", 1.7);
    /// assert_eq!(scaled.finish(), each.finish());
    /// ```
    pub fn add_scaled(&mut self, other: &SimhashBuilder, factor: f32) {
        let factor = i64::from((factor.max(0.0) * WEIGHT_SCALE).round() as i32);
        // Sums are never negative: the shift is the division by the fixed-point scale. The
        // product fits in 64 bits but for absurd sums, which take the wide path.
        let scale = |weight: i64| match weight.checked_mul(factor) {
            Some(product) => product >> WEIGHT_BITS,
            None => ((i128::from(weight) * i128::from(factor)) >> WEIGHT_BITS) as i64,
        };
        let (ones, total) = other.with_units();
        for (mine, theirs) in self.ones.iter_mut().zip(ones) {
            *mine += scale(theirs);
        }
        self.total += scale(total);
    }

    /// `ones` and `total` with the pending unit features folded in.
    fn with_units(&self) -> ([i64; 64], i64) {
        let unit = WEIGHT_SCALE as i64;
        let mut ones = self.ones;
        for (k, counts) in self.unit_counts.iter().enumerate() {
            for j in 0..8 {
                ones[8 * k + j] += ((counts >> (8 * j)) & 0xff) as i64 * unit;
            }
        }
        (ones, self.total + i64::from(self.units) * unit)
    }

    /// The fingerprint: bit `i` is set iff `sum(+w where set, -w where clear) > 0`.
    pub fn finish(&self) -> Fingerprint {
        let (ones, total) = self.with_units();
        let mut value = 0u64;
        for (bit, &ones) in ones.iter().enumerate() {
            if 2 * ones - total > 0 {
                value |= 1 << bit;
            }
        }
        Fingerprint(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_feature_reproduces_its_hash() {
        let mut builder = SimhashBuilder::new();
        builder.add_hash(0xdead_beef_0123_4567, 3.5);
        assert_eq!(builder.finish(), Fingerprint(0xdead_beef_0123_4567));
    }

    #[test]
    fn balanced_bits_are_zero() {
        let mut builder = SimhashBuilder::new();
        builder.add_hash(u64::MAX, 1.0);
        builder.add_hash(0, 1.0);
        assert_eq!(builder.finish(), Fingerprint(0));
    }

    #[test]
    fn heavier_feature_wins() {
        let mut builder = SimhashBuilder::new();
        builder.add_hash(u64::MAX, 2.0);
        builder.add_hash(0, 1.0);
        assert_eq!(builder.finish(), Fingerprint(u64::MAX));
    }

    #[test]
    fn fractional_weights_are_order_free() {
        let features: Vec<(u64, f32)> = (0..500u64)
            .map(|i| {
                (
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    1.0 + (i % 97) as f32 / 7.3,
                )
            })
            .collect();
        let mut forward = SimhashBuilder::new();
        let mut backward = SimhashBuilder::new();
        for &(hash, weight) in &features {
            forward.add_hash(hash, weight);
        }
        for &(hash, weight) in features.iter().rev() {
            backward.add_hash(hash, weight);
        }
        assert_eq!(forward.finish(), backward.finish());
    }

    #[test]
    fn unit_weights_counted_in_bytes_equal_the_general_sum() {
        // Past the 255 features after which byte counters are folded, and with weights of 1
        // mixed among others.
        let features: Vec<(u64, f32)> = (0..1000u64)
            .map(|i| {
                let weight = if i % 7 == 0 { 2.5 } else { 1.0 };
                (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 40), weight)
            })
            .collect();
        for take in [0, 1, 254, 255, 256, 600, 1000] {
            let mut fast = SimhashBuilder::new();
            let mut reference = [0i64; 64];
            let mut total = 0i64;
            for &(hash, weight) in &features[..take] {
                fast.add_hash(hash, weight);
                let weight = (weight * WEIGHT_SCALE).round() as i64;
                for (bit, ones) in reference.iter_mut().enumerate() {
                    *ones += ((hash >> bit) & 1) as i64 * weight;
                }
                total += weight;
            }
            let expected = (0..64)
                .filter(|&bit| 2 * reference[bit] - total > 0)
                .fold(0u64, |value, bit| value | 1 << bit);
            assert_eq!(fast.finish(), Fingerprint(expected), "{take} features");
        }
    }

    #[test]
    fn hex_round_trip_and_rejects() {
        let fp = Fingerprint(0x0123_4567_89ab_cdef);
        assert_eq!(fp.to_string(), "0123456789abcdef");
        assert_eq!(serde_json::to_string(&fp).unwrap(), "\"0123456789abcdef\"");
        let back: Fingerprint = serde_json::from_str("\"0123456789abcdef\"").unwrap();
        assert_eq!(back, fp);
        for bad in ["", "xyz", "0123456789abcdef0", "+1", "-1", "12 4"] {
            assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
        }
    }
}
