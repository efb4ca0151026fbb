//! The input document: one JSON object a line, validated with messages that say what to fix.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::LazyLock;

use crate::config::{Config, FieldKind, FieldsConfig};
use crate::forest::Timestamp;
pub use crate::local_time::TIME_RANGE;
use crate::local_time::{RangeEnd, TimeError, TimeZone};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

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
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "server",
    schema(
        description = "A news article to index. The keys are the default schema's: a \
        configuration may read a field from another key (`[fields.NAME] from`) and add fields \
        of the platform's own, sent as further keys; other keys are ignored."
    )
)]
pub struct Article {
    /// The caller's identifier (required, non-empty). Integers are accepted and kept as text.
    #[cfg_attr(feature = "server", schema(schema_with = openapi::article_id))]
    pub id: String,
    /// The headline.
    pub title: Option<String>,
    /// The body text (required, non-empty).
    pub content: String,
    /// The outlet that published it.
    pub source: Option<String>,
    /// Where it was published.
    pub url: Option<String>,
    /// Event time, Unix seconds: from a number of seconds, or text such as RFC 3339,
    /// `2024-05-01 08:00:00` or `20240501` (read in the index's time zone; [`parse_time`]).
    #[cfg_attr(feature = "server", schema(schema_with = openapi::event_time))]
    pub published_at: Option<Timestamp>,
}

