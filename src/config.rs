//! Dedup settings, as declared in the `[dedup]` table of `schema/news.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::index::MAX_DISTANCE;
use crate::local_time::TimeZone;
use crate::text::Weighting;
use crate::verify::Verifier;
use crate::{Error, Result};

/// Which algorithm decides near-duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The documented algorithm and nothing else: simhash, pigeonhole index, forest, expiry.
    Seed,
    /// The seed algorithm plus whatever improves accuracy while keeping its stored fields,
    /// forest rules and invariants.
    #[default]
    Default,
}

impl Mode {
    /// Every mode, by the name the configuration and the command line use.
    pub const ALL: [(&'static str, Mode); 2] = [("seed", Mode::Seed), ("default", Mode::Default)];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, mode)| *mode == self)
            .map_or("default", |(name, _)| name)
    }
}

impl std::str::FromStr for Mode {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| {
                Error::Config(format!(
                    "mode must be \"seed\" or \"default\", got {text:?}"
                ))
            })
    }
}

/// Texts shorter than this many characters are short texts, unless the configuration says
/// otherwise.
pub const DEFAULT_SHORT_TEXT_CHARS: usize = 200;

/// The `[dedup]` key added after indexes were made, which an index's settings file may lack
/// ([`Config::from_index_settings`]).
const SOURCE_CHROME: &str = "source_chrome";

/// How near-duplicates are detected and how long clusters live.
///
/// `DedupConfig::default()` equals the `[dedup]` table of the shipped `schema/news.toml`.
///
/// ```
/// use tantivy_dedup::DedupConfig;
///
/// let config = DedupConfig::from_toml_str("[dedup]\nmax_distance = 4\nwindow = \"3d\"\n").unwrap();
/// assert_eq!(config.max_distance, 4);
/// assert_eq!(config.window_seconds(), 3 * 86_400);
/// assert_eq!(config.fields, vec!["content".to_string()]); // the rest keep their defaults
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DedupConfig {
    /// `seed` or `default`.
    pub mode: Mode,
    /// `k`: fingerprints at Hamming distance `<= k` are near-duplicates.
    pub max_distance: u32,
    /// How long a cluster lives after its last document, in event time ("7d", "36h").
    #[serde(with = "humantime_serde_compat")]
    pub window: Duration,
    /// Feature weights; unset, the mode's own: `tf` in seed mode, `log-tf` in default mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weighting: Option<Weighting>,
    /// Which text fields feed the fingerprint, joined by a line break: `title`, `content`, or
    /// text fields of the platform's own (`[fields.NAME]`, `type = "text"`).
    pub fields: Vec<String>,
    /// Fingerprint only the longest sentence.
    pub longest_sentence: bool,
    /// Learn each source's chrome from the stream (the lines a source repeats at the ends of
    /// its own pages: navigation, editor lines, disclaimers, copyright) and sign its pages
    /// without it ([`chrome`](crate::chrome)). Only documents with a `source` are read. An
    /// index made before this setting existed keeps deciding without it.
    pub source_chrome: bool,
    /// Default mode: texts with at most this many distinct shingles (about this many Chinese
    /// characters or English words) are verified on every shingle; longer texts on a
    /// consistent sample of this many. Its default is also `eval`'s long/short split (in
    /// characters).
    pub short_text_chars: usize,
    /// Default mode: the share of the shorter text's shingles the longer must contain for a
    /// candidate to verify.
    pub min_containment: f64,
    /// Default mode: the share of both texts' shingles they must share (Jaccard) for a candidate
    /// to verify.
    pub min_jaccard: f64,
    /// Default mode: texts with fewer shingles than this (about this many letters) are posts,
    /// whose pairs need [`min_jaccard_post`](Self::min_jaccard_post): a post wholly contained
    /// in a longer text is mostly a quote of it, not a copy.
    pub post_chars: usize,
    /// Default mode: the Jaccard a pair needs when its smaller text is a post.
    pub min_jaccard_post: f64,
    /// Default mode: the share of the figure shingles (shingles with a digit) of the text with
    /// fewer that the other must share, so that bulletins of one template with other figures
    /// stay apart.
    pub min_figure_containment: f64,
    /// How many tables the pigeonhole index uses: `max_distance + 1` (the default, one a block)
    /// or one of Manku et al.'s permuted layouts (for k = 3: 10, 16 or 20), whose longer keys
    /// keep buckets small at billions of fingerprints (docs/tables.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tables: Option<usize>,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            mode: Mode::Default,
            max_distance: 3,
            window: Duration::from_secs(7 * 86_400),
            weighting: None,
            fields: vec!["content".to_owned()],
            longest_sentence: false,
            source_chrome: true,
            short_text_chars: DEFAULT_SHORT_TEXT_CHARS,
            min_containment: crate::verify::DEFAULT_MIN_CONTAINMENT,
            min_jaccard: crate::verify::DEFAULT_MIN_JACCARD,
            post_chars: crate::verify::DEFAULT_POST_SHINGLES,
            min_jaccard_post: crate::verify::DEFAULT_MIN_JACCARD_POST,
            min_figure_containment: crate::verify::DEFAULT_MIN_FIGURE_CONTAINMENT,
            tables: None,
        }
    }
}

/// A whole settings file such as `schema/news.toml`: the dedup settings (`[dedup]`), the
/// document fields (`[fields.*]`) and the index's own settings (`[index]`). Every table and
/// every key may be left out; what is missing takes its default.
///
/// ```
/// use tantivy_dedup::config::Config;
///
/// let config = Config::from_toml_str(
///     "[dedup]\nmax_distance = 4\n[fields.content]\nstored = false\n[index]\nretention = \"30d\"\n",
/// ).unwrap();
/// assert_eq!(config.dedup.max_distance, 4);
/// assert_eq!(config.fields.content.stored, Some(false));
/// assert_eq!(config.index.retention_seconds(), Some(30 * 86_400));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How near-duplicates are found and how long clusters live.
    pub dedup: DedupConfig,
    /// The document fields and their options.
    pub fields: FieldsConfig,
    /// The index's own settings.
    pub index: IndexConfig,
    /// The HTTP service's settings (`serve`). Not part of an index: never written to its
    /// settings file.
    #[serde(skip_serializing)]
    pub server: ServerConfig,
}

