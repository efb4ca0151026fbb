//! Splitting text into words with jieba, through tantivy-jieba: the fingerprint and the search
//! index read the same words from the same dictionary.

use std::sync::LazyLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{TokenStream, Tokenizer};
use tantivy_jieba::JiebaTokenizer;

use crate::text::has_letter_or_digit;

/// A jieba instance of our own, with the default dictionary: the same jieba-rs release and
/// dictionary as tantivy-jieba's instance, so both split alike (a property test checks it).
///
/// It serves the paths that only fingerprint (the `dedup` and `eval` commands, the IDF table
/// behind TF-IDF weights), where borrowing jieba's words directly is faster than going through
/// a token stream. Indexing splits through tantivy-jieba; the dictionary loads on first use,
/// so a process loads only the instances it uses.
pub fn jieba() -> &'static Jieba {
    static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
    &JIEBA
}

/// Whether word splitting lets jieba's HMM join characters the dictionary does not know into
/// words (names, new terms). It is tantivy-jieba's default, which the search index uses.
pub const USE_HMM: bool = true;

/// Calls `emit` with each word of `text`, in order: jieba's default mode, which cuts
/// the text into words that do not overlap. Punctuation and white space come out as words of
/// their own; [`is_feature`](crate::text::is_feature) decides what counts.
///
/// ```
/// let mut words = Vec::new();
/// tantivy_dedup::text::split_words("新闻联播今天播出", |word| words.push(word.to_owned()));
/// assert_eq!(words.concat(), "新闻联播今天播出");
/// assert!(words.len() >= 2);
/// ```
pub fn split_words<'a>(text: &'a str, mut emit: impl FnMut(&'a str)) {
    for token in jieba().cut(text, USE_HMM) {
        emit(token.word);
    }
}

/// Where a token lies in its text, as tantivy-jieba reports it: byte offsets, and a position
/// and length counted in characters (so phrase queries line up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSpan {
    /// Byte offset of the first byte.
    pub from: u32,
    /// Byte offset past the last byte.
    pub to: u32,
    /// Character offset of the first character.
    pub position: u32,
    /// Length in characters.
    pub length: u32,
    /// Whether this is a word of the default mode ([`split_words`]), as opposed to a
    /// sub-word that search mode added.
    pub whole_word: bool,
}

impl TokenSpan {
    /// The byte range.
    pub fn range(self) -> std::ops::Range<usize> {
        self.from as usize..self.to as usize
    }
}

/// The tokens the search index stores for `text`: tantivy-jieba's search mode, which adds the
/// dictionary words inside each long word ("中华人民共和国" also yields "人民", "共和国", ...).
/// Tokens without a letter or digit (punctuation, white space, emoji) are left out: there is
/// nothing in them to search for, and they are never fingerprint features.
/// Texts beyond 4 GiB are cut there (far beyond any article).
pub fn search_tokens(text: &str) -> Vec<TokenSpan> {
    let text = &text[..floor_char_boundary(text, u32::MAX as usize)];
    let mut tokenizer = JiebaTokenizer::new();
    let mut stream = tokenizer.token_stream(text);
    let mut spans = Vec::with_capacity(text.len() / 4);
    while let Some(token) = stream.next() {
        if !has_letter_or_digit(&token.text) {
            continue;
        }
        spans.push(TokenSpan {
            from: token.offset_from as u32,
            to: token.offset_to as u32,
            position: token.position as u32,
            length: token.position_length as u32,
            whole_word: true,
        });
    }
    mark_sub_words(&mut spans);
    spans
}

/// Marks the tokens search mode added inside words.
///
/// Search mode emits each word's sub-words (and the parts of a compound like `WES-5.4`)
/// before the word itself, and the word contains them all; tokens of later words start after
/// it ends. So a token is a sub-word exactly when a later token starts at or before it.
fn mark_sub_words(spans: &mut [TokenSpan]) {
    let mut earliest_later_start = u32::MAX;
    for span in spans.iter_mut().rev() {
        span.whole_word = earliest_later_start > span.from;
        earliest_later_start = earliest_later_start.min(span.from);
    }
}

fn floor_char_boundary(text: &str, limit: usize) -> usize {
    if text.len() <= limit {
        return text.len();
    }
    (0..=limit)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}
