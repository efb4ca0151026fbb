//! [`Forest`]: the forest in memory, nodes packed beside their fingerprints in a pigeonhole
//! index, with the exact expiry queue. One writer; the default store.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::io;

use super::checkpoint::{CheckpointReader, CheckpointWriter};
use super::placement::{ForestStats, NodeInfo, Placement, Signature, Timestamp};
use super::store::{
    Claim, Edge, EdgeState, Edges, ForestStore, RootRank, Settlement, StoreError, clamp_time,
};
use crate::index::{BlockLayout, PigeonholeIndex, push_compact};
use crate::simhash::FingerprintHasher;
use crate::verify::{
    Candidates, Compared, Evidence, Sketch, SketchStore, SketchView, Verdict, Verifier,
};
use crate::{Error, Fingerprint};

/// One node of the forest, packed into 16 bytes beside its fingerprint in the index.
#[derive(Clone, Copy)]
#[repr(C)]
struct Node {
    /// For a leaf: the fingerprint of the node it was attached through. For a root: its number
    /// of leaves (low 32 bits) and the sequence number of its creation (high 32 bits).
    link: u64,
    /// The event time that last added or reached this node, clamped to `0..=u32::MAX` seconds.
    last_seen: u32,
    /// Documents with exactly this fingerprint (low 31 bits); the top bit marks a root.
    docs_and_kind: u32,
}

// SAFETY: `repr(C)` fields of 8, 4 and 4 bytes (no padding), every bit pattern valid.
unsafe impl bytemuck::Zeroable for Node {}
// SAFETY: as above; `Copy`, no pointers.
unsafe impl bytemuck::Pod for Node {}

const ROOT_BIT: u32 = 1 << 31;

impl Node {
    fn root(sequence: u32, last_seen: u32) -> Self {
        Node {
            link: u64::from(sequence) << 32,
            last_seen,
            docs_and_kind: ROOT_BIT | 1,
        }
    }

    fn leaf(attached_to: Fingerprint, last_seen: u32) -> Self {
        Node {
            link: attached_to.0,
            last_seen,
            docs_and_kind: 1,
        }
    }

    fn is_root(self) -> bool {
        self.docs_and_kind & ROOT_BIT != 0
    }

    fn documents(self) -> u32 {
        self.docs_and_kind & !ROOT_BIT
    }

    fn set_documents(&mut self, documents: u32) {
        self.docs_and_kind = (self.docs_and_kind & ROOT_BIT) | documents.min(!ROOT_BIT);
    }

    /// A leaf's attachment; `None` for a root.
    fn attached_to(self) -> Option<Fingerprint> {
        (!self.is_root()).then_some(Fingerprint(self.link))
    }

    /// A root's number of leaves (meaningless for a leaf).
    fn children(self) -> u32 {
        self.link as u32
    }

    fn set_children(&mut self, children: u32) {
        self.link = (self.link & !u64::from(u32::MAX)) | u64::from(children);
    }

    /// A root's creation sequence number (meaningless for a leaf).
    fn sequence(self) -> u32 {
        (self.link >> 32) as u32
    }

    fn set_sequence(&mut self, sequence: u32) {
        self.link = (u64::from(sequence) << 32) | u64::from(self.children());
    }
}

/// Bytes a second of the expiry queue costs beyond its entries: its vector's header and its
/// share of the B-tree node (an estimate, for [`ForestStats::heap_bytes`]).
const EXPIRY_SLOT_OVERHEAD: usize = 48;

/// The token of every in-memory insert: with one writer, no insert ever meets another's.
const MEMORY_TOKEN: u64 = 1;

/// The parent forest over a pigeonhole index.
///
/// Invariants (checked by [`Forest::check_invariants`]): roots are pairwise more than `k` apart;
/// every leaf is within `k` of the node it was attached through, which is its root or a sibling and
/// was seen no earlier than the leaf. In a verifying forest: no two roots that a lookup reaches
/// from one another (within `k`, or posted under a shared key) verify, every leaf verifies against
/// the node it was attached through or is a copy of it plus text other stories carried (the node
/// then lies within the leaf: `Verifier::lies_within`), and every node has a sketch. Always: each
/// fingerprint is one node; no value is the root of two stories (a root that expired leaves its
/// value marked with its text's digest, and the value may be a leaf again, but a root only of the
/// same text); each root's child count equals the leaves under it; no stored node is older than the
/// window; each node has one entry in the expiry queue, no later than its last-seen time. The
/// outcome of a sequence of inserts depends only on their order and their fingerprints and times.
///
/// ```
/// use tantivy_dedup::{Fingerprint, Forest};
/// use tantivy_dedup::forest::PlacementKind;
///
/// let mut forest = Forest::new(3, 7 * 86_400).unwrap();
/// let day = 1_700_000_000;
/// let first = forest.place(Fingerprint(0xffff_0000_0000_0000), day);
/// assert_eq!(first.kind, PlacementKind::NewRoot);
/// // Two bits away: a leaf of the first story's root.
/// let repost = forest.place(Fingerprint(0xffff_0000_0000_0003), day + 60);
/// assert_eq!(repost.root, first.root);
/// assert!(repost.is_duplicate());
/// // Eight days later the story has expired: the same text starts a new cluster.
/// let later = forest.place(Fingerprint(0xffff_0000_0000_0003), day + 8 * 86_400);
/// assert_eq!(later.kind, PlacementKind::NewRoot);
/// assert_eq!(later.root, Fingerprint(0xffff_0000_0000_0003));
/// ```
pub struct Forest {
    index: PigeonholeIndex<Node>,
    window: Timestamp,
    /// The newest event time seen; `None` before the first.
    newest: Option<Timestamp>,
    /// Every node's fingerprint under the second it was last seen when the entry was made
    /// (never later than its `last_seen`); exactly one entry a node.
    expiry: BTreeMap<u32, Vec<u64>>,
    /// Nodes removed by expiry so far.
    expired: u64,
    /// The values of roots that expired, with the digest of each one's text: a story's id is
    /// only ever that text's again ([`Claim::Created`]). Kept for the forest's life (13 to 26
    /// bytes an expired story): forgetting one when retention deletes its documents would make
    /// a replay, which does not see retention, decide otherwise.
    former_roots: HashMap<u64, u32, BuildHasherDefault<FingerprintHasher>>,
    next_sequence: u32,
    roots: usize,
    /// Default mode's sketches and rule; `None` in seed mode.
    verification: Option<Verification>,
}

