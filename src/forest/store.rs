//! Where a forest lives, and the insert protocol that keeps the forest's invariants
//! (docs/algorithm.md, "Invariants") in any of them.
//!
//! A [`ForestStore`] holds the nodes (fingerprint, parent link, counts, last-seen time), the
//! bucket keys that find a node's neighbours, and the clock. Two stores implement it:
//!
//! - [`Forest`](crate::Forest), in memory: one writer, the default;
//! - `forest::redis::RedisStore` (feature `redis`), on a Redis Cluster shared by many ingest
//!   processes.
//!
//! [`place`] is the one insert protocol, written against the trait, so both stores apply the
//! same rules and tie-breaks. It is *publish, ticket, scan, settle*:
//!
//! 1. **claim** the fingerprint's node atomically: an existing live node counts the document and
//!    the insert only refreshes the chain up to its root; an absent one is created *pending*,
//!    owned by this insert;
//! 2. **publish** the node under all its bucket keys, then take a **ticket** from one global
//!    counter (the ticket orders inserts, and is a new root's creation order);
//! 3. **scan** the buckets for the node's edges. A pending neighbour whose ticket is smaller,
//!    or not yet known, is waited for; one with a larger ticket is ignored, because it
//!    published after this insert took its ticket, so its own scan finds this node and waits;
//! 4. **settle** the node as a root or a leaf of the best tree by compare-and-set on its
//!    record (it fails if a waiter gave up on this insert and abandoned it: then start again).
//!
//! So of two inserts with an edge, the later ticket always decides after the earlier one and
//! sees it: no two roots have an edge, and neither does a concurrent pair (docs/scaling.md
//! gives the whole argument, crashes and failover included). The in-memory store has one
//! writer, so nothing is ever pending there and the protocol reduces to the sequential rules.

use std::time::{Duration, Instant};

use super::placement::{ForestStats, Placement, PlacementKind, Signature, Timestamp};
use crate::Fingerprint;
use crate::config::DedupConfig;
use crate::verify::{
    BOILERPLATE_STORIES, Reason, SHARED_WITH_THE_ROOT, Sketch, Verdict, digest_of,
};

/// A store's failure: the store could not be reached or answered something unusable. The
/// insert that met it was not acknowledged; retrying it is safe.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's backend refused, timed out or went away (for the Redis store, the
    /// `redis` crate's error).
    #[error("{0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store's contents break the protocol (e.g. a parent link to a missing node).
    #[error("store is inconsistent: {0}")]
    Inconsistent(String),
    /// The store's address or settings are unusable.
    #[error("store settings: {0}")]
    Config(String),
}

/// A forest shared by several processes, and how to reach it: an index connects through it
/// when it opens and again after a recovery, where an unshared index replays its own forest.
/// `forest::redis::RedisAddress` (feature `redis`) is one.
pub trait SharedForest: Send + Sync {
    /// A connection to the shared forest, after checking that it was made with `config`'s
    /// `[dedup]` settings (fingerprints and edges must mean the same for every writer).
    fn connect(&self, config: &DedupConfig) -> Result<Box<dyn ForestStore + Send>, StoreError>;

    /// `count` connections for one writer's inserts in flight ([`Pipeline`](super::Pipeline)),
    /// which a store may let share what they can; by default, `count` of [`connect`](Self::connect)'s.
    fn connect_several(
        &self,
        config: &DedupConfig,
        count: usize,
    ) -> Result<Vec<Box<dyn ForestStore + Send>>, StoreError> {
        (0..count).map(|_| self.connect(config)).collect()
    }
}

/// What [`ForestStore::claim`] found under a fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A live settled node: one more document was counted on it and it was marked seen. The
    /// caller refreshes the chain from `attached_to` up (nothing for a root). `root` is the
    /// node's root when the store records it (`None`: follow the chain).
    Existing {
        /// What the node is attached through; `None` for a root.
        attached_to: Option<Fingerprint>,
        /// The node's root, when the store keeps it on the record.
        root: Option<Fingerprint>,
    },
    /// The node did not exist (or had expired): it is now pending, owned by the caller.
    Created {
        /// The value was the root of a story that has left the window: the digest of that
        /// root's text ([`digest_of`](crate::verify::digest_of); 0 in seed mode). A story's id
        /// (its root) is never another story's, so the node may become a root here only for
        /// the same text (the story goes on under its id); a node of another text may become
        /// a leaf here, and a root only at the next value.
        former_root: Option<u32>,
    },
    /// Another insert of the same fingerprint is under way (its owner token).
    Busy {
        /// The other insert's token.
        owner: u64,
    },
}

/// What [`ForestStore::open`] did at one of a document's node values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// The value was claimed ([`Claim`]); the insert marks nodes seen at `seen`.
    Claimed {
        /// What the claim found.
        claim: Claim,
        /// The event time the insert marks nodes seen at.
        seen: u32,
    },
    /// A live node holds that value with a text the document does not verify against: the
    /// insert tries the next value.
    Refused,
    /// Look at the same value again: a count the claim made on an existing node was taken
    /// back; a node it created stays this insert's (claimed again under the same token).
    Again,
}

/// A stored node with an edge to the node being inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// The neighbour.
    pub node: Fingerprint,
    /// Hamming distance between the two fingerprints.
    pub distance: u32,
    /// What the new text is to the neighbour's: a copy, or a part of it
    /// ([`Verdict::Contained`]: an excerpt, or text the neighbour carries, such as its footer),
    /// or the whole of which the neighbour is a part. Seed mode's edges are copies.
    pub verdict: Verdict,
    /// Whether the neighbour is settled, and where.
    pub state: EdgeState,
}

