//! The Tantivy schema: the declared document fields plus tantivy-dedup's own fields
//! ([`DedupFields`], which any schema can have).

use tantivy::query::{BooleanQuery, ConstScoreQuery, ExistsQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Facet, FacetOptions, Field, IndexRecordOption,
    NumericOptions, STORED, STRING, Schema, SchemaBuilder, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{TantivyDocument, Term};

use crate::Fingerprint;
use crate::config::{DedupConfig, FieldKind, FieldsConfig};
use crate::index::BlockLayout;
use crate::verify::Sketch;
use crate::{Error, Result};

/// The name under which the news tokenizer (normalise, then jieba in search mode) is registered.
pub const TOKENIZER: &str = "news_jieba";

/// The options of a Chinese text field of your own schema: indexed by the crate's tokenizer
/// ([`TOKENIZER`]: normalisation, then jieba) with frequencies and positions (phrases work),
/// not stored (add `| STORED`). Tantivy's `TEXT` splits on spaces and punctuation, which
/// finds no Chinese word; the index must have the tokenizer registered
/// ([`register_tokenizer`](crate::engine::register_tokenizer)).
///
/// ```
/// use tantivy::collector::Count;
/// use tantivy::query::QueryParser;
/// use tantivy::schema::{Schema, STORED};
/// use tantivy::{doc, Index, IndexWriter};
/// use tantivy_dedup::engine::register_tokenizer;
/// use tantivy_dedup::engine::schema::chinese_text;
///
/// let mut builder = Schema::builder();
/// let body = builder.add_text_field("body", chinese_text() | STORED);
/// let index = Index::create_in_ram(builder.build());
/// register_tokenizer(&index);
/// let mut writer: IndexWriter = index.writer(15_000_000)?;
/// writer.add_document(doc!(body => "临河市化工园区今天发生储罐泄漏"))?;
/// writer.commit()?;
/// let query = QueryParser::for_index(&index, vec![body]).parse_query("化工园区")?;
/// assert_eq!(index.reader()?.searcher().search(&query, &Count)?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn chinese_text() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    )
}

/// The simhash of the document's fingerprinted fields (u64, fast and stored).
pub const SIMHASH: &str = "simhash";
/// The cluster's root hash (u64, fast and indexed): the collapse key and the detail query.
pub const ROOT: &str = "root";
/// The order of inserts, for replaying them into the forest on open (u64, fast).
pub const SEQUENCE: &str = "_seq";
/// The event time the forest was given (Unix seconds, i64, fast).
pub const EVENT_TIME: &str = "_time";

/// The digest of the article a live document was made from ([`crate::Article::digest`]), to
/// recognise an unchanged re-send (u64, fast).
pub const DIGEST: &str = "_digest";
/// Whether the document joined an existing cluster when it was added (bool, fast).
pub const DUPLICATE: &str = "_duplicate";
/// Default mode: the shingle sketch the forest verified the insert with
/// ([`crate::verify::Sketch::to_packed_values`]: a header, then two hashes a value; older
/// indexes hold [`crate::verify::Sketch::to_values`], one a value, told apart by the header's
/// top bit, and read as well; u64 values in order, fast), on live documents and tombstones,
/// so that recovery replays the same decisions.
pub const SKETCH: &str = "_sketch";
/// The node a live document came into its cluster through
/// ([`Placement::via`](crate::forest::Placement::via)): its own node when an earlier document
/// had its text, the neighbour it was attached to as a new leaf, none for a cluster's first
/// document (u64, fast). Indexes made before this field
/// existed have none; their story view shows no reprint path.
pub const VIA: &str = "_via";
/// A tombstone's place among the inserts: the sequence number the next insert after its
/// delete took (u64, fast), so that a replay takes the document off its node when the writer
/// did, before a node of the same value could expire and be made again. Indexes made before
/// this field existed have none; their replay takes such deletes off at its end.
pub const DELETED_AT: &str = "_deleted_at";
/// Default mode: the sketch's candidate keys ([`crate::verify::Sketch::keys`]; u64, indexed),
/// so that the check before publishing finds the candidates the forest finds.
pub const SKETCH_KEYS: &str = "_keys";

