//! The forest on a Redis Cluster, shared by many ingest processes.
//!
//! Key layout (every key under a prefix, `td:` by default; each key is its own hash slot, and
//! every script touches exactly one key, so nothing ever crosses slots):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `n:{fp}` | hash | a node: `o` owner token while pending, `q` its ticket (the order of the nodes' creation, across writers), `a` attached-through and `r` root for a leaf, `t` last seen, `d` documents, `l` the token that counted the last one (so a retry does not count twice); `g` the digest of a root's text; `z` marks a value that was the root of a story that expired, holding that digest, and outlives the node (a hash of `z` alone then): a story id is only ever that text's again |
//! | `c:{root}` | set | a root's leaves (a set, so that a retried insert counts its leaf once) |
//! | `s:{fp}` | string | the node's sketch (default mode), 4 bytes a value |
//! | `b{t}:{key}` | set | table `t`'s bucket: the fingerprints (as signed 64-bit integers, so Redis keeps small sets as compact int sets) whose key in table `t` is `key` |
//! | `k:{hash}` | sorted set | default mode's key posting: the nodes whose sketch has that key, scored by post order (a writer's sequence in its order), the newest kept: the in-memory cap, plus the node being placed, plus [`LATER_INSERTS_AT_MOST`] |
//! | `x:{hour}` | set | the nodes seen in that hour of event time: what the sweep reads when the hour leaves the window |
//! | `clocks` | hash | each writer's clock (the newest event time it has placed, or `-` before its first document on a store with no mark yet, and until when its lease runs), and `m`, the low mark: the oldest clock of the writers alive, never lowered |
//! | `ticket`, `posts`, `swept`, `config` | strings | the ticket counter, the post order counter, the last hour swept, the layout and settings every writer must share |
//!
//! Expiry is by event time, so it works for replays: a writer treats a node last seen before
//! its own `newest - window` as gone at once, and the sweep deletes it (and takes it out of its
//! buckets and off its root's child count) once its hour is an hour past the window of the low
//! mark, so that a writer whose stream is behind the others' still finds the stories of its
//! own window (docs/scaling.md, "Expiry").
//!
//! The store is synchronous (the forest's writer is one thread); each call blocks on a tokio
//! runtime: the store's own, or the one that the connections of one writer's inserts in
//! flight share, with one link to each node for all of them (`connect_several`; the `link`
//! module). The operations of one step of the
//! protocol go out together (a `Batch`: one pipeline to each node that owns some of its keys,
//! all sent at once), scripts are called by their hash (`EVALSHA`), and writes that nothing
//! waits for ride along with the next step: an insert takes one round trip when its node
//! exists and is a root, two when it is a leaf, five to seven when it makes a new node
//! (docs/scaling.md, "Round trips").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo,
    ServerErrorKind, Value,
};

use super::placement::{ForestStats, Timestamp};
use super::store::{
    CLOCK_SLACK_SECONDS, Claim, Edge, EdgeState, Edges, ForestStore, LATER_INSERTS_AT_MOST,
    Opening, RootRank, SequenceClock, Settlement, SharedForest, StoreError, clamp_time, seen_at,
};
use crate::Fingerprint;
use crate::config::DedupConfig;
use crate::index::BlockLayout;
use crate::verify::{
    Candidates, Compared, Evidence, POSTING_CAPACITY, Sketch, Verdict, Verifier, digest_of,
};

mod link;
use link::NodeLink;

/// Event time beyond the window that the sweep waits before deleting a node, so that an insert
/// that read the node live with a slightly older clock is done with it first.
const SWEEP_GRACE_SECONDS: i64 = 3_600;
const _: () = assert!(CLOCK_SLACK_SECONDS * 2 <= SWEEP_GRACE_SECONDS);

/// Beyond this many hours to sweep at once, the sweep lists the partitions that exist instead
/// of visiting every hour.
const MAX_HOURS_WALKED: i64 = 24 * 14;

/// The sweep reads the sizes of up to this many hours' partitions in one round trip, then as
/// many of those partitions at once as hold [`SWEPT_TOGETHER`] nodes together (one, whatever
/// its size, when it alone holds more).
const MAX_HOURS_TOGETHER: usize = 256;
const SWEPT_TOGETHER: usize = 1_024;

/// One hour: the time partition of the expiry sets.
const PARTITION_SECONDS: i64 = 3_600;

/// The first line of the settings a store records: the layout of its keys. Layout 3 keeps a
/// clock for each writer (layout 2 had one shared clock; both keep key postings as sorted sets
/// by post order, where layout 1, lists by arrival, had no such line).
const LAYOUT: &str = "# tantivy-dedup store layout 3";

/// How long a writer's clock holds the sweep back after it last reached the store (the low
/// mark leaves out writers whose lease ran out: a writer that stopped). A writer renews its
/// lease with whatever it sends once a quarter of it has passed.
const WRITER_LEASE: Duration = Duration::from_secs(60);

/// The hash slots of a Redis Cluster.
const SLOTS: usize = 16_384;

/// How long a connection or a reply is waited for.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A Lua script, called by its SHA1 (`EVALSHA`) so that a call carries a few bytes instead of
/// the script's text, and Redis does not hash the text again at every call.
struct Lua {
    text: &'static str,
    /// The text's SHA1 in hexadecimal, worked out at the first call.
    hash: OnceLock<String>,
}

impl Lua {
    const fn new(text: &'static str) -> Self {
        Lua {
            text,
            hash: OnceLock::new(),
        }
    }

    fn hash(&self) -> &str {
        self.hash
            .get_or_init(|| redis::Script::new(self.text).get_hash().to_owned())
    }
}

/// Claims a node. ARGV: seen, token, cutoff. Replies {0, attached, root} for an existing live
/// settled node (after counting the document, unless this token was the last counted: a
/// retry, and marking it seen), {1, ticket or '', the former root's digest or ''} when
/// created (or already owned by this token: a retry, which keeps its ticket), {2, owner} when
/// another insert (or the sweep) owns it. An expired settled root's record leaves its text's
/// digest `g` as the `z` mark on the new one.
static CLAIM: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 'o', 't', 'a', 'r', 'q', 'l', 'z', 'g')
if r[2] and tonumber(r[2]) >= tonumber(ARGV[3]) then
  if r[1] then
    if r[1] == ARGV[2] then return {1, r[5] or '', r[7] or ''} end
    return {2, r[1]}
  end
  if r[6] ~= ARGV[2] then
    redis.call('HINCRBY', KEYS[1], 'd', 1)
    redis.call('HSET', KEYS[1], 'l', ARGV[2])
  end
  if tonumber(ARGV[1]) > tonumber(r[2]) then redis.call('HSET', KEYS[1], 't', ARGV[1]) end
  return {0, r[3] or '', r[4] or ''}
end
local z = r[7]
if r[2] and not r[1] and not r[3] then z = r[8] or '0' end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'o', ARGV[2], 't', ARGV[1])
if z then redis.call('HSET', KEYS[1], 'z', z) end
return {1, '', z or ''}
",
);

/// Records a pending node's ticket if the token still owns it. ARGV: token, ticket.
static SET_TICKET: Lua = Lua::new(
    r"
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'q', ARGV[2])
  return 1
end
return 0
",
);

/// Settles a pending node owned by the token. ARGV: token, seen, ticket or attached-through,
/// root ('' for a root), the digest of its text (`g`, which a root leaves as its `z` mark).
/// A leaf keeps the ticket its pending record holds: a later ticket's node is left out by an
/// earlier insert's scan, settled or not.
static SETTLE: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 'o', 't')
if r[1] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'o')
if tonumber(ARGV[2]) > tonumber(r[2]) then redis.call('HSET', KEYS[1], 't', ARGV[2]) end
if ARGV[4] == '' then
  redis.call('HSET', KEYS[1], 'd', 1, 'l', ARGV[1], 'q', ARGV[3], 'g', ARGV[5])
else
  redis.call('HSET', KEYS[1], 'd', 1, 'l', ARGV[1], 'a', ARGV[3], 'r', ARGV[4])
end
return 1
",
);

/// Marks a live settled node seen. ARGV: seen, cutoff. Replies {} when missing, pending or
/// expired (left as it is), else {attached-through or ''}.
static TOUCH: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 't', 'a', 'o')
if (not r[1]) or r[3] or tonumber(r[1]) < tonumber(ARGV[2]) then return {} end
if tonumber(ARGV[1]) > tonumber(r[1]) then redis.call('HSET', KEYS[1], 't', ARGV[1]) end
return {r[2] or ''}
",
);

/// Deletes a pending node if `ARGV[1]` still owns it, keeping a former root's `z` mark.
static ABANDON: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 'o', 'z')
if r[1] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if r[2] then redis.call('HSET', KEYS[1], 'z', r[2]) end
return 1
",
);

/// Takes a document off a node's count if it has one.
static REMOVE_DOCUMENT: Lua = Lua::new(
    r"
local d = tonumber(redis.call('HGET', KEYS[1], 'd') or '0')
if d > 0 then redis.call('HINCRBY', KEYS[1], 'd', -1) return 1 end
return 0
",
);

/// Takes back a document that CLAIM counted for token `ARGV[1]`: one off the count, and the
/// token forgotten if it was the last one counted, so that its next claim counts again.
/// Replies 1 when a document was taken off.
static UNCOUNT_CLAIM: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 'd', 'l')
if r[2] == ARGV[1] then redis.call('HDEL', KEYS[1], 'l') end
if tonumber(r[1] or '0') > 0 then redis.call('HINCRBY', KEYS[1], 'd', -1) return 1 end
return 0
",
);

/// Raises a number kept in a string to `ARGV[1]` if it is larger; replies {the value kept, the
/// value before ('' if none)}.
static RAISE: Lua = Lua::new(
    r"
local v = redis.call('GET', KEYS[1])
if (not v) or tonumber(ARGV[1]) > tonumber(v) then
  redis.call('SET', KEYS[1], ARGV[1])
  return {ARGV[1], v or ''}
end
return {v, v}
",
);

