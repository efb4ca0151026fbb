//! Text normalisation: what two copies of one article differ in without differing in content.
//!
//! HTML markup (tags, comments, script and style bodies) is removed and entities decoded; Unicode
//! NFKC folds full-width letters, digits and punctuation to their ordinary forms; ASCII letters are
//! lower-cased; traditional characters fold to simplified ones ([`simplified`]); zero-width
//! characters are dropped; runs of white space fold to one space, or to
//! one line break when they contain one, and disappear next to CJK text, where spaces are layout,
//! not word boundaries.
//!
//! [`normalize_with_offsets`] gives the same text with an [`OffsetMap`] from its bytes back to
//! the raw text's, for the places that show raw text by the normalised text's tokens
//! (snippets). Every stage is generic over a [`Trace`] of where its output came from; the
//! plain [`normalize`] runs them with `()`, which records nothing, so the fingerprint path does
//! no per-character work for the map.

use std::borrow::Cow;
use std::ops::Range;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

use super::script::Simplifier;
#[cfg(doc)]
use super::simplified;

/// Normalises `text` for fingerprinting (see the module documentation).
///
/// ```
/// use tantivy_dedup::text::normalize;
///
/// assert_eq!(normalize("<p>新闻&nbsp;联播</p>"), normalize("新闻联播"));
/// assert_eq!(normalize("ＡＢＣ，１２３！"), "abc,123!");
/// assert_eq!(normalize("高鐵開通"), normalize("高铁开通"));
/// assert_eq!(normalize("  Hello \t World \n\n 第二段 "), "hello world\n第二段");
/// ```
pub fn normalize(text: &str) -> String {
    normalize_traced::<()>(text).0
}

/// [`normalize`], with the map from the normalised text's bytes back to `text`'s.
///
/// ```
/// use tantivy_dedup::text::{normalize, normalize_with_offsets};
///
/// let raw = "<p>ＣＣＴＶ&amp;新闻</p>";
/// let (normalized, offsets) = normalize_with_offsets(raw);
/// assert_eq!(normalized, normalize(raw));
/// assert_eq!(normalized, "cctv&新闻");
/// assert_eq!(&raw[offsets.raw_range(0..4)], "ＣＣＴＶ");
/// assert_eq!(&raw[offsets.raw_range(4..5)], "&amp;");
/// assert_eq!(&raw[offsets.raw_range(5..11)], "新闻");
/// ```
pub fn normalize_with_offsets(text: &str) -> (String, OffsetMap) {
    let (normalized, spans) = normalize_traced::<Spans>(text);
    (
        normalized,
        OffsetMap {
            spans: spans.spans,
            raw_len: text.len(),
        },
    )
}

/// `text` as a reader sees it: literal escapes undone, markup removed and entities decoded
/// (the first stages of [`normalize`]), each run of white space one space (one line break when
/// it holds one), none at either end nor beside wide (CJK) text, where spaces are layout;
/// letters and widths left as written. What a snippet shows of stored raw text.
///
/// ```
/// use tantivy_dedup::text::{normalize, readable};
///
/// let raw = "<p>ＣＣＴＶ&amp;新闻</p>\\n<br>第二段 <b>Hello</b>  World <b>报道</b>";
/// assert_eq!(readable(raw), "ＣＣＴＶ&新闻\n第二段Hello World报道");
/// assert_eq!(normalize(&readable(raw)), normalize(raw));
/// ```
pub fn readable(text: &str) -> String {
    let unescaped = undo_literal_escapes::<()>(text).0;
    let (shown, ()) = strip_markup::<()>(&unescaped);
    let mut out = String::with_capacity(shown.len());
    let mut space: Option<char> = None;
    for c in shown.chars() {
        if c.is_whitespace() {
            if c == '\n' || space.is_none() {
                space = Some(if c == '\n' { '\n' } else { ' ' });
            }
            continue;
        }
        let wide = |c: char| matches!(c, '\u{2e80}'..='\u{9fff}' | '\u{f900}'..='\u{faff}' | '\u{ff00}'..='\u{ffef}');
        if let Some(space) = space.take() {
            let after = out.chars().next_back();
            if space == '\n' && after.is_some() {
                out.push('\n');
            } else if after.is_some_and(|after| !wide(after)) && !wide(c) {
                out.push(' ');
            }
        }
        out.push(c);
    }
    out
}

