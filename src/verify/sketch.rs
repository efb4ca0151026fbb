//! A compact, consistent sample of a text's character shingles.

use xxhash_rust::xxh3::xxh3_64;

use crate::text::SENTENCE_ENDS;

/// Characters per shingle. Four Chinese characters are about two words: long enough that
/// unrelated texts share few shingles, short enough that a typo costs only four.
pub const SHINGLE_CHARS: usize = 4;

/// How many of a sketch's smallest hashes are its candidate keys (see [`Sketch::keys`]).
pub const KEYS: usize = 8;

/// The character shingles of a text, hashed to 32 bits, and a consistent sample of them.
///
/// A text's shingles are the runs of [`SHINGLE_CHARS`] letters and digits inside each sentence
/// of its normalised text (punctuation, spaces and symbols are skipped; a sentence shorter than
/// a shingle is one shingle). Shingles never span a sentence boundary, so moving sentences or
/// paragraphs around keeps every shingle.
///
/// The sketch keeps the hashes below a threshold `2^32 >> shift`, with the smallest `shift`
/// that keeps at most `capacity` of them: a text with at most `capacity` distinct shingles is
/// kept whole, a longer one is sampled. The sample is *consistent*: a shingle that two texts
/// share is kept by both whenever it is under both thresholds, so two sketches compared at the
/// larger of their shifts are exact samples of the same hash range, and their overlap estimates
/// the overlap of the whole texts without bias.
///
/// Invariants: `hashes` is strictly increasing and every hash is below `2^32 >> shift`.
///
/// ```
/// use tantivy_dedup::verify::Sketch;
///
/// let story = "国务院常务会议今天召开。会议部署推进新型城镇化建设工作。";
/// let moved = "会议部署推进新型城镇化建设工作。国务院常务会议今天召开。";
/// let a = Sketch::of(&[story], 200);
/// let b = Sketch::of(&[moved], 200);
/// assert_eq!(a, b); // the same shingles: sentences moved, nothing changed
/// assert_eq!(a.similarity(&b).containment, 1.0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sketch {
    shift: u8,
    hashes: Box<[u32]>,
}

/// How much two sketched texts have in common.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Similarity {
    /// Shared shingles over the shingles of the text with fewer: 1 when one text is contained
    /// in the other (a truncated copy, or a copy with lines added).
    pub containment: f64,
    /// Shared shingles over the shingles of either text (Jaccard).
    pub jaccard: f64,
}

impl Sketch {
    /// The sketch of normalised texts taken together (an article's fingerprinted fields),
    /// keeping at most `capacity` hashes (at least one).
    pub fn of(normalized: &[&str], capacity: usize) -> Sketch {
        let bytes: usize = normalized.iter().map(|text| text.len()).sum();
        // CJK text is three bytes a character, and each character starts one shingle.
        let mut hashes = Vec::with_capacity(bytes / 3 + 1);
        let mut sentence = Vec::new();
        for text in normalized {
            for part in text.split(SENTENCE_ENDS) {
                sentence.clear();
                sentence.extend(part.chars().filter(|&c| is_letter_or_digit(c)));
                shingle_hashes(&sentence, &mut hashes);
            }
        }
        hashes.sort_unstable();
        hashes.dedup();
        let capacity = capacity.max(1);
        let mut shift = 0u8;
        let mut kept = hashes.len();
        while kept > capacity {
            shift += 1;
            kept = hashes.partition_point(|&hash| u64::from(hash) < threshold(shift));
        }
        hashes.truncate(kept);
        Sketch {
            shift,
            hashes: hashes.into_boxed_slice(),
        }
    }

    /// The kept hashes, smallest first.
    pub fn hashes(&self) -> &[u32] {
        &self.hashes
    }

