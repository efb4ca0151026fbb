//! Which candidates are evidence that a text belongs to their story: the boilerplate rule of
//! SPEC §1 ("no bridges"), read from the key postings, which already remember which texts of
//! the window share each key.
//!
//! A portal's disclaimer, a site's footer or a block of links sits in many unrelated articles.
//! A document that is only that text (a page whose body the scraper missed) is a part of each
//! of them, so each verifies against it, and without a rule every article that carries the
//! footer would join one story through it. Three facts of the stream tell such text apart
//! from a story's own text, and none needs a list or any state beyond the postings:
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
//!   belongs to none of them: it joins only a copy of itself (as it is, or once the text other
//!   stories carry is out), or starts a story, and its decision says why
//!   ([`Reason::Boilerplate`](super::Reason::Boilerplate)).
//! - **Text that other stories carry is left out of the comparison.** Two short posts under
//!   one disclaimer are mostly the disclaimer, and verify as copies with no page between
//!   them. When the part two texts share is carried by texts of two other trees that have
//!   parts of their own (texts of other stories that carry it), the shingles those carry are
//!   left out of both and the pair must still verify
//!   ([`without_carried_text`]); a text left with almost nothing of its own is
//!   boilerplate. The other way round, a text that is a smaller candidate plus text that
//!   other stories carry (a portal's repost of a post, under the portal's disclaimer) is
//!   that candidate's copy, though the two are too unequal to verify as they are.
//!
//! One more rule keeps a text that contains two stories from joining them to each other: a
//! page carrying two reports, or a roundup, joins the story of one of them as a leaf that
//! contains its root. A text that is only a part of such a leaf joins that story only if it
//! shares [`SHARED_WITH_THE_ROOT`] of itself with the root (the forest's `place` asks the
//! store for the root's sketch; the postings cannot tell, since the root need not share a key
//! with the text).

use super::sketch;
use super::{SketchView, Verifier};
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

    /// The candidates that are evidence, and whether the new text is boilerplate: the rivals'
    /// rule ([`evidenced`](Self::evidenced)), then the text other stories carry left out
    /// ([`without_carried_text`], which also takes as copies the candidates the new text is a
    /// copy of once that text is out), each by `verifier`'s rule. What both stores ask of the
    /// candidates they read; the arguments are those of the two steps (`sketch_of`: a
    /// candidate's sketch, `None` for one not read; `tree`: a node's root, `None` for one not
    /// settled).
    ///
    /// ```
    /// use tantivy_dedup::Fingerprint;
    /// use tantivy_dedup::verify::{Candidates, Compared, Sketch, Verifier};
    ///
    /// let story = Sketch::of(&["国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二。"], 200);
    /// let verifier = Verifier::default();
    /// let mut candidates = Candidates::default();
    /// candidates.push_key([Fingerprint(1)]);
    /// let compared = [Compared { node: Fingerprint(1), verdict: verifier.verdict(&story, &story) }];
    /// let evidence = candidates.evidence(&compared, story.view(), |_| Some(story.view()), Some, &verifier);
    /// assert_eq!(evidence.edges, compared);
    /// assert!(!evidence.boilerplate);
    /// ```
    pub fn evidence<'s>(
        &self,
        compared: &[Compared],
        new: SketchView<'_>,
        sketch_of: impl Fn(Fingerprint) -> Option<SketchView<'s>>,
        tree: impl Fn(Fingerprint) -> Option<Fingerprint>,
        verifier: &Verifier,
    ) -> Evidence {
        let part_of = |part, whole| match (sketch_of(part), sketch_of(whole)) {
            (Some(part), Some(whole)) => verifier.is_part_of(part, whole),
            _ => false,
        };
        let evidenced = self.evidenced(compared, &tree, part_of);
        without_carried_text(evidenced, compared, new, &sketch_of, &tree, verifier)
    }
}