/// What [`ForestStore::edges`] found for a new node.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::forest::{EdgeState, ForestStore, Forest};
///
/// let mut forest = Forest::new(3, 7 * 86_400).unwrap();
/// forest.place(Fingerprint(0b1000), 0);
/// // Seed mode: every node within k bits is an edge, a copy.
/// let found = forest.edges(Fingerprint(0b1011), None, &|_: &EdgeState| false).unwrap();
/// assert_eq!(found.edges.iter().map(|edge| edge.node).collect::<Vec<_>>(), [Fingerprint(0b1000)]);
/// assert!(!found.boilerplate);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edges {
    /// Every edge, in no particular order.
    pub edges: Vec<Edge>,
    /// Whether the new text is almost only text that other stories carry
    /// ([`Evidence::boilerplate`](crate::verify::Evidence)): it joins only a copy of itself
    /// (as it is, or once the text other stories carry is out).
    pub boilerplate: bool,
}

impl Edge {
    /// The root of the neighbour's tree: `None` while it is pending.
    pub fn root(&self) -> Option<Fingerprint> {
        match self.state {
            EdgeState::Settled { root, .. } => Some(root),
            EdgeState::Pending { .. } => None,
        }
    }
}

/// A neighbour's state when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeState {
    /// A root or leaf of the tree under `root`.
    Settled {
        /// Its root.
        root: Fingerprint,
        /// The ticket its insert took, where the store keeps it (a shared store: tickets order
        /// the nodes' creation across writers); `None` in memory, where one writer creates
        /// them in turn.
        ticket: Option<u64>,
    },
    /// Another insert has not settled it yet.
    Pending {
        /// Its ticket, once taken.
        ticket: Option<u64>,
        /// Its insert's token.
        owner: u64,
    },
}

/// What a root brings to the tie-break: more children first, then the earlier creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootRank {
    /// Leaves under the root.
    pub children: u32,
    /// Creation order: smaller is earlier.
    pub sequence: u64,
}

impl RootRank {
    /// The tie-break order (docs/algorithm.md, "Tie-breaks"), smallest first: most children,
    /// then created earliest, then the smaller root hash.
    pub fn order(&self, root: Fingerprint) -> (std::cmp::Reverse<u32>, u64, Fingerprint) {
        (std::cmp::Reverse(self.children), self.sequence, root)
    }
}

/// How a pending node settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// A new root, created `ticket`-th.
    Root {
        /// The insert's ticket.
        ticket: u64,
    },
    /// A leaf attached through `attached_to`, in the tree of `root`.
    Leaf {
        /// Its nearest neighbour in the tree (the root, or a sibling).
        attached_to: Fingerprint,
        /// The tree's root.
        root: Fingerprint,
    },
}

/// The operations the insert path needs from wherever the forest lives.
///
/// Contract, which [`place`] relies on:
/// - a single node's record is linearizable: [`claim`](Self::claim),
///   [`settle`](Self::settle) and [`abandon`](Self::abandon) are atomic compare-and-sets on it;
/// - a node is [`publish`](Self::publish)ed under every bucket key before its ticket is taken,
///   and two nodes with an edge share a bucket key (the pigeonhole tables for nodes within `k`,
///   the sketch keys for verified pairs);
/// - [`edges`](Self::edges) reads the buckets after the caller's own publish and reports every
///   live node that has an edge to the new one, settled or pending;
/// - tickets come from one counter, strictly increasing across all writers.
///
/// The in-memory [`Forest`](crate::Forest) meets this trivially (one writer); the
/// `RedisStore` (feature `redis`) by single-key scripts on a Redis Cluster.
pub trait ForestStore {
    /// The radius `k`.
    fn max_distance(&self) -> u32;

    /// The expiry window in seconds.
    fn window(&self) -> Timestamp;

    /// Moves this writer's clock to at least `time` (it never goes back) and returns the newest
    /// event time it judges expiry by. Nodes last seen before `newest - window` are gone for it
    /// from then on. (On a shared store each writer has a clock of its own, and the sweep waits
    /// for the oldest clock of the writers alive, so that a writer whose stream is behind the
    /// others' still finds the stories of its own window.)
    fn advance_to(&mut self, time: Timestamp) -> Result<Timestamp, StoreError>;

    /// The newest event time this store has seen, without asking anyone.
    fn newest_time(&self) -> Option<Timestamp>;

    /// Claims `fingerprint` for the insert owned by `token`: counts a document on an existing
    /// live node (marking it seen at `seen`), or creates the node pending. A pending node already
    /// owned by `token` (an earlier attempt of the same insert) counts as created.
    fn claim(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
        token: u64,
    ) -> Result<Claim, StoreError>;

    /// Starts an insert at `node`, one of the document's [`node_candidates`]: moves the clock
    /// to `time` ([`advance_to`](Self::advance_to)), checks in default mode (`sketch`) that a
    /// live node already there holds a text the document verifies against
    /// ([`verifies_node`](Self::verifies_node)), and [`claim`](Self::claim)s it. The default
    /// runs the three one after the other; a shared store may send them together and check
    /// the answers afterwards, as long as what it returns is what this order would give.
    fn open(
        &mut self,
        node: Fingerprint,
        sketch: Option<&Sketch>,
        time: Timestamp,
        token: u64,
    ) -> Result<Opening, StoreError> {
        let newest = self.advance_to(time)?;
        let seen = seen_at(time, newest, self.window());
        // Default mode: a document joins the node of its value only if its text verifies
        // against that node's; otherwise it tries the next value.
        let verified = match sketch {
            None => true,
            Some(sketch) => match self.verifies_node(node, sketch)? {
                Some(false) => return Ok(Opening::Refused),
                Some(true) => true,
                None => false,
            },
        };
        let claim = self.claim(node, seen, token)?;
        if matches!(claim, Claim::Existing { .. }) && !verified {
            // The node appeared between the look and the claim (another writer settled it):
            // the claim counted this document on a text it has not verified against. Take the
            // count back and look again.
            self.uncount_claim(node, token)?;
            return Ok(Opening::Again);
        }
        Ok(Opening::Claimed { claim, seen })
    }

