//! Filters on a list page's declared non-text fields: `field:value`, `field:[a TO b]` (`*` for
//! an open end) and `field:/facet/prefix`, read by the Tantivy schema's type of the field, so
//! that every non-text field an index declares can be filtered on without code of its own.
//!
//! Also the rule of which fields may be filtered on and counted ([`ValueField`]): a declared
//! field of a value type (string, facet, number, bool, date), never a text field (its values
//! are words, searched by the keywords) nor one of the dedup fields
//! ([`schema::is_internal`]).

use std::ops::Bound;
use std::str::FromStr;

use tantivy::DateTime;
use tantivy::Term;
use tantivy::query::{Query, RangeQuery, TermQuery};
use tantivy::schema::{Facet, Field, FieldType, IndexRecordOption, Schema};

use crate::engine::schema;
use crate::local_time::{RangeEnd, TimeZone};
use crate::{Error, Result};

/// How a filter is written, for error messages.
const SYNTAX: &str = "a filter is `field:value`, `field:[a TO b]` (a range, both ends \
                      included; `*` for an open end) or, on a facet field, `field:/facet/prefix`";

/// The type of a field's values, as filters and counts read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A string field: one exact term per value.
    String,
    /// A hierarchical facet (`/a/b`): a filter on `/a` keeps `/a` and everything under it.
    Facet,
    /// An unsigned integer.
    U64,
    /// A signed integer.
    I64,
    /// A floating-point number.
    F64,
    /// `true` or `false`.
    Bool,
    /// A time (Unix seconds in answers; every form `--from` accepts in filters).
    Date,
}

impl ValueKind {
    /// The kind of a field's type; `None` for text fields and types not filtered on (bytes,
    /// JSON, IP addresses).
    fn of(field_type: &FieldType) -> Option<ValueKind> {
        Some(match field_type {
            FieldType::Str(options) => {
                // Indexed by words (any tokenizer but the raw one): a text field. Unindexed,
                // the two cannot be told apart and the field is taken as a string (filters
                // and counts then ask for it to be indexed or fast).
                let by_words = options
                    .get_indexing_options()
                    .is_some_and(|indexing| indexing.tokenizer() != "raw");
                if by_words {
                    return None;
                }
                ValueKind::String
            }
            FieldType::Facet(_) => ValueKind::Facet,
            FieldType::U64(_) => ValueKind::U64,
            FieldType::I64(_) => ValueKind::I64,
            FieldType::F64(_) => ValueKind::F64,
            FieldType::Bool(_) => ValueKind::Bool,
            FieldType::Date(_) => ValueKind::Date,
            _ => return None,
        })
    }

    fn describe(self) -> &'static str {
        match self {
            ValueKind::String => "an exact string",
            ValueKind::Facet => "a facet path such as /a/b",
            ValueKind::U64 => "a whole number from 0",
            ValueKind::I64 => "a whole number",
            ValueKind::F64 => "a number",
            ValueKind::Bool => "true or false",
            ValueKind::Date => {
                "a date (2024-04-21), a date and time (2024-04-21 08:30), RFC 3339 or Unix seconds"
            }
        }
    }
}

/// A declared field that filters and counts may use: found by name in the schema, of a value
/// type, not internal.
#[derive(Debug, Clone, Copy)]
pub struct ValueField {
    /// The field.
    pub field: Field,
    /// The type of its values.
    pub kind: ValueKind,
    /// Whether its values are in the inverted index (term and range lookups).
    pub indexed: bool,
    /// Whether its values are in a fast column (ranges without the index, and counts).
    pub fast: bool,
}

impl ValueField {
    /// The field called `name`, or an error naming the fields that qualify; `purpose` says
    /// what it was wanted for ("filter on", "count").
    pub fn find(schema: &Schema, name: &str, purpose: &str) -> Result<ValueField> {
        let found = schema
            .get_field(name)
            .ok()
            .filter(|_| !schema::is_internal(name))
            .and_then(|field| {
                let entry = schema.get_field_entry(field);
                Some(ValueField {
                    field,
                    kind: ValueKind::of(entry.field_type())?,
                    indexed: entry.is_indexed(),
                    fast: entry.is_fast(),
                })
            });
        found.ok_or_else(|| {
            let allowed: Vec<&str> = schema
                .fields()
                .filter(|(_, entry)| {
                    !schema::is_internal(entry.name())
                        && ValueKind::of(entry.field_type()).is_some()
                })
                .map(|(_, entry)| entry.name())
                .collect();
            Error::Query(format!(
                "cannot {purpose} {name:?}: the fields to {purpose} are the declared fields that \
                 are not text: {}",
                allowed.join(", ")
            ))
        })
    }
}

