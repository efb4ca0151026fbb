//! Verification of near-duplicate candidates (default mode): shingle sketches, the match rule,
//! and the extra candidate keys that reach pairs the simhash misses.
//!
//! Simhash alone misses what reposts do to news in the wild: a truncated copy, a deleted or
//! inserted paragraph and a short post with a prefix move the fingerprint well past `k`; and
//! on long texts plain term weights drift toward the most frequent words, so unrelated long
//! articles can land within `k`. Default mode therefore lets the simhash only *propose*
//! candidates, adds candidates that share one of a sketch's smallest shingle hashes, and
//! accepts an edge only when the texts' shingles verify ([`Verifier`]).

mod arena;
mod candidates;
mod evidence;
mod postings;
mod sketch;

pub use candidates::SketchStore;
pub use evidence::{
    BOILERPLATE_STORIES, CARRIED, Candidates, Compared, Evidence, OWN_HASHES, OWN_PART, RIVALS,
    SHARED_WITH_THE_ROOT, Verdict, without_carried_text,
};
pub use postings::POSTING_CAPACITY;
pub use sketch::{
    KEYS, NAME_COUNT_BITS, NAMED, SHINGLE_CHARACTERS, SHINGLE_WORDS, Similarity, Sketch,
    SketchView, TITLE_FLOOR, TITLES_END, degenerate_sketch, digest_of,
};

/// Why a document starts a story of its own whatever else the stream holds, and nothing joins
/// through it.
///
/// ```
/// use tantivy_dedup::{Article, DedupConfig, Deduplicator, Reason};
///
/// let mut dedup = Deduplicator::new(DedupConfig::default()).unwrap();
/// let post = |id: &str, content: &str| Article { id: id.into(), content: content.into(), ..Default::default() };
/// let first = dedup.add_article(&post("a", "[哈哈][哈哈][哈哈][哈哈][哈哈][哈哈]"), 0).unwrap();
/// let second = dedup.add_article(&post("b", "哈哈哈哈哈哈哈哈"), 60).unwrap();
/// assert_eq!(first.reason, Some(Reason::Degenerate));
/// assert!(!second.duplicate);
/// assert_ne!(second.root, first.root);
/// assert_eq!(serde_json::to_value(&second).unwrap()["reason"], "degenerate");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Its text has too little of its own to be compared: fewer distinct characters or words
    /// than make one shingle, once emoticon codes, punctuation and repeats are left out
    /// ([`degenerate_sketch`]). Only the same few characters or emoticons join it.
    Degenerate,
    /// Its text is contained in [`BOILERPLATE_STORIES`] different stories or more: a
    /// disclaimer, a site's footer, a block of links (the module `evidence` of `verify`).
    Boilerplate,
}

/// How much smaller than another a text must be to be a part of it ([`Verdict::Contained`])
/// rather than a copy: a footer or a lead is a part of an article that has a fifth of its own;
/// a copy with a typo, a paragraph more or a credit line is a copy.
pub const PART_OF_WHOLE: f64 = 0.7;

/// The share of the shorter text's shingles that must appear in the longer one, by default.
///
/// Copies keep nearly all of their source: on our own labeled streams typo'd, re-punctuated,
/// truncated and re-framed copies keep 0.9 or more, while templated bulletins with different
/// figures (the same sentences around other numbers and names) keep 0.6 to 0.75.
pub const DEFAULT_MIN_CONTAINMENT: f64 = 0.8;

/// The share of both texts' shingles that must be shared (Jaccard), by default: the shorter
/// text must make up at least a third of the longer.
///
/// Containment alone cannot tell a truncated copy from one story of a digest page that carries
/// several: both are wholly contained in the longer text. Letting every contained text join
/// makes the digest a hub, and since the forest sends a document that reaches several trees to
/// the one with most children, a hub pulls copies of its other stories into the wrong cluster.
/// On our own labeled set (digest pages of six to eight stories), a floor of 0.2 kept
/// precision at 0.75; a third raises it to 0.93, at the cost of weibo-style excerpts of two
/// sentences, which stay clusters of their own; neardup-dev's scores do not move.
pub const DEFAULT_MIN_JACCARD: f64 = 1.0 / 3.0;