    /// Whether the live node stored under `node` holds a text that `sketch` verifies against:
    /// `None` when no live node has that value (or, in a shared store, its sketch is not
    /// written yet). A store that does not verify answers `Some(true)` for any live node.
    fn verifies_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<bool>, StoreError>;

    /// How much of the smaller of two texts they share: that of the live node stored under
    /// `node` and `sketch`'s ([`Similarity::containment`](crate::verify::Similarity)); `None`
    /// as for [`verifies_node`](Self::verifies_node), and in a store that does not verify.
    /// [`place`] asks it of a tree's root when the new text reaches the tree only through
    /// members that contain it, and leaves the tree out on `None` or on too little shared.
    /// Required (no default): a store that answered `None` to everything would split every
    /// excerpt that reaches its story that way.
    fn containment_with_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<f64>, StoreError>;

    /// Publishes the claimed node under its bucket keys. Gives the ticket that an earlier
    /// attempt of the same insert (same token) already recorded on the node, which the insert
    /// keeps; `None` when it must take one ([`take_tickets`](Self::take_tickets)).
    fn publish(
        &mut self,
        fingerprint: Fingerprint,
        sketch: Option<&Sketch>,
        token: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// Takes `count` consecutive tickets from the one counter and gives the last. Called
    /// only once the [`publish`](Self::publish) of each insert the tickets are for has
    /// answered (a writer with several inserts in flight takes theirs together, in their
    /// order: [`Pipeline`](super::Pipeline)).
    fn take_tickets(&mut self, count: u64) -> Result<u64, StoreError>;

    /// Records an insert's ticket on its pending node (a shared store may send it with the
    /// insert's next step).
    fn record_ticket(&mut self, fingerprint: Fingerprint, token: u64, ticket: u64);

    /// Every live node other than `fingerprint` with an edge to it: within `k`, or in a
    /// verifying store, a candidate that is evidence (`verify::Candidates::evidence`: its
    /// sketch verifies and passes the rules against bridges, or the new text is its copy once
    /// the text other stories carry is out). A node for which `later` is true
    /// (an insert that comes after this one) is left out, as if it were not there yet: it is
    /// neither an edge, nor a rival in the evidence of others, nor in a key posting. When
    /// the evidence needs the trees of pending nodes (not later ones), the answer is those
    /// nodes alone, with their verdicts, edges or not: the caller waits for them and asks
    /// again. The answer also says whether the new text is almost only text that other
    /// stories carry ([`Edges::boilerplate`], from `verify::without_carried_text`), which
    /// [`place`] treats as boilerplate.
    fn edges(
        &mut self,
        fingerprint: Fingerprint,
        sketch: Option<&Sketch>,
        later: &dyn Fn(&EdgeState) -> bool,
    ) -> Result<Edges, StoreError>;

    /// For the inserts that follow, until called with `None`: judge expiry by
    /// `clock.newest` rather than this connection's clock, while the clock is at most
    /// [`CLOCK_SLACK_SECONDS`] ahead of it, and raise the clock to no more than
    /// `clock.raise_at_most` ([`Pipeline`](super::Pipeline): an insert of a sequence judges
    /// by the newest time of the documents up to its own, as one writer placing them in turn
    /// would, and does not move the clock so far that an earlier insert still in flight could
    /// not). A store with one connection, whose clock only its inserts move, has nothing to
    /// do.
    fn judge_expiry_at(&mut self, clock: Option<SequenceClock>) {
        let _ = clock;
    }

    /// Makes this connection one of writer `writer`'s (a name from [`new_token`]): the
    /// connections of one writer, a [`Pipeline`](super::Pipeline)'s, keep one clock on a
    /// shared store, as they place one sequence. A store with one writer has nothing to do.
    fn join_writer(&mut self, writer: u64) {
        let _ = writer;
    }

    /// Takes `count` consecutive numbers of the order in which nodes are posted under their
    /// keys, and gives the first (a [`Pipeline`](super::Pipeline) numbers its sequence's
    /// inserts in the sequence's order before any is placed: their round trips land in any
    /// order, and a key posting keeps its newest nodes by that number). A store that posts
    /// as it places, one insert at a time, has no such numbers and gives 0.
    fn take_post_orders(&mut self, count: u64) -> Result<u64, StoreError> {
        let _ = count;
        Ok(0)
    }

    /// For the inserts that follow, until called with `None`: post the node created at
    /// `order`, one of the numbers [`take_post_orders`](Self::take_post_orders) gave, rather
    /// than at the next number the store takes itself.
    fn post_at(&mut self, order: Option<u64>) {
        let _ = order;
    }

    /// The tie-break figures of each root (`None` for a root that is gone).
    fn root_ranks(&mut self, roots: &[Fingerprint]) -> Result<Vec<Option<RootRank>>, StoreError>;

    /// Settles the pending node owned by `token`, seen at `seen`; `false` when it is no longer
    /// that insert's (it was abandoned), in which case nothing changed.
    fn settle(
        &mut self,
        fingerprint: Fingerprint,
        token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) -> Result<bool, StoreError>;

    /// Counts `leaf` as one more leaf under `root`.
    fn add_child(&mut self, root: Fingerprint, leaf: Fingerprint) -> Result<(), StoreError>;

    /// [`settle`](Self::settle)s the node and, once it is a leaf, counts it under its root
    /// ([`add_child`](Self::add_child)). The default runs the two in turn; a shared store may
    /// send both at once, taking the count back if the settle failed.
    fn settle_counted(
        &mut self,
        fingerprint: Fingerprint,
        token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) -> Result<bool, StoreError> {
        if !self.settle(fingerprint, token, settlement, sketch, seen)? {
            return Ok(false);
        }
        if let Settlement::Leaf { root, .. } = settlement {
            self.add_child(root, fingerprint)?;
        }
        Ok(true)
    }

    /// Marks a live settled node seen at `seen` (never moving its time back). Gives what it is
    /// attached through (`Some(None)` for a root), or `None` when the node is not there or has
    /// expired (it is then left as it is).
    fn touch(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
    ) -> Result<Option<Option<Fingerprint>>, StoreError>;

    /// [`touch`](Self::touch)es each of `nodes` (nodes of one chain, whose order does not
    /// matter); a shared store touches them all at once.
    fn touch_all(
        &mut self,
        nodes: &[Fingerprint],
        seen: u32,
    ) -> Result<Vec<Option<Option<Fingerprint>>>, StoreError> {
        nodes.iter().map(|&node| self.touch(node, seen)).collect()
    }

    /// Removes the pending node of an insert that has not settled within
    /// [`pending_timeout`](Self::pending_timeout) (its writer died or stalled), or that its
    /// own insert gives up (a former root's value that another text would make a root);
    /// `false` when it settled or was already removed meanwhile. A value's mark as a former
    /// root stays.
    fn abandon(&mut self, fingerprint: Fingerprint, owner: u64) -> Result<bool, StoreError>;

    /// How long a pending neighbour is waited for before it is abandoned.
    fn pending_timeout(&self) -> Duration {
        Duration::from_secs(5)
    }

    /// Takes one document off a node's count (after a delete); `false` if it had none.
    fn remove_document(&mut self, fingerprint: Fingerprint) -> Result<bool, StoreError>;

    /// Takes back the document that [`claim`](Self::claim) under `token` counted on an
    /// existing node, so that the same token's next claim counts it again (a shared store
    /// remembers the last token counted, to count a retried claim once). The default, for a
    /// store with one writer, is [`remove_document`](Self::remove_document).
    fn uncount_claim(&mut self, fingerprint: Fingerprint, token: u64) -> Result<bool, StoreError> {
        let _ = token;
        self.remove_document(fingerprint)
    }

    /// Node and root counts, as far as the store knows them cheaply: the whole forest in
    /// memory; on a shared store, what this writer created, started and swept.
    fn stats(&self) -> ForestStats;
}

/// The clock an insert of a sequence goes by ([`ForestStore::judge_expiry_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceClock {
    /// The newest event time of the sequence's documents up to this insert's: what it judges
    /// expiry by.
    pub newest: Timestamp,
    /// The furthest it may raise its connection's clock: [`CLOCK_SLACK_SECONDS`] past the time of
    /// the earliest insert of the sequence still in flight.
    pub raise_at_most: Timestamp,
}