/// A verifying forest's own state.
struct Verification {
    verifier: Verifier,
    sketches: SketchStore,
}

impl Forest {
    /// An empty forest for radius `max_distance` (`k`) and an expiry window in seconds (> 0).
    pub fn new(max_distance: u32, window_seconds: u64) -> Result<Self, Error> {
        Self::with_layout(BlockLayout::new(max_distance)?, window_seconds)
    }

    /// An empty forest whose index uses `layout`'s tables (`k + 1` blocks, or a permuted
    /// layout: the decisions are the same, only memory and lookup cost differ).
    pub fn with_layout(layout: BlockLayout, window_seconds: u64) -> Result<Self, Error> {
        if window_seconds == 0 || window_seconds > u64::from(u32::MAX) {
            return Err(Error::Config(format!(
                "the expiry window must be between 1 second and about 136 years, got {window_seconds} s"
            )));
        }
        Ok(Forest {
            index: PigeonholeIndex::with_layout(layout),
            window: window_seconds as Timestamp,
            newest: None,
            expiry: BTreeMap::new(),
            expired: 0,
            former_roots: HashMap::default(),
            next_sequence: 0,
            roots: 0,
            verification: None,
        })
    }

    /// An empty verifying forest (default mode): edges are candidates that `verifier` accepts.
    ///
    /// ```
    /// use tantivy_dedup::forest::{Forest, Signature};
    /// use tantivy_dedup::verify::{Sketch, Verifier};
    /// use tantivy_dedup::Fingerprint;
    ///
    /// let mut forest = Forest::with_verifier(3, 7 * 86_400, Verifier::default()).unwrap();
    /// let story = "国家统计局今天发布数据。前三季度国内生产总值同比增长百分之五点二。\
    ///              就业形势总体稳定，居民消费价格温和上涨。经济运行持续恢复向好。";
    /// let signature = |fingerprint, text: &str| Signature {
    ///     fingerprint: Fingerprint(fingerprint),
    ///     sketch: Some(Sketch::of(&[text], 200)),
    ///     reason: None,
    /// };
    /// let first = forest.place(signature(0, story), 0);
    /// // 40 bits away, but the sketch verifies: the same cluster.
    /// let copy = forest.place(signature(u64::from(u32::MAX) << 8, &format!("【转载】{story}")), 60);
    /// assert_eq!(copy.root, first.root);
    /// // 1 bit away, but another text: a cluster of its own.
    /// let other = forest.place(signature(1, "气象台发布暴雨预警。南方地区将有强降雨。"), 120);
    /// assert_ne!(other.root, first.root);
    /// ```
    pub fn with_verifier(
        max_distance: u32,
        window_seconds: u64,
        verifier: Verifier,
    ) -> Result<Self, Error> {
        Self::with_layout_and_verifier(BlockLayout::new(max_distance)?, window_seconds, verifier)
    }

    /// [`with_layout`](Self::with_layout) and [`with_verifier`](Self::with_verifier) together.
    pub fn with_layout_and_verifier(
        layout: BlockLayout,
        window_seconds: u64,
        verifier: Verifier,
    ) -> Result<Self, Error> {
        Self::with_sketches(layout, window_seconds, verifier, SketchStore::default())
    }

    /// [`with_layout_and_verifier`](Self::with_layout_and_verifier), keeping the sketches in
    /// `sketches` (an empty store; [`SketchStore::in_directory`] keeps them off the heap). Where
    /// sketches are kept changes no decision.
    pub fn with_sketches(
        layout: BlockLayout,
        window_seconds: u64,
        verifier: Verifier,
        sketches: SketchStore,
    ) -> Result<Self, Error> {
        if !sketches.is_empty() {
            return Err(Error::Config(
                "a new forest needs an empty sketch store".to_owned(),
            ));
        }
        let mut forest = Forest::with_layout(layout, window_seconds)?;
        forest.verification = Some(Verification { verifier, sketches });
        Ok(forest)
    }

