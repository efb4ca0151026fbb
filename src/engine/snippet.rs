//! Snippets and highlights: a short piece of a document's stored text around the first words
//! the query matched (the snippet), or, per text field, several pieces around its matches in
//! text order (the highlights: Elasticsearch's fragments), those words wrapped in
//! `<em>…</em>` and everything else HTML-escaped, so a page can insert them as HTML as they
//! are. A cut is marked with `…` at the end it is made.
//!
//! The text shown is the raw text as a reader sees it ([`readable`]: markup removed, entities
//! decoded, white space folded); the words are found by analysing it as the index does
//! ([`AnalyzedText`], the tokens [`NewsTokenizer`](crate::engine::NewsTokenizer) gives) with
//! the map back to it, so a word normalisation changed (full-width letters, upper case) is
//! marked in its written form.

use std::collections::HashSet;
use std::ops::Range;

use tantivy::query::Query;
use tantivy::schema::Field;

use crate::text::{AnalyzedText, readable};

/// About how many characters of raw text a snippet shows: a little before the first match,
/// the rest after it (a match that straddles the end is shown whole).
pub const SNIPPET_CHARS: usize = 160;

/// How many characters a snippet shows before its first match, when there are that many.
const CHARS_BEFORE: usize = 20;

/// How many fragments of a field [`Highlighter::mark`] gives unless told otherwise.
pub const DEFAULT_FRAGMENTS: usize = 3;

/// The most fragments of a field a request may ask for.
pub const MAX_FRAGMENTS: usize = 10;

/// About how many characters a fragment shows unless told otherwise.
pub const DEFAULT_FRAGMENT_CHARS: usize = 100;

/// The range of fragment lengths a request may ask for, characters.
pub const FRAGMENT_CHARS: std::ops::RangeInclusive<usize> = 20..=1000;

/// The words a query looks for in each text field, and the snippets and highlights they make.
///
/// ```
/// use tantivy::query::TermQuery;
/// use tantivy::schema::{IndexRecordOption, Schema, TEXT};
/// use tantivy::Term;
/// use tantivy_dedup::engine::{FieldText, Highlighter};
///
/// let mut builder = Schema::builder();
/// let content = builder.add_text_field("content", TEXT);
/// let query = TermQuery::new(Term::from_field_text(content, "cctv"), IndexRecordOption::Basic);
/// let highlighter = Highlighter::new(&query);
/// let text = FieldText { name: "content", field: content, raw: "<b>ＣＣＴＶ</b>报道：A&amp;B<3", whole: false };
/// let marks = highlighter.mark(&[text]);
/// assert_eq!(marks.snippet.unwrap(), "<em>ＣＣＴＶ</em>报道：A&amp;B&lt;3");
/// ```
#[derive(Debug, Clone)]
pub struct Highlighter {
    /// Per field, the words (token texts) its terms in the query hold.
    words: Vec<(Field, HashSet<String>)>,
    /// How many fragments [`mark`](Self::mark) gives a field, at most.
    fragments: usize,
    /// About how many characters a fragment shows.
    fragment_chars: usize,
}

impl Highlighter {
    /// The words of every text term of `query` (of any occurrence: a phrase's, a required or
    /// an optional word's).
    pub fn new(query: &dyn Query) -> Self {
        let mut words: Vec<(Field, HashSet<String>)> = Vec::new();
        query.query_terms(&mut |term, _| {
            let value = term.value();
            let Some(word) = value.as_str() else {
                return;
            };
            let field = term.field();
            match words.iter_mut().find(|(of, _)| *of == field) {
                Some((_, set)) => {
                    set.insert(word.to_owned());
                }
                None => words.push((field, HashSet::from([word.to_owned()]))),
            }
        });
        Highlighter {
            words,
            fragments: DEFAULT_FRAGMENTS,
            fragment_chars: DEFAULT_FRAGMENT_CHARS,
        }
    }

    /// Whether [`mark`](Self::mark) gives fragments (else the snippet alone).
    pub fn gives_fragments(&self) -> bool {
        self.fragments > 0
    }

    /// Gives [`mark`](Self::mark) at most `count` fragments a field (0: none, the snippet
    /// only), each of about `chars` characters.
    pub fn fragments(mut self, count: usize, chars: usize) -> Self {
        self.fragments = count;
        self.fragment_chars = chars.max(1);
        self
    }

