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
        self.fingerprint_normalized(&normalize(text))
    }

    /// The fingerprint of text already passed through [`normalize`].
    pub fn fingerprint_normalized(&self, normalized: &str) -> Fingerprint {
        let region = if self.longest_sentence {
            longest_sentence(normalized)
        } else {
            normalized
        };
        let mut builder = SimhashBuilder::new();
        let idf = (self.weighting == Weighting::TfIdf).then(IdfTable::global);
        segment(region, |word| {
            if is_feature(word) {
                let weight = idf.map_or(1.0, |table| table.idf(word));
                builder.add_feature(word.as_bytes(), weight);
            }
        });
        builder.finish()
    }
}
