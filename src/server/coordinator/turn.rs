//! The write turn that every coordinator of one store takes in turn: a lease on one key of the
//! Redis Cluster (`{prefix}{write-turn}`), held while a write reads the id directory, places
//! its documents, records their places and appends them to the shards' logs.
//!
//! Two coordinators writing one id at once would otherwise both read its old entry, both place
//! it, and each leave a copy on its own shard. Under one turn, the directory read by a write
//! is the one the previous write left, whichever coordinator made it, and every shard's log
//! holds the writes in the order they were placed, as with one coordinator.
//!
//! The lease is renewed while its write goes on ([`WriteTurn::renew`]), so it ends early only
//! for a coordinator that stopped or lost the store. A coordinator that failed to take the
//! turn marks it wanted, and one that asks again right after giving it back lets such a
//! waiter go first, so that a busy coordinator does not keep the others out.

use std::time::{Duration, Instant};

use crate::forest::redis::RedisAddress;
use crate::{Error, Result};

/// How long a turn is held without renewal: a coordinator that stops while holding it (a
/// crash, a lost connection) keeps the others waiting this long.
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// How often a turn held is renewed.
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(5);

/// How long a write waits for the turn before it is refused.
const WAIT: Duration = Duration::from_secs(60);

/// Between two tries of a coordinator waiting for the turn: from the first, doubling up to
/// the last.
const POLL: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(20));

/// How long a coordinator that finds the turn wanted by another lets it go first: longer
/// than a waiter's longest pause between tries.
const YIELD: Duration = Duration::from_millis(25);

/// Takes the turn at `KEYS[1]` for token `ARGV[1]` with a lease of `ARGV[2]` ms, unless
/// `ARGV[3]` is `1` (a first try) and another coordinator marked it wanted at `KEYS[2]`; a
/// try that fails marks it wanted by this token. 1 when taken, or already held under this
/// token (a try sent again after its answer was lost).
const ACQUIRE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
local wanted = redis.call('GET', KEYS[2])
if ARGV[3] == '1' and wanted and wanted ~= ARGV[1] then
    return 0
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if wanted == ARGV[1] then
        redis.call('DEL', KEYS[2])
    end
    return 1
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', 100)
return 0
";

/// Renews (`ARGV[2]` ms) or releases (`ARGV[2]` = `0`) the turn at `KEYS[1]` where it is
/// still held under token `ARGV[1]`; 1 when it was.
const KEEP_OR_RELEASE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
if ARGV[2] == '0' then
    return redis.call('DEL', KEYS[1])
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
";

/// The store's write turn ([module docs](self)).
pub(crate) struct WriteTurn {
    connection: redis::cluster_async::ClusterConnection,
    key: String,
    wanted: String,
    /// This coordinator's name in its tokens: its process id and the instant it connected.
    owner: String,
    /// Turns taken so far, the rest of a token.
    taken: std::sync::atomic::AtomicU64,
}

/// The turn, held: [`release`](WriteTurn::release) it on every path (else the others wait
/// for the lease to end).
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
        // One hash slot for both keys, which the script reads together.
        let key = format!("{}{{write-turn}}", address.prefix);
        Ok(WriteTurn {
            connection,
            wanted: format!("{key}:wanted"),
            key,
            owner: format!("{}-{nanos}", std::process::id()),
            taken: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Waits for the turn; `None` when it did not come within a minute (other coordinators
    /// held it all that time), an error when the store fails.
    pub(crate) async fn acquire(&self) -> Result<Option<Held>> {
        let turn = self
            .taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("{}-{turn}", self.owner);
        let script = redis::Script::new(ACQUIRE);
        let started = Instant::now();
        let mut first = true;
        let mut pause = POLL.0;
        loop {
            let taken: u64 = script
                .key(&self.key)
                .key(&self.wanted)
                .arg(&token)
                .arg(LEASE.as_millis() as u64)
                .arg(if first { "1" } else { "0" })
                .invoke_async(&mut self.connection.clone())
                .await
                .map_err(store_error)?;
            if taken == 1 {
                return Ok(Some(Held {
                    token,
                    since: Instant::now(),
                }));
            }
            if started.elapsed() > WAIT {
                return Ok(None);
            }
            if first {
                tokio::time::sleep(YIELD).await;
                first = false;
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(POLL.1);
            }
        }
    }

    /// Renews the lease of the turn held, waiting at most [`RENEW_EVERY`] for the store;
    /// false (and a warning) when it had ended, in which case another coordinator may have
    /// written meanwhile.
    pub(crate) async fn renew(&self, held: &Held) -> bool {
        let renewal = self.keep_or_release(held, LEASE.as_millis() as u64);
        match tokio::time::timeout(RENEW_EVERY, renewal).await {
            Ok(renewed) => renewed,
            Err(_) => {
                tracing::warn!("renewing the write turn took over {RENEW_EVERY:?}");
                false
            }
        }
    }

    /// Gives the turn back.
    pub(crate) async fn release(&self, held: Held) {
        self.keep_or_release(&held, 0).await;
    }

    async fn keep_or_release(&self, held: &Held, lease_ms: u64) -> bool {
        let kept = redis::Script::new(KEEP_OR_RELEASE)
            .key(&self.key)
            .arg(&held.token)
            .arg(lease_ms)
            .invoke_async::<u64>(&mut self.connection.clone())
            .await;
        match kept {
            Ok(1) => true,
            Ok(_) => {
                tracing::warn!(
                    held_ms = held.since.elapsed().as_millis() as u64,
                    "the write turn's lease ended before the write did; another coordinator \
                     may have written at the same time"
                );
                false
            }
            Err(error) => {
                tracing::warn!(%error, "renewing or releasing the write turn failed");
                false
            }
        }
    }
}
