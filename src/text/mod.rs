//! The text pipeline: normalise, split into words, pick features, and fingerprint.
//!
//! Everything that decides what two texts have in common lives here, and every path that
//! fingerprints text (the `dedup` command, the index writer, the near-duplicate check) goes
//! through [`Fingerprinter`], so they can never disagree.

mod features;
mod names;
mod normalize;
mod script;
mod words;

pub use features::{
    IdfTable, Weighting, emoticon_codes, has_letter_or_digit, is_feature, is_stop_word,
    longest_sentence,
};
pub(crate) use features::{SENTENCE_ENDS, is_cjk_punctuation};
pub use names::{MAX_NAMES, MIN_REPEATS, Names, is_name};
pub(crate) use normalize::is_zero_width;
pub use normalize::{OffsetMap, normalize, normalize_with_offsets, readable};
pub use script::simplified;
pub use words::{
    TokenSpan, USE_HMM, jieba, search_tokens, split_words, use_user_dictionary,
    user_dictionary_digest,
};
pub(crate) use words::{require_no_user_dictionary, same_user_dictionary};

use std::ops::Range;

use xxhash_rust::xxh3::xxh3_64;

use crate::simhash::{Fingerprint, SimhashBuilder};

/// A text analysed once for both of its uses: normalised, then split into the search
/// index's tokens, among which the whole words are the fingerprint's features.
///
/// The tokens are exactly what the index's registered tokenizer produces for the same raw text
/// (see `engine::NewsTokenizer`), so documents can be indexed from these tokens and still be
/// found by queries that go through the tokenizer. Tokens are spans of the normalised text, so
/// analysing allocates no string per token.
///
/// ```
/// use tantivy_dedup::text::{AnalyzedText, Fingerprinter, Weighting};
///
/// let text = "<p>中华人民共和国国务院新闻办公室今天举行发布会。</p>";
/// let analyzed = AnalyzedText::new(text);
/// assert_eq!(analyzed.normalized(), "中华人民共和国国务院新闻办公室今天举行发布会。");
/// assert!(analyzed.tokens().any(|(word, _)| word == "人民"));
/// // The whole words are jieba's default-mode words, so the fingerprint is the same either way.
/// let fingerprinter = Fingerprinter::new(Weighting::Tf, false);
/// assert_eq!(fingerprinter.fingerprint_analyzed(&[&analyzed]), fingerprinter.fingerprint(text));
/// ```
#[derive(Debug, Clone)]
pub struct AnalyzedText {
    normalized: String,
    tokens: Vec<TokenSpan>,
    /// The raw text's hash, for the fingerprint of a text with nothing visible in it.
    raw_hash: u64,
    /// Where the normalised text's bytes came from in the raw text, when asked for
    /// ([`AnalyzedText::with_raw_offsets`]); the fingerprint path does without.
    raw_offsets: Option<OffsetMap>,
}

impl AnalyzedText {
    /// Normalises `raw` and splits it into words.
    pub fn new(raw: &str) -> Self {
        Self::of(raw, normalize(raw), None)
    }

    /// [`AnalyzedText::new`], also keeping the map from the normalised text back to `raw`, so
    /// that tokens can be located in the raw text ([`AnalyzedText::raw_range`]). The words
    /// are the same.
    ///
    /// ```
    /// use tantivy_dedup::text::AnalyzedText;
    ///
    /// let raw = "<b>ＣＣＴＶ</b>新闻联播";
    /// let analyzed = AnalyzedText::with_raw_offsets(raw);
    /// let (word, span) = analyzed.token(0).unwrap();
    /// assert_eq!(word, "cctv");
    /// assert_eq!(&raw[analyzed.raw_range(span)], "ＣＣＴＶ");
    /// ```
    pub fn with_raw_offsets(raw: &str) -> Self {
        let (normalized, offsets) = normalize_with_offsets(raw);
        Self::of(raw, normalized, Some(offsets))
    }

    fn of(raw: &str, normalized: String, raw_offsets: Option<OffsetMap>) -> Self {
        let tokens = search_tokens(&normalized);
        AnalyzedText {
            normalized,
            tokens,
            raw_hash: xxh3_64(raw.as_bytes()),
            raw_offsets,
        }
    }