/// The evidence once the text that other stories carry is left out of each comparison (SPEC
/// §1, "no bridges": text that many different stories share is no evidence, one way or the
/// other).
///
/// Two posts under one portal's disclaimer are mostly the disclaimer: they verify as
/// copies. For each candidate of `evidence` whose comparable shingles are not the new text's
/// own, the part the two share is asked whether other stories carry it: texts of the
/// candidates (`compared`) that carry [`CARRIED`] of it and have a part of their own the new
/// text lacks ([`OWN_PART`] of their sample, and [`OWN_HASHES`]), in
/// [`BOILERPLATE_STORIES`] - 1 trees other than the candidate's. If so, the hashes of that
/// part that texts of two such trees carry are *carried*, and the candidate stays evidence
/// only if the two texts still verify without them (`matches`: the verifier's rule, such as
/// [`Verifier::matches`](super::Verifier::matches)): two posts under a disclaimer are then
/// two posts; a repost of one under the disclaimer is still its copy. A new text left with
/// less than [`OWN_PART`] of itself (or [`OWN_HASHES`]) once a dropped candidate's carried
/// hashes are out is [`Evidence::boilerplate`].
///
/// A story's own text is carried only when texts of two other trees quote it with parts of
/// their own (a line many people post with their own comments, or reposts with comments too
/// long to join it): a repost that adds almost nothing to such a text is then boilerplate
/// too, and one that adds a comment of its own is compared on the comment. Texts the new one
/// contains as they are (a disclaimer page) are also the rivals' ([`Candidates::evidenced`]).
///
/// The other way round, a candidate of `compared` that does not verify, that has fewer
/// comparable hashes than the new text and lies within it ([`Verifier::lies_within`]), is
/// an edge, a [`Verdict::Copy`], when the hashes of the new text it lacks are carried the
/// same way (texts of [`BOILERPLATE_STORIES`] - 1 other trees carry [`CARRIED`] of them and
/// have parts of their own) and the new text is its copy without the hashes they carry: a
/// portal's repost of a short post under the portal's disclaimer, which outweighs the post.
/// (Not the reverse order: a post without the disclaimer reaches none of the texts that
/// show it carried.)
///
/// `sketch_of` gives a candidate's sketch (`None`: not read, which carries nothing and is
/// kept); `tree` a node's root (`None` for one not settled, which counts as a tree of its
/// own), asked only of a candidate's carriers, and of the candidate when it has two;
/// `verifier` is the rule the pairs are compared by.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::verify::{Compared, Sketch, Verdict, Verifier, without_carried_text};
///
/// let disclaimer = "特别声明：以上文章内容仅代表作者本人观点，不代表本网观点或立场。\
///                   如有关于作品内容、版权或其它问题请于作品发表后的30日内与本网联系。";
/// let sketch = |post: &str| {
///     let text = format!("{post}\n{disclaimer}");
///     Sketch::of(&[text.as_str()], 200)
/// };
/// // Posts of four stories under the disclaimer: nodes 1 to 4, trees of their own.
/// let stored = [
///     sketch("植物园的郁金香开了，人好多。"),
///     sketch("地铁二号线又停运了，要迟到。"),
///     sketch("新跑鞋很舒服，今晚跑了十公里。"),
///     sketch("明天考科目二，好紧张啊。"),
/// ];
/// let sketch_of = |node: Fingerprint| Some(stored[node.0 as usize - 1].view());
/// let verifier = Verifier::default();
/// let evidence_for = |new: &Sketch| {
///     let compared: Vec<Compared> = (1..=4)
///         .map(|node| Compared {
///             node: Fingerprint(node),
///             verdict: verifier.verdict(new, &stored[node as usize - 1]),
///         })
///         .collect();
///     // Through the disclaimer, the new post verifies against each of them.
///     assert!(compared.iter().all(|candidate| candidate.verdict != Verdict::Apart));
///     without_carried_text(compared.clone(), &compared, new.view(), sketch_of, Some, &verifier)
/// };
/// // A fourth post is a story of its own: without the disclaimer it matches none.
/// let other = evidence_for(&sketch("楼下新开的牛肉面真好吃。"));
/// assert!(other.edges.is_empty() && !other.boilerplate);
/// // A repost of the first one still joins it.
/// let repost = evidence_for(&sketch("转发微博：植物园的郁金香开了，人好多。"));
/// assert_eq!(repost.edges.iter().map(|edge| edge.node.0).collect::<Vec<_>>(), [1]);
/// // A reply of two characters is almost only the disclaimer: boilerplate.
/// assert!(evidence_for(&sketch("顶！")).boilerplate);
/// // The second post without the disclaimer, then its repost under it: too unequal to
/// // verify, a copy once the disclaimer is out.
/// let bare = Sketch::of(&["地铁二号线又停运了，要迟到。"], 200);
/// let stored_too = |node: Fingerprint| match node.0 {
///     5 => Some(bare.view()),
///     node => sketch_of(Fingerprint(node)),
/// };
/// let repost = sketch("地铁二号线又停运了，要迟到。");
/// let compared: Vec<Compared> = (1..=5)
///     .map(|node| Compared {
///         node: Fingerprint(node),
///         verdict: verifier.verdict(&repost, stored_too(Fingerprint(node)).unwrap()),
///     })
///     .collect();
/// assert_eq!(compared[4].verdict, Verdict::Apart);
/// let evidence = without_carried_text(Vec::new(), &compared, repost.view(), stored_too, Some, &verifier);
/// assert_eq!(evidence.edges, [Compared { node: Fingerprint(5), verdict: Verdict::Copy }]);
/// ```
pub fn without_carried_text<'s>(
    evidence: Vec<Compared>,
    compared: &[Compared],
    new: SketchView<'_>,
    sketch_of: impl Fn(Fingerprint) -> Option<SketchView<'s>>,
    tree: impl Fn(Fingerprint) -> Option<Fingerprint>,
    verifier: &Verifier,
) -> Evidence {
    // Whether each compared text has a part of its own beside the new one (asked once, and
    // only of the texts that carry a part asked about).
    let mut owns_a_part: Vec<Option<bool>> = vec![None; compared.len()];
    // The hashes of `part` (hashes of the new text, sampled at `shift`) that texts of
    // BOILERPLATE_STORIES - 1 trees other than `candidate`'s carry, each with a part of its
    // own (`carried_by_other_trees`); `None` when fewer trees carry it.
    let mut carried = |candidate: Fingerprint, shift: u8, part: &[u32]| {
        let whole_part = SketchView::from_parts(shift, part);
        let mut carriers: Vec<(Fingerprint, Vec<bool>)> = Vec::new();
        for (at, other) in compared.iter().enumerate() {
            if other.node == candidate {
                continue;
            }
            let Some(carrier) = sketch_of(other.node) else {
                continue;
            };
            let (sampled, within) = whole_part.comparable(carrier);
            let needed = (CARRIED * sampled.len() as f64).ceil() as usize;
            if sampled.is_empty()
                || sketch::count_shared_at_least(sampled, within, needed).is_none()
            {
                continue;
            }
            let owns = *owns_a_part[at].get_or_insert_with(|| {
                let (ours, theirs) = new.comparable(carrier);
                has_own_part(
                    theirs.len() - sketch::count_shared(ours, theirs),
                    theirs.len(),
                )
            });
            if !owns {
                continue;
            }
            // A sparser sample than the part's sees only its lower hashes: it is taken to
            // carry the rest as it carries those.
            let marks = part
                .iter()
                .enumerate()
                .map(|(index, hash)| index >= sampled.len() || within.binary_search(hash).is_ok());
            carriers.push((other.node, marks.collect()));
        }
        carried_by_other_trees(candidate, carriers, part, &tree)
    };
    let mut edges = Vec::with_capacity(evidence.len());
    let mut boilerplate = false;
    for candidate in evidence {
        let Some(stored) = sketch_of(candidate.node) else {
            edges.push(candidate);
            continue;
        };
        let (ours, theirs) = new.comparable(stored);
        let shared = sketch::shared_elements(ours, theirs);
        if shared.len() == ours.len() && shared.len() == theirs.len() {
            edges.push(candidate); // the same shingles: a copy, whatever others carry
            continue;
        }
        let shift = new.sample_shift().max(stored.sample_shift());
        let Some(carried_hashes) = carried(candidate.node, shift, &shared) else {
            edges.push(candidate);
            continue;
        };
        if verifier.matches(
            SketchView::from_parts(new.parts().0, &without(new, &carried_hashes)),
            SketchView::from_parts(stored.parts().0, &without(stored, &carried_hashes)),
        ) {
            edges.push(candidate);
        } else if !has_own_part(ours.len() - carried_hashes.len(), ours.len()) {
            boilerplate = true;
        }
    }
    // The other way round: a text that is a candidate plus text other stories carry (a repost
    // under a portal's disclaimer, of a post without it) does not verify as it is, the
    // disclaimer outweighing a short post, and is its copy once that text is out.
    for candidate in compared.iter().filter(|c| c.verdict == Verdict::Apart) {
        let Some(stored) = sketch_of(candidate.node) else {
            continue;
        };
        let (ours, theirs) = new.comparable(stored);
        if theirs.is_empty() || theirs.len() >= ours.len() || !verifier.lies_within(stored, new) {
            continue;
        }
        let shift = new.sample_shift().max(stored.sample_shift());
        let own = without(SketchView::from_parts(shift, ours), theirs);
        let Some(carried_hashes) = carried(candidate.node, shift, &own) else {
            continue;
        };
        let new_left = without(new, &carried_hashes);
        if verifier.verdict(SketchView::from_parts(new.parts().0, &new_left), stored)
            == Verdict::Copy
        {
            edges.push(Compared {
                node: candidate.node,
                verdict: Verdict::Copy,
            });
        }
    }
    Evidence { edges, boilerplate }
}

