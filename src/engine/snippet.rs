//! Snippets: a short piece of a document's stored text around the first words the query
//! matched, those words wrapped in `<em>…</em>` and everything else HTML-escaped, so a page
//! can insert it as HTML as it is. A cut is marked with `…` at the end it is made.
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

/// The words a query looks for in each text field, and the snippets they make.
///
/// ```
/// use tantivy::query::TermQuery;
/// use tantivy::schema::{IndexRecordOption, Schema, TEXT};
/// use tantivy::Term;
/// use tantivy_dedup::engine::Highlighter;
///
/// let mut builder = Schema::builder();
/// let content = builder.add_text_field("content", TEXT);
/// let query = TermQuery::new(Term::from_field_text(content, "cctv"), IndexRecordOption::Basic);
/// let highlighter = Highlighter::new(&query);
/// let snippet = highlighter.snippet(&[(content, "<b>ＣＣＴＶ</b>报道：A&amp;B<3")]).unwrap();
/// assert_eq!(snippet, "<em>ＣＣＴＶ</em>报道：A&amp;B&lt;3");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Highlighter {
    /// Per field, the words (token texts) its terms in the query hold.
    words: Vec<(Field, HashSet<String>)>,
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
        Highlighter { words }
    }

    /// The snippet of the first of `texts` (a field and its stored raw text) in which a word
    /// of the query occurs, or, when none has one, the start of the last non-empty text
    /// without marks; `None` when every text is empty.
    pub fn snippet(&self, texts: &[(Field, &str)]) -> Option<String> {
        for &(field, raw) in texts {
            let Some((_, words)) = self.words.iter().find(|(of, _)| *of == field) else {
                continue;
            };
            let shown = readable(raw);
            let matches = matches(&shown, words);
            if !matches.is_empty() {
                return Some(render(&shown, &matches));
            }
        }
        let (_, raw) = texts.iter().rev().find(|(_, raw)| !raw.trim().is_empty())?;
        Some(lead(raw))
    }
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
    let boundaries: Vec<usize> = raw
        .char_indices()
        .map(|(at, _)| at)
        .chain(std::iter::once(raw.len()))
        .collect();
    let chars = boundaries.len() - 1;
    // The window, in characters: a little before the first match, then as much of the rest
    // as fits, moved back when the text ends first.
    let first = matches.first().map_or(0, |first| {
        boundaries.partition_point(|&at| at < first.start)
    });
    let start = first
        .saturating_sub(CHARS_BEFORE)
        .min(chars.saturating_sub(SNIPPET_CHARS));
    let end = (start + SNIPPET_CHARS).min(chars);
    let (start, mut end) = (boundaries[start], boundaries[end]);
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
    escape_into(&mut out, &raw[at..end.max(at)]);
    if end.max(at) < raw.len() {
        out.push_str(CUT);
    }
    out
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
}
