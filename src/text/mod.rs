//! The text pipeline: normalise, segment, pick features, and fingerprint.
//!
//! Everything that decides what two texts have in common lives here, and every path that
//! fingerprints text (the `dedup` command, the index writer, the near-duplicate check) goes
//! through [`Fingerprinter`], so they can never disagree.

mod features;
mod normalize;
mod segment;

pub use features::{IdfTable, Weighting, is_feature, is_stop_word, longest_sentence};
pub use normalize::normalize;
pub use segment::{USE_HMM, jieba, segment};

use crate::simhash::{Fingerprint, SimhashBuilder};

/// Turns text into a simhash fingerprint: normalise, segment with jieba, keep the features,
/// weight them, and hash.
///
/// A `Fingerprinter` is cheap to build and to clone: the dictionary and the IDF table it reads
/// are loaded once per process and shared.
///
/// ```
/// use tantivy_dedup::text::{Fingerprinter, Weighting};
///
/// let fingerprinter = Fingerprinter::new(Weighting::Tf, false);
/// let a = fingerprinter.fingerprint("国务院召开常务会议，部署推进新型城镇化建设工作。");
/// let b = fingerprinter.fingerprint("<p>国务院召开常务会议，部署推进新型城镇化建设工作。</p>");
/// assert_eq!(a, b);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprinter {
    weighting: Weighting,
    longest_sentence: bool,
}

impl Fingerprinter {
    /// A fingerprinter with the given weighting; with `longest_sentence`, only the longest
    /// sentence of the text is fingerprinted (for articles that differ by an edited paragraph).
    pub fn new(weighting: Weighting, longest_sentence: bool) -> Self {
        Fingerprinter {
            weighting,
            longest_sentence,
        }
    }

    /// The fingerprint of raw text (normalised first).
    pub fn fingerprint(&self, text: &str) -> Fingerprint {
        self.weighted_fingerprint(&normalize(text))
            .unwrap_or_else(|| opaque_fingerprint(text))
    }

    /// The fingerprint of text already passed through [`normalize`].
    pub fn fingerprint_normalized(&self, normalized: &str) -> Fingerprint {
        self.weighted_fingerprint(normalized)
            .unwrap_or_else(|| opaque_fingerprint(normalized))
    }

    /// The simhash of the text's words; of its character pairs when it has no word features
    /// (only punctuation, emoji or stop words); `None` when it has no visible character at all.
    fn weighted_fingerprint(&self, normalized: &str) -> Option<Fingerprint> {
        let region = if self.longest_sentence {
            longest_sentence(normalized)
        } else {
            normalized
        };
        let mut builder = SimhashBuilder::new();
        let idf = (self.weighting == Weighting::TfIdf).then(IdfTable::global);
        let mut features = 0usize;
        segment(region, |word| {
            if is_feature(word) {
                let weight = idf.map_or(1.0, |table| table.idf(word));
                builder.add_feature(word.as_bytes(), weight);
                features += 1;
            }
        });
        if features == 0 {
            // Without words every such text would share the empty simhash (all zero bits) and
            // so one cluster; its characters still tell texts apart.
            let visible: Vec<char> = region.chars().filter(|c| !c.is_whitespace()).collect();
            for pair in visible.windows(2.min(visible.len()).max(1)) {
                let pair: String = pair.iter().collect();
                builder.add_feature(pair.as_bytes(), 1.0);
                features += 1;
            }
        }
        (features > 0).then(|| builder.finish())
    }
}

/// A fingerprint for text with nothing to weigh (empty after normalisation, e.g. markup only):
/// a plain hash, so that only identical texts share it.
fn opaque_fingerprint(text: &str) -> Fingerprint {
    Fingerprint(xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_without_words_do_not_all_collide() {
        let fingerprinter = Fingerprinter::new(Weighting::Tf, false);
        let texts = [
            "🙂🙂",
            "的了吗",
            "<img src=\"a.png\">",
            "<img src=\"b.png\">",
            "！？",
            "",
        ];
        let fingerprints: Vec<_> = texts.iter().map(|t| fingerprinter.fingerprint(t)).collect();
        for (i, a) in fingerprints.iter().enumerate() {
            for (j, b) in fingerprints.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "{:?} and {:?}", texts[i], texts[j]);
            }
        }
        // Identical texts still agree.
        assert_eq!(
            fingerprinter.fingerprint("🙂🙂"),
            fingerprinter.fingerprint("🙂🙂")
        );
    }
}