/// A sketch's hashes less the shingles of `left_out` (sorted): its titles and names stay.
fn without(view: SketchView<'_>, left_out: &[u32]) -> Vec<u32> {
    let shingles = view.shingles();
    let rest = &view.hashes()[shingles.len()..];
    shingles
        .iter()
        .filter(|hash| left_out.binary_search(hash).is_err())
        .chain(rest)
        .copied()
        .collect()
}

/// Whether a text has enough of its own beside another: `own` of its `len` hashes (the
/// comparable ones) that the other lacks, [`OWN_HASHES`] and [`OWN_PART`] of them.
fn has_own_part(own: usize, len: usize) -> bool {
    own >= OWN_HASHES && own as f64 >= OWN_PART * len as f64
}

/// The hashes of `shared` (the part a candidate shares with the new text) that carriers of
/// [`BOILERPLATE_STORIES`] - 1 trees other than the candidate's carry (`marks`: which hashes
/// each carrier carries), when carriers of that many other trees carry the part; `None`
/// otherwise. Trees are asked only once there are enough carriers (a shared store waits for
/// the trees of nodes still pending), and an unsettled carrier (`tree` gives `None`) is a tree
/// of its own.
fn carried_by_other_trees(
    candidate: Fingerprint,
    carriers: Vec<(Fingerprint, Vec<bool>)>,
    shared: &[u32],
    tree: impl Fn(Fingerprint) -> Option<Fingerprint>,
) -> Option<Vec<u32>> {
    if carriers.len() + 1 < BOILERPLATE_STORIES {
        return None;
    }
    let own_tree = tree(candidate);
    let mut by_tree: Vec<(Option<Fingerprint>, Vec<bool>)> = carriers
        .into_iter()
        .map(|(node, marks)| (tree(node), marks))
        .filter(|(root, _)| root.is_none() || *root != own_tree)
        .collect();
    by_tree.sort_by_key(|(root, _)| *root);
    // One row of marks a tree: those of its carriers together.
    let mut trees: Vec<Vec<bool>> = Vec::new();
    let mut last_root = None;
    for (root, marks) in by_tree {
        match trees.last_mut() {
            Some(row) if root.is_some() && root == last_root => {
                row.iter_mut()
                    .zip(marks)
                    .for_each(|(mark, carried)| *mark |= carried);
            }
            _ => trees.push(marks),
        }
        last_root = root;
    }
    if trees.len() + 1 < BOILERPLATE_STORIES {
        return None;
    }
    let carried = shared.iter().enumerate().filter(|&(index, _)| {
        trees.iter().filter(|row| row[index]).count() + 1 >= BOILERPLATE_STORIES
    });
    Some(carried.map(|(_, &hash)| hash).collect())
}

