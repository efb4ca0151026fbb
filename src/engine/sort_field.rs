//! Ordering a list page by a field of the platform's own (`sort=likes:desc`): which fields
//! qualify, a story's value in that order, and how such values compare.
//!
//! A story's value is the largest of its matching documents' values for a descending order,
//! the smallest for an ascending one (what Elasticsearch's collapse ranks a group by: its top
//! hit in the sort), over every value of a multi-valued field. Stories without a value come
//! last in both directions, as Elasticsearch's `missing: _last`; so do NaN and infinite
//! values, which JSON cannot carry between a shard and its coordinator.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use tantivy::columnar::{Cardinality, Column};
use tantivy::schema::Schema;
use tantivy::{DateTime, DocId, SegmentReader};

use crate::engine::filter::{ValueField, ValueKind};
use crate::{Error, Result};

/// A field a list page can be ordered by: declared, fast, and of a numeric, date or boolean
/// type (string columns number their values per segment, so their order is not comparable
/// across segments and shards).
///
/// ```
/// use tantivy::schema::{Schema, FAST, INDEXED, STRING, TEXT};
/// use tantivy_dedup::engine::SortField;
///
/// let mut builder = Schema::builder();
/// builder.add_u64_field("likes", FAST);
/// builder.add_u64_field("reposts", INDEXED);
/// builder.add_text_field("source", STRING | FAST);
/// builder.add_text_field("content", TEXT);
/// let schema = builder.build();
/// assert_eq!(SortField::find(&schema, "likes")?.name(), "likes");
/// assert!(SortField::find(&schema, "reposts").unwrap_err().to_string().contains("not a fast field"));
/// assert!(SortField::find(&schema, "source").unwrap_err().to_string().contains("number, date"));
/// assert!(SortField::find(&schema, "content").is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortField {
    name: String,
    kind: ValueKind,
}

impl SortField {
    /// The field `name` of `schema`, or an [`Error::Query`] that says why it cannot order a
    /// list.
    pub fn find(schema: &Schema, name: &str) -> Result<SortField> {
        let field = ValueField::find(schema, name, "sort by").map_err(|_| {
            let sortable: Vec<&str> = schema
                .fields()
                .map(|(_, entry)| entry.name())
                .filter(|other| SortField::find_known(schema, other).is_ok())
                .collect();
            Error::Query(format!(
                "cannot sort by {name:?}: no declared field of that name holds numbers, dates or \
                 booleans; the fields to sort by are the fast ones that do: {}",
                if sortable.is_empty() {
                    "none in this index".to_owned()
                } else {
                    sortable.join(", ")
                }
            ))
        })?;
        SortField::of(name, field)
    }

    /// [`find`](Self::find) for a name the schema has as a value field.
    fn find_known(schema: &Schema, name: &str) -> Result<SortField> {
        SortField::of(name, ValueField::find(schema, name, "sort by")?)
    }

    /// The field `name` found as `field`, when it can order a list.
    fn of(name: &str, field: ValueField) -> Result<SortField> {
        if !field.fast {
            return Err(Error::Query(format!(
                "cannot sort by {name:?}: it is not a fast field (declare it `fast = true`)"
            )));
        }
        if matches!(field.kind, ValueKind::String | ValueKind::Facet) {
            return Err(Error::Query(format!(
                "cannot sort by {name:?}: a list sorts by a field holding a number, date or \
                 boolean, and {name:?} holds text (count it with `facets` instead)"
            )));
        }
        Ok(SortField {
            name: name.to_owned(),
            kind: field.kind,
        })
    }

    /// The field's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field's column in `segment`, read for the largest values of each document when
    /// `descending`, else the smallest.
    pub(crate) fn open(
        &self,
        segment: &SegmentReader,
        descending: bool,
    ) -> tantivy::Result<SortColumn> {
        let fast = segment.fast_fields();
        let name = self.name.as_str();
        let values = match self.kind {
            ValueKind::U64 => fast.column_opt(name)?.map(Values::U64),
            ValueKind::I64 => fast.column_opt(name)?.map(Values::I64),
            ValueKind::F64 => fast.column_opt(name)?.map(Values::F64),
            ValueKind::Bool => fast.column_opt(name)?.map(Values::Bool),
            ValueKind::Date => fast.column_opt(name)?.map(Values::Date),
            // Refused by `find`.
            ValueKind::String | ValueKind::Facet => None,
        };
        let several = values.as_ref().is_some_and(Values::several);
        Ok(SortColumn {
            values,
            several,
            descending,
        })
    }
}