impl Config {
    /// Reads a TOML text and checks it.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let config: Config =
            toml::from_str(text).map_err(|error| Error::Config(error.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and checks a TOML file such as `schema/news.toml`.
    pub fn from_path(path: &Path) -> Result<Self> {
        Self::read(path, |_| Ok(()))
    }

    /// Reads an index's own settings file (what [`to_toml`](Self::to_toml) wrote when the
    /// index was created), strictly: every `[dedup]` key that `to_toml` always writes must be
    /// there, because those settings decide the index's clusters, and a default put in place
    /// of one (an emptied file, a lost line) would silently change every later decision. The
    /// keys `to_toml` writes only when set (`weighting`, `tables`) mean "unset" when absent.
    ///
    /// `[fields]` may still take its defaults: every field option is part of the Tantivy
    /// schema, which the index's meta.json records and every open compares
    /// ([`check_schema`](crate::engine::schema::check_schema)). `[index]` may change from one
    /// run to the next anyway.
    ///
    /// A key added after an index was made (`source_chrome`) takes the value that keeps the
    /// index deciding as it did.
    pub fn from_index_settings(path: &Path) -> Result<Self> {
        let mut added_later = false;
        let mut config = Self::read(path, |text| {
            added_later = DedupConfig::lacks_source_chrome(text);
            DedupConfig::require_every_key(text)
        })?;
        if added_later {
            config.dedup.source_chrome = false;
        }
        Ok(config)
    }

    /// Reads a TOML file, runs `check` on its text, then reads and checks the settings.
    fn read(path: &Path, check: impl FnOnce(&str) -> Result<()>) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        check(&text)
            .and_then(|()| Self::from_toml_str(&text))
            .map(|mut config| {
                if let (Some(user_dict), Some(dir)) = (&mut config.index.user_dict, path.parent()) {
                    *user_dict = dir.join(&*user_dict);
                }
                config
            })
            .map_err(|error| Error::ConfigFile {
                path: path.to_owned(),
                message: match error {
                    Error::Config(message) => message,
                    other => other.to_string(),
                },
            })
    }

    /// Checks every table.
    pub fn validate(&self) -> Result<()> {
        self.dedup.validate()?;
        self.fields.validate()?;
        self.fields.check_fingerprinted(&self.dedup.fields)?;
        self.index.validate()?;
        self.server.validate()
    }

    /// The settings as TOML, in the format [`Config::from_toml_str`] reads.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

/// The kinds of document field: the built-in fields' and those a platform declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FieldKind {
    /// Free text, split into words by jieba for keyword search.
    Text,
    /// One exact value (an id, an outlet's name, a URL): found only whole.
    String,
    /// A signed 64-bit integer.
    I64,
    /// An unsigned 64-bit integer.
    U64,
    /// A 64-bit floating-point number.
    F64,
    /// `true` or `false`.
    Bool,
    /// A point in time: RFC 3339 text or Unix seconds in the input, whole seconds in the index.
    Date,
    /// A hierarchical path such as `/weibo/repost`, for facet counts and prefix filters.
    Facet,
}

impl FieldKind {
    /// The name the settings file uses (`type = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            FieldKind::Text => "text",
            FieldKind::String => "string",
            FieldKind::I64 => "i64",
            FieldKind::U64 => "u64",
            FieldKind::F64 => "f64",
            FieldKind::Bool => "bool",
            FieldKind::Date => "date",
            FieldKind::Facet => "facet",
        }
    }
}

/// The options of one document field; what is left out takes the field's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldOptions {
    /// The field's kind: required for a field of the platform's own, fixed for a built-in one
    /// (stating it there documents the schema).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<FieldKind>,
    /// Whether the value is kept, to be shown in results [default: true].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored: Option<bool>,
    /// Whether the field can be searched (text) or filtered on (the other kinds) [default:
    /// true, but false for `url`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed: Option<bool>,
    /// Whether the values are kept in a column, for sorting, ranges, facet counts and
    /// collectors [default: true for a field of one's own that is not text; among the
    /// built-ins, `source` and `published_at`]. Text cannot be fast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast: Option<bool>,
    /// The input key the value is read from [default: the field's name], so that data with
    /// `date` instead of `published_at` needs no rewriting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl FieldOptions {
    /// The input key of a field of this name with these options.
    pub fn input_key<'a>(&'a self, name: &'a str) -> &'a str {
        self.from.as_deref().unwrap_or(name)
    }
}

/// A field's resolved options: what the Tantivy schema is built from, and what an index's
/// settings must agree on (the input key is not part of it: it may change between runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedField {
    /// The field's name.
    pub name: String,
    /// Its kind.
    pub kind: FieldKind,
    /// Whether its value is kept.
    pub stored: bool,
    /// Whether it is searchable or filterable.
    pub indexed: bool,
    /// Whether its values are in a column (fast field).
    pub fast: bool,
}

/// The built-in fields: name, kind, and whether they are indexed and fast by default.
const BUILT_IN_FIELDS: [(&str, FieldKind, bool, bool); 6] = [
    ("id", FieldKind::String, true, false),
    ("title", FieldKind::Text, true, false),
    ("content", FieldKind::Text, true, false),
    ("source", FieldKind::String, true, true),
    ("url", FieldKind::String, false, false),
    ("published_at", FieldKind::Date, true, true),
];

/// The news schema's document fields, as declared in `[fields.*]` of `schema/news.toml`.
///
/// Six fields are built in (an article's `id`, `title`, `content`, `source`, `url` and
/// `published_at`): their kinds are fixed, their options are not, but `id` is always indexed
/// and stored (documents are replaced and shown by it) and `source` and `published_at` are
/// always fast (collapse reads them). Any other `[fields.NAME]` is a field of the platform's
/// own ([`own`](Self::own)), with a `type`; its name is `[a-z][a-z0-9_]*` and not one of the
/// dedup fields (`simhash`, `root`, `block0`...). Every field may be read from another input
/// key (`from`), and no two fields read the same key.
///
/// ```
/// use tantivy_dedup::config::{Config, FieldKind};
///
/// let config = Config::from_toml_str(
///     "[fields.likes]\ntype = \"u64\"\n[fields.published_at]\nfrom = \"date\"\n",
/// )?;
/// let likes = config.fields.resolved().into_iter().find(|field| field.name == "likes").unwrap();
/// assert_eq!((likes.kind, likes.stored, likes.indexed, likes.fast), (FieldKind::U64, true, true, true));
/// assert_eq!(config.fields.published_at.input_key("published_at"), "date");
/// assert!(Config::from_toml_str("[fields.root]\ntype = \"u64\"\n").is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FieldsConfig {
    /// The article's id.
    pub id: FieldOptions,
    /// The headline.
    pub title: FieldOptions,
    /// The body.
    pub content: FieldOptions,
    /// The outlet.
    pub source: FieldOptions,
    /// The address.
    pub url: FieldOptions,
    /// The publication time.
    pub published_at: FieldOptions,
    /// The platform's own fields, by name (every other `[fields.NAME]` table).
    #[serde(flatten)]
    pub own: BTreeMap<String, FieldOptions>,
}

impl FieldsConfig {
    /// The built-in fields' options, in schema order.
    fn built_in(&self) -> [&FieldOptions; 6] {
        [
            &self.id,
            &self.title,
            &self.content,
            &self.source,
            &self.url,
            &self.published_at,
        ]
    }

    /// Every field with its options, by name: the built-in ones, then the platform's own in
    /// name order (the schema's order).
    pub fn declared(&self) -> impl Iterator<Item = (&str, &FieldOptions)> {
        BUILT_IN_FIELDS
            .iter()
            .map(|(name, ..)| *name)
            .zip(self.built_in())
            .chain(
                self.own
                    .iter()
                    .map(|(name, options)| (name.as_str(), options)),
            )
    }