    /// Writes the whole forest to a checkpoint ([`checkpoint`](crate::forest::checkpoint)): its
    /// tables with their nodes, the expiry queue, its counters and, in default mode, its sketch
    /// store (sketch chunks in a checkpoint directory by name: `out` makes them durable with
    /// it, and deletes those of chunks freed since the last checkpoint once it is in place).
    ///
    /// ```
    /// use tantivy_dedup::forest::checkpoint::{CheckpointReader, CheckpointWriter};
    /// use tantivy_dedup::{Fingerprint, Forest};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("forest.checkpoint");
    /// let mut forest = Forest::new(3, 86_400).unwrap();
    /// let first = forest.place(Fingerprint(0xff00), 1_700_000_000);
    /// let mut out = CheckpointWriter::create(&path)?;
    /// forest.save(&mut out)?;
    /// out.commit()?;
    ///
    /// let mut input = CheckpointReader::open(&path)?.expect("just written");
    /// let mut loaded = Forest::new(3, 86_400).unwrap();
    /// loaded.load(&mut input)?;
    /// input.finish()?;
    /// // The loaded forest decides as the saved one would have.
    /// assert_eq!(loaded.place(Fingerprint(0xff01), 1_700_000_060).root, first.root);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn save(&mut self, out: &mut CheckpointWriter) -> io::Result<()> {
        out.put_u64(self.window as u64)?;
        out.put_u64(u64::from(self.newest.is_some()))?;
        out.put_u64(self.newest.unwrap_or_default() as u64)?;
        out.put_u64(self.expired)?;
        out.put_u64(u64::from(self.next_sequence))?;
        out.put_u64(self.roots as u64)?;
        self.index.save(out)?;
        let seconds: Vec<u32> = self.expiry.keys().copied().collect();
        let lens: Vec<u64> = self
            .expiry
            .values()
            .map(|entries| entries.len() as u64)
            .collect();
        let entries: Vec<u64> = self.expiry.values().flatten().copied().collect();
        out.put_slice(&seconds)?;
        out.put_slice(&lens)?;
        out.put_slice(&entries)?;
        let (former_roots, digests): (Vec<u64>, Vec<u32>) = self.former_roots.iter().unzip();
        out.put_slice(&former_roots)?;
        out.put_slice(&digests)?;
        match &mut self.verification {
            None => out.put_u64(0),
            Some(verification) => {
                out.put_u64(1)?;
                verification.sketches.save(out)
            }
        }
    }

    /// Loads the forest [`save`](Self::save) wrote into this new, empty forest, which must be
    /// made as the saved one was: the same layout, window and mode, and sketches kept alike (on
    /// the heap, or a [`SketchStore::in_checkpoint_directory`] of the same directory). Call
    /// [`CheckpointReader::finish`] before using the forest: only then is the file known whole.
    /// After an error the forest is half loaded: drop it.
    pub fn load(&mut self, input: &mut CheckpointReader) -> io::Result<()> {
        let window = input.get_u64()?;
        if window != self.window as u64 {
            return Err(input.invalid(format!("a window of {window} s, not {} s", self.window)));
        }
        if !self.index.is_empty() || self.newest.is_some() {
            return Err(input.invalid("loaded into a forest in use"));
        }
        let has_newest = input.get_u64()? != 0;
        let newest = input.get_u64()? as Timestamp;
        self.newest = has_newest.then_some(newest);
        self.expired = input.get_u64()?;
        self.next_sequence = input.get_usize(u32::MAX as usize)? as u32;
        self.roots = input.get_usize(usize::MAX)?;
        self.index.load(input)?;
        let seconds: Vec<u32> = input.get_vec()?;
        let lens: Vec<u64> = input.get_vec()?;
        let entries: Vec<u64> = input.get_vec()?;
        if seconds.len() != lens.len() || lens.iter().sum::<u64>() != entries.len() as u64 {
            return Err(input.invalid("the expiry queue's parts differ in length"));
        }
        let mut rest = entries.as_slice();
        for (second, len) in seconds.into_iter().zip(lens) {
            let (slot, after) = rest.split_at(len as usize);
            self.expiry.insert(second, slot.to_vec());
            rest = after;
        }
        let former_roots: Vec<u64> = input.get_vec()?;
        let digests: Vec<u32> = input.get_vec()?;
        if former_roots.len() != digests.len() {
            return Err(input.invalid("the former roots' parts differ in length"));
        }
        self.former_roots = former_roots.into_iter().zip(digests).collect();
        let verifying = input.get_u64()? != 0;
        match (&mut self.verification, verifying) {
            (None, false) => {}
            (Some(verification), true) => verification.sketches.load(input)?,
            _ => return Err(input.invalid("saved in the other mode")),
        }
        Ok(())
    }

    /// Whether edges are verified by sketches (default mode).
    pub fn is_verifying(&self) -> bool {
        self.verification.is_some()
    }

    /// The nodes' sketches (default mode).
    pub(crate) fn sketches(&self) -> Option<&SketchStore> {
        self.verification
            .as_ref()
            .map(|verification| &verification.sketches)
    }

    /// The radius `k`.
    pub fn max_distance(&self) -> u32 {
        self.index.max_distance()
    }

    /// The newest event time seen.
    pub fn newest_time(&self) -> Option<Timestamp> {
        self.newest
    }

    /// Nodes last seen before this time are expired.
    fn cutoff(&self) -> Timestamp {
        self.newest
            .map_or(Timestamp::MIN, |newest| newest - self.window)
    }

    /// Moves the clock forward to `time` (it never goes back) without inserting anything;
    /// what falls out of the window is removed.
    pub fn advance_to(&mut self, time: Timestamp) {
        let time = Timestamp::from(clamp_time(time));
        self.newest = Some(self.newest.map_or(time, |newest| newest.max(time)));
        self.expire();
    }

    /// Removes the nodes last seen before the window; returns how many. Inserting and
    /// [`advance_to`](Self::advance_to) already do this, so it finds nothing to do unless the
    /// clock was moved some other way.
    pub fn expire(&mut self) -> usize {
        let cutoff = self.cutoff();
        let mut due = Vec::new();
        while let Some(entry) = self.expiry.first_entry() {
            if Timestamp::from(*entry.key()) >= cutoff {
                break;
            }
            due.extend(entry.remove());
        }
        if due.is_empty() {
            return 0;
        }
        let mut expired = Vec::new();
        for fingerprint in due.into_iter().map(Fingerprint) {
            let Some(&node) = self.index.get(fingerprint) else {
                continue;
            };
            if Timestamp::from(node.last_seen) < cutoff {
                if node.is_root() {
                    let digest = self.node_digest(fingerprint);
                    self.former_roots.insert(fingerprint.0, digest);
                }
                expired.push((fingerprint, node.is_root()));
            } else {
                self.enqueue(fingerprint, node.last_seen);
            }
        }
        // Roots are found while every expired node is still there to follow.
        let orphaned_from: Vec<Fingerprint> = expired
            .iter()
            .filter(|(_, is_root)| !is_root)
            .filter_map(|&(leaf, _)| self.root_of_node(leaf))
            .collect();
        for (fingerprint, is_root) in &expired {
            self.index.remove(*fingerprint);
            if let Some(verification) = &mut self.verification {
                verification.sketches.remove(*fingerprint);
            }
            self.roots -= usize::from(*is_root);
        }
        // A live root loses its expired leaves from its count; an expired root went with them.
        for root in orphaned_from {
            if let Some(node) = self.index.get_mut(root) {
                node.set_children(node.children().saturating_sub(1));
            }
        }
        self.expired += expired.len() as u64;
        expired.len()
    }

    /// When `fingerprint` was the root of a story that has expired: the digest of that root's
    /// text ([`digest_of`](crate::verify::digest_of)). Only the same text may make it a root
    /// again.
    pub fn former_root(&self, fingerprint: Fingerprint) -> Option<u32> {
        self.former_roots.get(&fingerprint.0).copied()
    }

    /// The digest of a stored node's text (0 in seed mode).
    fn node_digest(&self, fingerprint: Fingerprint) -> u32 {
        self.verification
            .as_ref()
            .and_then(|verification| verification.sketches.get(fingerprint))
            .map_or(0, SketchView::digest)
    }

    fn enqueue(&mut self, fingerprint: Fingerprint, seen: u32) {
        push_compact(self.expiry.entry(seen).or_default(), fingerprint.0);
    }

    /// Places a document with event time `time` by its signature (a bare [`Fingerprint`] in seed
    /// mode), by the rules of docs/algorithm.md, "Insertion rules"
    /// ([`place`](crate::forest::place), the protocol every store shares).
    ///
    /// # Panics
    /// When [`try_place`](Self::try_place) fails: only a forest whose sketches are kept in a
    /// directory ([`with_sketches`](Self::with_sketches)) can, when the directory cannot take
    /// another file.
    pub fn place(&mut self, signature: impl Into<Signature>, time: Timestamp) -> Placement {
        match self.try_place(signature, time) {
            Ok(placement) => placement,
            Err(error) => panic!("placing in the in-memory forest failed: {error}"),
        }
    }

    /// [`place`](Self::place), failing when a sketch cannot be stored (sketches kept in a
    /// directory that cannot take another file); the forest is then as it was. (Otherwise an
    /// error is a broken attachment chain, which [`check_invariants`](Self::check_invariants)
    /// rules out.)
    pub fn try_place(
        &mut self,
        signature: impl Into<Signature>,
        time: Timestamp,
    ) -> Result<Placement, StoreError> {
        crate::forest::place(self, &signature.into(), time, MEMORY_TOKEN)
    }

    fn add_root(&mut self, fingerprint: Fingerprint, seen: u32) {
        if self.next_sequence == u32::MAX {
            self.renumber_roots();
        }
        self.index
            .insert(fingerprint, Node::root(self.next_sequence, seen));
        self.enqueue(fingerprint, seen);
        self.next_sequence += 1;
        self.roots += 1;
    }

    /// Every stored node with an edge to a new node of `fingerprint` and `sketch` (which need
    /// not be stored): within `k` in seed mode; in default mode a candidate that is evidence
    /// (`Candidates::evidence`: one that verifies and passes the rules against bridges, or
    /// one the new text is a copy of once the text other stories carry is out), with what its
    /// text is to the new one.
    fn verified_edges(&self, fingerprint: Fingerprint, sketch: Option<&Sketch>) -> Evidence {
        let Some(verification) = &self.verification else {
            let mut near = Vec::new();
            self.index.for_each_within(fingerprint, |node, _| {
                near.push(Compared {
                    node,
                    verdict: Verdict::Copy,
                })
            });
            return Evidence {
                edges: near,
                boilerplate: false,
            };
        };
        let empty = Sketch::default();
        let sketch = sketch.unwrap_or(&empty).view();
        let mut candidates = Candidates::default();
        self.index
            .for_each_within(fingerprint, |node, _| candidates.push_near(node));
        verification.sketches.push_posted(sketch, &mut candidates);
        // Stored sketches are scattered in memory: look them all up and load each one's hashes
        // before comparing any, so that their cache misses overlap instead of queueing.
        let stored: Vec<(Fingerprint, SketchView)> = candidates
            .nodes()
            .into_iter()
            .filter(|&node| node != fingerprint)
            .filter_map(|node| Some((node, verification.sketches.get(node)?)))
            .inspect(|(_, stored)| stored.load())
            .collect();
        let compared: Vec<Compared> = stored
            .into_iter()
            .map(|(node, stored)| Compared {
                node,
                verdict: verification.verifier.verdict(sketch, stored),
            })
            .collect();
        candidates.evidence(
            &compared,
            sketch,
            |node| verification.sketches.get(node),
            |node| self.root_of_node(node),
            &verification.verifier,
        )
    }

    /// Follows attachments from a stored node to its root.
    fn root_of_node(&self, mut fingerprint: Fingerprint) -> Option<Fingerprint> {
        // A chain is acyclic and at most as long as the forest is large; the bound only guards
        // against a corrupted forest looping forever.
        for _ in 0..=self.index.len() {
            match self.index.get(fingerprint)?.attached_to() {
                None => return Some(fingerprint),
                Some(next) => fingerprint = next,
            }
        }
        None
    }

    /// The root of a node's cluster.
    pub fn root_of(&self, fingerprint: Fingerprint) -> Option<Fingerprint> {
        self.root_of_node(fingerprint)
    }

    /// Takes one document off the count of its node (after a delete). Nodes themselves leave
    /// only by expiry, since a leaf may be what ties later leaves to their tree. Returns whether
    /// the node was there with documents to take off.
    pub fn remove_document(&mut self, fingerprint: Fingerprint) -> bool {
        match self.index.get_mut(fingerprint) {
            Some(node) if node.documents() > 0 => {
                node.set_documents(node.documents() - 1);
                true
            }
            _ => false,
        }
    }

    /// Gives roots the sequence numbers 0, 1, … in their order of creation, so that the counter
    /// can go on after 2^32 roots have been made.
    fn renumber_roots(&mut self) {
        let mut roots: Vec<(u32, Fingerprint)> = self
            .index
            .iter()
            .filter(|(_, node)| node.is_root())
            .map(|(fingerprint, node)| (node.sequence(), fingerprint))
            .collect();
        roots.sort_unstable();
        for (sequence, (_, fingerprint)) in roots.iter().enumerate() {
            if let Some(node) = self.index.get_mut(*fingerprint) {
                node.set_sequence(sequence as u32);
            }
        }
        self.next_sequence = roots.len() as u32;
    }

    /// Calls `visit(fingerprint, distance)` for every node within `k` of `query`: the raw
    /// index lookup.
    #[inline]
    pub fn for_each_within(&self, query: Fingerprint, visit: impl FnMut(Fingerprint, u32)) {
        self.index.for_each_within(query, visit);
    }

    /// How many stored fingerprints a lookup of `query` compares against.
    pub fn candidates(&self, query: Fingerprint) -> usize {
        self.index.candidates(query)
    }

    /// Every stored fingerprint, in storage order.
    pub fn fingerprints(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.index.iter().map(|(fingerprint, _)| fingerprint)
    }

    /// Every node, in storage order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeInfo> + '_ {
        self.index.iter().map(|(fingerprint, &node)| NodeInfo {
            fingerprint,
            root: self.root_of_node(fingerprint).unwrap_or(fingerprint),
            attached_to: node.attached_to(),
            last_seen: Timestamp::from(node.last_seen),
            documents: node.documents(),
            children: node.is_root().then(|| node.children()),
        })
    }

    /// Every node, in fingerprint order: two forests hold the same clusters exactly when
    /// these are equal (what recovery's tests and `check` compare).
    pub fn nodes_in_order(&self) -> Vec<NodeInfo> {
        let mut nodes: Vec<NodeInfo> = self.nodes().collect();
        nodes.sort_unstable_by_key(|node| node.fingerprint);
        nodes
    }

    /// Node and root counts and memory.
    pub fn stats(&self) -> ForestStats {
        ForestStats {
            nodes: self.index.len(),
            roots: self.roots,
            heap_bytes: self.index.heap_bytes()
                + self
                    .expiry
                    .values()
                    .map(|entries| entries.capacity() * 8 + EXPIRY_SLOT_OVERHEAD)
                    .sum::<usize>()
                // A hash table entry of 12 bytes plus its control byte.
                + self.former_roots.capacity() * 13
                + self
                    .verification
                    .as_ref()
                    .map_or(0, |verification| verification.sketches.heap_bytes())
                + std::mem::size_of::<Self>(),
            mapped_bytes: self
                .verification
                .as_ref()
                .map_or(0, |verification| verification.sketches.mapped_bytes()),
            expired: self.expired,
            round_trips: 0,
        }
    }

    /// Checks every invariant of the forest; the first violation found is the error.
    /// Costs a lookup per node: meant for tests and diagnostics, not the hot path.
    pub fn check_invariants(&self) -> Result<(), String> {
        let k = self.max_distance();
        let mut children = std::collections::HashMap::<Fingerprint, u32>::new();
        let mut roots = 0;
        for info in self.nodes() {
            let node = *self
                .index
                .get(info.fingerprint)
                .ok_or_else(|| format!("{} listed but not stored", info.fingerprint))?;
            let Some(root) = self.root_of_node(info.fingerprint) else {
                return Err(format!("{}: attachment chain is broken", info.fingerprint));
            };
            match info.attached_to {
                None => roots += 1,
                Some(attached) => {
                    *children.entry(root).or_default() += 1;
                    let parent = self.index.get(attached).ok_or_else(|| {
                        format!("leaf {} attached to missing {attached}", info.fingerprint)
                    })?;
                    // A leaf verifies against the node it was attached through, or is a copy
                    // of it plus text other stories carried (`verify::without_carried_text`:
                    // who carried it may have expired since), which the node lies within.
                    if self.stored_edge(info.fingerprint, attached) == Verdict::Apart
                        && !self.lies_within(attached, info.fingerprint)
                    {
                        return Err(format!(
                            "leaf {} has no edge to {attached} ({} bits apart, k = {k})",
                            info.fingerprint,
                            info.fingerprint.distance(attached)
                        ));
                    }
                    if parent.last_seen < node.last_seen {
                        return Err(format!(
                            "{attached} was seen before {}, which is attached through it",
                            info.fingerprint
                        ));
                    }
                }
            }
            if Timestamp::from(node.last_seen) < self.cutoff() {
                return Err(format!("{} is expired but still stored", info.fingerprint));
            }
            if info.attached_to.is_none()
                && self
                    .former_root(info.fingerprint)
                    .is_some_and(|digest| digest != self.node_digest(info.fingerprint))
            {
                return Err(format!(
                    "{} is the root of another text than the expired story it was the root of",
                    info.fingerprint
                ));
            }
            if info.attached_to.is_none() {
                let mut reachable = Vec::new();
                self.index
                    .for_each_within(info.fingerprint, |other, _| reachable.push(other));
                if let Some(verification) = &self.verification {
                    verification
                        .sketches
                        .for_each_co_posted(info.fingerprint, |other| reachable.push(other));
                }
                // Roots may reach a text they contain or are contained in (an edge without
                // evidence, or a boilerplate text), and a copy when what the two share is
                // text other stories carry (`verify::without_carried_text`: who carried it
                // may have expired since), never a copy of the same shingles.
                let joined_root = reachable.into_iter().find(|&other| {
                    other != info.fingerprint
                        && self.index.get(other).is_some_and(|n| n.is_root())
                        && self.stored_edge(info.fingerprint, other) == Verdict::Copy
                        && self.same_shingles(info.fingerprint, other)
                });
                if let Some(other) = joined_root {
                    return Err(format!(
                        "roots {} and {other} reach each other and are copies of the same shingles",
                        info.fingerprint
                    ));
                }
            }
        }
        let mut queued = 0;
        for (&second, entries) in &self.expiry {
            for &entry in entries {
                queued += 1;
                let node = self.index.get(Fingerprint(entry)).ok_or_else(|| {
                    format!(
                        "expiry queue holds {}, which is not stored",
                        Fingerprint(entry)
                    )
                })?;
                if node.last_seen < second {
                    return Err(format!(
                        "{} is queued to expire after it was last seen",
                        Fingerprint(entry)
                    ));
                }
            }
        }
        if queued != self.index.len() {
            return Err(format!(
                "{queued} expiry entries for {} nodes",
                self.index.len()
            ));
        }
        for (fingerprint, &node) in self.index.iter() {
            let expected = children.get(&fingerprint).copied().unwrap_or(0);
            if node.is_root() && node.children() != expected {
                return Err(format!(
                    "root {fingerprint} counts {} children but has {expected}",
                    node.children()
                ));
            }
        }
        if roots != self.roots {
            return Err(format!("{roots} roots stored, {} counted", self.roots));
        }
        if let Some(verification) = &self.verification {
            verification.sketches.check_invariants()?;
            if verification.sketches.len() != self.index.len() {
                return Err(format!(
                    "{} sketches for {} nodes",
                    verification.sketches.len(),
                    self.index.len()
                ));
            }
            if let Some((node, _)) = self
                .index
                .iter()
                .find(|(node, _)| verification.sketches.get(*node).is_none())
            {
                return Err(format!("{node} has no sketch"));
            }
        }
        Ok(())
    }

    /// The sketches of two stored nodes, in a verifying forest that holds both.
    fn stored_sketches(
        &self,
        a: Fingerprint,
        b: Fingerprint,
    ) -> Option<(&Verifier, SketchView<'_>, SketchView<'_>)> {
        let verification = self.verification.as_ref()?;
        let (a, b) = (verification.sketches.get(a)?, verification.sketches.get(b)?);
        Some((&verification.verifier, a, b))
    }

    /// Whether a stored node's text lies within another's (`Verifier::lies_within`; in seed
    /// mode, no sketch: never).
    fn lies_within(&self, part: Fingerprint, whole: Fingerprint) -> bool {
        self.stored_sketches(part, whole)
            .is_some_and(|(verifier, part, whole)| verifier.lies_within(part, whole))
    }

    /// Whether two stored nodes sample the same shingles (in seed mode, no sketch: always).
    fn same_shingles(&self, a: Fingerprint, b: Fingerprint) -> bool {
        if self.verification.is_none() {
            return true;
        }
        self.stored_sketches(a, b).is_some_and(|(_, a, b)| {
            let (a, b) = a.comparable(b);
            a == b
        })
    }

    /// What the texts of two stored nodes are to each other: in seed mode copies within `k`
    /// and apart beyond; in default mode what they verify as.
    fn stored_edge(&self, a: Fingerprint, b: Fingerprint) -> Verdict {
        match self.stored_sketches(a, b) {
            _ if self.verification.is_none() && a.distance(b) <= self.max_distance() => {
                Verdict::Copy
            }
            Some((verifier, x, y)) => verifier.verdict(x, y),
            None => Verdict::Apart,
        }
    }
}