/// The stages, each traced by `T`, and their traces composed into one from the output back to
/// `text`.
fn normalize_traced<T: Trace>(text: &str) -> (String, T) {
    let (unescaped, escapes) = undo_literal_escapes::<T>(text);
    let (without_markup, markup) = strip_markup::<T>(&unescaped);
    let to_raw = markup.through(escapes);
    // One pass for the text news is made of; the full NFKC pass only when it needs one.
    match fold_common::<T>(&without_markup) {
        Some((folded, fold)) => (folded, fold.through(to_raw)),
        None => {
            let (compatible, nfkc) = T::nfkc(&without_markup);
            let (folded, fold) = fold_case_and_space::<T>(&compatible);
            (folded, fold.through(nfkc.through(to_raw)))
        }
    }
}

/// Where each byte of a normalised text came from in its raw text: the raw span of the
/// character, entity, escape, tag or white-space run that produced it. Spans are whole raw
/// characters, so a raw range built from them always slices the raw text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetMap {
    /// Per normalised byte, the raw span it came from (never empty).
    spans: Vec<(usize, usize)>,
    raw_len: usize,
}

impl OffsetMap {
    /// The raw byte range that `normalized` (a byte range of the normalised text, on character
    /// boundaries) came from: from the start of its first byte's origin to the end of its last
    /// one's. An empty range maps to an empty range where its origin starts; a range past the
    /// end, to the raw text's end.
    pub fn raw_range(&self, normalized: Range<usize>) -> Range<usize> {
        let start = self
            .spans
            .get(normalized.start)
            .map_or(self.raw_len, |span| span.0);
        if normalized.end <= normalized.start {
            return start..start;
        }
        let end = self
            .spans
            .get(normalized.end - 1)
            .map_or(self.raw_len, |span| span.1);
        start..end.max(start)
    }
}

/// What a normalisation stage records of where its output came from in its input. `()`
/// records nothing (and compiles to nothing); [`Spans`] records a span per output byte.
trait Trace: Sized {
    /// A trace with nothing recorded.
    fn empty() -> Self;
    /// The output grew to `produced` bytes with text made from input bytes `from..to`.
    fn piece(&mut self, produced: usize, from: usize, to: usize);
    /// The output grew by `text`, copied from the input at `from`.
    fn copy(&mut self, from: usize, text: &str);
    /// Keeps the span of the white space a [`Folder`] holds back.
    fn hold(&mut self, from: usize, to: usize);
    /// The output grew to `produced` bytes by the white space held back.
    fn release(&mut self, produced: usize);
    /// This stage's trace followed through the stage before it (`inner`), back to that one's
    /// input.
    fn through(self, inner: Self) -> Self;
    /// Unicode NFKC of `text`, traced.
    fn nfkc(text: &str) -> (Cow<'_, str>, Self);
}

impl Trace for () {
    #[inline(always)]
    fn empty() -> Self {}
    #[inline(always)]
    fn piece(&mut self, _: usize, _: usize, _: usize) {}
    #[inline(always)]
    fn copy(&mut self, _: usize, _: &str) {}
    #[inline(always)]
    fn hold(&mut self, _: usize, _: usize) {}
    #[inline(always)]
    fn release(&mut self, _: usize) {}
    #[inline(always)]
    fn through(self, _: Self) -> Self {}
    fn nfkc(text: &str) -> (Cow<'_, str>, Self) {
        (nfkc(text), ())
    }
}

/// A span of the input per output byte.
#[derive(Debug, Default)]
struct Spans {
    spans: Vec<(usize, usize)>,
    held: (usize, usize),
}

impl Trace for Spans {
    fn empty() -> Self {
        Spans::default()
    }

    fn piece(&mut self, produced: usize, from: usize, to: usize) {
        self.spans.resize(produced, (from, to));
    }