/// Raises writer `ARGV[1]`'s clock to `ARGV[2]` (`-` to leave it: a writer that connects
/// and has no time yet) and renews its lease for `ARGV[3]` seconds (by the server's time);
/// drops the writers whose lease ran out, and raises the low mark `m` to the oldest clock of
/// the writers left. A writer that joins (or joins again, once its lease ran out) starts no
/// further back than the low mark: the sweep may already have deleted what is older. A
/// writer with no clock yet (`-`, only while there is no mark) holds the mark back until it
/// has one. Replies {the writer's clock or `-`, the low mark or '', the mark before or ''}.
static CLOCKS: Lua = Lua::new(
    r"
local now = tonumber(redis.call('TIME')[1])
local raise = tonumber(ARGV[2])
local mark = redis.call('HGET', KEYS[1], 'm')
local entries = redis.call('HGETALL', KEYS[1])
local found = false
local mine = nil
local low = nil
local held = false
for i = 1, #entries, 2 do
  local writer = entries[i]
  if writer ~= 'm' then
    local clock, deadline = string.match(entries[i + 1], '^(%S+) (%d+)$')
    if writer == ARGV[1] then
      found = true
      mine = tonumber(clock)
    elseif tonumber(deadline) < now then
      redis.call('HDEL', KEYS[1], writer)
    elseif clock == '-' then
      held = true
    elseif low == nil or tonumber(clock) < low then
      low = tonumber(clock)
    end
  end
end
if (not found) and mark then mine = tonumber(mark) end
if raise and (mine == nil or raise > mine) then mine = raise end
local stored = '-'
if mine then stored = string.format('%d', mine) else held = true end
redis.call('HSET', KEYS[1], ARGV[1], stored .. ' ' .. string.format('%d', now + tonumber(ARGV[3])))
if held then return {stored, mark or '', mark or ''} end
if low == nil or mine < low then low = mine end
if (not mark) or low > tonumber(mark) then
  redis.call('HSET', KEYS[1], 'm', string.format('%d', low))
  return {stored, string.format('%d', low), mark or ''}
end
return {stored, mark, mark}
",
);

/// Starts removing a node last seen before `ARGV[1]`, or the leftovers of one that is gone: the
/// record becomes a pending marker owned by the sweep (token `ARGV[2]`, seen `ARGV[3]`), so that a
/// concurrent claim of the same fingerprint waits until the cleanup is done and the marker is
/// deleted. A settled root leaves its value the `z` mark (kept by the marker and by its
/// deletion, [`ABANDON`]). Replies {attached-through or '', root or ''} when it did, {} for a
/// live node.
static EXPIRE_NODE: Lua = Lua::new(
    r"
local r = redis.call('HMGET', KEYS[1], 't', 'a', 'r', 'o', 'z', 'g')
if r[1] and tonumber(r[1]) >= tonumber(ARGV[1]) then return {} end
local z = r[5]
if r[1] and not r[2] and not r[4] then z = r[6] or '0' end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'o', ARGV[2], 't', ARGV[3])
if z then redis.call('HSET', KEYS[1], 'z', z) end
return {r[2] or '', r[3] or ''}
",
);

impl From<redis::RedisError> for StoreError {
    fn from(error: redis::RedisError) -> Self {
        StoreError::Backend(Box::new(error))
    }
}

/// A multiplexed async connection to the cluster of `address` (a coordinator's id directory,
/// a shard's log), each command answered within `response_timeout` (a blocking read needs
/// longer than it blocks).
pub(crate) async fn cluster_connection(
    address: &RedisAddress,
    response_timeout: Duration,
) -> redis::RedisResult<ClusterConnection> {
    redis::cluster::ClusterClient::builder(address.nodes.clone())
        .tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true))
        .connection_timeout(Duration::from_secs(2))
        .response_timeout(response_timeout)
        .retries(3)
        .build()?
        .get_async_connection()
        .await
}

/// Where a [`RedisStore`] connects, and its key prefix. Shown (`Display`, `Debug`) with any
/// password hidden.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisAddress {
    /// The seed nodes, e.g. `redis://127.0.0.1:7000`.
    pub nodes: Vec<String>,
    /// Prepended to every key, so that several deployments can share a cluster.
    pub prefix: String,
}

impl RedisAddress {
    /// Reads a `--store` argument: comma-separated `redis://host:port` seed nodes.
    ///
    /// ```
    /// use tantivy_dedup::forest::redis::RedisAddress;
    ///
    /// let address = RedisAddress::parse("redis://127.0.0.1:7000,redis://127.0.0.1:7001").unwrap();
    /// assert_eq!(address.nodes.len(), 2);
    /// assert_eq!(address.prefix, "td:");
    /// assert!(RedisAddress::parse("127.0.0.1:7000").is_err());
    /// ```
    pub fn parse(argument: &str) -> Result<Self, StoreError> {
        let nodes: Vec<String> = argument
            .split(',')
            .map(str::trim)
            .filter(|node| !node.is_empty())
            .map(str::to_owned)
            .collect();
        if nodes.is_empty() {
            return Err(StoreError::Config(
                "no Redis node given: expected redis://HOST:PORT[,redis://HOST:PORT…]".into(),
            ));
        }
        if let Some(bad) = nodes.iter().find(|node| !node.starts_with("redis://")) {
            return Err(StoreError::Config(format!(
                "{:?} is not a Redis address: expected redis://HOST:PORT (comma-separated for several seed nodes)",
                redacted(bad)
            )));
        }
        Ok(RedisAddress {
            nodes,
            prefix: "td:".into(),
        })
    }
}

impl std::fmt::Debug for RedisAddress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "RedisAddress({self}, prefix {:?})", self.prefix)
    }
}

/// The seed nodes with any password hidden, for logs and messages.
///
/// ```
/// use tantivy_dedup::forest::redis::RedisAddress;
///
/// let address = RedisAddress::parse("redis://:hunter2@10.0.0.1:7000,redis://10.0.0.2:7000").unwrap();
/// assert_eq!(address.to_string(), "redis://:***@10.0.0.1:7000,redis://10.0.0.2:7000");
/// ```
impl std::fmt::Display for RedisAddress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(|node| redacted(node)).collect();
        formatter.write_str(&nodes.join(","))
    }
}

impl SharedForest for RedisAddress {
    fn connect(&self, config: &DedupConfig) -> Result<Box<dyn ForestStore + Send>, StoreError> {
        Ok(Box::new(RedisStore::connect(self, config)?))
    }

    /// Connections sharing one link to each node ([`RedisStore::connect_several`]).
    fn connect_several(
        &self,
        config: &DedupConfig,
        count: usize,
    ) -> Result<Vec<Box<dyn ForestStore + Send>>, StoreError> {
        let stores = RedisStore::connect_several(self, config, count)?.into_iter();
        Ok(stores
            .map(|store| Box::new(store) as Box<dyn ForestStore + Send>)
            .collect())
    }
}

/// A node's address with any password replaced by `***`: in `scheme://user:password@host`,
/// everything after the first `:` of the part before the last `@`.
fn redacted(node: &str) -> String {
    let (scheme, rest) = node.split_once("://").unwrap_or(("", node));
    let prefix = if scheme.is_empty() {
        String::new()
    } else {
        format!("{scheme}://")
    };
    match rest.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{prefix}{user}:***@{host}"),
            None => format!("{prefix}{credentials}@{host}"),
        },
        None => format!("{prefix}{rest}"),
    }
}

/// The forest on a Redis Cluster: see the module's documentation for the key layout and
/// [`place`](crate::forest::place) for the protocol. Each ingest process (or thread) opens its own.
///
/// ```no_run
/// use tantivy_dedup::DedupConfig;
/// use tantivy_dedup::forest::Signature;
/// use tantivy_dedup::forest::redis::{RedisAddress, RedisStore};
/// use tantivy_dedup::forest::{new_token, place};
///
/// let address = RedisAddress::parse("redis://127.0.0.1:7000,redis://127.0.0.1:7001").unwrap();
/// let mut store = RedisStore::connect(&address, &DedupConfig::default()).unwrap();
/// let signature = Signature::from(tantivy_dedup::Fingerprint(42));
/// let placement = place(&mut store, &signature, 1_700_000_000, new_token()).unwrap();
/// println!("root {}", placement.root);
/// ```
pub struct RedisStore {
    shared: Arc<Shared>,
    connection: ClusterConnection,
    /// The newest event time expiry is judged by: this writer's clock, or the time an insert
    /// of a sequence was told to judge by ([`ForestStore::judge_expiry_at`]).
    newest: Option<Timestamp>,
    /// This writer's clock, as the store last gave it: the newest event time its connections
    /// placed (or the low mark, when it joined behind it); none before its first document
    /// on a store with no low mark yet.
    clock: Option<Timestamp>,
    /// The low mark, as last read: no writer alive judges expiry by an older time (less
    /// [`CLOCK_SLACK_SECONDS`]), so the sweep goes by it.
    low_mark: Option<Timestamp>,
    /// This writer's name among the clocks: its own, or that of the writer whose connection it
    /// is ([`ForestStore::join_writer`]).
    writer: u64,
    /// How long this writer's clock holds the sweep back after it last reached the store.
    lease: Duration,
    /// When this writer last renewed its lease.
    lease_renewed: Option<Instant>,
    /// The clock the inserts of a sequence go by, when they do.
    sequence_clock: Option<SequenceClock>,
    /// The last hour of event time this store knows to be swept.
    swept_hour: Option<i64>,
    pending_timeout: Duration,
    /// The ticket already recorded on the node the last claim found pending under its token.
    own_ticket: Option<u64>,
    /// The post order the insert of a sequence was given ([`ForestStore::post_at`]).
    sequence_post: Option<u64>,
    /// A post order this store took for its next new node (with a claim, to save a round
    /// trip), not used yet.
    own_post: Option<u64>,
    /// Writes whose replies nothing waits for, sent with the next batch instead of on their
    /// own: a new node's ticket (recorded with its scan) and an existing leaf's child count.
    deferred: Batch,
    /// Which node owns each hash slot (an index of `nodes`), to send a batch as one pipeline a
    /// node.
    owners: Vec<Option<usize>>,
    /// The masters, as `CLUSTER SLOTS` last listed them (the writer's links to them are in
    /// `shared`).
    nodes: Vec<Node>,
    /// Round trips made so far (batches, and single commands).
    round_trips: u64,
    stats: ForestStats,
}

/// What the connections of one writer share: the store's settings, the runtime their
/// synchronous calls block on, and one link to each node by its address (made by the first
/// connection that needs it, and found by the others, a node that became a master after a
/// failover included).
struct Shared {
    prefix: String,
    layout: BlockLayout,
    window: Timestamp,
    verifier: Option<Verifier>,
    /// The first seed node's address: the credentials and settings of the connections to
    /// the masters.
    seed: ConnectionInfo,
    runtime: StoreRuntime,
    links: Mutex<HashMap<(String, u16), NodeLink>>,
}

impl Shared {
    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u16), NodeLink>> {
        // The map is only read and written whole: a panic elsewhere leaves it consistent.
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A runtime dropped without waiting, so that a store may be dropped anywhere, an async task
/// included (a coordinator's placer is), where dropping a runtime the usual way panics. Its
/// tasks (the links' senders) end with it.
struct StoreRuntime(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for StoreRuntime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Some(runtime) => runtime,
            // Taken only by `drop`.
            None => unreachable!("the store's runtime is used after it was dropped"),
        }
    }
}

