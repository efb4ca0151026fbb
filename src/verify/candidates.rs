//! The sketches of the forest's nodes and the key postings that find candidates by them.

use std::collections::HashMap;

use super::Sketch;
use crate::Fingerprint;

/// Nodes a key's posting list holds at most; the oldest leaves first. A key that many texts
/// share is boilerplate (a site's footer, an agency's byline), and the most recent texts that
/// carry it are the likeliest copies of a new one, so lookups stay bounded without a list of
/// stop shingles.
pub const POSTING_CAPACITY: usize = 16;

/// Each node's sketch, and for each candidate key the nodes whose sketches hold it.
///
/// Invariants: every node in a posting list has a sketch here whose [`Sketch::keys`] contain
/// that key; a posting list holds a node at most once and at most [`POSTING_CAPACITY`] nodes,
/// in the order they were added.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::verify::{Sketch, SketchStore};
///
/// let mut store = SketchStore::default();
/// let story = "国务院常务会议今天召开。会议部署推进新型城镇化建设工作。";
/// store.insert(Fingerprint(1), Sketch::of(&[story], 200));
/// let mut found = Vec::new();
/// store.for_each_candidate(&Sketch::of(&[story], 200), |node| found.push(node));
/// assert!(found.iter().all(|&node| node == Fingerprint(1)) && !found.is_empty());
/// store.remove(Fingerprint(1));
/// assert!(store.is_empty());
/// ```
#[derive(Debug, Default)]
pub struct SketchStore {
    sketches: HashMap<Fingerprint, Sketch>,
    postings: HashMap<u32, Posting>,
}

/// The nodes posted under one key. Most keys belong to one text alone, so a single node is
/// kept inline, without a heap allocation.
#[derive(Debug)]
enum Posting {
    One(Fingerprint),
    Many(Vec<Fingerprint>),
}

impl Posting {
    fn as_slice(&self) -> &[Fingerprint] {
        match self {
            Posting::One(node) => std::slice::from_ref(node),
            Posting::Many(nodes) => nodes,
        }
    }

    /// Adds a node, letting the oldest go beyond [`POSTING_CAPACITY`].
    fn push(&mut self, node: Fingerprint) {
        match self {
            Posting::One(first) => *self = Posting::Many(vec![*first, node]),
            Posting::Many(nodes) => {
                if nodes.len() == POSTING_CAPACITY {
                    nodes.remove(0);
                }
                nodes.push(node);
            }
        }
    }

    /// Removes a node; whether the posting is empty afterwards.
    fn remove(&mut self, node: Fingerprint) -> bool {
        match self {
            Posting::One(only) => *only == node,
            Posting::Many(nodes) => {
                nodes.retain(|&posted| posted != node);
                match nodes[..] {
                    [] => true,
                    [last] => {
                        *self = Posting::One(last);
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Posting::One(_) => 0,
            Posting::Many(nodes) => nodes.capacity() * std::mem::size_of::<Fingerprint>(),
        }
    }
}

impl SketchStore {
    /// Nodes with a sketch.
    pub fn len(&self) -> usize {
        self.sketches.len()
    }

    /// Whether no node has a sketch.
    pub fn is_empty(&self) -> bool {
        self.sketches.is_empty()
    }

    /// The sketch of a node.
    pub fn get(&self, node: Fingerprint) -> Option<&Sketch> {
        self.sketches.get(&node)
    }

    /// Records a new node's sketch and posts it under its keys (replacing any earlier sketch of
    /// the same node).
    pub fn insert(&mut self, node: Fingerprint, sketch: Sketch) {
        self.remove(node);
        for &key in sketch.keys() {
            self.postings
                .entry(key)
                .and_modify(|posting| posting.push(node))
                .or_insert(Posting::One(node));
        }
        self.sketches.insert(node, sketch);
    }

    /// Forgets a node (when it expires).
    pub fn remove(&mut self, node: Fingerprint) {
        let Some(sketch) = self.sketches.remove(&node) else {
            return;
        };
        for key in sketch.keys() {
            if let Some(posting) = self.postings.get_mut(key)
                && posting.remove(node)
            {
                self.postings.remove(key);
            }
        }
    }

    /// Calls `visit` with every node posted under one of `sketch`'s keys (a node that shares
    /// several keys is visited once for each).
    pub fn for_each_candidate(&self, sketch: &Sketch, mut visit: impl FnMut(Fingerprint)) {
        for key in sketch.keys() {
            if let Some(posting) = self.postings.get(key) {
                posting.as_slice().iter().copied().for_each(&mut visit);
            }
        }
    }

    /// Calls `visit` with every other node that shares a posting list with `node` (the nodes a
    /// lookup by `node`'s keys finds, as long as `node` itself is still posted there).
    pub fn for_each_co_posted(&self, node: Fingerprint, mut visit: impl FnMut(Fingerprint)) {
        let Some(sketch) = self.sketches.get(&node) else {
            return;
        };
        for key in sketch.keys() {
            let Some(posting) = self.postings.get(key).map(Posting::as_slice) else {
                continue;
            };
            if posting.contains(&node) {
                posting
                    .iter()
                    .copied()
                    .filter(|&other| other != node)
                    .for_each(&mut visit);
            }
        }
    }

    /// Checks the store's invariants; the first violation found is the error.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (key, posting) in &self.postings {
            let posting = posting.as_slice();
            if posting.len() > POSTING_CAPACITY || posting.is_empty() {
                return Err(format!("posting {key:#x} holds {} nodes", posting.len()));
            }
            for (i, node) in posting.iter().enumerate() {
                if posting[..i].contains(node) {
                    return Err(format!("{node} is posted twice under {key:#x}"));
                }
                if !self
                    .sketches
                    .get(node)
                    .is_some_and(|sketch| sketch.keys().contains(key))
                {
                    return Err(format!("{node} is posted under {key:#x}, not its key"));
                }
            }
        }
        Ok(())
    }

    /// Heap bytes of the sketches and postings (capacity, with an estimate of the hash maps'
    /// own slots).
    pub fn heap_bytes(&self) -> usize {
        const SLOT: usize = 8; // a hash map's control byte and padding, per slot, roughly
        let sketches = self.sketches.capacity()
            * (std::mem::size_of::<(Fingerprint, Sketch)>() + SLOT)
            + self
                .sketches
                .values()
                .map(Sketch::heap_bytes)
                .sum::<usize>();
        let postings = self.postings.capacity() * (std::mem::size_of::<(u32, Posting)>() + SLOT)
            + self
                .postings
                .values()
                .map(Posting::heap_bytes)
                .sum::<usize>();
        sketches + postings
    }
}