/// The in-memory store: one writer, so nothing is ever pending and the protocol's publish,
/// scan and settle run back to back. Publishing happens at settle time (the scan reads the
/// tables and key postings before the new node is in them, which is what publish-then-scan
/// sees when no one else writes), and tickets are not needed: roots are numbered in their
/// order of creation.
impl ForestStore for Forest {
    fn max_distance(&self) -> u32 {
        self.index.max_distance()
    }

    fn window(&self) -> Timestamp {
        self.window
    }

    fn advance_to(&mut self, time: Timestamp) -> Result<Timestamp, StoreError> {
        Forest::advance_to(self, time);
        Ok(self.newest.unwrap_or(time))
    }

    fn newest_time(&self) -> Option<Timestamp> {
        self.newest
    }

    fn claim(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
        _token: u64,
    ) -> Result<Claim, StoreError> {
        Ok(match self.index.get_mut(fingerprint) {
            Some(node) => {
                node.set_documents(node.documents().saturating_add(1));
                node.last_seen = node.last_seen.max(seen);
                Claim::Existing {
                    attached_to: node.attached_to(),
                    root: None,
                }
            }
            None => Claim::Created {
                former_root: self.former_root(fingerprint),
            },
        })
    }

    fn verifies_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<bool>, StoreError> {
        if self.index.get(node).is_none() {
            return Ok(None);
        }
        Ok(Some(match &self.verification {
            None => true,
            Some(verification) => verification
                .sketches
                .get(node)
                .is_some_and(|stored| verification.verifier.matches(sketch, stored)),
        }))
    }