impl Drop for StoreRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl RedisStore {
    /// Connects to the cluster and checks that the settings match those of the writers
    /// already using it (fingerprints and edges must mean the same for all of them).
    pub fn connect(address: &RedisAddress, config: &DedupConfig) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(no_runtime)?;
        Self::connect_on(runtime, address, config)
    }

    /// `count` connections of one writer (at least one), for as many inserts in flight (a
    /// [`Pipeline`](super::Pipeline)): they share one runtime, whose one worker thread drives
    /// one link to each node for all of them, so that the requests of inserts in flight
    /// together go out together (one write and one read a node, on both sides, for many
    /// requests). One store of its own (`connect`) blocks on its link in its own thread
    /// instead, which saves a thread switch a round trip when it is alone.
    pub fn connect_several(
        address: &RedisAddress,
        config: &DedupConfig,
        count: usize,
    ) -> Result<Vec<Self>, StoreError> {
        if count <= 1 {
            return Ok(vec![Self::connect(address, config)?]);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redis-store")
            .enable_all()
            .build()
            .map_err(no_runtime)?;
        let first = Self::connect_on(runtime, address, config)?;
        let mut stores = Vec::with_capacity(count);
        for _ in 1..count {
            stores.push(first.sibling()?);
        }
        stores.push(first);
        Ok(stores)
    }

    fn connect_on(
        runtime: tokio::runtime::Runtime,
        address: &RedisAddress,
        config: &DedupConfig,
    ) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|error| StoreError::Config(error.to_string()))?;
        // Each step waits for its replies before the next is sent: Nagle's algorithm would
        // hold small requests back for the previous reply's acknowledgement.
        let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let seed = address
            .nodes
            .first()
            .ok_or_else(|| StoreError::Config("no Redis node given".into()))?
            .as_str()
            .into_connection_info()?
            .set_tcp_settings(tcp.clone());
        let client = redis::cluster::ClusterClient::builder(address.nodes.clone())
            .tcp_settings(tcp)
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            // The client's own defaults retry a dead node for minutes; the caller retries
            // unacknowledged inserts itself, so fail within about a second.
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait(300)
            .build()?;
        let connection = runtime.block_on(client.get_async_connection())?;
        let layout = config
            .layout()
            .map_err(|error| StoreError::Config(error.to_string()))?;
        let shared = Arc::new(Shared {
            prefix: address.prefix.clone(),
            layout,
            window: config.window_seconds() as Timestamp,
            verifier: config.verifier(),
            seed,
            runtime: StoreRuntime(Some(runtime)),
            links: Mutex::new(HashMap::new()),
        });
        let mut store = RedisStore::unconnected(shared, connection);
        store.load_slots()?;
        store.check_settings(config)?;
        store.enter_clock()?;
        Ok(store)
    }

    /// Another connection of the same writer to the same forest, sharing this one's runtime
    /// and links.
    fn sibling(&self) -> Result<Self, StoreError> {
        let mut store = RedisStore::unconnected(Arc::clone(&self.shared), self.connection.clone());
        store.owners = self.owners.clone();
        store.nodes = self.nodes.clone();
        store.enter_clock()?;
        Ok(store)
    }

    /// A store of `shared`'s writer that has read nothing yet: no slot map, no clock.
    fn unconnected(shared: Arc<Shared>, connection: ClusterConnection) -> Self {
        RedisStore {
            shared,
            connection,
            newest: None,
            clock: None,
            low_mark: None,
            writer: super::new_token(),
            lease: WRITER_LEASE,
            lease_renewed: None,
            sequence_clock: None,
            swept_hour: None,
            pending_timeout: Duration::from_secs(5),
            own_ticket: None,
            sequence_post: None,
            own_post: None,
            deferred: Batch::default(),
            owners: Vec::new(),
            nodes: Vec::new(),
            round_trips: 0,
            stats: ForestStats::default(),
        }
    }

    /// A writer holds the sweep back from the moment it connects, before its first
    /// document: several started together then find the window their streams begin in.
    fn enter_clock(&mut self) -> Result<(), StoreError> {
        let mut batch = Batch::default();
        self.raise_clock_into(&mut batch, None);
        let (reply,): (Value,) = self.run_batch(&batch)?;
        self.clock_read(reply)?;
        // It has seen no event time itself (an undated document is dated by the wall clock
        // until it has): its first insert raises the clock from where it was entered.
        self.newest = None;
        Ok(())
    }

    /// How long a pending neighbour is waited for before it is abandoned (default 5 s).
    pub fn with_pending_timeout(mut self, timeout: Duration) -> Self {
        self.pending_timeout = timeout;
        self
    }

    /// How long this writer's clock holds the sweep back after it last reached the store
    /// (default 60 s, at least 4 s; it renews the lease with whatever it sends once a quarter
    /// of it has passed): a writer that stops for longer than its lease then joins again no
    /// further back than the others' oldest clock.
    pub fn with_writer_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(4));
        // The entry made at connect has the default lease: renewed with the next request.
        self.lease_renewed = None;
        self
    }

    /// The settings that decide edges are written once, with the store's layout and the
    /// user dictionary's hash (it moves fingerprints); a writer with others is refused.
    fn check_settings(&mut self, config: &DedupConfig) -> Result<(), StoreError> {
        let settings = toml::to_string(config)
            .map_err(|error| StoreError::Config(format!("cannot write settings: {error}")))?;
        let dictionary = crate::text::user_dictionary_digest()
            .map(|digest| format!("# user dictionary {digest}\n"))
            .unwrap_or_default();
        let ours = format!("{LAYOUT}\n{dictionary}{settings}");
        let mut command = redis::cmd("SET");
        command
            .arg(self.key("config"))
            .arg(&ours)
            .arg("NX")
            .arg("GET");
        let theirs: Option<String> = self.run(command)?;
        match theirs {
            Some(theirs) if !theirs.starts_with(LAYOUT) => Err(StoreError::Config(format!(
                "the cluster's forest was written by an earlier version of tantivy-dedup, in \
                 another layout; this one needs `{LAYOUT}`. Start on an empty store, or under \
                 another --store-prefix"
            ))),
            Some(theirs) if theirs != ours => Err(StoreError::Config(format!(
                "the cluster's forest was made with other [dedup] settings or another user \
                 dictionary; every writer must use the same.\n\
                 cluster's:\n{theirs}\nthis process's:\n{ours}"
            ))),
            _ => Ok(()),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.shared.prefix)
    }

    fn node_key(&self, fingerprint: Fingerprint) -> String {
        format!("{}n:{:016x}", self.shared.prefix, fingerprint.0)
    }

    fn sketch_key(&self, fingerprint: Fingerprint) -> String {
        format!("{}s:{:016x}", self.shared.prefix, fingerprint.0)
    }

    /// A root's leaves: a set, so that counting a leaf twice (a retried insert) counts it once.
    fn children_key(&self, root: Fingerprint) -> String {
        format!("{}c:{:016x}", self.shared.prefix, root.0)
    }

    fn posting_key(&self, hash: u32) -> String {
        format!("{}k:{hash:08x}", self.shared.prefix)
    }

    fn partition_key(&self, hour: i64) -> String {
        format!("{}x:{hour}", self.shared.prefix)
    }

    /// The bucket keys of a fingerprint, one a table.
    fn bucket_keys(&self, fingerprint: Fingerprint) -> Vec<String> {
        self.shared
            .layout
            .bucket_keys(fingerprint.0)
            .map(|(table, key)| format!("{}b{table}:{key:x}", self.shared.prefix))
            .collect()
    }

    fn cutoff(&self) -> Timestamp {
        self.newest
            .map_or(Timestamp::MIN, |newest| newest - self.shared.window)
    }

    /// The sketch of the live node stored under `node`: `None` when it is gone, expired (its
    /// records wait for the sweep) or not yet published.
    fn live_sketch(&mut self, node: Fingerprint) -> Result<Option<Sketch>, StoreError> {
        let mut batch = Batch::default();
        batch.cmd("HGET", &self.node_key(node)).arg("t");
        batch.cmd("GET", &self.sketch_key(node));
        let (last_seen, bytes): (Option<String>, Option<Vec<u8>>) = self.run_batch(&batch)?;
        let live = last_seen
            .and_then(|seen| seen.parse::<Timestamp>().ok())
            .is_some_and(|seen| seen >= self.cutoff());
        Ok(bytes.as_deref().and_then(decode_sketch).filter(|_| live))
    }

    /// Runs `script` on `node`'s record alone: whether it replied 1 (it did what it was asked;
    /// 0 when the record was not as the script needs it, owned by another token, say).
    fn run_on_node(
        &mut self,
        script: &Lua,
        node: Fingerprint,
        args: &[String],
    ) -> Result<bool, StoreError> {
        let mut batch = Batch::default();
        batch.script(script, &self.node_key(node), args);
        let (done,): (i64,) = self.run_batch(&batch)?;
        Ok(done == 1)
    }

    /// Round trips to the cluster made so far: each batch counts one (however many nodes it
    /// goes to), and one more when some of its commands had to be sent again.
    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// Runs a command that has no key, or goes to every master (`KEYS`), through the client's
    /// own routing.
    fn run<T: redis::FromRedisValue>(&mut self, command: Cmd) -> Result<T, StoreError> {
        self.round_trips += 1;
        let connection = &mut self.connection;
        Ok(self
            .shared
            .runtime
            .block_on(command.query_async(connection))?)
    }

    /// Sends the batch and reads the kept replies as `T`, in order.
    fn run_batch<T: redis::FromRedisValue>(&mut self, batch: &Batch) -> Result<T, StoreError> {
        let replies = self.send(batch)?;
        let kept = replies
            .into_iter()
            .zip(&batch.requests)
            .filter(|(_, request)| request.kept)
            .map(|(reply, _)| reply)
            .collect();
        redis::from_redis_value(Value::Array(kept)).map_err(parsing)
    }

    /// Sends the deferred writes and the batch's commands, one pipeline to each node that owns
    /// some of their keys (on the writer's link to that node, with whatever the writer's
    /// other connections send meanwhile), all at once, and gives every reply of the batch in
    /// order. A command that did not run where it went (see [`not_run`]), or whose node's
    /// connection dropped or timed out (which fails every request sent with it), is sent
    /// again on its own through the cluster client, which follows redirections, reconnects and
    /// retries a cluster that is not ready, and the slot map is read again; a script that the
    /// node had not cached goes again with its text.
    ///
    /// The pipelines bypass the cluster client on purpose: it answers a pipeline that met a
    /// redirection by sending the whole pipeline again elsewhere, which could run twice the
    /// commands that had run.
    fn send(&mut self, batch: &Batch) -> Result<Vec<Value>, StoreError> {
        // The lease is renewed with whatever goes out once a quarter of it has passed (the
        // waits on pending neighbours included), so that no step of an insert outlives it.
        if self.lease_due() {
            let mut renewal = Batch::default();
            self.raise_clock_into(&mut renewal, None);
            renewal.ignore_last();
            self.deferred.requests.append(&mut renewal.requests);
        }
        let deferred = std::mem::take(&mut self.deferred);
        let requests: Vec<&Request> = deferred.requests.iter().chain(&batch.requests).collect();
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        self.round_trips += 1;
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut again = Vec::new();
        for (index, request) in requests.iter().enumerate() {
            match self
                .owners
                .get(usize::from(request.slot))
                .copied()
                .flatten()
            {
                Some(node) => match groups.iter_mut().find(|(owner, _)| *owner == node) {
                    Some((_, members)) => members.push(index),
                    None => groups.push((node, vec![index])),
                },
                None => again.push(index),
            }
        }
        let mut links = Vec::with_capacity(groups.len());
        for (node, _) in &groups {
            links.push(self.link(*node)?);
        }
        let pending: Vec<_> = groups
            .iter()
            .zip(links)
            .map(|((_, members), link)| {
                link.send(
                    members
                        .iter()
                        .map(|&index| requests[index].command.clone())
                        .collect(),
                )
            })
            .collect();
        let answers = self.shared.runtime.block_on(async {
            let mut answers = Vec::with_capacity(pending.len());
            for answer in pending {
                answers.push(answer.await);
            }
            answers
        });
        let mut replies = vec![Value::Nil; requests.len()];
        let mut reload_slots = false;
        for ((node, members), answer) in groups.iter().zip(answers) {
            let values = match answer {
                Ok(Ok(values)) => values,
                // The node went away or was restarted (the link connects again for its next
                // request), or failed over: the commands go through the cluster client.
                Ok(Err(error)) if error.is_connection_dropped() || error.is_io_error() => {
                    reload_slots = true;
                    again.extend(members);
                    continue;
                }
                // The link's task ended (it ends only with the runtime): a new link next time.
                Err(_) => {
                    self.forget_link(*node);
                    again.extend(members);
                    continue;
                }
                Ok(Err(error)) => return Err(StoreError::Backend(Box::new(error))),
            };
            if values.len() != members.len() {
                return Err(StoreError::Inconsistent(format!(
                    "{} replies to a pipeline of {} commands",
                    values.len(),
                    members.len()
                )));
            }
            for (&index, value) in members.iter().zip(values) {
                match &value {
                    Value::ServerError(error) if not_run(error.kind()) => {
                        reload_slots |= matches!(
                            error.kind(),
                            Some(ServerErrorKind::Moved | ServerErrorKind::Ask)
                        );
                        again.push(index);
                    }
                    _ => replies[index] = value,
                }
            }
        }
        if !again.is_empty() {
            self.round_trips += 1;
            let connection = &self.connection;
            let sent = self.shared.runtime.block_on(async {
                let tasks: Vec<_> = again
                    .iter()
                    .map(|&index| {
                        let request = requests[index];
                        let command = request.with_text.as_ref().unwrap_or(&request.command);
                        let command = command.clone();
                        let mut connection = connection.clone();
                        tokio::spawn(
                            async move { command.query_async::<Value>(&mut connection).await },
                        )
                    })
                    .collect();
                let mut sent = Vec::with_capacity(tasks.len());
                for task in tasks {
                    sent.push(task.await);
                }
                sent
            });
            for (&index, reply) in again.iter().zip(sent) {
                replies[index] = reply.map_err(lost)??;
            }
            if reload_slots {
                self.load_slots()?;
            }
        }
        if let Some(error) = replies.iter().find_map(|reply| match reply {
            Value::ServerError(error) => Some(error.clone()),
            _ => None,
        }) {
            return Err(redis::RedisError::from(error).into());
        }
        // The deferred writes' replies are not read.
        Ok(replies.split_off(deferred.requests.len()))
    }

    /// The writer's link to node `node` (an index of `nodes`), made if there is none.
    fn link(&mut self, node: usize) -> Result<NodeLink, StoreError> {
        let address = (self.nodes[node].host.clone(), self.nodes[node].port);
        if let Some(link) = self.shared.links().get(&address) {
            return Ok(link.clone());
        }
        let info = self
            .shared
            .seed
            .clone()
            .set_addr(ConnectionAddr::Tcp(address.0.clone(), address.1));
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let client = redis::Client::open(info)?;
        // Connected without holding the map: a sibling connecting to the same node at the
        // same time keeps whichever link went in first.
        let runtime = &self.shared.runtime;
        let link = runtime.block_on(NodeLink::connect(runtime, client, config))?;
        Ok(self.shared.links().entry(address).or_insert(link).clone())
    }

    /// Drops the writer's link to node `node`, whose task has ended.
    fn forget_link(&mut self, node: usize) {
        let address = (self.nodes[node].host.clone(), self.nodes[node].port);
        self.shared.links().remove(&address);
    }

    /// Reads which node owns each hash slot (`CLUSTER SLOTS`). The links, by address, stay:
    /// a node that is a master again finds its own.
    fn load_slots(&mut self) -> Result<(), StoreError> {
        let mut command = redis::cmd("CLUSTER");
        command.arg("SLOTS");
        let ranges: Vec<Vec<Value>> = self.run(command)?;
        let mut nodes: Vec<Node> = Vec::new();
        let mut owners = vec![None; SLOTS];
        for range in ranges {
            let [first, last, master, ..] = &range[..] else {
                return Err(parsing(format!("a CLUSTER SLOTS range {range:?}")));
            };
            let first: usize = redis::from_redis_value(first.clone()).map_err(parsing)?;
            let last: usize = redis::from_redis_value(last.clone()).map_err(parsing)?;
            let master: Vec<Value> = redis::from_redis_value(master.clone()).map_err(parsing)?;
            let [host, port, ..] = &master[..] else {
                return Err(parsing(format!("a CLUSTER SLOTS master {master:?}")));
            };
            let host: String = redis::from_redis_value(host.clone()).map_err(parsing)?;
            let port: u16 = redis::from_redis_value(port.clone()).map_err(parsing)?;
            let node = match nodes
                .iter()
                .position(|node| node.host == host && node.port == port)
            {
                Some(node) => node,
                None => {
                    nodes.push(Node { host, port });
                    nodes.len() - 1
                }
            };
            for owner in owners.iter_mut().take(last + 1).skip(first) {
                *owner = Some(node);
            }
        }
        self.nodes = nodes;
        self.owners = owners;
        Ok(())
    }

    /// Every node this store's prefix holds, read with KEYS on every master: for tests and
    /// diagnostics (it reads the whole forest, and KEYS blocks each master while it runs).
    pub fn dump(&mut self) -> Result<Vec<StoredNode>, StoreError> {
        let pattern = format!("{}n:*", self.shared.prefix);
        let mut command = redis::cmd("KEYS");
        command.arg(&pattern);
        // KEYS is routed to every master by the cluster client and the answers concatenated.
        let keys: Vec<String> = self.run(command)?;
        let mut nodes = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(512) {
            let mut batch = Batch::default();
            let mut fingerprints = Vec::with_capacity(chunk.len());
            for key in chunk {
                let hex = key.rsplit(':').next().unwrap_or_default();
                let fingerprint = u64::from_str_radix(hex, 16)
                    .map_err(|_| StoreError::Inconsistent(format!("odd node key {key}")))?;
                fingerprints.push(Fingerprint(fingerprint));
                batch.cmd("HMGET", key).arg(&["o", "q", "a", "r", "t", "d"]);
                batch.cmd("SCARD", &self.children_key(Fingerprint(fingerprint)));
            }
            let replies: Vec<Value> = self.run_batch(&batch)?;
            for (&fingerprint, pair) in fingerprints.iter().zip(replies.chunks(2)) {
                let mut record: Vec<Option<String>> =
                    redis::from_redis_value(pair[0].clone()).map_err(parsing)?;
                let children: i64 = redis::from_redis_value(pair[1].clone()).map_err(parsing)?;
                if record.len() != 6 {
                    return Err(StoreError::Inconsistent(format!(
                        "{fingerprint}: a node record read back as {record:?}"
                    )));
                }
                if record[0].is_none() && record[4].is_none() {
                    continue; // only a former root's mark: no node
                }
                record.insert(4, Some(children.to_string()));
                nodes.push(StoredNode::read(fingerprint, &record)?);
            }
        }
        Ok(nodes)
    }

    /// A node's sketch, if stored.
    pub fn sketch(&mut self, fingerprint: Fingerprint) -> Result<Option<Sketch>, StoreError> {
        let mut command = redis::cmd("GET");
        command.arg(self.sketch_key(fingerprint));
        let bytes: Option<Vec<u8>> = self.run(command)?;
        Ok(bytes.and_then(|bytes| decode_sketch(&bytes)))
    }

    /// Deletes the nodes of hours that have left the window (plus the grace hour) and were
    /// not seen since: out of their buckets and postings, off their roots' child counts.
    fn sweep(&mut self) -> Result<(), StoreError> {
        // By the low mark: no writer alive judges by an older time than it, less the slack,
        // so none takes as live what the sweep deletes.
        let Some(low_mark) = self.low_mark else {
            return Ok(());
        };
        let delete_before = low_mark - self.shared.window - SWEEP_GRACE_SECONDS;
        let last_due = delete_before.div_euclid(PARTITION_SECONDS) - 1;
        if self.swept_hour.is_some_and(|swept| swept >= last_due) {
            return Ok(());
        }
        let (_, previous) = self.raise("swept", last_due)?;
        self.swept_hour = Some(last_due);
        // Hours up to `previous` were swept by whoever raised the mark to it.
        let first = match previous {
            Some(previous) if previous >= last_due => return Ok(()),
            Some(previous) => previous + 1,
            None => last_due - self.shared.window / PARTITION_SECONDS - 2,
        };
        let hours: Vec<i64> = if last_due - first <= MAX_HOURS_WALKED {
            (first..=last_due).collect()
        } else {
            // A jump of event time over a long empty stretch: list the partitions that exist.
            let mut list = redis::cmd("KEYS");
            list.arg(format!("{}x:*", self.shared.prefix));
            let partitions: Vec<String> = self.run(list)?;
            let mut hours: Vec<i64> = partitions
                .iter()
                .filter_map(|key| key.rsplit(':').next()?.parse().ok())
                .filter(|&hour| hour <= last_due)
                .collect();
            hours.sort_unstable();
            hours
        };
        // Hours read together, as many as their sizes allow: a sparse stream (a few documents
        // a day, or a replay of years) would otherwise take a round trip or two an hour.
        for ahead in hours.chunks(MAX_HOURS_TOGETHER) {
            let mut sizes = Batch::default();
            for &hour in ahead {
                sizes.cmd("SCARD", &self.partition_key(hour));
            }
            let sizes: Vec<usize> = self.run_batch(&sizes)?;
            let mut start = 0;
            while start < ahead.len() {
                let mut end = start + 1;
                let mut nodes = sizes.get(start).copied().unwrap_or(0);
                while end < ahead.len()
                    && nodes + sizes.get(end).copied().unwrap_or(0) <= SWEPT_TOGETHER
                {
                    nodes += sizes.get(end).copied().unwrap_or(0);
                    end += 1;
                }
                self.sweep_hours(&ahead[start..end], delete_before)?;
                start = end;
            }
        }
        Ok(())
    }

    /// Sweeps the partitions of `hours`.
    fn sweep_hours(&mut self, hours: &[i64], delete_before: Timestamp) -> Result<(), StoreError> {
        let sweeper = super::new_token();
        // The marker must look live to claims, whatever their writer's clock.
        let marker_seen = u32::MAX;
        let mut swept = Vec::new();
        let mut read = Batch::default();
        for &hour in hours {
            read.cmd("SMEMBERS", &self.partition_key(hour));
        }
        let listed: Vec<Vec<i64>> = self.run_batch(&read)?;
        // A node seen in several of these hours is listed by each.
        let mut members: Vec<i64> = listed.into_iter().flatten().collect();
        members.sort_unstable();
        members.dedup();
        for chunk in members.chunks(256) {
            let mut batch = Batch::default();
            for &member in chunk {
                let node = Fingerprint(member as u64);
                batch.script(
                    &EXPIRE_NODE,
                    &self.node_key(node),
                    &[
                        delete_before.to_string(),
                        (sweeper as i64).to_string(),
                        marker_seen.to_string(),
                    ],
                );
                batch.cmd("GET", &self.sketch_key(node));
            }
            let replies: Vec<Value> = self.run_batch(&batch)?;
            let mut cleanup = Batch::default();
            for (&member, pair) in chunk.iter().zip(replies.chunks(2)) {
                let node = Fingerprint(member as u64);
                let deleted: Vec<String> =
                    redis::from_redis_value(pair[0].clone()).map_err(parsing)?;
                if deleted.len() != 2 {
                    continue;
                }
                self.stats.expired += 1;
                swept.push(node);
                for bucket in self.bucket_keys(node) {
                    cleanup.cmd("SREM", &bucket).arg(member);
                }
                let sketch: Option<Vec<u8>> =
                    redis::from_redis_value(pair[1].clone()).map_err(parsing)?;
                if let Some(sketch) = sketch.as_deref().and_then(decode_sketch) {
                    for &hash in sketch.keys() {
                        cleanup.cmd("ZREM", &self.posting_key(hash)).arg(member);
                    }
                }
                cleanup.cmd("DEL", &self.sketch_key(node));
                match parse_fingerprint(&deleted[1])? {
                    Some(root) => cleanup.cmd("SREM", &self.children_key(root)).arg(member),
                    None => cleanup.cmd("DEL", &self.children_key(node)),
                };
            }
            let _: Value = self.run_batch(&cleanup)?;
            // The cleanup is done: the markers go, and a waiting claim may create the node anew.
            let mut release = Batch::default();
            for node in swept.drain(..) {
                release.script(
                    &ABANDON,
                    &self.node_key(node),
                    &[(sweeper as i64).to_string()],
                );
            }
            let _: Value = self.run_batch(&release)?;
        }
        let mut delete = Batch::default();
        for &hour in hours {
            delete.cmd("DEL", &self.partition_key(hour));
        }
        let _: Value = self.run_batch(&delete)?;
        Ok(())
    }

    /// Raises the number kept under `name` to `value`; gives the number kept and the one before.
    fn raise(&mut self, name: &str, value: i64) -> Result<(i64, Option<i64>), StoreError> {
        let mut batch = Batch::default();
        batch.script(&RAISE, &self.key(name), &[value.to_string()]);
        let (raised,): ((String, String),) = self.run_batch(&batch)?;
        raised_numbers(name, raised)
    }

    /// Raises this writer's clock to `time` (at least; `None` leaves it) and renews its
    /// lease, in `batch`; its reply is read back by [`clock_read`](Self::clock_read).
    fn raise_clock_into(&mut self, batch: &mut Batch, time: Option<Timestamp>) {
        // Never below the clock the writer has: should the store have lost its entry (the
        // cluster was emptied), the writer joins again with it, or at the low mark if that is
        // ahead.
        let time = match (time, self.clock) {
            (Some(time), Some(clock)) => Some(time.max(clock)),
            (time, clock) => time.or(clock),
        };
        batch.script(
            &CLOCKS,
            &self.key("clocks"),
            &[
                self.writer.to_string(),
                time.map_or_else(|| "-".to_owned(), |time| time.to_string()),
                self.lease.as_secs().to_string(),
            ],
        );
        self.lease_renewed = Some(Instant::now());
    }

    /// Whether this writer's lease is due for renewal: a quarter of it has passed.
    fn lease_due(&self) -> bool {
        self.lease_renewed
            .is_none_or(|renewed| renewed.elapsed() >= self.lease / 4)
    }

    /// Takes in the reply of [`CLOCKS`]: this writer's clock, the low mark and the mark before
    /// (each may be none yet); sweeps what has left the low mark's window since.
    fn clock_read(&mut self, reply: Value) -> Result<(), StoreError> {
        let (clock, low_mark, previous): (String, String, String) =
            redis::from_redis_value(reply).map_err(parsing)?;
        let number = |name: &str, text: &str, none: &str| {
            if text == none {
                return Ok(None);
            }
            text.parse::<Timestamp>()
                .map(Some)
                .map_err(|_| StoreError::Inconsistent(format!("{name} holds {text:?}")))
        };
        let clock = number("this writer's clock", &clock, "-")?;
        let low_mark = number("the low mark", &low_mark, "")?;
        if let Some(low_mark) = low_mark.filter(|_| previous.is_empty()) {
            // The first mark of a cluster (or of one emptied since this writer last swept):
            // nothing is older than its window, so the sweep starts there.
            self.swept_hour = None;
            let start = (low_mark - self.shared.window).div_euclid(PARTITION_SECONDS) - 2;
            let mut mark = redis::cmd("SET");
            mark.arg(self.key("swept")).arg(start).arg("NX");
            let _: Value = self.run(mark)?;
        }
        self.clock = clock;
        self.low_mark = low_mark;
        self.newest = clock.map(|clock| self.judged(clock));
        self.sweep()
    }

    /// The newest event time to judge expiry by when this writer's clock reads `clock`: the
    /// time this store was told to judge by, unless the clock is ahead of it by more than half
    /// the sweep's grace (the sweep, by a low mark up to the clock, could then be deleting
    /// what that time takes as live).
    fn judged(&self, clock: Timestamp) -> Timestamp {
        match self.sequence_clock {
            Some(SequenceClock { newest, .. }) if clock - newest <= CLOCK_SLACK_SECONDS => newest,
            _ => clock,
        }
    }

    /// The time an insert of event time `time` raises this writer's clock to.
    fn raised_to(&self, time: Timestamp) -> Timestamp {
        match self.sequence_clock {
            Some(SequenceClock { raise_at_most, .. }) => time.min(raise_at_most),
            None => time,
        }
    }

    /// Adds the claim of `fingerprint` (script and expiry partition) to `batch`; the script's
    /// reply is read back.
    fn claim_into(
        &self,
        batch: &mut Batch,
        fingerprint: Fingerprint,
        seen: u32,
        cutoff: Timestamp,
        token: u64,
    ) {
        batch.script(
            &CLAIM,
            &self.node_key(fingerprint),
            &[
                seen.to_string(),
                (token as i64).to_string(),
                cutoff.to_string(),
            ],
        );
        self.seen_in_partition(batch, fingerprint, seen);
    }

    /// Reads the claim script's reply.
    fn read_claim(
        &mut self,
        fingerprint: Fingerprint,
        reply: &[String],
    ) -> Result<Claim, StoreError> {
        match reply.first().map(String::as_str) {
            Some("0") if reply.len() == 3 => {
                let attached_to = parse_fingerprint(&reply[1])?;
                let root = parse_fingerprint(&reply[2])?.unwrap_or(fingerprint);
                if attached_to.is_some() {
                    // Idempotent: repairs the count of a leaf whose insert stopped after its
                    // settle (the retry of that insert comes this way). It goes with the chain's
                    // refresh, which follows.
                    self.deferred
                        .cmd("SADD", &self.children_key(root))
                        .arg(signed(fingerprint));
                }
                Ok(Claim::Existing {
                    attached_to,
                    root: Some(root),
                })
            }
            Some("1") => {
                // A retry of an insert that already took its ticket keeps it, so that the
                // neighbours that are waiting for it (or it for them) keep their order.
                self.own_ticket = reply.get(1).and_then(|ticket| ticket.parse().ok());
                let former_root = match reply.get(2).map(String::as_str) {
                    None | Some("") => None,
                    Some(digest) => Some(digest.parse::<u32>().map_err(|_| {
                        StoreError::Inconsistent(format!(
                            "{fingerprint}: a former root's digest {digest:?}"
                        ))
                    })?),
                };
                Ok(Claim::Created { former_root })
            }
            Some("2") if reply.len() == 2 => Ok(Claim::Busy {
                owner: reply[1].parse::<i64>().map_err(|_| {
                    StoreError::Inconsistent(format!("{fingerprint}: owner {:?}", reply[1]))
                })? as u64,
            }),
            _ => Err(StoreError::Inconsistent(format!(
                "claim of {fingerprint} answered {reply:?}"
            ))),
        }
    }

    /// Adds the settle of `fingerprint` (script and expiry partition) to `batch`; the script's
    /// reply (1 when settled) is read back.
    /// Reads each of `nodes` (record and, when verifying, sketch) into `read`, with its
    /// verdict against `sketch`.
    fn read_candidates(
        &mut self,
        nodes: &[Fingerprint],
        sketch: &Sketch,
        later: &dyn Fn(&EdgeState) -> bool,
        read: &mut HashMap<Fingerprint, Candidate>,
    ) -> Result<(), StoreError> {
        let mut batch = Batch::default();
        for &node in nodes {
            batch
                .cmd("HMGET", &self.node_key(node))
                .arg(&["o", "q", "t", "r"]);
            if self.shared.verifier.is_some() {
                batch.cmd("GET", &self.sketch_key(node));
            }
        }
        let replies: Vec<Value> = self.run_batch(&batch)?;
        let per_node = if self.shared.verifier.is_some() { 2 } else { 1 };
        let cutoff = self.cutoff();
        for (&node, reply) in nodes.iter().zip(replies.chunks(per_node)) {
            let record: Vec<Option<String>> =
                redis::from_redis_value(reply[0].clone()).map_err(parsing)?;
            let field = |index: usize| record.get(index).cloned().flatten();
            let ticket = field(1)
                .map(|ticket| parse_number(node, "q", &ticket))
                .transpose()?;
            let live = field(2)
                .and_then(|seen| seen.parse::<Timestamp>().ok())
                .is_some_and(|seen| seen >= cutoff);
            let candidate = if !live {
                Candidate::Gone // expired, swept or abandoned
            } else {
                let state = match field(0) {
                    Some(owner) => EdgeState::Pending {
                        ticket,
                        owner: parse_number::<i64>(node, "o", &owner)? as u64,
                    },
                    None => EdgeState::Settled {
                        root: parse_fingerprint(&field(3).unwrap_or_default())?.unwrap_or(node),
                        ticket,
                    },
                };
                match &self.shared.verifier {
                    _ if later(&state) => Candidate::Later,
                    None => Candidate::Live {
                        state,
                        verdict: Verdict::Copy,
                        sketch: None,
                    },
                    Some(verifier) => {
                        let bytes: Option<Vec<u8>> =
                            redis::from_redis_value(reply[1].clone()).map_err(parsing)?;
                        match bytes.as_deref().and_then(decode_sketch) {
                            Some(stored) => Candidate::Live {
                                state,
                                verdict: verifier.verdict(sketch, &stored),
                                sketch: Some(stored),
                            },
                            // Not written yet: still publishing, so its ticket will be later
                            // than ours, and it is the one that must see us.
                            None => Candidate::Later,
                        }
                    }
                }
            };
            read.insert(node, candidate);
        }
        Ok(())
    }

    fn settle_into(
        &self,
        batch: &mut Batch,
        fingerprint: Fingerprint,
        token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) {
        let (link, root) = match settlement {
            Settlement::Root { ticket } => (ticket.to_string(), String::new()),
            Settlement::Leaf { attached_to, root } => (signed(attached_to), signed(root)),
        };
        let digest = digest_of(sketch.filter(|_| self.shared.verifier.is_some()));
        batch.script(
            &SETTLE,
            &self.node_key(fingerprint),
            &[
                (token as i64).to_string(),
                seen.to_string(),
                link,
                root,
                digest.to_string(),
            ],
        );
        self.seen_in_partition(batch, fingerprint, seen);
    }

    /// Counts a settle's outcome in this writer's statistics.
    fn count_settled(&mut self, settled: bool, settlement: Settlement) {
        if settled {
            self.stats.nodes += 1;
            self.stats.roots += usize::from(matches!(settlement, Settlement::Root { .. }));
        }
    }

    /// The partition command that records a node as seen in `seen`'s hour.
    fn seen_in_partition(&self, batch: &mut Batch, fingerprint: Fingerprint, seen: u32) {
        batch
            .cmd(
                "SADD",
                &self.partition_key(i64::from(seen).div_euclid(PARTITION_SECONDS)),
            )
            .arg(fingerprint.0 as i64);
        batch.ignore_last();
    }
}

