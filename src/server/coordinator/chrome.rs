//! What the coordinators of one store learned of each source's chrome ([`crate::chrome`]),
//! kept in the Redis Cluster beside the forest: one key per source (`{prefix}src:{source}`,
//! its latest pages as [`SourceChrome::saved`] gives them) and the count of documents placed
//! (`{prefix}placed`: where the next page stands in the stream, which pages are forgotten
//! by).
//!
//! A write reads the pages of its batch's sources in its turn, takes its pages' chrome out
//! before placing them, and saves what they taught once they are placed. The store's write
//! turn puts every coordinator's writes in one order, so the chrome is taken out as one
//! writer fed that order would take it out, whichever coordinator a page reaches, and a
//! coordinator that restarts goes on where the store stands. A write that fails before its
//! documents are placed saves nothing: sent again, its pages teach then. One that fails
//! after (its save fails, or its coordinator stops between placing and saving) is not
//! placed again when sent again, so what its pages taught is lost, and the later pages'
//! positions run short by its count: the chrome is then taken out as one writer that had
//! not seen those pages would take it out.

use std::collections::BTreeSet;

use redis::cluster_async::ClusterConnection;

use super::cluster::{get_all, send_all};
use crate::Result;
use crate::chrome::{SourceChrome, SourceKey};
use crate::forest::redis::RedisAddress;

/// What the keys hold, in errors.
const CHROME: &str = "the sources' chrome";

/// The sources' chrome in the store ([module docs](self)).
pub(super) struct SharedChrome {
    connection: ClusterConnection,
    prefix: String,
}

/// The chrome of a write's sources, read from the store in its turn.
pub(super) struct BatchChrome {
    /// The pages of the batch's sources that the store holds.
    pub(super) chrome: SourceChrome,
    /// The position of the batch's first page in the stream: how many documents were placed
    /// before it.
    pub(super) first: u64,
    /// How many of the batch's documents were placed.
    pub(super) placed: u64,
    sources: BTreeSet<SourceKey>,
}

impl SharedChrome {
    /// Connects to the cluster of `address`.
    pub(super) async fn connect(address: &RedisAddress) -> Result<Self> {
        let connection =
            crate::forest::redis::cluster_connection(address, std::time::Duration::from_secs(5))
                .await
                .map_err(|error| {
                    crate::Error::Server(format!("connecting to the store of {CHROME}: {error}"))
                })?;
        Ok(SharedChrome {
            connection,
            prefix: address.prefix.clone(),
        })
    }

    fn source_key(&self, source: SourceKey) -> String {
        format!("{}src:{:016x}", self.prefix, source.0)
    }

    fn placed_key(&self) -> String {
        format!("{}placed", self.prefix)
    }

    /// The pages the store holds of `sources` (a write's), and where the write's first page
    /// stands in the stream. A value the store holds that cannot be read (written by another
    /// version, or damaged) is taken for none, and replaced at the next save: a source's
    /// chrome is learned again in a few pages, where refusing would refuse every write of
    /// the source.
    pub(super) async fn load(&self, sources: BTreeSet<SourceKey>) -> Result<BatchChrome> {
        let mut keys: Vec<String> = vec![self.placed_key()];
        keys.extend(sources.iter().map(|&source| self.source_key(source)));
        let mut values: Vec<Option<Vec<u8>>> = get_all(&self.connection, keys, CHROME).await?;
        let count = values.remove(0);
        let first = count.as_deref().map_or(0, |count| {
            let read = std::str::from_utf8(count).ok();
            read.and_then(|count| count.parse().ok())
                .unwrap_or_else(|| {
                    tracing::warn!(
                        "{CHROME}: the count of documents placed is not a number; counting from 0"
                    );
                    0
                })
        });
        let mut chrome = SourceChrome::default();
        for (&source, saved) in sources.iter().zip(values) {
            if let Some(Err(error)) = saved.map(|saved| chrome.restore(source, &saved)) {
                tracing::warn!(%error, "{CHROME}: a source's pages are learned again");
            }
        }
        Ok(BatchChrome {
            chrome,
            first,
            placed: 0,
            sources,
        })
    }

    /// Saves what a write's pages taught, and where the next write's first page stands.
    /// Written whole, not added to: a command the client sends again after a lost answer
    /// writes the same.
    pub(super) async fn save(&self, batch: &BatchChrome) -> Result<()> {
        let mut commands = vec![
            redis::cmd("SET")
                .arg(self.placed_key())
                .arg((batch.first + batch.placed).to_string())
                .clone(),
        ];
        for &source in &batch.sources {
            if let Some(saved) = batch.chrome.saved(source) {
                commands.push(
                    redis::cmd("SET")
                        .arg(self.source_key(source))
                        .arg(saved)
                        .clone(),
                );
            }
        }
        send_all(&self.connection, commands, CHROME).await
    }
}