    /// What the query's words mark in `texts`, each read and analysed once:
    /// - the snippet: of the first text in which a word of the query occurs, or, when none has
    ///   one, the start of the last non-empty text without marks (`None` when every text is
    ///   empty);
    /// - the highlights: per text with a match, its fragments in text order, each starting a
    ///   little before a match that no earlier fragment shows and running about the fragment
    ///   length; a [`whole`](FieldText::whole) text (a title) as one fragment, all of it.
    ///   Texts without a match are left out, as Elasticsearch leaves them out; with
    ///   [`fragments`](Self::fragments) of 0 there are none, and the texts after the first
    ///   match are not read (the snippet alone).
    ///
    /// ```
    /// use tantivy::query::TermQuery;
    /// use tantivy::schema::{IndexRecordOption, Schema, TEXT};
    /// use tantivy::Term;
    /// use tantivy_dedup::engine::{FieldText, Highlighter};
    ///
    /// let mut builder = Schema::builder();
    /// let title = builder.add_text_field("title", TEXT);
    /// let content = builder.add_text_field("content", TEXT);
    /// let query = TermQuery::new(Term::from_field_text(content, "防汛"), IndexRecordOption::Basic);
    /// let body = format!("今年防汛形势严峻。{}各地防汛物资已就位。", "气象部门发布预警，".repeat(12));
    /// let texts = [
    ///     FieldText { name: "title", field: title, raw: "防汛动员会召开", whole: true },
    ///     FieldText { name: "content", field: content, raw: &body, whole: false },
    /// ];
    /// let marks = Highlighter::new(&query).fragments(3, 30).mark(&texts);
    /// assert_eq!(marks.highlights.len(), 1); // the query looks for 防汛 in the body only
    /// let fragments = &marks.highlights["content"];
    /// assert_eq!(fragments.len(), 2);
    /// assert!(fragments[0].starts_with("今年<em>防汛</em>形势严峻") && fragments[0].ends_with('…'));
    /// assert!(fragments[1].starts_with('…') && fragments[1].contains("各地<em>防汛</em>物资已就位。"));
    /// assert!(marks.snippet.unwrap().starts_with("今年<em>防汛</em>形势严峻"));
    /// ```
    pub fn mark(&self, texts: &[FieldText<'_>]) -> Marks {
        let mut marks = Marks::default();
        for text in texts {
            let Some((_, words)) = self.words.iter().find(|(of, _)| *of == text.field) else {
                continue;
            };
            let shown = readable(text.raw);
            let matches = matches(&shown, words);
            if matches.is_empty() {
                continue;
            }
            if marks.snippet.is_none() {
                marks.snippet = Some(render(&shown, &matches));
            }
            if self.fragments == 0 {
                break;
            }
            let fragments = match text.whole {
                true => fragments(&shown, &matches, 1, shown.len()),
                false => fragments(&shown, &matches, self.fragments, self.fragment_chars),
            };
            marks.highlights.insert(text.name.to_owned(), fragments);
        }
        if marks.snippet.is_none() {
            marks.snippet = texts
                .iter()
                .rev()
                .find(|text| !text.raw.trim().is_empty())
                .map(|text| lead(text.raw));
        }
        marks
    }
}

/// A text that [`Highlighter::mark`] reads.
#[derive(Debug, Clone, Copy)]
pub struct FieldText<'a> {
    /// The name its highlights go under.
    pub name: &'a str,
    /// The field whose words of the query are looked for in it.
    pub field: Field,
    /// The stored raw text.
    pub raw: &'a str,
    /// Whether its highlight is all of it, as one fragment (a title), rather than fragments.
    pub whole: bool,
}

/// What [`Highlighter::mark`] finds in a document's texts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// One piece of about [`SNIPPET_CHARS`] characters around the first match.
    pub snippet: Option<String>,
    /// Per text with a match, by name, its fragments in text order.
    pub highlights: std::collections::BTreeMap<String, Vec<String>>,
}

/// The start of `raw` as a reader sees it, about [`SNIPPET_CHARS`] characters, HTML-escaped:
/// a snippet without a query (the story view's members).
pub(crate) fn lead(raw: &str) -> String {
    render(&readable(raw), &[])
}

