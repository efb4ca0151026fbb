//! The tokenizer registered on every news index: the fingerprint's normalisation, then jieba in
//! search mode; and the hand-over that lets the writer's documents be indexed from the tokens
//! the insert path already computed.
//!
//! **Why a hand-over.** The insert path splits each text into words once, for the fingerprint and the
//! index together. Tantivy's way to take ready tokens is a pre-tokenized value, but Tantivy
//! copies those tokens (one string each) several times per document, which costs more than
//! splitting again. So a writer document's text value carries its [`AnalyzedText`] and
//! offers it, just before Tantivy tokenizes that very text on the same thread, through a
//! thread-local slot ([`offer`]); [`NewsTokenizer`] takes it when the text matches (same
//! address, length and hash) and streams its spans without allocating. When nothing matches
//! (queries, or a Tantivy version that reads values in another order) the tokenizer analyses
//! the text itself and produces the very same tokens, so the hand-over can only save time,
//! never change what is indexed.

use std::cell::RefCell;
use std::sync::Arc;

use tantivy::Index;
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};
use xxhash_rust::xxh3::xxh3_64;

use crate::engine::schema::TOKENIZER;
use crate::text::AnalyzedText;

/// An analysis on offer for one text: the text's address, length and hash, and its tokens.
struct Offer {
    address: usize,
    length: usize,
    hash: u64,
    analysis: Arc<AnalyzedText>,
}

thread_local! {
    static OFFER: RefCell<Option<Offer>> = const { RefCell::new(None) };
}

/// Offers the analysis of `raw` to the next [`NewsTokenizer::token_stream`] call on this
/// thread, which takes it if it is asked to tokenize this same text.
pub(crate) fn offer(raw: &str, analysis: &Arc<AnalyzedText>) {
    OFFER.with(|slot| {
        *slot.borrow_mut() = Some(Offer {
            address: raw.as_ptr() as usize,
            length: raw.len(),
            hash: analysis.raw_hash(),
            analysis: Arc::clone(analysis),
        });
    });
}

/// The analysis on offer, if it is that of `text`.
fn take_offer(text: &str) -> Option<Arc<AnalyzedText>> {
    let offer = OFFER.with(|slot| slot.borrow_mut().take())?;
    (offer.address == text.as_ptr() as usize
        && offer.length == text.len()
        && offer.hash == xxh3_64(text.as_bytes()))
    .then_some(offer.analysis)
}

/// Normalises text as the fingerprint does (NFKC, markup removed, ASCII lower-cased,
/// traditional characters simplified, white space folded), then splits it into words with jieba
/// in search mode ([`search_tokens`](crate::text::search_tokens)).
///
/// Token offsets are byte offsets into the raw text given, so that whatever shows raw text by
/// tokens (a snippet, Tantivy's `SnippetGenerator`) marks the right characters: a word that
/// normalisation folded from full-width letters, decoded from an entity or lower-cased covers
/// its raw form. The one exception is the writer's hand-over (see the module documentation):
/// Tantivy's indexer reads only a token's text and position (0.27 stores no offsets), so the
/// analysis handed over skips the map and its offsets are those of the normalised text.
///
/// ```
/// use tantivy::tokenizer::{TokenStream, Tokenizer};
/// use tantivy_dedup::engine::NewsTokenizer;
///
/// let raw = "ＣＣＴＶ&amp;新闻联播";
/// let mut tokenizer = NewsTokenizer;
/// let mut stream = tokenizer.token_stream(raw);
/// let mut words = Vec::new();
/// while let Some(token) = stream.next() {
///     words.push((token.text.clone(), &raw[token.offset_from..token.offset_to]));
/// }
/// assert_eq!(words[0], ("cctv".to_owned(), "ＣＣＴＶ"));
/// assert!(words.contains(&("新闻联播".to_owned(), "新闻联播")));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NewsTokenizer;

impl Tokenizer for NewsTokenizer {
    type TokenStream<'a> = NewsTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> NewsTokenStream {
        let analysis =
            take_offer(text).unwrap_or_else(|| Arc::new(AnalyzedText::with_raw_offsets(text)));
        NewsTokenStream {
            analysis,
            next: 0,
            token: Token::default(),
        }
    }
}

/// The tokens of one text, copied one at a time into a reused [`Token`].
pub struct NewsTokenStream {
    analysis: Arc<AnalyzedText>,
    next: usize,
    token: Token,
}

impl TokenStream for NewsTokenStream {
    fn advance(&mut self) -> bool {
        let Some((word, span)) = self.analysis.token(self.next) else {
            return false;
        };
        self.next += 1;
        self.token.text.clear();
        self.token.text.push_str(word);
        let raw = self.analysis.raw_range(span);
        self.token.offset_from = raw.start;
        self.token.offset_to = raw.end;
        self.token.position = span.position as usize;
        self.token.position_length = span.length as usize;
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// Registers [`NewsTokenizer`] on `index` (Tantivy does not persist tokenizers, so this runs on
/// every open).
pub fn register(index: &Index) {
    index
        .tokenizers()
        .register(TOKENIZER, TextAnalyzer::from(NewsTokenizer));
}