/// The value of a document's fast field (the first, if several), by field name: `None` when
/// the document has none (tombstones have no `root`, for instance).
pub fn fast_value<T>(
    searcher: &tantivy::Searcher,
    address: tantivy::DocAddress,
    field: &str,
) -> tantivy::Result<Option<T>>
where
    T: tantivy::columnar::HasAssociatedColumnType,
    tantivy::columnar::DynamicColumn: Into<Option<tantivy::columnar::Column<T>>>,
{
    Ok(searcher
        .segment_reader(address.segment_ord)
        .fast_fields()
        .column_opt::<T>(field)?
        .and_then(|column| column.first(address.doc_id)))
}

/// The sketch one document of a segment's `_sketch` column holds: `None` when it has none
/// (seed mode stores none), an error when the values are not a sketch.
pub fn sketch_in(
    column: &tantivy::columnar::Column<u64>,
    doc: tantivy::DocId,
) -> tantivy::Result<Option<Sketch>> {
    let mut values = column.values_for_doc(doc).peekable();
    if values.peek().is_none() {
        return Ok(None);
    }
    Sketch::from_packed_values(values).map(Some).ok_or_else(|| {
        tantivy::TantivyError::InternalError(format!("document {doc} has a damaged {SKETCH}"))
    })
}

/// The sketch a document was verified with, if it has one.
pub fn stored_sketch(
    searcher: &tantivy::Searcher,
    address: tantivy::DocAddress,
) -> tantivy::Result<Option<Sketch>> {
    let fast = searcher.segment_reader(address.segment_ord).fast_fields();
    match fast.column_opt::<u64>(SKETCH)? {
        Some(column) => sketch_in(&column, address.doc_id),
        None => Ok(None),
    }
}