    fn containment_with_node(
        &mut self,
        node: Fingerprint,
        sketch: &Sketch,
    ) -> Result<Option<f64>, StoreError> {
        if self.index.get(node).is_none() {
            return Ok(None);
        }
        Ok(self.verification.as_ref().and_then(|verification| {
            let stored = verification.sketches.get(node)?;
            Some(sketch.view().similarity(stored).containment)
        }))
    }

    fn publish(
        &mut self,
        _fingerprint: Fingerprint,
        _sketch: Option<&Sketch>,
        _token: u64,
    ) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    fn take_tickets(&mut self, _count: u64) -> Result<u64, StoreError> {
        Ok(0)
    }

    fn record_ticket(&mut self, _fingerprint: Fingerprint, _token: u64, _ticket: u64) {}

    /// Nothing is ever pending here (one writer), so nothing is `later`.
    fn edges(
        &mut self,
        fingerprint: Fingerprint,
        sketch: Option<&Sketch>,
        _later: &dyn Fn(&EdgeState) -> bool,
    ) -> Result<Edges, StoreError> {
        let mut edges = Vec::new();
        let evidence = self.verified_edges(fingerprint, sketch);
        for compared in evidence.edges {
            match self.root_of_node(compared.node) {
                Some(root) => edges.push(Edge {
                    node: compared.node,
                    distance: fingerprint.distance(compared.node),
                    verdict: compared.verdict,
                    state: EdgeState::Settled { root, ticket: None },
                }),
                None => debug_assert!(false, "broken attachment chain at {}", compared.node),
            }
        }
        Ok(Edges {
            edges,
            boilerplate: evidence.boilerplate,
        })
    }