    /// Every field with its options resolved against the defaults, in schema order. A field
    /// of one's own without a `type` (which [`validate`](Self::validate) refuses) is taken as
    /// text.
    pub fn resolved(&self) -> Vec<ResolvedField> {
        let resolve = |name: &str, kind, options: &FieldOptions, indexed, fast| ResolvedField {
            name: name.to_owned(),
            kind,
            stored: options.stored.unwrap_or(true),
            indexed: options.indexed.unwrap_or(indexed) || kind == FieldKind::Facet,
            fast: options.fast.unwrap_or(fast) || kind == FieldKind::Facet,
        };
        let built_in = BUILT_IN_FIELDS.iter().zip(self.built_in()).map(
            |(&(name, kind, indexed, fast), options)| resolve(name, kind, options, indexed, fast),
        );
        let own = self.own.iter().map(|(name, options)| {
            let kind = options.kind.unwrap_or(FieldKind::Text);
            resolve(name, kind, options, true, kind != FieldKind::Text)
        });
        built_in.chain(own).collect()
    }

    /// The names of the text fields, which can feed the fingerprint.
    pub fn text_fields(&self) -> Vec<String> {
        self.resolved()
            .into_iter()
            .filter(|field| field.kind == FieldKind::Text)
            .map(|field| field.name)
            .collect()
    }

    /// Checks every field: the built-ins' kinds and fixed options, the names, kinds and
    /// options of one's own, and that no two fields read one input key.
    pub fn validate(&self) -> Result<()> {
        let refuse =
            |name: &str, problem: String| Err(Error::Config(format!("fields.{name}: {problem}")));
        for (&(name, kind, ..), options) in BUILT_IN_FIELDS.iter().zip(self.built_in()) {
            if let Some(declared) = options.kind.filter(|declared| *declared != kind) {
                return refuse(
                    name,
                    format!(
                        "type must be \"{}\" (a built-in field's type is fixed), got \"{}\"",
                        kind.name(),
                        declared.name()
                    ),
                );
            }
        }
        if self.id.stored == Some(false) || self.id.indexed == Some(false) {
            return refuse(
                "id",
                "must stay indexed and stored (documents are replaced and shown by id)".to_owned(),
            );
        }
        for (name, options) in [
            ("source", &self.source),
            ("published_at", &self.published_at),
        ] {
            if options.fast == Some(false) {
                return refuse(name, "must stay fast (collapse reads it)".to_owned());
            }
        }
        for (name, options) in &self.own {
            if let Some(problem) = own_name_problem(name) {
                return refuse(name, problem);
            }
            if options.kind.is_none() {
                return refuse(
                    name,
                    format!(
                        "a field of your own needs a `type`: one of {}; the built-in fields are {}",
                        ALL_KINDS.map(FieldKind::name).join(", "),
                        BUILT_IN_FIELDS.map(|(name, ..)| name).join(", ")
                    ),
                );
            }
        }
        for (field, (name, options)) in self.resolved().iter().zip(self.declared()) {
            let problem = match field.kind {
                FieldKind::Text if options.fast == Some(true) => {
                    "text cannot be fast (declare a `string` field for exact values)"
                }
                FieldKind::Facet
                    if options.indexed == Some(false) || options.fast == Some(false) =>
                {
                    "a facet is always indexed and fast"
                }
                _ if options.from.as_deref().is_some_and(str::is_empty) => {
                    "`from` must name an input key"
                }
                _ => continue,
            };
            return refuse(name, problem.to_owned());
        }
        let mut readers: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, options) in self.declared() {
            let key = options.input_key(name);
            if let Some(other) = readers.insert(key, name) {
                return Err(Error::Config(format!(
                    "fields.{other} and fields.{name} both read the input key `{key}`; give one \
                     of them another `from`"
                )));
            }
        }
        Ok(())
    }

    /// Checks that every field named in `[dedup] fields` is a text field.
    fn check_fingerprinted(&self, fingerprinted: &[String]) -> Result<()> {
        let text = self.text_fields();
        match fingerprinted.iter().find(|name| !text.contains(name)) {
            Some(unknown) => Err(Error::Config(format!(
                "dedup.fields: {unknown:?} is not a text field; choose from {text:?}"
            ))),
            None => Ok(()),
        }
    }
}

/// Every kind, for messages.
const ALL_KINDS: [FieldKind; 8] = [
    FieldKind::Text,
    FieldKind::String,
    FieldKind::I64,
    FieldKind::U64,
    FieldKind::F64,
    FieldKind::Bool,
    FieldKind::Date,
    FieldKind::Facet,
];

/// Why a name cannot be a field of one's own, if it cannot: it must be `[a-z][a-z0-9_]*` and
/// not a name of the dedup fields (`simhash`, `root`, `block0`..., and every name starting
/// with `_`).
fn own_name_problem(name: &str) -> Option<String> {
    let is_block = name
        .strip_prefix("block")
        .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()));
    if name.starts_with('_') || is_block || ["simhash", "root"].contains(&name) {
        return Some(
            "the name is taken by tantivy-dedup's own fields (simhash, root, block0.., and every \
             name starting with `_`); choose another"
                .to_owned(),
        );
    }
    let mut bytes = name.bytes();
    let well_formed = bytes.next().is_some_and(|first| first.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    (!well_formed).then(|| {
        "a field name is lower-case ASCII letters, digits and `_`, starting with a letter"
            .to_owned()
    })
}

/// Settings of the Tantivy index itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// Delete documents published longer ago than this (event time, against the newest time
    /// seen), on each commit. Unset: keep everything. Separate from the dedup window, which
    /// forgets clusters but never deletes documents.
    #[serde(with = "optional_duration", skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    /// Memory for the index writer's buffers, in megabytes, shared by its threads.
    pub writer_memory_mb: usize,
    /// Indexing threads [default: the number of cores, at most 8].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_threads: Option<usize>,
    /// Inserts between two checkpoints of the forest, which a commit saves beside the index
    /// (in its `forest/` directory) so that reopening replays only the inserts made since
    /// instead of all of them. Fewer: faster reopening, more writing (at 10M live documents
    /// a checkpoint is about 1.5 GB).
    pub checkpoint_inserts: u64,
    /// Whether a commit after a durable checkpoint deletes the tombstones (records of deleted
    /// documents, kept for the replay) that the checkpoint holds and that are older than the
    /// dedup window. They are not needed to reopen; without pruning, an index whose documents
    /// are deleted as they age (`retention`) keeps one per document ever written. Once they
    /// are gone, only the checkpoint records those inserts: a full replay (the checkpoint
    /// lost) rebuilds a forest close to the writer's, not the same one. Nothing is pruned
    /// with a shared (Redis) forest, nor by a run with another `window` or `tables`.
    pub prune_tombstones: bool,
    /// The zone of the people who read the index: a date or time given without an offset
    /// (`search --from 2024-04-21`, `/v1/search?from=2024-04-21`) is read in it, and the
    /// command line prints times in it. Kept with the index, so that its readers need not
    /// repeat it.
    pub time_zone: TimeZone,
    /// A user dictionary for jieba: words to keep whole (product, person and place names it
    /// would cut apart), one a line as `word [frequency] [tag]`
    /// ([`use_user_dictionary`](crate::text::use_user_dictionary)). They count for the index's
    /// words, the queries' and the fingerprint's. A relative path in a settings file is read
    /// from that file's directory. A new index keeps a copy (its `user_dict.txt`), which every
    /// later open loads; settings naming a dictionary with other words are refused then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_dict: Option<PathBuf>,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            retention: None,
            writer_memory_mb: 256,
            writer_threads: None,
            checkpoint_inserts: crate::engine::DEFAULT_CHECKPOINT_INSERTS,
            prune_tombstones: true,
            time_zone: TimeZone::default(),
            user_dict: None,
        }
    }
}