/// A master of the cluster.
#[derive(Clone)]
struct Node {
    host: String,
    port: u16,
}

/// Commands sent together: one round trip. A Redis Cluster node runs only the commands whose
/// keys it owns, and one step of an insert touches keys on every node, so a batch goes out as
/// one pipeline a node, all at once (`RedisStore::send`).
#[derive(Default)]
struct Batch {
    requests: Vec<Request>,
}

/// One command of a batch.
struct Request {
    command: Cmd,
    /// The hash slot of the command's key, which decides its node.
    slot: u16,
    /// For a script called by its hash: the same call with the script's text (`EVAL`, which
    /// also caches it), for a node that has not cached it (restarted, or new to the cluster).
    with_text: Option<Cmd>,
    /// Whether the reply is read back.
    kept: bool,
}

impl Batch {
    /// Adds command `name` on `key`, whose reply is read back; the caller adds the other
    /// arguments.
    fn cmd(&mut self, name: &str, key: &str) -> &mut Cmd {
        let mut command = redis::cmd(name);
        command.arg(key);
        self.push(command, key, None)
    }

    /// Adds a call of `script` on `key` with `args`, whose reply is read back.
    fn script(&mut self, script: &Lua, key: &str, args: &[String]) {
        let call = |name: &str, script: &str| {
            let mut command = redis::cmd(name);
            command.arg(script).arg(1).arg(key).arg(args);
            command
        };
        self.push(
            call("EVALSHA", script.hash()),
            key,
            Some(call("EVAL", script.text)),
        );
    }