    fn root_ranks(&mut self, roots: &[Fingerprint]) -> Result<Vec<Option<RootRank>>, StoreError> {
        Ok(roots
            .iter()
            .map(|&root| {
                let node = self.index.get(root)?;
                Some(RootRank {
                    children: node.children(),
                    sequence: u64::from(node.sequence()),
                })
            })
            .collect())
    }

    fn settle(
        &mut self,
        fingerprint: Fingerprint,
        _token: u64,
        settlement: Settlement,
        sketch: Option<&Sketch>,
        seen: u32,
    ) -> Result<bool, StoreError> {
        if let Some(verification) = &mut self.verification {
            let empty = Sketch::default();
            verification
                .sketches
                .insert(fingerprint, sketch.unwrap_or(&empty))
                .map_err(|error| StoreError::Backend(Box::new(error)))?;
        }
        match settlement {
            Settlement::Root { .. } => self.add_root(fingerprint, seen),
            Settlement::Leaf { attached_to, .. } => {
                self.index
                    .insert(fingerprint, Node::leaf(attached_to, seen));
                self.enqueue(fingerprint, seen);
            }
        }
        Ok(true)
    }

    fn add_child(&mut self, root: Fingerprint, _leaf: Fingerprint) -> Result<(), StoreError> {
        if let Some(node) = self.index.get_mut(root) {
            node.set_children(node.children().saturating_add(1));
        }
        Ok(())
    }