/// How the OpenAPI document of the HTTP API describes the fields that accept more than one
/// JSON type.
#[cfg(feature = "server")]
pub(crate) mod openapi {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type};
    use utoipa::openapi::{KnownFormat, RefOr};

    fn integer() -> ObjectBuilder {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
    }

    /// `id`: non-empty text, or an integer (kept as its digits).
    pub(crate) fn article_id() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1)),
            )
            .item(integer())
            .description(Some(format!(
                "The caller's identifier (required, non-empty; at most {} bytes, no control \
                 characters). Integers are accepted and kept as text.",
                super::MAX_ID_BYTES
            )))
            .into()
    }

    /// `published_at` (and a date field of one's own): text in one of the forms
    /// [`parse_time`](super::parse_time) reads, or Unix seconds as a number.
    pub(crate) fn event_time() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(
                        "RFC 3339; a date (2024-05-01, 2024/05/01, 20240501) or date and time \
                         (2024-05-01 08:00:00) in the index's time zone; or Unix seconds as digits",
                    )),
            )
            .item(integer().description(Some("Unix seconds")))
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .description(Some(
                "When it was published, from 1970 to 2106; absent or null: when it arrives.",
            ))
            .examples(["2024-05-01T08:00:00+08:00"])
            .into()
    }
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
    /// Not JSON (a syntax error, a line cut short), or JSON that is not an object.
    #[error("not a valid JSON object: {0}")]
    Json(String),
    /// A required field is absent or null (named by its input key).
    #[error("missing required field `{0}`")]
    Missing(Cow<'static, str>),
    /// A field is present with an unusable value: a wrong type, a value out of range.
    #[error("field `{field}` {problem}")]
    Invalid {
        /// The field, by its input key (its name unless `[fields.NAME] from` says otherwise).
        field: Cow<'static, str>,
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

fn invalid(field: impl Into<Cow<'static, str>>, problem: impl Into<String>) -> ArticleError {
    ArticleError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A required, non-empty string (integers accepted for ids).
fn required_text(
    field: &str,
    value: Option<Value>,
    allow_integer: bool,
) -> Result<String, ArticleError> {
    let text = match value {
        None | Some(Value::Null) => return Err(ArticleError::Missing(field_name(field))),
        Some(Value::String(text)) => text,
        Some(Value::Number(number)) if allow_integer && (number.is_u64() || number.is_i64()) => {
            number.to_string()
        }
        Some(other) => {
            return Err(invalid(
                field_name(field),
                format!("must be a string, got {}", kind(&other)),
            ));
        }
    };
    // Zero-width characters, byte-order marks and control characters count as blank: they
    // are no text to index or fingerprint.
    if text
        .chars()
        .all(|c| c.is_whitespace() || c.is_control() || crate::text::is_zero_width(c))
    {
        let blank = if text.is_empty() {
            ""
        } else {
            " (it holds only white space, control or zero-width characters)"
        };
        return Err(invalid(
            field_name(field),
            format!("must not be empty{blank}"),
        ));
    }
    Ok(text)
}

fn optional_text(field: &str, value: Option<Value>) -> Result<Option<String>, ArticleError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(invalid(
            field_name(field),
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

/// Parses `published_at`, or a date field of one's own, read from input key `field`: text in
/// any form [`TimeZone::parse`] reads (RFC 3339, `2024-05-01 08:00:00` or `20240501` in
/// `zone`, Unix seconds as digits), or Unix seconds as a number; within [`TIME_RANGE`].
///
/// ```
/// use serde_json::json;
/// use tantivy_dedup::article::parse_time;
/// use tantivy_dedup::local_time::TimeZone;
///
/// let zone = TimeZone::CHINA;
/// let first_of_may = 1_714_492_800;
/// assert_eq!(parse_time("date", &json!("2024-05-01"), zone)?, first_of_may);
/// assert_eq!(parse_time("date", &json!("20240501"), zone)?, first_of_may);
/// assert_eq!(parse_time("date", &json!("2024-05-01 08:00:00"), zone)?, first_of_may + 8 * 3600);
/// assert_eq!(parse_time("date", &json!(first_of_may), zone)?, first_of_may);
/// assert!(parse_time("date", &json!(1_714_492_800_000i64), zone).is_err()); // milliseconds
/// # Ok::<(), tantivy_dedup::article::ArticleError>(())
/// ```
pub fn parse_time(field: &str, value: &Value, zone: TimeZone) -> Result<Timestamp, ArticleError> {
    // `shown` is the value as sent (a float beyond i64 saturates in `time`).
    let out_of_range = |shown: &dyn std::fmt::Display, time: Timestamp| {
        let hint = if time > *TIME_RANGE.end() && TIME_RANGE.contains(&(time / 1_000)) {
            " (milliseconds? send seconds)"
        } else {
            ""
        };
        invalid(
            field_name(field),
            format!("must be between 1970 and 2106, got {shown} seconds{hint}"),
        )
    };
    let text = match value {
        Value::String(text) => Cow::Borrowed(text.as_str()),
        // A whole number reads as its digits would (`20240501` is a date).
        Value::Number(number) if number.is_u64() => Cow::Owned(number.to_string()),
        Value::Number(number) => {
            let time = number
                .as_i64()
                .or_else(|| number.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
                .ok_or_else(|| invalid(field_name(field), "must be a finite number of seconds"))?;
            return if TIME_RANGE.contains(&time) {
                Ok(time)
            } else {
                Err(out_of_range(number, time))
            };
        }
        other => {
            return Err(invalid(
                field_name(field),
                format!("must be a time or Unix seconds, got {}", kind(other)),
            ));
        }
    };
    zone.parse(&text, RangeEnd::Start)
        .map_err(|error| match error {
            TimeError::Form { text, zone } => invalid(
                field_name(field),
                format!("must be a time, got {text:?}: {}", zone.accepted_forms()),
            ),
            TimeError::Range { text, .. } => match text.parse::<Timestamp>() {
                Ok(seconds) => out_of_range(&seconds, seconds),
                Err(_) => invalid(
                    field_name(field),
                    format!("must be between 1970 and 2106, got {text:?}"),
                ),
            },
        })
}

/// A field's name for an error: borrowed when it is a built-in field's, so that the default
/// schema's errors allocate nothing for it.
fn field_name(field: &str) -> Cow<'static, str> {
    BUILT_IN_KEYS
        .iter()
        .find(|name| **name == field)
        .map_or_else(|| Cow::Owned(field.to_owned()), |name| Cow::Borrowed(*name))
}

/// The built-in fields, in the order of [`Article`]'s fields and of `[fields]`.
const BUILT_IN_KEYS: [&str; 6] = ["id", "title", "content", "source", "url", "published_at"];

impl Article {
    /// Parses and validates one JSON object with the default schema's fields (no `from` keys,
    /// no fields of one's own; [`ArticleReader`] reads by any schema).
    pub fn from_json(line: &str) -> Result<Self, ArticleError> {
        ArticleReader::default_schema()
            .read_str(line)
            .map(|record| record.article)
    }

    /// Validates a parsed JSON value with the default schema's fields.
    pub fn from_json_value(value: Value) -> Result<Self, ArticleError> {
        ArticleReader::default_schema()
            .read_value(value)
            .map(|record| record.article)
    }

    /// Checks the built-in fields' values (`values` in [`BUILT_IN_KEYS`] order, read from the
    /// input keys `keys`).
    fn from_values(
        keys: &[String; 6],
        values: &mut [Option<Value>],
        zone: TimeZone,
    ) -> Result<Self, ArticleError> {
        let [id, title, content, source, url, published_at] = values else {
            return Err(ArticleError::Json(
                "the built-in fields are missing".to_owned(),
            ));
        };
        let id = required_text(&keys[0], id.take(), true)?;
        if id.len() > MAX_ID_BYTES {
            return Err(invalid(
                field_name(&keys[0]),
                format!("must be at most {MAX_ID_BYTES} bytes, got {}", id.len()),
            ));
        }
        // An id travels in URLs, logs and terminals, where control characters do harm.
        if let Some((at, control)) = id.char_indices().find(|(_, c)| c.is_control()) {
            return Err(invalid(
                field_name(&keys[0]),
                format!("must not contain control characters, got {control:?} at byte {at}"),
            ));
        }
        Ok(Article {
            id,
            content: required_text(&keys[2], content.take(), false)?,
            title: optional_text(&keys[1], title.take())?,
            source: optional_text(&keys[3], source.take())?,
            url: optional_text(&keys[4], url.take())?,
            published_at: match published_at.take() {
                None | Some(Value::Null) => None,
                Some(value) => Some(parse_time(&keys[5], &value, zone)?),
            },
        })
    }

    /// Parses one line of bytes with the default schema's fields; it must be UTF-8.
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
        self.hash_into(&mut hasher);
        hasher.digest()
    }

    /// Feeds every field to `hasher`, as [`digest`](Self::digest) hashes them.
    fn hash_into(&self, hasher: &mut xxhash_rust::xxh3::Xxh3) {
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

/// One value of a field of the platform's own, as its declared type reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A `text` or `string` field's value.
    Text(String),
    /// An `i64` field's value.
    I64(i64),
    /// A `u64` field's value.
    U64(u64),
    /// An `f64` field's value (always finite: JSON has no other numbers).
    F64(f64),
    /// A `bool` field's value.
    Bool(bool),
    /// A `date` field's value, Unix seconds within [`TIME_RANGE`].
    Date(Timestamp),
    /// A `facet` field's value: a path such as `/weibo/repost`.
    Facet(tantivy::schema::Facet),
}

impl FieldValue {
    /// Reads one JSON value (not an array) as a value of `kind`; `field` names the input key
    /// in the error.
    fn parse(
        field: &str,
        kind: FieldKind,
        value: &Value,
        zone: TimeZone,
    ) -> Result<Self, ArticleError> {
        let wrong = |expected: &str| {
            invalid(
                field_name(field),
                format!("must be {expected}, got {}", shown(value)),
            )
        };
        Ok(match kind {
            FieldKind::Text | FieldKind::String => {
                FieldValue::Text(value.as_str().ok_or_else(|| wrong("a string"))?.to_owned())
            }
            FieldKind::I64 => FieldValue::I64(value.as_i64().ok_or_else(|| {
                wrong(if value.is_u64() {
                    "an integer below 2^63"
                } else {
                    "an integer"
                })
            })?),
            FieldKind::U64 => FieldValue::U64(
                value
                    .as_u64()
                    .ok_or_else(|| wrong("an integer of 0 or more"))?,
            ),
            FieldKind::F64 => FieldValue::F64(value.as_f64().ok_or_else(|| wrong("a number"))?),
            FieldKind::Bool => {
                FieldValue::Bool(value.as_bool().ok_or_else(|| wrong("true or false"))?)
            }
            FieldKind::Date => FieldValue::Date(parse_time(field, value, zone)?),
            FieldKind::Facet => {
                let path = value
                    .as_str()
                    .filter(|path| path.starts_with('/'))
                    .ok_or_else(|| wrong("a path starting with `/`, such as \"/weibo/repost\""))?;
                FieldValue::Facet(
                    tantivy::schema::Facet::from_text(path)
                        .map_err(|error| invalid(field_name(field), error.to_string()))?,
                )
            }
        })
    }

    /// Feeds the value to `hasher`, tagged by its type.
    fn hash_into(&self, hasher: &mut xxhash_rust::xxh3::Xxh3) {
        let mut bytes = |tag: u8, bytes: &[u8]| {
            hasher.update(&[tag]);
            hasher.update(&(bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        match self {
            FieldValue::Text(text) => bytes(b's', text.as_bytes()),
            FieldValue::I64(value) => bytes(b'i', &value.to_le_bytes()),
            FieldValue::U64(value) => bytes(b'u', &value.to_le_bytes()),
            FieldValue::F64(value) => bytes(b'f', &value.to_le_bytes()),
            FieldValue::Bool(value) => bytes(b'b', &[u8::from(*value)]),
            FieldValue::Date(value) => bytes(b'd', &value.to_le_bytes()),
            FieldValue::Facet(facet) => bytes(b'h', facet.encoded_str().as_bytes()),
        }
    }
}

/// A JSON value as an error shows it: strings quoted, anything long cut short.
fn shown(value: &Value) -> String {
    const LONGEST: usize = 40;
    let text = value.to_string();
    match text.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// An article as read from the input: its built-in fields and the values of the schema's
/// fields of one's own, by field name (a field absent, null or `[]` in the input has no
/// entry; an array gives several values).
///
/// ```
/// use tantivy_dedup::article::{ArticleReader, FieldValue};
/// use tantivy_dedup::config::Config;
///
/// let config = Config::from_toml_str("[fields.likes]\ntype = \"u64\"\n")?;
/// let reader = ArticleReader::new(&config.fields);
/// let record = reader.read_str(r#"{"id": "a", "content": "正文", "likes": 7}"#).unwrap();
/// assert_eq!(record.fields["likes"], vec![FieldValue::U64(7)]);
/// assert_ne!(record.digest(), record.article.digest()); // the own fields count
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ArticleRecord {
    /// The built-in fields.
    pub article: Article,
    /// The fields of one's own that the input had, with their values in input order.
    pub fields: BTreeMap<String, Vec<FieldValue>>,
}

impl From<Article> for ArticleRecord {
    fn from(article: Article) -> Self {
        ArticleRecord {
            article,
            fields: BTreeMap::new(),
        }
    }
}

impl ArticleRecord {
    /// A 64-bit digest of every field, the own ones included, to recognise a re-send. Equals
    /// [`Article::digest`] when there are no own values, so that indexes made before there
    /// were fields of one's own still recognise their re-sends.
    pub fn digest(&self) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        self.article.hash_into(&mut hasher);
        for (name, values) in &self.fields {
            hasher.update(b"F");
            hasher.update(&(name.len() as u64).to_le_bytes());
            hasher.update(name.as_bytes());
            hasher.update(&(values.len() as u64).to_le_bytes());
            for value in values {
                value.hash_into(&mut hasher);
            }
        }
        hasher.digest()
    }

    /// The texts of a named text field (`title`, `content`, or one of one's own), in order;
    /// none when the record has none.
    pub fn texts<'a>(&'a self, field: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let own = self.fields.get(field).into_iter().flatten();
        self.article
            .field_text(field)
            .into_iter()
            .chain(own.filter_map(|value| match value {
                FieldValue::Text(text) => Some(text.as_str()),
                _ => None,
            }))
    }
}

/// Where a known input key's value goes.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// A built-in field, by its position in [`BUILT_IN_KEYS`].
    BuiltIn(usize),
    /// A field of one's own, by its position in [`ArticleReader::own`].
    Own(usize),
}

/// A field of one's own as the reader reads it.
#[derive(Debug, Clone)]
struct OwnInput {
    name: String,
    key: String,
    kind: FieldKind,
}

/// Reads JSON objects into [`ArticleRecord`]s by a schema's `[fields]`: each built-in field
/// from its input key (`from`, by default its name), and each field of one's own checked
/// against its type. One serde_json pass: keys that no field reads are skipped without being
/// built into values; a key given twice refuses the object.
///
/// ```
/// use tantivy_dedup::article::ArticleReader;
/// use tantivy_dedup::config::Config;
///
/// let config = Config::from_toml_str(
///     "[fields.published_at]\nfrom = \"date\"\n[fields.likes]\ntype = \"i64\"\n",
/// )?;
/// let reader = ArticleReader::new(&config.fields);
/// let record = reader.read_str(r#"{"id": "a", "content": "正文", "date": 1700000000}"#).unwrap();
/// assert_eq!(record.article.published_at, Some(1_700_000_000));
/// let refused = reader.read_str(r#"{"id": "a", "content": "正文", "likes": "abc"}"#).unwrap_err();
/// assert_eq!(refused.to_string(), r#"field `likes` must be an integer, got "abc""#);
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ArticleReader {
    /// Every input key read, with where its value goes.
    slots: HashMap<String, Slot>,
    /// The built-in fields' input keys, in [`BUILT_IN_KEYS`] order.
    built_in_keys: [String; 6],
    own: Vec<OwnInput>,
    /// The zone of times written without an offset.
    zone: TimeZone,
}

impl Default for ArticleReader {
    fn default() -> Self {
        ArticleReader::new(&FieldsConfig::default())
    }
}

impl ArticleReader {
    /// A reader for these fields (which [`FieldsConfig::validate`] should have checked: of two
    /// fields reading one key, the later wins), reading times without an offset in the default
    /// zone, UTC+8 ([`for_config`](Self::for_config) takes an index's).
    pub fn new(fields: &FieldsConfig) -> Self {
        let mut built_in_keys: [String; 6] = Default::default();
        let mut own = Vec::with_capacity(fields.own.len());
        let mut slots = HashMap::new();
        for (position, (name, options)) in fields.declared().enumerate() {
            let key = options.input_key(name).to_owned();
            let slot = match built_in_keys.get_mut(position) {
                Some(built_in) => {
                    built_in.clone_from(&key);
                    Slot::BuiltIn(position)
                }
                None => {
                    own.push(OwnInput {
                        name: name.to_owned(),
                        key: key.clone(),
                        kind: options.kind.unwrap_or(FieldKind::Text),
                    });
                    Slot::Own(own.len() - 1)
                }
            };
            slots.insert(key, slot);
        }
        ArticleReader {
            slots,
            built_in_keys,
            own,
            zone: TimeZone::default(),
        }
    }

    /// A reader for `config`'s fields that reads times written without an offset
    /// (`2024-05-01 08:00`) in its `[index] time_zone`.
    pub fn for_config(config: &Config) -> Self {
        ArticleReader {
            zone: config.index.time_zone,
            ..ArticleReader::new(&config.fields)
        }
    }

    /// The reader of the default schema, made once.
    pub fn default_schema() -> &'static ArticleReader {
        static DEFAULT: LazyLock<ArticleReader> = LazyLock::new(ArticleReader::default);
        &DEFAULT
    }

    /// The input key `id` is read from.
    pub fn id_key(&self) -> &str {
        &self.built_in_keys[0]
    }

    /// The input key `published_at` is read from.
    pub fn time_key(&self) -> &str {
        &self.built_in_keys[5]
    }

    /// Parses and checks one JSON object.
    pub fn read_str(&self, line: &str) -> Result<ArticleRecord, ArticleError> {
        // serde would also read a JSON array into the fields by position.
        let start = line.trim_start();
        if !start.starts_with('{') {
            return Err(not_an_object(start.chars().next()));
        }
        let mut deserializer = serde_json::Deserializer::from_str(line);
        let mut values = self
            .deserialize(&mut deserializer)
            .and_then(|values| deserializer.end().map(|()| values))
            .map_err(|error| ArticleError::Json(error.to_string()))?;
        self.check(&mut values)
    }

    /// Parses and checks one line of bytes, which must be UTF-8.
    pub fn read_bytes(&self, line: &[u8]) -> Result<ArticleRecord, ArticleError> {
        // Checked with SIMD, a fraction of the cost of std's check on Chinese text; std's
        // check, which fails wherever this one does, only places the error.
        let text = simdutf8::basic::from_utf8(line).map_err(|_| {
            ArticleError::Utf8(
                std::str::from_utf8(line)
                    .err()
                    .map_or(0, |error| error.valid_up_to()),
            )
        })?;
        self.read_str(text)
    }

    /// Checks a parsed JSON value, which must be an object.
    pub fn read_value(&self, value: Value) -> Result<ArticleRecord, ArticleError> {
        if !value.is_object() {
            return Err(ArticleError::Json(format!("got {}", kind(&value))));
        }
        let mut values = self
            .deserialize(value)
            .map_err(|error| ArticleError::Json(error.to_string()))?;
        self.check(&mut values)
    }

    /// Checks the values read: the built-in fields first, then the own in name order.
    fn check(&self, values: &mut [Option<Value>]) -> Result<ArticleRecord, ArticleError> {
        let (built_in, own) = values.split_at_mut(BUILT_IN_KEYS.len());
        let article = Article::from_values(&self.built_in_keys, built_in, self.zone)?;
        let mut fields = BTreeMap::new();
        for (input, value) in self.own.iter().zip(own) {
            let parsed = match value.take() {
                None | Some(Value::Null) => continue,
                Some(Value::Array(elements)) => elements
                    .iter()
                    .filter(|element| !element.is_null())
                    .map(|element| FieldValue::parse(&input.key, input.kind, element, self.zone))
                    .collect::<Result<Vec<_>, _>>()?,
                Some(value) => vec![FieldValue::parse(
                    &input.key, input.kind, &value, self.zone,
                )?],
            };
            if !parsed.is_empty() {
                fields.insert(input.name.clone(), parsed);
            }
        }
        Ok(ArticleRecord { article, fields })
    }
}

/// The values of an object's known keys, in slot order (built-in fields, then the own).
impl<'de> DeserializeSeed<'de> for &ArticleReader {
    type Value = Vec<Option<Value>>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(self))
    }
}

struct ObjectVisitor<'r>(&'r ArticleReader);

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = Vec<Option<Value>>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let reader = self.0;
        let mut values = vec![None; BUILT_IN_KEYS.len() + reader.own.len()];
        while let Some(slot) = map.next_key_seed(KeySeed(reader))? {
            let Some((key, slot)) = slot else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let position = match slot {
                Slot::BuiltIn(position) => position,
                Slot::Own(position) => BUILT_IN_KEYS.len() + position,
            };
            let value = map.next_value::<Value>()?;
            if values[position].replace(value).is_some() {
                return Err(serde::de::Error::custom(format!("duplicate field `{key}`")));
            }
        }
        Ok(values)
    }
}