    fn push(&mut self, command: Cmd, key: &str, with_text: Option<Cmd>) -> &mut Cmd {
        self.requests.push(Request {
            command,
            slot: slot(key.as_bytes()),
            with_text,
            kept: true,
        });
        let last = self.requests.len() - 1;
        &mut self.requests[last].command
    }

    /// Drops the last command's reply from what the batch answers.
    fn ignore_last(&mut self) {
        if let Some(request) = self.requests.last_mut() {
            request.kept = false;
        }
    }
}

/// The hash slot of `key`, as Redis Cluster computes it: CRC16 (XMODEM) of the key, or of its
/// hash tag (what is between the first `{` and the next `}`, if not empty), modulo 16384.
fn slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&byte| byte == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&byte| byte == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tag.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc % SLOTS as u16
}

/// Whether a command answered with this error did not run and can be sent again: a slot that
/// moved, a node without the script cached, a cluster not ready yet.
fn not_run(kind: Option<ServerErrorKind>) -> bool {
    matches!(
        kind,
        Some(
            ServerErrorKind::NoScript
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading
        )
    )
}

/// A runtime that could not be started.
fn no_runtime(error: std::io::Error) -> StoreError {
    StoreError::Config(format!("cannot start a runtime: {error}"))
}

/// A Redis request whose task went away.
fn lost(error: tokio::task::JoinError) -> StoreError {
    StoreError::Inconsistent(format!("a Redis request was lost: {error}"))
}

