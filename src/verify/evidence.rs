//! Which verified candidates are evidence that a text belongs to their story: the boilerplate
//! rule of SPEC §1 ("no bridges"), read from the key postings, which already remember which
//! texts of the window share each key.
//!
//! A portal's disclaimer, a site's footer or a block of links sits in many unrelated articles.
//! A document that is only that text (a page whose body the scraper missed) is a part of each
//! of them, so each verifies against it, and without a rule every article that carries the
//! footer would join one story through it. Two facts of the stream tell such text apart from a
//! story's own lead or excerpt, and neither needs a list or any state beyond the postings:
//!
//! - **A part that texts which differ share is no evidence.** A candidate that the new text
//!   contains ([`Verdict::Contains`]) and that is not near its fingerprint has *rivals* when
//!   the postings of the keys it was found under hold other texts that contain it too and
//!   that the new text does not match: the other articles that carry the footer. With a rival
//!   in another story, or [`RIVALS`] of them in its own (the articles that joined the page
//!   before it was known), the edge is dropped. A story's own lead has no rivals: the texts
//!   that contain it are its copies, and they match.
//! - **A part of several stories is boilerplate.** A new text that verifies as a part
//!   ([`Verdict::Contained`]) of nodes of [`BOILERPLATE_STORIES`] different trees or more
//!   belongs to none of them: it joins only a copy of itself, or starts a story, and its
//!   decision says why ([`Reason::Boilerplate`](super::Reason::Boilerplate)).
//!
//! One more rule keeps a text that contains two stories from joining them to each other: a
//! page carrying two reports, or a roundup, joins the story of one of them as a leaf that
//! contains its root. A text that is only a part of such a leaf joins that story only if it
//! shares [`SHARED_WITH_THE_ROOT`] of itself with the root (the forest's `place` asks the
//! store for the root's sketch; the postings cannot tell, since the root need not share a key
//! with the text).

use crate::Fingerprint;

/// What [`Verifier::verdict`](super::Verifier::verdict) finds of a text against another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not near-duplicates.
    Apart,
    /// Near-duplicates, the first text a part of the second: its sample less than
    /// [`PART_OF_WHOLE`](super::PART_OF_WHOLE) of the other's (an excerpt, a footer, a lead of the other).
    Contained,
    /// Near-duplicates, the second text a part of the first.
    Contains,
    /// Near-duplicates of about the same size.
    Copy,
}

/// How many different stories must contain a text for it to be boilerplate: a lead quoted by
/// two reports of one event is still a story's; text in three unrelated ones is a footer, a
/// disclaimer, a block of links.
pub const BOILERPLATE_STORIES: usize = 3;

/// The candidates one text's lookups found: the nodes near its fingerprint, and the nodes
/// posted under each of its sketch's keys, as the store read them.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::verify::{Candidates, Compared, Verdict};
///
/// let mut candidates = Candidates::default();
/// // Key 1 holds a footer-only page (2) and an article of another story that carries the
/// // footer too (3); key 2 holds a lead of the new text (4); key 3 holds the lead and an
/// // unrelated article (5).
/// candidates.push_key([Fingerprint(2), Fingerprint(3)]);
/// candidates.push_key([Fingerprint(4)]);
/// candidates.push_key([Fingerprint(4), Fingerprint(5)]);
/// assert_eq!(candidates.nodes(), [2, 3, 4, 5].map(Fingerprint));
/// let compared = [
///     Compared { node: Fingerprint(2), verdict: Verdict::Contains },
///     Compared { node: Fingerprint(3), verdict: Verdict::Apart },
///     Compared { node: Fingerprint(4), verdict: Verdict::Contains },
///     Compared { node: Fingerprint(5), verdict: Verdict::Apart },
/// ];
/// // Each node is a tree of its own; only article 3 contains another candidate (the page).
/// let part_of = |part: Fingerprint, whole: Fingerprint| (part.0, whole.0) == (2, 3);
/// // The page has a rival in another story: it is no evidence. The lead has none.
/// let evidence = candidates.evidenced(&compared, Some, part_of);
/// assert_eq!(evidence, [Compared { node: Fingerprint(4), verdict: Verdict::Contains }]);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Candidates {
    near: Vec<Fingerprint>,
    posted: Vec<Fingerprint>,
    /// Where each key's list ends in `posted`.
    ends: Vec<usize>,
}

impl Candidates {
    /// Adds a node found near the fingerprint (within `k`): an edge to it needs no key.
    pub fn push_near(&mut self, node: Fingerprint) {
        self.near.push(node);
    }

