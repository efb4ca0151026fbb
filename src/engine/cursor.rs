//! Deep paging: a [`Cursor`] walks a list page's stories past any offset, each story once,
//! over one snapshot of the index while documents keep arriving.
//!
//! A walk starts with [`Cursor::start`] (`cursor=*`): the search pins its searcher
//! (see [`snapshot_id`](crate::engine::snapshot_id)) and answers its first page with the cursor after
//! the page's last story ([`SearchPage::next_cursor`](crate::engine::SearchPage::next_cursor)).
//! The next request with that cursor reads the same snapshot and keeps only the stories that
//! the page's order ranks after that last one (what Elasticsearch's `search_after` over a
//! point in time does): the walk is the list as it was when it started, cut into pages.
//!
//! A cursor is opaque to clients: the page's order key of the last story, the snapshots read
//! (one per shard on a coordinator), the trend window's end and a digest of the list's
//! definition, so that a cursor given to another list is refused rather than read wrongly.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::engine::collapse::SortKey;
use crate::engine::shards::ShardSpec;
use crate::engine::sort_field::SortValue;
use crate::engine::trend::Joined;
use crate::forest::Timestamp;
use crate::{Error, Fingerprint, Result};

/// What starts a walk in place of a cursor (as Solr's `cursorMark=*`).
pub const CURSOR_START: &str = "*";

/// The version of a cursor's encoding, refused when it is another.
const VERSION: u8 = 1;

/// The most shards a walk reads: each adds about 30 characters to the cursor, which travels
/// in a URL (at most 8 KiB on this server).
pub const MAX_WALK_SHARDS: usize = 128;

/// The longest cursor read.
const MAX_CURSOR_CHARS: usize = 8 * 1024;

/// Where a walk through a list page's stories stands ([`SearchRequest::cursor`](crate::engine::SearchRequest::cursor)).
///
/// ```
/// use tantivy_dedup::engine::Cursor;
///
/// let start: Cursor = "*".parse()?;
/// assert!(start.is_start());
/// assert_eq!(start.to_string(), "*");
/// assert!("not a cursor".parse::<Cursor>().is_err());
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor {
    /// The digest of the list's definition ([`SearchRequest::list_digest`](crate::engine::SearchRequest::list_digest));
    /// 0 when it has no snapshot yet.
    list: u64,
    /// The snapshots the walk reads, one per shard (one for a whole index); empty at the
    /// start, until pinned.
    snapshots: Vec<u64>,
    /// On a coordinator, the replica of each shard that holds its snapshot (a snapshot is one
    /// process's); empty on a whole index.
    replicas: Vec<u32>,
    /// The trend window's end, fixed when the walk started.
    trend_end: Option<Timestamp>,
    /// The order key of the last story given; `None` at the start.
    after: Option<CursorKey>,
}

/// A [`SortKey`] as a cursor keeps it: floats by their bits, so that it compares exactly as
/// the collector's keys do after a trip through text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct CursorKey {
    size: u64,
    newest: Timestamp,
    oldest: Timestamp,
    score: u32,
    recent: u64,
    previous: u64,
    hot: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<CursorValue>,
    root: u64,
}

/// A [`SortValue`] as a cursor keeps it: tagged with its variant, floats by their bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum CursorValue {
    U(u64),
    S(i64),
    F(u64),
    B(bool),
}

impl From<SortValue> for CursorValue {
    fn from(value: SortValue) -> Self {
        match value {
            SortValue::Unsigned(value) => CursorValue::U(value),
            SortValue::Signed(value) => CursorValue::S(value),
            SortValue::Float(value) => CursorValue::F(value.to_bits()),
            SortValue::Bool(value) => CursorValue::B(value),
        }
    }
}

impl From<CursorValue> for SortValue {
    fn from(value: CursorValue) -> Self {
        match value {
            CursorValue::U(value) => SortValue::Unsigned(value),
            CursorValue::S(value) => SortValue::Signed(value),
            CursorValue::F(bits) => SortValue::Float(f64::from_bits(bits)),
            CursorValue::B(value) => SortValue::Bool(value),
        }
    }
}

impl From<&SortKey> for CursorKey {
    fn from(key: &SortKey) -> Self {
        CursorKey {
            size: key.size,
            newest: key.newest,
            oldest: key.oldest,
            score: key.score.to_bits(),
            recent: key.joined.recent,
            previous: key.joined.previous,
            hot: key.hot.to_bits(),
            value: key.value.map(CursorValue::from),
            root: key.root.0,
        }
    }
}