/// A node as stored in Redis, for checks and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredNode {
    /// The node's fingerprint.
    pub fingerprint: Fingerprint,
    /// The owner token while an insert has it pending.
    pub pending: Option<u64>,
    /// For a leaf: attached-through and root.
    pub leaf: Option<(Fingerprint, Fingerprint)>,
    /// For a root: its creation ticket and its child count.
    pub root: Option<(u64, i64)>,
    /// Last seen (event time).
    pub last_seen: Timestamp,
    /// Documents counted on it.
    pub documents: i64,
}

impl StoredNode {
    fn read(fingerprint: Fingerprint, record: &[Option<String>]) -> Result<Self, StoreError> {
        let field = |index: usize| record.get(index).cloned().flatten();
        let number = |index: usize| -> Result<Option<i64>, StoreError> {
            field(index)
                .map(|value| {
                    value.parse::<i64>().map_err(|_| {
                        StoreError::Inconsistent(format!(
                            "{fingerprint}: field {index} is {value:?}"
                        ))
                    })
                })
                .transpose()
        };
        let pending = number(0)?.map(|owner| owner as u64);
        let attached = field(2)
            .as_deref()
            .map(parse_fingerprint)
            .transpose()?
            .flatten();
        let root = field(3)
            .as_deref()
            .map(parse_fingerprint)
            .transpose()?
            .flatten();
        Ok(StoredNode {
            fingerprint,
            pending,
            leaf: attached.zip(root),
            root: match (pending, attached) {
                (None, None) => Some((number(1)?.unwrap_or(0) as u64, number(4)?.unwrap_or(0))),
                _ => None,
            },
            last_seen: number(5)?.unwrap_or(0),
            documents: number(6)?.unwrap_or(0),
        })
    }
}

/// What a scan read of one candidate.
enum Candidate {
    /// Expired, swept or abandoned: no candidate, though it keeps its place in a posting until
    /// the sweep takes it out (the in-memory forest takes an expired node out at once, but
    /// never brings back one it pushed out of a full posting: docs/scaling.md, "Caveat: capped
    /// key postings", has what that changes).
    Gone,
    /// A node of an insert after the scanning one: not there yet, in a posting or elsewhere.
    Later,
    /// A live node, with the new text's verdict against it.
    Live {
        state: EdgeState,
        verdict: Verdict,
        /// Its sketch, when the store verifies.
        sketch: Option<Sketch>,
    },
}

/// A key posting as the in-memory forest would hold it when the scanning insert reads it:
/// its first [`POSTING_CAPACITY`] entries (newest first) that are not later inserts. Gives
/// them, and those of them not read yet (any of which may turn out later, and then one more
/// entry is needed).
fn earlier_posted(
    list: &[Fingerprint],
    read: &HashMap<Fingerprint, Candidate>,
) -> (Vec<Fingerprint>, Vec<Fingerprint>) {
    let mut kept = Vec::new();
    let mut unread = Vec::new();
    for &node in list {
        if kept.len() == POSTING_CAPACITY {
            break;
        }
        match read.get(&node) {
            Some(Candidate::Later) => continue,
            Some(_) => {}
            None => unread.push(node),
        }
        kept.push(node);
    }
    (kept, unread)
}

/// A reply of an unexpected shape.
fn parsing(error: impl std::fmt::Display) -> StoreError {
    StoreError::Inconsistent(format!("unexpected reply: {error}"))
}

/// The reply of the RAISE script on `name`: the number kept, and the one before if any.
fn raised_numbers(
    name: &str,
    (kept, previous): (String, String),
) -> Result<(Timestamp, Option<Timestamp>), StoreError> {
    let number = |text: &str| {
        text.parse::<Timestamp>()
            .map_err(|_| StoreError::Inconsistent(format!("{name} holds {text:?}")))
    };
    let previous = if previous.is_empty() {
        None
    } else {
        Some(number(&previous)?)
    };
    Ok((number(&kept)?, previous))
}

/// A fingerprint written as a signed decimal (`''` for none).
/// A number field `name` of `node`'s record.
fn parse_number<T: std::str::FromStr>(
    node: Fingerprint,
    name: &str,
    text: &str,
) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Inconsistent(format!("{node}'s field {name} holds {text:?}")))
}

