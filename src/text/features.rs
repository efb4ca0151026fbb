//! From jieba's words to weighted simhash features.
//!
//! A word is a feature when it has a letter or digit in it (punctuation and white space are not)
//! and is not a stop word. Each occurrence adds the word's weight: 1 under term-frequency
//! weighting, so a word counts as often as it occurs; its inverse document frequency from
//! jieba's IDF table under TF-IDF, so frequent everyday words weigh less than names and terms.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use jieba_rs::{KeywordExtract, KeywordExtractConfig, TfIdf};
use serde::{Deserialize, Serialize};

use super::words::jieba;

/// How much a feature weighs in the simhash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Weighting {
    /// Term frequency: every occurrence weighs 1 (seed mode's weights).
    #[default]
    Tf,
    /// Term frequency times the word's IDF from jieba's table (its median for unknown words).
    TfIdf,
    /// Sublinear term frequency, `1 + ln tf`: a word said ten times weighs 3.3, not 10, so no
    /// repeated token (a scraped `\n`, an emoticon run, "哈哈哈") can outvote the rest of the
    /// text. Default mode's weights.
    LogTf,
    /// `(1 + ln tf)` times the word's IDF.
    LogTfIdf,
}

impl Weighting {
    /// Whether repeated occurrences count sublinearly (`1 + ln tf`).
    pub fn is_sublinear(self) -> bool {
        matches!(self, Weighting::LogTf | Weighting::LogTfIdf)
    }

    /// Whether words are weighted by their IDF.
    pub fn uses_idf(self) -> bool {
        matches!(self, Weighting::TfIdf | Weighting::LogTfIdf)
    }

    /// The weight of a word that occurs `tf` times (`tf >= 1`), before IDF.
    pub fn frequency_weight(self, tf: u32) -> f32 {
        if self.is_sublinear() {
            1.0 + (tf as f32).ln()
        } else {
            tf as f32
        }
    }
}

/// Byte ranges of the bracketed emoticon codes of Weibo and similar sites (`[哈哈]`, `[good]`,
/// `[蜡烛]`) in a normalised text: a `[`, one to eight letters or digits, a `]`.
///
/// ```
/// use tantivy_dedup::text::emoticon_codes;
///
/// let text = "笑死我了[哈哈][哈哈] see [1] and [good]";
/// let codes: Vec<&str> = emoticon_codes(text).map(|range| &text[range]).collect();
/// assert_eq!(codes, ["[哈哈]", "[哈哈]", "[1]", "[good]"]);
/// ```
pub fn emoticon_codes(text: &str) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    text.match_indices('[').filter_map(move |(start, _)| {
        let inner = &text[start + 1..];
        let (length, chars) = inner
            .char_indices()
            .take(MAX_EMOTICON_CHARS + 1)
            .find(|(_, c)| !has_letter_or_digit_char(*c))
            .filter(|&(_, c)| c == ']')
            .map(|(offset, _)| (offset, inner[..offset].chars().count()))?;
        (chars >= 1).then_some(start..start + 1 + length + 1)
    })
}

/// The most letters an emoticon code holds between its brackets.
const MAX_EMOTICON_CHARS: usize = 8;

/// Whether a character is a letter or digit. CJK ideographs and ASCII are tested first: the
/// general Unicode tables are slow.
fn has_letter_or_digit_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '\u{4e00}'..='\u{9fff}')
        || (!c.is_ascii() && !is_cjk_punctuation(c) && c.is_alphanumeric())
}

/// Whether `c` is one of the marks of Chinese text outside ASCII (`、` `“` `”` `《` `》` `【`
/// `】` `—` `·`: the middle dot, General Punctuation up to U+2027 and CJK Symbols and
/// Punctuation but its letters and numerals): none is a letter or digit, which the general
/// Unicode tables take several searches to say, for every such mark of every text.
pub(crate) fn is_cjk_punctuation(c: char) -> bool {
    matches!(c, '\u{b7}' | '\u{2010}'..='\u{2027}' | '\u{3001}'..='\u{3004}' | '\u{3008}'..='\u{3020}')
}

/// The stop words: function words too common to tell articles apart.
const STOP_WORDS: [&str; 123] = [
    "的", "了", "和", "是", "在", "也", "就", "都", "而", "及", "与", "着", "或", "之", "其", "把",
    "被", "对", "从", "以", "为", "于", "这", "那", "个", "有", "我", "你", "他", "她", "它", "们",
    "我们", "你们", "他们", "她们", "它们", "这个", "那个", "这些", "那些", "一个", "没有", "不",
    "很", "还", "又", "并", "但", "但是", "而且", "因为", "所以", "如果", "虽然", "已经", "可以",
    "以及", "等", "等等", "中", "上", "下", "将", "让", "给", "向", "由", "到", "吧", "吗", "呢",
    "啊", "嘛", "哦", "呀", "得", "地", "所", "该", "此", "各", "每", "即", "则", "却", "且", "只",
    "再", "更", "最", "会", "要", "能", "就是", "还是", "或者", "其中", "a", "an", "the", "of",
    "to", "in", "on", "at", "for", "by", "with", "from", "and", "or", "but", "is", "are", "was",
    "were", "be", "been", "it", "this", "that", "as",
];