/// The candidates that are evidence ([`without_carried_text`]), and whether the
/// new text is boilerplate: almost only text that other stories carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The candidates that are evidence: those given as evidence that stay so, in the order
    /// they were given, then the candidates the new text is a copy of once the text other
    /// stories carry is out, in the order of `compared`.
    pub edges: Vec<Compared>,
    /// Whether a candidate was dropped because the text it shares with the new one is carried
    /// by other stories, and the new text keeps less than [`OWN_PART`] (or [`OWN_HASHES`]) of
    /// itself without that text: it starts a story, joins only a copy of itself (as it is, or
    /// once the text other stories carry is out), and its decision carries
    /// [`Reason::Boilerplate`](super::Reason::Boilerplate).
    pub boilerplate: bool,
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

/// The share of each of two texts' samples that must be their own (not in the other) before
/// the part they share is asked whether other stories carry it
/// ([`without_carried_text`]): a post has a fifth of its own beside a disclaimer;
/// a copy with a typo has a few hashes.
pub const OWN_PART: f64 = 0.1;

/// The fewest hashes of its own each text must have (see [`OWN_PART`]): one typo changes
/// [`SHINGLE_CHARACTERS`](super::SHINGLE_CHARACTERS) shingles.
pub const OWN_HASHES: usize = 5;