    /// Adds the nodes posted under the next key.
    pub fn push_key(&mut self, nodes: impl IntoIterator<Item = Fingerprint>) {
        self.posted.extend(nodes);
        self.end_key();
    }

    /// Adds a node posted under the key being added (without a list to hand).
    pub(crate) fn push_posted(&mut self, node: Fingerprint) {
        self.posted.push(node);
    }

    /// Ends the key being added by [`push_posted`](Self::push_posted).
    pub(crate) fn end_key(&mut self) {
        self.ends.push(self.posted.len());
    }

    /// Every candidate once, in ascending order.
    pub fn nodes(&self) -> Vec<Fingerprint> {
        let mut nodes: Vec<Fingerprint> = self.near.iter().chain(&self.posted).copied().collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Each key's posted nodes.
    fn keys(&self) -> impl Iterator<Item = &[Fingerprint]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.posted[start..end])
    }

    /// The verified candidates that are evidence, in the order of `compared`: each
    /// candidate compared with the new text, in ascending order of nodes, as
    /// [`nodes`](Self::nodes) gives them (a candidate not compared, such as a node gone or not
    /// yet written, is neither evidence nor a rejection).
    ///
    /// Every verified candidate counts, except one that the new text contains
    /// ([`Verdict::Contains`]), that is not near, and that has *rivals*: texts the new one does
    /// not verify against, posted beside it under a key it was found under, that contain it
    /// too (`part_of(candidate, rival)`). Such a candidate is text that texts which differ from
    /// each other share. It is no evidence when one rival is of another tree (`tree` tells a
    /// node's root; `None` for one not settled, which counts as another), or when it has
    /// [`RIVALS`] or more. `tree` and `part_of` are asked only about such candidates.
    pub fn evidenced(
        &self,
        compared: &[Compared],
        tree: impl Fn(Fingerprint) -> Option<Fingerprint>,
        part_of: impl Fn(Fingerprint, Fingerprint) -> bool,
    ) -> Vec<Compared> {
        debug_assert!(compared.is_sorted_by_key(|candidate| candidate.node));
        let verdict = |node: &Fingerprint| {
            compared
                .binary_search_by_key(node, |candidate| candidate.node)
                .ok()
                .map(|at| compared[at].verdict)
        };
        let evidence = |candidate: Fingerprint| {
            let mut rivals: Vec<Fingerprint> = self
                .keys()
                .filter(|nodes| nodes.contains(&candidate))
                .flatten()
                .copied()
                .filter(|node| verdict(node) == Some(Verdict::Apart))
                .collect();
            rivals.sort_unstable();
            rivals.dedup();
            rivals.retain(|&rival| part_of(candidate, rival));
            if rivals.is_empty() {
                return true;
            }
            // Trees are asked last: a store learns one only once the node has settled.
            if rivals.len() >= RIVALS {
                return false;
            }
            let own = tree(candidate);
            rivals
                .into_iter()
                .all(|rival| own.is_some() && tree(rival) == own)
        };
        compared
            .iter()
            .filter(|candidate| match candidate.verdict {
                Verdict::Apart => false,
                Verdict::Copy | Verdict::Contained => true,
                Verdict::Contains => {
                    self.near.contains(&candidate.node) || evidence(candidate.node)
                }
            })
            .copied()
            .collect()
    }
}

/// A candidate compared with the new text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compared {
    /// The candidate.
    pub node: Fingerprint,
    /// What its text is to the new one.
    pub verdict: Verdict,
}

/// How many rivals (texts that contain a candidate too, and that the new text does not match)
/// make a candidate no evidence even when they sit in its own tree: the articles that joined a
/// footer-only page before anything showed the footer shared gather at most this many. (Two
/// would also cut 15 of neardup-dev's true pairs: pages that carry a paragraph of another
/// story beside most of their own, which rival each other over their story's text.)
pub const RIVALS: usize = 3;

/// How much of itself a text must share with a story's root to join the story through a
/// member it is only a part of ([`Verdict::Contained`] by a member that is not the root): the
/// rule that keeps a page carrying two reports, or a roundup, from joining its reports'
/// stories to each other (SPEC §1, "no bridges"; the forest's `place`). Containment of the
/// smaller text ([`Similarity::containment`](super::Similarity)): excerpts of one article
/// that run past a short first report share their lead or their end with it (on
/// neardup-dev, 0.4 of the smaller text and more), two reports on one page share a phrase at
/// most.
pub const SHARED_WITH_THE_ROOT: f64 = 0.3;