/// One filter of a list page, as written (`field:value`, `field:[a TO b]`, `field:/a/b`);
/// [`Filter::query`] reads its values by the field's type.
///
/// ```
/// use tantivy_dedup::engine::Filter;
///
/// let filter: Filter = "published_at:[2024-05-01 TO *]".parse()?;
/// assert_eq!(filter.field(), "published_at");
/// assert!("source".parse::<Filter>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    field: String,
    condition: Condition,
}

/// What a filter keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Condition {
    /// The value (a facet: the facet and what is under it; a date alone: that day).
    Equals(String),
    /// Values from `lower` to `upper`, both included; `None` is an open end.
    Between(Option<String>, Option<String>),
}

impl FromStr for Filter {
    type Err = Error;

    fn from_str(text: &str) -> Result<Filter> {
        let invalid = |problem: &str| Error::Query(format!("{problem} in {text:?}; {SYNTAX}"));
        let (field, value) = text
            .split_once(':')
            .ok_or_else(|| invalid("no `:` after the field name"))?;
        let (field, value) = (field.trim(), value.trim());
        if field.is_empty() {
            return Err(invalid("no field name"));
        }
        if value.is_empty() {
            return Err(invalid("no value"));
        }
        let condition = match value.strip_prefix('[') {
            Some(range) => {
                let range = range
                    .strip_suffix(']')
                    .ok_or_else(|| invalid("a range must end with `]`"))?;
                let (lower, upper) = range
                    .split_once(" TO ")
                    .ok_or_else(|| invalid("a range needs ` TO ` between its ends"))?;
                let end = |end: &str| {
                    let end = end.trim();
                    (end != "*").then(|| end.to_owned())
                };
                let (lower, upper) = (end(lower), end(upper));
                if lower.as_deref().is_some_and(str::is_empty)
                    || upper.as_deref().is_some_and(str::is_empty)
                {
                    return Err(invalid("an end of the range is empty"));
                }
                if lower.is_none() && upper.is_none() {
                    return Err(invalid("a range needs at least one end that is not `*`"));
                }
                Condition::Between(lower, upper)
            }
            // `"a b"`: quotes keep a value's spaces visible; they are not part of it.
            None => Condition::Equals(
                value
                    .strip_prefix('"')
                    .and_then(|quoted| quoted.strip_suffix('"'))
                    .unwrap_or(value)
                    .to_owned(),
            ),
        };
        Ok(Filter {
            field: field.to_owned(),
            condition,
        })
    }
}