    fn copy(&mut self, from: usize, text: &str) {
        for (offset, c) in text.char_indices() {
            let start = from + offset;
            let span = (start, start + c.len_utf8());
            self.spans.extend(std::iter::repeat_n(span, c.len_utf8()));
        }
    }

    fn hold(&mut self, from: usize, to: usize) {
        self.held = (from, to);
    }

    fn release(&mut self, produced: usize) {
        self.spans.resize(produced, self.held);
    }

    fn through(self, inner: Self) -> Self {
        let last = inner.spans.last().map_or(0, |span| span.1);
        let origin = |at: usize, pick: fn((usize, usize)) -> usize| {
            inner.spans.get(at).map_or(last, |&span| pick(span))
        };
        let spans = self
            .spans
            .iter()
            .map(|&(from, to)| {
                (
                    origin(from, |span| span.0),
                    origin(to.saturating_sub(1).max(from), |span| span.1),
                )
            })
            .collect();
        Spans {
            spans,
            held: (0, 0),
        }
    }

    /// NFKC one run at a time, each run starting at a character nothing before it combines
    /// with: one NFKC leaves alone (canonical combining class 0 and quick check Yes; UAX #15,
    /// "Stable Code Points"), or a full-width form, whose image is such a character. So the
    /// runs' images concatenate to the whole text's, and each output character comes from
    /// its run.
    fn nfkc(text: &str) -> (Cow<'_, str>, Self) {
        let mut out = String::with_capacity(text.len());
        let mut trace = Spans::empty();
        let mut run_start = 0;
        let boundaries = text
            .char_indices()
            .filter(|&(_, c)| {
                width_fold(c).is_some()
                    || (unicode_normalization::char::canonical_combining_class(c) == 0
                        && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes)
            })
            .map(|(at, _)| at)
            .chain(std::iter::once(text.len()));
        for boundary in boundaries {
            if boundary > run_start {
                out.extend(text[run_start..boundary].nfkc());
                trace.piece(out.len(), run_start, boundary);
                run_start = boundary;
            }
        }
        (Cow::Owned(out), trace)
    }
}

/// NFKC's image of a character of the fast path: full-width forms map one to one onto ASCII,
/// the stable characters map to themselves; `None` for anything else.
fn width_fold(c: char) -> Option<char> {
    match c {
        '\u{3000}' => Some(' '),
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0),
        _ if is_nfkc_stable(c) => Some(c),
        _ => None,
    }
}

/// NFKC, case, script and space folding in one pass, for text whose every character is NFKC-stable or
/// a full-width form (what `nfkc` maps directly); `None` for other text.
fn fold_common<T: Trace>(text: &str) -> Option<(String, T)> {
    let mut folder = Folder::<T>::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        folder.push(width_fold(c)?, at, at + c.len_utf8());
    }
    Some((folder.out, folder.trace))
}

/// Whether NFKC leaves `c` alone and nothing before it can combine with it: the characters
/// Chinese news is mostly made of (ASCII, CJK ideographs, common CJK punctuation).
fn is_nfkc_stable(c: char) -> bool {
    c.is_ascii()
        || matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3001}' | '\u{3002}' | '\u{3008}'..='\u{3011}')
        || matches!(c, '\u{2018}'..='\u{201d}' | '\u{2014}' | '\u{00b7}')
}

/// Unicode NFKC, the full algorithm (text of common characters takes `fold_common` instead).
fn nfkc(text: &str) -> Cow<'_, str> {
    match is_nfkc_quick(text.chars()) {
        IsNormalized::Yes => Cow::Borrowed(text),
        _ => Cow::Owned(text.nfkc().collect()),
    }
}