/// Below this many shingles (a text of about this many Chinese characters or English words), a
/// text is a post, by default:
/// see [`DEFAULT_MIN_JACCARD_POST`].
pub const DEFAULT_POST_SHINGLES: usize = 45;

/// The Jaccard floor of a pair whose smaller text has fewer than [`DEFAULT_POST_SHINGLES`]
/// shingles, by default.
///
/// A post of one or two sentences that is wholly contained in a longer one is mostly a quote:
/// a reply that cites it, a repost with a comment longer than the original, a line of a poem.
/// On real Weibo reposts (web-dev, labeled by 5-gram Jaccard 0.8), letting such a post join on
/// containment alone made 129 of 157 false pairs; asking short texts for a Jaccard of 0.7
/// leaves 39, and costs news copies (neardup-dev) 14 of 22,140 true pairs, since a news
/// story's copies are longer than this.
pub const DEFAULT_MIN_JACCARD_POST: f64 = 0.65;

/// The share of the figure shingles (shingles that hold a digit) of the text with fewer that
/// the other text must share, by default, once both have [`MIN_FIGURE_SHINGLES`].
///
/// Bulletins issued from one template (the day's case counts, a weekly price report) share
/// every sentence but their figures, so their shingles pass [`DEFAULT_MIN_CONTAINMENT`]; their
/// figure shingles do not: on neardup-dev, consecutive days' bulletins share 0.45 to 0.6 of
/// them, while 99.8% of true pairs share more than 0.65 and 96% share all.
pub const DEFAULT_MIN_FIGURE_CONTAINMENT: f64 = 0.65;

/// How many figure shingles both sketches need before their figures are compared.
///
/// Each digit sits in up to four shingles, and so does a typo beside it: in a short text with
/// a date or two, one typo next to a figure takes half of its figure shingles. On neardup-dev a
/// floor of 6 cost typo'd short copies 24 true pairs; from 18 on, none, and the bulletins (25
/// to 68 figure shingles each) are still compared.
pub const MIN_FIGURE_SHINGLES: usize = 18;

/// Figure shingles of its own (shingles with a digit that the other text lacks) that tell a
/// whole text of a template from another filled in with other figures, by default.
///
/// A changed digit changes the four shingles over it; so does a typo between two digits of a
/// date (10月25日 against 10举25日), which neardup-dev's generated copies make often: at four,
/// short copies lost 0.8% of their true pairs. Two changed figures (a date and a count, as
/// consecutive days' bulletins have) change eight or more; from six on, copies lose 0.15%.
pub const FIGURE_CHANGE: usize = 6;

/// Pairs of title characters of their own (see [`Sketch`]) that each of two whole texts must
/// have to be two notices of one template that name different works, rather than copies.
///
/// A template's notices differ in the work they announce: the speech of one meeting published
/// as a booklet against another's (`《在科学家座谈会上的讲话》` and `《在基层代表座谈会上的讲话》`:
/// 4 and 5 pairs of their own), each day's commentary of one series (`…要突出重点——论…`
/// against `…要把牢价值取向——论…`), with the rest of the text the same. A copy changes a
/// title only by a typo (2 pairs on each side), and an excerpt or a repost adds or drops a
/// title (the other text has none of its own). On xwlb-news this splits 35 pairs, all two
/// reports (mostly the 单行本 and 评论员文章 notices above); neardup-dev and web-dev lose no
/// true pair.
pub const TITLE_CHANGE: usize = 4;

/// Occurrences of a name of its own (see [`Sketch`]) that each of two texts must have to be
/// two notices of one template about other people or places, rather than copies.
///
/// A template's notices differ in who they are about, and a notice says its subject's name in
/// every paragraph: 布赫 ten times against 钱其琛 twelve in two leaders' funerals, each visiting
/// president's name four times in the welcome ceremonies, 香港 against 澳门 three times in the
/// two regions' election meetings. A name of its own is one the text says this often and the
/// other text says at most a [`NAME_RATIO`]th as often (a typo in a copy changes one
/// occurrence, a cut or an edited paragraph a few). On xwlb-news this splits 14 pairs, all
/// two reports of one template (six of the 50 stories that ran over several days); on
/// neardup-dev, web-dev and the sets under a disclaimer or sites' chrome no decision moves.
pub const NAME_REPEATS: u32 = 3;