fn parse_fingerprint(text: &str) -> Result<Option<Fingerprint>, StoreError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(|value| Some(Fingerprint(value as u64)))
        .map_err(|_| StoreError::Inconsistent(format!("{text:?} is not a fingerprint")))
}

fn signed(fingerprint: Fingerprint) -> String {
    (fingerprint.0 as i64).to_string()
}

/// A sketch as bytes: its values (shift, then hashes) as little-endian u32.
fn encode_sketch(sketch: &Sketch) -> Vec<u8> {
    sketch
        .to_values()
        .flat_map(|value| (value as u32).to_le_bytes())
        .collect()
}

fn decode_sketch(bytes: &[u8]) -> Option<Sketch> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Sketch::from_values(
        bytes
            .chunks_exact(4)
            .map(|chunk| u64::from(u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))),
    )
}

impl ForestStore for RedisStore {
    fn max_distance(&self) -> u32 {
        self.shared.layout.max_distance()
    }

    fn window(&self) -> Timestamp {
        self.shared.window
    }

    fn advance_to(&mut self, time: Timestamp) -> Result<Timestamp, StoreError> {
        let time = Timestamp::from(clamp_time(time));
        let mut batch = Batch::default();
        self.raise_clock_into(&mut batch, Some(time));
        let (reply,): (Value,) = self.run_batch(&batch)?;
        self.clock_read(reply)?;
        Ok(self.judged(self.clock.unwrap_or(time)))
    }

    fn newest_time(&self) -> Option<Timestamp> {
        self.newest
    }

    fn take_post_orders(&mut self, count: u64) -> Result<u64, StoreError> {
        if self.shared.verifier.is_none() {
            return Ok(0); // seed mode has no key postings
        }
        let mut batch = Batch::default();
        batch.cmd("INCRBY", &self.key("posts")).arg(count);
        let (last,): (u64,) = self.run_batch(&batch)?;
        Ok(last.saturating_sub(count.saturating_sub(1)))
    }

    fn post_at(&mut self, order: Option<u64>) {
        self.sequence_post = order;
    }

    fn join_writer(&mut self, writer: u64) {
        if writer == self.writer {
            return;
        }
        // The connection's own entry goes, and it holds the sweep back as the writer's, both
        // with its next batch.
        let mut moved = Batch::default();
        moved
            .cmd("HDEL", &self.key("clocks"))
            .arg(self.writer.to_string());
        moved.ignore_last();
        self.writer = writer;
        self.raise_clock_into(&mut moved, None);
        moved.ignore_last();
        self.deferred.requests.append(&mut moved.requests);
    }

    fn judge_expiry_at(&mut self, clock: Option<SequenceClock>) {
        self.sequence_clock = clock.map(|clock| SequenceClock {
            newest: Timestamp::from(clamp_time(clock.newest)),
            raise_at_most: Timestamp::from(clamp_time(clock.raise_at_most)),
        });
        if let Some(clock) = self.clock {
            self.newest = Some(self.judged(clock));
        }
    }

    /// Raises the clock, reads the node's sketch and claims the node in one batch, then checks
    /// what the sequential order (clock, look, claim) would have checked first. The claim
    /// judges expiry by this writer's clock as last read (raised to the document's own). Only
    /// this writer moves its clock, so the clock read in the same batch differs from that
    /// only when another connection of the writer raised it, or the writer joined again at
    /// the low mark (its lease ran out, or the store lost its entry): when it is
    /// then ahead by more than half the sweep's grace (the sweep could be deleting what the
    /// claim took as live) or the document turns out late (its seen time, the window's start,
    /// moved), the claim is taken back and made again with the clock just read.
    fn open(
        &mut self,
        node: Fingerprint,
        sketch: Option<&Sketch>,
        time: Timestamp,
        token: u64,
    ) -> Result<Opening, StoreError> {
        let time = Timestamp::from(clamp_time(time));
        // A store's first insert raises its clock first: its seen time depends on the clock,
        // which may start at the low mark.
        let assumed = match self.newest {
            Some(newest) => newest.max(time),
            None => self.advance_to(self.raised_to(time))?.max(time),
        };
        let seen = seen_at(time, assumed, self.shared.window);
        let verify = sketch.filter(|_| self.shared.verifier.is_some());
        let mut batch = Batch::default();
        // A new node will need a post order: taken now, in case, rather than on its own later.
        let take_post = verify.is_some() && self.sequence_post.is_none() && self.own_post.is_none();
        if take_post {
            batch.cmd("INCR", &self.key("posts"));
        }
        // Only a document newer than any this writer has placed moves its clock; the others
        // leave it alone, but for renewing the writer's lease now and then.
        let raise_to = self.raised_to(time);
        let raise = self.clock.is_none_or(|clock| raise_to > clock) || self.lease_due();
        if raise {
            self.raise_clock_into(&mut batch, Some(raise_to));
        }
        if verify.is_some() {
            batch.cmd("GET", &self.sketch_key(node));
        }
        self.claim_into(&mut batch, node, seen, assumed - self.shared.window, token);
        let mut replies: Vec<Value> = self.run_batch(&batch)?;
        if take_post && !replies.is_empty() {
            let post: u64 = redis::from_redis_value(replies.remove(0)).map_err(parsing)?;
            self.own_post = Some(post);
        }
        let claimed: Vec<String> =
            redis::from_redis_value(replies.pop().unwrap_or(Value::Nil)).map_err(parsing)?;
        let stored: Option<Vec<u8>> = match verify {
            Some(_) => {
                redis::from_redis_value(replies.pop().unwrap_or(Value::Nil)).map_err(parsing)?
            }
            None => None,
        };
        let claim = self.read_claim(node, &claimed)?;
        let mut again = false;
        if let Some(reply) = replies.pop() {
            self.clock_read(reply)?;
            let newest = self.newest.unwrap_or(assumed);
            again = seen_at(time, newest, self.shared.window) != seen
                || newest - assumed > CLOCK_SLACK_SECONDS;
        }
        let stored = stored.as_deref().and_then(decode_sketch);
        let verified = match (verify, claim) {
            (Some(sketch), Claim::Existing { .. } | Claim::Busy { .. }) => stored.map(|stored| {
                self.shared
                    .verifier
                    .as_ref()
                    .is_none_or(|verifier| verifier.matches(sketch, &stored))
            }),
            _ => Some(true),
        };
        match (claim, verified) {
            // A live node whose text does not verify: try the next value, as the look before
            // the claim would have.
            (Claim::Existing { .. }, Some(false)) => {
                self.uncount_claim(node, token)?;
                Ok(Opening::Refused)
            }
            (Claim::Busy { .. }, Some(false)) => Ok(Opening::Refused),
            // No sketch to verify against yet (it appeared between the look and the claim),
            // or a clock that moved too far: take the count back and look again.
            (Claim::Existing { .. }, None) => {
                self.uncount_claim(node, token)?;
                Ok(Opening::Again)
            }
            (Claim::Existing { .. }, _) if again => {
                self.uncount_claim(node, token)?;
                Ok(Opening::Again)
            }
            _ if again => Ok(Opening::Again),
            _ => Ok(Opening::Claimed { claim, seen }),
        }
    }

    fn claim(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
        token: u64,
    ) -> Result<Claim, StoreError> {
        let mut batch = Batch::default();
        self.claim_into(&mut batch, fingerprint, seen, self.cutoff(), token);
        let (reply,): (Vec<String>,) = self.run_batch(&batch)?;
        self.read_claim(fingerprint, &reply)
    }

    fn verifies_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<bool>, StoreError> {
        // Gone, expired or not yet published: nothing to refuse; the claim decides.
        Ok(self.live_sketch(node)?.map(|stored| {
            self.shared
                .verifier
                .as_ref()
                .is_none_or(|verifier| verifier.matches(sketch, &stored))
        }))
    }

    fn containment_with_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<f64>, StoreError> {
        if self.shared.verifier.is_none() {
            return Ok(None);
        }
        Ok(self
            .live_sketch(node)?
            .map(|stored| sketch.similarity(&stored).containment))
    }

    fn publish(
        &mut self,
        fingerprint: Fingerprint,
        sketch: Option<&Sketch>,
        _token: u64,
    ) -> Result<Option<u64>, StoreError> {
        let member = fingerprint.0 as i64;
        let mut batch = Batch::default();
        if self.shared.verifier.is_some() {
            let post = match self.sequence_post.or(self.own_post.take()) {
                Some(post) => post,
                None => self.take_post_orders(1)?,
            };
            let sketch = sketch.cloned().unwrap_or_default();
            batch
                .cmd("SET", &self.sketch_key(fingerprint))
                .arg(encode_sketch(&sketch));
            batch.ignore_last();
            // Kept: the in-memory cap, the new node itself, and the later inserts of its
            // sequence that may post before it reads (`edges` leaves them out).
            let kept = (POSTING_CAPACITY + 1 + LATER_INSERTS_AT_MOST) as i64;
            for &hash in sketch.keys() {
                let posting = self.posting_key(hash);
                // Added, then cut to the newest `kept` by post order. Two commands, not a
                // script: they run in order on the key's node, and another writer's add
                // between them only leaves one entry more until the next cut.
                batch.cmd("ZADD", &posting).arg(post).arg(member);
                batch.ignore_last();
                batch
                    .cmd("ZREMRANGEBYRANK", &posting)
                    .arg(0)
                    .arg(-(kept + 1));
                batch.ignore_last();
            }
        }
        for bucket in self.bucket_keys(fingerprint) {
            batch.cmd("SADD", &bucket).arg(member);
            batch.ignore_last();
        }
        let _: Value = self.run_batch(&batch)?;
        Ok(self.own_ticket.take())
    }

    fn take_tickets(&mut self, count: u64) -> Result<u64, StoreError> {
        let mut batch = Batch::default();
        batch.cmd("INCRBY", &self.key("ticket")).arg(count);
        let (last,): (u64,) = self.run_batch(&batch)?;
        Ok(last)
    }

    fn record_ticket(&mut self, fingerprint: Fingerprint, token: u64, ticket: u64) {
        // Recorded with the scan's first batch, which comes next: until then a neighbour sees
        // the node pending without a ticket and waits for it, as it would before the ticket
        // was taken. Not recorded (0): a neighbour abandoned this insert; `settle` will fail
        // and retry it.
        self.deferred.script(
            &SET_TICKET,
            &self.node_key(fingerprint),
            &[(token as i64).to_string(), ticket.to_string()],
        );
    }