/// The share of the part two texts share that a text must carry to carry it too
/// ([`without_carried_text`]).
pub const CARRIED: f64 = 0.8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{Sketch, Verifier};

    const DISCLAIMER: &str = "特别声明：以上文章内容仅代表作者本人观点，不代表本网观点或立场。\
                              如有关于作品内容、版权或其它问题请于作品发表后的30日内与本网联系。";

    /// A text of `characters` characters drawn from a fixed vocabulary by `seed`.
    fn invented(seed: u64, characters: usize) -> String {
        let vocabulary: Vec<char> =
            "春夏秋冬山水花鸟风云雨雪城乡街巷车站学校医院公园超市早晚新旧快慢\
                                     东西南北江河湖海田林草木金银铜铁米面油盐茶酒瓜果桥路"
                .chars()
                .collect();
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..characters)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                vocabulary[(state % vocabulary.len() as u64) as usize]
            })
            .collect()
    }

    /// Two posts under the disclaimer, and two long articles under it (sampled sketches, which
    /// see only the disclaimer's lower hashes): the articles carry the whole disclaimer, so
    /// the posts are compared without it and are apart.
    #[test]
    fn sparser_carriers_carry_the_whole_shared_part() {
        let under = |text: String| Sketch::of(&[format!("{text}\n{DISCLAIMER}").as_str()], 200);
        let new = under(format!("{}。", invented(1, 12)));
        let post = under(format!("{}。", invented(2, 12)));
        let articles = [under(invented(3, 900)), under(invented(4, 900))];
        assert!(articles.iter().all(|article| article.view().parts().0 > 0));
        let verifier = Verifier::default();
        assert!(
            verifier.matches(&new, &post),
            "the posts verify through the disclaimer"
        );
        let sketches = [&post, &articles[0], &articles[1]];
        let compared: Vec<Compared> = (0..3)
            .map(|node| Compared {
                node: Fingerprint(node),
                verdict: verifier.verdict(&new, sketches[node as usize]),
            })
            .collect();
        let evidence = without_carried_text(
            vec![compared[0]],
            &compared,
            new.view(),
            |node| Some(sketches[node.0 as usize].view()),
            Some,
            &verifier,
        );
        assert!(evidence.edges.is_empty(), "{evidence:?}");
    }

    /// A post, then a text that is the post and a long block other stories carry (sampled
    /// sketches, which keep only the block's lower hashes): too unequal to verify, the text
    /// is the post's copy once the block is out; another post under the block is not.
    #[test]
    fn a_sampled_text_is_a_copy_of_a_post_once_the_carried_block_is_out() {
        let block = invented(10, 500);
        let post = Sketch::of(&[invented(1, 60).as_str()], 200);
        let under = |text: String| Sketch::of(&[format!("{text}\n{block}").as_str()], 200);
        let carriers = [under(invented(3, 1500)), under(invented(4, 1500))];
        let verifier = Verifier::default();
        let evidence_for = |new: &Sketch| {
            assert!(new.view().parts().0 > 0, "sampled");
            let sketches = [&post, &carriers[0], &carriers[1]];
            let compared: Vec<Compared> = (0..3)
                .map(|node| Compared {
                    node: Fingerprint(node),
                    verdict: verifier.verdict(new, sketches[node as usize]),
                })
                .collect();
            assert!(compared.iter().all(|c| c.verdict == Verdict::Apart));
            without_carried_text(
                Vec::new(),
                &compared,
                new.view(),
                |node| Some(sketches[node.0 as usize].view()),
                Some,
                &verifier,
            )
        };
        let repost = evidence_for(&under(invented(1, 60)));
        assert_eq!(
            repost.edges,
            [Compared {
                node: Fingerprint(0),
                verdict: Verdict::Copy
            }]
        );
        assert!(evidence_for(&under(invented(2, 60))).edges.is_empty());
    }
}
