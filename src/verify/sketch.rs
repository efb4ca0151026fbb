//! A compact, consistent sample of a text's shingles.

use std::ops::ControlFlow;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::text::{MAX_NAMES, Names, SENTENCE_ENDS, is_cjk_punctuation};

/// Characters per shingle, in a script written without spaces (Chinese), or digits. Four
/// Chinese characters are about two words: long enough that unrelated texts share few shingles,
/// short enough that a typo costs only four.
pub const SHINGLE_CHARACTERS: usize = 4;

/// Words per shingle, in a script written with spaces (English). A word weighs 4/3 of a
/// character, so three words weigh as much as four characters. Four words, the usual word
/// shingle, made English verification stricter than Chinese: an edited word takes four shingles
/// of a text that has about one a word, where a Chinese edit of two characters takes five of
/// one a character. On rewritten English newswire, copies that keep 91-99% of their text (by
/// character 5-grams) kept only 71-80% of their four-word shingles, under the containment
/// floor. Two words would be shared by unrelated texts too often ("of the", "said the").
pub const SHINGLE_WORDS: usize = 3;

/// How many of a sketch's smallest hashes are its candidate keys (see [`Sketch::keys`]).
pub const KEYS: usize = 8;

/// The shingles of a text, hashed to 32 bits, and a consistent sample of them.
///
/// A text's shingles are the shortest runs of units inside each sentence of its normalised text
/// that hold [`SHINGLE_CHARACTERS`] characters' or [`SHINGLE_WORDS`] words' worth of text, one
/// starting at each unit with that much text after it in its sentence, and every unit is in
/// one (punctuation, spaces and symbols only separate units; a sentence shorter than a shingle
/// is one shingle). Shingles never span the end of a sentence (`。！？；` and their ASCII
/// forms), so moving such sentences around keeps every shingle (an English full stop is no
/// end: "3.5", "U.S."). They do span line breaks: wire copy and plain-text feeds break lines
/// inside sentences, at other places in each copy, and the rows of a table or a notice are a
/// line each and mostly shorter than a shingle; with one shingle a row, the rows two notices
/// differ in (a dividend's dates) counted for too little against those they share.
///
/// The sketch keeps the hashes below a threshold `2^32 >> shift`, with the smallest `shift`
/// that keeps at most `capacity` of them: a text with at most `capacity` distinct shingles is
/// kept whole, a longer one is sampled. The sample is *consistent*: a shingle that two texts
/// share is kept by both whenever it is under both thresholds, so two sketches compared at the
/// larger of their shifts are exact samples of the same hash range, and their overlap estimates
/// the overlap of the whole texts without bias.
///
/// A whole sketch (one that kept every shingle) also keeps the titles of the works its text
/// names in `《》` (a book, a speech, a commentary, a document): the hashes of each title's
/// pairs of adjacent characters, at or above [`TITLE_FLOOR`], which no shingle hash reaches,
/// then [`TITLES_END`]. They follow the shingles, take no part in the similarity or the keys,
/// and tell two notices of one template that name different works apart ([`Verifier`]). A
/// sampled sketch keeps none (its threshold is below the floor): a long text names many
/// works, and its copies are told by their shingles. A sketch that does not end with
/// `TITLES_END` has no titles, whatever its hashes: one stored before titles were kept
/// (whose shingle hashes could reach the floor) reads as it did then.
///
/// A sketch also keeps the names its text repeats ([`Names`]: who or where it is about),
/// whether it is whole or sampled: each as a mark of the word's hash and its occurrences
/// ([`NAME_COUNT_BITS`]), the marks in ascending order after everything else, then their
/// number, with [`NAMED`] set in the stored shift. They take no part in the similarity, the
/// keys or the digest, and tell two notices of one template about someone else apart
/// ([`Verifier`]). A sketch stored before names were kept has no such bit and reads as it did.
///
/// Invariants: the hashes before the names are strictly increasing and every one is below
/// `2^32 >> shift`, titles and their end aside; the names' marks are strictly increasing.
///
/// [`Verifier`]: super::Verifier
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

/// A sketch borrowed from wherever it is kept: a [`Sketch`] ([`Sketch::view`]), or a record
/// of a [`SketchStore`](super::SketchStore), which may live in a memory-mapped file. It holds
/// the same invariants as [`Sketch`], unless its record's file was changed under the store
/// after the checkpoint's checksum was checked: then its hashes may be out of order, and its
/// comparisons wrong, but never out of bounds (its shift is one a sketch can have, whatever
/// the file holds).
///
/// ```
/// use tantivy_dedup::verify::{Sketch, SketchView};
///
/// let sketch = Sketch::of(&["国务院常务会议今天召开。会议部署推进新型城镇化建设工作。"], 200);
/// let view: SketchView = sketch.view();
/// assert_eq!(view.hashes(), sketch.hashes());
/// assert_eq!(view.to_sketch(), sketch);
/// assert_eq!(view.similarity(sketch.view()).containment, 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SketchView<'a> {
    shift: u8,
    hashes: &'a [u32],
}

impl<'a> From<&'a Sketch> for SketchView<'a> {
    fn from(sketch: &'a Sketch) -> Self {
        sketch.view()
    }
}

impl<'a> SketchView<'a> {
    /// A view of hashes kept with [`parts`](Self::parts): a store reading back what it
    /// wrote from a checked sketch, or a sketch's hashes with some of its shingles left out.
    /// The caller checks that `shift` is a stored shift (`is_stored_shift`); the order of the
    /// hashes is not checked, since that would read every hash of every candidate (see
    /// [`SketchView`]).
    pub(crate) fn from_parts(shift: u8, hashes: &'a [u32]) -> Self {
        SketchView { shift, hashes }
    }

    /// The sample's shift and its hashes, for storing.
    pub(crate) fn parts(self) -> (u8, &'a [u32]) {
        (self.shift, self.hashes)
    }