/// How many times as often a text must say a name as the other does for it to be a name of
/// its own ([`NAME_REPEATS`]).
pub const NAME_RATIO: u32 = 3;

/// The rule that turns a candidate pair into an edge of the forest.
///
/// ```
/// use tantivy_dedup::verify::{Sketch, Verifier};
///
/// let verifier = Verifier::default();
/// let story = "国家统计局今天发布数据。前三季度国内生产总值同比增长百分之五点二。\
///              就业形势总体稳定，居民消费价格温和上涨。经济运行持续恢复向好。";
/// let repost = format!("转发：{story}（来源：新华网 责任编辑：王明）");
/// let other = "气象台今天发布暴雨预警。预计未来三天南方地区将有强降雨过程。";
/// let sketch = |text: &str| Sketch::of(&[text], 200);
/// assert!(verifier.matches(&sketch(story), &sketch(&repost)));
/// assert!(!verifier.matches(&sketch(story), &sketch(other)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verifier {
    /// See [`DEFAULT_MIN_CONTAINMENT`].
    pub min_containment: f64,
    /// See [`DEFAULT_MIN_JACCARD`].
    pub min_jaccard: f64,
    /// See [`DEFAULT_POST_SHINGLES`].
    pub post_shingles: usize,
    /// See [`DEFAULT_MIN_JACCARD_POST`]; a pair whose smaller sample has fewer than
    /// `post_shingles` hashes needs this Jaccard (or `min_jaccard`, if that is higher).
    pub min_jaccard_post: f64,
    /// See [`DEFAULT_MIN_FIGURE_CONTAINMENT`].
    pub min_figure_containment: f64,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            min_containment: DEFAULT_MIN_CONTAINMENT,
            min_jaccard: DEFAULT_MIN_JACCARD,
            post_shingles: DEFAULT_POST_SHINGLES,
            min_jaccard_post: DEFAULT_MIN_JACCARD_POST,
            min_figure_containment: DEFAULT_MIN_FIGURE_CONTAINMENT,
        }
    }
}

impl Verifier {
    /// The Jaccard floor for a pair whose smaller sample has `fewer` hashes.
    pub fn min_jaccard_for(&self, fewer: usize) -> f64 {
        if fewer < self.post_shingles {
            self.min_jaccard.max(self.min_jaccard_post)
        } else {
            self.min_jaccard
        }
    }

    /// Whether the first text is a part of the second ([`Verdict::Contained`]): what the
    /// boilerplate rule asks of two candidates (the module `evidence`).
    pub fn is_part_of<'a, 'b>(
        &self,
        part: impl Into<SketchView<'a>>,
        whole: impl Into<SketchView<'b>>,
    ) -> bool {
        self.verdict(part, whole) == Verdict::Contained
    }

    /// Whether the first text lies within the second at the containment floor
    /// (`min_containment` of its comparable sample in the other's), whatever their sizes: what
    /// a text keeps of a candidate that it is a copy of once the text other stories carry is
    /// out, such as a post of the repost that adds a portal's disclaimer to it (the module
    /// `evidence`), though the two do not verify as they are.
    ///
    /// ```
    /// use tantivy_dedup::verify::{Sketch, Verifier};
    ///
    /// let post = Sketch::of(&["植物园的郁金香开了，人好多。"], 200);
    /// let repost = Sketch::of(&["植物园的郁金香开了，人好多。\n特别声明：以上文章内容仅代表作者本人观点，\
    ///                            不代表本网观点或立场。如有关于作品内容、版权或其它问题请与本网联系。"], 200);
    /// let verifier = Verifier::default();
    /// assert!(!verifier.matches(&post, &repost), "the disclaimer outweighs the post");
    /// assert!(verifier.lies_within(&post, &repost));
    /// assert!(!verifier.lies_within(&repost, &post));
    /// ```
    pub fn lies_within<'a, 'b>(
        &self,
        part: impl Into<SketchView<'a>>,
        whole: impl Into<SketchView<'b>>,
    ) -> bool {
        let (part, whole) = part.into().comparable(whole.into());
        // The fewest shared hashes that make the floor: most candidates fall short after a
        // fraction of the walk.
        let needed = (self.min_containment * part.len() as f64).ceil() as usize;
        !part.is_empty() && sketch::count_shared_at_least(part, whole, needed).is_some()
    }