/// A story's value in a field's order, as answers show it (`sort_value`): a number, a time as
/// Unix seconds, or a boolean. Values of one field compare by their number, whatever variant
/// JSON read them back as (a signed field's positive values come back unsigned).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SortValue {
    /// An unsigned integer.
    Unsigned(u64),
    /// A signed integer, or a time (Unix seconds).
    Signed(i64),
    /// A finite floating-point number.
    Float(f64),
    /// A boolean (false before true).
    Bool(bool),
}

impl SortValue {
    /// The order of two values of one field: by number, false before true.
    #[inline]
    pub fn compare(&self, other: &SortValue) -> Ordering {
        use SortValue::{Bool, Float, Signed, Unsigned};
        match (*self, *other) {
            // The values of one column, which a collector compares: one variant.
            (Unsigned(a), Unsigned(b)) => a.cmp(&b),
            (Signed(a), Signed(b)) => a.cmp(&b),
            (Bool(a), Bool(b)) => a.cmp(&b),
            (Float(a), Float(b)) => a.total_cmp(&b),
            (Float(a), b) => a.total_cmp(&b.as_f64()),
            (a, Float(b)) => a.as_f64().total_cmp(&b),
            (a, b) => a.as_i128().cmp(&b.as_i128()),
        }
    }

    fn as_i128(self) -> i128 {
        match self {
            SortValue::Unsigned(value) => i128::from(value),
            SortValue::Signed(value) => i128::from(value),
            SortValue::Bool(value) => i128::from(value),
            // Not reached: floats are compared as floats.
            SortValue::Float(value) => value as i128,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            SortValue::Unsigned(value) => value as f64,
            SortValue::Signed(value) => value as f64,
            SortValue::Float(value) => value,
            SortValue::Bool(value) => f64::from(u8::from(value)),
        }
    }
}

impl std::fmt::Display for SortValue {
    /// The value as JSON writes it.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SortValue::Unsigned(value) => write!(formatter, "{value}"),
            SortValue::Signed(value) => write!(formatter, "{value}"),
            SortValue::Float(value) => write!(formatter, "{value}"),
            SortValue::Bool(value) => write!(formatter, "{value}"),
        }
    }
}

/// In the OpenAPI document: a number or a boolean.
#[cfg(feature = "server")]
impl utoipa::PartialSchema for SortValue {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Type};
        AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .description(Some("A number; a time as Unix seconds")),
            )
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .description(Some("A story's value in the order of a field of one's own"))
            .into()
    }
}

#[cfg(feature = "server")]
impl utoipa::ToSchema for SortValue {}

