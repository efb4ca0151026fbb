//! Text normalisation: what two copies of one article differ in without differing in content.
//!
//! HTML markup (tags, comments, script and style bodies) is removed and entities decoded; Unicode
//! NFKC folds full-width letters, digits and punctuation to their ordinary forms; ASCII letters are
//! lower-cased; zero-width characters are dropped; runs of white space fold to one space, or to
//! one line break when they contain one, and disappear next to CJK text, where spaces are layout,
//! not word boundaries.

use std::borrow::Cow;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// Normalises `text` for fingerprinting (see the module documentation).
///
/// ```
/// use tantivy_dedup::text::normalize;
///
/// assert_eq!(normalize("<p>新闻&nbsp;联播</p>"), normalize("新闻联播"));
/// assert_eq!(normalize("ＡＢＣ，１２３！"), "abc,123!");
/// assert_eq!(normalize("  Hello \t World \n\n 第二段 "), "hello world\n第二段");
/// ```
pub fn normalize(text: &str) -> String {
    let unescaped = undo_literal_escapes(text);
    let without_markup = strip_markup(&unescaped);
    // One pass for the text news is made of; the full NFKC pass only when it needs one.
    fold_common(&without_markup).unwrap_or_else(|| fold_case_and_space(&nfkc(&without_markup)))
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

/// NFKC, case and space folding in one pass, for text whose every character is NFKC-stable or
/// a full-width form (what `nfkc` maps directly); `None` for other text.
fn fold_common(text: &str) -> Option<String> {
    let mut folder = Folder::with_capacity(text.len());
    for c in text.chars() {
        folder.push(width_fold(c)?);
    }
    Some(folder.out)
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
fn undo_literal_escapes(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find('\\') {
        out.push_str(&rest[..position]);
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
        match replacement {
            Some(c) => out.push(c),
            None => out.push_str(&rest[position..position + backslashes]),
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Removes tags, comments and script/style elements; decodes entities. Borrows when there is
/// nothing to do.
fn strip_markup(text: &str) -> Cow<'_, str> {
    if !text.contains(['<', '&']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(position) = rest.find(['<', '&']) {
        out.push_str(&rest[..position]);
        rest = &rest[position..];
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
            Some(len) => rest = &rest[len..],
            // Not markup after all: the '<' or '&' (one byte) is text.
            None => {
                out.push_str(&rest[..1]);
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
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
fn fold_case_and_space(text: &str) -> String {
    let mut folder = Folder::with_capacity(text.len());
    text.chars().for_each(|c| folder.push(c));
    folder.out
}

/// The case and space folding, one character at a time.
struct Folder {
    out: String,
    /// The white space waiting to be written: None, a space, or a line break.
    pending: Option<char>,
}

impl Folder {
    fn with_capacity(capacity: usize) -> Self {
        Folder {
            out: String::with_capacity(capacity),
            pending: None,
        }
    }

    #[inline]
    fn push(&mut self, c: char) {
        // CJK ideographs first: most of the text, and none of the cases below.
        if !matches!(c, '\u{4e00}'..='\u{9fff}') {
            if is_zero_width(c) {
                return;
            }
            if c.is_whitespace() || c.is_control() {
                if c == '\n' || c == '\r' || c == '\u{2029}' {
                    self.pending = Some('\n');
                } else if self.pending.is_none() {
                    self.pending = Some(' ');
                }
                return;
            }
        }
        if let Some(space) = self.pending.take() {
            let out = &mut self.out;
            let previous_is_ascii = out.as_bytes().last().is_some_and(u8::is_ascii);
            if space == '\n' && !out.is_empty() {
                out.push('\n');
            } else if !out.is_empty() && previous_is_ascii && c.is_ascii() {
                out.push(' ');
            }
        }
        self.out.push(c.to_ascii_lowercase());
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
            if let Some(fast) = fold_common(&text) {
                proptest::prop_assert_eq!(fast, fold_case_and_space(&full));
            }
        }
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