impl From<CursorKey> for SortKey {
    fn from(key: CursorKey) -> Self {
        SortKey {
            size: key.size,
            newest: key.newest,
            oldest: key.oldest,
            score: f32::from_bits(key.score),
            joined: Joined {
                recent: key.recent,
                previous: key.previous,
            },
            hot: f64::from_bits(key.hot),
            value: key.value.map(SortValue::from),
            root: Fingerprint(key.root),
        }
    }
}

/// A cursor's text, before its base64.
#[derive(Serialize, Deserialize)]
struct Encoded {
    v: u8,
    list: u64,
    snapshots: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replicas: Vec<u32>,
    #[serde(default)]
    trend_end: Option<Timestamp>,
    #[serde(default)]
    after: Option<CursorKey>,
}

impl Cursor {
    /// The start of a walk: the first page, whose snapshot the search pins.
    pub fn start() -> Self {
        Cursor::default()
    }

    /// The first page of a walk over `snapshots` (pinned already): what a coordinator asks
    /// its shards for once it has pinned each one's snapshot to read their statistics.
    pub fn first_page(list: u64, snapshots: Vec<u64>, trend_end: Option<Timestamp>) -> Self {
        Cursor {
            list,
            snapshots,
            trend_end,
            ..Cursor::default()
        }
    }

    /// Whether this is the start of a walk, before any page.
    pub fn is_start(&self) -> bool {
        self.after.is_none()
    }

    /// Whether it names the snapshots it reads (every cursor but `*`).
    pub fn is_pinned(&self) -> bool {
        !self.snapshots.is_empty()
    }

    /// The snapshot ids it reads, one per shard (empty at the start).
    pub fn snapshots(&self) -> &[u64] {
        &self.snapshots
    }

    /// On a coordinator, the replica of each shard that holds the shard's snapshot (empty at
    /// the start and on a whole index).
    pub fn replicas(&self) -> &[u32] {
        &self.replicas
    }

    /// This cursor with the replicas that hold its snapshots, one per shard.
    pub fn on_replicas(mut self, replicas: Vec<u32>) -> Self {
        self.replicas = replicas;
        self
    }

    /// The trend window's end fixed when the walk started (`None` at the start).
    pub fn trend_end(&self) -> Option<Timestamp> {
        self.trend_end
    }

    /// The order key of the last story given (`None` at the start).
    pub fn after(&self) -> Option<SortKey> {
        self.after.map(SortKey::from)
    }

    /// The cursor after a page whose last story has the order key `last`: the walk of the
    /// list `list` over `snapshots`, with the trend window ending at `trend_end`.
    pub fn after_story(
        list: u64,
        snapshots: Vec<u64>,
        trend_end: Option<Timestamp>,
        last: &SortKey,
    ) -> Self {
        Cursor {
            list,
            snapshots,
            replicas: Vec::new(),
            trend_end,
            after: Some(CursorKey::from(last)),
        }
    }

    /// Refuses a cursor of another list than the one with digest `list`.
    pub fn check_list(&self, list: u64) -> Result<()> {
        if !self.is_pinned() || self.list == list {
            return Ok(());
        }
        Err(Error::Query(
            "the cursor belongs to another list: a walk keeps the query, sort, filters and \
             time range of its first page (only limit, facets, highlight and members may \
             change); start again with cursor=*"
                .to_owned(),
        ))
    }

    /// The part of a coordinator's cursor that shard `spec` reads: its own snapshot.
    ///
    /// ```
    /// use tantivy_dedup::engine::{Cursor, ShardSpec};
    ///
    /// let start = Cursor::start();
    /// assert!(start.for_shard("1/3".parse::<ShardSpec>()?)?.is_start());
    /// # Ok::<(), tantivy_dedup::Error>(())
    /// ```
    pub fn for_shard(&self, spec: ShardSpec) -> Result<Cursor> {
        if !self.is_pinned() {
            return Ok(self.clone());
        }
        match self.snapshots.get(spec.index) {
            Some(&snapshot) if self.snapshots.len() == spec.count => Ok(Cursor {
                snapshots: vec![snapshot],
                replicas: Vec::new(),
                ..self.clone()
            }),
            _ => Err(Error::Query(format!(
                "the cursor was made for {} shards, and this index has {}: start again with \
                 cursor=*",
                self.snapshots.len(),
                spec.count
            ))),
        }
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_pinned() {
            return formatter.write_str(CURSOR_START);
        }
        let encoded = Encoded {
            v: VERSION,
            list: self.list,
            snapshots: self.snapshots.clone(),
            replicas: self.replicas.clone(),
            trend_end: self.trend_end,
            after: self.after,
        };
        let json = serde_json::to_vec(&encoded).map_err(|_| std::fmt::Error)?;
        formatter.write_str(&URL_SAFE_NO_PAD.encode(json))
    }
}