/// How far ahead of the time an insert judges expiry by its connection's clock may be
/// ([`ForestStore::judge_expiry_at`]): half the sweep's grace, so that the sweep, which goes
/// by the oldest clock of the writers alive, never deletes what that time takes as live.
pub const CLOCK_SLACK_SECONDS: Timestamp = 1_800;

/// How many inserts after a given one of the same sequence may have started while it is in
/// flight: a [`Pipeline`](super::Pipeline) starts none further ahead of its earliest
/// unfinished insert. A shared store keeps this many entries more than the cap
/// ([`POSTING_CAPACITY`](crate::verify::POSTING_CAPACITY)) in each key posting, so that an
/// insert still finds the cap's worth of earlier nodes under a key after every later insert
/// in flight has posted under it too (it leaves those out, as their turn has not come).
pub const LATER_INSERTS_AT_MOST: usize = 63;

/// A token for one insert: unique across processes with overwhelming probability, and kept
/// across the insert's retries.
pub fn new_token() -> u64 {
    // Zero is never a token, so a store may use it for "no owner".
    rand::random::<u64>().max(1)
}

/// The forest's clock runs from the Unix epoch to 2106 (u32 seconds); earlier and later times
/// are treated as its ends. Article input rejects times outside that range, so only direct
/// library callers can meet the clamp.
pub(crate) fn clamp_time(time: Timestamp) -> u32 {
    time.clamp(0, Timestamp::from(u32::MAX)) as u32
}

/// The time an insert of event time `time` marks nodes seen at, when the newest event time is
/// `newest`: a late document counts as seen at the window's start, so that it is live.
pub(crate) fn seen_at(time: Timestamp, newest: Timestamp, window: Timestamp) -> u32 {
    clamp_time(time.max(newest - window))
}

/// Places a document with event time `time` by its signature, by the protocol above; `token`
/// identifies this insert (see [`new_token`]). Applies the rules of docs/algorithm.md,
/// "Insertion rules": an existing node is joined; no edge makes a new root; edges into one or
/// more trees make a leaf of the tree with
/// the most children, then the earliest root, then the smaller root hash, attached through the
/// nearest neighbour in it (the root among equals, then the smaller fingerprint).
pub fn place<S: ForestStore + ?Sized>(
    store: &mut S,
    signature: &Signature,
    time: Timestamp,
    token: u64,
) -> Result<Placement, StoreError> {
    place_in_order(store, signature, time, token, &Alone)
}

