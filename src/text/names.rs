//! The names a text repeats: the people and places it is about, which tell two notices of one
//! template that name someone else apart (`verify::Verifier`).
//!
//! A template's notices differ in who or where: one leader's funeral against another's, one
//! president's welcome ceremony against another's, Hong Kong's election meeting against
//! Macao's. The name they differ in is what the notice is about, so it comes back in every
//! paragraph (布赫 ten times, 钱其琛 twelve), and the other notice never says it. A copy keeps
//! its subject's name wherever it keeps its text: a typo changes one occurrence, a cut or an
//! edited paragraph a few.
//!
//! Only the words a text repeats are asked about (the fingerprint already counts each word's
//! occurrences), and each word's answer is remembered by its hash: jieba is asked once per
//! word and process, the words of a text together, not once per occurrence.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{LazyLock, PoisonError, RwLock};

use crate::simhash::FingerprintHasher;
use crate::text::{jieba, normalize};

/// The fewest occurrences of a name that a text keeps ([`Names`]): a name said once is a
/// passing mention, which a copy's typo or cut can take away.
pub const MIN_REPEATS: u32 = 2;

/// The fewest bytes of a name: two Chinese characters, of three bytes each in UTF-8 (the
/// characters [`is_name`] counts). A shorter word needs no asking.
pub(crate) const MIN_NAME_BYTES: usize = 6;

/// The most names a text keeps, its most repeated ([`Names`]).
pub const MAX_NAMES: usize = 8;

/// Most words whose answer is remembered; past it, all are forgotten and asked again (news
/// vocabularies reach a few hundred thousand words; the full table takes about 32 MB).
const REMEMBERED_WORDS: usize = 1 << 20;

/// Whether a word names a person or a place: a word of two Chinese characters or more that
/// jieba's dictionary tags as a person's name (`nr`, `nrfg`, `nrt`: 钱其琛, 习近平, 科特迪瓦)
/// or a place's (`ns`: 香港, 葡萄牙), or that is not in the dictionary at all: a word jieba's
/// hidden Markov model put together, mostly a name it does not know (布赫, 马西). A single
/// character is no name, though the dictionary tags many surnames so (哈, 王).
///
/// ```
/// use tantivy_dedup::text::is_name;
///
/// assert!(is_name("钱其琛"));
/// assert!(is_name("澳门"));
/// assert!(!is_name("火化"));
/// assert!(!is_name("2024"));
/// ```
pub fn is_name(word: &str) -> bool {
    are_names(&[word])[0]
}

/// [`is_name`] of each word, in order. jieba's tags are asked once for the words of its
/// dictionary among them: the cost is mostly that of a call, not of a word; the others need
/// no tag.
fn are_names(words: &[&str]) -> Vec<bool> {
    let chinese = |word: &str| word.chars().count() >= 2 && word.chars().all(is_chinese);
    let known: Vec<&str> = words
        .iter()
        .copied()
        .filter(|&word| chinese(word) && jieba().has_word(word))
        .collect();
    let mut tagged = tagged_names(&known).into_iter();
    words
        .iter()
        .map(|&word| match chinese(word) {
            false => false,
            true if jieba().has_word(word) => tagged.next().unwrap_or(false),
            true => true,
        })
        .collect()
}

/// Whether jieba's dictionary tags each of these words of it as a person's or a place's name.
fn tagged_names(words: &[&str]) -> Vec<bool> {
    if words.is_empty() {
        return Vec::new();
    }
    // One word a line: a line break ends every word of jieba's, so no two words join.
    let lines = words.join("\n");
    let tags = jieba().tag(&lines, false);
    let mut tags = tags.iter().peekable();
    let mut start = 0;
    words
        .iter()
        .map(|&word| {
            // The word's pieces, by where they start: the word itself, unless jieba prefers
            // to split it here.
            let end = start + word.len();
            let mut pieces = Vec::new();
            while let Some(tag) = tags.next_if(|tag| tag.byte_start < end) {
                if tag.byte_start >= start {
                    pieces.push(tag);
                }
            }
            start = end + 1;
            // A word of the dictionary that jieba still splits is no name of its.
            match pieces.as_slice() {
                [one] if one.word == word => one.tag.starts_with("nr") || one.tag == "ns",
                _ => false,
            }
        })
        .collect()
}

/// Whether a character is a Chinese character (the CJK Unified Ideographs and extension A).
fn is_chinese(c: char) -> bool {
    matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}')
}

