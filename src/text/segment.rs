//! Word segmentation with jieba, over one dictionary loaded once per process.

use std::sync::LazyLock;

use jieba_rs::Jieba;

static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);

/// The process-wide jieba segmenter with its default dictionary.
///
/// Loading the dictionary takes a fraction of a second and some tens of megabytes, so it happens
/// once, on first use, and every caller shares it by reference.
pub fn jieba() -> &'static Jieba {
    &JIEBA
}

/// Whether segmentation lets jieba's HMM join characters the dictionary does not know into
/// words (names, new terms). Both the fingerprint and the search index use this setting.
pub const USE_HMM: bool = true;

/// Calls `emit` with each word of `text`, in order. Punctuation and white space come out as
/// words of their own; [`is_feature`](crate::text::is_feature) decides what counts.
///
/// ```
/// let mut words = Vec::new();
/// tantivy_dedup::text::segment("新闻联播今天播出", |word| words.push(word.to_owned()));
/// assert_eq!(words.concat(), "新闻联播今天播出");
/// assert!(words.len() >= 2);
/// ```
pub fn segment<'a>(text: &'a str, mut emit: impl FnMut(&'a str)) {
    for token in jieba().cut(text, USE_HMM) {
        emit(token.word);
    }
}