impl IndexConfig {
    /// The retention in whole seconds, when set.
    pub fn retention_seconds(&self) -> Option<u64> {
        self.retention.map(|retention| retention.as_secs())
    }

    /// The indexing threads to use.
    pub fn threads(&self) -> usize {
        self.writer_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |cores| cores.get().min(8))
        })
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if self
            .retention
            .is_some_and(|retention| retention.as_secs() == 0)
        {
            return Err(Error::Config(
                "index.retention must be at least one second, e.g. \"90d\"".to_owned(),
            ));
        }
        if self.checkpoint_inserts == 0 {
            return Err(Error::Config(
                "index.checkpoint_inserts must be at least 1".to_owned(),
            ));
        }
        if self.writer_threads == Some(0) || self.writer_threads.is_some_and(|n| n > 64) {
            return Err(Error::Config(
                "index.writer_threads must be between 1 and 64".to_owned(),
            ));
        }
        let threads = self.threads();
        // Tantivy needs at least 15 MB per indexing thread.
        if self.writer_memory_mb < 15 * threads || self.writer_memory_mb > 16 * 1024 {
            return Err(Error::Config(format!(
                "index.writer_memory_mb must be between {} (15 per thread) and 16384, got {}",
                15 * threads,
                self.writer_memory_mb
            )));
        }
        Ok(())
    }
}

/// Settings of the HTTP service (`[server]`): where it listens, how it batches commits, and
/// the limits that keep one client from exhausting its memory.
///
/// ```
/// use std::time::Duration;
/// use tantivy_dedup::config::Config;
///
/// let config = Config::from_toml_str("[server]\ncommit_delay = \"50ms\"\nmax_batch_documents = 500\n")?;
/// assert_eq!(config.server.commit_delay, Duration::from_millis(50));
/// assert_eq!(config.server.max_batch_documents, 500);
/// assert_eq!(config.server.addr.port(), 7700); // the rest keep their defaults
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address and port to listen on: an IP address or a host name with a port, or a bare
    /// port on loopback.
    pub addr: ListenAddr,
    /// The shortest time between two commits (group commit). A change made when the last
    /// commit is older is committed at once; otherwise it waits for the rest of this delay,
    /// gathering everything that arrives meanwhile into one commit. A POST is answered after
    /// its commit, so this bounds the wait it adds; longer makes fewer, larger commits (and
    /// fewer segments).
    #[serde(with = "humantime_serde_compat")]
    pub commit_delay: Duration,
    /// Largest request body, in MiB.
    pub max_body_mib: usize,
    /// Largest single document (its JSON), in KiB.
    pub max_document_kib: usize,
    /// Most documents in one POST.
    pub max_batch_documents: usize,
    /// Request bodies waiting for the writer, in MiB, beyond which POSTs and DELETEs are
    /// turned away with 503 and Retry-After.
    pub queue_mib: usize,
    /// How far ahead of the server's clock `published_at` may be. A date far in the future
    /// would move the forest's clock and expire every cluster.
    #[serde(with = "humantime_serde_compat")]
    pub max_future: Duration,
    /// Connections served at once. Lowered at start to what the process's open-file limit
    /// leaves room for, so that connections can never take the files the index needs. A new
    /// connection beyond it is always accepted and makes way for itself: the connection with
    /// no request being handled (idle, or still sending its head) for longest is dropped at
    /// once, else the one whose body has stalled longest, else the one whose answer has been
    /// written longest; one whose request is being handled never is, and when all are, the
    /// newcomer gets a 503 `too_many_connections`.
    pub max_connections: usize,
    /// Connections served at once from one client address (at most `max_connections`); a
    /// connection beyond it makes way for itself among its own address's as beyond
    /// `max_connections`. Behind a proxy every client has the proxy's address: raise it to
    /// `max_connections` there.
    pub max_connections_per_client: usize,
    /// A new connection that has not sent a whole first request head within this time is
    /// closed (`header_timeout` bounds it too): a client connects to send a request at once.
    #[serde(with = "humantime_serde_compat")]
    pub first_head_timeout: Duration,
    /// A connection that has not sent a whole request head within this time of when the
    /// server starts waiting for it is closed: slow headers, and keep-alive connections idle
    /// between requests.
    #[serde(with = "humantime_serde_compat")]
    pub header_timeout: Duration,
    /// The longest a request body may take to arrive, whole; a slower one is answered 408.
    #[serde(with = "humantime_serde_compat")]
    pub body_timeout: Duration,
    /// The slowest a request body may arrive, KiB a second, measured over each
    /// `body_rate_window`: a body that brings less in one is answered 408 `body_too_slow` and
    /// gives back the room it held in the write queue. 0: no minimum.
    pub min_body_rate_kib: usize,
    /// The time over which `min_body_rate_kib` is measured, window after window from the
    /// body's start; a body that brings nothing for this long is cut off at once, so it is
    /// also the longest a stalled body holds its room after its last bytes.
    #[serde(with = "humantime_serde_compat")]
    pub body_rate_window: Duration,
    /// The longest a read may take, from when its request is read to its answer, waiting for
    /// a core included: a list page still collecting then stops and answers 503
    /// `read_timeout`, so that heavy reads cannot hold the cores for ever while every read
    /// behind them waits. A shard's part of a coordinator's page has the same limit.
    #[serde(with = "humantime_serde_compat")]
    pub read_timeout: Duration,
    /// On SIGTERM or Ctrl-C, how long requests in flight may take to finish before their
    /// connections are closed; what was queued for the writer is committed either way.
    #[serde(with = "humantime_serde_compat")]
    pub shutdown_grace: Duration,
    /// A coordinator's inserts in flight on the shared forest at once, each on a store
    /// connection of its own, and a server's on a shared store (`serve --index DIR --store`)
    /// for a request's documents; they decide as placing the documents one at a time would
    /// (`forest::Pipeline`). More hide more of the store's round trips.
    pub inserts_in_flight: usize,
    /// The most entries a shard's log keeps (`serve --shard I/N --replica NAME`): it is
    /// trimmed below the oldest position every replica of the shard has committed, and to
    /// this many entries whatever they have, so that a replica that stays away cannot make it
    /// grow without bound; such a replica is refused until it is rebuilt from a copy of a
    /// sibling. An entry is one write request to the shard (a batch of documents, or a
    /// delete).
    pub log_max_entries: u64,
    /// Host names (with or without `:port`) that requests may name in `Host`, besides the
    /// bound address and, on loopback, `localhost`. A request naming another is refused
    /// (421), which stops DNS-rebinding pages from reaching a server on loopback. Empty on a
    /// server bound to all interfaces (`0.0.0.0`, `::`): any host.
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://monitor.example.com`) whose web pages may call the API from a
    /// browser (CORS). Empty: none.
    pub cors_origins: Vec<String>,
    /// The API keys; never read from or written to a settings file (see
    /// [`AccessKeys`]).
    #[serde(skip)]
    pub keys: AccessKeys,
    /// Whether to serve an address other than loopback without keys (`--insecure-no-auth`;
    /// never from a settings file). Refused otherwise: anyone who can reach such a server could
    /// write and delete.
    #[serde(skip)]
    pub insecure_no_auth: bool,
}