/// [`is_name`]'s answers by the word's hash (xxh3, as the fingerprint hashes words), shared by
/// the threads that sign texts in parallel: each word is asked about once per process.
static ANSWERS: LazyLock<RwLock<HashMap<u64, bool, BuildHasherDefault<FingerprintHasher>>>> =
    LazyLock::new(RwLock::default);

/// Keeps the words of `counts` (`(xxh3 hash, occurrences)`) that are names ([`is_name`]),
/// remembered: the text of a word not asked about before is found among `spoken` (the text's
/// words of [`MIN_NAME_BYTES`] or more with their hashes, in any order); a word not among
/// them is shorter, so no name, and remembered as none.
fn retain_names(counts: &mut Vec<(u64, u32)>, spoken: &[(u64, &str)]) {
    let mut unknown: Vec<u64> = Vec::new();
    {
        // A poisoned lock only means a thread panicked while holding it: the answers in the
        // table are still answers.
        let answers = ANSWERS.read().unwrap_or_else(PoisonError::into_inner);
        counts.retain(|&(hash, _)| match answers.get(&hash) {
            Some(&is_name) => is_name,
            None => {
                unknown.push(hash);
                true
            }
        });
    }
    if unknown.is_empty() {
        return;
    }
    unknown.sort_unstable();
    unknown.dedup();
    let found = words_of(&unknown, spoken);
    let words: Vec<&str> = found.iter().filter_map(|&(_, word)| word).collect();
    let mut answers = are_names(&words).into_iter();
    let fresh: Vec<(u64, bool)> = found
        .iter()
        .map(|&(hash, word)| (hash, word.is_some() && answers.next().unwrap_or(false)))
        .collect();
    {
        let mut answers = ANSWERS.write().unwrap_or_else(PoisonError::into_inner);
        if answers.len() + fresh.len() > REMEMBERED_WORDS {
            answers.clear();
        }
        answers.extend(fresh.iter().copied());
    }
    // The words answered before are names already; of the others, those just found to be.
    counts.retain(|(hash, _)| {
        let at = fresh.binary_search_by_key(hash, |&(of, _)| of);
        at.map_or(true, |at| fresh[at].1)
    });
}

/// The word of each of `wanted` (hashes, sorted, each once) among `spoken`, in one pass that
/// stops once each is found: a text's few new words cost a scan of its words, not a sort of
/// them, and a flood of new words a search each.
fn words_of<'a>(wanted: &[u64], spoken: &[(u64, &'a str)]) -> Vec<(u64, Option<&'a str>)> {
    let mut found: Vec<(u64, Option<&str>)> = wanted.iter().map(|&hash| (hash, None)).collect();
    let mut missing = found.len();
    for &(hash, word) in spoken {
        if missing == 0 {
            break;
        }
        if let Ok(at) = wanted.binary_search(&hash)
            && found[at].1.is_none()
        {
            found[at].1 = Some(word);
            missing -= 1;
        }
    }
    found
}

/// Which word hashes may be those of a text's words of [`MIN_NAME_BYTES`] or more: a filter
/// of 1,024 bits, two a word, that holds every such word and lets some others through (fewer
/// the shorter the text; those go on to be asked about, and are found to be no name).
struct LongWords([u64; 16]);

impl LongWords {
    fn of(spoken: &[(u64, &str)]) -> LongWords {
        let mut bits = [0u64; 16];
        for &(hash, _) in spoken {
            for bit in Self::bits(hash) {
                bits[bit / 64] |= 1 << (bit % 64);
            }
        }
        LongWords(bits)
    }