/// The raw byte ranges of `raw`'s tokens that are among `words`, in order, overlapping ones
/// (a word and a sub-word of it) joined.
fn matches(raw: &str, words: &HashSet<String>) -> Vec<Range<usize>> {
    let analyzed = AnalyzedText::with_raw_offsets(raw);
    let mut ranges: Vec<Range<usize>> = analyzed
        .tokens()
        .filter(|(word, _)| words.contains(*word))
        .map(|(_, span)| analyzed.raw_range(span))
        .filter(|range| !range.is_empty())
        .collect();
    ranges.sort_unstable_by_key(|range| (range.start, range.end));
    let mut joined: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match joined.last_mut() {
            Some(last) if range.start < last.end => last.end = last.end.max(range.end),
            _ => joined.push(range),
        }
    }
    joined
}

/// About [`SNIPPET_CHARS`] characters of `raw` from a little before the first match, each
/// match in `<em>`, the rest HTML-escaped, `…` where the text goes on.
fn render(raw: &str, matches: &[Range<usize>]) -> String {
    let boundaries = char_boundaries(raw);
    let chars = boundaries.len() - 1;
    // The window, in characters: a little before the first match, then as much of the rest
    // as fits, moved back when the text ends first.
    let first = matches.first().map_or(0, |first| {
        boundaries.partition_point(|&at| at < first.start)
    });
    let start = first
        .saturating_sub(CHARS_BEFORE)
        .min(chars.saturating_sub(SNIPPET_CHARS));
    window(raw, &boundaries, matches, start, SNIPPET_CHARS).0
}

/// Up to `count` windows of about `size` characters of `raw`, in text order, each starting a
/// little before the first match the windows before it do not show (and never before their
/// end); none when there is no match.
fn fragments(raw: &str, matches: &[Range<usize>], count: usize, size: usize) -> Vec<String> {
    let boundaries = char_boundaries(raw);
    let chars = boundaries.len() - 1;
    let before = CHARS_BEFORE.min(size / 5);
    let mut fragments = Vec::new();
    // The first character the next window may show, and the first match it must show.
    let (mut floor, mut next) = (0, 0);
    while fragments.len() < count && next < matches.len() {
        let first = boundaries.partition_point(|&at| at < matches[next].start);
        let start = first
            .saturating_sub(before)
            .min(chars.saturating_sub(size))
            .max(floor);
        let (fragment, end) = window(raw, &boundaries, matches, start, size);
        fragments.push(fragment);
        floor = boundaries.partition_point(|&at| at < end);
        next = matches.partition_point(|range| range.start < end);
    }
    fragments
}

/// The byte offset of each character of `raw`, and its length.
fn char_boundaries(raw: &str) -> Vec<usize> {
    raw.char_indices()
        .map(|(at, _)| at)
        .chain(std::iter::once(raw.len()))
        .collect()
}

/// The `size` characters of `raw` from character `start` (a match cut by the end shown
/// whole), each match in `<em>`, the rest HTML-escaped, `…` at a cut end; and the byte
/// offset where the window ends.
fn window(
    raw: &str,
    boundaries: &[usize],
    matches: &[Range<usize>],
    start: usize,
    size: usize,
) -> (String, usize) {
    let chars = boundaries.len() - 1;
    let end = (start + size).min(chars);
    let (start, mut end) = (boundaries[start.min(chars)], boundaries[end]);
    // A match cut by the end is shown whole.
    if let Some(cut) = matches
        .iter()
        .find(|range| range.start < end && range.end > end)
    {
        end = cut.end;
    }
    let mut out = String::with_capacity((end - start) * 2 + 2 * CUT.len());
    if start > 0 {
        out.push_str(CUT);
    }
    let mut at = start;
    for range in matches
        .iter()
        .filter(|range| range.start >= start && range.start < end)
    {
        escape_into(&mut out, &raw[at..range.start]);
        out.push_str("<em>");
        escape_into(&mut out, &raw[range.clone()]);
        out.push_str("</em>");
        at = range.end;
    }
    let end = end.max(at);
    escape_into(&mut out, &raw[at..end]);
    if end < raw.len() {
        out.push_str(CUT);
    }
    (out, end)
}

/// What marks a cut: the text goes on beyond it.
const CUT: &str = "…";