/// Where `serve` listens, as people write it: `HOST:PORT`, where the host is an IP address
/// (`127.0.0.1:7700`, `[::1]:7700`, `0.0.0.0:7700` for every interface) or a name resolved when
/// the server binds (`localhost:7700`), or a bare `PORT`, which means loopback
/// (`127.0.0.1`). Port 0 picks a free port.
///
/// ```
/// use tantivy_dedup::config::ListenAddr;
///
/// let bare: ListenAddr = "7701".parse()?;
/// assert_eq!(bare.to_string(), "127.0.0.1:7701");
/// let named: ListenAddr = "localhost:7701".parse()?;
/// assert!(named.resolve()?.iter().all(|address| address.ip().is_loopback()));
/// assert_eq!("[::1]:7701".parse::<ListenAddr>()?.host(), "::1");
/// assert!("127.0.0.1".parse::<ListenAddr>().unwrap_err().to_string().contains("127.0.0.1:7700"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    /// An IP address (an IPv6 one without its brackets) or a host name.
    host: String,
    port: u16,
}

impl ListenAddr {
    /// `127.0.0.1:port`.
    pub fn loopback(port: u16) -> Self {
        ListenAddr {
            host: std::net::Ipv4Addr::LOCALHOST.to_string(),
            port,
        }
    }

    /// The IP address or host name, IPv6 without brackets.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port (0: any free one).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the host is a name rather than an IP address.
    pub fn is_name(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_err()
    }

    /// The socket addresses to try binding, in order: the address itself, or every address
    /// the name resolves to, IPv4 first (so `localhost` means 127.0.0.1, as a bare port does,
    /// where the resolver lists `::1` too).
    pub fn resolve(&self) -> std::io::Result<Vec<std::net::SocketAddr>> {
        use std::net::ToSocketAddrs as _;
        let unresolved = |problem: String| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the name {:?} {problem}", self.host),
            )
        };
        let mut addresses: Vec<std::net::SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|error| unresolved(format!("does not resolve ({error})")))?
            .collect();
        if addresses.is_empty() {
            return Err(unresolved("resolves to no address".to_owned()));
        }
        addresses.sort_by_key(std::net::SocketAddr::is_ipv6);
        Ok(addresses)
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(formatter, "[{}]:{}", self.host, self.port)
        } else {
            write!(formatter, "{}:{}", self.host, self.port)
        }
    }
}

impl std::str::FromStr for ListenAddr {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        let problem = |what: String| {
            Error::Config(format!(
                "{what}: write HOST:PORT (127.0.0.1:7700, localhost:7700, [::1]:7700, or \
                 0.0.0.0:7700 for every interface) or a bare PORT (7700, on 127.0.0.1)"
            ))
        };
        let port = |digits: &str| {
            digits.parse::<u16>().map_err(|_| {
                Error::Config(format!(
                    "{text:?}: the port must be a number from 0 to 65535"
                ))
            })
        };
        if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
            return Ok(ListenAddr::loopback(port(text)?));
        }
        if let Ok(address) = text.parse::<std::net::SocketAddr>() {
            return Ok(ListenAddr {
                host: address.ip().to_string(),
                port: address.port(),
            });
        }
        if let Ok(ip) = text.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            return Err(problem(format!("{text:?} has no port (e.g. {ip}:7700)")));
        }
        // A host name: letters, digits, `-`, `_` and dots (RFC 1123, with the underscore some
        // internal names use).
        let is_name = |host: &str| {
            !host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
        };
        match text.rsplit_once(':') {
            Some((host, digits)) if is_name(host) => Ok(ListenAddr {
                host: host.to_ascii_lowercase(),
                port: port(digits)?,
            }),
            None if is_name(text) => {
                Err(problem(format!("{text:?} has no port (e.g. {text}:7700)")))
            }
            _ => Err(problem(format!("{text:?} is not an address to listen on"))),
        }
    }
}

impl Serialize for ListenAddr {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ListenAddr {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|error: Error| match error {
            Error::Config(message) => serde::de::Error::custom(message),
            other => serde::de::Error::custom(other),
        })
    }
}

/// Whether `text` is a web origin: `http(s)://host[:port]`, nothing after it but an optional
/// `/`, and no wildcard (a key-protected API must name the pages it trusts).
fn is_origin(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let host = rest.strip_suffix('/').unwrap_or(rest);
    !host.is_empty()
        && host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte))
}

/// The API keys of `serve` (`Authorization: Bearer <key>`; docs/service.md, "HTTP"). With a
/// write key, POST and DELETE need it; with a read key too, every other endpoint but
/// `/healthz` and `/openapi.json` needs one of the two. Keys come from the environment or from
/// files, never from the command line or a settings file, and are never shown: `Debug` prints
/// `[redacted]`.
///
/// ```
/// use tantivy_dedup::config::{AccessKeys, Secret};
///
/// let keys = AccessKeys {
///     write: Some(Secret::new("a-write-key-of-some-length".to_owned())?),
///     read: None,
/// };
/// assert!(format!("{keys:?}").contains("[redacted]"));
/// assert!(keys.write.as_ref().is_some_and(|key| key.matches(b"a-write-key-of-some-length")));
/// assert!(Secret::new("short".to_owned()).is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessKeys {
    /// Needed to write (and accepted for reads).
    pub write: Option<Secret>,
    /// Needed to read, when set.
    pub read: Option<Secret>,
}

/// The environment variable that holds the write key.
pub const WRITE_KEY_VARIABLE: &str = "TANTIVY_DEDUP_WRITE_KEY";
/// The environment variable that holds the read key.
pub const READ_KEY_VARIABLE: &str = "TANTIVY_DEDUP_READ_KEY";

impl AccessKeys {
    /// The keys of the environment ([`WRITE_KEY_VARIABLE`], [`READ_KEY_VARIABLE`]) or of the
    /// files given (the file's text, surrounding white space removed). A key given both ways
    /// is refused, as is an empty or short one.
    pub fn load(write_file: Option<&Path>, read_file: Option<&Path>) -> Result<Self> {
        Ok(AccessKeys {
            write: Secret::load(WRITE_KEY_VARIABLE, write_file)?,
            read: Secret::load(READ_KEY_VARIABLE, read_file)?,
        })
    }

    /// Whether any key is set (writes then need the write key).
    pub fn enabled(&self) -> bool {
        self.write.is_some()
    }
}

/// An API key: compared in constant time (its length aside), never printed.
#[derive(Clone)]
pub struct Secret(String);

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other.0.as_bytes())
    }
}

impl Eq for Secret {}

impl Secret {
    /// The fewest characters a key may have.
    pub const MIN_CHARS: usize = 16;