/// Undoes the escapes that double-escaped scrapes leave in text as literal characters: `\n`,
/// `\r` and `\t` (however many backslashes) become a line break or a space, `\uXXXX` the
/// character it names, `\"` and `\/` the quote and slash. Other backslashes stay. Borrows
/// when there is no backslash.
///
/// Left alone, the two characters `\` `n` are a word to jieba, and a scraped article
/// carries dozens of them: enough to decide a term-frequency fingerprint on their own.
fn undo_literal_escapes<T: Trace>(text: &str) -> (Cow<'_, str>, T) {
    let mut trace = T::empty();
    if !text.contains('\\') {
        trace.copy(0, text);
        return (Cow::Borrowed(text), trace);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find('\\') {
        let at = text.len() - rest.len();
        out.push_str(&rest[..position]);
        trace.copy(at, &rest[..position]);
        let backslashes = rest[position..].bytes().take_while(|&b| b == b'\\').count();
        let after = &rest[position + backslashes..];
        let (replacement, used) = match after.as_bytes().first() {
            Some(b'n' | b'r') => (Some('\n'), 1),
            Some(b't') => (Some(' '), 1),
            Some(b'"') => (Some('"'), 1),
            Some(b'/') => (Some('/'), 1),
            Some(b'u') => match after
                .get(1..5)
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .and_then(char::from_u32)
            {
                Some(c) => (Some(c), 5),
                None => (None, 0),
            },
            _ => (None, 0),
        };
        let escape = at + position;
        match replacement {
            Some(c) => {
                out.push(c);
                trace.piece(out.len(), escape, escape + backslashes + used);
            }
            None => {
                out.push_str(&rest[position..position + backslashes]);
                trace.copy(escape, &rest[position..position + backslashes]);
            }
        }
        rest = &after[used..];
    }
    trace.copy(text.len() - rest.len(), rest);
    out.push_str(rest);
    (Cow::Owned(out), trace)
}

/// Removes tags, comments and script/style elements; decodes entities. Borrows when there is
/// nothing to do.
fn strip_markup<T: Trace>(text: &str) -> (Cow<'_, str>, T) {
    let mut trace = T::empty();
    // Both marks are ASCII, so a byte search finds them without decoding characters.
    if memchr::memchr2(b'<', b'&', text.as_bytes()).is_none() {
        trace.copy(0, text);
        return (Cow::Borrowed(text), trace);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = memchr::memchr2(b'<', b'&', rest.as_bytes()) {
        out.push_str(&rest[..position]);
        trace.copy(text.len() - rest.len(), &rest[..position]);
        rest = &rest[position..];
        let at = text.len() - rest.len();
        let consumed = if rest.starts_with('<') {
            markup_len(rest).map(|(len, breaks_line)| {
                out.push(if breaks_line { '\n' } else { ' ' });
                len
            })
        } else {
            entity(rest).map(|(len, decoded)| {
                out.extend(decoded);
                len
            })
        };
        match consumed {
            Some(len) => {
                // An unknown entity is dropped: its piece is empty, and nothing is recorded.
                trace.piece(out.len(), at, at + len);
                rest = &rest[len..];
            }
            // Not markup after all: the '<' or '&' (one byte) is text.
            None => {
                out.push_str(&rest[..1]);
                trace.copy(at, &rest[..1]);
                rest = &rest[1..];
            }
        }
    }
    trace.copy(text.len() - rest.len(), rest);
    out.push_str(rest);
    (Cow::Owned(out), trace)
}

/// Block-level elements, whose tags end a line of text.
const BLOCK_TAGS: &[&str] = &[
    "br",
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "tr",
    "td",
    "th",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "hr",
    "dd",
    "dt",
];

/// Elements whose content is not text a reader sees.
const HIDDEN_ELEMENTS: &[&str] = &["script", "style", "noscript", "template"];

/// A '<' whose '>' is farther than this is prose, not a tag.
const MAX_TAG_LEN: usize = 4096;

/// If `text` starts with markup, its length in bytes and whether it breaks the line.
fn markup_len(text: &str) -> Option<(usize, bool)> {
    if let Some(body) = text.strip_prefix("<!--") {
        // An unterminated comment runs to the end of the text, as browsers read it.
        let len = body.find("-->").map_or(text.len(), |end| 4 + end + 3);
        return Some((len, false));
    }
    let after = text.as_bytes().get(1)?;
    if !(after.is_ascii_alphabetic() || matches!(after, b'/' | b'!' | b'?')) {
        return None;
    }
    // Only the first MAX_TAG_LEN bytes are searched, so a stray '<' costs O(1), not a scan of
    // the rest of the text.
    let window = &text.as_bytes()[..text.len().min(MAX_TAG_LEN)];
    let end = window.iter().position(|&b| b == b'>')? + 1;
    let name: String = text[1..end]
        .trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    if HIDDEN_ELEMENTS.contains(&name.as_str()) && !text[1..].starts_with('/') {
        let len = closing_tag_end(&text[end..], &name).map_or(text.len(), |len| end + len);
        return Some((len, false));
    }
    Some((end, BLOCK_TAGS.contains(&name.as_str())))
}

/// Where the closing tag `</name …>` ends in `text` (compared without regard to case), if it
/// has one.
fn closing_tag_end(text: &str, name: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = text[from..].find("</") {
        let start = from + offset + 2;
        let candidate = bytes.get(start..start + name.len())?;
        if candidate.eq_ignore_ascii_case(name.as_bytes()) {
            return text[start..].find('>').map(|gt| start + gt + 1);
        }
        from = start;
    }
    None
}

/// If `text` starts with an entity (`&name;`, `&#123;`, `&#x7b;`), its length in bytes and
/// what it decodes to (`None`: an unknown name, which is dropped).
///
/// Scraped text also carries entities without their semicolon (`&nbsp&nbsp`) and entities
/// escaped twice (`&amp;nbsp;`): the common names are decoded without a `;` when no letter
/// follows them, and an `&amp;` that is followed by another entity stands for that entity.
fn entity(text: &str) -> Option<(usize, Option<char>)> {
    entity_after_ampersand(&text[1..]).map(|(len, decoded)| (1 + len, decoded))
}

/// [`entity`] of the text after its `&`.
fn entity_after_ampersand(text: &str) -> Option<(usize, Option<char>)> {
    // Escaped twice or more: `&amp;nbsp;` and `&amp;amp;nbsp;` stand for `&nbsp;`. A loop, not
    // recursion: a body of a million `&amp;` must not exhaust the stack.
    let mut escapes = 0;
    while text[escapes..].starts_with("amp;") {
        escapes += 4;
    }
    if escapes > 0 {
        return Some(match single_entity(&text[escapes..]) {
            Some((len, decoded)) => (escapes + len, decoded),
            None => (escapes, Some('&')),
        });
    }
    single_entity(text)
}

/// One entity after its `&`, `&amp;` read as `&`.
fn single_entity(text: &str) -> Option<(usize, Option<char>)> {
    // The longest entity decoded here, `#x10ffff;`, is 9 bytes; look a little further.
    let Some(end) = text.bytes().take(11).position(|b| b == b';') else {
        return bare_entity(text);
    };
    let body = &text[..end];
    let decoded = if let Some(number) = body.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse::<u32>().ok()?,
        };
        Some(char::from_u32(code).unwrap_or(' '))
    } else {
        if body.len() < 2 || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return bare_entity(text);
        }
        named_entity(body)
    };
    Some((end + 1, decoded))
}