/// Whether a field is one of tantivy-dedup's own (`simhash`, `block0..blockK`, `root`, and every
/// name starting with `_`) rather than a document field: callers may not filter or count on
/// them, since their values are the dedup machinery's, not the articles'.
///
/// ```
/// use tantivy_dedup::engine::schema::is_internal;
///
/// assert!(is_internal("root") && is_internal("block2") && is_internal("_seq"));
/// assert!(!is_internal("source") && !is_internal("blocked"));
/// ```
pub fn is_internal(name: &str) -> bool {
    name == SIMHASH
        || name == ROOT
        || name.starts_with('_')
        || name
            .strip_prefix("block")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// The name of the field holding block `i` of the simhash (`block0`, `block1`, ...).
pub fn block_field_name(block: usize) -> String {
    format!("block{block}")
}

/// The handles of tantivy-dedup's own fields in any Tantivy schema: what a document needs so
/// that it can be collapsed by cluster, found by a near-duplicate lookup, and replayed into
/// the forest when the index is reopened.
///
/// Add them to your own schema with [`add_to`](Self::add_to), or find them in a schema with
/// [`from_schema`](Self::from_schema). Their names are fixed (`simhash`, `block0..blockK`,
/// `root`, and the internal `_seq`, `_time`, `_digest`, `_duplicate`, `_sketch`, `_keys`), so
/// a schema must not use them for anything else.
///
/// Documents are of two sorts. A *live* document has the caller's fields and every dedup
/// field. A *tombstone* stands for a document that was deleted or replaced: it keeps only the
/// insert's `_seq`, `simhash`, `_time` and `_sketch`, so that the forest can be rebuilt exactly
/// as it was (a deleted document may still be what a cluster's root came from). Tombstones
/// have no `root` and no terms, so no keyword query and no collapse ever sees them;
/// [`live`](Self::live) keeps them out of queries that match everything.
///
/// ```
/// use tantivy::schema::{Schema, STORED, TEXT};
/// use tantivy_dedup::DedupConfig;
/// use tantivy_dedup::engine::schema::DedupFields;
///
/// let mut builder = Schema::builder();
/// builder.add_text_field("body", TEXT | STORED);
/// let added = DedupFields::add_to(&mut builder, &DedupConfig::default())?;
/// let schema = builder.build();
/// assert_eq!(added.blocks.len(), 4);
/// assert_eq!(DedupFields::from_schema(&schema)?, added);
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupFields {
    /// See [`SIMHASH`].
    pub simhash: Field,
    /// `block0..blockK`: the simhash's pigeonhole blocks (u64, fast and indexed), one per block of
    /// the layout, for near-duplicate lookups in the index itself.
    pub blocks: Vec<Field>,
    /// See [`ROOT`].
    pub root: Field,
    /// See [`SEQUENCE`].
    pub sequence: Field,
    /// See [`EVENT_TIME`].
    pub event_time: Field,
    /// See [`DIGEST`].
    pub digest: Field,
    /// See [`DUPLICATE`].
    pub duplicate: Field,
    /// See [`SKETCH`].
    pub sketch: Field,
    /// See [`SKETCH_KEYS`].
    pub sketch_keys: Field,
    /// See [`VIA`]; `None` in an index made before it.
    pub via: Option<Field>,
    /// See [`DELETED_AT`]; `None` in an index made before it.
    pub deleted_at: Option<Field>,
}

impl DedupFields {
    /// Adds the dedup fields to `builder`, with as many blocks as `config`'s `max_distance`
    /// needs. Fails on an invalid `max_distance`.
    ///
    /// # Panics
    /// Tantivy's builder panics when a field of one of these names was already added.
    pub fn add_to(builder: &mut SchemaBuilder, config: &DedupConfig) -> Result<DedupFields> {
        let layout = BlockLayout::new(config.max_distance)?;
        Ok(Self::add_for_layout(builder, &layout))
    }

    fn add_for_layout(builder: &mut SchemaBuilder, layout: &BlockLayout) -> DedupFields {
        let fast_indexed = || NumericOptions::default().set_fast().set_indexed();
        let fast = || NumericOptions::default().set_fast();
        DedupFields {
            simhash: builder.add_u64_field(SIMHASH, fast().set_stored()),
            blocks: (0..layout.blocks().len())
                .map(|block| builder.add_u64_field(&block_field_name(block), fast_indexed()))
                .collect(),
            root: builder.add_u64_field(ROOT, fast_indexed()),
            sequence: builder.add_u64_field(SEQUENCE, fast()),
            event_time: builder.add_i64_field(EVENT_TIME, fast()),
            digest: builder.add_u64_field(DIGEST, fast()),
            duplicate: builder.add_bool_field(DUPLICATE, fast()),
            sketch: builder.add_u64_field(SKETCH, fast()),
            sketch_keys: builder
                .add_u64_field(SKETCH_KEYS, NumericOptions::default().set_indexed()),
            via: Some(builder.add_u64_field(VIA, fast())),
            deleted_at: Some(builder.add_u64_field(DELETED_AT, fast())),
        }
    }

    /// Finds the dedup fields in `schema` by name; an error names the first one missing.
    pub fn from_schema(schema: &Schema) -> Result<DedupFields> {
        let field = |name: &str| {
            schema.get_field(name).map_err(|_| {
                Error::Config(format!(
                    "the schema has no `{name}` field: add the dedup fields with \
                     DedupFields::add_to when building it"
                ))
            })
        };
        let blocks: Vec<Field> = (0..)
            .map_while(|block| schema.get_field(&block_field_name(block)).ok())
            .collect();
        if blocks.len() < 2 {
            return Err(Error::Config(
                "the schema has no `block0`, `block1`… fields: add the dedup fields with \
                 DedupFields::add_to when building it"
                    .to_owned(),
            ));
        }
        Ok(DedupFields {
            simhash: field(SIMHASH)?,
            blocks,
            root: field(ROOT)?,
            sequence: field(SEQUENCE)?,
            event_time: field(EVENT_TIME)?,
            digest: field(DIGEST)?,
            duplicate: field(DUPLICATE)?,
            sketch: field(SKETCH)?,
            sketch_keys: field(SKETCH_KEYS)?,
            via: schema.get_field(VIA).ok(),
            deleted_at: schema.get_field(DELETED_AT).ok(),
        })
    }

    /// Checks that these fields were made for `config`: as many blocks as its `max_distance`
    /// cuts a fingerprint into.
    pub fn check(&self, config: &DedupConfig) -> Result<()> {
        let blocks = BlockLayout::new(config.max_distance)?.blocks().len();
        if self.blocks.len() != blocks {
            return Err(Error::Config(format!(
                "the schema has {} block fields but max_distance = {} needs {blocks}: open the \
                 index with the settings it was built with",
                self.blocks.len(),
                config.max_distance
            )));
        }
        Ok(())
    }

    /// The query for every live document of the cluster whose root is `root` (the detail
    /// page's query; tombstones have no root, so it never finds one).
    pub fn cluster_query(&self, root: Fingerprint) -> TermQuery {
        TermQuery::new(
            Term::from_field_u64(self.root, root.0),
            IndexRecordOption::Basic,
        )
    }

    /// `query` restricted to live documents, leaving tombstones out: needed only for queries
    /// that can match a document without any term of yours, such as Tantivy's `AllQuery`.
    pub fn live(&self, query: Box<dyn Query>) -> BooleanQuery {
        BooleanQuery::new(vec![
            (Occur::Must, query),
            // A filter: it scores 0, so the caller's scores are unchanged.
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(ExistsQuery::new(ROOT.to_owned(), false)),
                    0.0,
                )),
            ),
        ])
    }
}

