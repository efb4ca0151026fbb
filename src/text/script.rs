//! Traditional characters folded to simplified ones, so that 高鐵 and 高铁 are one word to the
//! search index and to the fingerprint.
//!
//! The fold is one character to one character, with no context: what a reader of either script
//! would take for the same character. It comes from fast2s's table, read once per process,
//! less the characters that the simplified standard's own character set (GB2312) holds: those
//! are written in simplified text as they are (捍卫, 呵呵, 大阪, 磐石, 乾隆), and folding
//! them would only split jieba's words. Six of those are kept in the fold all the same, since
//! traditional text writes them everywhere and simplified text almost never (後, 於, 麽, 徵,
//! 夥, 菸).
//!
//! Whatever the fold maps, it maps alike on both sides (the indexed text and the query, the two
//! texts compared), so a fold that a linguist would call wrong still finds and compares
//! correctly; a character left alone costs only that the two scripts do not meet on it.

use std::sync::LazyLock;

/// The first and last character the table covers: CJK Extension A and the unified ideographs,
/// where every traditional character of fast2s's table lies.
const FIRST: u32 = 0x3400;
const LAST: u32 = 0x9fff;

/// Characters of GB2312 that are folded all the same (see the module documentation).
const FOLDED_ANYWAY: &str = "後於麽徵夥菸";

/// The fold of every character from [`FIRST`] to [`LAST`], built on first use.
static TABLE: LazyLock<Table> = LazyLock::new(Table::build);

/// Which characters fold, and to what.
struct Table {
    /// One bit per character from `FIRST`, set when it folds: 3.4 KiB, which stays in the
    /// first-level cache, so that simplified text (nearly all of it unfolded) pays one bit test
    /// a character.
    folds: Box<[u64]>,
    /// The simplified form of each character, indexed by its offset from `FIRST` (itself when
    /// it does not fold). Every simplified form lies in the Basic Multilingual Plane, so 16 bits
    /// hold it.
    simplified: Box<[u16]>,
}

impl Table {
    fn build() -> Self {
        let simplified: Box<[u16]> = (FIRST..=LAST)
            .map(|code| {
                let Some(c) = char::from_u32(code) else {
                    return code as u16;
                };
                let converted = fast2s::convert(c.encode_utf8(&mut [0; 4]));
                let mut folded = converted.chars();
                match (folded.next(), folded.next()) {
                    (Some(simple), None)
                        if simple != c
                            && u16::try_from(simple as u32).is_ok()
                            && (!in_gb2312(c) || FOLDED_ANYWAY.contains(c)) =>
                    {
                        simple as u16
                    }
                    _ => code as u16,
                }
            })
            .collect();
        let mut folds = vec![0u64; simplified.len().div_ceil(64)].into_boxed_slice();
        for (offset, &simple) in simplified.iter().enumerate() {
            if u32::from(simple) != FIRST + offset as u32 {
                folds[offset / 64] |= 1 << (offset % 64);
            }
        }
        Table { folds, simplified }
    }
}

/// Whether `c` is one of GB2312's hanzi: its GBK code lies in GB2312's two levels of
/// characters (lead byte 0xB0-0xF7, trail byte 0xA1-0xFE).
fn in_gb2312(c: char) -> bool {
    let mut utf8 = [0; 4];
    let (bytes, _, unmappable) = encoding_rs::GBK.encode(c.encode_utf8(&mut utf8));
    !unmappable
        && bytes.len() == 2
        && (0xb0..=0xf7).contains(&bytes[0])
        && (0xa1..=0xfe).contains(&bytes[1])
}

/// The fold's table, for a loop over many characters (one lookup of the lazily built table
/// instead of one per character).
#[derive(Clone, Copy)]
pub(crate) struct Simplifier(&'static Table);

impl Simplifier {
    /// The table, built on the first call in the process.
    pub(crate) fn new() -> Self {
        Simplifier(&TABLE)
    }

    /// The simplified form of `c`, or `c` itself.
    #[inline]
    pub(crate) fn fold(self, c: char) -> char {
        let code = c as u32;
        if !(FIRST..=LAST).contains(&code) {
            return c;
        }
        let offset = (code - FIRST) as usize;
        if self.0.folds[offset / 64] & (1 << (offset % 64)) == 0 {
            return c;
        }
        char::from_u32(u32::from(self.0.simplified[offset])).unwrap_or(c)
    }
}

/// The simplified form of a traditional character; any other character unchanged.
///
/// One character to one, with no context, from fast2s's table, less the characters of GB2312
/// (the simplified standard's own set), which simplified text writes as they are: 捍卫, 呵呵,
/// 大阪, 乾隆 stay. Six of those fold all the same, since traditional text writes them
/// everywhere and simplified text almost never: 後 於 麽 徵 夥 菸.
///
/// ```
/// use tantivy_dedup::text::simplified;
///
/// let folded: String = "高鐵開通後，臺灣的旅客說".chars().map(simplified).collect();
/// assert_eq!(folded, "高铁开通后，台湾的旅客说");
/// // Characters of the simplified standard stay as written.
/// let kept: String = "捍卫乾隆呵呵".chars().map(simplified).collect();
/// assert_eq!(kept, "捍卫乾隆呵呵");
/// ```
pub fn simplified(c: char) -> char {
    Simplifier::new().fold(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplified_text_stays_as_written() {
        let text = "中华人民共和国国务院新闻办公室今天举行发布会，介绍高铁建设和经济发展情况。";
        assert_eq!(text.chars().map(simplified).collect::<String>(), text);
    }

    #[test]
    fn the_fold_is_one_character_to_one_of_the_same_width() {
        let table = Simplifier::new();
        let mut folded = 0;
        for code in FIRST..=LAST {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            let simple = table.fold(c);
            assert_eq!(simple.len_utf8(), c.len_utf8(), "{c} folds to {simple}");
            if simple != c {
                folded += 1;
                // Folding twice changes nothing more.
                assert_eq!(table.fold(simple), simple, "{c} -> {simple} folds again");
            }
        }
        assert!(folded > 2_000, "only {folded} characters fold");
    }
}