    /// Whether the text had no shingle at all (nothing but punctuation, symbols or markup).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The sketch's candidate keys: its [`KEYS`] smallest hashes (all of them if it has fewer).
    /// They are the smallest shingle hashes of the whole text, so a text and a copy that keeps
    /// most of it share some of them (a min-hash argument: each of the copy's smallest hashes is
    /// also among the original's smallest with a probability that grows with their overlap).
    pub fn keys(&self) -> &[u32] {
        &self.hashes[..self.hashes.len().min(KEYS)]
    }

    /// How much the texts of two sketches have in common, estimated on the hash range both
    /// sketches keep whole. Two empty sketches have nothing in common.
    pub fn similarity(&self, other: &Sketch) -> Similarity {
        let (a, b) = self.comparable(other);
        if a.is_empty() || b.is_empty() {
            return Similarity {
                containment: 0.0,
                jaccard: 0.0,
            };
        }
        Similarity::of(count_shared(a, b), a.len(), b.len())
    }

    /// The parts of two sketches that sample the same hash range: each one's hashes below the
    /// threshold of the sparser sample.
    pub(crate) fn comparable<'a>(&'a self, other: &'a Sketch) -> (&'a [u32], &'a [u32]) {
        let shift = self.shift.max(other.shift);
        // The sparser sample is whole below the common threshold: no search, and no read of
        // its hashes (a stored candidate's are usually not in the cache).
        let below = |sketch: &'a Sketch| match sketch.shift == shift {
            true => &sketch.hashes[..],
            false => {
                let limit = threshold(shift);
                let kept = sketch
                    .hashes
                    .partition_point(|&hash| u64::from(hash) < limit);
                &sketch.hashes[..kept]
            }
        };
        (below(self), below(other))
    }

    /// Heap bytes the sketch holds.
    pub fn heap_bytes(&self) -> usize {
        self.hashes.len() * std::mem::size_of::<u32>()
    }

    /// The sketch as numbers, for storing beside a document (a multi-valued fast field keeps
    /// them in order): the shift, then each hash.
    pub fn to_values(&self) -> impl Iterator<Item = u64> + '_ {
        std::iter::once(u64::from(self.shift))
            .chain(self.hashes.iter().map(|&hash| u64::from(hash)))
    }

    /// Reads [`to_values`](Self::to_values) back; `None` when the values are not a sketch.
    pub fn from_values(mut values: impl Iterator<Item = u64>) -> Option<Sketch> {
        let shift = u8::try_from(values.next()?)
            .ok()
            .filter(|&shift| shift <= 32)?;
        let hashes = values
            .map(|value| u32::try_from(value).ok())
            .collect::<Option<Box<[u32]>>>()?;
        let ordered = hashes.windows(2).all(|pair| pair[0] < pair[1]);
        let in_range = hashes
            .last()
            .is_none_or(|&hash| u64::from(hash) < threshold(shift));
        (ordered && in_range).then_some(Sketch { shift, hashes })
    }
}

/// `char::is_alphanumeric`, with the common CJK ideographs and ASCII answered without the
/// Unicode tables.
fn is_letter_or_digit(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fff}')
        || c.is_ascii_alphanumeric()
        || (!c.is_ascii() && c.is_alphanumeric())
}

/// The sample's bound for a shift: hashes below it are kept.
fn threshold(shift: u8) -> u64 {
    (1u64 << 32) >> shift
}

/// Appends the hashes of a sentence's shingles (the sentence's letters and digits, in order).
fn shingle_hashes(sentence: &[char], out: &mut Vec<u32>) {
    match sentence.len() {
        0 => {}
        short if short <= SHINGLE_CHARS => out.push(hash32(sentence)),
        _ => out.extend(sentence.windows(SHINGLE_CHARS).map(hash32)),
    }
}

/// The hash of a shingle: xxh3 of its characters as 32-bit code points, high half.
fn hash32(shingle: &[char]) -> u32 {
    let mut bytes = [0u8; 4 * SHINGLE_CHARS];
    for (slot, &c) in bytes.chunks_exact_mut(4).zip(shingle) {
        slot.copy_from_slice(&u32::from(c).to_le_bytes());
    }
    (xxh3_64(&bytes[..4 * shingle.len()]) >> 32) as u32
}