/// The handles of every field of a news index: the declared fields, and the dedup fields.
#[derive(Debug, Clone)]
pub struct NewsFields {
    /// The external id (string, indexed and stored).
    pub id: Field,
    /// The headline (text).
    pub title: Field,
    /// The body (text).
    pub content: Field,
    /// The outlet (string, fast).
    pub source: Field,
    /// The address (string).
    pub url: Field,
    /// The publication time, or the arrival time for an article without one (date, fast).
    pub published_at: Field,
    /// tantivy-dedup's own fields.
    pub dedup: DedupFields,
    /// Which text fields are indexed (searchable by keyword).
    pub searchable: Vec<Field>,
    /// Whether `source` can be filtered on.
    pub source_indexed: bool,
    /// Whether `published_at` can be filtered on.
    pub published_at_indexed: bool,
    /// The platform's own fields (`[fields.NAME]` beyond the built-in six), in name order.
    pub own: Vec<OwnField>,
}

/// How many fields are built in (`id`, `title`, `content`, `source`, `url`, `published_at`):
/// the first of the schema.
const BUILT_IN_FIELD_COUNT: usize = 6;

/// A field of the platform's own in the schema.
///
/// ```
/// use tantivy_dedup::config::{Config, FieldKind};
/// use tantivy_dedup::engine::schema::build_schema;
/// use tantivy_dedup::index::BlockLayout;
///
/// let config = Config::from_toml_str("[fields.platform]\ntype = \"facet\"\n")?;
/// let (schema, fields) = build_schema(&config.fields, &BlockLayout::new(3)?);
/// assert_eq!(fields.own[0].name, "platform");
/// assert_eq!(fields.own[0].kind, FieldKind::Facet);
/// assert_eq!(schema.get_field("platform")?, fields.own[0].field);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnField {
    /// Its name, which is also its Tantivy field's name.
    pub name: String,
    /// Its handle.
    pub field: Field,
    /// Its type.
    pub kind: FieldKind,
    /// Whether its values are stored (and shown in results).
    pub stored: bool,
    /// Whether it is indexed (text: searchable by keyword).
    pub indexed: bool,
}

