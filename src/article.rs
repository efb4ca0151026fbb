//! The input document: one JSON object a line, validated with messages that say what to fix.

use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::forest::Timestamp;

/// A news article as tantivy-dedup reads it.
///
/// ```
/// use tantivy_dedup::Article;
///
/// let article = Article::from_json(
///     r#"{"id": "a1", "content": "正文", "published_at": "2024-05-01T08:00:00+08:00", "extra": 1}"#,
/// ).unwrap();
/// assert_eq!(article.id, "a1");
/// assert_eq!(article.published_at, Some(1_714_521_600));
/// assert!(Article::from_json(r#"{"id": "a2"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Article {
    /// The caller's identifier (required, non-empty). Integers are accepted and kept as text.
    pub id: String,
    /// The headline.
    pub title: Option<String>,
    /// The body text (required, non-empty).
    pub content: String,
    /// The outlet that published it.
    pub source: Option<String>,
    /// Where it was published.
    pub url: Option<String>,
    /// Event time, Unix seconds: from RFC 3339 text or a number of seconds.
    pub published_at: Option<Timestamp>,
}

/// A line longer than the input limit (`input::Lines`): it was read past and dropped, not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line of {length} bytes is longer than the limit of {limit} bytes")]
pub struct LineTooLong {
    /// The line's length in bytes.
    pub length: usize,
    /// The limit it broke.
    pub limit: usize,
}

/// Why a line is not a valid article.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArticleError {
    /// Not JSON, or not a JSON object.
    #[error("not a JSON object: {0}")]
    Json(String),
    /// A required field is absent or null.
    #[error("missing required field `{0}`")]
    Missing(&'static str),
    /// A field is present with an unusable value.
    #[error("field `{field}` {problem}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong, phrased to follow the field's name.
        problem: String,
    },
    /// The text is not UTF-8.
    #[error("not valid UTF-8 (at byte {0})")]
    Utf8(usize),
    /// The line is longer than the input limit.
    #[error(transparent)]
    TooLong(#[from] LineTooLong),
}

/// The fields of the JSON object as they came, before validation. Unknown keys are ignored.
#[derive(Deserialize)]
struct RawArticle {
    id: Option<Value>,
    title: Option<Value>,
    content: Option<Value>,
    source: Option<Value>,
    url: Option<Value>,
    published_at: Option<Value>,
}

fn invalid(field: &'static str, problem: impl Into<String>) -> ArticleError {
    ArticleError::Invalid {
        field,
        problem: problem.into(),
    }
}

/// A required, non-empty string (integers accepted for ids).
fn required_text(
    field: &'static str,
    value: Option<Value>,
    allow_integer: bool,
) -> Result<String, ArticleError> {
    let text = match value {
        None | Some(Value::Null) => return Err(ArticleError::Missing(field)),
        Some(Value::String(text)) => text,
        Some(Value::Number(number)) if allow_integer && (number.is_u64() || number.is_i64()) => {
            number.to_string()
        }
        Some(other) => {
            return Err(invalid(
                field,
                format!("must be a string, got {}", kind(&other)),
            ));
        }
    };
    // Zero-width characters and byte-order marks count as blank: normalisation drops them.
    if text
        .chars()
        .all(|c| c.is_whitespace() || crate::text::is_zero_width(c))
    {
        return Err(invalid(field, "must not be empty"));
    }
    Ok(text)
}