    /// Every value kept: the shingles' hashes smallest first, then any titles and names as
    /// stored (see [`Sketch`]).
    pub fn hashes(self) -> &'a [u32] {
        self.hashes
    }

    /// A 32-bit digest of the sample: equal for equal texts, and for different texts equal
    /// only by a chance of one in 2^32. Never 0, which stands for "no sketch" ([`digest_of`]).
    /// The names take no part, so a text's digest is what it was before sketches kept them.
    pub fn digest(self) -> u32 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&[self.sample_shift()]);
        hasher.update(bytemuck::cast_slice(self.unnamed()));
        (hasher.digest() as u32).max(1)
    }

    /// The sample's shift: hashes below `2^32 >> shift` were kept (0: the text is whole).
    pub(crate) fn sample_shift(self) -> u8 {
        self.shift & SHIFT_BITS
    }

    /// The hashes without the names' marks and their number: the shingles, and the titles of
    /// a whole sketch with their end.
    fn unnamed(self) -> &'a [u32] {
        self.split_names().0
    }

    /// The hashes before the names, and the names' marks. A record damaged in its file may
    /// give a number of names that cannot be: it reads as no names, never out of bounds.
    fn split_names(self) -> (&'a [u32], &'a [u32]) {
        match self.hashes.split_last() {
            Some((&count, rest)) if self.shift & NAMED != 0 => {
                let count = (count as usize).min(rest.len());
                rest.split_at(rest.len() - count)
            }
            _ => (self.hashes, &[]),
        }
    }

    /// The names the text repeats, as marks (the top bits of the word's hash, then its
    /// occurrences in the low [`NAME_COUNT_BITS`]), in ascending order: none in a sketch
    /// stored before names were kept.
    pub fn names(self) -> &'a [u32] {
        self.split_names().1
    }

    /// An owned copy.
    pub fn to_sketch(self) -> Sketch {
        Sketch {
            shift: self.shift,
            hashes: self.hashes.into(),
        }
    }

    /// The sketch's candidate keys: its [`KEYS`] smallest shingle hashes (all of them if it
    /// has fewer). They are the smallest shingle hashes of the whole text, so a text and a copy
    /// that keeps most of it share some of them (a min-hash argument: each of the copy's
    /// smallest hashes is also among the original's smallest with a probability that grows
    /// with their overlap).
    pub fn keys(self) -> &'a [u32] {
        let shingles = self.shingles();
        &shingles[..shingles.len().min(KEYS)]
    }

    /// The hashes of the text's shingles: all of them but its titles'.
    pub fn shingles(self) -> &'a [u32] {
        // Few texts name a work, and titles come last: a look at the last hash answers most
        // sketches, where a binary search would read lines all over a stored candidate's.
        let hashes = self.unnamed();
        match hashes.last() {
            Some(&TITLES_END) if self.is_whole() => {
                &hashes[..hashes.partition_point(|&hash| hash < TITLE_FLOOR)]
            }
            _ => hashes,
        }
    }

    /// The hashes of the titles the text names in `《》` (see [`Sketch`]): none unless the
    /// sketch is whole.
    pub fn titles(self) -> &'a [u32] {
        let shingles = self.shingles().len();
        let hashes = self.unnamed();
        &hashes[shingles..hashes.len().max(shingles + 1) - 1]
    }

    /// How much the texts of two sketches have in common, estimated on the hash range both
    /// sketches keep whole. Two empty sketches have nothing in common.
    pub fn similarity(self, other: SketchView<'_>) -> Similarity {
        let (a, b) = self.comparable(other);
        if a.is_empty() || b.is_empty() {
            return Similarity {
                containment: 0.0,
                jaccard: 0.0,
            };
        }
        Similarity::of(count_shared(a, b), a.len(), b.len())
    }

    /// Reads a hash in each cache line the sketch's hashes span. A comparison reads a stored
    /// sketch's lines one after the other, each read waiting for the one before (its binary
    /// search, then its merge), and a stored sketch is rarely in the cache: loading the
    /// sketches of all of a text's candidates first lets their misses overlap. On xwlb-news
    /// (about 32 candidates a text, nearly all rejected) that makes `dedup` 5% faster.
    pub(crate) fn load(self) {
        const HASHES_A_LINE: usize = 64 / std::mem::size_of::<u32>();
        // The last hash too: a slice that does not start a line ends in one the steps miss.
        let lines = self
            .hashes
            .iter()
            .step_by(HASHES_A_LINE)
            .chain(self.hashes.last());
        std::hint::black_box(lines.fold(0, |folded, &hash| folded ^ hash));
    }

    /// Whether the sketch holds every shingle of its text (it was not sampled).
    pub(crate) fn is_whole(self) -> bool {
        self.sample_shift() == 0
    }

    /// The parts of two sketches that sample the same hash range: each one's shingle hashes
    /// below the threshold of the sparser sample.
    pub(crate) fn comparable<'b>(self, other: SketchView<'b>) -> (&'a [u32], &'b [u32]) {
        let shift = self.sample_shift().max(other.sample_shift());
        (self.below(shift), other.below(shift))
    }

    /// The hashes below the threshold of `shift` (no smaller than the sketch's own).
    fn below(self, shift: u8) -> &'a [u32] {
        // The sparser sample is whole below the common threshold: no search, and no read of
        // its hashes (a stored candidate's are usually not in the cache).
        let shingles = self.shingles();
        if self.sample_shift() == shift {
            return shingles;
        }
        let limit = threshold(shift);
        &shingles[..shingles.partition_point(|&hash| u64::from(hash) < limit)]
    }
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
    /// keeping at most `capacity` shingle hashes (at least one), and the titles of a text it
    /// keeps whole.
    ///
    /// ```
    /// use tantivy_dedup::verify::Sketch;
    ///
    /// let notice = Sketch::of(&["《在科学家座谈会上的讲话》单行本出版发行"], 200);
    /// let plain = Sketch::of(&["在科学家座谈会上的讲话单行本出版发行"], 200);
    /// assert_eq!(notice.view().shingles(), plain.hashes());
    /// assert_eq!(notice.view().titles().len(), 10, "a hash for each pair of the title's characters");
    /// assert!(plain.view().titles().is_empty());
    /// ```
    pub fn of(normalized: &[&str], capacity: usize) -> Sketch {
        let bytes: usize = normalized.iter().map(|text| text.len()).sum();
        // CJK text is three bytes a character, and each character starts one shingle.
        let mut hashes = Vec::with_capacity(bytes / 3 + 1);
        let mut units = Vec::new();
        for text in normalized {
            for sentence in text.split(SENTENCE_ENDS) {
                units.clear();
                push_units(sentence, &mut units);
                shingle_hashes(&units, &mut hashes);
            }
        }
        let shift = keep_sample(&mut hashes, capacity.max(1));
        if shift == 0 {
            for text in normalized {
                push_titles(text, &mut hashes);
            }
            let shingles = hashes.partition_point(|&hash| hash < TITLE_FLOOR);
            if shingles < hashes.len() {
                hashes[shingles..].sort_unstable();
                let mut titles = hashes.split_off(shingles);
                titles.dedup();
                hashes.append(&mut titles);
                hashes.push(TITLES_END);
            }
        }
        Sketch {
            shift,
            hashes: hashes.into_boxed_slice(),
        }
    }

    /// The sketch with the names its text repeats (see [`Sketch`]); itself when there are
    /// none.
    ///
    /// ```
    /// use tantivy_dedup::text::{Fingerprinter, Weighting};
    /// use tantivy_dedup::verify::Sketch;
    ///
    /// let notice = "钱其琛同志的遗体在北京火化。钱其琛同志因病在北京逝世。横幅下方是钱其琛同志的遗像。";
    /// let fingerprinter = Fingerprinter::new(Weighting::LogTf, false).guarded(true);
    /// let (_, names) = fingerprinter.fingerprint_with_names(&[notice], None);
    /// let plain = Sketch::of(&[notice], 200);
    /// let named = plain.clone().with_names(&names);
    /// assert_eq!(named.view().names().len(), 2);
    /// assert_eq!(named.view().shingles(), plain.view().shingles());
    /// assert_eq!(named.view().digest(), plain.view().digest());
    /// let values: Vec<u64> = named.to_packed_values().collect();
    /// assert_eq!(Sketch::from_packed_values(values.into_iter()), Some(named));
    /// ```
    pub fn with_names(self, names: &Names) -> Sketch {
        // Names given again replace those the sketch had.
        let sketch = match self.shift & NAMED {
            0 => self,
            _ => Sketch {
                shift: self.shift & !NAMED,
                hashes: self.view().unnamed().into(),
            },
        };
        if names.is_empty() {
            return sketch;
        }
        let mut marks: Vec<u32> = names
            .iter()
            .map(|(hash, count)| name_mark(hash, count))
            .collect();
        marks.sort_unstable();
        marks.dedup_by(|a, b| *a >> NAME_COUNT_BITS == *b >> NAME_COUNT_BITS);
        // A full list says so by its length: its absent names may be repeated as often as its
        // least repeated (see `Verifier`).
        let mut hashes = Vec::from(sketch.hashes);
        hashes.reserve(marks.len() + 1);
        let count = marks.len() as u32;
        hashes.extend(marks);
        hashes.push(count);
        Sketch {
            shift: sketch.shift | NAMED,
            hashes: hashes.into_boxed_slice(),
        }
    }

    /// The sketch borrowed: what comparisons and lookups take, wherever the sketch is kept.
    pub fn view(&self) -> SketchView<'_> {
        SketchView {
            shift: self.shift,
            hashes: &self.hashes,
        }
    }

    /// See [`SketchView::hashes`].
    pub fn hashes(&self) -> &[u32] {
        &self.hashes
    }

    /// Whether the text had no shingle at all (nothing but punctuation, symbols or markup).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// See [`SketchView::keys`].
    pub fn keys(&self) -> &[u32] {
        self.view().keys()
    }

    /// See [`SketchView::similarity`].
    pub fn similarity(&self, other: &Sketch) -> Similarity {
        self.view().similarity(other.view())
    }

    /// Heap bytes the sketch holds.
    pub fn heap_bytes(&self) -> usize {
        self.hashes.len() * std::mem::size_of::<u32>()
    }

    /// The sketch as numbers: the shift, then each hash. The layout of the Redis store's
    /// sketch records (as 32-bit words), and of the `_sketch` column of indexes written
    /// before [`to_packed_values`](Self::to_packed_values).
    pub fn to_values(&self) -> impl Iterator<Item = u64> + '_ {
        std::iter::once(u64::from(self.shift))
            .chain(self.hashes.iter().map(|&hash| u64::from(hash)))
    }

    /// The sketch as half as many numbers, for a multi-valued fast field: a header (the
    /// shift, the number of hashes and a mark no value of [`to_values`](Self::to_values)
    /// has), then the hashes two to a value, the first in the high half (a last odd hash
    /// alone in the high half). A column's cost grows with its values, and a sketch has up
    /// to `short_text_chars` hashes (200 by default; about 144 on average on xwlb-news).
    ///
    /// ```
    /// use tantivy_dedup::verify::Sketch;
    ///
    /// let sketch = Sketch::of(&["国务院常务会议今天召开。会议部署推进新型城镇化建设工作。"], 200);
    /// let values: Vec<u64> = sketch.to_packed_values().collect();
    /// assert_eq!(values.len(), 1 + sketch.hashes().len().div_ceil(2));
    /// assert_eq!(Sketch::from_packed_values(values.into_iter()), Some(sketch.clone()));
    /// // What indexes written before the packing hold reads as well.
    /// assert_eq!(Sketch::from_packed_values(sketch.to_values()), Some(sketch));
    /// ```
    pub fn to_packed_values(&self) -> impl Iterator<Item = u64> + '_ {
        let header = PACKED | ((self.hashes.len() as u64) << 8) | u64::from(self.shift);
        std::iter::once(header).chain(self.hashes.chunks(2).map(|pair| {
            let low = pair.get(1).copied().unwrap_or(0);
            (u64::from(pair[0]) << 32) | u64::from(low)
        }))
    }

    /// Reads [`to_packed_values`](Self::to_packed_values) back, or
    /// [`to_values`](Self::to_values) (told apart by the header's mark); `None` when the
    /// values are not a sketch.
    pub fn from_packed_values(mut values: impl Iterator<Item = u64>) -> Option<Sketch> {
        let header = values.next()?;
        if header & PACKED == 0 {
            return Sketch::from_values(std::iter::once(header).chain(values));
        }
        let count = usize::try_from((header & !PACKED) >> 8).ok()?;
        let shift = (header & 0xff) as u8;
        let mut hashes: Vec<u32> = values
            .flat_map(|pair| [(pair >> 32) as u32, pair as u32])
            .collect();
        // Every value full but an odd count's last, whose low half is empty.
        let padding = hashes.len().checked_sub(count)?;
        if padding > 1 || hashes[count..].iter().any(|&hash| hash != 0) {
            return None;
        }
        hashes.truncate(count);
        Sketch::checked(shift, hashes.into_boxed_slice())
    }

    /// Reads [`to_values`](Self::to_values) back; `None` when the values are not a sketch.
    pub fn from_values(mut values: impl Iterator<Item = u64>) -> Option<Sketch> {
        let shift = u8::try_from(values.next()?).ok()?;
        let hashes = values
            .map(|value| u32::try_from(value).ok())
            .collect::<Option<Box<[u32]>>>()?;
        Sketch::checked(shift, hashes)
    }

    /// A sketch of these parts, if they make one: a shift a sketch can have, hashes in
    /// ascending order and below the shift's threshold.
    fn checked(shift: u8, hashes: Box<[u32]>) -> Option<Sketch> {
        if !is_stored_shift(shift) {
            return None;
        }
        let sketch = Sketch { shift, hashes };
        let view = sketch.view();
        let (unnamed, names) = view.split_names();
        if shift & NAMED != 0 {
            // One name at least, its number the last value, no more than are kept.
            let count = sketch.hashes.last().map_or(0, |&count| count as usize);
            if names.is_empty() || names.len() != count || count > MAX_NAMES {
                return None;
            }
        }
        let ordered = |hashes: &[u32]| hashes.windows(2).all(|pair| pair[0] < pair[1]);
        let in_range = unnamed
            .last()
            .is_none_or(|&hash| u64::from(hash) < threshold(view.sample_shift()));
        (ordered(unnamed) && ordered(names) && in_range).then_some(sketch)
    }
}