    fn edges(
        &mut self,
        fingerprint: Fingerprint,
        sketch: Option<&Sketch>,
        later: &dyn Fn(&EdgeState) -> bool,
    ) -> Result<Edges, StoreError> {
        let k = self.shared.layout.max_distance();
        let empty = Sketch::default();
        let sketch = sketch.unwrap_or(&empty);
        let keys: &[u32] = if self.shared.verifier.is_some() {
            sketch.keys()
        } else {
            &[]
        };
        let mut batch = Batch::default();
        let buckets = self.bucket_keys(fingerprint);
        for bucket in &buckets {
            batch.cmd("SMEMBERS", bucket);
        }
        for &hash in keys {
            batch
                .cmd("ZREVRANGE", &self.posting_key(hash))
                .arg(0)
                .arg(-1);
        }
        let lists: Vec<Vec<i64>> = self.run_batch(&batch)?;
        let (tables, postings) = lists.split_at(buckets.len().min(lists.len()));
        let others = |list: &[i64]| -> Vec<Fingerprint> {
            list.iter()
                .map(|&member| Fingerprint(member as u64))
                .filter(|&node| node != fingerprint)
                .collect()
        };
        let mut near: Vec<Fingerprint> = others(tables.concat().as_slice());
        near.retain(|node| fingerprint.distance(*node) <= k);
        let postings: Vec<Vec<Fingerprint>> = postings.iter().map(|list| others(list)).collect();
        // Read the candidates; where a posting's first entries turn out to be later inserts,
        // read as many entries past them, until each posting has its cap of earlier ones.
        let mut read: HashMap<Fingerprint, Candidate> = HashMap::new();
        let mut unread: Vec<Fingerprint> = near.clone();
        loop {
            unread.extend(
                postings
                    .iter()
                    .flat_map(|list| earlier_posted(list, &read).1),
            );
            unread.sort_unstable();
            unread.dedup();
            if unread.is_empty() {
                break;
            }
            self.read_candidates(&unread, sketch, later, &mut read)?;
            unread.clear();
        }
        let mut found = Candidates::default();
        near.iter().for_each(|&node| found.push_near(node));
        for list in &postings {
            found.push_key(earlier_posted(list, &read).0);
        }
        // Each live candidate's verdict and its state as read, in ascending order of nodes.
        let mut verdicts = Vec::new();
        let mut states = Vec::new();
        let mut sketches = Vec::new();
        for node in found.nodes() {
            if let Some(Candidate::Live {
                state,
                verdict,
                sketch,
            }) = read.remove(&node)
            {
                verdicts.push(Compared { node, verdict });
                states.push((node, state));
                sketches.extend(sketch.map(|sketch| (node, sketch)));
            }
        }
        let state_of = |node: Fingerprint| {
            let at = states.binary_search_by_key(&node, |&(node, _)| node).ok()?;
            Some(states[at].1)
        };
        // The evidence asks the tree of a candidate that the new text contains, of its rivals,
        // and of the texts that carry what a candidate shares with the new one (or what the
        // new text has beyond a candidate that lies within it), and of such a candidate; a
        // pending one (an earlier insert's: a later one's reads as `Later`) has none yet,
        // where one writer in turn would have found it settled.
        let unsettled_asked = std::cell::RefCell::new(Vec::new());
        let tree = |node| match state_of(node)? {
            EdgeState::Settled { root, .. } => Some(root),
            EdgeState::Pending { .. } => {
                unsettled_asked.borrow_mut().push(node);
                None
            }
        };
        let sketch_of = |node: Fingerprint| {
            let at = sketches
                .binary_search_by_key(&node, |(node, _)| *node)
                .ok()?;
            Some(&sketches[at].1)
        };
        let evidence = match &self.shared.verifier {
            Some(verifier) => found.evidence(
                &verdicts,
                sketch.view(),
                |node| sketch_of(node).map(Sketch::view),
                tree,
                verifier,
            ),
            // Seed mode: the candidates are the nodes within `k`, each read as a copy.
            None => Evidence {
                edges: verdicts.clone(),
                boilerplate: false,
            },
        };
        let edge = |Compared { node, verdict }| {
            Some(Edge {
                node,
                distance: fingerprint.distance(node),
                verdict,
                state: state_of(node)?,
            })
        };
        let unsettled_asked = unsettled_asked.into_inner();
        if !unsettled_asked.is_empty() {
            // Answered with those alone, edges or not, to be waited for and read again
            // (`place`): the evidence is then what one writer in turn would have weighed.
            return Ok(Edges {
                edges: verdicts
                    .into_iter()
                    .filter(|compared| unsettled_asked.contains(&compared.node))
                    .filter_map(edge)
                    .collect(),
                boilerplate: false,
            });
        }
        Ok(Edges {
            edges: evidence.edges.into_iter().filter_map(edge).collect(),
            boilerplate: evidence.boilerplate,
        })
    }

    fn root_ranks(&mut self, roots: &[Fingerprint]) -> Result<Vec<Option<RootRank>>, StoreError> {
        let mut batch = Batch::default();
        for &root in roots {
            batch
                .cmd("HMGET", &self.node_key(root))
                .arg(&["o", "a", "q", "t"]);
            batch.cmd("SCARD", &self.children_key(root));
        }
        let replies: Vec<Value> = self.run_batch(&batch)?;
        let cutoff = self.cutoff();
        replies
            .chunks(2)
            .zip(roots)
            .map(|(pair, &root)| {
                let record: Vec<Option<String>> =
                    redis::from_redis_value(pair[0].clone()).map_err(parsing)?;
                let children: u64 = redis::from_redis_value(pair[1].clone()).map_err(parsing)?;
                let field = |index: usize| record.get(index).cloned().flatten();
                let is_settled_root = field(0).is_none() && field(1).is_none();
                let live = field(3)
                    .and_then(|seen| seen.parse::<Timestamp>().ok())
                    .is_some_and(|seen| seen >= cutoff);
                if !(is_settled_root && live) {
                    return Ok(None);
                }
                // A settled root always has its ticket: settle writes it.
                let ticket = field(2).ok_or_else(|| {
                    StoreError::Inconsistent(format!("root {root} has no ticket"))
                })?;
                Ok(Some(RootRank {
                    children: children.min(u64::from(u32::MAX)) as u32,
                    sequence: parse_number(root, "q", &ticket)?,
                }))
            })
            .collect()
    }

    fn settle(
        &mut self,
        fingerprint: Fingerprint,
        token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) -> Result<bool, StoreError> {
        let mut batch = Batch::default();
        self.settle_into(&mut batch, fingerprint, token, settlement, sketch, seen);
        let (settled,): (i64,) = self.run_batch(&batch)?;
        self.count_settled(settled == 1, settlement);
        Ok(settled == 1)
    }

    /// The settle and, for a leaf, its count under the root go in one batch; if the settle
    /// failed (the insert was abandoned), a count that it added is taken back.
    fn settle_counted(
        &mut self,
        fingerprint: Fingerprint,
        token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) -> Result<bool, StoreError> {
        let mut batch = Batch::default();
        self.settle_into(&mut batch, fingerprint, token, settlement, sketch, seen);
        if let Settlement::Leaf { root, .. } = settlement {
            batch
                .cmd("SADD", &self.children_key(root))
                .arg(signed(fingerprint));
        }
        let replies: Vec<i64> = self.run_batch(&batch)?;
        let settled = replies.first() == Some(&1);
        if let (false, Settlement::Leaf { root, .. }, Some(1)) =
            (settled, settlement, replies.get(1))
        {
            let mut batch = Batch::default();
            batch
                .cmd("SREM", &self.children_key(root))
                .arg(signed(fingerprint));
            let _: Value = self.run_batch(&batch)?;
        }
        self.count_settled(settled, settlement);
        Ok(settled)
    }

    fn add_child(&mut self, root: Fingerprint, leaf: Fingerprint) -> Result<(), StoreError> {
        let mut batch = Batch::default();
        batch
            .cmd("SADD", &self.children_key(root))
            .arg(signed(leaf));
        let _: Value = self.run_batch(&batch)?;
        Ok(())
    }

    fn touch(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
    ) -> Result<Option<Option<Fingerprint>>, StoreError> {
        let mut touched = self.touch_all(&[fingerprint], seen)?;
        touched
            .pop()
            .ok_or_else(|| StoreError::Inconsistent("a touch without a reply".into()))
    }

    fn touch_all(
        &mut self,
        nodes: &[Fingerprint],
        seen: u32,
    ) -> Result<Vec<Option<Option<Fingerprint>>>, StoreError> {
        let mut batch = Batch::default();
        for &node in nodes {
            batch.script(
                &TOUCH,
                &self.node_key(node),
                &[seen.to_string(), self.cutoff().to_string()],
            );
            self.seen_in_partition(&mut batch, node, seen);
        }
        let replies: Vec<Vec<String>> = self.run_batch(&batch)?;
        replies
            .iter()
            .map(|reply| {
                reply
                    .first()
                    .map(|attached| parse_fingerprint(attached))
                    .transpose()
            })
            .collect()
    }

    fn abandon(&mut self, fingerprint: Fingerprint, owner: u64) -> Result<bool, StoreError> {
        self.run_on_node(&ABANDON, fingerprint, &[(owner as i64).to_string()])
    }

    fn pending_timeout(&self) -> Duration {
        self.pending_timeout
    }

    fn remove_document(&mut self, fingerprint: Fingerprint) -> Result<bool, StoreError> {
        self.run_on_node(&REMOVE_DOCUMENT, fingerprint, &[])
    }

    fn uncount_claim(&mut self, fingerprint: Fingerprint, token: u64) -> Result<bool, StoreError> {
        self.run_on_node(&UNCOUNT_CLAIM, fingerprint, &[(token as i64).to_string()])
    }

    fn stats(&self) -> ForestStats {
        ForestStats {
            round_trips: self.round_trips,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_bytes_round_trip() {
        let sketch = Sketch::of(
            &["国家统计局今天发布数据。前三季度国内生产总值同比增长。"],
            200,
        );
        assert_eq!(decode_sketch(&encode_sketch(&sketch)), Some(sketch));
        assert_eq!(decode_sketch(&[1, 2, 3]), None);
    }

    #[test]
    fn slots_are_the_clusters() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12_182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        // An empty hash tag does not count: the whole key is hashed.
        assert_eq!(slot(b"foo{}{bar}"), 8_363);
    }

    #[test]
    fn signed_fingerprints_round_trip() {
        for value in [0, 1, u64::MAX, 1 << 63, 0x0123_4567_89ab_cdef] {
            let fingerprint = Fingerprint(value);
            assert_eq!(
                parse_fingerprint(&signed(fingerprint)).unwrap(),
                Some(fingerprint)
            );
        }
        assert_eq!(parse_fingerprint("").unwrap(), None);
        assert!(parse_fingerprint("x").is_err());
    }
}