    /// Whether [`AnalyzedText::raw_range`] gives raw offsets (the text was analysed with
    /// [`AnalyzedText::with_raw_offsets`]).
    pub fn has_raw_offsets(&self) -> bool {
        self.raw_offsets.is_some()
    }

    /// The byte range of the raw text a token came from; without the map (made by
    /// [`AnalyzedText::new`]), the token's range in the normalised text.
    pub fn raw_range(&self, span: TokenSpan) -> Range<usize> {
        match &self.raw_offsets {
            Some(offsets) => offsets.raw_range(span.range()),
            None => span.range(),
        }
    }

    /// The normalised text; token offsets are byte offsets into it.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// The search index's tokens, in order, with their spans in the normalised text.
    pub fn tokens(&self) -> impl Iterator<Item = (&str, TokenSpan)> + '_ {
        self.tokens
            .iter()
            .map(|span| (&self.normalized[span.range()], *span))
    }

    /// Token `i` with its span, if there is one.
    pub fn token(&self, i: usize) -> Option<(&str, TokenSpan)> {
        let span = *self.tokens.get(i)?;
        Some((&self.normalized[span.range()], span))
    }

    /// The hash (xxh3) of the raw text this was made from.
    pub fn raw_hash(&self) -> u64 {
        self.raw_hash
    }

    /// The words of jieba's default mode that lie inside `region` (byte offsets).
    fn words_in(&self, region: Range<usize>) -> impl Iterator<Item = &str> + '_ {
        self.tokens
            .iter()
            .filter(move |span| {
                span.whole_word
                    && span.from as usize >= region.start
                    && span.to as usize <= region.end
            })
            .map(|span| &self.normalized[span.range()])
    }
}

/// Turns text into a simhash fingerprint: normalise, split into words with jieba, keep the features,
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
    guarded: bool,
}

/// What an emoticon code's words weigh against a word of text, under
/// [`guarded`](Fingerprinter::guarded) fingerprints: they still tell an emoticon-only post
/// from another, but a run of them cannot outvote the post's words.
pub const EMOTICON_WEIGHT: f32 = 0.25;

/// Under [`guarded`](Fingerprinter::guarded) fingerprints, a text with fewer distinct
/// features than this is degenerate: its few words make a simhash that unrelated texts share
/// by chance, so it gets an exact fingerprint of its feature set instead, and only the
/// sketch finds its near-duplicates.
pub const MIN_DISTINCT_FEATURES: usize = 4;

impl Fingerprinter {
    /// A fingerprinter with the given weighting; with `longest_sentence`, only the longest
    /// sentence of the text is fingerprinted (for articles that differ by an edited paragraph).
    pub fn new(weighting: Weighting, longest_sentence: bool) -> Self {
        Fingerprinter {
            weighting,
            longest_sentence,
            guarded: false,
        }
    }

    /// With `guarded` (default mode), no single feature decides the fingerprint: emoticon
    /// codes weigh [`EMOTICON_WEIGHT`], and texts with fewer than [`MIN_DISTINCT_FEATURES`]
    /// distinct features get an exact hash of their feature set, so that unrelated short
    /// posts never share a fingerprint by their one repeated word. Seed mode is unguarded.
    ///
    /// ```
    /// use tantivy_dedup::text::{Fingerprinter, Weighting};
    ///
    /// let seed = Fingerprinter::new(Weighting::Tf, false);
    /// let guarded = seed.guarded(true);
    /// let a = "今晚嗨翻天[威武][威武][威武][威武][威武][威武][威武][威武]";
    /// let b = "真给国人真气[威武][威武][威武][威武][威武][威武][威武]";
    /// assert_eq!(seed.fingerprint(a), seed.fingerprint(b)); // the emoticon decided both
    /// assert_ne!(guarded.fingerprint(a), guarded.fingerprint(b));
    /// ```
    pub fn guarded(self, guarded: bool) -> Self {
        Fingerprinter { guarded, ..self }
    }

    /// The fingerprint of raw text (normalised first).
    pub fn fingerprint(&self, text: &str) -> Fingerprint {
        self.fingerprint_parts(&[text])
    }