/// The sketch of a text with too little of its own to be compared, or `None` for a text with
/// enough. A text has too little when its distinct units (characters, digits, words), once
/// emoticon codes (`[哈哈]`, see [`emoticon_codes`](crate::text::emoticon_codes)), punctuation
/// and repeats are left out, weigh less than one shingle (four characters, or three words):
/// a post of `[哈哈]` eleven times, of 哈哈哈哈, of 666 or of punctuation alone says nothing
/// that unrelated posts could not both say, so its shingles are no evidence of a story.
///
/// Its sketch is one hash of the set of its distinct units and emoticon codes, which no text
/// with enough of its own has: the same few characters or emoticons, however often repeated
/// (a repost chain of `[怒][怒]…`), verify against each other and against nothing else. A
/// text with neither (punctuation, symbols) gets an empty sketch, which verifies against
/// nothing at all.
///
/// ```
/// use tantivy_dedup::verify::{Sketch, degenerate_sketch};
///
/// let angry = degenerate_sketch(&["[怒][怒][怒][怒]"]).unwrap();
/// assert_eq!(degenerate_sketch(&["[怒][怒][怒][怒][怒][怒][怒][怒]！！"]), Some(angry.clone()));
/// assert_ne!(degenerate_sketch(&["[哈哈][哈哈][哈哈]"]), degenerate_sketch(&["哈哈哈哈哈哈"]));
/// assert_eq!(degenerate_sketch(&["？？？。。。", "!!!"]), Some(Sketch::default()));
/// assert_eq!(degenerate_sketch(&["转发微博"]), None);
/// assert_eq!(degenerate_sketch(&["thanks for sharing"]), None);
/// ```
pub fn degenerate_sketch(normalized: &[&str]) -> Option<Sketch> {
    let mut distinct: Vec<u32> = Vec::new();
    let mut codes: Vec<&str> = Vec::new();
    let mut held = 0;
    // Stops at the unit that gives the text a shingle's weight: most texts have it within
    // their first sentence's first few characters, and need no more reading.
    let mut add = |unit: u32| {
        if !distinct.contains(&unit) {
            distinct.push(unit);
            held += weight(unit);
            if held >= SHINGLE_WEIGHT {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    };
    for text in normalized {
        for sentence in text.split(SENTENCE_ENDS) {
            let mut rest = 0;
            for code in crate::text::emoticon_codes(sentence) {
                if for_each_unit(&sentence[rest..code.start], &mut add).is_break() {
                    return None;
                }
                codes.push(&sentence[code.clone()]);
                rest = code.end;
            }
            if for_each_unit(&sentence[rest..], &mut add).is_break() {
                return None;
            }
        }
    }
    if distinct.is_empty() && codes.is_empty() {
        return Some(Sketch::default());
    }
    distinct.sort_unstable();
    codes.sort_unstable();
    codes.dedup();
    // A domain of its own, so that no shingle of a text hashes the same but by chance.
    let mut bytes = b"degenerate text".to_vec();
    for unit in distinct {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    for code in codes {
        bytes.push(0xff);
        bytes.extend_from_slice(code.as_bytes());
    }
    let hash = shingle_hash(xxh3_64(&bytes), false);
    Some(Sketch {
        shift: 0,
        hashes: Box::new([hash]),
    })
}

impl Sketch {
    /// The sketch of a text that stands for its whole (a page of its source's chrome alone,
    /// [`Stripped::Everything`](crate::chrome::Stripped::Everything), whose hash is
    /// `text_hash`): one hash drawn in a domain of its own, which a text's shingles take only
    /// by chance (as [`degenerate_sketch`]'s), so that only the same text verifies against
    /// it.
    pub fn of_whole_text(text_hash: u64) -> Sketch {
        let mut bytes = b"whole text".to_vec();
        bytes.extend_from_slice(&text_hash.to_le_bytes());
        Sketch {
            shift: 0,
            hashes: Box::new([shingle_hash(xxh3_64(&bytes), false)]),
        }
    }
}

/// Appends a sentence's units: a character of a script written without spaces is its code
/// point, a digit its code point tagged with [`DIGIT_UNIT`]; a word of a script written with
/// spaces is a hash of its letters with the top bit set. No two kinds overlap, since code
/// points end at 0x10FFFF.
fn push_units(sentence: &str, units: &mut Vec<u32>) {
    let _ = for_each_unit(sentence, |unit| {
        units.push(unit);
        ControlFlow::Continue(())
    });
}

/// Calls `visit` with a sentence's units in order (see [`push_units`]), until it breaks.
fn for_each_unit(sentence: &str, mut visit: impl FnMut(u32) -> ControlFlow<()>) -> ControlFlow<()> {
    let mut word_start = None;
    for (at, c) in sentence.char_indices() {
        let unit = if matches!(c, '\u{4e00}'..='\u{9fff}') {
            // Most characters of Chinese text: answered first, without the Unicode tables.
            u32::from(c)
        } else if is_cjk_punctuation(c) {
            // A mark between words, told apart before the Unicode tables are searched.
            if let Some(start) = word_start.take() {
                visit(word_unit(&sentence[start..at]))?;
            }
            continue;
        } else if is_word_letter(c) {
            word_start.get_or_insert(at);
            continue;
        } else if c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric()) {
            DIGIT_UNIT | u32::from(c)
        } else if c.is_alphanumeric() {
            u32::from(c)
        } else {
            if let Some(start) = word_start.take() {
                visit(word_unit(&sentence[start..at]))?;
            }
            continue;
        };
        if let Some(start) = word_start.take() {
            visit(word_unit(&sentence[start..at]))?;
        }
        visit(unit)?;
    }
    match word_start {
        Some(start) => visit(word_unit(&sentence[start..])),
        None => ControlFlow::Continue(()),
    }
}

/// The tag of a digit's unit (fullwidth digits are folded to ASCII by normalisation).
const DIGIT_UNIT: u32 = 1 << 30;

/// Whether a unit is a digit's.
fn is_digit(unit: u32) -> bool {
    unit & (DIGIT_UNIT | WORD_UNIT) == DIGIT_UNIT
}

/// Whether a unit is a word's.
fn is_word(unit: u32) -> bool {
    unit & WORD_UNIT != 0
}

/// The tag of a word's unit.
const WORD_UNIT: u32 = 1 << 31;

/// The unit of a word of a spaced script.
fn word_unit(word: &str) -> u32 {
    (xxh3_64(word.as_bytes()) as u32) | WORD_UNIT
}

/// A letter of a script written with spaces between words: the Latin, Greek, Cyrillic,
/// Armenian, Hebrew and Arabic blocks and the other alphabets below the CJK ones (U+2E80).
/// (Thai and the few other scripts in that range that go without spaces come out as one unit
/// a phrase: coarser shingles, still consistent.)
fn is_word_letter(c: char) -> bool {
    c.is_ascii_alphabetic() || (!c.is_ascii() && c < '\u{2e80}' && c.is_alphabetic())
}

/// The largest shift a sketch has: its threshold is then 1, which keeps at most one hash, so
/// no capacity needs more. A shift read from disk is refused above it (from 64 on, the shift
/// in [`threshold`] would overflow).
pub(crate) const MAX_SHIFT: u8 = 32;

/// The mark of [`Sketch::to_packed_values`]' header: the top bit, which no value of
/// [`Sketch::to_values`] (a shift, or a 32-bit hash) has.
const PACKED: u64 = 1 << 63;

/// The bits of a stored shift byte that hold the shift ([`MAX_SHIFT`] at most).
const SHIFT_BITS: u8 = 0x3f;

/// The bit of a stored shift byte that tells a sketch with names (see [`Sketch`]).
pub const NAMED: u8 = 0x40;

/// Whether a byte is a sketch's stored shift: a shift a sketch can have, with or without
/// [`NAMED`].
pub(crate) fn is_stored_shift(byte: u8) -> bool {
    byte & !(SHIFT_BITS | NAMED) == 0 && byte & SHIFT_BITS <= MAX_SHIFT
}

/// The low bits of a name's mark that hold its occurrences (up to 15; more count as 15).
pub const NAME_COUNT_BITS: u32 = 4;

/// A name's mark in a sketch: the top bits of the word's hash, then its occurrences.
pub(crate) fn name_mark(hash: u64, count: u32) -> u32 {
    let most = (1 << NAME_COUNT_BITS) - 1;
    (((hash >> 32) as u32) << NAME_COUNT_BITS) | count.min(most)
}

/// The occurrences a name's mark holds.
pub(crate) fn name_count(mark: u32) -> u32 {
    mark & ((1 << NAME_COUNT_BITS) - 1)
}

/// The word a name's mark stands for (its hash's bits), whatever its occurrences.
pub(crate) fn name_word(mark: u32) -> u32 {
    mark >> NAME_COUNT_BITS
}

/// Keeps of `hashes` (a text's shingle hashes, in any order, repeats included) the distinct
/// ones below [`threshold`]`(shift)`, sorted, for the smallest `shift` that keeps at most
/// `capacity`; returns `shift`.
///
/// Only the hashes that can be kept are sorted. Each level halves the hashes a threshold
/// lets through, so the search starts at the deepest level that, were the hashes all
/// distinct, would still let 1.5 times `capacity` through: more than `capacity` almost
/// always, which puts the answer there or deeper. A text that repeats itself lets fewer
/// through, and the search climbs a level at a time until the answer is certain (a pass over
/// its hashes a level: a text said r times costs about log2(r) passes more than one sort).
fn keep_sample(hashes: &mut Vec<u32>, capacity: usize) -> u8 {
    let mut level = 0u8;
    while level < 32 && (hashes.len() >> (level + 1)) * 2 >= capacity.saturating_mul(3) {
        level += 1;
    }
    loop {
        let mut kept: Vec<u32> = match level {
            0 => std::mem::take(hashes),
            _ => hashes
                .iter()
                .copied()
                .filter(|&hash| u64::from(hash) < threshold(level))
                .collect(),
        };
        kept.sort_unstable();
        kept.dedup();
        if level == 0 || kept.len() > capacity {
            let mut shift = level;
            let mut count = kept.len();
            while count > capacity {
                shift += 1;
                count = kept.partition_point(|&hash| u64::from(hash) < threshold(shift));
            }
            kept.truncate(count);
            *hashes = kept;
            return shift;
        }
        level -= 1;
    }
}

/// The sample's bound for a shift (at most [`MAX_SHIFT`]): hashes below it are kept.
fn threshold(shift: u8) -> u64 {
    (1u64 << 32) >> shift
}

/// The weight of a shingle: [`SHINGLE_CHARACTERS`] characters or [`SHINGLE_WORDS`] words.
const SHINGLE_WEIGHT: usize = SHINGLE_CHARACTERS * SHINGLE_WORDS;

/// What a character (or digit) weighs in a shingle.
const CHARACTER_WEIGHT: usize = SHINGLE_WEIGHT / SHINGLE_CHARACTERS;

/// What a word weighs in a shingle.
const WORD_WEIGHT: usize = SHINGLE_WEIGHT / SHINGLE_WORDS;

// A word is the heavier unit, which `MAX_SHINGLE_UNITS` counts on.
const _: () = assert!(WORD_WEIGHT >= CHARACTER_WEIGHT);

/// The most units a shingle holds: every unit weighs at least [`CHARACTER_WEIGHT`], and a
/// shingle is a run lighter than [`SHINGLE_WEIGHT`] plus one unit (the unit that completes it,
/// or for the last run of a sentence, the unit before the rest).
const MAX_SHINGLE_UNITS: usize = SHINGLE_WEIGHT.div_ceil(CHARACTER_WEIGHT);

/// What a unit weighs in a shingle.
fn weight(unit: u32) -> usize {
    if is_word(unit) {
        WORD_WEIGHT
    } else {
        CHARACTER_WEIGHT
    }
}

/// Appends the hashes of a sentence's shingles (see [`Sketch`]).
fn shingle_hashes(units: &[u32], out: &mut Vec<u32>) {
    if units.iter().any(|&unit| is_word(unit)) {
        weighted_shingles(units, out);
    } else {
        character_shingles(units, out);
    }
}

/// [`weighted_shingles`] of a sentence without words (Chinese text, figures), where every unit
/// weighs the same: each run of [`SHINGLE_CHARACTERS`] units, or the whole sentence when it is
/// shorter. The same shingles, without weighing each unit: most text takes this path.
fn character_shingles(units: &[u32], out: &mut Vec<u32>) {
    if units.len() <= SHINGLE_CHARACTERS {
        if !units.is_empty() {
            out.push(hash32(units, units.iter().any(|&unit| is_digit(unit))));
        }
        return;
    }
    // One past the last digit among the units seen, so that each unit is asked once.
    let mut after_digit = units[..SHINGLE_CHARACTERS - 1]
        .iter()
        .rposition(|&unit| is_digit(unit))
        .map_or(0, |at| at + 1);
    let shingles = units.windows(SHINGLE_CHARACTERS).enumerate();
    out.extend(shingles.map(|(start, shingle)| {
        if is_digit(shingle[SHINGLE_CHARACTERS - 1]) {
            after_digit = start + SHINGLE_CHARACTERS;
        }
        hash32(shingle, after_digit > start)
    }));
}

/// Appends the hashes of a sentence's shingles: for each unit, the shortest run from it that
/// weighs [`SHINGLE_WEIGHT`], and a last run that takes in the sentence's last units when no
/// shingle ended with them; a sentence lighter than a shingle is one shingle.
fn weighted_shingles(units: &[u32], out: &mut Vec<u32>) {
    // The run units[start..end], its weight and how many digits it holds; where the last
    // shingle pushed ended.
    let (mut end, mut held, mut digits, mut covered) = (0, 0, 0, 0);
    for start in 0..units.len() {
        while held < SHINGLE_WEIGHT && end < units.len() {
            held += weight(units[end]);
            digits += usize::from(is_digit(units[end]));
            end += 1;
        }
        if held < SHINGLE_WEIGHT {
            // The rest of the sentence is lighter than a shingle. The shingle before it ended
            // with the sentence, unless its words alone made the weight (three words, then a
            // character): then the run from one unit back takes the last units in, so that
            // texts that differ only in their last figure do not have the same shingles. A
            // sentence that light is one shingle.
            if covered < units.len() {
                let from = start.saturating_sub(1);
                let figure = digits > 0 || units[from..start].iter().any(|&unit| is_digit(unit));
                out.push(hash32(&units[from..], figure));
            }
            return;
        }
        out.push(hash32(&units[start..end], digits > 0));
        covered = end;
        held -= weight(units[start]);
        digits -= usize::from(is_digit(units[start]));
    }
}

/// The hash of a shingle: xxh3 of its units, high half, below [`TITLE_FLOOR`], with the
/// lowest bit replaced by whether the shingle holds a digit (see [`shingle_hash`]).
fn hash32(shingle: &[u32], figure: bool) -> u32 {
    let mut bytes = [0u8; 4 * MAX_SHINGLE_UNITS];
    for (slot, &unit) in bytes.chunks_exact_mut(4).zip(shingle) {
        slot.copy_from_slice(&unit.to_le_bytes());
    }
    shingle_hash(xxh3_64(&bytes[..4 * shingle.len()]), figure)
}

/// A shingle's 32-bit hash from a 64-bit one: its high half, below [`TITLE_FLOOR`] (a hash
/// that would reach it loses its top bit), with the lowest bit telling a figure shingle.
fn shingle_hash(hash: u64, figure: bool) -> u32 {
    let mut hash = (hash >> 32) as u32;
    if hash >= TITLE_FLOOR {
        hash &= !(1 << 31);
    }
    (hash & !FIGURE_BIT) | if figure { FIGURE_BIT } else { 0 }
}

/// The smallest hash of a title's pair of characters (see [`Sketch`]): titles hash to the top
/// 1/256 of the range, which shingles leave free. It holds 2^24 values, so two different
/// pairs of two short texts' titles rarely hash alike (a few dozen pairs a text: about one
/// text in ten thousand).
pub const TITLE_FLOOR: u32 = 0xff00_0000;

/// The last hash of a sketch with titles (see [`Sketch`]), which no title's hash takes.
pub const TITLES_END: u32 = u32::MAX;

/// The most characters a title in `《》` holds: a bracket left open, or closed a paragraph
/// later, encloses no title.
const MAX_TITLE_CHARACTERS: usize = 100;

/// Appends the hashes of the titles a normalised text names in `《》` (see [`Sketch`]): for
/// each title, those of its pairs of adjacent letters and digits (punctuation and spaces left
/// out), or of its one letter. Pairs rather than whole titles, so that a typo in a copy's
/// title changes two of them, where another title of one series (`一论…`, `二论…`; the
/// speech at one meeting against another) changes most.
fn push_titles(text: &str, hashes: &mut Vec<u32>) {
    let mut rest = text;
    while let Some(open) = rest.find('《') {
        rest = &rest[open + '《'.len_utf8()..];
        // A title ends at its `》`; a `《` or a line break first leaves it open, and the next
        // search starts there, so that every character is read at most twice.
        let Some(close) = rest.find(['《', '》', '\n']) else {
            return;
        };
        let title = &rest[..close];
        if !rest[close..].starts_with('》') || title.chars().count() > MAX_TITLE_CHARACTERS {
            rest = &rest[close..];
            continue;
        }
        let mut letters = title.chars().filter(|c| c.is_alphanumeric());
        let Some(mut previous) = letters.next() else {
            continue;
        };
        let mut pairs = 0;
        for letter in letters {
            hashes.push(title_hash(&[previous, letter]));
            previous = letter;
            pairs += 1;
        }
        if pairs == 0 {
            hashes.push(title_hash(&[previous]));
        }
    }
}

/// The hash of one or two letters of a title, at or above [`TITLE_FLOOR`] and below
/// [`TITLES_END`].
fn title_hash(letters: &[char]) -> u32 {
    let mut bytes = [0u8; 8];
    for (slot, &letter) in bytes.chunks_exact_mut(4).zip(letters) {
        slot.copy_from_slice(&u32::from(letter).to_le_bytes());
    }
    // A seed of its own: a title's pair hashes apart from a shingle of the same characters.
    let hash = xxh3_64_with_seed(&bytes[..4 * letters.len()], TITLE_SEED);
    (TITLE_FLOOR | (hash >> 40) as u32).min(TITLES_END - 1)
}

/// The seed of [`title_hash`].
const TITLE_SEED: u64 = 0x7469_746c_6573;

/// The bit of a shingle hash that tells a figure shingle (one that holds a digit) from a
/// shingle of words. Taking it from the hash leaves 31 random bits, and the tag costs no
/// memory: the sample knows which of its shingles are figures.
const FIGURE_BIT: u32 = 1;

/// Whether a sketched shingle hash is a figure shingle: one that holds a digit.
pub(crate) fn is_figure(hash: u32) -> bool {
    hash & FIGURE_BIT != 0
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
    // Elements passed without a match are lost for good: at most `len - lost` can be shared,
    // and once that is below `needed` the answer is `None` whenever it is seen. The steps do
    // not branch on the comparison: two samples that are apart (nearly every candidate) step
    // on one side or the other at random, which a branch would mispredict every other step.
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        shared += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
        if i + needed > shared + a.len() || j + needed > shared + b.len() {
            return None;
        }
    }
    (shared >= needed).then_some(shared)
}

/// Figure hashes (see [`is_figure`]) in each of two strictly increasing slices, and how many
/// of them the two share.
pub(crate) fn count_figures(a: &[u32], b: &[u32]) -> (usize, usize, usize) {
    let figures = |hashes: &[u32]| hashes.iter().filter(|&&hash| is_figure(hash)).count();
    (figures(a), figures(b), count_shared_where(a, b, is_figure))
}

/// The elements two strictly increasing slices share, in order.
pub(crate) fn shared_elements(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut shared) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    shared
}