impl Filter {
    /// The field filtered on.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The Tantivy query that keeps what this filter keeps, its values read by the type of
    /// the field in `schema`; times without an offset are read in `zone`. An indexed field is
    /// looked up by term (or term range); a field that is only fast, by a range over its
    /// column. A field that is neither, or a value of the wrong form, is an [`Error::Query`]
    /// that says what was expected.
    pub fn query(&self, schema: &Schema, zone: TimeZone) -> Result<Box<dyn Query>> {
        let target = ValueField::find(schema, &self.field, "filter on")?;
        if !target.indexed && !target.fast {
            return Err(Error::Query(format!(
                "cannot filter on {:?}: it is neither indexed nor fast; declare it `indexed = true`",
                self.field
            )));
        }
        let term = |value: &str, end: RangeEnd| self.term(target, value, zone, end);
        match &self.condition {
            Condition::Equals(value) if target.kind == ValueKind::Date => {
                // A date alone is its whole day; a time is that second (both ends equal).
                let range = RangeQuery::new(
                    Bound::Included(term(value, RangeEnd::Start)?),
                    Bound::Included(term(value, RangeEnd::End)?),
                );
                Ok(Box::new(range))
            }
            Condition::Equals(value) => {
                let term = term(value, RangeEnd::Start)?;
                Ok(if target.indexed {
                    Box::new(TermQuery::new(term, IndexRecordOption::Basic))
                } else {
                    Box::new(RangeQuery::new(
                        Bound::Included(term.clone()),
                        Bound::Included(term),
                    ))
                })
            }
            Condition::Between(lower, upper) => {
                if target.kind == ValueKind::Facet {
                    return Err(Error::Query(format!(
                        "{:?} is a facet field: filter it by a path (`{}:/a/b`), not a range",
                        self.field, self.field
                    )));
                }
                let bound = |end: &Option<String>, which| match end {
                    Some(value) => term(value, which).map(Bound::Included),
                    None => Ok(Bound::Unbounded),
                };
                let (lower_term, upper_term) =
                    (bound(lower, RangeEnd::Start)?, bound(upper, RangeEnd::End)?);
                if let (Bound::Included(low), Bound::Included(high)) = (&lower_term, &upper_term)
                    && low.serialized_value_bytes() > high.serialized_value_bytes()
                {
                    return Err(Error::Query(format!(
                        "the range of {:?} is empty: {} is after {}",
                        self.field,
                        lower.as_deref().unwrap_or("*"),
                        upper.as_deref().unwrap_or("*")
                    )));
                }
                Ok(Box::new(RangeQuery::new(lower_term, upper_term)))
            }
        }
    }

