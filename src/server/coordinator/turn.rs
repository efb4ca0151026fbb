//! The write turn that every coordinator of one store takes in turn: a lease on one key of the
//! Redis Cluster (`{prefix}write-turn`), held while a write reads the id directory, places its
//! documents, records their places and appends them to the shards' logs.
//!
//! Two coordinators writing one id at once would otherwise both read its old entry, both place
//! it, and each leave a copy on its own shard. Under one turn, the directory read by a write
//! is the one the previous write left, whichever coordinator made it, and every shard's log
//! holds the writes in the order they were placed, as with one coordinator.

use std::time::{Duration, Instant};

use crate::forest::redis::RedisAddress;
use crate::{Error, Result};

/// How long a turn is held at most: a coordinator that stops while holding it (a crash, a
/// lost connection) keeps the others waiting this long.
const LEASE: Duration = Duration::from_secs(30);

/// How long a write waits for the turn before it is refused.
const WAIT: Duration = Duration::from_secs(60);

/// Releases the turn at `KEYS[1]` where it is still held under token `ARGV[1]`.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
";

/// The store's write turn ([module docs](self)).
pub(crate) struct WriteTurn {
    connection: redis::cluster_async::ClusterConnection,
    key: String,
    /// This coordinator's name in its tokens: its process id and the instant it connected.
    owner: String,
    /// Turns taken so far, the rest of a token.
    taken: std::sync::atomic::AtomicU64,
}

/// The turn, held: [`release`](Held::release) it on every path (else the others wait for the
/// lease to end).
#[must_use = "a turn held is released with `release`, or it blocks other coordinators"]
pub(crate) struct Held {
    token: String,
    since: Instant,
}

fn store_error(error: redis::RedisError) -> Error {
    Error::Server(format!(
        "the coordinators' write turn's store failed: {error}"
    ))
}

impl WriteTurn {
    /// Connects to the cluster of `address`.
    pub(crate) async fn connect(address: &RedisAddress) -> Result<Self> {
        let connection = crate::forest::redis::cluster_connection(address, Duration::from_secs(5))
            .await
            .map_err(store_error)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        Ok(WriteTurn {
            connection,
            key: format!("{}write-turn", address.prefix),
            owner: format!("{}-{nanos}", std::process::id()),
            taken: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Waits for the turn (polling, a millisecond at first, up to 20 between tries); an
    /// error when the store fails or another coordinator holds it for longer than a minute.
    pub(crate) async fn acquire(&self) -> Result<Held> {
        let turn = self
            .taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("{}-{turn}", self.owner);
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let taken: Option<String> = redis::cmd("SET")
                .arg(&self.key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(LEASE.as_millis() as u64)
                .query_async(&mut self.connection.clone())
                .await
                .map_err(store_error)?;
            if taken.is_some() {
                return Ok(Held {
                    token,
                    since: Instant::now(),
                });
            }
            if started.elapsed() > WAIT {
                return Err(Error::Server(format!(
                    "another coordinator has held the write turn ({}) for over {} s",
                    self.key,
                    WAIT.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Gives the turn back. A turn held past its lease may have been taken by another
    /// coordinator meanwhile: that is logged, since the two writes may then have overlapped.
    pub(crate) async fn release(&self, held: Held) {
        let released = redis::Script::new(RELEASE)
            .key(&self.key)
            .arg(&held.token)
            .invoke_async::<u64>(&mut self.connection.clone())
            .await;
        match released {
            Ok(1) => {}
            Ok(_) => tracing::warn!(
                held_ms = held.since.elapsed().as_millis() as u64,
                "the write turn's lease ended before the write did; another coordinator may \
                 have written at the same time"
            ),
            Err(error) => tracing::warn!(
                %error,
                "releasing the write turn failed; other coordinators wait for its lease to end"
            ),
        }
    }
}
