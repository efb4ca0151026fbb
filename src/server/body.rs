//! Reading a POST body of documents: a JSON array, a single JSON object, or NDJSON (one object
//! a line). The body as a whole can be refused (not JSON at all, too many documents); after
//! that each document stands or falls on its own, so one bad document never costs the others.

use crate::article::{Article, ArticleError, ArticleReader, ArticleRecord};
use crate::forest::Timestamp;
use crate::input::split_documents;

/// The limits a batch is read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most documents in one body.
    pub max_documents: usize,
    /// Largest document, in bytes of its JSON.
    pub max_document_bytes: usize,
    /// Latest `published_at` accepted (Unix seconds).
    pub latest_time: Timestamp,
}

/// Why a whole body was refused (the split is the library's: [`split_documents`]).
pub use crate::input::BodyError;

impl BodyError {
    /// The HTTP status that fits the error: 413 for too many documents, 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooManyDocuments { .. } => 413,
            _ => 400,
        }
    }

    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            BodyError::TooManyDocuments { .. } => "batch_too_large",
            _ => "invalid_body",
        }
    }
}

/// Why one document of a batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// Not a valid article (the message says which field and what to fix).
    #[error(transparent)]
    Invalid(#[from] ArticleError),
    /// Larger than the document limit.
    #[error("the document is {found} bytes; at most {limit} are accepted")]
    TooLarge {
        /// Its size.
        found: usize,
        /// The limit.
        limit: usize,
    },
    /// Dated too far after the server's clock.
    #[error(
        "field `published_at` is {ahead} ahead of the server's clock; at most {allowed} is accepted (is the time zone right?)"
    )]
    InFuture {
        /// How far ahead, for people.
        ahead: String,
        /// The allowance, for people.
        allowed: String,
    },
}

impl DocumentError {
    /// The HTTP status that fits the error: 413 for size, 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            DocumentError::TooLarge { .. } => 413,
            _ => 400,
        }
    }

    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            DocumentError::TooLarge { .. } => "document_too_large",
            DocumentError::InFuture { .. } => "invalid_date",
            DocumentError::Invalid(ArticleError::Json(_) | ArticleError::Utf8(_)) => "invalid_json",
            DocumentError::Invalid(ArticleError::Missing(_)) => "missing_field",
            DocumentError::Invalid(_) => "invalid_field",
        }
    }
}

/// A document refused on its own: why, and its id when it had a readable one (so that the
/// client can tell which it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The document's `id`, if it could be read.
    pub id: Option<String>,
    /// Why it was refused.
    pub error: DocumentError,
}

/// Each document of a body in order, parsed and checked by the default schema's fields, or
/// why the body as a whole is refused ([`parse_batch_with`] reads by any schema).
///
/// ```
/// use tantivy_dedup::server::{BatchLimits, parse_batch};
///
/// let limits = BatchLimits { max_documents: 10, max_document_bytes: 1 << 20, latest_time: i64::MAX };
/// let ndjson = b"{\"id\": \"a\", \"content\": \"\xe6\xad\xa3\xe6\x96\x87\"}\n{\"id\": \"b\"}\n";
/// let documents = parse_batch(ndjson, &limits)?;
/// assert_eq!(documents[0].as_ref().map(|article| article.id.as_str()), Ok("a"));
/// assert!(documents[1].is_err()); // no content: refused alone
/// assert!(parse_batch(b"[{\"id\": ", &limits).is_err()); // a broken array: refused whole
/// # Ok::<(), tantivy_dedup::server::BodyError>(())
/// ```
pub fn parse_batch(
    body: &[u8],
    limits: &BatchLimits,
) -> Result<Vec<Result<Article, Refused>>, BodyError> {
    Ok(
        parse_batch_with(body, limits, ArticleReader::default_schema())?
            .into_iter()
            .map(|document| document.map(|record| record.article))
            .collect(),
    )
}

/// [`parse_batch`] by a schema's `[fields]` (`from` keys, fields of one's own).
///
/// ```
/// use tantivy_dedup::article::{ArticleReader, FieldValue};
/// use tantivy_dedup::config::Config;
/// use tantivy_dedup::server::{BatchLimits, parse_batch_with};
///
/// let config = Config::from_toml_str("[fields.likes]\ntype = \"u64\"\n")?;
/// let limits = BatchLimits { max_documents: 10, max_document_bytes: 1 << 20, latest_time: i64::MAX };
/// let body = br#"[{"id": "a", "content": "x", "likes": 3}, {"id": "b", "content": "y", "likes": -1}]"#;
/// let documents = parse_batch_with(body, &limits, &ArticleReader::for_config(&config))?;
/// assert_eq!(documents[0].as_ref().unwrap().fields["likes"], [FieldValue::U64(3)]);
/// assert!(documents[1].as_ref().unwrap_err().error.to_string().contains("`likes`"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn parse_batch_with(
    body: &[u8],
    limits: &BatchLimits,
    articles: &ArticleReader,
) -> Result<Vec<Result<ArticleRecord, Refused>>, BodyError> {
    Ok(split_documents(body, limits.max_documents)?
        .into_iter()
        .map(|document| parse_document_with(document, limits, articles))
        .collect())
}