/// Whether `word` is a stop word: a function word too common to tell articles apart.
pub fn is_stop_word(word: &str) -> bool {
    // Every stop word fits in eight bytes: packed into an integer, one is found in an
    // open-addressed table built at compile time, mostly at the first slot it reads (this
    // runs once for every word of every text, where a binary search of the sorted words was
    // much of the fingerprint's work a word).
    let Some(key) = pack(word) else {
        return false;
    };
    let mut slot = stop_slot(key);
    loop {
        match STOP_TABLE[slot] {
            0 => return false,
            stored if stored == key => return true,
            _ => slot = (slot + 1) % STOP_TABLE.len(),
        }
    }
}

/// The stop words, packed ([`pack`]), by [`stop_slot`], each at the first free slot from its
/// own; 0 for a free one (no packed word is 0). Four times the words' number of slots, so
/// that a word that is no stop word mostly meets a free one at once.
static STOP_TABLE: [u64; 512] = {
    let mut table = [0u64; 512];
    let mut at = 0;
    while at < STOP_WORDS.len() {
        let Some(key) = pack(STOP_WORDS[at]) else {
            panic!("a stop word packs into eight bytes");
        };
        let mut slot = stop_slot(key);
        while table[slot] != 0 {
            slot = (slot + 1) % table.len();
        }
        table[slot] = key;
        at += 1;
    }
    table
};

/// Where [`STOP_TABLE`] starts looking for a packed word: its top bits once mixed.
const fn stop_slot(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 9)) as usize
}

/// A word of at most eight bytes as an integer (at compile time too, for [`STOP_TABLE`]), its
/// first byte lowest (zero bytes after it: no word holds a zero byte, so two words pack alike
/// only when they are equal).
const fn pack(word: &str) -> Option<u64> {
    let bytes = word.as_bytes();
    if bytes.is_empty() || bytes.len() > 8 {
        return None;
    }
    let mut key = 0u64;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == 0 {
            return None;
        }
        key |= (bytes[at] as u64) << (8 * at);
        at += 1;
    }
    Some(key)
}

/// Whether a word counts as a feature: it has a letter or digit and is no stop word.
///
/// ```
/// use tantivy_dedup::text::is_feature;
///
/// assert!(is_feature("新闻"));
/// assert!(is_feature("2024"));
/// assert!(!is_feature("，"));
/// assert!(!is_feature(" "));
/// assert!(!is_feature("的"));
/// ```
pub fn is_feature(word: &str) -> bool {
    has_letter_or_digit(word) && !is_stop_word(word)
}

/// Whether a word has a letter or a digit (in any script), unlike punctuation, white space and
/// emoji.
pub fn has_letter_or_digit(word: &str) -> bool {
    // Most words start with a CJK ideograph: lead bytes E4 to E9 encode U+4000 to U+9FFF,
    // all letters but the Yijing hexagram symbols U+4DC0 to U+4DFF (E4 B7 ..), so the first
    // two bytes answer without decoding.
    match word.as_bytes() {
        [0xE5..=0xE9, ..] => true,
        [0xE4, second, ..] if *second != 0xB7 => true,
        _ => word.chars().any(has_letter_or_digit_char),
    }
}

/// jieba's IDF table, read one word at a time through jieba-rs's TF-IDF extractor (which keeps
/// the table private) and remembered, so each distinct word is looked up once per process (up
/// to about a million words; later ones are looked up each time).
pub struct IdfTable {
    extractor: TfIdf,
    median: f32,
    known: RwLock<HashMap<Box<str>, f32>>,
}

/// The most words [`IdfTable`] remembers: enough for a news vocabulary (jieba's table lists
/// about 260,000 words) while bounding what endless new numbers and names can take.
const MAX_REMEMBERED_WORDS: usize = 1 << 20;

/// An ASCII run jieba keeps whole and the IDF table does not have: its weight is the median.
const ABSENT_WORD: &str = "qzxjvkwqzxjvkw";