impl std::str::FromStr for Cursor {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        if text == CURSOR_START {
            return Ok(Cursor::start());
        }
        let invalid = || {
            Error::Query(
                "cursor must be `*` (to start a walk) or a `next_cursor` of an earlier page, as \
                 it was given"
                    .to_owned(),
            )
        };
        if text.len() > MAX_CURSOR_CHARS {
            return Err(invalid());
        }
        let json = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let encoded: Encoded = serde_json::from_slice(&json).map_err(|_| invalid())?;
        let replicas_fit =
            encoded.replicas.is_empty() || encoded.replicas.len() == encoded.snapshots.len();
        if encoded.v != VERSION || encoded.snapshots.is_empty() || !replicas_fit {
            return Err(invalid());
        }
        Ok(Cursor {
            list: encoded.list,
            snapshots: encoded.snapshots,
            replicas: encoded.replicas,
            trend_end: encoded.trend_end,
            after: encoded.after,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(size: u64, score: f32, hot: f64, root: u64) -> SortKey {
        keyed(size, score, hot, None, root)
    }

    fn keyed(size: u64, score: f32, hot: f64, value: Option<SortValue>, root: u64) -> SortKey {
        SortKey {
            size,
            newest: -5,
            oldest: i64::MAX,
            score,
            joined: Joined {
                recent: 3,
                previous: 9,
            },
            hot,
            value,
            root: Fingerprint(root),
        }
    }

    fn any_value() -> impl Strategy<Value = Option<SortValue>> {
        proptest::option::of(prop_oneof![
            any::<u64>().prop_map(SortValue::Unsigned),
            any::<i64>().prop_map(SortValue::Signed),
            any::<f64>().prop_map(SortValue::Float),
            any::<bool>().prop_map(SortValue::Bool),
        ])
    }

    proptest! {
        /// A cursor reads back as it was written, floats to the bit.
        #[test]
        fn a_cursor_reads_back(
            size: u64, score: f32, hot: f64, root: u64, list: u64,
            snapshots in proptest::collection::vec(any::<u64>(), 1..5),
            trend_end: Option<i64>,
            value in any_value(),
        ) {
            let last = keyed(size, score, hot, value, root);
            let replicas = snapshots.iter().map(|&id| id as u32 % 3).collect();
            let cursor = Cursor::after_story(list, snapshots, trend_end, &last).on_replicas(replicas);
            let read: Cursor = cursor.to_string().parse().unwrap();
            prop_assert_eq!(&read, &cursor);
            let after = read.after().unwrap();
            prop_assert_eq!(after.score.to_bits(), score.to_bits());
            prop_assert_eq!(after.hot.to_bits(), hot.to_bits());
            prop_assert_eq!(after.value.map(CursorValue::from), value.map(CursorValue::from));
        }

        /// Any text is a cursor or a clear refusal, never a panic.
        #[test]
        fn any_text_is_read_or_refused(text in ".{0,200}") {
            if let Err(error) = text.parse::<Cursor>() {
                prop_assert!(error.to_string().contains("cursor"));
            }
        }
    }

    #[test]
    fn a_shard_reads_its_own_snapshot() {
        let cursor = Cursor::after_story(7, vec![10, 11, 12], Some(5), &key(1, 1.0, 0.0, 1));
        let shard = cursor.for_shard("1/3".parse().unwrap()).unwrap();
        assert_eq!(shard.snapshots(), [11]);
        assert_eq!(shard.trend_end(), Some(5));
        assert!(cursor.for_shard("1/2".parse().unwrap()).is_err());
        assert!(cursor.check_list(8).is_err());
        assert!(cursor.check_list(7).is_ok());
    }
}