/// Elements two strictly increasing slices share.
pub(crate) fn count_shared(a: &[u32], b: &[u32]) -> usize {
    count_shared_where(a, b, |_| true)
}

/// Elements two strictly increasing slices share that `counts`.
fn count_shared_where(a: &[u32], b: &[u32], counts: impl Fn(u32) -> bool) -> usize {
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += usize::from(counts(a[i]));
                i += 1;
                j += 1;
            }
        }
    }
    shared
}

/// [`SketchView::digest`] of a signature's sketch, 0 without one (seed mode): what a story's
/// root leaves behind when it expires, so that only the same text takes its id again.
pub fn digest_of(sketch: Option<&Sketch>) -> u32 {
    sketch.map_or(0, |sketch| sketch.view().digest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether a text has too little of its own, as [`degenerate_sketch`] decided before it
    /// stopped early: every unit of a sentence read first, then counted.
    fn degenerate_reading_whole_sentences(normalized: &[&str]) -> bool {
        let (mut distinct, mut held, mut units) = (Vec::new(), 0, Vec::new());
        for text in normalized {
            for sentence in text.split(SENTENCE_ENDS) {
                units.clear();
                let mut rest = 0;
                for code in crate::text::emoticon_codes(sentence) {
                    push_units(&sentence[rest..code.start], &mut units);
                    rest = code.end;
                }
                push_units(&sentence[rest..], &mut units);
                for &unit in &units {
                    if !distinct.contains(&unit) {
                        distinct.push(unit);
                        held += weight(unit);
                        if held >= SHINGLE_WEIGHT {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    proptest! {
        /// The walk that stops early answers as counting every shared element.
        #[test]
        fn counting_at_least_answers_as_counting_all(
            a in proptest::collection::btree_set(0u32..400, 0..200),
            b in proptest::collection::btree_set(0u32..400, 0..200),
            needed in 0usize..210,
        ) {
            let (a, b): (Vec<u32>, Vec<u32>) = (a.into_iter().collect(), b.into_iter().collect());
            let shared = count_shared(&a, &b);
            prop_assert_eq!(
                count_shared_at_least(&a, &b, needed),
                (shared >= needed).then_some(shared)
            );
        }

        /// Stopping at the unit that gives a text a shingle's weight decides as reading every
        /// unit first (past that point the two read the same units, so their sketches agree).
        #[test]
        fn the_degenerate_test_stops_where_it_decides(
            texts in proptest::collection::vec("([哈笑怒a-c1-3 ,、。!？·]|\\[哈哈\\]|\\[ok\\]){0,16}", 1..3),
        ) {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            prop_assert_eq!(
                degenerate_sketch(&texts).is_none(),
                !degenerate_reading_whole_sentences(&texts)
            );
        }
    }

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
                // Now and then a bracket, so that some texts name works: titles to round-trip.
                match state % 61 {
                    0 => out.push('《'),
                    1 => out.push('》'),
                    _ => {}
                }
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
    fn words_of_spaced_scripts_are_units() {
        // Fourteen words: twelve shingles of three words (as characters they would be 57 and
        // share "said", "that", "ther" and the like with any English text).
        let report = "the committee said on monday that the new rules would take effect next year";
        let other = "the company said on tuesday that its new chief would take office next month";
        let (a, b) = (Sketch::of(&[report], 200), Sketch::of(&[other], 200));
        assert_eq!(a.hashes().len(), 12);
        assert_eq!(a.similarity(&b).containment, 0.0);
        // Mixed text: each Chinese character and each digit is a unit, each word one unit,
        // and a shingle runs until it holds four characters' or three words' worth: "苹果公司",
        // "司发布iPhone", "布iPhone15", "15新品" and four more.
        let mixed = Sketch::of(&["苹果公司发布iPhone 15新品"], 200);
        assert_eq!(mixed.hashes().len(), 8);
        assert!(mixed.hashes().iter().any(|&hash| is_figure(hash)));
        // Three words weigh a shingle without the character after them, so the last run from
        // one unit back takes it in: "今天发布", "天发布new", "发布new phone", "布new phone
        // model", "new phone model", "new phone model了".
        assert_eq!(
            Sketch::of(&["今天发布new phone model了"], 200)
                .hashes()
                .len(),
            6
        );
        // So a notice that differs only in its last figure differs in its shingles.
        let notice = |day: &str| Sketch::of(&[&format!("record date april {day}")], 200);
        assert!(notice("1").similarity(&notice("2")).containment < 1.0);
        // A line break is a space: copies wrapped at other places have the same shingles.
        assert_eq!(
            Sketch::of(&["the committee said on\nmonday that the new rules"], 200),
            Sketch::of(&["the committee said on monday\nthat the new\nrules"], 200)
        );
        // Punctuation and spaces separate units and are otherwise ignored.
        assert_eq!(
            Sketch::of(&["new rules, take effect!"], 200),
            Sketch::of(&["new  rules take-effect"], 200)
        );
    }

    #[test]
    fn every_unit_is_in_a_shingle() {
        // Every sentence of up to six units of two characters, a digit and two words: changing
        // any one unit changes its shingles (but for a 32-bit hash collision).
        let alphabet = [
            0x4e00,
            0x4e01,
            DIGIT_UNIT | u32::from('1'),
            word_unit("rules"),
            word_unit("take"),
        ];
        let shingles = |units: &[u32]| {
            let mut hashes = Vec::new();
            shingle_hashes(units, &mut hashes);
            hashes
        };
        for length in 1..=6u32 {
            for number in 0..alphabet.len().pow(length) {
                let units: Vec<u32> = (0..length)
                    .map(|place| alphabet[number / alphabet.len().pow(place) % alphabet.len()])
                    .collect();
                let before = shingles(&units);
                for at in 0..units.len() {
                    for &other in alphabet.iter().filter(|&&other| other != units[at]) {
                        let mut changed = units.clone();
                        changed[at] = other;
                        assert_ne!(before, shingles(&changed), "{units:x?}, unit {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn titles_are_what_closed_brackets_enclose() {
        let titles = |text: &str| {
            let mut hashes = Vec::new();
            push_titles(text, &mut hashes);
            hashes
        };
        let pairs = |letters: &str| {
            let letters: Vec<char> = letters.chars().collect();
            let hashes: Vec<u32> = match letters.len() {
                1 => vec![title_hash(&letters)],
                _ => letters.windows(2).map(title_hash).collect(),
            };
            hashes
        };
        assert_eq!(titles("发表《把牢价值取向》一文"), pairs("把牢价值取向"));
        // Punctuation and spaces inside are left out; a title of one letter is its letter.
        assert_eq!(titles("《新征程上, 必须坚持》"), pairs("新征程上必须坚持"));
        assert_eq!(titles("《诗》云"), pairs("诗"));
        assert_eq!(
            titles("《甲乙》和《丙丁》"),
            [pairs("甲乙"), pairs("丙丁")].concat()
        );
        // A bracket left open, closed after a line break or by another opening, or around
        // nothing but punctuation, encloses no title; the inner title of `《《…》` still counts.
        assert!(titles("《没有闭合的书名号").is_empty());
        assert!(titles("《第一行\n第二行》").is_empty());
        assert!(titles("《——》").is_empty());
        assert_eq!(titles("《外《内层标题》"), pairs("内层标题"));
        let long = "长".repeat(MAX_TITLE_CHARACTERS + 1);
        assert!(titles(&format!("《{long}》")).is_empty());
        // Every title hash is at or above the floor, and no shingle's reaches it.
        assert!(titles("《甲乙》").iter().all(|&hash| hash >= TITLE_FLOOR));
        assert!(
            (0..1000u64).all(
                |seed| shingle_hash(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), true) < TITLE_FLOOR
            )
        );
    }

    #[test]
    fn stray_title_brackets_cost_linear_time() {
        // Each `《` is read once by the search that finds it and once as the end of the title
        // before it: 200,000 of them take a moment, not minutes.
        let text = "《".repeat(200_000);
        let mut hashes = Vec::new();
        push_titles(&text, &mut hashes);
        assert!(hashes.is_empty());
        let closed = "《书》".repeat(100_000);
        push_titles(&closed, &mut hashes);
        assert_eq!(hashes.len(), 100_000);
    }

    /// Whether a sketch read back holds its invariants: shingles and titles in ascending
    /// order, then names in ascending order.
    fn ordered(sketch: &Sketch) -> bool {
        let view = sketch.view();
        let increasing = |hashes: &[u32]| hashes.windows(2).all(|pair| pair[0] < pair[1]);
        increasing(view.unnamed()) && increasing(view.names())
    }

    /// A sketch with these names' marks (hash, occurrences), as `with_names` keeps them.
    fn named(sketch: Sketch, names: &[(u64, u32)]) -> Sketch {
        let mut marks: Vec<u32> = names
            .iter()
            .map(|&(hash, count)| name_mark(hash, count))
            .collect();
        marks.sort_unstable();
        let values = sketch
            .to_values()
            .skip(1)
            .chain(marks.iter().map(|&mark| u64::from(mark)));
        let shift = u64::from(sketch.shift | NAMED);
        let count = std::iter::once(marks.len() as u64);
        Sketch::from_values(std::iter::once(shift).chain(values).chain(count)).unwrap()
    }

    #[test]
    fn names_follow_everything_and_change_nothing_else() {
        let titled = Sketch::of(
            &["《城市更新条例》公布。本市城市更新条例今天公布，明年起施行。"],
            200,
        );
        let sampled = Sketch::of(&[&text(7, 40)], 16);
        assert!(!titled.view().titles().is_empty());
        assert!(!sampled.view().is_whole());
        for plain in [titled, sampled, Sketch::default()] {
            let with = named(plain.clone(), &[(u64::MAX, 20), (1 << 40, 3)]);
            let (view, before) = (with.view(), plain.view());
            assert_eq!(
                view.names(),
                [name_mark(1 << 40, 3), name_mark(u64::MAX, 15)]
            );
            assert_eq!(
                name_count(view.names()[1]),
                15,
                "occurrences past 15 count as 15"
            );
            assert_eq!(view.shingles(), before.shingles());
            assert_eq!(view.titles(), before.titles());
            assert_eq!(view.keys(), before.keys());
            assert_eq!(view.digest(), before.digest());
            assert_eq!(
                view.similarity(before).jaccard,
                before.similarity(before).jaccard
            );
            assert!(ordered(&with));
            // Stored and read back, either layout.
            assert_eq!(Sketch::from_values(with.to_values()), Some(with.clone()));
            let packed: Vec<u64> = with.to_packed_values().collect();
            assert_eq!(
                Sketch::from_packed_values(packed.into_iter()),
                Some(with.clone())
            );
            assert!(before.names().is_empty());
        }
        // Names given again replace the sketch's.
        let text =
            "钱其琛同志的遗体在北京火化。钱其琛同志因病在北京逝世。横幅下方是钱其琛同志的遗像。";
        let guarded =
            crate::text::Fingerprinter::new(crate::text::Weighting::LogTf, false).guarded(true);
        let (_, names) = guarded.fingerprint_with_names(&[text], None);
        let once = Sketch::of(&[text], 200).with_names(&names);
        assert_eq!(once.clone().with_names(&names), once);
        assert_eq!(once.with_names(&Names::default()), Sketch::of(&[text], 200));
    }

    #[test]
    fn names_that_cannot_be_are_refused_or_read_as_none() {
        let plain = Sketch::of(&["本市城市更新条例今天公布，明年起施行。"], 200);
        let values = |tail: &[u64]| -> Vec<u64> {
            let mut values: Vec<u64> = plain.to_values().collect();
            values[0] |= u64::from(NAMED);
            values.extend_from_slice(tail);
            values
        };
        let (low, high) = (
            u64::from(name_mark(1 << 32, 3)),
            u64::from(name_mark(2 << 32, 3)),
        );
        assert!(Sketch::from_values(values(&[low, high, 2]).into_iter()).is_some());
        for tail in [
            &[][..],         // no number of names
            &[0],            // no name
            &[low, high, 3], // a number the names do not make up
            &[high, low, 2], // names out of order
        ] {
            assert_eq!(
                Sketch::from_values(values(tail).into_iter()),
                None,
                "{tail:?}"
            );
        }
        let too_many: Vec<u64> = (1..=MAX_NAMES as u64 + 1)
            .map(|word| u64::from(name_mark(word << 32, 3)))
            .chain(std::iter::once(MAX_NAMES as u64 + 1))
            .collect();
        assert_eq!(Sketch::from_values(values(&too_many).into_iter()), None);
        // A shift byte with a bit no sketch sets.
        let mut odd: Vec<u64> = plain.to_values().collect();
        odd[0] |= 0x80;
        assert_eq!(Sketch::from_values(odd.into_iter()), None);
        // A record damaged in its file is read unchecked: a number of names past its hashes
        // reads within bounds.
        let hashes = [3, 5, u32::MAX];
        let damaged = SketchView::from_parts(NAMED, &hashes);
        assert_eq!(damaged.names().len() + damaged.shingles().len(), 2);
    }

    #[test]
    fn a_sampled_sketch_keeps_no_titles() {
        let long: String = (0..400)
            .map(|i| char::from_u32(0x4e00 + i).unwrap())
            .collect();
        let sketch = Sketch::of(&[&format!("《书名》{long}")], 200);
        assert!(!sketch.view().is_whole());
        assert!(sketch.view().titles().is_empty());
        assert!(sketch.hashes().iter().all(|&hash| hash < TITLE_FLOOR));
    }

    #[test]
    fn texts_without_shingles_match_nothing() {
        let empty = Sketch::of(&["！？……"], 200);
        assert!(empty.is_empty());
        assert_eq!(empty.similarity(&empty).containment, 0.0);
    }

    /// A unit of text without words: one of a few Chinese characters or digits.
    fn character_unit() -> impl Strategy<Value = u32> {
        (any::<bool>(), 0u32..4).prop_map(|(digit, which)| {
            if digit {
                DIGIT_UNIT | (u32::from('0') + which)
            } else {
                0x4e00 + which
            }
        })
    }

    /// [`keep_sample`] as it was written first: every hash sorted.
    fn keep_sample_sorting_all(hashes: &mut Vec<u32>, capacity: usize) -> u8 {
        hashes.sort_unstable();
        hashes.dedup();
        let mut shift = 0u8;
        let mut kept = hashes.len();
        while kept > capacity {
            shift += 1;
            kept = hashes.partition_point(|&hash| u64::from(hash) < threshold(shift));
        }
        hashes.truncate(kept);
        shift
    }

    proptest! {
        #[test]
        fn a_sample_is_the_one_that_sorting_every_hash_keeps(
            seed in any::<u64>(),
            distinct in 0usize..3000,
            repeats in 1usize..6,
            capacity in 1usize..400,
        ) {
            let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
            let values: Vec<u32> = (0..distinct).map(|_| rand::Rng::random(&mut rng)).collect();
            // A text that repeats its paragraphs repeats their hashes, in another order.
            let mut hashes: Vec<u32> =
                (0..distinct * repeats).map(|at| values[(at * 7919) % distinct]).collect();
            let mut expected = hashes.clone();
            let expected_shift = keep_sample_sorting_all(&mut expected, capacity);
            prop_assert_eq!(keep_sample(&mut hashes, capacity), expected_shift);
            prop_assert_eq!(hashes, expected);
        }
        #[test]
        fn values_round_trip_and_garbage_is_refused(seed in any::<u64>(), sentences in 0usize..30, capacity in 1usize..300, garbage in proptest::collection::vec(any::<u64>(), 0..64)) {
            let sketch = Sketch::of(&[&text(seed, sentences)], capacity);
            prop_assert_eq!(Sketch::from_values(sketch.to_values()), Some(sketch.clone()));
            let view = sketch.view();
            prop_assert_eq!([view.shingles(), view.titles()].concat().len() + usize::from(!view.titles().is_empty()), sketch.hashes().len());
            prop_assert!(view.shingles().iter().all(|&hash| hash < TITLE_FLOOR));
            prop_assert!(view.is_whole() || view.titles().is_empty());
            if let Some(read) = Sketch::from_values(garbage.iter().copied()) {
                prop_assert!(ordered(&read));
            }
            // Packed two hashes a value: the same sketch back, from either layout, and
            // nothing from a header whose count its values do not hold.
            let packed: Vec<u64> = sketch.to_packed_values().collect();
            prop_assert_eq!(packed.len(), 1 + sketch.hashes().len().div_ceil(2));
            prop_assert_eq!(Sketch::from_packed_values(packed.iter().copied()), Some(sketch.clone()));
            prop_assert_eq!(Sketch::from_packed_values(sketch.to_values()), Some(sketch.clone()));
            if packed.len() > 1 {
                prop_assert_eq!(Sketch::from_packed_values(packed[..packed.len() - 1].iter().copied()), None);
            }
            // A header whose count does not fit its values: one value more, or a count one
            // short of an even number of hashes.
            let mut longer = packed.clone();
            longer.push(1);
            prop_assert_eq!(Sketch::from_packed_values(longer.into_iter()), None);
            if !sketch.hashes().is_empty() && sketch.hashes().len().is_multiple_of(2) {
                let mut short = packed.clone();
                short[0] -= 1 << 8;
                prop_assert_eq!(Sketch::from_packed_values(short.into_iter()), None);
            }
            // Garbage under a header that fits it: a sketch of exactly its count, or nothing.
            if let Some((&first, rest)) = garbage.split_first() {
                let count = (2 * rest.len()).saturating_sub(usize::from(first & 1 == 1 && !rest.is_empty()));
                let header = PACKED | ((count as u64) << 8) | (first % 33);
                if let Some(read) = Sketch::from_packed_values(std::iter::once(header).chain(rest.iter().copied())) {
                    prop_assert!(ordered(&read));
                    prop_assert_eq!(read.hashes().len(), count);
                }
            }
        }

        #[test]
        fn text_without_words_has_the_shingles_of_four_units(units in proptest::collection::vec(character_unit(), 0..12)) {
            // Weighing units gives Chinese text the shingles it had before words weighed more
            // (every run of four units, or the whole sentence when it is shorter), which the
            // path for text without words computes directly.
            let (mut weighted, mut direct) = (Vec::new(), Vec::new());
            weighted_shingles(&units, &mut weighted);
            character_shingles(&units, &mut direct);
            let figure = |run: &[u32]| run.iter().any(|&unit| is_digit(unit));
            let expected: Vec<u32> = if units.len() <= 4 {
                (!units.is_empty()).then(|| hash32(&units, figure(&units))).into_iter().collect()
            } else {
                units.windows(4).map(|run| hash32(run, figure(run))).collect()
            };
            prop_assert_eq!(&weighted, &expected);
            prop_assert_eq!(direct, expected);
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