impl IdfTable {
    fn load() -> Self {
        let config = KeywordExtractConfig::builder()
            .min_keyword_length(1)
            .use_hmm(false)
            .build();
        let mut extractor = TfIdf::default();
        *extractor.config_mut() = config;
        let median = extractor
            .extract_keywords(jieba(), ABSENT_WORD, 1, Vec::new())
            .first()
            .map_or(1.0, |keyword| keyword.weight as f32);
        IdfTable {
            extractor,
            median,
            known: RwLock::new(HashMap::new()),
        }
    }

    /// The process-wide table, loaded on first use.
    pub fn global() -> &'static IdfTable {
        static TABLE: LazyLock<IdfTable> = LazyLock::new(IdfTable::load);
        &TABLE
    }

    /// The IDF of `word`; the table's median for a word it does not list.
    pub fn idf(&self, word: &str) -> f32 {
        if let Some(&idf) = self
            .known
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(word)
        {
            return idf;
        }
        // A one-word text has term frequency 1 and one term, so its TF-IDF is the word's IDF,
        // provided jieba reads it back as that one word.
        let idf = self
            .extractor
            .extract_keywords(jieba(), word, 1, Vec::new())
            .first()
            .filter(|keyword| keyword.keyword == word)
            .map_or(self.median, |keyword| keyword.weight as f32);
        let mut known = self
            .known
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if known.len() < MAX_REMEMBERED_WORDS {
            known.insert(word.into(), idf);
        }
        idf
    }

    /// The weight for unknown words.
    pub fn median(&self) -> f32 {
        self.median
    }
}

/// The punctuation that ends a sentence. (Not the full stop: "3.5", "U.S.", "Mr. Li".) Nor the
/// line break, which sketches' shingles span (see [`Sketch`](crate::verify::Sketch)); the
/// longest-sentence option adds it.
pub(crate) const SENTENCE_ENDS: &[char] = &['。', '!', '?', ';', '！', '？', '；'];

/// The longest sentence of a normalised text (by characters; the first of equals); a line
/// break ends a sentence too.
///
/// ```
/// use tantivy_dedup::text::longest_sentence;
///
/// assert_eq!(longest_sentence("短句。这是最长的一句话!尾"), "这是最长的一句话");
/// assert_eq!(longest_sentence("短标题\n这是最长的一句话。"), "这是最长的一句话");
/// assert_eq!(longest_sentence(""), "");
/// ```
pub fn longest_sentence(text: &str) -> &str {
    let mut best = &text[..0];
    let mut best_chars = 0;
    for sentence in text.split(|c| c == '\n' || SENTENCE_ENDS.contains(&c)) {
        let chars = sentence.chars().count();
        if chars > best_chars {
            best = sentence;
            best_chars = chars;
        }
    }
    best.trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The table finds a word exactly when the list has it.
        #[test]
        fn the_stop_word_table_agrees_with_the_list(word in "[的了和是我们这个那一没有但而且ab the ofinwr\\x00]{0,4}") {
            proptest::prop_assert_eq!(is_stop_word(&word), STOP_WORDS.contains(&word.as_str()));
        }
    }

    #[test]
    fn words_that_start_with_an_ideograph_are_answered_as_their_characters_are() {
        for c in '\u{4000}'..='\u{9fff}' {
            let word = format!("{c}，");
            assert_eq!(has_letter_or_digit(&word), c.is_alphanumeric(), "{c:?}");
        }
    }

    #[test]
    fn cjk_punctuation_has_no_letter_or_digit() {
        let marks: Vec<char> = ('\0'..=char::MAX)
            .filter(|&c| is_cjk_punctuation(c))
            .collect();
        assert!(marks.contains(&'、') && marks.contains(&'“') && marks.contains(&'》'));
        for c in marks {
            assert!(!c.is_alphanumeric() && !c.is_numeric(), "{c:?}");
        }
    }

    #[test]
    fn stop_words_are_exactly_the_listed_words() {
        for word in STOP_WORDS {
            assert!(is_stop_word(word), "{word}");
            for longer in [format!("{word}的"), format!("x{word}"), format!("{word}\0")] {
                assert_eq!(
                    is_stop_word(&longer),
                    STOP_WORDS.contains(&longer.as_str()),
                    "{longer:?}"
                );
            }
        }
        for word in [
            "",
            "新闻",
            "\0",
            "the\0",
            "they",
            "中国",
            "thes",
            "abcdefghi",
        ] {
            assert!(!is_stop_word(word), "{word:?}");
        }
    }

    #[test]
    fn idf_prefers_rare_words() {
        let table = IdfTable::global();
        let common = table.idf("中国");
        let rare = table.idf("光化学");
        assert!(
            common > 0.0 && rare > common,
            "中国 {common}, 光化学 {rare}"
        );
        assert_eq!(table.idf(ABSENT_WORD), table.median());
        // Remembered: the second read is the same value.
        assert_eq!(table.idf("光化学"), rare);
    }
}