    /// A key: at least [`MIN_CHARS`](Self::MIN_CHARS) visible ASCII characters (it travels in
    /// an HTTP header).
    pub fn new(key: String) -> Result<Self> {
        if key.len() < Self::MIN_CHARS || !key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(Error::Config(format!(
                "an API key must be at least {} visible ASCII characters without spaces (`openssl rand -hex 32` makes a good one)",
                Self::MIN_CHARS
            )));
        }
        Ok(Secret(key))
    }

    /// The key in `variable` or in `file`, if either is given.
    fn load(variable: &str, file: Option<&Path>) -> Result<Option<Self>> {
        let from_environment = std::env::var_os(variable);
        let key = match (from_environment, file) {
            (Some(_), Some(file)) => {
                return Err(Error::Config(format!(
                    "a key is given both in ${variable} and in {}; give it one way",
                    file.display()
                )));
            }
            (Some(value), None) => value
                .into_string()
                .map_err(|_| Error::Config(format!("${variable} is not valid UTF-8")))?,
            (None, Some(file)) => std::fs::read_to_string(file).map_err(|source| Error::Io {
                path: file.to_owned(),
                source,
            })?,
            (None, None) => return Ok(None),
        };
        let source = file.map_or_else(|| format!("${variable}"), |file| file.display().to_string());
        Secret::new(key.trim().to_owned())
            .map(Some)
            .map_err(|error| Error::Config(format!("{source}: {error}")))
    }

    /// The `Authorization` header value that presents this key (for a client such as
    /// `tantivy-dedup load`).
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// Whether `candidate` is this key, in time that depends only on the lengths.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        subtle::ConstantTimeEq::ct_eq(self.0.as_bytes(), candidate).into()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("[redacted]")
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: ListenAddr::loopback(7700),
            commit_delay: Duration::from_millis(100),
            max_body_mib: 32,
            max_document_kib: 1024,
            max_batch_documents: 1000,
            queue_mib: 256,
            max_future: Duration::from_secs(86_400),
            max_connections: 512,
            max_connections_per_client: 256,
            first_head_timeout: Duration::from_secs(5),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(10),
            min_body_rate_kib: 8,
            body_rate_window: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
            inserts_in_flight: 32,
            log_max_entries: 100_000,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            keys: AccessKeys::default(),
            insecure_no_auth: false,
        }
    }
}

impl ServerConfig {
    /// Refuses to serve `bound`, an address other than loopback, without API keys unless
    /// [`insecure_no_auth`](Self::insecure_no_auth): anyone who can reach such a server could
    /// write and delete.
    pub fn check_exposure(&self, bound: std::net::SocketAddr) -> Result<()> {
        if bound.ip().is_loopback() || self.keys.enabled() || self.insecure_no_auth {
            return Ok(());
        }
        Err(Error::Config(format!(
            "refusing to serve {bound} without API keys: anyone who can reach it could write and delete. \
             Set TANTIVY_DEDUP_WRITE_KEY (or --write-key-file), listen on 127.0.0.1, or pass \
             --insecure-no-auth when a firewall or a proxy guards the port"
        )))
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        let problem = if self.commit_delay > Duration::from_secs(10) {
            "server.commit_delay must be at most 10s (a POST waits for it)"
        } else if !(1..=1024).contains(&self.max_body_mib) {
            "server.max_body_mib must be between 1 and 1024"
        } else if self.max_document_kib == 0 || self.max_document_kib > self.max_body_mib * 1024 {
            "server.max_document_kib must be between 1 and max_body_mib * 1024"
        } else if !(1..=100_000).contains(&self.max_batch_documents) {
            "server.max_batch_documents must be between 1 and 100000"
        } else if self.queue_mib < self.max_body_mib {
            "server.queue_mib must be at least max_body_mib (one full request must fit)"
        } else if self.max_future > Duration::from_secs(100 * 365 * 86_400) {
            "server.max_future must be at most 100 years"
        } else if !(1..=1_000_000).contains(&self.max_connections) {
            "server.max_connections must be between 1 and 1000000"
        } else if !(1..=1_000_000).contains(&self.max_connections_per_client) {
            "server.max_connections_per_client must be between 1 and 1000000"
        } else if self.header_timeout.is_zero()
            || self.first_head_timeout.is_zero()
            || self.body_timeout.is_zero()
            || self.body_rate_window.is_zero()
        {
            "server.first_head_timeout, header_timeout, body_timeout and body_rate_window must be more than 0s"
        } else if self.min_body_rate_kib > 1 << 20 {
            "server.min_body_rate_kib must be at most 1048576 (1 GiB a second)"
        } else if self.read_timeout.is_zero() || self.read_timeout > Duration::from_secs(3600) {
            "server.read_timeout must be more than 0s and at most 1h"
        } else if self.shutdown_grace > Duration::from_secs(3600) {
            "server.shutdown_grace must be at most 1h"
        } else if !(1..=64).contains(&self.inserts_in_flight) {
            "server.inserts_in_flight must be between 1 and 64"
        } else if self.log_max_entries < 10 {
            "server.log_max_entries must be at least 10"
        } else if self.keys.read.is_some() && self.keys.write.is_none() {
            "a read key needs a write key: with a read key alone, anyone could write"
        } else if let Some(origin) = self.cors_origins.iter().find(|origin| !is_origin(origin)) {
            return Err(Error::Config(format!(
                "server.cors_origins: {origin:?} is not an origin such as \"https://monitor.example.com\" (scheme, host and port only; no wildcard)"
            )));
        } else {
            return Ok(());
        };
        Err(Error::Config(problem.to_owned()))
    }
}

