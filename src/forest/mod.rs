//! The parent forest: clusters of near-duplicate fingerprints as trees of height at most two.
//!
//! Every distinct fingerprint is one node. A root's fingerprint is the cluster id ("root hash")
//! stored on every document of its tree. The insertion rules (docs/algorithm.md, "Insertion
//! rules"):
//!
//! - the fingerprint is already a node: the document joins that node's tree (in a verifying
//!   forest only if its text verifies against the node's; otherwise the node takes the next
//!   free value of [`node_candidates`], so texts with one
//!   simhash may form several nodes, in one tree or in several);
//! - no node within `k`: it becomes a new root;
//! - nodes within `k`, all under one root: it becomes a leaf of that root;
//! - nodes within `k` under several roots: it joins the root with the most children, then the
//!   root added earliest, then the smaller root hash.
//!
//! Trees never merge and roots never change, so a document's root is final once decided.
//!
//! **Expiry.** Each node remembers the event time of the last document that added or reached it;
//! nodes older than the window (measured against the newest time seen) count as gone. Each leaf
//! also remembers the node it was attached through (its root, or a sibling within `k`), and
//! refreshing a node refreshes that whole chain up to the root. So a node always outlives the
//! leaves attached through it, a root outlives its whole tree, and when a leaf expires no
//! remaining leaf loses the neighbour that tied it to the tree.
//!
//! Expiry is exact and incremental: every node has one entry in a queue ordered by the second
//! it was last seen (as of when the entry was made). Advancing the clock pops the seconds that
//! fell out of the window; a popped node that was refreshed meanwhile goes back in the queue at
//! its new time, the others are removed, and their roots' child counts drop. So after every
//! call the forest holds live nodes only, child counts are exact, and expiry costs amortised
//! O(1) per node, at 8 bytes a node for the queue entry.
//!
//! A document dated before the window (a late arrival) is placed as if seen at the window's
//! start: it can still join and be joined until the window moves past it.
//!
//! **Edges.** In seed mode two nodes are joined by an edge when their fingerprints are within
//! `k`. A forest made [`with_verifier`](Forest::with_verifier) (default mode) keeps a
//! [`Sketch`](crate::verify::Sketch) per node and replaces that rule: the candidates are the nodes
//! within `k` and the nodes posted under one of the new sketch's keys, and an edge is a candidate
//! whose sketch the [`Verifier`](crate::verify::Verifier) accepts. Every rule above then reads
//! "edge" for "within `k`".
//!
//! The module's parts:
//!
//! - `placement.rs`: what an insert brings and gets back ([`Signature`], [`Placement`]), the
//!   clock ([`Timestamp`]) and the counts ([`ForestStats`]);
//! - `store.rs`: [`ForestStore`], what an insert needs from wherever the forest lives;
//!   [`place`], the one insert protocol over it; [`SharedForest`], a store that several
//!   processes share;
//! - `memory.rs`: [`Forest`], the forest in memory, one writer (the default store);
//! - `pipeline.rs`: [`Pipeline`], several inserts of one ordered sequence in flight on a
//!   shared store, deciding as one writer placing them in turn would;
//! - `checkpoint.rs`: the file a [`Forest`] is saved to and loaded from, so that reopening an
//!   index replays only what came after it;
//! - `redis.rs` (feature `redis`): `RedisStore`, the forest on a Redis Cluster shared by many
//!   processes.

pub mod checkpoint;
mod memory;
mod pipeline;
mod placement;
#[cfg(feature = "redis")]
pub mod redis;
mod store;

pub use memory::Forest;
pub use pipeline::Pipeline;
pub use placement::{ForestStats, NodeInfo, Placement, PlacementKind, Signature, Timestamp};
pub(crate) use store::clamp_time;
pub use store::{
    CLOCK_SLACK_SECONDS, Claim, Edge, EdgeState, Edges, ForestStore, LATER_INSERTS_AT_MOST,
    MAX_NODE_CANDIDATES, Opening, RootRank, SequenceClock, Settlement, SharedForest, StoreError,
    new_token, node_candidates, place,
};
