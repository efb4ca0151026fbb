//! The id directory of an index split by story, in the Redis Cluster beside the forest: per
//! document id, where the document was placed and the digest of what was sent, so that any
//! coordinator knows a re-send (`unchanged`) and the shard holding the copy a replacement
//! must remove. Also the shard count, fixed when the store is first used.

use serde::{Deserialize, Serialize};

use crate::Fingerprint;
use crate::chrome::ChromeLines;
use crate::engine::{Placed, ShardSpec};
use crate::forest::Timestamp;
use crate::forest::redis::RedisAddress;
use crate::verify::Reason;
use crate::{Error, Result};

use super::cluster::{get_all, query_one, send_all, store_error};

/// What the directory's keys hold, in errors.
const DIRECTORY: &str = "the id directory";

/// Where a document was placed: written once it is placed, before its shard is sent it, so
/// that a request retried after a failure sends it again from the same place (the shard,
/// which judges what it holds, then adds it or answers `unchanged`) instead of placing it
/// twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Its node in the forest.
    pub(crate) node: Fingerprint,
    /// Its story, which says its shard.
    pub(crate) root: Fingerprint,
    /// Whether it joined a story that was there.
    pub(crate) duplicate: bool,
    /// The digest of its fields ([`ArticleRecord::digest`](crate::article::ArticleRecord::digest)).
    pub(crate) digest: u64,
    /// Its event time.
    pub(crate) time: Timestamp,
    /// The node it attached through, for a new leaf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) via: Option<Fingerprint>,
    /// Why the forest kept it out of the stories its text verified against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<Reason>,
    /// The lines of its page taken out as its source's chrome, which its shard takes out too.
    #[serde(default, skip_serializing_if = "ChromeLines::is_empty")]
    pub(crate) chrome: ChromeLines,
    /// Shards that may still hold an older version of it (it moved to another story's shard
    /// and the request that moved it has not been answered yet): deleted there when it is
    /// next sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) stale: Vec<usize>,
}

impl Entry {
    /// The shard of `count` that holds it.
    pub(crate) fn shard(&self, count: usize) -> usize {
        ShardSpec::owner(self.root, count)
    }

    /// Where it was placed, as a shard is told: all it was told the first time, so that a
    /// shard that did not get it then (a retried request) stores what one index stores.
    pub(crate) fn placed(&self) -> Placed {
        Placed {
            node: self.node,
            root: self.root,
            via: self.via,
            duplicate: self.duplicate,
            time: self.time,
            reason: self.reason,
            chrome: self.chrome,
        }
    }
}

/// The directory: one key per id (`{prefix}i:{id}`, a JSON [`Entry`]), so each lives in its
/// own hash slot; a batch's keys are read and written by concurrent commands over one
/// multiplexed connection to the cluster.
#[derive(Clone)]
pub(crate) struct IdDirectory {
    connection: redis::cluster_async::ClusterConnection,
    prefix: String,
}

/// Replaces the entry at `KEYS[1]` by `ARGV[2]` where it is still `ARGV[1]`.
const SETTLE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
end
";

impl IdDirectory {
    /// Connects to the cluster of `address`.
    pub(crate) async fn connect(address: &RedisAddress) -> Result<Self> {
        let connection =
            crate::forest::redis::cluster_connection(address, std::time::Duration::from_secs(5))
                .await
                .map_err(|error| store_error(DIRECTORY, error))?;
        Ok(IdDirectory {
            connection,
            prefix: address.prefix.clone(),
        })
    }

    fn key(&self, id: &str) -> String {
        format!("{}i:{id}", self.prefix)
    }

    /// Records that the index is split into `count` shards, or checks that it is when the
    /// store already says: a coordinator or shard with another count would send stories to
    /// the wrong shards, so it is refused.
    pub(crate) async fn check_shard_count(&self, count: usize) -> Result<()> {
        let mut record = redis::cmd("SET");
        record
            .arg(format!("{}shards", self.prefix))
            .arg(count.to_string())
            .arg("NX")
            .arg("GET");
        let recorded: Option<String> = query_one(&self.connection, record, DIRECTORY).await?;
        match recorded {
            Some(recorded) if recorded != count.to_string() => Err(Error::Config(format!(
                "the store's index is split into {recorded} shards, not {count}: every shard \
                 and coordinator must say the same count (it is fixed when the store is first \
                 used; a new count needs a new store and a reload)"
            ))),
            _ => Ok(()),
        }
    }

    /// The entries of `ids`, in order (`None`: no live document has that id).
    pub(crate) async fn get(&self, ids: &[String]) -> Result<Vec<Option<Entry>>> {
        let keys = ids.iter().map(|id| self.key(id)).collect();
        let values: Vec<Option<String>> = get_all(&self.connection, keys, DIRECTORY).await?;
        values
            .into_iter()
            .map(|value| {
                value
                    .map(|value| {
                        serde_json::from_str::<Entry>(&value).map_err(|error| {
                            Error::Server(format!("the id directory holds a bad entry: {error}"))
                        })
                    })
                    .transpose()
            })
            .collect()
    }

    /// Clears the stale shards of each id's `entry` once its move is answered, where the
    /// directory still holds that entry: a later write of the id (placed meanwhile, by this
    /// coordinator or another) keeps what it wrote.
    pub(crate) async fn settle(&self, entries: Vec<(String, Entry)>) -> Result<()> {
        let mut commands = Vec::with_capacity(entries.len());
        for (id, entry) in entries {
            let settled = Entry {
                stale: Vec::new(),
                ..entry.clone()
            };
            // The script's text with each call (it is short): `EVALSHA` would need a fallback
            // for a node that has not cached it, which plain commands here do not have.
            let mut command = redis::cmd("EVAL");
            command.arg(SETTLE).arg(1).arg(self.key(&id));
            command.arg(encode(&entry)?).arg(encode(&settled)?);
            commands.push(command);
        }
        send_all(&self.connection, commands, DIRECTORY).await
    }

    /// Sets each id's entry (`None`: removes it).
    pub(crate) async fn set(&self, entries: Vec<(String, Option<Entry>)>) -> Result<()> {
        let mut commands = Vec::with_capacity(entries.len());
        for (id, entry) in entries {
            let command = match entry {
                Some(entry) => redis::cmd("SET")
                    .arg(self.key(&id))
                    .arg(encode(&entry)?)
                    .clone(),
                None => redis::cmd("DEL").arg(self.key(&id)).clone(),
            };
            commands.push(command);
        }
        send_all(&self.connection, commands, DIRECTORY).await
    }
}

/// An entry as the directory holds it.
fn encode(entry: &Entry) -> Result<String> {
    serde_json::to_string(entry)
        .map_err(|error| Error::Server(format!("writing an id's entry: {error}")))
}