    /// The fingerprint of several raw texts taken together (an article's title and body): the
    /// features of each part, weighed as one text. Equal to
    /// [`fingerprint_analyzed`](Self::fingerprint_analyzed) of the same parts.
    pub fn fingerprint_parts(&self, parts: &[&str]) -> Fingerprint {
        let normalized: Vec<String> = parts.iter().map(|part| normalize(part)).collect();
        self.fingerprint_normalized(parts, &normalized)
    }

    /// [`fingerprint_parts`](Self::fingerprint_parts) of raw texts already normalised
    /// (`normalized[i]` is [`normalize()`]`(raw[i])`).
    pub fn fingerprint_normalized(&self, raw: &[&str], normalized: &[String]) -> Fingerprint {
        self.weigh_normalized(raw, normalized, None)
    }

    /// [`fingerprint_parts`](Self::fingerprint_parts), and the [`Names`] the texts repeat
    /// but those of their `source`'s name (none unless the fingerprinter is
    /// [`guarded`](Self::guarded), as default mode's is): the fingerprint counts each word's
    /// occurrences already, so the names cost a look at the repeated words only.
    pub fn fingerprint_with_names(
        &self,
        parts: &[&str],
        source: Option<&str>,
    ) -> (Fingerprint, Names) {
        let normalized: Vec<String> = parts.iter().map(|part| normalize(part)).collect();
        self.fingerprint_normalized_with_names(parts, &normalized, source)
    }

    /// [`fingerprint_with_names`](Self::fingerprint_with_names) of raw texts already
    /// normalised, as [`fingerprint_normalized`](Self::fingerprint_normalized) takes them.
    pub fn fingerprint_normalized_with_names(
        &self,
        raw: &[&str],
        normalized: &[String],
        source: Option<&str>,
    ) -> (Fingerprint, Names) {
        let mut names = Names::default();
        let fingerprint = self.weigh_normalized(raw, normalized, Some((&mut names, source)));
        (fingerprint, names)
    }

    fn weigh_normalized(
        &self,
        raw: &[&str],
        normalized: &[String],
        names: Option<(&mut Names, Option<&str>)>,
    ) -> Fingerprint {
        let regions: Vec<&str> = normalized
            .iter()
            .map(|text| &text[self.region(text)])
            .collect();
        let raw_hashes: Vec<u64> = raw.iter().map(|part| xxh3_64(part.as_bytes())).collect();
        self.weigh(&regions, &raw_hashes, names, |region, add| {
            split_words(region, add)
        })
    }

    /// The fingerprint of texts already analysed (the index's insert path, which splits each
    /// text into words once for the fingerprint and the search index together).
    pub fn fingerprint_analyzed(&self, parts: &[&AnalyzedText]) -> Fingerprint {
        self.weigh_analyzed(parts, None)
    }

    /// [`fingerprint_analyzed`](Self::fingerprint_analyzed) and the [`Names`] the texts
    /// repeat, as [`fingerprint_with_names`](Self::fingerprint_with_names) gives them.
    pub fn fingerprint_analyzed_with_names(
        &self,
        parts: &[&AnalyzedText],
        source: Option<&str>,
    ) -> (Fingerprint, Names) {
        let mut names = Names::default();
        let fingerprint = self.weigh_analyzed(parts, Some((&mut names, source)));
        (fingerprint, names)
    }

    fn weigh_analyzed(
        &self,
        parts: &[&AnalyzedText],
        names: Option<(&mut Names, Option<&str>)>,
    ) -> Fingerprint {
        let regions: Vec<(&AnalyzedText, Range<usize>)> = parts
            .iter()
            .map(|analyzed| (*analyzed, self.region(&analyzed.normalized)))
            .collect();
        let region_texts: Vec<&str> = regions
            .iter()
            .map(|(analyzed, region)| &analyzed.normalized[region.clone()])
            .collect();
        let raw_hashes: Vec<u64> = parts.iter().map(|part| part.raw_hash).collect();
        let mut next = regions.iter();
        self.weigh(&region_texts, &raw_hashes, names, |_, add| {
            if let Some((analyzed, region)) = next.next() {
                analyzed.words_in(region.clone()).for_each(add);
            }
        })
    }