/// Where an insert stands among the other inserts of one ordered sequence that its writer
/// has in flight at once ([`Pipeline`](super::Pipeline)), so that they decide as if placed
/// one after the other: their tickets are taken in the sequence's order, and an insert
/// leaves out the pending nodes of the inserts after it.
pub(crate) trait InsertOrder {
    /// This insert's ticket, once every earlier insert of the sequence has taken its own or
    /// needs none. `take(n)` takes `n` tickets from the store and gives the last; inserts
    /// waiting in turn may take theirs together, in their order. `hold`: the insert keeps its
    /// turn until [`pass_turn`](Self::pass_turn) (it may give up its value and need another
    /// ticket in turn); else taking the ticket passes it.
    fn ticket(
        &self,
        hold: bool,
        take: &mut dyn FnMut(u64) -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError>;
    /// This insert needs no ticket (any more): the next may take theirs.
    fn pass_turn(&self);
    /// Whether the insert owning `owner` is a later one of the same sequence whose ticket
    /// comes in turn (it has not passed its turn yet, or its ticket was taken in turn): after
    /// this insert's, if this one took its own in turn.
    fn is_later(&self, owner: u64) -> bool;
    /// Whether the insert owning `owner` is an earlier one of the same sequence.
    fn is_earlier(&self, owner: u64) -> bool;
    /// Whether the insert owning `owner` is an earlier one of the same sequence that has not
    /// finished: alive, since this writer runs it, and waiting for this one only where their
    /// tickets say this one came first (this one then does not wait for it), so it settles or
    /// fails whatever this one does. Its pending node is no stalled writer's, however long it
    /// takes, and is never given up.
    fn is_earlier_in_flight(&self, owner: u64) -> bool;
    /// Blocks until the earlier insert of the sequence owning `owner`, in flight, has
    /// finished, and says whether it waited (`false` at once for any other owner, or one that
    /// has finished). For a pending node whose ticket came before this insert's: that insert's
    /// scan leaves this one's node out (a later ticket, recorded before this insert scans), so
    /// it does not wait for this one; only a claim of this insert's very value would, and the
    /// pending timeout ends that wait (this insert is a later one, which it may give up).
    fn wait_until_finished(&self, owner: u64) -> bool;
}

/// An insert on its own: no sequence to keep in step with.
struct Alone;

impl InsertOrder for Alone {
    fn ticket(
        &self,
        _hold: bool,
        take: &mut dyn FnMut(u64) -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError> {
        take(1)
    }
    fn pass_turn(&self) {}
    fn is_later(&self, _owner: u64) -> bool {
        false
    }
    fn is_earlier(&self, _owner: u64) -> bool {
        false
    }
    fn is_earlier_in_flight(&self, _owner: u64) -> bool {
        false
    }
    fn wait_until_finished(&self, _owner: u64) -> bool {
        false
    }
}

/// [`place`] for an insert of an ordered sequence (see [`InsertOrder`]).
pub(crate) fn place_in_order<S: ForestStore + ?Sized>(
    store: &mut S,
    signature: &Signature,
    time: Timestamp,
    token: u64,
    order: &dyn InsertOrder,
) -> Result<Placement, StoreError> {
    let mut turn = Turn {
        order,
        passed: false,
    };
    let placed = place_once(store, signature, time, token, &mut turn);
    turn.pass();
    if placed.is_err() {
        // Best effort: an insert that failed while its node was pending gives the node up, so
        // that neither a neighbour nor a retry under a new token waits for it (a retry under
        // the same token resumes a node that could not be given up). A settled node is not the
        // token's any more, so this does nothing to it.
        let _ = store.abandon(signature.fingerprint, token);
    }
    placed
}

/// The values a document's node may take, in the order they are tried: its fingerprint
/// first; then, for as long as each value names a node whose text does not verify against the
/// document's (default mode: equal fingerprints are candidates like any other), or was the
/// root of a story of another text that has left the window while the document would start a
/// story (a story id is never another story's: [`Claim::Created`]), the
/// fingerprint with one bit flipped (lowest bit first), which keeps the node within one bit of
/// its text's simhash; past those 64, values drawn from a hash of the fingerprint.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::forest::node_candidates;
///
/// let tried: Vec<Fingerprint> = node_candidates(Fingerprint(0b100)).take(4).collect();
/// assert_eq!(tried, [Fingerprint(0b100), Fingerprint(0b101), Fingerprint(0b110), Fingerprint(0b000)]);
/// assert_eq!(node_candidates(Fingerprint(7)).count(), MAX_NODE_CANDIDATES);
/// # use tantivy_dedup::forest::MAX_NODE_CANDIDATES;
/// ```
pub fn node_candidates(fingerprint: Fingerprint) -> impl Iterator<Item = Fingerprint> {
    let flips = (0..64).map(move |bit| Fingerprint(fingerprint.0 ^ (1 << bit)));
    let drawn = (64..MAX_NODE_CANDIDATES as u64 - 1).map(move |attempt| {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&fingerprint.0.to_le_bytes());
        bytes[8..].copy_from_slice(&attempt.to_le_bytes());
        Fingerprint(xxhash_rust::xxh3::xxh3_64(&bytes))
    });
    std::iter::once(fingerprint).chain(flips).chain(drawn)
}

/// How many values [`node_candidates`] offers: far more texts than this sharing one simhash
/// and verifying against none of each other's is taken for a broken store.
pub const MAX_NODE_CANDIDATES: usize = 1 << 16;

/// An insert's turn to take a ticket, passed once (when the ticket is taken, or the insert
/// turns out to need none, or fails).
struct Turn<'a> {
    order: &'a dyn InsertOrder,
    passed: bool,
}