impl DedupConfig {
    /// Reads the `[dedup]` table of a TOML settings text (other tables are checked, then left
    /// aside) and checks it.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        Config::from_toml_str(text).map(|config| config.dedup)
    }

    /// Reads the `[dedup]` table of a settings file such as `schema/news.toml`.
    pub fn from_path(path: &Path) -> Result<Self> {
        Config::from_path(path).map(|config| config.dedup)
    }

    /// Whether the `[dedup]` table of a TOML text leaves out `source_chrome`, the key added
    /// after indexes were made.
    fn lacks_source_chrome(text: &str) -> bool {
        toml::from_str::<toml::Table>(text).is_ok_and(|table| {
            table
                .get("dedup")
                .and_then(toml::Value::as_table)
                .is_some_and(|dedup| !dedup.contains_key(SOURCE_CHROME))
        })
    }

    /// Checks that the `[dedup]` table of a TOML text states every key that serialising
    /// settings always writes (see [`Config::from_index_settings`]), but the one added after
    /// indexes were made; the error names those missing.
    fn require_every_key(text: &str) -> Result<()> {
        let table: toml::Table =
            toml::from_str(text).map_err(|error| Error::Config(error.to_string()))?;
        let stated = table.get("dedup").and_then(toml::Value::as_table);
        // The keys of the defaults: every key but those written only when set.
        let written = toml::Table::try_from(DedupConfig::default())
            .map_err(|error| Error::Config(error.to_string()))?;
        let missing: Vec<&str> = written
            .keys()
            .map(String::as_str)
            .filter(|key| *key != SOURCE_CHROME)
            .filter(|key| !stated.is_some_and(|stated| stated.contains_key(*key)))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let what = if text.trim().is_empty() {
            "the file is empty"
        } else if stated.is_none() {
            "the file has no [dedup] table"
        } else {
            "the [dedup] table is incomplete"
        };
        Err(Error::Config(format!(
            "{what}: [dedup] keys missing: {}. An index's [dedup] settings decide its clusters \
             and are never filled in with defaults: restore this file from a backup, or state \
             the missing keys with the values the index was created with",
            missing.join(", ")
        )))
    }

    /// The pigeonhole tables' layout: `tables` tables for `max_distance`.
    pub fn layout(&self) -> Result<crate::index::BlockLayout> {
        match self.tables {
            None => crate::index::BlockLayout::new(self.max_distance),
            Some(tables) => crate::index::BlockLayout::with_tables(self.max_distance, tables)
                .map_err(|error| match error {
                    Error::Config(message) => Error::Config(format!("tables: {message}")),
                    other => other,
                }),
        }
    }

    /// The window in whole seconds.
    pub fn window_seconds(&self) -> u64 {
        self.window.as_secs()
    }

    /// The feature weights in use: [`weighting`](Self::weighting) if set, else the mode's own
    /// (seed mode: term frequency, as the seed algorithm documents it; default mode:
    /// sublinear term frequency, which no repeated token can dominate).
    pub fn effective_weighting(&self) -> Weighting {
        self.weighting.unwrap_or(match self.mode {
            Mode::Seed => Weighting::Tf,
            Mode::Default => Weighting::LogTf,
        })
    }

    /// The fingerprinter these settings ask for: default mode's is
    /// [guarded](crate::text::Fingerprinter::guarded).
    pub fn fingerprinter(&self) -> crate::text::Fingerprinter {
        crate::text::Fingerprinter::new(self.effective_weighting(), self.longest_sentence)
            .guarded(self.mode == Mode::Default)
    }

    /// The verification rule of default mode; `None` in seed mode.
    pub fn verifier(&self) -> Option<Verifier> {
        (self.mode == Mode::Default).then_some(Verifier {
            min_containment: self.min_containment,
            min_jaccard: self.min_jaccard,
            post_shingles: self.post_chars,
            min_jaccard_post: self.min_jaccard_post,
            min_figure_containment: self.min_figure_containment,
        })
    }

    /// Shingle hashes a sketch keeps at most in default mode (a whole one also keeps its
    /// titles'); `None` in seed mode, which keeps none.
    pub fn sketch_capacity(&self) -> Option<usize> {
        (self.mode == Mode::Default).then_some(self.short_text_chars)
    }

    /// Checks that every setting is in range.
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("min_containment", self.min_containment),
            ("min_jaccard", self.min_jaccard),
            ("min_jaccard_post", self.min_jaccard_post),
            ("min_figure_containment", self.min_figure_containment),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(Error::Config(format!(
                    "{name} must be above 0 and at most 1, got {value}"
                )));
            }
        }
        if !(1..=100_000).contains(&self.short_text_chars) {
            return Err(Error::Config(format!(
                "short_text_chars must be between 1 and 100000, got {}",
                self.short_text_chars
            )));
        }
        if self.max_distance > MAX_DISTANCE {
            return Err(Error::Config(format!(
                "max_distance must be between 0 and {MAX_DISTANCE}, got {}",
                self.max_distance
            )));
        }
        if self.window.as_secs() == 0 {
            return Err(Error::Config(
                "window must be at least one second, e.g. \"7d\"".to_owned(),
            ));
        }
        self.layout()?;
        // Whether each is a text field is checked against `[fields]` (`Config::validate`).
        if self.fields.is_empty() {
            return Err(Error::Config(
                "fields must name at least one text field, such as \"content\"".to_owned(),
            ));
        }
        Ok(())
    }
}

/// An optional duration as a humantime string.
mod optional_duration {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        duration: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match duration {
            Some(duration) => super::humantime_serde_compat::serialize(duration, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        super::humantime_serde_compat::deserialize(deserializer).map(Some)
    }
}

/// Durations as humantime strings ("7d", "36h 30m") in TOML.
mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*duration))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// A duration written as settings and parameters take it, in whole days, hours, minutes and
/// seconds (`7d`, `1d 12h`, `1h 30m`, `0s`); below a second is left out.
///
/// ```
/// use std::time::Duration;
/// use tantivy_dedup::config::{format_duration, parse_duration};
///
/// assert_eq!(format_duration(Duration::from_secs(7 * 86_400)), "7d");
/// assert_eq!(format_duration(Duration::from_secs(5_400)), "1h 30m");
/// assert_eq!(parse_duration(&format_duration(Duration::from_secs(90_061))), Ok(Duration::from_secs(90_061)));
/// ```
pub fn format_duration(duration: Duration) -> String {
    let mut rest = duration.as_secs();
    let mut parts = Vec::new();
    for (unit, name) in [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")] {
        if rest >= unit {
            parts.push(format!("{}{name}", rest / unit));
            rest %= unit;
        }
    }
    if parts.is_empty() {
        "0s".to_owned()
    } else {
        parts.join(" ")
    }
}