    /// Whether two sketched texts are near-duplicates. Symmetric. Takes [`Sketch`]es or
    /// [`SketchView`]s.
    pub fn matches<'a, 'b>(
        &self,
        a: impl Into<SketchView<'a>>,
        b: impl Into<SketchView<'b>>,
    ) -> bool {
        self.verdict(a, b) != Verdict::Apart
    }

    /// Whether two sketched texts are near-duplicates ([`matches`](Self::matches)), and if so
    /// whether the first is the smaller: what the boilerplate rule asks of a text that several
    /// stories contain ([`Verdict`]).
    ///
    /// ```
    /// use tantivy_dedup::verify::{Sketch, Verdict, Verifier};
    ///
    /// let lead = "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，就业形势总体稳定，\
    ///             城镇调查失业率逐月回落，居民消费价格温和上涨，经济运行持续恢复向好。";
    /// let story = format!("{lead}下一步，各地区各部门要加大宏观政策实施力度，着力扩大国内需求，\
    ///                      推动经济实现质的有效提升和量的合理增长。");
    /// let sketch = |text: &str| Sketch::of(&[text], 200);
    /// assert_eq!(Verifier::default().verdict(&sketch(lead), &sketch(&story)), Verdict::Contained);
    /// assert_eq!(Verifier::default().verdict(&sketch(&story), &sketch(lead)), Verdict::Contains);
    /// ```
    pub fn verdict<'a, 'b>(
        &self,
        a: impl Into<SketchView<'a>>,
        b: impl Into<SketchView<'b>>,
    ) -> Verdict {
        let (a, b) = (a.into(), b.into());
        let whole = a.is_whole() && b.is_whole();
        let (views, (a, b)) = ((a, b), a.comparable(b));
        let (fewer, more) = (a.len().min(b.len()), a.len().max(b.len()));
        let min_jaccard = self.min_jaccard_for(fewer);
        // Shared hashes are at most the smaller sample, so the Jaccard index is at most
        // fewer / more: samples too unequal in size cannot verify, and most candidates that a
        // boilerplate key brings are rejected here without comparing a single hash. (The same
        // division as the final check, so that rounding cannot make the two disagree.)
        if fewer == 0 || (fewer as f64 / more as f64) < min_jaccard {
            return Verdict::Apart;
        }
        // The fewest shared hashes that can pass both thresholds: containment needs
        // `min_containment * fewer`; Jaccard `shared / (a + b - shared) >= j` needs
        // `shared >= j (a + b) / (1 + j)`. Rounded down a little, since a bound that came out a
        // hair above a whole number must not demand one more; the exact check follows.
        let total = (a.len() + b.len()) as f64;
        let bound =
            (self.min_containment * fewer as f64).max(min_jaccard * total / (1.0 + min_jaccard));
        let needed = (bound - 1e-9).ceil().max(0.0) as usize;
        let Some(shared) = sketch::count_shared_at_least(a, b, needed) else {
            return Verdict::Apart;
        };
        let similarity = Similarity::of(shared, a.len(), b.len());
        if similarity.containment >= self.min_containment
            && similarity.jaccard >= min_jaccard
            && self.figures_agree(a, b, shared, whole)
            // Titles and names last: they are read only for the few pairs that verify
            // otherwise.
            && (!whole || titles_agree(views.0.titles(), views.1.titles()))
            && names_agree(views.0.names(), views.1.names())
        {
            let part = |small: usize, large: usize| (small as f64) < PART_OF_WHOLE * large as f64;
            if part(a.len(), b.len()) {
                Verdict::Contained
            } else if part(b.len(), a.len()) {
                Verdict::Contains
            } else {
                Verdict::Copy
            }
        } else {
            Verdict::Apart
        }
    }