impl Similarity {
    /// The similarity of two non-empty samples of `a` and `b` hashes that share `shared`.
    pub(crate) fn of(shared: usize, a: usize, b: usize) -> Similarity {
        Similarity {
            containment: shared as f64 / a.min(b) as f64,
            jaccard: shared as f64 / (a + b - shared) as f64,
        }
    }
}

/// Elements two strictly increasing slices share, if at least `needed`; `None` as soon as the
/// elements left cannot make up the difference (most candidates are told apart after a
/// fraction of the walk).
pub(crate) fn count_shared_at_least(a: &[u32], b: &[u32], needed: usize) -> Option<usize> {
    // Elements passed without a match are lost for good: at most `len - lost` can be shared.
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                i += 1;
                if i + needed > shared + a.len() {
                    return None;
                }
            }
            std::cmp::Ordering::Greater => {
                j += 1;
                if j + needed > shared + b.len() {
                    return None;
                }
            }
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    (shared >= needed).then_some(shared)
}

/// Elements two strictly increasing slices share.
pub(crate) fn count_shared(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(seed: u64, sentences: usize) -> String {
        let alphabet: Vec<char> = "国务院会议召开部署推进城镇化建设工作经济发展改革开放人民群众"
            .chars()
            .collect();
        let mut state = seed | 1;
        let mut out = String::new();
        for _ in 0..sentences {
            for _ in 0..20 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                out.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            out.push('。');
        }
        out
    }

    #[test]
    fn a_long_text_is_sampled_to_capacity() {
        let long = text(7, 40);
        let whole = Sketch::of(&[&long], 10_000);
        let sampled = Sketch::of(&[&long], 64);
        assert!(whole.hashes().len() > 64);
        assert!(sampled.hashes().len() <= 64 && sampled.hashes().len() >= 16);
        assert!(whole.hashes().starts_with(sampled.hashes()));
        assert_eq!(sampled.similarity(&whole).containment, 1.0);
    }

    #[test]
    fn a_truncated_copy_is_contained() {
        let long = text(3, 30);
        let cut: String = long.chars().take(long.chars().count() / 3).collect();
        let similarity = Sketch::of(&[&long], 200).similarity(&Sketch::of(&[&cut], 200));
        assert!(similarity.containment > 0.9, "{similarity:?}");
        assert!(similarity.jaccard < 0.5, "{similarity:?}");
    }

    #[test]
    fn texts_without_shingles_match_nothing() {
        let empty = Sketch::of(&["！？……"], 200);
        assert!(empty.is_empty());
        assert_eq!(empty.similarity(&empty).containment, 0.0);
    }

    proptest! {
        #[test]
        fn values_round_trip_and_garbage_is_refused(seed in any::<u64>(), sentences in 0usize..30, capacity in 1usize..300, garbage in proptest::collection::vec(any::<u64>(), 0..64)) {
            let sketch = Sketch::of(&[&text(seed, sentences)], capacity);
            prop_assert_eq!(Sketch::from_values(sketch.to_values()), Some(sketch.clone()));
            if let Some(read) = Sketch::from_values(garbage.into_iter()) {
                prop_assert!(read.hashes().windows(2).all(|pair| pair[0] < pair[1]));
            }
        }

        #[test]
        fn similarity_is_symmetric_and_bounded(a in any::<u64>(), b in any::<u64>(), capacity in 1usize..300) {
            let (x, y) = (Sketch::of(&[&text(a, 12)], capacity), Sketch::of(&[&text(b, 5)], capacity));
            let (xy, yx) = (x.similarity(&y), y.similarity(&x));
            prop_assert_eq!(xy, yx);
            prop_assert!((0.0..=1.0).contains(&xy.containment) && xy.jaccard <= xy.containment);
        }
    }
}