impl OwnField {
    /// The field's stored values in a document, as JSON: `None` when it has none (or the
    /// field is not stored), one value as it is, several as an array. Dates are Unix seconds
    /// (as `published_at` is shown), facets their paths.
    pub fn stored_json(&self, document: &TantivyDocument) -> Option<serde_json::Value> {
        use serde_json::Value as Json;
        let mut values: Vec<Json> = document
            .get_all(self.field)
            .filter_map(|value| match self.kind {
                FieldKind::Text | FieldKind::String => value.as_str().map(Json::from),
                FieldKind::I64 => value.as_i64().map(Json::from),
                FieldKind::U64 => value.as_u64().map(Json::from),
                FieldKind::F64 => value.as_f64().map(Json::from),
                FieldKind::Bool => value.as_bool().map(Json::from),
                FieldKind::Date => value
                    .as_datetime()
                    .map(|time| Json::from(time.into_timestamp_secs())),
                FieldKind::Facet => value
                    .as_facet()
                    .and_then(|encoded| Facet::from_encoded(encoded.as_bytes().to_vec()).ok())
                    .map(|facet| Json::from(facet.to_path_string())),
            })
            .collect();
        match values.len() {
            0 => None,
            1 => values.pop(),
            _ => Some(Json::Array(values)),
        }
    }
}

/// Builds the Tantivy schema of a news index: the declared fields, then the dedup fields for a
/// simhash cut into `layout`'s blocks.
///
/// ```
/// use tantivy_dedup::config::FieldsConfig;
/// use tantivy_dedup::engine::schema::build_schema;
/// use tantivy_dedup::index::BlockLayout;
///
/// let (schema, fields) = build_schema(&FieldsConfig::default(), &BlockLayout::new(3).unwrap());
/// assert_eq!(fields.dedup.blocks.len(), 4);
/// assert!(schema.get_field("root").is_ok());
/// assert!(schema.get_field_entry(fields.dedup.root).is_fast());
/// ```
pub fn build_schema(declared: &FieldsConfig, layout: &BlockLayout) -> (Schema, NewsFields) {
    let mut builder = Schema::builder();
    let mut searchable = Vec::new();
    let mut handles = Vec::new();
    let mut own = Vec::new();
    let mut source_indexed = false;
    let mut published_at_indexed = false;
    for (position, field) in declared.resolved().into_iter().enumerate() {
        let name = field.name.as_str();
        let numeric = || {
            let options = NumericOptions::default();
            let options = if field.indexed {
                options.set_indexed()
            } else {
                options
            };
            let options = if field.stored {
                options.set_stored()
            } else {
                options
            };
            if field.fast {
                options.set_fast()
            } else {
                options
            }
        };
        let handle = match field.kind {
            FieldKind::Text => {
                let mut options = if field.indexed {
                    chinese_text()
                } else {
                    TextOptions::default()
                };
                if field.stored {
                    options = options.set_stored();
                }
                let handle = builder.add_text_field(name, options);
                if field.indexed {
                    searchable.push(handle);
                }
                handle
            }
            FieldKind::String => {
                let mut options = if field.indexed {
                    STRING
                } else {
                    TextOptions::default()
                };
                if field.stored {
                    options = options | STORED;
                }
                if field.fast {
                    options = options | FAST;
                }
                if name == "source" {
                    source_indexed = field.indexed;
                }
                builder.add_text_field(name, options)
            }
            FieldKind::I64 => builder.add_i64_field(name, numeric()),
            FieldKind::U64 => builder.add_u64_field(name, numeric()),
            FieldKind::F64 => builder.add_f64_field(name, numeric()),
            FieldKind::Bool => builder.add_bool_field(name, numeric()),
            FieldKind::Date => {
                let mut options = DateOptions::default().set_precision(DateTimePrecision::Seconds);
                if field.fast {
                    options = options.set_fast();
                }
                if field.indexed {
                    options = options.set_indexed();
                }
                if field.stored {
                    options = options.set_stored();
                }
                if name == "published_at" {
                    published_at_indexed = field.indexed;
                }
                builder.add_date_field(name, options)
            }
            FieldKind::Facet => {
                let options = FacetOptions::default();
                builder.add_facet_field(
                    name,
                    if field.stored {
                        options.set_stored()
                    } else {
                        options
                    },
                )
            }
        };
        if position < BUILT_IN_FIELD_COUNT {
            handles.push(handle);
        } else {
            own.push(OwnField {
                field: handle,
                kind: field.kind,
                stored: field.stored,
                indexed: field.indexed,
                name: field.name,
            });
        }
    }
    let dedup = DedupFields::add_for_layout(&mut builder, layout);
    let schema = builder.build();
    let fields = NewsFields {
        id: handles[0],
        title: handles[1],
        content: handles[2],
        source: handles[3],
        url: handles[4],
        published_at: handles[5],
        dedup,
        searchable,
        source_indexed,
        published_at_indexed,
        own,
    };
    (schema, fields)
}