    fn may_hold(&self, hash: u64) -> bool {
        Self::bits(hash)
            .iter()
            .all(|&bit| self.0[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// A hash's two bits, from two of its ten-bit fields (xxh3's bits are well mixed).
    fn bits(hash: u64) -> [usize; 2] {
        [(hash & 1023) as usize, ((hash >> 10) & 1023) as usize]
    }
}

/// The names a text repeats ([`MIN_REPEATS`] times or more), each as the xxh3 hash of the word
/// with its count of occurrences: at most [`MAX_NAMES`], the most repeated first (ties by
/// hash). A text that repeats more names keeps only these, and says so
/// ([`is_complete`](Self::is_complete)).
///
/// ```
/// use tantivy_dedup::text::{Fingerprinter, Weighting};
///
/// let fingerprinter = Fingerprinter::new(Weighting::LogTf, false).guarded(true);
/// let notice = "钱其琛同志的遗体在北京火化。钱其琛同志因病在北京逝世。横幅下方是钱其琛同志的遗像。";
/// let (_, names) = fingerprinter.fingerprint_with_names(&[notice], None);
/// let words: Vec<(u64, u32)> = names.iter().collect();
/// assert_eq!(words.len(), 2, "钱其琛 three times, 北京 twice");
/// assert_eq!(words[0].1, 3);
/// assert!(names.is_complete());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    counts: Vec<(u64, u32)>,
    complete: bool,
}

impl Names {
    /// The names of words counted in a text (`(hash, occurrences)`, each word once, in any
    /// order), the text of a word found among `spoken`, which must hold every counted word of
    /// [`MIN_NAME_BYTES`] or more with its hash (a counted word not in it is taken for a
    /// shorter one, no name).
    /// A word of the name of the text's `source` is kept with 0 occurrences: a page names its
    /// own site in its header and footer (东港网 names 东港), which is not what the text is
    /// about, and another page of the same text on that town's site must not take the name
    /// for its own (see `Verifier`).
    pub(crate) fn of_counts(
        mut counts: Vec<(u64, u32)>,
        source: Option<&str>,
        spoken: &[(u64, &str)],
    ) -> Names {
        counts.retain(|&(_, count)| count >= MIN_REPEATS);
        if !counts.is_empty() {
            // A word shorter than a name is none, and needs no asking: most of a text's
            // repeated words are single characters, and the table of answers is too large
            // to stay in cache.
            let long = LongWords::of(spoken);
            counts.retain(|&(hash, _)| long.may_hold(hash));
            retain_names(&mut counts, spoken);
        }
        counts.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let complete = counts.len() <= MAX_NAMES;
        counts.truncate(MAX_NAMES);
        if let Some(source) = source.filter(|source| !source.is_empty() && !counts.is_empty()) {
            // The words are of normalised text, so the name is read normalised too (東港網
            // names 东港).
            let source = normalize(source);
            let mut kept: Vec<u64> = counts.iter().map(|&(hash, _)| hash).collect();
            kept.sort_unstable();
            let found = words_of(&kept, spoken);
            for (hash, count) in &mut counts {
                let at = found.binary_search_by_key(hash, |&(of, _)| of);
                if at.is_ok_and(|at| found[at].1.is_some_and(|word| source.contains(word))) {
                    *count = 0;
                }
            }
        }
        Names { counts, complete }
    }

    /// Each name's hash and occurrences, the most repeated first (0 for a word of the
    /// source's name, which is not compared).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.counts.iter().copied()
    }

    /// Whether the text repeats no name.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Whether these are all the names the text repeats (it repeats at most [`MAX_NAMES`]).
    pub fn is_complete(&self) -> bool {
        self.complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_people_and_places_known_or_new() {
        for name in ["布赫", "习近平", "香港", "葡萄牙", "斯里兰卡"] {
            assert!(is_name(name), "{name}");
        }
        for word in [
            "同志", "遗体", "火化", "举行", "2017", "abc", "的", "，", "哈",
        ] {
            assert!(!is_name(word), "{word}");
        }
    }

    #[test]
    fn words_asked_together_are_answered_as_one_by_one() {
        let words = [
            "钱其琛",
            "会议",
            "马西",
            "仪式",
            "iPhone15",
            "香港特别行政区",
            "京",
            "2024",
            "布赫",
            "北京",
            "abc def",
            "",
        ];
        let together = are_names(&words);
        let alone: Vec<bool> = words.iter().map(|word| is_name(word)).collect();
        assert_eq!(together, alone);
        let hash = |word: &str| xxhash_rust::xxh3::xxh3_64(word.as_bytes());
        let spoken: Vec<(u64, &str)> = words.iter().map(|&word| (hash(word), word)).collect();
        let hashes: Vec<u64> = spoken.iter().map(|&(hash, _)| hash).collect();
        let names_among = |hashes: &[u64], spoken: &[(u64, &str)]| -> Vec<bool> {
            let mut counts: Vec<(u64, u32)> = hashes.iter().map(|&hash| (hash, 2)).collect();
            retain_names(&mut counts, spoken);
            hashes
                .iter()
                .map(|hash| counts.iter().any(|(of, _)| of == hash))
                .collect()
        };
        assert_eq!(names_among(&hashes, &spoken), alone);
        // Each answer is remembered: asked again, a word needs no text.
        let remembered = |hash: u64| {
            let answers = ANSWERS.read().unwrap_or_else(PoisonError::into_inner);
            answers.get(&hash).copied()
        };
        for (&hash, &is_name) in hashes.iter().zip(&alone) {
            assert_eq!(remembered(hash), Some(is_name));
        }
        // A repeated word not among the long words is a short one: no name, and remembered
        // so, though its text was not given.
        let short = hash("鼋");
        assert_eq!(names_among(&[short], &[]), [false]);
        assert_eq!(remembered(short), Some(false));
    }

    #[test]
    fn words_are_found_in_one_pass_whatever_their_order() {
        let hash = |word: &str| xxhash_rust::xxh3::xxh3_64(word.as_bytes());
        let spoken: Vec<(u64, &str)> = ["北京", "会议", "北京", "香港", "会议"]
            .iter()
            .map(|&word| (hash(word), word))
            .collect();
        let mut wanted = vec![hash("香港"), hash("北京"), hash("澳门")];
        wanted.sort_unstable();
        for (hash_of, word) in words_of(&wanted, &spoken) {
            let expected = ["香港", "北京"].into_iter().find(|&w| hash(w) == hash_of);
            assert_eq!(word, expected);
        }
    }

    #[test]
    fn a_word_of_the_source_is_no_name_of_its_text_however_long_or_written() {
        let hash = |word: &str| xxhash_rust::xxh3::xxh3_64(word.as_bytes());
        let spoken = |words: &[&'static str]| -> Vec<(u64, &'static str)> {
            words.iter().map(|&word| (hash(word), word)).collect()
        };
        let counts = vec![(hash("广州"), 5), (hash("北京"), 3)];
        let said = spoken(&["广州", "北京"]);
        let kept = |names: Names| -> Vec<(u64, u32)> { names.iter().collect() };
        let of_guangzhou = [(hash("广州"), 0), (hash("北京"), 3)];
        // The text's words are normalised: a source in traditional characters names them too.
        let names = Names::of_counts(counts.clone(), Some("廣州網"), &said);
        assert_eq!(kept(names), of_guangzhou);
        // Wherever the source says it, however long the source.
        let long = format!("{}广州台", "某".repeat(100));
        assert_eq!(
            kept(Names::of_counts(counts.clone(), Some(&long), &said)),
            of_guangzhou
        );
        let elsewhere = Names::of_counts(counts.clone(), Some("澳门网"), &said);
        assert_eq!(kept(elsewhere), counts);
        // A name of twenty characters (a word jieba's model put together) in its source.
        let name = "钱其琛布赫马西钱其琛布赫马西钱其琛布赫马西";
        let source = format!("{name}网");
        let names = Names::of_counts(vec![(hash(name), 2)], Some(&source), &spoken(&[name]));
        assert_eq!(kept(names), [(hash(name), 0)]);
    }

    #[test]
    fn only_repeated_names_are_kept_and_the_most_repeated_first() {
        let words = ["北京", "香港", "会议", "澳门", "钱其琛"];
        let hash = |word: &str| xxhash_rust::xxh3::xxh3_64(word.as_bytes());
        let counts = vec![
            (hash("北京"), 2),
            (hash("香港"), 1),
            (hash("会议"), 9),
            (hash("澳门"), 5),
            (hash("钱其琛"), 5),
        ];
        let spoken: Vec<(u64, &str)> = words.iter().map(|&word| (hash(word), word)).collect();
        let names = Names::of_counts(counts.clone(), None, &spoken);
        let kept: Vec<u32> = names.iter().map(|(_, count)| count).collect();
        assert_eq!(kept, [5, 5, 2]);
        assert!(names.is_complete());
        // A page of 北京网 names its site: that is no name of its text.
        let names = Names::of_counts(counts, Some("北京网"), &spoken);
        let kept: Vec<u32> = names.iter().map(|(_, count)| count).collect();
        assert_eq!(kept, [5, 5, 0]);
        let places = [
            "北京", "上海", "天津", "重庆", "广州", "深圳", "杭州", "南京", "武汉", "成都", "西安",
            "长沙",
        ];
        let many: Vec<(u64, u32)> = places.iter().map(|place| (hash(place), 3)).collect();
        let spoken: Vec<(u64, &str)> = places.iter().map(|&place| (hash(place), place)).collect();
        let names = Names::of_counts(many, None, &spoken);
        assert_eq!(names.iter().count(), MAX_NAMES);
        assert!(!names.is_complete());
    }
}