impl Turn<'_> {
    fn pass(&mut self) {
        if !self.passed {
            self.passed = true;
            self.order.pass_turn();
        }
    }
}

fn place_once<S: ForestStore + ?Sized>(
    store: &mut S,
    signature: &Signature,
    time: Timestamp,
    token: u64,
    turn: &mut Turn<'_>,
) -> Result<Placement, StoreError> {
    let sketch = signature.sketch.as_ref();
    let mut waiting = Waiting::new(store.pending_timeout());
    let mut nodes = node_candidates(signature.fingerprint);
    let mut fingerprint = signature.fingerprint;
    nodes.next(); // the fingerprint itself, tried first
    // Whether a lone tree among the edges is ranked like several: only after its chain failed
    // to refresh, when the ranks tell a gone root from a gone node on the way to it.
    let mut rank_lone_tree = false;
    // Whether the ticket was taken in the sequence's turn (a resumed one keeps what it was).
    let mut ticket_in_turn = false;
    loop {
        let (claim, seen) = match store.open(fingerprint, sketch, time, token)? {
            Opening::Claimed { claim, seen } => (claim, seen),
            Opening::Again => continue,
            Opening::Refused => {
                fingerprint = next_value(&mut nodes, signature.fingerprint)?;
                continue;
            }
        };
        match claim {
            Claim::Existing { attached_to, root } => {
                turn.pass();
                let top = match attached_to {
                    None => Some(fingerprint),
                    Some(parent) => refresh_chain(store, parent, root, seen)?,
                };
                let root = root.or(top).ok_or_else(|| {
                    StoreError::Inconsistent(format!("{fingerprint}'s chain reaches a gone node"))
                })?;
                return Ok(Placement {
                    node: fingerprint,
                    root,
                    kind: PlacementKind::ExistingNode,
                    via: Some(fingerprint),
                    reason: None,
                });
            }
            Claim::Busy { owner } => {
                // Another writer's insert of the same value: this one may end up needing a
                // ticket (the other's text may not verify), but holding the turn while waiting
                // for a writer that may itself wait for this sequence could stall both until
                // the timeout. An earlier insert of the same sequence does not wait for this
                // one's turn (it may wait for other writers, which the pending timeout bounds).
                if !turn.order.is_earlier(owner) {
                    turn.pass();
                }
                if waiting.expired(fingerprint, owner) && !turn.order.is_earlier_in_flight(owner) {
                    store.abandon(fingerprint, owner)?;
                }
                continue;
            }
            Claim::Created { .. } => {}
        }
        let former_root = match claim {
            Claim::Created { former_root } => former_root,
            _ => None,
        };
        // The ticket is taken only once every bucket holds the node (`publish` has answered):
        // see the module docs for why that order makes the later ticket see the earlier node.
        let ticket = match store.publish(fingerprint, sketch, token)? {
            Some(ticket) => ticket,
            None => {
                // A former root's value may be given up after the scan, for the next value,
                // whose ticket must still come before the later inserts' of the sequence: the
                // turn is held until the insert knows its value.
                let hold = former_root.is_some();
                let mut take = |count| store.take_tickets(count);
                ticket_in_turn = !turn.passed;
                let ticket = if turn.passed {
                    // The turn was passed (while waiting for another insert's node of the same
                    // value, or before a neighbour abandoned this insert): the ticket may come
                    // after later inserts' of the sequence. Rare, and still a ticket order,
                    // only not the sequence's.
                    take(1)?
                } else {
                    let ticket = turn.order.ticket(hold, &mut take);
                    turn.passed = !hold || ticket.is_err();
                    ticket?
                };
                store.record_ticket(fingerprint, token, ticket);
                ticket
            }
        };
        if former_root.is_none() {
            turn.pass();
        }
        let order = turn.order;
        // A node of a later insert (a larger ticket, or no ticket yet but an insert of this
        // sequence that will take its own in turn, after this one's) is not there yet for this
        // one: pending, it will see this node and wait for it; settled already, it had no edge
        // to this node (it would have waited). Only a ticket taken in turn is known to come
        // before those of the sequence that have none yet.
        let later = |state: &EdgeState| match *state {
            EdgeState::Pending {
                ticket: Some(theirs),
                ..
            }
            | EdgeState::Settled {
                ticket: Some(theirs),
                ..
            } => theirs > ticket,
            EdgeState::Pending {
                ticket: None,
                owner,
            } => ticket_in_turn && order.is_later(owner),
            EdgeState::Settled { ticket: None, .. } => false,
        };
        let Edges {
            edges,
            boilerplate: carried,
        } = loop {
            let found = store.edges(fingerprint, sketch, &later)?;
            // What is left pending came earlier (a smaller ticket), or may have (no ticket yet).
            let earlier_pending = found.edges.iter().find_map(|edge| match edge.state {
                EdgeState::Pending { owner, ticket } => Some((edge.node, owner, ticket)),
                EdgeState::Settled { .. } => None,
            });
            match earlier_pending {
                None => break found,
                // An earlier insert of this writer's sequence with an earlier ticket is waited
                // for where the writer knows when it is done, not by scanning again and again:
                // under text that many inserts share (a disclaimer, a template), each in-flight
                // insert waits for all those before it.
                Some((_, owner, Some(_))) if order.wait_until_finished(owner) => {}
                Some((node, owner, _)) => {
                    // An earlier insert of this writer's sequence is never given up: it is
                    // alive however long its own waits take (a slow machine, a crowd of
                    // neighbours), and given up it would start again out of turn.
                    if waiting.expired(node, owner) && !order.is_earlier_in_flight(owner) {
                        store.abandon(node, owner)?;
                    }
                }
            }
        };
        // Boilerplate joins only its own copies (another page of the same footer alone), never
        // a story that carries it.
        let boilerplate = carried || is_boilerplate(&edges);
        let best = if boilerplate {
            let copies: Vec<Edge> = edges
                .iter()
                .filter(|edge| edge.verdict == Verdict::Copy)
                .copied()
                .collect();
            best_tree(store, &copies, rank_lone_tree)?
        } else {
            let joinable = without_trees_reached_through_containers(store, edges, sketch)?;
            best_tree(store, &joinable, rank_lone_tree)?
        };
        let reason = boilerplate.then_some(Reason::Boilerplate);
        let settlement = match best {
            None if former_root.is_some_and(|digest| digest != digest_of(sketch)) => {
                // A new story at an older story's id would merge the two in the index (its
                // size, its detail and story pages): give the value up and take the next one.
                // The same text comes back to its story.
                store.abandon(fingerprint, token)?;
                fingerprint = next_value(&mut nodes, signature.fingerprint)?;
                continue;
            }
            None => {
                turn.pass();
                Settlement::Root { ticket }
            }
            Some((root, attached_to)) => {
                turn.pass();
                // The chain the leaf will hang from is refreshed *before* the leaf exists, so
                // that a leaf is never newer than its parent, even if this insert stops right
                // after its settle. A node found gone on the way means the scan saw a tree
                // that has expired meanwhile (or, for a tree not ranked, a root that is gone):
                // scan again, ranking every tree.
                if refresh_chain(store, attached_to, Some(root), seen)? != Some(root) {
                    rank_lone_tree = true;
                    continue;
                }
                Settlement::Leaf { attached_to, root }
            }
        };
        if !store.settle_counted(fingerprint, token, settlement, sketch, seen)? {
            // Abandoned by a neighbour that waited too long: start again with a fresh view.
            continue;
        }
        return Ok(match settlement {
            // The same text as the expired root at this value: its story resumes.
            Settlement::Root { .. } if former_root.is_some() => Placement {
                node: fingerprint,
                root: fingerprint,
                kind: PlacementKind::ResumedRoot,
                via: Some(fingerprint),
                reason,
            },
            Settlement::Root { .. } => Placement {
                node: fingerprint,
                root: fingerprint,
                kind: PlacementKind::NewRoot,
                via: None,
                reason,
            },
            Settlement::Leaf { root, attached_to } => Placement {
                node: fingerprint,
                root,
                kind: PlacementKind::NewLeaf,
                via: Some(attached_to),
                reason,
            },
        });
    }
}

