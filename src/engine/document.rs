//! The document type the writer hands to Tantivy.
//!
//! Tantivy indexes any type that implements its [`Document`] trait without converting it, so
//! the writer's documents are plain lists of values, and their text values carry the analysis
//! made on the insert path (see the tokenizer module for how Tantivy gets to use it).

use std::sync::Arc;

use tantivy::DateTime;
use tantivy::schema::document::{ReferenceValue, ReferenceValueLeaf, Value};
use tantivy::schema::{Document, Facet, Field};

use crate::engine::dedup_writer::DedupDocument;
use crate::engine::tokenizer;
use crate::text::AnalyzedText;

/// One value of a [`NewsDocument`].
#[derive(Debug, Clone)]
pub enum NewsValue {
    /// Text Tantivy tokenizes itself (string fields) or only stores.
    Str(String),
    /// Raw text with its analysis: Tantivy stores the text and indexes the analysis's tokens.
    Analyzed(String, Arc<AnalyzedText>),
    /// An unsigned integer (hashes, sequence numbers).
    U64(u64),
    /// A signed integer (event time).
    I64(i64),
    /// A floating-point number.
    F64(f64),
    /// A date.
    Date(DateTime),
    /// A flag.
    Bool(bool),
    /// A facet's path.
    Facet(Facet),
}

impl<'a> Value<'a> for &'a NewsValue {
    type ArrayIter = std::iter::Empty<Self>;
    type ObjectIter = std::iter::Empty<(&'a str, Self)>;

    fn as_value(&self) -> ReferenceValue<'a, Self> {
        let leaf = match self {
            NewsValue::Str(text) => ReferenceValueLeaf::Str(text),
            NewsValue::Analyzed(text, analysis) => {
                // Tantivy reads the value right before it tokenizes it, on the same thread.
                tokenizer::offer(text, analysis);
                ReferenceValueLeaf::Str(text)
            }
            NewsValue::U64(value) => ReferenceValueLeaf::U64(*value),
            NewsValue::I64(value) => ReferenceValueLeaf::I64(*value),
            NewsValue::Date(value) => ReferenceValueLeaf::Date(*value),
            NewsValue::Bool(value) => ReferenceValueLeaf::Bool(*value),
            NewsValue::F64(value) => ReferenceValueLeaf::F64(*value),
            NewsValue::Facet(facet) => ReferenceValueLeaf::Facet(facet.encoded_str()),
        };
        ReferenceValue::Leaf(leaf)
    }
}

/// A document as a list of field values, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct NewsDocument {
    values: Vec<(Field, NewsValue)>,
}

impl NewsDocument {
    /// Adds a value to a field.
    pub fn add(&mut self, field: Field, value: NewsValue) {
        self.values.push((field, value));
    }
}

impl DedupDocument for NewsDocument {
    fn add_u64(&mut self, field: Field, value: u64) {
        self.add(field, NewsValue::U64(value));
    }

    fn add_i64(&mut self, field: Field, value: i64) {
        self.add(field, NewsValue::I64(value));
    }

    fn add_bool(&mut self, field: Field, value: bool) {
        self.add(field, NewsValue::Bool(value));
    }

    fn add_date(&mut self, field: Field, value: DateTime) {
        self.add(field, NewsValue::Date(value));
    }
}

type FieldValues<'a> = std::iter::Map<
    std::slice::Iter<'a, (Field, NewsValue)>,
    fn(&'a (Field, NewsValue)) -> (Field, &'a NewsValue),
>;

impl Document for NewsDocument {
    type Value<'a> = &'a NewsValue;
    type FieldsValuesIter<'a> = FieldValues<'a>;

    fn iter_fields_and_values(&self) -> FieldValues<'_> {
        self.values.iter().map(|(field, value)| (*field, value))
    }
}
