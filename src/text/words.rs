//! Splitting text into words with jieba: the fingerprint and the search index read the same
//! words from one dictionary, the process's one jieba instance ([`jieba`]), to which a user
//! dictionary may add words ([`use_user_dictionary`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jieba_rs::Jieba;
use xxhash_rust::xxh3::xxh3_64;

use crate::text::{has_letter_or_digit, normalize};
use crate::{Error, Result};

/// The process's jieba, and the user dictionary it was given, if any.
static JIEBA: OnceLock<(Jieba, Option<UserDictionary>)> = OnceLock::new();

/// The largest frequency a user dictionary may give a word: over a thousand times that of the most
/// frequent word of jieba's own dictionary, far more than any word needs to be kept whole, and far from
/// the sum of frequencies overflowing.
const MAX_FREQUENCY: usize = 1_000_000_000;

/// A user dictionary as loaded: where it came from and the hash of its words.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UserDictionary {
    path: PathBuf,
    digest: u64,
}

/// The jieba instance every path splits text with: the default dictionary, plus the user
/// dictionary if [`use_user_dictionary`] gave one before the first split. The dictionary loads on
/// first use.
///
/// Indexing (`NewsTokenizer`), the fingerprint (the `dedup` and `eval` commands, the index
/// writer) and the IDF table behind TF-IDF weights all split through it, so they cannot
/// disagree on a word.
pub fn jieba() -> &'static Jieba {
    &JIEBA.get_or_init(|| (Jieba::new(), None)).0
}

/// Adds the words of a user dictionary (new product, company, person or place names that jieba
/// would otherwise cut apart or glue to a neighbour) to the process's jieba, for every text
/// split from now on: the index's words and queries, and the fingerprint.
///
/// The file holds one word a line: the word, then optionally its frequency (a whole number up to
/// a billion; a higher one joins its characters more readily; without one, jieba picks the
/// frequency that makes the word whole) and a part-of-speech tag, separated by white space (so
/// a word has none in it); empty lines and lines that start with `#` are skipped. Each word is
/// normalised as text is ([`normalize`]: full-width forms, capitals, traditional characters),
/// so that it matches the text jieba is given. The dictionary must be given before any text is
/// split in the process, since what was split before would disagree with what is split after;
/// loading the same text again is allowed and does nothing.
///
/// ```no_run
/// tantivy_dedup::text::use_user_dictionary(std::path::Path::new("user_dict.txt"))?;
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
pub fn use_user_dictionary(path: &Path) -> Result<()> {
    let (words, digest) = read_user_dictionary(path)?;
    let refused = |message: String| Error::UserDictionary {
        path: path.to_owned(),
        message,
    };
    let (_, loaded) = JIEBA.get_or_init(|| {
        let mut jieba = Jieba::new();
        for (word, frequency, tag) in &words {
            jieba.add_word(word, *frequency, tag.as_deref());
        }
        let path = path.to_owned();
        (jieba, Some(UserDictionary { path, digest }))
    });
    match loaded {
        Some(loaded) if loaded.digest == digest => Ok(()),
        Some(loaded) => Err(refused(format!(
            "this process already splits text with the user dictionary {}, which holds other \
             words; one process uses one dictionary",
            loaded.path.display()
        ))),
        None => Err(refused(
            "text was split before the user dictionary was given; give it before anything \
             else (the index's settings, or --config, load it on opening)"
                .to_owned(),
        )),
    }
}

/// The words of the user dictionary at `path`, and their hash: of the words as read, so that
/// comments, line ends and spellings that normalise alike do not make another dictionary.
fn read_user_dictionary(path: &Path) -> Result<(Vec<UserWord>, u64)> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    let words = user_words(&text).map_err(|message| Error::UserDictionary {
        path: path.to_owned(),
        message,
    })?;
    let listed: String = words
        .iter()
        .map(|(word, frequency, tag)| format!("{word}\t{frequency:?}\t{tag:?}\n"))
        .collect();
    Ok((words, xxh3_64(listed.as_bytes())))
}