    /// Whether two comparable samples agree on their figures. They do not when the one with
    /// fewer figure shingles has [`MIN_FIGURE_SHINGLES`] or more and shares less than
    /// `min_figure_containment` of them; nor, for two whole texts (`whole`: neither was
    /// sampled, which would keep too few of the shingles that differ to tell), when the
    /// smaller (the one a copy would be contained in; either, when they are the same size)
    /// has [`FIGURE_CHANGE`] figure shingles the other lacks, or has fewer than
    /// [`MIN_FIGURE_SHINGLES`] figure shingles and lacks nothing of the other's but figures.
    ///
    /// Both are a template filled in with other figures: consecutive days' bulletins, notices
    /// of sessions on other dates, ceremonies of other days. A copy changes a figure only by a
    /// typo, and a typo beside a figure also changes a shingle without a digit (the one on its
    /// other side). A post that differs from another only in a count at its end (fans'
    /// numbered posts of one campaign, `…#78` against `…#89`) changes two or three figure
    /// shingles and has many more: it stays a copy. On xwlb-news this splits 23 of the 105
    /// stories that ran over several days; neardup-dev's short copies lose 0.15% of their
    /// true pairs, web-dev's reposts 0.04%.
    fn figures_agree(&self, a: &[u32], b: &[u32], shared: usize, whole: bool) -> bool {
        let (in_a, in_b, shared_figures) = sketch::count_figures(a, b);
        let fewer = in_a.min(in_b);
        if fewer >= MIN_FIGURE_SHINGLES
            && (shared_figures as f64) < self.min_figure_containment * fewer as f64
        {
            return false;
        }
        if !whole {
            return true;
        }
        // A sample's own shingles (those the other lacks), and its own figure shingles.
        let other_figures = |len: usize, figures: usize| {
            let (own, own_figures) = (len - shared, figures - shared_figures);
            let only_figures = own > 0 && own_figures == own;
            (only_figures && fewer < MIN_FIGURE_SHINGLES) || own_figures >= FIGURE_CHANGE
        };
        let differ = match a.len().cmp(&b.len()) {
            std::cmp::Ordering::Less => other_figures(a.len(), in_a),
            std::cmp::Ordering::Greater => other_figures(b.len(), in_b),
            std::cmp::Ordering::Equal => {
                other_figures(a.len(), in_a) || other_figures(b.len(), in_b)
            }
        };
        !differ
    }
}

/// Whether two whole texts' titles (see [`Sketch`]) leave them copies: they do not when each
/// has [`TITLE_CHANGE`] pairs of title characters of its own, one template naming two works.
fn titles_agree(a: &[u32], b: &[u32]) -> bool {
    let shared = sketch::count_shared(a, b);
    a.len() - shared < TITLE_CHANGE || b.len() - shared < TITLE_CHANGE
}

/// Whether two texts' names (see [`Sketch`]) leave them copies: they do not when each has a
/// name of its own ([`NAME_REPEATS`]).
fn names_agree(a: &[u32], b: &[u32]) -> bool {
    !(has_own_name(a, b) && has_own_name(b, a))
}