    /// The part of a normalised text that is fingerprinted, as byte offsets.
    fn region(&self, normalized: &str) -> Range<usize> {
        if self.longest_sentence {
            let sentence = longest_sentence(normalized);
            let start = sentence.as_ptr() as usize - normalized.as_ptr() as usize;
            start..start + sentence.len()
        } else {
            0..normalized.len()
        }
    }

    /// The simhash of the regions' words (`words(region, add)` calls `add` with each word of
    /// one region, in order, as a slice of that region); of their character pairs when they
    /// have no word features (only punctuation, emoji or stop words); a plain hash of the raw
    /// texts (`raw_hashes`) when they have no visible character at all. With `names`, a
    /// guarded fingerprinter also gives the [`Names`] among the words it counted (less those
    /// of the source's name given with it).
    fn weigh<'a>(
        &self,
        regions: &[&'a str],
        raw_hashes: &[u64],
        mut names: Option<(&mut Names, Option<&str>)>,
        mut words: impl FnMut(&'a str, &mut dyn FnMut(&'a str)),
    ) -> Fingerprint {
        let idf = self.weighting.uses_idf().then(IdfTable::global);
        // Each occurrence's hash; those of a weight other than 1 (IDF, emoticon codes) apart
        // with their weight, so that the common case sorts plain integers. Room for about one
        // word in six bytes of Chinese text (two characters).
        let bytes: usize = regions.iter().map(|region| region.len()).sum();
        let mut plain: Vec<u64> = Vec::with_capacity(bytes / 6 + 8);
        let mut weighted: Vec<(u64, f32)> = Vec::new();
        // The words long enough to be names, with their hashes: only a word no text of this
        // process has asked about needs its text, and that is found among them.
        let want_names = names.is_some() && self.guarded;
        let mut spoken: Vec<(u64, &'a str)> =
            Vec::with_capacity(if want_names { bytes / 12 + 8 } else { 0 });
        for region in regions {
            let emoticons: Vec<Range<usize>> = if self.guarded && region.contains('[') {
                emoticon_codes(region).collect()
            } else {
                Vec::new()
            };
            words(region, &mut |word| {
                if !is_feature(word) {
                    return;
                }
                let mut weight = idf.map_or(1.0, |table| table.idf(word));
                if !emoticons.is_empty() {
                    // The codes are in text order and do not overlap: a binary search keeps a
                    // post of a hundred thousand codes linear.
                    let offset = word.as_ptr() as usize - region.as_ptr() as usize;
                    let next = emoticons.partition_point(|code| code.end <= offset);
                    if emoticons
                        .get(next)
                        .is_some_and(|code| code.contains(&offset))
                    {
                        weight *= EMOTICON_WEIGHT;
                    }
                }
                let hash = xxh3_64(word.as_bytes());
                if want_names && word.len() >= names::MIN_NAME_BYTES {
                    spoken.push((hash, word));
                }
                if weight == 1.0 {
                    plain.push(hash);
                } else {
                    weighted.push((hash, weight));
                }
            });
        }
        let mut builder = SimhashBuilder::new();
        if plain.is_empty() && weighted.is_empty() {
            // Without words every such text would share the empty simhash (all zero bits) and
            // so one cluster; its characters still tell texts apart.
            let visible: Vec<char> = regions
                .iter()
                .flat_map(|region| region.chars())
                .filter(|c| !c.is_whitespace())
                .collect();
            if visible.is_empty() {
                return opaque_fingerprint(raw_hashes);
            }
            for pair in visible.windows(2.min(visible.len())) {
                let pair: String = pair.iter().collect();
                builder.add_feature(pair.as_bytes(), 1.0);
            }
            return builder.finish();
        }
        if !self.weighting.is_sublinear() && !self.guarded {
            // Plain term frequency: each occurrence adds its weight, in any order.
            plain.iter().for_each(|&hash| builder.add_hash(hash, 1.0));
            weighted
                .iter()
                .for_each(|&(hash, weight)| builder.add_hash(hash, weight));
            return builder.finish();
        }
        // Count each distinct feature once, with the weight of its frequency; a feature seen
        // with several weights (a word both inside and outside an emoticon code) takes the
        // largest. Repeated features of weight 1 and one frequency share their weight: they
        // are counted as unit features of their frequency's builder, added once, scaled.
        let mut distinct = 0;
        let mut first_distinct = [0u64; MIN_DISTINCT_FEATURES];
        let mut by_frequency: Vec<(u32, SimhashBuilder)> = Vec::new();
        let mut repeated: Vec<(u64, u32)> = Vec::new();
        let mut add_run = |hash: u64, weight: f32, tf: usize| {
            let tf = tf as u32;
            if want_names && tf >= MIN_REPEATS {
                repeated.push((hash, tf));
            }
            if weight != 1.0 {
                builder.add_hash(hash, weight * self.weighting.frequency_weight(tf));
            } else if tf == 1 {
                builder.add_hash(hash, 1.0);
            } else {
                let class = match by_frequency.iter().position(|&(of, _)| of == tf) {
                    Some(at) => at,
                    None => {
                        by_frequency.push((tf, SimhashBuilder::new()));
                        by_frequency.len() - 1
                    }
                };
                by_frequency[class].1.add_hash(hash, 1.0);
            }
            if let Some(slot) = first_distinct.get_mut(distinct) {
                *slot = hash;
            }
            distinct += 1;
        };
        if weighted.is_empty() {
            plain.sort_unstable();
            for run in plain.chunk_by(|a, b| a == b) {
                add_run(run[0], 1.0, run.len());
            }
        } else {
            weighted.extend(plain.iter().map(|&hash| (hash, 1.0)));
            weighted.sort_unstable_by_key(|&(hash, _)| hash);
            for run in weighted.chunk_by(|a, b| a.0 == b.0) {
                let weight = run.iter().map(|&(_, weight)| weight).fold(0.0, f32::max);
                add_run(run[0].0, weight, run.len());
            }
        }
        for (tf, features) in &by_frequency {
            builder.add_scaled(features, self.weighting.frequency_weight(*tf));
        }
        if let Some((names, source)) = names.as_mut().filter(|_| want_names) {
            **names = Names::of_counts(repeated, *source, &spoken);
        }
        if self.guarded && distinct < MIN_DISTINCT_FEATURES {
            let bytes: Vec<u8> = first_distinct[..distinct]
                .iter()
                .flat_map(|hash| hash.to_le_bytes())
                .collect();
            return Fingerprint(xxh3_64(&bytes));
        }
        builder.finish()
    }
}