/// Looks a key up without keeping it: the key (for a duplicate's error) and its slot, or
/// `None` for a key no field reads.
struct KeySeed<'r>(&'r ArticleReader);

impl<'de, 'r> DeserializeSeed<'de> for KeySeed<'r> {
    type Value = Option<(&'r str, Slot)>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'r> Visitor<'_> for KeySeed<'r> {
    type Value = Option<(&'r str, Slot)>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self
            .0
            .slots
            .get_key_value(key)
            .map(|(key, slot)| (key.as_str(), *slot)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_fix() {
        let cases = [
            ("{", "not a valid JSON object: EOF while parsing"),
            ("[1]", "not a valid JSON object: got an array"),
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
                r#"{"id": "a", "content": "\u0001\u0002\u0003"}"#,
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
            // Issue 33, item 9: no milliseconds hint for a number far beyond them either, and
            // the number as sent, not saturated.
            ("1e300", "got 1e+300 seconds"),
            ("17188704000000000", "got 17188704000000000 seconds"),
            ("\"1969-12-31T23:59:59Z\"", "between 1970 and 2106"),
            ("\"2200-01-01T00:00:00Z\"", "between 1970 and 2106"),
        ] {
            let line = format!(r#"{{"id": "a", "content": "x", "published_at": {time}}}"#);
            let message = Article::from_json(&line).unwrap_err().to_string();
            assert!(message.contains(needle), "{time}: {message}");
            let hinted = message.contains("milliseconds");
            assert_eq!(hinted, needle == "milliseconds", "{time}: {message}");
        }
    }

    fn reader(toml: &str) -> ArticleReader {
        ArticleReader::new(&crate::config::Config::from_toml_str(toml).unwrap().fields)
    }

    const OWN: &str = "[fields.likes]\ntype = \"u64\"\n[fields.delta]\ntype = \"i64\"\n\
                       [fields.score]\ntype = \"f64\"\n[fields.verified]\ntype = \"bool\"\n\
                       [fields.crawled]\ntype = \"date\"\n[fields.platform]\ntype = \"facet\"\n\
                       [fields.keywords]\ntype = \"string\"\n[fields.summary]\ntype = \"text\"\n";

    #[test]
    fn own_fields_are_read_by_their_type() {
        let reader = reader(OWN);
        let record = reader
            .read_str(
                r#"{"id": "a", "content": "正文", "likes": 3, "delta": -2, "score": 0.5,
                    "verified": true, "crawled": "2024-05-01T00:00:00Z", "platform": "/weibo/repost",
                    "keywords": ["洪水", null, "救援"], "summary": [], "other": {"x": 1}}"#,
            )
            .unwrap();
        let facet = tantivy::schema::Facet::from_text("/weibo/repost").unwrap();
        let expected: BTreeMap<String, Vec<FieldValue>> = [
            ("likes", vec![FieldValue::U64(3)]),
            ("delta", vec![FieldValue::I64(-2)]),
            ("score", vec![FieldValue::F64(0.5)]),
            ("verified", vec![FieldValue::Bool(true)]),
            ("crawled", vec![FieldValue::Date(1_714_521_600)]),
            ("platform", vec![FieldValue::Facet(facet)]),
            (
                "keywords",
                vec![
                    FieldValue::Text("洪水".into()),
                    FieldValue::Text("救援".into()),
                ],
            ),
        ]
        .into_iter()
        .map(|(name, values)| (name.to_owned(), values))
        .collect();
        assert_eq!(record.fields, expected);
        // An integer is a number too.
        let record = reader
            .read_str(r#"{"id": "a", "content": "x", "score": 2}"#)
            .unwrap();
        assert_eq!(record.fields["score"], [FieldValue::F64(2.0)]);
    }

    #[test]
    fn wrong_types_name_the_field() {
        let reader = reader(OWN);
        for (pair, message) in [
            (
                r#""likes": "abc""#,
                r#"field `likes` must be an integer of 0 or more, got "abc""#,
            ),
            (
                r#""likes": -1"#,
                "field `likes` must be an integer of 0 or more, got -1",
            ),
            (
                r#""delta": 1.5"#,
                "field `delta` must be an integer, got 1.5",
            ),
            (
                r#""delta": 18446744073709551615"#,
                "field `delta` must be an integer below 2^63",
            ),
            (r#""score": "high""#, "field `score` must be a number"),
            (
                r#""verified": "yes""#,
                "field `verified` must be true or false",
            ),
            (
                r#""crawled": "yesterday""#,
                "field `crawled` must be a time",
            ),
            (
                r#""platform": "weibo""#,
                "field `platform` must be a path starting with `/`",
            ),
            (
                r#""keywords": ["a", 1]"#,
                "field `keywords` must be a string, got 1",
            ),
            (
                r#""keywords": [["a"]]"#,
                "field `keywords` must be a string",
            ),
            (r#""summary": {"a": 1}"#, "field `summary` must be a string"),
            (r#""likes": 1, "likes": 2"#, "duplicate field `likes`"),
        ] {
            let line = format!(r#"{{"id": "a", "content": "x", {pair}}}"#);
            let error = reader.read_str(&line).unwrap_err().to_string();
            assert!(error.contains(message), "{line}: {error}");
        }
        let long = format!(
            r#"{{"id": "a", "content": "x", "likes": "{}"}}"#,
            "9".repeat(100)
        );
        let error = reader.read_str(&long).unwrap_err().to_string();
        assert!(error.ends_with('…') && error.len() < 120, "{error}");
    }

    #[test]
    fn times_without_an_offset_are_read_in_the_index_zone() {
        let config = Config::from_toml_str(
            "[index]\ntime_zone = \"UTC\"\n[fields.published_at]\nfrom = \"date\"\n\
             [fields.crawled]\ntype = \"date\"\n",
        )
        .unwrap();
        let utc = ArticleReader::for_config(&config);
        let china = ArticleReader::new(&config.fields);
        let line =
            r#"{"id": "a", "content": "x", "date": "2024-05-01 08:00:00", "crawled": "20240501"}"#;
        let (in_utc, in_china) = (utc.read_str(line).unwrap(), china.read_str(line).unwrap());
        assert_eq!(in_utc.article.published_at, Some(1_714_550_400));
        assert_eq!(
            in_china.article.published_at,
            Some(1_714_550_400 - 8 * 3600)
        );
        assert_eq!(in_utc.fields["crawled"], [FieldValue::Date(1_714_521_600)]);
        // A time with its own offset is the same instant in any zone.
        let offset = r#"{"id": "a", "content": "x", "date": "2024-05-01T08:00:00+08:00"}"#;
        assert_eq!(
            utc.read_str(offset).unwrap().article.published_at,
            china.read_str(offset).unwrap().article.published_at
        );
    }

    #[test]
    fn built_in_fields_follow_from() {
        let reader =
            reader("[fields.published_at]\nfrom = \"date\"\n[fields.content]\nfrom = \"text\"\n");
        assert_eq!(reader.time_key(), "date");
        let record = reader
            .read_str(r#"{"id": "a", "text": "正文", "date": "1700000000", "published_at": "x", "content": 5}"#)
            .unwrap();
        assert_eq!(record.article.content, "正文");
        assert_eq!(record.article.published_at, Some(1_700_000_000));
        for (line, message) in [
            (
                r#"{"id": "a", "content": "x"}"#,
                "missing required field `text`",
            ),
            (
                r#"{"id": "a", "text": "x", "date": []}"#,
                "field `date` must be a time",
            ),
        ] {
            let error = reader.read_str(line).unwrap_err().to_string();
            assert!(error.contains(message), "{line}: {error}");
        }
        // The value path reads the same.
        let value = serde_json::json!({"id": 7, "text": "正文", "date": 1_700_000_000});
        assert_eq!(reader.read_value(value).unwrap().article.id, "7");
    }

    #[test]
    fn the_digest_counts_own_fields_and_equals_the_article_digest_without() {
        let reader = reader(OWN);
        let plain = reader.read_str(r#"{"id": "a", "content": "x"}"#).unwrap();
        assert_eq!(plain.digest(), plain.article.digest());
        let digests: Vec<u64> = [
            r#"{"id": "a", "content": "x", "likes": 1}"#,
            r#"{"id": "a", "content": "x", "likes": 2}"#,
            r#"{"id": "a", "content": "x", "delta": 1}"#,
            r#"{"id": "a", "content": "x", "keywords": ["a", "b"]}"#,
            r#"{"id": "a", "content": "x", "keywords": ["ab"]}"#,
        ]
        .iter()
        .map(|line| reader.read_str(line).unwrap().digest())
        .collect();
        let mut distinct = digests.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), digests.len());
        assert!(!digests.contains(&plain.digest()));
    }

    proptest::proptest! {
        /// Any JSON value under any field of one's own is read or refused with the field's
        /// name, never a panic.
        #[test]
        fn own_field_parsing_never_panics(value in json_value(), key in 0usize..8) {
            let names = ["likes", "delta", "score", "verified", "crawled", "platform", "keywords", "summary"];
            let mut object = serde_json::json!({"id": "a", "content": "x"});
            object[names[key]] = value;
            let reader = reader(OWN);
            if let Err(error) = reader.read_str(&object.to_string()) {
                proptest::prop_assert!(error.to_string().contains(names[key]), "{}", error);
            }
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
            "/[a-z/\\\\]{0,10}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }
}