/// Whether the text with names `a` says one of them [`NAME_REPEATS`] times or more, and
/// [`NAME_RATIO`] times as often as the text with names `b`. A name `b` lacks was said at
/// most once there, unless `b` is full ([`MAX_NAMES`](crate::text::MAX_NAMES)): then it was
/// said at most as often as `b`'s least repeated name. A name `b` keeps with 0 occurrences is
/// its page's own site (see [`Names`](crate::text::Names)): how often `b` says it is not
/// known, and it is no name of `a`'s own.
fn has_own_name(a: &[u32], b: &[u32]) -> bool {
    let said = |mark: &u32| sketch::name_count(*mark);
    let absent = if b.len() < crate::text::MAX_NAMES {
        1
    } else {
        b.iter()
            .map(said)
            .filter(|&count| count > 0)
            .min()
            .unwrap_or(1)
    };
    a.iter().any(|&mark| {
        let count = sketch::name_count(mark);
        let other = b
            .iter()
            .find(|&&theirs| sketch::name_word(theirs) == sketch::name_word(mark))
            .map_or(Some(absent), |theirs| Some(said(theirs)).filter(|&n| n > 0));
        count >= NAME_REPEATS && other.is_some_and(|other| NAME_RATIO * other <= count)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A sketch of exactly these hashes of word shingles (shift 0: nothing sampled away; even
    /// values, which are not figures).
    fn exact(hashes: impl IntoIterator<Item = u32>) -> Sketch {
        let words = hashes.into_iter().map(|hash| 2 * u64::from(hash));
        Sketch::from_values(std::iter::once(0).chain(words)).unwrap()
    }

    /// [`exact`] with these titles' hashes after the shingles.
    fn titled(shingles: impl IntoIterator<Item = u32>, titles: &[u32]) -> Sketch {
        let words = shingles.into_iter().map(|hash| 2 * u64::from(hash));
        let end = (!titles.is_empty()).then_some(u64::from(TITLES_END));
        let titles = titles.iter().map(|&title| u64::from(TITLE_FLOOR | title));
        let values = std::iter::once(0).chain(words).chain(titles).chain(end);
        Sketch::from_values(values).unwrap()
    }

    #[test]
    fn whole_texts_that_each_name_another_work_are_apart() {
        let verifier = Verifier::default();
        // The same 60 shingles but 3: a copy by its words.
        let (a, b) = (1..=60, (1..=57).chain(100..103));
        let verdict = |titles_a: &[u32], titles_b: &[u32]| {
            verifier.verdict(&titled(a.clone(), titles_a), &titled(b.clone(), titles_b))
        };
        assert_eq!(verdict(&[], &[]), Verdict::Copy);
        // Four pairs of title characters of its own on each side: two works of one template.
        assert_eq!(verdict(&[1, 2, 3, 4, 9], &[5, 6, 7, 8, 9]), Verdict::Apart);
        // Three on each side (a typo in a title), or four on one side only (a title added).
        assert_eq!(verdict(&[1, 2, 3, 9], &[5, 6, 7, 9]), Verdict::Copy);
        assert_eq!(verdict(&[1, 2, 3, 4, 9], &[9]), Verdict::Copy);
        assert_eq!(verdict(&[1, 2, 3, 4], &[]), Verdict::Copy);
        // Titles take no part in the similarity, nor in the keys.
        let with_titles = titled(1..=60, &[1, 2, 3]);
        assert_eq!(with_titles.view().shingles(), exact(1..=60).hashes());
        assert_eq!(with_titles.keys(), exact(1..=60).keys());
        assert_eq!(with_titles.view().titles().len(), 3);
        let few = titled(1..=3, &[1, 2]);
        assert_eq!(
            few.keys(),
            exact(1..=3).keys(),
            "keys of a text shorter than KEYS"
        );
        assert_eq!(with_titles.similarity(&exact(1..=60)).jaccard, 1.0);
        // A sampled sketch keeps no titles.
        let sampled = Sketch::from_values([1u64, 2, 4, 6].into_iter()).unwrap();
        assert!(sampled.view().titles().is_empty());
        // A sketch stored before titles were kept has shingle hashes at the floor and above,
        // and no end of titles: they stay shingles, and keys.
        let old = Sketch::from_values([0, 4, u64::from(TITLE_FLOOR) + 2].into_iter()).unwrap();
        assert_eq!(old.view().shingles(), old.hashes());
        assert_eq!(old.keys(), old.hashes());
        assert!(old.view().titles().is_empty());
        assert!(verifier.matches(&old, &old));
        let degenerate = Sketch::from_values([0, u64::from(TITLE_FLOOR) + 8].into_iter()).unwrap();
        assert!(verifier.matches(&degenerate, &degenerate));
    }

    /// [`exact`] with these names (hash, occurrences).
    fn naming(shingles: impl IntoIterator<Item = u32>, names: &[(u64, u32)]) -> Sketch {
        if names.is_empty() {
            return exact(shingles);
        }
        let mut marks: Vec<u32> = names
            .iter()
            .map(|&(word, count)| sketch::name_mark(word << 32, count))
            .collect();
        marks.sort_unstable();
        let words = shingles.into_iter().map(|hash| 2 * u64::from(hash));
        let marks_then_count = marks
            .iter()
            .map(|&mark| u64::from(mark))
            .chain(std::iter::once(marks.len() as u64));
        let values = std::iter::once(u64::from(sketch::NAMED))
            .chain(words)
            .chain(marks_then_count);
        Sketch::from_values(values).unwrap()
    }

    #[test]
    fn texts_that_each_say_a_name_of_their_own_are_apart() {
        let verifier = Verifier::default();
        let verdict = |a: &[(u64, u32)], b: &[(u64, u32)]| {
            verifier.verdict(&naming(1..=80, a), &naming(1..=80, b))
        };
        let shared = (9, 4);
        // Two funerals of one template: each names its own deceased ten times.
        assert_eq!(
            verdict(&[(1, 10), shared], &[(2, 10), shared]),
            Verdict::Apart
        );
        // Three times against once (a name said once is not kept), on each side.
        assert_eq!(verdict(&[(1, 3)], &[(2, 3)]), Verdict::Apart);
        // A copy with a typo in one occurrence of its subject's name.
        assert_eq!(
            verdict(&[(1, 10), shared], &[(1, 9), shared]),
            Verdict::Copy
        );
        // Six against two makes a name of its own; five against two does not.
        assert_eq!(
            verdict(&[(1, 6), (3, 2)], &[(1, 2), (3, 6)]),
            Verdict::Apart
        );
        assert_eq!(verdict(&[(1, 5), (3, 2)], &[(1, 2), (3, 6)]), Verdict::Copy);
        // A name of its own on one side only: an excerpt, a repost that adds its names.
        assert_eq!(verdict(&[(1, 10), (2, 10)], &[(2, 10)]), Verdict::Copy);
        assert_eq!(verdict(&[(1, 10)], &[]), Verdict::Copy);
        // Names said twice are no names of their own, but tell how often the other says them.
        assert_eq!(verdict(&[(1, 2)], &[(2, 2)]), Verdict::Copy);
        // A page's own site (kept with 0 occurrences) is not compared: one text on the sites
        // of two towns it names three times each.
        assert_eq!(verdict(&[(1, 3), (2, 0)], &[(1, 0), (2, 3)]), Verdict::Copy);
        assert_eq!(verdict(&[(1, 3), (2, 0)], &[(3, 3)]), Verdict::Apart);
        // A full list leaves out names said at most as often as its least repeated.
        let full: Vec<(u64, u32)> = (10..10 + crate::text::MAX_NAMES as u64)
            .map(|word| (word, 4))
            .collect();
        let with_own = [full.as_slice(), &[(2, 12)]].concat();
        let mut other = full.clone();
        other[0] = (1, 11);
        assert_eq!(
            verdict(&other, &with_own[1..]),
            Verdict::Copy,
            "11 against 4 or fewer"
        );
        other[0] = (1, 12);
        assert_eq!(
            verdict(&other, &with_own[1..]),
            Verdict::Apart,
            "12 against 4 or fewer"
        );
        // The rule asks for words that verify otherwise: other texts stay apart.
        assert_eq!(
            verifier.verdict(&naming(1..=80, &[]), &naming(200..=280, &[])),
            Verdict::Apart
        );
        // Names are read from sampled sketches too.
        let sampled = |names: &[(u64, u32)]| {
            let whole = naming(1..=80, names);
            let shift = std::iter::once(u64::from(sketch::NAMED | 1));
            Sketch::from_values(shift.chain(whole.to_values().skip(1))).unwrap()
        };
        assert_eq!(
            verifier.verdict(&sampled(&[(1, 10)]), &sampled(&[(2, 10)])),
            Verdict::Apart
        );
    }

    #[test]
    fn thresholds_met_exactly_verify() {
        // Jaccard exactly 0.2 (4 of 20) and containment exactly 0.55 (55 of 100): products
        // like 0.2 * 24 / 1.2 come out a hair above the whole number in floating point.
        let jaccard = Verifier {
            min_containment: 0.8,
            min_jaccard: 0.2,
            post_shingles: 0,
            ..Verifier::default()
        };
        assert!(jaccard.matches(&exact(1..=4), &exact(1..=20)));
        let containment = Verifier {
            min_containment: 0.55,
            min_jaccard: 0.3,
            post_shingles: 0,
            ..Verifier::default()
        };
        assert!(containment.matches(&exact(1..=100), &exact((46..=100).chain(201..=245))));
        let floor = Verifier {
            min_containment: 0.5,
            min_jaccard: 0.55,
            post_shingles: 0,
            ..Verifier::default()
        };
        assert!(floor.matches(&exact(1..=55), &exact(1..=100)));
    }

    /// Texts made of a few shared and a few own sentences, so that pairs span every degree of
    /// overlap; long ones are sampled.
    fn text(seed: u64, sentences: usize) -> String {
        let mut state = seed | 1;
        (0..sentences)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                format!("第{}号公告发布关于{}事项的通知。", state % 40, state % 7)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn matches_is_the_threshold_rule_on_similarity(
            a in (any::<u64>(), 0usize..60, 1usize..300),
            b in (any::<u64>(), 0usize..60, 1usize..300),
            min_containment in prop_oneof![Just(0.8), Just(0.55), 0.05f64..=1.0],
            min_jaccard in prop_oneof![Just(1.0 / 3.0), Just(0.2), Just(0.55), 0.05f64..=1.0],
            post_shingles in prop_oneof![Just(0usize), Just(DEFAULT_POST_SHINGLES), 0usize..300],
            min_jaccard_post in prop_oneof![Just(DEFAULT_MIN_JACCARD_POST), 0.05f64..=1.0],
            min_figure_containment in prop_oneof![Just(DEFAULT_MIN_FIGURE_CONTAINMENT), 0.05f64..=1.0],
        ) {
            let x = Sketch::of(&[&text(a.0, a.1)], a.2);
            let y = Sketch::of(&[&text(b.0, b.1)], b.2);
            let verifier = Verifier {
                min_containment,
                min_jaccard,
                post_shingles,
                min_jaccard_post,
                min_figure_containment,
            };
            let similarity = x.similarity(&y);
            let (p, q) = x.view().comparable(y.view());
            let floor = if p.len().min(q.len()) < post_shingles {
                min_jaccard.max(min_jaccard_post)
            } else {
                min_jaccard
            };
            let figures = |sample: &[u32]| -> std::collections::BTreeSet<u32> {
                sample.iter().copied().filter(|&hash| sketch::is_figure(hash)).collect()
            };
            let (figures_p, figures_q) = (figures(p), figures(q));
            let fewer_figures = figures_p.len().min(figures_q.len());
            let shared_figures = figures_p.intersection(&figures_q).count();
            // A whole text of a template with other figures: the smaller's own shingles.
            let other_figures = |small: &[u32], large: &[u32]| {
                let large: std::collections::BTreeSet<u32> = large.iter().copied().collect();
                let own: Vec<u32> = small.iter().copied().filter(|hash| !large.contains(hash)).collect();
                let own_figures = own.iter().filter(|&&hash| sketch::is_figure(hash)).count();
                (!own.is_empty() && own_figures == own.len() && fewer_figures < MIN_FIGURE_SHINGLES)
                    || own_figures >= FIGURE_CHANGE
            };
            let whole = x.view().is_whole() && y.view().is_whole();
            let template = whole
                && match p.len().cmp(&q.len()) {
                    std::cmp::Ordering::Less => other_figures(p, q),
                    std::cmp::Ordering::Greater => other_figures(q, p),
                    std::cmp::Ordering::Equal => other_figures(p, q) || other_figures(q, p),
                };
            let expected = !x.is_empty()
                && !y.is_empty()
                && similarity.containment >= min_containment
                && similarity.jaccard >= floor
                && (fewer_figures < MIN_FIGURE_SHINGLES
                    || shared_figures as f64 >= min_figure_containment * fewer_figures as f64)
                && !template;
            prop_assert_eq!(verifier.matches(&x, &y), expected, "{:?}", similarity);
            prop_assert_eq!(verifier.matches(&y, &x), expected);
        }
    }
}