/// A fingerprint for text with nothing to weigh (empty after normalisation, e.g. markup only):
/// a plain hash of the raw texts, so that only identical texts share it.
fn opaque_fingerprint(raw_hashes: &[u64]) -> Fingerprint {
    match raw_hashes {
        [only] => Fingerprint(*only),
        several => {
            let bytes: Vec<u8> = several.iter().flat_map(|hash| hash.to_le_bytes()).collect();
            Fingerprint(xxh3_64(&bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_emoticon_codes_costs_linear_time() {
        // Quadratic matching of words against codes would take minutes here.
        let flood = "[哈哈]好".repeat(100_000);
        let guarded = Fingerprinter::new(Weighting::LogTf, false).guarded(true);
        assert_eq!(guarded.fingerprint(&flood), guarded.fingerprint(&flood));
    }

    #[test]
    fn a_flood_of_new_words_said_twice_costs_n_log_n() {
        // Each word of a text that the table of names lacks is looked up among its words: a
        // scan for each would take hours here.
        let words: String = (0..40_000u32)
            .map(|i| {
                let pair = |n: u32| char::from_u32(0x4e00 + n % 20_000).unwrap_or('中');
                format!("{}{}，", pair(i), pair(i / 7 + 3))
            })
            .collect();
        let text = format!("{words}{words}");
        let guarded = Fingerprinter::new(Weighting::LogTf, false).guarded(true);
        let (fingerprint, names) = guarded.fingerprint_with_names(&[&text], None);
        assert_eq!(fingerprint, guarded.fingerprint(&text));
        assert!(names.iter().count() <= MAX_NAMES);
    }

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
