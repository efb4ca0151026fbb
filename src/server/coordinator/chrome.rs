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
//!
//! A source's key goes once its pages are all forgotten ([`FORGET_AFTER`] inserts after its
//! last write): a sorted set (`{prefix}src-heard`, about 100 bytes a source) scores each
//! source by the position a save wrote to `{prefix}placed` (never lowered), and each save
//! deletes the keys of sources silent since (at least [`SWEPT_A_SAVE`], twice its write's
//! sources if more), as one process's [`SourceChrome::settle`] lets them go. What the store
//! keeps is then the sources heard from in the latest `FORGET_AFTER` inserts (at most about
//! 1.2 KB each), however many sources a platform has had. A key written before this set was
//! kept stays until its source is heard from again.

use std::collections::BTreeSet;

use redis::cluster_async::ClusterConnection;

use super::cluster::{get_all, query_one, send_all};
use crate::Result;
use crate::chrome::{FORGET_AFTER, SourceChrome, SourceKey};
use crate::forest::redis::RedisAddress;

/// What the keys hold, in errors.
const CHROME: &str = "the sources' chrome";

/// The fewest keys of silent sources a save may delete (more when its write has more than
/// half as many sources), so that the sweep keeps up with any stream of new sources.
const SWEPT_A_SAVE: usize = 1024;

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

/// A source as its key names it, and as the set of sources heard from holds it.
fn source_member(source: SourceKey) -> String {
    format!("{:016x}", source.0)
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
        format!("{}src:{}", self.prefix, source_member(source))
    }

    fn placed_key(&self) -> String {
        format!("{}placed", self.prefix)
    }

    fn heard_key(&self) -> String {
        format!("{}src-heard", self.prefix)
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

    /// Saves what a write's pages taught, and where the next write's first page stands;
    /// then lets go of the sources silent for [`FORGET_AFTER`] inserts. Written whole, not
    /// added to: a command the client sends again after a lost answer writes the same.
    pub(super) async fn save(&self, batch: &BatchChrome) -> Result<()> {
        let next = batch.first + batch.placed;
        let saved: Vec<(SourceKey, Vec<u8>)> = (batch.sources.iter())
            .filter_map(|&source| Some((source, batch.chrome.saved(source)?)))
            .collect();
        if !saved.is_empty() {
            // Scored before its pages are written, and never lowered (GT): a source's score
            // stays past its latest page's position, whatever fails, so its key goes no
            // sooner than its pages are forgotten.
            let mut heard = redis::cmd("ZADD");
            heard.arg(self.heard_key()).arg("GT");
            for (source, _) in &saved {
                heard.arg(next).arg(source_member(*source));
            }
            query_one::<()>(&self.connection, heard, CHROME).await?;
        }
        let mut commands = vec![
            redis::cmd("SET")
                .arg(self.placed_key())
                .arg(next.to_string())
                .clone(),
        ];
        commands.extend(saved.into_iter().map(|(source, saved)| {
            redis::cmd("SET")
                .arg(self.source_key(source))
                .arg(saved)
                .clone()
        }));
        send_all(&self.connection, commands, CHROME).await?;
        // At least twice the sources a write can bring: the sweep keeps up with any stream.
        let sweep = SWEPT_A_SAVE.max(2 * batch.sources.len());
        self.let_silent_sources_go(next, sweep).await
    }

    /// Deletes the keys of the sources last saved when the stream stood `FORGET_AFTER`
    /// inserts or more before `next` (every page they hold is forgotten for any page from
    /// `next` on, so no write reads anything from them), `most` at most.
    async fn let_silent_sources_go(&self, next: u64, most: usize) -> Result<()> {
        let Some(silent_since) = next.checked_sub(FORGET_AFTER) else {
            return Ok(());
        };
        let mut silent = redis::cmd("ZRANGEBYSCORE");
        silent.arg(self.heard_key()).arg("-inf").arg(silent_since);
        silent.arg("LIMIT").arg(0).arg(most);
        let silent: Vec<String> = query_one(&self.connection, silent, CHROME).await?;
        if silent.is_empty() {
            return Ok(());
        }
        // The keys first, then their members: a source whose key could not be deleted stays
        // in the set, for the next save to try again. A member that is no source's number
        // (not written by this version) is only taken out of the set.
        let keys: Vec<redis::Cmd> = silent
            .iter()
            .filter_map(|member| u64::from_str_radix(member, 16).ok())
            .map(|source| {
                redis::cmd("DEL")
                    .arg(self.source_key(SourceKey(source)))
                    .clone()
            })
            .collect();
        send_all(&self.connection, keys, CHROME).await?;
        let mut heard = redis::cmd("ZREM");
        heard.arg(self.heard_key()).arg(&silent);
        query_one::<()>(&self.connection, heard, CHROME).await
    }
}