/// The order of two stories' values in a field's order: present values first, the larger
/// first when `descending`, the smaller otherwise.
#[inline]
pub fn compare_values(a: Option<SortValue>, b: Option<SortValue>, descending: bool) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) if descending => b.compare(&a),
        (Some(a), Some(b)) => a.compare(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Of two values of one story, the one its place in the order goes by.
#[inline]
pub(crate) fn first_of(
    a: Option<SortValue>,
    b: Option<SortValue>,
    descending: bool,
) -> Option<SortValue> {
    match compare_values(a, b, descending) {
        Ordering::Greater => b,
        _ => a,
    }
}

/// A segment's column of a [`SortField`].
pub(crate) struct SortColumn {
    /// `None` when no document of the segment has a value.
    values: Option<Values>,
    /// Whether a document may have several values (else its first is its only one, read
    /// without an iterator: this runs once per hit).
    several: bool,
    descending: bool,
}

enum Values {
    U64(Column<u64>),
    I64(Column<i64>),
    F64(Column<f64>),
    Bool(Column<bool>),
    Date(Column<DateTime>),
}

impl Values {
    fn several(&self) -> bool {
        let cardinality = match self {
            Values::U64(column) => column.get_cardinality(),
            Values::I64(column) => column.get_cardinality(),
            Values::F64(column) => column.get_cardinality(),
            Values::Bool(column) => column.get_cardinality(),
            Values::Date(column) => column.get_cardinality(),
        };
        cardinality == Cardinality::Multivalued
    }
}

impl SortColumn {
    /// `doc`'s value in the order: of its values, the first in the order; `None` without one.
    #[inline]
    pub(crate) fn value(&self, doc: DocId) -> Option<SortValue> {
        let values = self.values.as_ref()?;
        if !self.several {
            return match values {
                Values::U64(column) => column.first(doc).map(SortValue::Unsigned),
                Values::I64(column) => column.first(doc).map(SortValue::Signed),
                Values::F64(column) => column
                    .first(doc)
                    .filter(|value| value.is_finite())
                    .map(SortValue::Float),
                Values::Bool(column) => column.first(doc).map(SortValue::Bool),
                Values::Date(column) => column
                    .first(doc)
                    .map(|time| SortValue::Signed(time.into_timestamp_secs())),
            };
        }
        let descending = self.descending;
        match values {
            Values::U64(column) => first_in_order(
                column.values_for_doc(doc).map(SortValue::Unsigned),
                descending,
            ),
            Values::I64(column) => first_in_order(
                column.values_for_doc(doc).map(SortValue::Signed),
                descending,
            ),
            Values::F64(column) => first_in_order(
                column
                    .values_for_doc(doc)
                    .filter(|value| value.is_finite())
                    .map(SortValue::Float),
                descending,
            ),
            Values::Bool(column) => {
                first_in_order(column.values_for_doc(doc).map(SortValue::Bool), descending)
            }
            Values::Date(column) => first_in_order(
                column
                    .values_for_doc(doc)
                    .map(|time| SortValue::Signed(time.into_timestamp_secs())),
                descending,
            ),
        }
    }
}

/// Of `values`, the first in the order.
#[inline]
fn first_in_order(values: impl Iterator<Item = SortValue>, descending: bool) -> Option<SortValue> {
    values.fold(None, |first, value| {
        first_of(first, Some(value), descending)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_one_field_compare_by_number_whatever_json_read_them_as() {
        let read = |json: &str| serde_json::from_str::<SortValue>(json).unwrap();
        assert_eq!(read("5"), SortValue::Unsigned(5));
        assert_eq!(read("-5"), SortValue::Signed(-5));
        assert_eq!(read("2.5"), SortValue::Float(2.5));
        assert_eq!(read("true"), SortValue::Bool(true));
        // A signed field's 3 comes back unsigned and still orders after its -7.
        assert_eq!(
            SortValue::Unsigned(3).compare(&SortValue::Signed(-7)),
            Ordering::Greater
        );
        assert_eq!(
            SortValue::Unsigned(u64::MAX).compare(&SortValue::Signed(i64::MAX)),
            Ordering::Greater
        );
        assert_eq!(
            SortValue::Float(-0.5).compare(&SortValue::Float(0.25)),
            Ordering::Less
        );
        for value in [
            SortValue::Unsigned(u64::MAX),
            SortValue::Signed(i64::MIN),
            SortValue::Float(-1.0e-300),
            SortValue::Float(f64::MAX),
        ] {
            let json = serde_json::to_string(&value).unwrap();
            assert_eq!(read(&json).compare(&value), Ordering::Equal, "{json}");
        }
    }

    #[test]
    fn present_values_come_first_in_both_directions() {
        let (one, two) = (Some(SortValue::Unsigned(1)), Some(SortValue::Unsigned(2)));
        assert_eq!(compare_values(two, one, true), Ordering::Less);
        assert_eq!(compare_values(one, two, false), Ordering::Less);
        for descending in [true, false] {
            assert_eq!(compare_values(one, None, descending), Ordering::Less);
            assert_eq!(compare_values(None, one, descending), Ordering::Greater);
            assert_eq!(first_of(None, one, descending), one);
        }
        assert_eq!(first_of(one, two, true), two);
        assert_eq!(first_of(one, two, false), one);
    }
}