/// One document by the default schema's fields: size, then the article's own checks, then the
/// date against the clock.
pub fn parse_document(json: &[u8], limits: &BatchLimits) -> Result<Article, Refused> {
    parse_document_with(json, limits, ArticleReader::default_schema()).map(|record| record.article)
}

/// [`parse_document`] by a schema's `[fields]`.
pub(crate) fn parse_document_with(
    json: &[u8],
    limits: &BatchLimits,
    articles: &ArticleReader,
) -> Result<ArticleRecord, Refused> {
    check_document(json, limits, articles).map_err(|error| Refused {
        id: readable_id(json, articles),
        error,
    })
}

/// The `id` of a JSON object (under its input key), as text, if it has a usable one.
fn readable_id(json: &[u8], articles: &ArticleReader) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    match value.get(articles.id_key())? {
        serde_json::Value::String(id) => Some(id.clone()),
        serde_json::Value::Number(id) => Some(id.to_string()),
        _ => None,
    }
}

fn check_document(
    json: &[u8],
    limits: &BatchLimits,
    articles: &ArticleReader,
) -> Result<ArticleRecord, DocumentError> {
    if json.len() > limits.max_document_bytes {
        return Err(DocumentError::TooLarge {
            found: json.len(),
            limit: limits.max_document_bytes,
        });
    }
    let record = articles.read_bytes(json)?;
    if let Some(time) = record.article.published_at
        && time > limits.latest_time
    {
        let now = crate::dedup::now();
        let seconds = |value: Timestamp| {
            humantime::format_duration(std::time::Duration::from_secs(value.max(0) as u64))
                .to_string()
        };
        return Err(DocumentError::InFuture {
            ahead: seconds(time.saturating_sub(now)),
            allowed: seconds(limits.latest_time.saturating_sub(now)),
        });
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BatchLimits = BatchLimits {
        max_documents: 3,
        max_document_bytes: 200,
        latest_time: 2_000_000_000,
    };

    fn ids(body: &str) -> Result<Vec<Result<String, String>>, BodyError> {
        Ok(parse_batch(body.as_bytes(), &LIMITS)?
            .into_iter()
            .map(|document| {
                document
                    .map(|article| article.id)
                    .map_err(|refused| format!("{} {}", refused.error.code(), refused.error))
            })
            .collect())
    }

    #[test]
    fn arrays_objects_and_ndjson() {
        let one = r#"{"id": "a", "content": "x"}"#;
        assert_eq!(ids(one), Ok(vec![Ok("a".into())]));
        let pretty = "{\n  \"id\": \"a\",\n  \"content\": \"x\"\n}\n";
        assert_eq!(ids(pretty), Ok(vec![Ok("a".into())]));
        let array = format!("\u{feff} [{one}, {{\"id\": \"b\", \"content\": \"y\"}}]");
        assert_eq!(ids(&array), Ok(vec![Ok("a".into()), Ok("b".into())]));
        let ndjson = format!("{one}\n\n  \n{{\"id\": \"b\", \"content\": \"y\"}}\r\n");
        assert_eq!(ids(&ndjson), Ok(vec![Ok("a".into()), Ok("b".into())]));
    }

    #[test]
    fn a_bad_document_stands_alone() {
        let body = "{\"id\": \"a\", \"content\": \"x\"}\n{\"id\": \n{\"id\": \"c\", \"content\": \"z\", \"published_at\": 4000000000}";
        let results = ids(body).unwrap();
        assert_eq!(results[0], Ok("a".into()));
        let limits = LIMITS;
        let refused = parse_batch(body.as_bytes(), &limits).unwrap();
        assert_eq!(refused[2].as_ref().unwrap_err().id.as_deref(), Some("c"));
        assert!(results[1].as_ref().unwrap_err().starts_with("invalid_json"));
        let future = results[2].as_ref().unwrap_err();
        assert!(future.starts_with("invalid_date"), "{future}");
        let long = format!(
            "[{{\"id\": \"a\", \"content\": \"{}\"}}, {{\"id\": \"b\", \"content\": \"y\"}}]",
            "字".repeat(100)
        );
        let results = ids(&long).unwrap();
        assert!(
            results[0]
                .as_ref()
                .unwrap_err()
                .starts_with("document_too_large")
        );
        assert_eq!(results[1], Ok("b".into()));
    }

    #[test]
    fn whole_bodies_refused() {
        assert_eq!(ids("  \n"), Err(BodyError::Empty));
        assert_eq!(ids("[]"), Err(BodyError::NoDocuments));
        assert_eq!(ids("id=a"), Err(BodyError::NotDocuments('i')));
        assert!(matches!(
            ids("[{\"id\": 1},"),
            Err(BodyError::MalformedArray(_))
        ));
        let many = "{\"id\": \"a\", \"content\": \"x\"}\n".repeat(4);
        assert_eq!(
            ids(&many),
            Err(BodyError::TooManyDocuments { found: 4, limit: 3 })
        );
    }
}