fn optional_text(
    field: &'static str,
    value: Option<Value>,
) -> Result<Option<String>, ArticleError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(invalid(
            field,
            format!("must be a string, got {}", kind(&other)),
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The longest id accepted, in bytes (Tantivy cannot index a term much longer than 64 KiB, and
/// an id is looked up as one term).
pub const MAX_ID_BYTES: usize = 4096;

/// The error for JSON that is not an object, naming what it starts with.
fn not_an_object(first: Option<char>) -> ArticleError {
    ArticleError::Json(match first {
        Some('[') => "got an array".to_owned(),
        Some(other) => format!("it starts with {other:?}"),
        None => "the line is empty".to_owned(),
    })
}

/// The event times accepted: 1970-01-01 to 2106-02-07 (what fits in u32 seconds). A number far
/// beyond is almost always milliseconds, which would otherwise move the clock millennia ahead
/// and expire every cluster.
pub const TIME_RANGE: std::ops::RangeInclusive<Timestamp> = 0..=u32::MAX as Timestamp;

/// Parses `published_at`: RFC 3339 text, or Unix seconds as a number or digits, within
/// [`TIME_RANGE`].
pub fn parse_time(value: &Value) -> Result<Timestamp, ArticleError> {
    let time = parse_any_time(value)?;
    if TIME_RANGE.contains(&time) {
        return Ok(time);
    }
    let hint = if time > 1_000 * u32::MAX as Timestamp / 100 {
        " (milliseconds? send seconds)"
    } else {
        ""
    };
    Err(invalid(
        "published_at",
        format!("must be between 1970 and 2106, got {time} seconds{hint}"),
    ))
}

fn parse_any_time(value: &Value) -> Result<Timestamp, ArticleError> {
    const PROBLEM: &str =
        "must be an RFC 3339 time such as \"2024-05-01T08:00:00+08:00\" or Unix seconds";
    match value {
        Value::Number(number) => number
            .as_i64()
            .or_else(|| number.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
            .ok_or_else(|| invalid("published_at", PROBLEM)),
        Value::String(text) => {
            let text = text.trim();
            if let Ok(seconds) = text.parse::<i64>() {
                return Ok(seconds);
            }
            OffsetDateTime::parse(text, &Rfc3339)
                .map(|time| time.unix_timestamp())
                .map_err(|error| {
                    invalid("published_at", format!("{PROBLEM} ({error}), got {text:?}"))
                })
        }
        other => Err(invalid(
            "published_at",
            format!("{PROBLEM}, got {}", kind(other)),
        )),
    }
}

impl Article {
    /// Parses and validates one JSON object.
    pub fn from_json(line: &str) -> Result<Self, ArticleError> {
        // serde would also read a JSON array into the fields by position.
        if !line.trim_start().starts_with('{') {
            return Err(not_an_object(line.trim_start().chars().next()));
        }
        let raw: RawArticle =
            serde_json::from_str(line).map_err(|error| ArticleError::Json(error.to_string()))?;
        Self::from_raw(raw)
    }

    /// Validates a parsed JSON value.
    pub fn from_json_value(value: Value) -> Result<Self, ArticleError> {
        if !value.is_object() {
            return Err(ArticleError::Json(format!("got {}", kind(&value))));
        }
        let raw: RawArticle =
            serde_json::from_value(value).map_err(|error| ArticleError::Json(error.to_string()))?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: RawArticle) -> Result<Self, ArticleError> {
        let id = required_text("id", raw.id, true)?;
        if id.len() > MAX_ID_BYTES {
            return Err(invalid(
                "id",
                format!("must be at most {MAX_ID_BYTES} bytes, got {}", id.len()),
            ));
        }
        // An id travels in URLs, logs and terminals, where control characters do harm.
        if let Some((at, control)) = id.char_indices().find(|(_, c)| c.is_control()) {
            return Err(invalid(
                "id",
                format!("must not contain control characters, got {control:?} at byte {at}"),
            ));
        }
        Ok(Article {
            id,
            content: required_text("content", raw.content, false)?,
            title: optional_text("title", raw.title)?,
            source: optional_text("source", raw.source)?,
            url: optional_text("url", raw.url)?,
            published_at: match raw.published_at {
                None | Some(Value::Null) => None,
                Some(value) => Some(parse_time(&value)?),
            },
        })
    }

    /// Parses one line of bytes, which must be UTF-8.
    pub fn from_json_bytes(line: &[u8]) -> Result<Self, ArticleError> {
        let text =
            std::str::from_utf8(line).map_err(|error| ArticleError::Utf8(error.valid_up_to()))?;
        Self::from_json(text)
    }

    /// A 64-bit digest of every field, to recognise an article sent again unchanged (a client
    /// retrying a request whose answer it never got).
    ///
    /// ```
    /// use tantivy_dedup::Article;
    ///
    /// let article = Article { id: "a".into(), content: "正文".into(), ..Default::default() };
    /// let mut edited = article.clone();
    /// edited.url = Some("https://example.com/a".into());
    /// assert_eq!(article.digest(), article.clone().digest());
    /// assert_ne!(article.digest(), edited.digest());
    /// ```
    pub fn digest(&self) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        // Each field is tagged and length-prefixed, so that no two articles hash the same
        // bytes by moving text from one field to the next.
        let mut field = |tag: u8, text: Option<&str>| {
            hasher.update(&[tag]);
            if let Some(text) = text {
                hasher.update(&(text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
        };
        field(b'i', Some(&self.id));
        field(b't', self.title.as_deref());
        field(b'c', Some(&self.content));
        field(b's', self.source.as_deref());
        field(b'u', self.url.as_deref());
        hasher.update(b"p");
        if let Some(time) = self.published_at {
            hasher.update(&time.to_le_bytes());
        }
        hasher.digest()
    }

    /// The text of a named field (`"title"` or `"content"`), if the article has it.
    pub fn field_text(&self, field: &str) -> Option<&str> {
        match field {
            "title" => self.title.as_deref(),
            "content" => Some(&self.content),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_fix() {
        let cases = [
            ("{", "not a JSON object"),
            ("[1]", "not a JSON object"),
            (r#"{"content": "x"}"#, "missing required field `id`"),
            (r#"{"id": "a"}"#, "missing required field `content`"),
            (r#"{"id": "", "content": "x"}"#, "`id` must not be empty"),
            (
                r#"{"id": "a", "content": "  "}"#,
                "`content` must not be empty",
            ),
            (
                "{\"id\": \"a\", \"content\": \"\u{feff}\u{200b} \u{200d}\"}",
                "`content` must not be empty",
            ),
            (
                r#"{"id": "a\u0000b", "content": "x"}"#,
                "`id` must not contain control characters",
            ),
            (
                r#"{"id": "a\nb", "content": "x"}"#,
                "`id` must not contain control characters",
            ),
            (
                r#"{"id": true, "content": "x"}"#,
                "`id` must be a string, got a boolean",
            ),
            (
                r#"{"id": "a", "content": 5}"#,
                "`content` must be a string, got a number",
            ),
            (
                r#"{"id": "a", "content": "x", "title": []}"#,
                "`title` must be a string",
            ),
            (
                r#"{"id": "a", "content": "x", "published_at": "yesterday"}"#,
                "RFC 3339",
            ),
            (
                r#"{"id": "a", "content": "x", "published_at": {}}"#,
                "got an object",
            ),
        ];
        for (line, needle) in cases {
            let message = Article::from_json(line).unwrap_err().to_string();
            assert!(message.contains(needle), "{line}: {message}");
        }
        assert!(matches!(
            Article::from_json_bytes(b"{\"id\": \"\xff\"}"),
            Err(ArticleError::Utf8(8))
        ));
    }

    #[test]
    fn accepts_integer_ids_and_numeric_times() {
        let article =
            Article::from_json(r#"{"id": 42, "content": "x", "published_at": 1700000000}"#)
                .unwrap();
        assert_eq!(article.id, "42");
        assert_eq!(article.published_at, Some(1_700_000_000));
        let article =
            Article::from_json(r#"{"id": "b", "content": "x", "published_at": "1700000000"}"#)
                .unwrap();
        assert_eq!(article.published_at, Some(1_700_000_000));
        let article = Article::from_json(
            r#"{"id": "c", "content": "x", "published_at": "2024-05-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(article.published_at, Some(1_714_521_600));
    }

    #[test]
    fn rejects_times_outside_the_clock() {
        for (time, needle) in [
            ("1718870400000", "milliseconds"),
            ("-1", "between 1970 and 2106"),
            ("\"1969-12-31T23:59:59Z\"", "between 1970 and 2106"),
            ("\"2200-01-01T00:00:00Z\"", "between 1970 and 2106"),
        ] {
            let line = format!(r#"{{"id": "a", "content": "x", "published_at": {time}}}"#);
            let message = Article::from_json(&line).unwrap_err().to_string();
            assert!(message.contains(needle), "{time}: {message}");
        }
    }
}