/// Whether the user dictionaries at `a` and `b` hold the same words (read as
/// [`use_user_dictionary`] reads them).
pub(crate) fn same_user_dictionary(a: &Path, b: &Path) -> Result<bool> {
    Ok(read_user_dictionary(a)?.1 == read_user_dictionary(b)?.1)
}

/// Refuses to go on when the process splits text with a user dictionary: for an index made
/// without one, whose words were split by jieba's dictionary alone.
pub(crate) fn require_no_user_dictionary() -> Result<()> {
    match JIEBA.get() {
        Some((_, Some(loaded))) => Err(Error::Config(format!(
            "this process splits text with the user dictionary {}, and this index was made \
             without one: its words would not be the queries'. Run without that dictionary",
            loaded.path.display()
        ))),
        _ => Ok(()),
    }
}

/// The hash of the user dictionary this process splits text with (16 hex digits of the xxh3 of
/// its words, normalised, with their frequencies and tags), if it was given one: what the
/// processes that fingerprint or index for one forest compare, since the dictionary moves both.
pub fn user_dictionary_digest() -> Option<String> {
    let loaded = JIEBA.get()?.1.as_ref()?;
    Some(format!("{:016x}", loaded.digest))
}

/// A word of a user dictionary: the word (normalised), its frequency and its tag.
type UserWord = (String, Option<usize>, Option<String>);

/// The words of a user dictionary's `text`; the first line that is not a word, an optional
/// frequency and an optional tag is refused, by number.
fn user_words(text: &str) -> std::result::Result<Vec<UserWord>, String> {
    let mut words = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line_number = number + 1;
        let mut parts = line.split_whitespace();
        let Some(written) = parts.next().filter(|word| !word.starts_with('#')) else {
            continue;
        };
        let word = normalize(written);
        if word.is_empty() || word.contains(char::is_whitespace) {
            return Err(format!(
                "line {line_number}: {written:?} is not a word once normalised ({word:?})"
            ));
        }
        let frequency = match parts.next() {
            Some(given) => match given.parse::<usize>() {
                Ok(frequency) if frequency <= MAX_FREQUENCY => Some(frequency),
                _ => {
                    return Err(format!(
                        "line {line_number}: the frequency {given:?} of {written:?} is not a \
                         whole number up to {MAX_FREQUENCY}"
                    ));
                }
            },
            None => None,
        };
        let tag = parts.next().map(str::to_owned);
        if parts.next().is_some() {
            return Err(format!(
                "line {line_number}: expected a word, then a frequency and a tag at most \
                 (a word has no spaces; a comment is a line of its own that starts with #)"
            ));
        }
        words.push((word, frequency, tag));
    }
    Ok(words)
}

/// Whether word splitting lets jieba's HMM join characters the dictionary does not know into
/// words (names, new terms). It is tantivy-jieba's default too.
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

/// Where a token lies in its text: byte offsets, and a position and length counted in
/// characters (so phrase queries line up), as tantivy-jieba reports them.
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

/// The tokens the search index stores for `text`: jieba's search mode (as tantivy-jieba gives
/// it: positions and lengths in characters), which adds the dictionary words inside each long
/// word ("中华人民共和国" also yields "人民", "共和国", ...).
/// Tokens without a letter or digit (punctuation, white space, emoji) are left out: there is
/// nothing in them to search for, and they are never fingerprint features.
/// Texts beyond 4 GiB are cut there (far beyond any article).
pub fn search_tokens(text: &str) -> Vec<TokenSpan> {
    let text = &text[..floor_char_boundary(text, u32::MAX as usize)];
    let mut spans = Vec::with_capacity(text.len() / 4);
    for token in jieba().cut_for_search(text, USE_HMM) {
        if !has_letter_or_digit(token.word) {
            continue;
        }
        spans.push(TokenSpan {
            from: token.byte_start as u32,
            to: token.byte_end as u32,
            position: token.start as u32,
            length: (token.end - token.start) as u32,
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