/// Whether the new text is boilerplate: a part ([`Verdict::Contained`]) of nodes of
/// [`BOILERPLATE_STORIES`] different trees or more, so that it belongs to none of them
/// (the module `evidence` of `verify`).
fn is_boilerplate(edges: &[Edge]) -> bool {
    let mut containing: Vec<Fingerprint> = edges
        .iter()
        .filter(|edge| edge.verdict == Verdict::Contained)
        .filter_map(Edge::root)
        .collect();
    containing.sort_unstable();
    containing.dedup();
    containing.len() >= BOILERPLATE_STORIES
}

/// The edges a text may join by: all of them but those of the trees it reaches only as a part
/// of members other than their root, when it shares too little with the root (SPEC §1, "no
/// bridges": a document that contains two stories may join one of them but must not join them
/// to each other). Only whole trees are left out, never one the text reaches by a copy, by a
/// text it contains, or at its root; so every leaf hangs from a node it has an edge to, and no
/// text that copies a live root starts a story beside it.
///
/// A page carrying two reports, or a roundup, joins the story of one of them and hangs there
/// as a leaf that contains its root. A later text that is only a part of that leaf (the other
/// report, or a copy of it) would join through it the story of a report it shares nothing
/// with. So such a tree is joined only when the text shares [`SHARED_WITH_THE_ROOT`] of itself
/// (or of the root, whichever is smaller) with the root: an excerpt of a story's reprint shares
/// most of itself with the story's first report, an excerpt that runs past a short first
/// excerpt shares its lead or its end, the other report of a page shares nothing. A root that
/// is gone, or has no sketch, shares nothing. In seed mode (`sketch` is `None`) every edge is
/// a copy.
///
/// Two orders come out as the texts alone allow: the page first, then each of its reports,
/// joins them (it is the order of an article followed by its pages, which must join); a short
/// first excerpt, then the article, then an excerpt of the article that shares nothing with
/// the first, splits the last (it is the order of one report, a page carrying it, then the
/// page's other report).
fn without_trees_reached_through_containers<S: ForestStore + ?Sized>(
    store: &mut S,
    mut edges: Vec<Edge>,
    sketch: Option<&Sketch>,
) -> Result<Vec<Edge>, StoreError> {
    let Some(sketch) = sketch else {
        return Ok(edges);
    };
    // Each tree, and whether every edge into it is a part of a member other than its root.
    let mut trees: Vec<(Fingerprint, bool)> = Vec::new();
    for edge in &edges {
        let Some(root) = edge.root() else { continue };
        let only_as_a_part = edge.verdict == Verdict::Contained && edge.node != root;
        match trees.iter_mut().find(|(tree, _)| *tree == root) {
            Some((_, only)) => *only &= only_as_a_part,
            None => trees.push((root, only_as_a_part)),
        }
    }
    for (root, only_as_a_part) in trees {
        if !only_as_a_part {
            continue;
        }
        let shared = store.containment_with_node(root, sketch)?;
        if shared.is_none_or(|shared| shared < SHARED_WITH_THE_ROOT) {
            edges.retain(|edge| edge.root() != Some(root));
        }
    }
    Ok(edges)
}