    /// The term of `value` in `target`'s type.
    fn term(&self, target: ValueField, value: &str, zone: TimeZone, end: RangeEnd) -> Result<Term> {
        let wrong = || {
            Error::Query(format!(
                "{:?} takes {}, got {value:?}",
                self.field,
                target.kind.describe()
            ))
        };
        let field = target.field;
        Ok(match target.kind {
            ValueKind::String => Term::from_field_text(field, value),
            ValueKind::Facet => {
                let facet = Facet::from_text(value).map_err(|_| wrong())?;
                Term::from_facet(field, &facet)
            }
            ValueKind::U64 => Term::from_field_u64(field, value.parse().map_err(|_| wrong())?),
            ValueKind::I64 => Term::from_field_i64(field, value.parse().map_err(|_| wrong())?),
            ValueKind::F64 => {
                let number: f64 = value.parse().map_err(|_| wrong())?;
                if !number.is_finite() {
                    return Err(wrong());
                }
                Term::from_field_f64(field, number)
            }
            ValueKind::Bool => Term::from_field_bool(field, value.parse().map_err(|_| wrong())?),
            ValueKind::Date => {
                let time = zone
                    .parse(value, end)
                    .map_err(|error| Error::Query(format!("{:?}: {error}", self.field)))?;
                Term::from_field_date(field, DateTime::from_timestamp_secs(time))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::collector::Count;
    use tantivy::schema::{FAST, FacetOptions, INDEXED, STORED, STRING, TEXT};
    use tantivy::{Index, TantivyDocument, doc};

    fn parse(text: &str) -> Result<Filter> {
        text.parse()
    }

    #[test]
    fn the_syntax_is_read_or_explained() {
        assert_eq!(
            parse("source:新华网").unwrap().condition,
            Condition::Equals("新华网".to_owned())
        );
        assert_eq!(
            parse(" published_at : [2024-05-01 08:00 TO *] ").unwrap(),
            Filter {
                field: "published_at".to_owned(),
                condition: Condition::Between(Some("2024-05-01 08:00".to_owned()), None),
            }
        );
        assert_eq!(
            parse("n:[* TO 5]").unwrap().condition,
            Condition::Between(None, Some("5".to_owned()))
        );
        // A value may hold a colon (times do), and quotes keep spaces.
        assert_eq!(
            parse("t:2024-05-01T08:00:00+08:00").unwrap().condition,
            Condition::Equals("2024-05-01T08:00:00+08:00".to_owned())
        );
        assert_eq!(
            parse("s:\"a b\"").unwrap().condition,
            Condition::Equals("a b".to_owned())
        );
        for bad in [
            "source",
            ":x",
            "source:",
            "n:[1 TO 2",
            "n:[1 2]",
            "n:[* TO *]",
            "n:[ TO 2]",
        ] {
            let message = parse(bad).unwrap_err().to_string();
            assert!(message.contains("field:[a TO b]"), "{bad}: {message}");
        }
    }

    /// An index of the value types an index may declare, with a few documents.
    fn own_fields_index() -> (Index, Schema) {
        let mut builder = Schema::builder();
        let body = builder.add_text_field("body", TEXT | STORED);
        let channel = builder.add_text_field("channel", STRING | FAST);
        let only_fast = builder.add_text_field("desk", FAST);
        let region = builder.add_facet_field("region", FacetOptions::default());
        let words = builder.add_u64_field("words", INDEXED | FAST);
        let delta = builder.add_i64_field("delta", FAST);
        let score = builder.add_f64_field("score", INDEXED);
        let paid = builder.add_bool_field("paid", INDEXED);
        let at = builder.add_date_field("at", INDEXED | FAST);
        builder.add_u64_field("root", INDEXED | FAST);
        builder.add_u64_field("_seq", FAST);
        builder.add_bytes_field("blob", STORED);
        let schema = builder.build();
        let index = Index::create_in_ram(schema.clone());
        let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
        for i in 0..10u64 {
            let mut document: TantivyDocument = doc!(
                body => "text",
                channel => if i % 2 == 0 { "even" } else { "odd" },
                only_fast => if i < 3 { "front" } else { "back" },
                region => Facet::from(if i < 4 { "/cn/bj" } else { "/cn/sh" }),
                words => i * 100,
                delta => i as i64 - 5,
                score => i as f64 / 2.0,
                paid => i % 3 == 0,
            );
            // 2024-05-01T00:00:00+08:00 plus i hours.
            document.add_date(
                at,
                DateTime::from_timestamp_secs(1_714_492_800 + 3600 * i as i64),
            );
            writer.add_document(document).unwrap();
        }
        writer.commit().unwrap();
        (index, schema)
    }

    #[test]
    fn every_value_type_filters() {
        let (index, schema) = own_fields_index();
        let searcher = index.reader().unwrap().searcher();
        let count = |text: &str| {
            let query = parse(text)
                .unwrap()
                .query(&schema, TimeZone::CHINA)
                .unwrap();
            searcher.search(&*query, &Count).unwrap()
        };
        assert_eq!(count("channel:even"), 5);
        assert_eq!(count("channel:[even TO even]"), 5);
        assert_eq!(count("desk:front"), 3);
        assert_eq!(count("region:/cn"), 10);
        assert_eq!(count("region:/cn/bj"), 4);
        assert_eq!(count("words:300"), 1);
        assert_eq!(count("words:[200 TO *]"), 8);
        assert_eq!(count("delta:[* TO -1]"), 5);
        assert_eq!(count("delta:-5"), 1);
        assert_eq!(count("score:[1.5 TO 2.5]"), 3);
        assert_eq!(count("paid:true"), 4);
        assert_eq!(count("at:2024-05-01"), 10);
        assert_eq!(count("at:[2024-05-01 02:00 TO 2024-05-01 04:00]"), 3);
        assert_eq!(count("at:1714496400"), 1);
        assert_eq!(count("at:[2024-05-02 TO *]"), 0);
    }

    #[test]
    fn what_cannot_be_filtered_is_named() {
        let (_, schema) = own_fields_index();
        let error = |text: &str| {
            parse(text)
                .unwrap()
                .query(&schema, TimeZone::CHINA)
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default()
        };
        for refused in ["body:text", "root:1", "_seq:1", "blob:x", "nothing:x"] {
            let message = error(refused);
            assert!(
                message.contains("channel, desk, region, words, delta, score, paid, at"),
                "{refused}: {message}"
            );
        }
        assert!(error("words:many").contains("a whole number"));
        assert!(error("words:-1").contains("a whole number from 0"));
        assert!(error("score:NaN").contains("a number"));
        assert!(error("paid:yes").contains("true or false"));
        assert!(error("region:cn").contains("facet path"));
        assert!(error("region:[/a TO /b]").contains("not a range"));
        assert!(error("at:yesterday").contains("not a time"));
        assert!(error("words:[5 TO 1]").contains("empty"));
        assert!(error("at:[2024-05-02 TO 2024-05-01]").contains("empty"));
    }
}
