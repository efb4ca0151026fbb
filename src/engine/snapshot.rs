//! Snapshots of an index that a [`Cursor`](crate::engine::Cursor)'s walk reads: searchers
//! pinned for a while after their last use, named by what they hold.
//!
//! A Tantivy [`Searcher`] is already a point in time: its segments and their deletes stay as
//! they were while it lives (on Unix a merged-away segment's files stay readable through its
//! open maps). Pinning one keeps those files on disk and its readers' caches in memory (its
//! cluster numbers share with later generations what did not change), so a pin lasts
//! [`KEEP_ALIVE`] after its last use, pins past their time are let go by the next search of
//! any kind, and at most [`MAX_PINNED`] are held: a walk that would pin one more is refused
//! ([`Error::TooManyWalks`]) rather than break a walk under way, as Elasticsearch refuses a
//! scroll past `search.max_open_scroll_context`. Only a page that has a next page pins.
//!
//! A snapshot's id is a digest of its segments and their deletes ([`snapshot_id`]), not a
//! counter: a process that opens an index nobody changed since (the command line's next
//! `search`, a restarted server) has the same snapshot, and a walk goes on there.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tantivy::Searcher;
use xxhash_rust::xxh3::Xxh3;

use crate::engine::collapse::ClusterOrdinals;
use crate::{Error, Result};

/// How long a pinned snapshot is kept after its last use.
pub const KEEP_ALIVE: Duration = Duration::from_secs(300);

/// The most snapshots pinned at once (walks that read the same snapshot share its pin).
pub const MAX_PINNED: usize = 64;

/// The id of `searcher`'s snapshot: a digest of its segments' ids and delete stamps, the same
/// in every process that opens the same commit.
pub fn snapshot_id(searcher: &Searcher) -> u64 {
    let mut digest = Xxh3::new();
    for (segment, deletes) in searcher.generation().segments() {
        digest.update(segment.uuid_string().as_bytes());
        digest.update(&deletes.map_or(u64::MAX, |stamp| stamp).to_le_bytes());
    }
    digest.digest()
}

/// A searcher with the cluster numbers of its generation: what a list page reads.
#[derive(Clone)]
pub struct Snapshot {
    /// Its id ([`snapshot_id`]).
    pub id: u64,
    /// The searcher.
    pub searcher: Searcher,
    /// Its cluster numbers.
    pub ordinals: Arc<ClusterOrdinals>,
}

struct Pinned {
    snapshot: Snapshot,
    used: Instant,
}

/// The snapshots pinned by the walks of one index's searcher.
#[derive(Default)]
pub struct Snapshots {
    pinned: Mutex<Vec<Pinned>>,
}

impl Snapshots {
    /// Pins `snapshot` (or renews its pin); [`Error::TooManyWalks`] when [`MAX_PINNED`]
    /// others are pinned.
    pub fn pin(&self, snapshot: &Snapshot) -> Result<()> {
        let now = Instant::now();
        let mut pinned = self.lock(now);
        if let Some(pin) = pinned.iter_mut().find(|pin| pin.snapshot.id == snapshot.id) {
            pin.used = now;
        } else if pinned.len() >= MAX_PINNED {
            return Err(Error::TooManyWalks);
        } else {
            pinned.push(Pinned {
                snapshot: snapshot.clone(),
                used: now,
            });
        }
        Ok(())
    }

    /// Lets go of the pins past their time (what every search does, walking or not).
    pub fn sweep(&self) {
        drop(self.lock(Instant::now()));
    }

    /// The pinned snapshot `id`, its pin renewed; `None` when it is not (or no longer) pinned.
    pub fn get(&self, id: u64) -> Option<Snapshot> {
        let now = Instant::now();
        let mut pinned = self.lock(now);
        let pin = pinned.iter_mut().find(|pin| pin.snapshot.id == id)?;
        pin.used = now;
        Some(pin.snapshot.clone())
    }

    /// The pins, those past their time let go.
    fn lock(&self, now: Instant) -> std::sync::MutexGuard<'_, Vec<Pinned>> {
        // A pin list is whole after any panic (each change is one push or removal).
        let mut pinned = self
            .pinned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pinned.retain(|pin| now.duration_since(pin.used) < KEEP_ALIVE);
        pinned
    }
}