/// A common entity name at the start of `text` without its `;` (`&nbsp&nbsp`), when no
/// letter or digit runs on after it (so `&ltd` and `AT&T` stay text).
fn bare_entity(text: &str) -> Option<(usize, Option<char>)> {
    ["nbsp", "amp", "quot", "lt", "gt"].iter().find_map(|name| {
        let after = text.strip_prefix(name)?;
        let runs_on = after
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
        (!runs_on).then(|| (name.len(), named_entity(name)))
    })
}

/// The character of an entity name; `None` for a name not decoded here.
fn named_entity(name: &str) -> Option<char> {
    match name {
        "nbsp" | "ensp" | "emsp" | "thinsp" => Some(' '),
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "ldquo" => Some('“'),
        "rdquo" => Some('”'),
        "lsquo" => Some('‘'),
        "rsquo" => Some('’'),
        "hellip" => Some('…'),
        "mdash" => Some('—'),
        "ndash" => Some('–'),
        "middot" => Some('·'),
        "times" => Some('×'),
        "copy" => Some('©'),
        _ => None,
    }
}

pub(crate) fn is_zero_width(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{00ad}'
    )
}

/// Lower-cases ASCII letters, drops zero-width and control characters, and folds white space.
fn fold_case_and_space<T: Trace>(text: &str) -> (String, T) {
    let mut folder = Folder::<T>::with_capacity(text.len());
    text.char_indices()
        .for_each(|(at, c)| folder.push(c, at, at + c.len_utf8()));
    (folder.out, folder.trace)
}