/// Dedup fields added after the first release, in the order they were added. They come
/// last in a schema, so an index made before one of them has the same schema without it and
/// keeps working without what that field gives ([`DedupFields::via`] is `None`).
const ADDED_LATER: [&str; 2] = [VIA, DELETED_AT];

/// Checks that an existing index's schema is the one these settings build, so that an index
/// is never written with fields it was not created with. An index that lacks only fields
/// added in later releases ([`VIA`], [`DELETED_AT`]) passes.
pub fn check_schema(existing: &Schema, expected: &Schema) -> Result<()> {
    if existing == expected || *existing == without_absent_later_fields(existing, expected) {
        return Ok(());
    }
    let differing = expected
        .fields()
        .map(|(_, entry)| entry.name())
        .find(|name| {
            let want = expected
                .get_field(name)
                .map(|field| expected.get_field_entry(field));
            let have = existing
                .get_field(name)
                .map(|field| existing.get_field_entry(field));
            match (want, have) {
                (Ok(want), Ok(have)) => want != have,
                _ => true,
            }
        })
        .unwrap_or("(field set)");
    Err(Error::Config(format!(
        "the index was built with a different schema (field `{differing}` differs); use the \
         settings it was created with, or a new index directory"
    )))
}

/// `expected` without the [`ADDED_LATER`] fields that `existing` does not have.
fn without_absent_later_fields(existing: &Schema, expected: &Schema) -> Schema {
    let mut builder = Schema::builder();
    for (_, entry) in expected.fields() {
        let absent_later_field =
            ADDED_LATER.contains(&entry.name()) && existing.get_field(entry.name()).is_err();
        if !absent_later_field {
            builder.add_field(entry.clone());
        }
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::schema::NumericOptions;
    use tantivy::{Index, TantivyDocument};

    /// Indexes written before the sketches were packed two hashes a value keep them one a
    /// value: both read back as the same sketch.
    #[test]
    fn sketches_read_the_same_packed_or_one_hash_a_value() {
        let sketch = Sketch::of(
            &["国务院常务会议今天召开。会议部署推进新型城镇化建设工作。"],
            200,
        );
        let mut builder = tantivy::schema::Schema::builder();
        let field = builder.add_u64_field(SKETCH, NumericOptions::default().set_fast());
        let index = Index::create_in_ram(builder.build());
        let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let empty = Sketch::default();
        for values in [
            sketch.to_values().collect::<Vec<_>>(),
            sketch.to_packed_values().collect(),
            Vec::new(),
            empty.to_values().collect(),
            empty.to_packed_values().collect(),
        ] {
            let mut document = TantivyDocument::new();
            for value in values {
                document.add_u64(field, value);
            }
            writer.add_document(document).unwrap();
        }
        writer.commit().unwrap();
        let searcher = index.reader().unwrap().searcher();
        let column = searcher
            .segment_reader(0)
            .fast_fields()
            .u64(SKETCH)
            .unwrap();
        assert_eq!(sketch_in(&column, 0).unwrap(), Some(sketch.clone()));
        assert_eq!(sketch_in(&column, 1).unwrap(), Some(sketch));
        assert_eq!(
            sketch_in(&column, 2).unwrap(),
            None,
            "no sketch (seed mode)"
        );
        assert_eq!(
            sketch_in(&column, 3).unwrap(),
            Some(empty.clone()),
            "an empty sketch"
        );
        assert_eq!(
            sketch_in(&column, 4).unwrap(),
            Some(empty),
            "an empty sketch, packed"
        );
    }
}
