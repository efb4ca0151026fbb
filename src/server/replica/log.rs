//! A shard's log: one Redis Stream per shard, in the cluster beside the forest, holding the
//! shard's writes in the order every replica applies them.
//!
//! Keys (under the store's prefix; the hash tag puts both in one slot, so that one script
//! reads the one and trims the other):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{log-I}` | stream | shard I's entries: `documents` (NDJSON of placed documents, then the deletes of ids that moved to another shard) or `delete` (an id) |
//! | `{log-I}:replicas` | hash | per replica name, the last position its index committed |
//! | `{log-I}:trimmed` | string | the newest position trimmed away: a replica behind it cannot catch up |
//!
//! An entry's id, which Redis gives it (`<milliseconds>-<sequence>`, increasing), is its
//! [`LogPosition`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use axum::body::Bytes;
use redis::cluster_async::ClusterConnection;

use crate::forest::redis::{RedisAddress, cluster_connection};
use crate::{Error, Result};

/// A position in a shard's log: the id Redis gave an entry, `<milliseconds>-<sequence>`,
/// ordered as the log is. [`LogPosition::START`] (`0-0`) is before the first entry.
///
/// ```
/// use tantivy_dedup::server::replica::LogPosition;
///
/// let position: LogPosition = "1764400000000-3".parse()?;
/// assert!(position > LogPosition::START);
/// assert!(position < "1764400000001-0".parse()?);
/// assert_eq!(position.to_string(), "1764400000000-3");
/// assert!("3".parse::<LogPosition>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition {
    millis: u64,
    sequence: u64,
}

impl LogPosition {
    /// Before the first entry.
    pub const START: LogPosition = LogPosition {
        millis: 0,
        sequence: 0,
    };

    /// The Redis server's clock when the entry was added, Unix milliseconds.
    pub fn millis(self) -> u64 {
        self.millis
    }
}

impl fmt::Display for LogPosition {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}-{}", self.millis, self.sequence)
    }
}

/// A text that is not a log position.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a log position such as 1764400000000-0 (milliseconds-sequence)")]
pub struct BadPosition(String);

impl FromStr for LogPosition {
    type Err = BadPosition;

    fn from_str(text: &str) -> std::result::Result<Self, BadPosition> {
        let bad = || BadPosition(text.chars().take(64).collect());
        let (millis, sequence) = text.split_once('-').ok_or_else(bad)?;
        Ok(LogPosition {
            millis: millis.parse().map_err(|_| bad())?,
            sequence: sequence.parse().map_err(|_| bad())?,
        })
    }
}

/// What one entry asks of a shard's replicas.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LogEntry {
    /// Placed documents, then deletes of ids that moved to another shard's story: the lines
    /// `{"placed", "document"}` and `{"delete"}` of NDJSON.
    Documents(Bytes),
    /// A client's delete of a document.
    Delete(String),
}

/// The log's ends: what trimming removed, and the newest entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogBounds {
    /// The newest entry trimmed away ([`LogPosition::START`]: none); a replica that has
    /// not committed this far can no longer catch up from the log.
    pub(crate) trimmed_through: LogPosition,
    /// The newest entry ever added ([`LogPosition::START`]: none).
    pub(crate) last: LogPosition,
}

/// Shard I's log: appends, the replicas' positions and trimming, over a multiplexed
/// connection that blocking reads never hold ([`LogReader`] has its own).
#[derive(Clone)]
pub(crate) struct ShardLog {
    connection: ClusterConnection,
    stream: String,
    replicas: String,
    trimmed: String,
}

fn store_error(error: redis::RedisError) -> Error {
    Error::Server(format!("the shard log's store failed: {error}"))
}