    fn touch(
        &mut self,
        fingerprint: Fingerprint,
        seen: u32,
    ) -> Result<Option<Option<Fingerprint>>, StoreError> {
        Ok(self.index.get_mut(fingerprint).map(|node| {
            node.last_seen = node.last_seen.max(seen);
            node.attached_to()
        }))
    }

    fn abandon(&mut self, _fingerprint: Fingerprint, _owner: u64) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn remove_document(&mut self, fingerprint: Fingerprint) -> Result<bool, StoreError> {
        Ok(Forest::remove_document(self, fingerprint))
    }

    fn stats(&self) -> ForestStats {
        Forest::stats(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::PlacementKind;

    const DAY: Timestamp = 86_400;

    fn forest() -> Forest {
        Forest::new(3, 7 * DAY as u64).unwrap()
    }

    #[test]
    fn node_packing_round_trips() {
        let mut node = Node::root(7, 100);
        node.set_children(5);
        node.set_documents(9);
        assert!(node.is_root());
        assert_eq!(
            (node.children(), node.sequence(), node.documents()),
            (5, 7, 9)
        );
        node.set_sequence(u32::MAX);
        assert_eq!((node.children(), node.sequence()), (5, u32::MAX));
        assert_eq!(std::mem::size_of::<Node>(), 16);
        let leaf = Node::leaf(Fingerprint(u64::MAX), 3);
        assert!(!leaf.is_root());
        assert_eq!(leaf.attached_to(), Some(Fingerprint(u64::MAX)));
    }

    #[test]
    fn tie_break_most_children_wins() {
        let mut forest = forest();
        // Two roots 6 bits apart, the second with a leaf; a point 3 bits from each.
        let a = Fingerprint(0);
        let b = Fingerprint(0b11_1111);
        forest.place(a, 0);
        forest.place(b, 1);
        let leaf_of_b = forest.place(Fingerprint((1 << 40) | 0b11_1111), 2);
        assert_eq!(leaf_of_b.root, b);
        let middle = forest.place(Fingerprint(0b111), 3);
        assert_eq!(middle.root, b, "b has one child, a none");
        forest.check_invariants().unwrap();
    }

    #[test]
    fn tie_break_earliest_root_wins() {
        let mut forest = forest();
        let later_smaller = Fingerprint(0b111);
        let earlier_larger = Fingerprint(0b111 << 32);
        // Insert the larger hash first so the earliest-added rule and the smaller-hash rule
        // disagree.
        forest.place(earlier_larger, 0);
        forest.place(later_smaller, 1);
        let between = Fingerprint(0);
        assert_eq!(forest.place(between, 2).root, earlier_larger);
    }

    #[test]
    fn renumbering_keeps_creation_order() {
        let mut forest = forest();
        forest.place(Fingerprint(0b111 << 32), 0);
        forest.place(Fingerprint(0b111), 1);
        forest.next_sequence = u32::MAX;
        forest.place(Fingerprint(u64::MAX), 2);
        assert_eq!(forest.next_sequence, 3);
        assert_eq!(
            forest.place(Fingerprint(0), 3).root,
            Fingerprint(0b111 << 32)
        );
    }

    #[test]
    fn leaf_through_sibling_keeps_its_sibling_alive() {
        let mut forest = forest();
        let root = Fingerprint(0);
        let near = Fingerprint(0b111); // 3 from root
        let far = Fingerprint(0b11_1111); // 3 from near, 6 from root
        forest.place(root, 0);
        forest.place(near, 0);
        assert_eq!(forest.place(far, DAY).root, root);
        // Only `far` is seen again; `near` must live on because `far` hangs from it.
        forest.place(far, 6 * DAY);
        forest.advance_to(10 * DAY);
        forest.expire();
        forest.check_invariants().unwrap();
        assert_eq!(forest.root_of(near), Some(root));
        assert_eq!(forest.root_of(far), Some(root));
        forest.advance_to(14 * DAY);
        forest.expire();
        assert_eq!(forest.stats().nodes, 0);
        assert_eq!(forest.stats().roots, 0);
    }

    #[test]
    fn expired_node_value_starts_fresh() {
        let mut forest = forest();
        forest.place(Fingerprint(0), 0);
        forest.place(Fingerprint(1), 0);
        let again = forest.place(Fingerprint(1), 8 * DAY);
        assert_eq!(again.kind, PlacementKind::NewRoot);
        assert_eq!(forest.stats().nodes, 1);
        forest.check_invariants().unwrap();
    }

    #[test]
    fn documents_count_down_without_dropping_nodes() {
        let mut forest = forest();
        forest.place(Fingerprint(42), 0);
        forest.place(Fingerprint(42), 0);
        assert!(forest.remove_document(Fingerprint(42)));
        assert!(forest.remove_document(Fingerprint(42)));
        assert!(!forest.remove_document(Fingerprint(42)));
        assert_eq!(forest.root_of(Fingerprint(42)), Some(Fingerprint(42)));
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(Forest::new(3, 0).is_err());
        assert!(Forest::new(99, DAY as u64).is_err());
    }
}
