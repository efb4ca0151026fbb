//! What an insert brings to the forest and what it gets back: [`Signature`], [`Placement`],
//! and the forest's clock and counts.

use crate::Fingerprint;
use crate::verify::{Reason, Sketch};

/// Seconds since the Unix epoch, the forest's clock (event time).
pub type Timestamp = i64;

/// What a document brings to the forest: its fingerprint, and in a verifying forest its
/// sketch. A bare [`Fingerprint`] converts into a signature without a sketch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The simhash: the node's identity, and a source of candidates.
    pub fingerprint: Fingerprint,
    /// The shingle sketch that verifies candidates; `None` in seed mode. In a verifying forest
    /// a signature without one verifies against nothing, so it joins only its own fingerprint's
    /// node.
    pub sketch: Option<Sketch>,
    /// Why its text is kept out of every other story, when it is (its sketch then says so:
    /// see [`Reason`]). Not part of what the forest compares; told back to the client.
    pub reason: Option<Reason>,
}

impl Signature {
    /// Whether the signature verifies against nothing (default mode, a text without a
    /// shingle of its own: punctuation, symbols), so that its document starts a story of its
    /// own.
    pub fn verifies_nothing(&self) -> bool {
        self.sketch.as_ref().is_some_and(Sketch::is_empty)
    }

    /// The signature document `id` is placed by. One that [verifies
    /// nothing](Self::verifies_nothing) takes a value drawn from its fingerprint and the id
    /// instead of the fingerprint: every copy of `!!!` would otherwise try the values one copy
    /// after another has taken (each is refused, since nothing verifies against it), and a
    /// copy after the window would resume an expired copy's story. Any other signature is
    /// returned as it is.
    ///
    /// ```
    /// use tantivy_dedup::forest::Signature;
    /// use tantivy_dedup::verify::Sketch;
    /// use tantivy_dedup::Fingerprint;
    ///
    /// let empty = Signature { fingerprint: Fingerprint(7), sketch: Some(Sketch::default()), reason: None };
    /// assert_ne!(empty.clone().for_document("a").fingerprint, empty.clone().for_document("b").fingerprint);
    /// assert_eq!(empty.clone().for_document("a"), empty.for_document("a"));
    /// let seed = Signature::from(Fingerprint(7));
    /// assert_eq!(seed.clone().for_document("a"), seed);
    /// ```
    pub fn for_document(mut self, id: &str) -> Signature {
        if self.verifies_nothing() {
            let mut bytes = self.fingerprint.0.to_le_bytes().to_vec();
            bytes.extend_from_slice(id.as_bytes());
            self.fingerprint = Fingerprint(xxhash_rust::xxh3::xxh3_64(&bytes));
        }
        self
    }
}

impl From<Fingerprint> for Signature {
    fn from(fingerprint: Fingerprint) -> Self {
        Signature {
            fingerprint,
            sketch: None,
            reason: None,
        }
    }
}

/// How a document was placed by [`Forest::place`](crate::Forest::place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementKind {
    /// Its fingerprint was already a node; the forest did not change shape.
    ExistingNode,
    /// It became a new leaf of an existing root.
    NewLeaf,
    /// Nothing was within reach: it started a cluster of its own.
    NewRoot,
    /// Nothing was within reach, and its text is that of a story's root that has left the
    /// window at its value: it is that node's root again, and the story goes on under its id
    /// (its earlier documents still carry it in the index).
    ResumedRoot,
}

/// Where a document went: its cluster's root, and how it got there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The node the document was counted on. It is the signature's fingerprint, except in a
    /// verifying forest when that value already names a node whose text does not verify: then
    /// the document's node takes the nearest free value instead (see
    /// [`node_candidates`](crate::forest::node_candidates)).
    pub node: Fingerprint,
    /// The root hash of the document's cluster.
    pub root: Fingerprint,
    /// What the insert did to the forest.
    pub kind: PlacementKind,
    /// The node the document came into its tree through: `node` itself when it joined an
    /// existing node or resumed its story (an earlier document has its text), the neighbour it
    /// was attached to when it became a new leaf, `None` when it started a cluster. The story
    /// view's reprint path
    /// is drawn from it.
    pub via: Option<Fingerprint>,
    /// [`Reason::Boilerplate`] when the document's text is a part of several different
    /// stories: it joined only a copy of itself (as it is, or once the text other stories carry
    /// is out), or started a story.
    pub reason: Option<Reason>,
}

impl Placement {
    /// Whether the document joined a cluster that already existed (it is a near-duplicate of an
    /// earlier document, or, [`PlacementKind::ResumedRoot`], the same text as one that left
    /// the window).
    pub fn is_duplicate(&self) -> bool {
        self.kind != PlacementKind::NewRoot
    }
}

/// A read-only view of one node, for inspection and invariant checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's fingerprint.
    pub fingerprint: Fingerprint,
    /// The root of its tree (itself for a root).
    pub root: Fingerprint,
    /// For a leaf, the node it was attached through (its root or a sibling); `None` for a root.
    pub attached_to: Option<Fingerprint>,
    /// Event time of the last document that added or reached the node.
    pub last_seen: Timestamp,
    /// Documents with exactly this fingerprint.
    pub documents: u32,
    /// For a root, its number of leaves.
    pub children: Option<u32>,
}

/// Counts that describe the forest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ForestStats {
    /// All nodes, roots and leaves.
    pub nodes: usize,
    /// Roots among them.
    pub roots: usize,
    /// Bytes the index holds for the nodes (capacity, not only use).
    pub heap_bytes: usize,
    /// Bytes of files mapped into memory for the nodes (default mode's sketches, when kept in
    /// a directory): disk space, of which the page cache keeps what was read lately.
    pub mapped_bytes: usize,
    /// Nodes removed by expiry so far.
    pub expired: u64,
    /// Round trips to a shared store so far (each batch of commands counts one); 0 in memory.
    pub round_trips: u64,
}