/// Trims the log below the oldest position a replica has recorded, and to `ARGV[1]` entries,
/// and records the newest entry it removed: one script, so that a replica recording its
/// position meanwhile is seen.
const TRIM: &str = r"
local function newer(first, second)
  local first_millis, first_sequence = string.match(first, '^(%d+)-(%d+)$')
  local second_millis, second_sequence = string.match(second, '^(%d+)-(%d+)$')
  first_millis, first_sequence = tonumber(first_millis), tonumber(first_sequence)
  second_millis, second_sequence = tonumber(second_millis), tonumber(second_sequence)
  return first_millis > second_millis
    or (first_millis == second_millis and first_sequence > second_sequence)
end
local removed = nil
local oldest = nil
for _, position in ipairs(redis.call('HVALS', KEYS[2])) do
  if oldest == nil or newer(oldest, position) then
    oldest = position
  end
end
if oldest and oldest ~= '0-0' then
  local below = redis.call('XREVRANGE', KEYS[1], '(' .. oldest, '-', 'COUNT', 1)
  if #below > 0 then
    removed = below[1][1]
    redis.call('XTRIM', KEYS[1], 'MINID', oldest)
  end
end
local length = redis.call('XLEN', KEYS[1])
local bound = tonumber(ARGV[1])
if length > bound then
  local gone = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', length - bound)
  local last = gone[#gone][1]
  if removed == nil or newer(last, removed) then
    removed = last
  end
  redis.call('XTRIM', KEYS[1], 'MAXLEN', bound)
end
if removed then
  local before = redis.call('GET', KEYS[3])
  if not before or newer(removed, before) then
    redis.call('SET', KEYS[3], removed)
  end
end
return 0
";

impl ShardLog {
    /// The logs of shards `0..count` over one connection to the cluster of `address`.
    pub(crate) async fn connect_all(address: &RedisAddress, count: usize) -> Result<Vec<Self>> {
        let connection = cluster_connection(address, Duration::from_secs(5))
            .await
            .map_err(store_error)?;
        Ok((0..count)
            .map(|shard| ShardLog {
                connection: connection.clone(),
                stream: format!("{}{{log-{shard}}}", address.prefix),
                replicas: format!("{}{{log-{shard}}}:replicas", address.prefix),
                trimmed: format!("{}{{log-{shard}}}:trimmed", address.prefix),
            })
            .collect())
    }

    /// Shard `shard`'s log.
    pub(crate) async fn connect(address: &RedisAddress, shard: usize) -> Result<Self> {
        let mut logs = Self::connect_all(address, shard + 1).await?;
        logs.pop()
            .ok_or_else(|| Error::Server("no shard log".to_owned()))
    }

    /// Appends `entry`; its position, once Redis has it (durable as the cluster's
    /// `appendfsync` makes it).
    pub(crate) async fn append(&self, entry: &LogEntry) -> Result<LogPosition> {
        let mut command = redis::cmd("XADD");
        command.arg(&self.stream).arg("*");
        match entry {
            LogEntry::Documents(lines) => command.arg("documents").arg(lines.as_ref()),
            LogEntry::Delete(id) => command.arg("delete").arg(id.as_bytes()),
        };
        let id: String = command
            .query_async(&mut self.connection.clone())
            .await
            .map_err(store_error)?;
        id.parse()
            .map_err(|error| Error::Server(format!("the shard log gave an entry id: {error}")))
    }

    /// Records that replica `name` has committed everything up to `position`, then trims
    /// the log below the oldest such position of any replica, and to `max_entries`.
    pub(crate) async fn record(
        &self,
        name: &str,
        position: LogPosition,
        max_entries: u64,
    ) -> Result<()> {
        let mut connection = self.connection.clone();
        redis::cmd("HSET")
            .arg(&self.replicas)
            .arg(name)
            .arg(position.to_string())
            .query_async::<()>(&mut connection)
            .await
            .map_err(store_error)?;
        redis::Script::new(TRIM)
            .key(&self.stream)
            .key(&self.replicas)
            .key(&self.trimmed)
            .arg(max_entries)
            .invoke_async::<u64>(&mut connection)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// The log's ends ([`LogBounds`]).
    pub(crate) async fn bounds(&self) -> Result<LogBounds> {
        let mut connection = self.connection.clone();
        let trimmed: Option<String> = redis::cmd("GET")
            .arg(&self.trimmed)
            .query_async(&mut connection)
            .await
            .map_err(store_error)?;
        // The newest entry ever added stays the stream's last id when it is trimmed away.
        let info: redis::RedisResult<std::collections::HashMap<String, redis::Value>> =
            redis::cmd("XINFO")
                .arg("STREAM")
                .arg(&self.stream)
                .query_async(&mut connection)
                .await;
        let last = match info {
            Ok(info) => {
                let value = info.get("last-generated-id").ok_or_else(|| {
                    Error::Server("the shard log's XINFO has no last-generated-id".to_owned())
                })?;
                redis::from_redis_value_ref::<String>(value)
                    .map_err(|error| Error::Server(format!("the shard log's last id: {error}")))?
            }
            // Nothing was ever added (or the store lost the log: see docs/scaling.md).
            Err(error) if error.to_string().contains("no such key") => "0-0".to_owned(),
            Err(error) => return Err(store_error(error)),
        };
        let position = |text: &str| -> Result<LogPosition> {
            text.parse()
                .map_err(|error| Error::Server(format!("the shard log's bounds: {error}")))
        };
        Ok(LogBounds {
            trimmed_through: position(trimmed.as_deref().unwrap_or("0-0"))?,
            last: position(&last)?,
        })
    }

    /// A reader of this log on a connection of its own.
    pub(crate) async fn reader(&self, address: &RedisAddress) -> Result<LogReader> {
        // Longer than a read blocks.
        let connection = cluster_connection(address, READ_BLOCK + Duration::from_secs(5))
            .await
            .map_err(store_error)?;
        Ok(LogReader {
            connection,
            stream: self.stream.clone(),
        })
    }
}

/// The longest a read waits for an entry.
const READ_BLOCK: Duration = Duration::from_millis(500);

/// Reads a shard's log in order, blocking for new entries on a connection of its own.
pub(crate) struct LogReader {
    connection: ClusterConnection,
    stream: String,
}

/// XREAD's answer: per stream, its entries, each an id and its fields and values.
type StreamsRead = Option<Vec<(String, Vec<(String, Vec<Vec<u8>>)>)>>;

impl LogReader {
    /// The entries after `after`, at most `count`, in order; waits up to half a second for
    /// one when there is none (then none).
    pub(crate) async fn read_after(
        &mut self,
        after: LogPosition,
        count: usize,
    ) -> Result<Vec<(LogPosition, LogEntry)>> {
        let read: StreamsRead = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(READ_BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(&self.stream)
            .arg(after.to_string())
            .query_async(&mut self.connection)
            .await
            .map_err(store_error)?;
        let mut entries = Vec::new();
        for (_, stream) in read.unwrap_or_default() {
            for (id, fields) in stream {
                let position: LogPosition = id.parse().map_err(|error| {
                    Error::Server(format!("the shard log holds an entry id: {error}"))
                })?;
                entries.push((position, entry_of(position, fields)?));
            }
        }
        Ok(entries)
    }
}

/// An entry from its fields and values.
fn entry_of(position: LogPosition, mut fields: Vec<Vec<u8>>) -> Result<LogEntry> {
    let bad = || {
        Error::Server(format!(
            "the shard log's entry {position} is not one of ours"
        ))
    };
    if fields.len() != 2 {
        return Err(bad());
    }
    let value = fields.pop().ok_or_else(bad)?;
    match fields[0].as_slice() {
        b"documents" => Ok(LogEntry::Documents(Bytes::from(value))),
        b"delete" => String::from_utf8(value)
            .map(LogEntry::Delete)
            .map_err(|_| bad()),
        _ => Err(bad()),
    }
}