/// Appends `text` with `&`, `<`, `>`, `"` and `'` escaped.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> HashSet<String> {
        list.iter().map(|word| (*word).to_owned()).collect()
    }

    fn snippet(raw: &str, list: &[&str]) -> String {
        let shown = readable(raw);
        render(&shown, &matches(&shown, &words(list)))
    }

    /// The snippet without its marks, unescaped back.
    fn plain(snippet: &str) -> String {
        snippet
            .replace("<em>", "")
            .replace("</em>", "")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    #[test]
    fn marks_raw_forms_of_normalised_words() {
        assert_eq!(
            snippet("国家统计局&nbsp;发布ＧＤＰ数据", &["gdp"]),
            "国家统计局发布<em>ＧＤＰ</em>数据"
        );
        // A word and its sub-word (search mode) make one mark.
        assert_eq!(
            snippet("中华人民共和国成立", &["中华人民共和国", "人民"]),
            "<em>中华人民共和国</em>成立"
        );
        // An entity-decoded word is marked as its entities.
        // Entities are shown decoded, markup not at all.
        assert_eq!(
            snippet("&#20013;&#x56fd;队夺冠", &["中国"]),
            "<em>中国</em>队夺冠"
        );
        assert_eq!(
            snippet("<p>Hello World</p>", &["world"]),
            "Hello <em>World</em>"
        );
    }

    #[test]
    fn the_window_starts_a_little_before_the_first_match() {
        let raw = format!("{}防汛{}", "甲".repeat(300), "乙".repeat(300));
        let shown = snippet(&raw, &["防汛"]);
        // Cut at both ends, and marked so.
        let inner = shown
            .strip_prefix(CUT)
            .and_then(|rest| rest.strip_suffix(CUT))
            .unwrap_or_else(|| panic!("{shown}"));
        assert!(inner.starts_with(&"甲".repeat(CHARS_BEFORE)), "{shown}");
        assert_eq!(plain(inner).chars().count(), SNIPPET_CHARS);
        assert!(raw.contains(&plain(inner)));
        // Near the end, the window moves back to show as much: cut at the start only.
        let raw = format!("{}防汛", "甲".repeat(300));
        let shown = snippet(&raw, &["防汛"]);
        assert!(
            shown.starts_with(CUT) && shown.ends_with("</em>"),
            "{shown}"
        );
        assert_eq!(plain(&shown).chars().count(), SNIPPET_CHARS + 1);
        // From the start: cut at the end only.
        let raw = format!("防汛{}", "乙".repeat(300));
        let shown = snippet(&raw, &["防汛"]);
        assert!(shown.starts_with("<em>") && shown.ends_with(CUT), "{shown}");
        // Short texts are shown whole; no match: the start.
        assert_eq!(snippet("短文", &["防汛"]), "短文");
        assert_eq!(snippet("", &["防汛"]), "");
    }

    /// Fragments in text order never overlap, each shows a match no earlier one shows, all
    /// matches are shown when there are enough fragments, and their text is the raw text's.
    #[test]
    fn fragments_show_each_match_once_in_text_order() {
        let raw = format!(
            "防汛{}防汛防汛{}防汛{}防汛",
            "甲".repeat(30),
            "乙".repeat(200),
            "丙".repeat(5)
        );
        let words = words(&["防汛"]);
        let found = matches(&raw, &words);
        assert_eq!(found.len(), 5);
        for (count, size) in [(10, 40), (2, 40), (1, 10), (10, 1000), (10, 2)] {
            let shown = fragments(&raw, &found, count, size);
            let marks: usize = shown.iter().map(|part| part.matches("<em>").count()).sum();
            assert!(shown.len() <= count, "{shown:?}");
            let pieces: Vec<String> = shown
                .iter()
                .map(|part| plain(part).trim_matches('…').to_owned())
                .collect();
            let mut from = 0;
            for piece in &pieces {
                let at = raw[from..].find(piece.as_str()).map(|at| at + from);
                assert!(at.is_some(), "{piece} after {from} ({shown:?})");
                from = at.unwrap_or(0) + piece.len();
            }
            if shown.len() < count {
                assert_eq!(marks, 5, "({count}, {size}): {shown:?}");
            }
        }
        // A text shorter than a fragment is one fragment, whole; no match, none.
        assert_eq!(
            fragments("今年防汛形势", &matches("今年防汛形势", &words), 3, 100),
            ["今年<em>防汛</em>形势"]
        );
        assert!(fragments("今年形势", &[], 3, 100).is_empty());
    }
}