/// The case, script ([`Simplifier`]) and space folding, one character at a time.
struct Folder<T> {
    out: String,
    simplifier: Simplifier,
    /// The white space waiting to be written: None, a space, or a line break.
    pending: Option<char>,
    trace: T,
}

impl<T: Trace> Folder<T> {
    fn with_capacity(capacity: usize) -> Self {
        Folder {
            out: String::with_capacity(capacity),
            simplifier: Simplifier::new(),
            pending: None,
            trace: T::empty(),
        }
    }

    /// Adds `c`, which came from input bytes `from..to`.
    #[inline]
    fn push(&mut self, c: char, from: usize, to: usize) {
        // CJK ideographs first: most of the text, and none of the cases below.
        if !matches!(c, '\u{4e00}'..='\u{9fff}') {
            if is_zero_width(c) {
                return;
            }
            if c.is_whitespace() || c.is_control() {
                if c == '\n' || c == '\r' || c == '\u{2029}' {
                    self.pending = Some('\n');
                    self.trace.hold(from, to);
                } else if self.pending.is_none() {
                    self.pending = Some(' ');
                    self.trace.hold(from, to);
                }
                return;
            }
        }
        if let Some(space) = self.pending.take() {
            let out = &mut self.out;
            let previous_is_ascii = out.as_bytes().last().is_some_and(u8::is_ascii);
            if space == '\n' && !out.is_empty() {
                out.push('\n');
                self.trace.release(out.len());
            } else if !out.is_empty() && previous_is_ascii && c.is_ascii() {
                out.push(' ');
                self.trace.release(out.len());
            }
        }
        self.out.push(self.simplifier.fold(c.to_ascii_lowercase()));
        self.trace.piece(self.out.len(), from, to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The one-pass path equals the full NFKC followed by case and space folding, on every
        /// text it accepts.
        #[test]
        fn the_fast_path_equals_full_nfkc(text in "[a-zA-Z0-9 \t\n\r，。！？、：（）【】《》“”　Ａ-Ｚａ-ｚ０-９新闻联播中国经济\u{200b}\u{feff}·—]{0,60}") {
            let full: String = text.nfkc().collect();
            if let Some((fast, ())) = fold_common::<()>(&text) {
                proptest::prop_assert_eq!(fast, fold_case_and_space::<()>(&full).0);
            }
        }
    }

    proptest::proptest! {
        /// The traced path gives exactly the text [`normalize`] gives, and its map sends every
        /// character of it to a non-empty raw span on character boundaries, in order.
        #[test]
        fn the_offset_map_follows_every_stage(text in "([a-zA-Z0-9 \t\n，。　Ａ-Ｚａ-ｚ０-９新闻联播\u{200b}·—㎡①ﬁ\u{301}\u{1100}-\u{1112}\u{1161}-\u{1175}가-힣]|&amp;|&nbsp|&lt;|&#20013;|&bogus;|<p>|<br/>|<!-- c -->|<script>x</script>|\\\\n|\\\\u4e2d|\\\\x){0,40}") {
            let (normalized, offsets) = normalize_with_offsets(&text);
            proptest::prop_assert_eq!(&normalized, &normalize(&text));
            for (at, c) in normalized.char_indices() {
                let raw = offsets.raw_range(at..at + c.len_utf8());
                proptest::prop_assert!(!raw.is_empty() && text.get(raw.clone()).is_some(), "{raw:?}");
            }
        }
    }

    #[test]
    fn offsets_point_into_the_raw_text() {
        let raw = "标题&nbsp;ＡＢＣ<b>新闻</b>\\n第二段&amp;amp;lt;完";
        let (normalized, offsets) = normalize_with_offsets(raw);
        assert_eq!(normalized, "标题abc新闻\n第二段<完");
        let raw_of = |word: &str| {
            let at = normalized.find(word).unwrap();
            &raw[offsets.raw_range(at..at + word.len())]
        };
        assert_eq!(raw_of("abc"), "ＡＢＣ");
        assert_eq!(raw_of("b"), "Ｂ");
        assert_eq!(raw_of("新闻"), "新闻");
        assert_eq!(raw_of("\n"), "\\n");
        assert_eq!(raw_of("<"), "&amp;amp;lt;");
        assert_eq!(raw_of("完"), "完");
        assert_eq!(
            offsets.raw_range(normalized.len()..normalized.len()),
            raw.len()..raw.len()
        );
        // A character NFKC composes from two.
        let (normalized, offsets) = normalize_with_offsets("e\u{301}！");
        assert_eq!(normalized, "é!");
        assert_eq!(offsets.raw_range(0..2), 0..3);
        assert_eq!(offsets.raw_range(2..3), 3..6);
    }

    #[test]
    fn markup_is_removed() {
        assert_eq!(
            normalize("<div class=\"a\">北京<b>新闻</b></div><!-- ad -->今天"),
            "北京新闻\n今天"
        );
        assert_eq!(normalize("<script>var x = '<p>';</script>正文"), "正文");
        assert_eq!(
            normalize("<STYLE>p{}</STYLE>正文<br/>下一行"),
            "正文\n下一行"
        );
        assert_eq!(normalize("正文<!-- never closed"), "正文");
    }

    #[test]
    fn entities_decode_or_vanish() {
        assert_eq!(normalize("a&amp;b &#20013;&#x56fd; &bogus; &"), "a&b中国&");
        assert_eq!(normalize("x &lt; y"), "x < y");
        assert_eq!(normalize("AT&T"), "at&t");
    }

    #[test]
    fn scraping_damage_is_undone() {
        assert_eq!(normalize("第一段\\n\\n第二段\\t完"), "第一段\n第二段完");
        assert_eq!(normalize("a\\\\nb \\u4e2d\\u56fd \\x"), "a\nb中国\\x");
        assert_eq!(
            normalize("甲&nbsp&nbsp乙&amp;nbsp;丙&amp;amp;lt;丁"),
            "甲乙丙<丁"
        );
        assert_eq!(normalize("AT&T &ltd &amp;b"), "at&t &ltd &b");
    }

    #[test]
    fn escaped_ampersands_cost_no_stack() {
        // An entity escaped 200,000 times over: recursion per level would overflow the stack.
        let nested = format!("&{}nbsp;正文", "amp;".repeat(200_000));
        assert_eq!(normalize(&nested), "正文");
        assert_eq!(normalize(&format!("&{}", "amp;".repeat(200_000))), "&");
        assert_eq!(normalize("&amp;&amp;&amp;"), "&&&");
    }

    #[test]
    fn stray_brackets_cost_linear_time() {
        // Quadratic scanning would take minutes here; linear takes milliseconds.
        let stray = "<a x".repeat(50_000);
        assert_eq!(normalize(&stray).len(), stray.len());
        let scripts = "<script></SCRIPT>".repeat(25_000);
        assert_eq!(normalize(&scripts), "");
    }

    #[test]
    fn text_that_only_looks_like_markup_stays() {
        assert_eq!(normalize("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
        assert_eq!(normalize("<<"), "<<");
        assert_eq!(normalize("a <b"), "a <b");
    }

    #[test]
    fn fast_width_fold_equals_full_nfkc() {
        let samples = [
            "中国网络电视台消息（新闻联播）：今天，１２３ＡＢＣ！",
            "“引号”《书名》【标题】、。—·",
            "Ａ\u{301}：组合字符走完整算法",
            "…省略号与㎡单位",
            "\u{3000}全角空格",
        ];
        for sample in samples {
            let full: String = sample.nfkc().collect();
            assert_eq!(nfkc(sample), full, "{sample:?}");
        }
    }

    #[test]
    fn width_and_space_fold() {
        assert_eq!(normalize("全角：ＡＢＣ１２３"), normalize("全角:abc123"));
        assert_eq!(normalize("中 国\u{3000}人\u{200b}民"), "中国人民");
        assert_eq!(normalize("a\r\n\r\n b"), "a\nb");
        assert_eq!(normalize(""), "");
    }
}