/// The next of a document's [`node_candidates`], once the one tried is refused (a node with
/// another text, or the value of an expired root of another text that the document would
/// make a root).
fn next_value(
    nodes: &mut impl Iterator<Item = Fingerprint>,
    fingerprint: Fingerprint,
) -> Result<Fingerprint, StoreError> {
    nodes.next().ok_or_else(|| {
        StoreError::Inconsistent(format!(
            "{MAX_NODE_CANDIDATES} values near {fingerprint} refuse its text or were roots"
        ))
    })
}

/// Touches every node from `start` up to its root; gives back the root, or `None` when a
/// node on the way is gone (expired, or lost). `root`, when known, is touched together with
/// `start`, so that a chain of one or two links takes one step of the store.
fn refresh_chain<S: ForestStore + ?Sized>(
    store: &mut S,
    start: Fingerprint,
    root: Option<Fingerprint>,
    seen: u32,
) -> Result<Option<Fingerprint>, StoreError> {
    let first: Vec<Fingerprint> = std::iter::once(start)
        .chain(root.filter(|&root| root != start))
        .collect();
    let touched = store.touch_all(&first, seen)?;
    let mut current = start;
    // A chain is acyclic; the bound only guards against a corrupted store looping forever.
    for _ in 0..MAX_CHAIN {
        let state = match first.iter().position(|&node| node == current) {
            Some(index) => touched[index],
            None => store.touch(current, seen)?,
        };
        match state {
            None => return Ok(None),
            Some(None) => return Ok(Some(current)),
            Some(Some(parent)) => current = parent,
        }
    }
    Err(StoreError::Inconsistent(format!(
        "{start}'s chain is longer than {MAX_CHAIN} nodes"
    )))
}

/// Longer attachment chains than this are taken for corruption.
const MAX_CHAIN: usize = 1 << 20;

/// The tree a new node joins, and the neighbour it attaches through; `None` without settled
/// edges.
///
/// A lone tree needs no ranks unless `rank_lone_tree`: the refresh of its chain, which comes
/// next, already finds out whether its root is a live root.
fn best_tree<S: ForestStore + ?Sized>(
    store: &mut S,
    edges: &[Edge],
    rank_lone_tree: bool,
) -> Result<Option<(Fingerprint, Fingerprint)>, StoreError> {
    // Each tree's best contact: the nearest, then the root itself, then the smaller fingerprint.
    let mut trees: Vec<(Fingerprint, (u32, bool, Fingerprint))> = Vec::new();
    for edge in edges {
        let Some(root) = edge.root() else {
            continue;
        };
        let contact = (edge.distance, edge.node != root, edge.node);
        match trees.iter_mut().find(|(tree, _)| *tree == root) {
            Some((_, best)) => *best = (*best).min(contact),
            None => trees.push((root, contact)),
        }
    }
    match trees[..] {
        [] => return Ok(None),
        [(root, contact)] if !rank_lone_tree => return Ok(Some((root, contact.2))),
        _ => {}
    }
    let roots: Vec<Fingerprint> = trees.iter().map(|(root, _)| *root).collect();
    let ranks = store.root_ranks(&roots)?;
    Ok(trees
        .iter()
        .zip(ranks)
        .filter_map(|((root, contact), rank)| Some((rank?.order(*root), contact.2)))
        .min()
        .map(|((_, _, root), nearest)| (root, nearest)))
}

/// How long each pending neighbour has been waited for.
struct Waiting {
    timeout: Duration,
    /// The neighbour and owner waited for, and since when.
    current: Option<(Fingerprint, u64, Instant)>,
    pause: Duration,
}

impl Waiting {
    fn new(timeout: Duration) -> Self {
        Waiting {
            timeout,
            current: None,
            pause: Duration::from_micros(200),
        }
    }

    /// Pauses before the next look, and says whether `node`'s insert by `owner` has been
    /// waited for longer than the timeout.
    fn expired(&mut self, node: Fingerprint, owner: u64) -> bool {
        let now = Instant::now();
        match self.current {
            Some((waited, waited_owner, since)) if waited == node && waited_owner == owner => {
                if now.duration_since(since) >= self.timeout {
                    self.current = None;
                    return true;
                }
            }
            _ => {
                self.current = Some((node, owner, now));
                self.pause = Duration::from_micros(200);
            }
        }
        std::thread::sleep(self.pause);
        // A neighbour mid-insert settles within a few round trips: look again soon.
        self.pause = (self.pause * 2).min(Duration::from_millis(2));
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tie_break_order() {
        let rank = |children, sequence| RootRank { children, sequence };
        let order = |root: u64, r: RootRank| r.order(Fingerprint(root));
        // More children win over an earlier creation.
        assert!(order(9, rank(2, 7)) < order(5, rank(1, 0)));
        // Equal children: the earlier root wins over the smaller hash.
        assert!(order(9, rank(1, 3)) < order(5, rank(1, 4)));
        // Equal children and order (only in a corrupted store): the smaller hash.
        assert!(order(5, rank(1, 4)) < order(7, rank(1, 4)));
    }
}