/// A duration as settings and parameters write it (`"7d"`, `"36h 30m"`, `"1h"`), or a message
/// that shows the form.
///
/// ```
/// use std::time::Duration;
/// use tantivy_dedup::config::parse_duration;
///
/// assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
/// assert!(parse_duration("soon").unwrap_err().contains("such as"));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|error| format!("{error} in {text:?}; write a duration such as \"7d\" or \"36h\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_schema_equals_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/news.toml");
        let shipped = Config::from_path(&path).unwrap();
        assert_eq!(shipped.dedup, DedupConfig::default());
        assert_eq!(shipped.index, IndexConfig::default());
        assert_eq!(shipped.server, ServerConfig::default());
        assert_eq!(
            shipped.fields.resolved(),
            FieldsConfig::default().resolved()
        );
    }

    #[test]
    fn listen_addresses_in_every_form() {
        for (text, host, port) in [
            ("7701", "127.0.0.1", 7701),
            ("0", "127.0.0.1", 0),
            ("127.0.0.1:7701", "127.0.0.1", 7701),
            ("0.0.0.0:80", "0.0.0.0", 80),
            ("[::1]:7701", "::1", 7701),
            ("localhost:7701", "localhost", 7701),
            ("News-Dedup.internal:7701", "news-dedup.internal", 7701),
        ] {
            let addr: ListenAddr = text.parse().unwrap();
            assert_eq!((addr.host(), addr.port()), (host, port), "{text}");
            // The settings file takes the same forms, and what it prints reads back.
            let config = Config::from_toml_str(&format!("[server]\naddr = \"{text}\"\n")).unwrap();
            assert_eq!(config.server.addr, addr);
            assert_eq!(addr.to_string().parse::<ListenAddr>().unwrap(), addr);
        }
        assert_eq!(ListenAddr::loopback(7700), ServerConfig::default().addr);
        for (text, needle) in [
            ("127.0.0.1", "127.0.0.1:7700"),
            ("[::1]", "::1"),
            ("localhost", "localhost:7700"),
            ("65536", "0 to 65535"),
            ("localhost:http", "0 to 65535"),
            ("", "HOST:PORT"),
            ("local host:1", "HOST:PORT"),
            ("http://localhost:7700", "HOST:PORT"),
        ] {
            let message = text.parse::<ListenAddr>().unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
        }
        let message = Config::from_toml_str("[server]\naddr = \"7700x\"\n")
            .unwrap_err()
            .to_string();
        assert!(message.contains("HOST:PORT"), "{message}");
    }

    #[test]
    fn cors_origins_must_be_origins() {
        for origin in [
            "https://monitor.example.com",
            "http://127.0.0.1:8080/",
            "https://[::1]:9",
        ] {
            let config = ServerConfig {
                cors_origins: vec![origin.to_owned()],
                ..ServerConfig::default()
            };
            assert!(config.validate().is_ok(), "{origin}");
        }
        for origin in [
            "*",
            "https://*",
            "monitor.example.com",
            "https://a.example/page",
            "",
        ] {
            let config = ServerConfig {
                cors_origins: vec![origin.to_owned()],
                ..ServerConfig::default()
            };
            assert!(config.validate().is_err(), "{origin}");
        }
    }

    #[test]
    fn settings_survive_a_round_trip_through_toml() {
        let config = Config::from_toml_str(
            "[dedup]\nwindow = \"36h\"\n[index]\nretention = \"90d\"\n[fields.url]\nindexed = true\n",
        )
        .unwrap();
        assert_eq!(Config::from_toml_str(&config.to_toml()).unwrap(), config);
    }

    #[test]
    fn an_index_made_before_source_chrome_keeps_deciding_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        let text = Config::default().to_toml();
        assert!(text.contains("source_chrome = true"));
        std::fs::write(&path, &text).unwrap();
        assert!(
            Config::from_index_settings(&path)
                .unwrap()
                .dedup
                .source_chrome
        );
        let before: String = text
            .lines()
            .filter(|line| !line.starts_with("source_chrome ="))
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(&path, &before).unwrap();
        assert!(
            !Config::from_index_settings(&path)
                .unwrap()
                .dedup
                .source_chrome
        );
        // A user's settings file that leaves it out takes the default.
        assert!(Config::from_path(&path).unwrap().dedup.source_chrome);
    }

    #[test]
    fn an_index_settings_file_must_state_every_dedup_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.toml");
        let mut config = Config::default();
        config.dedup.mode = Mode::Seed;
        let text = config.to_toml();
        std::fs::write(&path, &text).unwrap();
        assert_eq!(Config::from_index_settings(&path).unwrap(), config);

        let keys = [
            "mode",
            "max_distance",
            "window",
            "fields",
            "longest_sentence",
            "short_text_chars",
            "min_containment",
            "min_jaccard",
            "post_chars",
            "min_jaccard_post",
            "min_figure_containment",
        ];
        for key in keys {
            let without: String = text
                .lines()
                .filter(|line| !line.starts_with(&format!("{key} =")))
                .map(|line| format!("{line}\n"))
                .collect();
            assert_ne!(without, text, "{key} is written");
            std::fs::write(&path, &without).unwrap();
            let message = Config::from_index_settings(&path).unwrap_err().to_string();
            assert!(
                message.contains("settings.toml") && message.contains(&format!("missing: {key}")),
                "{key}: {message}"
            );
            // A user's settings file may leave it out.
            assert_eq!(
                Config::from_path(&path).unwrap().dedup.mode == Mode::Seed,
                key != "mode"
            );
        }
        std::fs::write(&path, "").unwrap();
        let message = Config::from_index_settings(&path).unwrap_err().to_string();
        assert!(
            message.contains("empty") && keys.iter().all(|key| message.contains(key)),
            "{message}"
        );
    }

    /// Every type and option of a field of one's own survives the settings file an index
    /// keeps, and reads back equal.
    #[test]
    fn own_fields_round_trip_through_toml() {
        let config = Config::from_toml_str(
            "[dedup]\nfields = [\"content\", \"summary\"]\n\
             [fields.published_at]\nfrom = \"date\"\n\
             [fields.summary]\ntype = \"text\"\nstored = false\n\
             [fields.author]\ntype = \"string\"\nfast = false\n\
             [fields.sentiment]\ntype = \"f64\"\n[fields.likes]\ntype = \"u64\"\nfrom = \"like_count\"\n\
             [fields.delta]\ntype = \"i64\"\nindexed = false\n[fields.verified]\ntype = \"bool\"\n\
             [fields.crawled]\ntype = \"date\"\n[fields.platform]\ntype = \"facet\"\n",
        )
        .unwrap();
        assert_eq!(Config::from_toml_str(&config.to_toml()).unwrap(), config);
        let resolved = config.fields.resolved();
        assert_eq!(resolved.len(), 14);
        let field = |name: &str| resolved.iter().find(|field| field.name == name).unwrap();
        assert_eq!(
            (field("summary").stored, field("summary").fast),
            (false, false)
        );
        assert!(!field("author").fast && field("author").indexed);
        assert!(field("sentiment").fast && field("platform").fast && field("platform").indexed);
        assert!(!field("delta").indexed);
        assert_eq!(config.fields.text_fields(), ["title", "content", "summary"]);
    }

    #[test]
    fn bad_own_fields_are_named() {
        for (text, needle) in [
            ("[fields.likes]\nstored = true", "needs a `type`"),
            ("[fields._rank]\ntype = \"u64\"", "taken by tantivy-dedup"),
            ("[fields.simhash]\ntype = \"u64\"", "taken by tantivy-dedup"),
            ("[fields.block2]\ntype = \"u64\"", "taken by tantivy-dedup"),
            ("[fields.Likes]\ntype = \"u64\"", "lower-case"),
            ("[fields.\"like-count\"]\ntype = \"u64\"", "lower-case"),
            ("[fields.likes]\ntype = \"int\"", "int"),
            ("[fields.likes]\ntype = \"u64\"\nsorted = true", "sorted"),
            (
                "[fields.summary]\ntype = \"text\"\nfast = true",
                "text cannot be fast",
            ),
            (
                "[fields.platform]\ntype = \"facet\"\nindexed = false",
                "always indexed",
            ),
            ("[fields.source]\nfast = false", "fields.source"),
            ("[fields.content]\ntype = \"string\"", "fixed"),
            ("[fields.likes]\ntype = \"u64\"\nfrom = \"\"", "input key"),
            (
                "[fields.published_at]\nfrom = \"date\"\n[fields.date]\ntype = \"date\"",
                "fields.published_at and fields.date both read the input key `date`",
            ),
            (
                "[fields.url]\nfrom = \"id\"",
                "both read the input key `id`",
            ),
            (
                "[dedup]\nfields = [\"author\"]\n[fields.author]\ntype = \"string\"",
                "\"author\" is not a text field",
            ),
        ] {
            let message = Config::from_toml_str(text).unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
        }
        let text_field = "[dedup]\nfields = [\"summary\"]\n[fields.summary]\ntype = \"text\"";
        assert!(Config::from_toml_str(text_field).is_ok());
    }

    #[test]
    fn bad_settings_are_named() {
        for (text, needle) in [
            ("[dedup]\nmax_distance = 99", "max_distance"),
            ("[dedup]\nwindow = \"soon\"", "duration"),
            ("[dedup]\nwindow = \"0s\"", "window"),
            ("[dedup]\nfields = [\"body\"]", "body"),
            ("[dedup]\nfields = []", "fields"),
            ("[dedup]\nweighting = \"bm25\"", "bm25"),
            ("[dedup]\nmode = \"fast\"", "fast"),
            ("[dedup]\nmax_distanse = 3", "max_distanse"),
            ("[dedupe]\n", "dedupe"),
            ("[fields.title]\ntype = \"string\"", "fields.title"),
            ("[fields.id]\nstored = false", "fields.id"),
            ("[fields.body]\n", "body"),
            ("[index]\nretention = \"0s\"", "retention"),
            ("[index]\nwriter_memory_mb = 1", "writer_memory_mb"),
        ] {
            let message = DedupConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
        }
    }
}
