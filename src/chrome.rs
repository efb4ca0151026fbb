//! A source's chrome: the lines a source repeats on its own pages, learned from the stream.
//!
//! A scraped page carries its site's navigation, source and editor lines, disclaimer,
//! copyright and hotline around the article. Two pages of one site share all of it, so two
//! short stories of one site verify as copies through it, and two sites' pages of one story
//! share too little of themselves to verify (BENCHMARKS.md, "every page under its site's
//! chrome"). The rules of [`verify`](crate::verify) that leave out text other stories carry
//! need other stories' texts that carry it, which a site's chrome does not have: only its own
//! pages carry it, and the first of them have joined one story by then.
//!
//! A platform knows each article's source, and what one source repeats on its pages is its
//! own, whatever story they tell. [`SourceChrome`] remembers, for each source, the lines at
//! the two ends of its last [`RECENT_PAGES`] pages; a line of a new page that
//! [`REPEATED_SHARE`] of them carry, each with other lines of its own (once there are
//! [`MIN_PAGES`]), is chrome, and the page
//! is signed without it
//! ([`Signer::without_chrome`](crate::dedup::Signer::without_chrome)), so neither
//! its fingerprint, its candidates nor its verification see it. A source that publishes one
//! story again (an update) repeats that story's lines too, but not on three in four of its
//! latest pages, each time beside other lines. A page whose every line is chrome is the
//! source's chrome alone, boilerplate ([`Stripped::Everything`]): only the same page joins
//! it.
//!
//! Only pages with a source are read, and a source's pages are told apart from another's by
//! the source's name alone. A source that is a whole platform (every post `新浪微博`) repeats
//! a post's lines in its reposts: a page of one line is never stripped (its one line is all
//! of it), and reposts of one post are rarely three in four of a platform's latest posts.
//!
//! A page is remembered with its position in the stream (the index's insert number), and is
//! forgotten once [`FORGET_AFTER`] inserts came after it: what opening an index can read
//! again from its latest stored documents. The memory is bounded by the number of sources
//! heard from in the latest `2 x FORGET_AFTER` inserts at most (a source whose pages are all
//! forgotten is let go, once every [`FORGET_AFTER`] inserts): [`RECENT_PAGES`] pages of at most `2 x EDGE_LINES` 32-bit line hashes, a sum
//! and a position each, at most about 1.7 KB a source with its allocations.
//!
//! Remembering happens as pages are stripped, before they are placed; a caller whose
//! placing failed takes back what the pages it did not place taught
//! ([`SourceChrome::mark`], [`SourceChrome::forget_since`]).
//!
//! ```
//! use tantivy_dedup::chrome::{PageLines, SourceChrome, Stripped};
//!
//! let page = |story: &str| {
//!     PageLines::new(
//!         "江城网",
//!         vec![format!("江城网 首页 > 要闻 > 正文\n{story}\n版权所有 江城网 未经授权禁止转载")],
//!     )
//! };
//! let mut chrome = SourceChrome::default();
//! let stories = ["市图书馆周末延长开放时间。", "江城地铁三号线今日开通运营。", "全市中小学下周一开学。", "城东新建三座口袋公园。"];
//! for (position, story) in stories.into_iter().enumerate() {
//!     assert_eq!(chrome.strip(page(story), position as u64), Stripped::Nothing);
//! }
//! // The site's header and footer are on its four pages before.
//! let stripped = chrome.strip(page("本周末全市将迎来一次明显降温过程。"), 4);
//! assert_eq!(stripped, Stripped::Texts(vec!["本周末全市将迎来一次明显降温过程。".to_owned()]));
//! ```

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

/// How many of a source's latest pages are remembered.
pub const RECENT_PAGES: usize = 16;

/// After how many inserts a page is forgotten (and how far back opening an index reads).
pub const FORGET_AFTER: u64 = 50_000;

/// On what share of the source's remembered pages a line must be to be chrome: a header or
/// a footer is on every page; an article's own lines are on its few updates, and a post's
/// on its reposts, which on a platform named as one source (every post `新浪微博`) come
/// between other posts.
pub const REPEATED_SHARE: f64 = 0.75;

/// How many of its pages a source must have shown before any of its lines is chrome.
pub const MIN_PAGES: usize = 4;

/// How many lines at each end of a page are read: chrome is a page's header and footer; an
/// article's middle is never compared (which bounds the memory a page costs).
pub const EDGE_LINES: usize = 8;

/// What [`SourceChrome::strip`] found of its source's chrome on a page.
///
/// ```
/// use tantivy_dedup::chrome::{PageLines, SourceChrome, Stripped};
///
/// let mut chrome = SourceChrome::default();
/// for position in 0..4 {
///     let page = format!("江城网首页\n第{position}篇稿件\n版权所有 江城网");
///     assert_eq!(chrome.strip(PageLines::new("江城网", vec![page]), position), Stripped::Nothing);
/// }
/// // The page's own line is kept; a page of the site's chrome alone is boilerplate.
/// let story = PageLines::new("江城网", vec!["江城网首页\n新稿件\n版权所有 江城网".into()]);
/// assert_eq!(chrome.strip(story, 4), Stripped::Texts(vec!["新稿件".into()]));
/// let alone = PageLines::new("江城网", vec!["江城网首页\n版权所有 江城网".into()]);
/// assert!(matches!(chrome.strip(alone, 5), Stripped::Everything(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stripped {
    /// None: the page is signed as it is.
    Nothing,
    /// Some of its lines: its texts without them, which it is signed by.
    Texts(Vec<String>),
    /// Every line: a page of its source's chrome alone, boilerplate; with a hash of its
    /// whole text, which only the same page shares.
    Everything(u64),
}

/// Which of the lines at a page's two ends are its source's chrome
/// ([`SourceChrome::strip_lines`]): bit `i` for the `i`-th of them, top first. What the
/// process that places a page (a coordinator) tells the one that stores it (a shard), which
/// takes out the same lines ([`PageLines::without`]) and so signs the page as one index
/// would: a shard sees only its own stories' pages, too few to learn a source's chrome from.
///
/// ```
/// use tantivy_dedup::chrome::{ChromeLines, PageLines, SourceChrome, Stripped};
///
/// let page = |story: &str| PageLines::new("海州网", vec![format!("海州网首页\n{story}")]);
/// let mut chrome = SourceChrome::default();
/// for position in 0..4 {
///     assert!(chrome.strip_lines(&page(&format!("第{position}篇稿件")), position).is_empty());
/// }
/// let lines = chrome.strip_lines(&page("第五篇"), 4);
/// // Sent along with the page, as a number; read back where the page is stored.
/// let sent = serde_json::to_string(&lines)?;
/// let read: ChromeLines = serde_json::from_str(&sent)?;
/// assert_eq!(page("第五篇").without(read), Stripped::Texts(vec!["第五篇".into()]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChromeLines(u16);

// Every line a page is read by has its bit.
const _: () = assert!(2 * EDGE_LINES <= u16::BITS as usize);

impl ChromeLines {
    /// Whether no line is chrome.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    fn contains(self, edge: usize) -> bool {
        edge < u16::BITS as usize && self.0 >> edge & 1 == 1
    }
}

/// The lines of one page of a source: its texts (already normalised: one line break between
/// lines), and the hash and place of the lines at its two ends. Made on any thread, so that
/// the ordered [`SourceChrome::strip`] only looks them up.
///
/// ```
/// use tantivy_dedup::chrome::PageLines;
///
/// let page = PageLines::new("江城网", vec!["江城网首页\n\n正文\n".into()]);
/// assert!(page.has_lines());
/// assert_eq!(page.parts(), ["江城网首页\n\n正文\n"]);
/// // Lines of white space alone teach nothing.
/// assert!(!PageLines::new("江城网", vec![" \n\t".into()]).has_lines());
/// ```
#[derive(Debug, Clone)]
pub struct PageLines {
    source: u64,
    /// The source's name, which the page's names leave out (`text::Names`).
    name: Box<str>,
    parts: Vec<String>,
    /// (part, byte range in it, hash) of each non-empty line at the page's two ends, in order.
    edges: Vec<(usize, Range<usize>, u32)>,
    /// How many non-empty lines the whole page has.
    lines: usize,
    /// The page as its source's chrome will remember it.
    remembered: RecentPage,
}

impl PageLines {
    /// The lines of a page of `source` whose normalised texts (the fingerprinted fields, in
    /// order) are `parts`.
    pub fn new(source: &str, parts: Vec<String>) -> PageLines {
        // Two walks over the lines instead of a list of them: the first counts them, the
        // second keeps those at the ends.
        let lines = || {
            parts.iter().enumerate().flat_map(|(index, part)| {
                line_ranges(part)
                    .filter(move |range| !part[range.clone()].trim().is_empty())
                    .map(move |range| (index, range))
            })
        };
        let count = lines().count();
        let ends = count.saturating_sub(EDGE_LINES).max(EDGE_LINES);
        let mut edges: Vec<(usize, Range<usize>, u32)> =
            Vec::with_capacity(count.min(2 * EDGE_LINES));
        // The lines between the ends are part of the rest of the page too: a site whose
        // header and footer fill both ends still shows a different page each time.
        let mut middle = 0u64;
        for (position, (index, range)) in lines().enumerate() {
            let line = parts[index][range.clone()].trim();
            if position < EDGE_LINES || position >= ends {
                edges.push((index, range, xxh3_64(line.as_bytes()) as u32));
            } else {
                middle = middle.rotate_left(1) ^ xxh3_64(line.as_bytes());
            }
        }
        let mut hashes: Vec<u32> = edges.iter().map(|(_, _, hash)| *hash).collect();
        hashes.sort_unstable();
        hashes.dedup();
        hashes.shrink_to_fit();
        let sum = hashes
            .iter()
            .fold(middle as u32, |sum, hash| sum.wrapping_add(*hash));
        PageLines {
            source: xxh3_64(source.as_bytes()),
            name: source.into(),
            parts,
            edges,
            lines: count,
            remembered: RecentPage {
                lines: hashes.into_boxed_slice(),
                sum,
                position: 0,
            },
        }
    }

    /// Its source, as [`SourceChrome`] tells sources apart: a hash of the name.
    pub fn source(&self) -> SourceKey {
        SourceKey(self.source)
    }

    /// Its source's name, as given.
    pub fn source_name(&self) -> &str {
        &self.name
    }

    /// The page's normalised texts, as given.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// Whether it has a line with anything but white space (else it teaches nothing).
    pub fn has_lines(&self) -> bool {
        !self.edges.is_empty()
    }

    /// The page without `chrome`, the lines at its ends that its source repeats.
    pub fn without(&self, chrome: ChromeLines) -> Stripped {
        let chrome: Vec<&(usize, Range<usize>, u32)> = (self.edges.iter().enumerate())
            .filter(|(edge, _)| chrome.contains(*edge))
            .map(|(_, line)| line)
            .collect();
        if chrome.is_empty() {
            return Stripped::Nothing;
        }
        if chrome.len() == self.lines {
            let whole = self.parts.iter().fold(0u64, |whole, part| {
                whole.rotate_left(1) ^ xxh3_64(part.as_bytes())
            });
            return Stripped::Everything(whole);
        }
        let stripped = self
            .parts
            .iter()
            .enumerate()
            .map(|(index, part)| {
                let mut kept = String::with_capacity(part.len());
                for range in line_ranges(part) {
                    let line = &part[range.clone()];
                    let chrome_line = chrome
                        .iter()
                        .any(|(part, chrome, _)| *part == index && *chrome == range);
                    if !chrome_line {
                        if !kept.is_empty() {
                            kept.push('\n');
                        }
                        kept.push_str(line);
                    }
                }
                kept
            })
            .collect();
        Stripped::Texts(stripped)
    }
}

/// A source as [`SourceChrome`] tells sources apart: a hash of its name
/// ([`PageLines::source`]).
///
/// ```
/// use tantivy_dedup::chrome::PageLines;
///
/// let page = |source: &str, text: &str| PageLines::new(source, vec![text.into()]);
/// assert_eq!(page("江城网", "一").source(), page("江城网", "二").source());
/// assert_ne!(page("江城网", "一").source(), page("海州网", "一").source());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceKey(pub u64);

/// Saved pages ([`SourceChrome::saved`]) that cannot be read back.
///
/// ```
/// use tantivy_dedup::chrome::{SourceChrome, SourceKey};
///
/// let mut chrome = SourceChrome::default();
/// // A page's position, cut short.
/// let error = chrome.restore(SourceKey(1), &[1, 0, 0]).unwrap_err();
/// assert!(error.to_string().contains("byte 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("saved pages of a source's chrome are cut short or malformed at byte {0}")]
pub struct BadSavedPages(usize);

/// The version byte that begins [`SourceChrome::saved`] bytes.
const SAVED_VERSION: u8 = 1;

/// A page as its source's chrome remembers it.
#[derive(Debug, Clone)]
struct RecentPage {
    /// The distinct hashes of the lines at its ends, sorted.
    lines: Box<[u32]>,
    /// Their wrapping sum, with a hash of the lines between the ends: less one line's hash,
    /// it names the rest of the page, so that the pages a line is on are counted only when
    /// the rest of them differ (a post sent again and again is one page, however often).
    sum: u32,
    /// Its place in the stream.
    position: u64,
}

/// One source's latest pages, with a count of their lines by bucket: a line whose bucket
/// counts fewer than the pages it must be on is no chrome, told without a search (most
/// lines of most pages).
#[derive(Debug, Clone)]
struct Recent {
    /// The oldest first.
    pages: VecDeque<RecentPage>,
    /// Lines of `pages` by the bucket of their hash ([`bucket`]).
    buckets: [u16; BUCKETS],
}

/// How many buckets [`Recent`] counts lines in.
const BUCKETS: usize = 64;

/// A line hash's bucket.
fn bucket(hash: u32) -> usize {
    (hash >> 26) as usize % BUCKETS
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            pages: VecDeque::new(),
            buckets: [0; BUCKETS],
        }
    }
}

impl Recent {
    fn count(&mut self, page: &RecentPage, up: bool) {
        for &hash in page.lines.iter() {
            let count = &mut self.buckets[bucket(hash)];
            *count = if up { *count + 1 } else { *count - 1 };
        }
    }

    fn push_back(&mut self, page: RecentPage) {
        self.count(&page, true);
        self.pages.push_back(page);
    }

    fn push_front(&mut self, page: RecentPage) {
        self.count(&page, true);
        self.pages.push_front(page);
    }

    fn pop_back(&mut self) -> Option<RecentPage> {
        let page = self.pages.pop_back()?;
        self.count(&page, false);
        Some(page)
    }

    fn pop_front(&mut self) -> Option<RecentPage> {
        let page = self.pages.pop_front()?;
        self.count(&page, false);
        Some(page)
    }
}

/// Where [`SourceChrome`]'s memory stood ([`SourceChrome::mark`]), to go back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// How many pages were remembered since the last settle.
    taught: usize,
    /// The newest position remembered.
    newest: u64,
}

/// What each source repeated on its latest pages (see the [module](self)). Pages must be
/// shown to it in the order they are placed, as the forest's inserts are: what it strips of
/// a page depends on the pages of its source before it.
///
/// ```
/// use tantivy_dedup::chrome::{PageLines, SourceChrome, Stripped};
///
/// let page = |story: &str| PageLines::new("海州网", vec![format!("海州网首页\n{story}")]);
/// let mut chrome = SourceChrome::default();
/// for position in 0..4 {
///     chrome.strip(page(&format!("第{position}篇稿件")), position);
/// }
/// let mark = chrome.mark();
/// assert_eq!(chrome.strip(page("第五篇"), 4), Stripped::Texts(vec!["第五篇".into()]));
/// // The fifth page was not placed after all: what it taught is taken back.
/// chrome.forget_since(mark);
/// assert_eq!(chrome.strip(page("第五篇"), 4), Stripped::Texts(vec!["第五篇".into()]));
/// ```
#[derive(Debug, Default, Clone)]
pub struct SourceChrome {
    /// Per source, its latest pages, the oldest first.
    recent: HashMap<u64, Recent>,
    /// Since the last [`settle`](Self::settle): each page remembered, in order, by its
    /// source, with the page it pushed out.
    taught: Vec<(u64, Option<RecentPage>)>,
    /// The newest position of a page remembered.
    newest: u64,
    /// [`newest`](Self::newest) when the sources that fell silent were last let go.
    swept: u64,
}

impl SourceChrome {
    /// The page's texts without the lines its source repeated ([`REPEATED_SHARE`] of its
    /// latest pages carry them, each beside lines of its own); then remembers the page, at
    /// `position` in the stream (increasing from one page to the next).
    pub fn strip(&mut self, page: PageLines, position: u64) -> Stripped {
        let chrome = self.strip_lines(&page, position);
        page.without(chrome)
    }

    /// Which of the page's lines [`strip`](Self::strip) takes out, for the process that
    /// stores the page to take out ([`PageLines::without`]); then remembers the page, at
    /// `position`.
    pub fn strip_lines(&mut self, page: &PageLines, position: u64) -> ChromeLines {
        let chrome = self.chrome_lines(page, position);
        if page.has_lines() {
            let remembered = RecentPage {
                position,
                ..page.remembered.clone()
            };
            self.remember_page(page.source, remembered);
        }
        chrome
    }

    /// Remembers a page as its source's latest, at `position`, without stripping it
    /// (rebuilding what a stream taught from the pages it left).
    pub fn remember(&mut self, mut page: PageLines, position: u64) {
        if page.has_lines() {
            page.remembered.position = position;
            self.remember_page(page.source, page.remembered);
        }
    }

    fn remember_page(&mut self, source: u64, page: RecentPage) {
        self.newest = self.newest.max(page.position);
        let recent = self.recent.entry(source).or_default();
        let pushed_out = if recent.pages.len() == RECENT_PAGES {
            recent.pop_front()
        } else {
            None
        };
        recent.push_back(page);
        self.taught.push((source, pushed_out));
    }

    /// Where its memory stands now.
    pub fn mark(&self) -> Mark {
        Mark {
            taught: self.taught.len(),
            newest: self.newest,
        }
    }

    /// Takes back every page remembered since `mark` (pages that were not placed), unless
    /// it was [settled](Self::settle) since.
    pub fn forget_since(&mut self, mark: Mark) {
        if self.taught.len() > mark.taught {
            self.newest = mark.newest;
        }
        while self.taught.len() > mark.taught {
            let Some((source, pushed_out)) = self.taught.pop() else {
                break;
            };
            if let Some(recent) = self.recent.get_mut(&source) {
                recent.pop_back();
                if let Some(page) = pushed_out {
                    recent.push_front(page);
                }
                if recent.pages.is_empty() {
                    self.recent.remove(&source);
                }
            }
        }
    }

    /// Keeps what was remembered for good (the pages were placed): the marks taken before
    /// can no longer be gone back to.
    ///
    /// Once every [`FORGET_AFTER`] inserts, the sources whose every page is forgotten by now
    /// are let go: what it holds is the pages of the sources heard from in the latest
    /// `2 x FORGET_AFTER` inserts at most, however many sources fell silent before (a
    /// platform whose sources are its accounts has millions).
    pub fn settle(&mut self) {
        self.taught.clear();
        if self.newest >= self.swept.saturating_add(FORGET_AFTER) {
            let newest = self.newest;
            self.recent.retain(|_, recent| {
                let last = recent.pages.back().map_or(0, |page| page.position);
                last.saturating_add(FORGET_AFTER) > newest
            });
            self.recent.shrink_to_fit();
            self.swept = newest;
        }
    }

    /// How many sources it remembers pages of.
    pub fn sources(&self) -> usize {
        self.recent.len()
    }

    /// What it remembers of `source`'s latest pages, as bytes to be kept elsewhere and read
    /// back by [`restore`](Self::restore) (`None`: nothing): how processes that place pages
    /// in turn share what each learned. At most about 1.2 KB a source.
    ///
    /// ```
    /// use tantivy_dedup::chrome::{PageLines, SourceChrome, Stripped};
    ///
    /// let page = |story: &str| PageLines::new("海州网", vec![format!("海州网首页\n{story}")]);
    /// let mut first = SourceChrome::default();
    /// for position in 0..4 {
    ///     first.strip(page(&format!("第{position}篇稿件")), position);
    /// }
    /// let source = page("").source();
    /// let saved = first.saved(source).expect("pages of the source");
    /// // Another process goes on from there.
    /// let mut second = SourceChrome::default();
    /// second.restore(source, &saved)?;
    /// assert_eq!(second.strip(page("第五篇"), 4), Stripped::Texts(vec!["第五篇".into()]));
    /// # Ok::<(), tantivy_dedup::chrome::BadSavedPages>(())
    /// ```
    pub fn saved(&self, source: SourceKey) -> Option<Vec<u8>> {
        let recent = self.recent.get(&source.0)?;
        let mut bytes = vec![SAVED_VERSION];
        for page in &recent.pages {
            bytes.extend_from_slice(&page.position.to_le_bytes());
            bytes.extend_from_slice(&page.sum.to_le_bytes());
            bytes.push(page.lines.len() as u8);
            for line in page.lines.iter() {
                bytes.extend_from_slice(&line.to_le_bytes());
            }
        }
        Some(bytes)
    }

    /// Remembers, for `source`, the pages that [`saved`](Self::saved) gave (in place of
    /// what it remembered of it). Read back to the last byte, or refused whole.
    pub fn restore(&mut self, source: SourceKey, saved: &[u8]) -> Result<(), BadSavedPages> {
        let mut reader = SavedReader {
            bytes: saved,
            at: 0,
        };
        if reader.take::<1>()? != [SAVED_VERSION] {
            return Err(BadSavedPages(0));
        }
        let mut recent = Recent::default();
        while !reader.is_done() {
            let position = u64::from_le_bytes(reader.take()?);
            let sum = u32::from_le_bytes(reader.take()?);
            let [count] = reader.take::<1>()?;
            let lines: Box<[u32]> = (0..count)
                .map(|_| reader.take().map(u32::from_le_bytes))
                .collect::<Result<_, _>>()?;
            // Looked up by binary search: sorted and distinct, as remembered; the pages in the
            // order of the stream, which forgetting them relies on.
            let sorted = lines.windows(2).all(|pair| pair[0] < pair[1]);
            let in_order = (recent.pages.back()).is_none_or(|last| last.position < position);
            let room = recent.pages.len() < RECENT_PAGES;
            if !sorted || !in_order || !room || lines.len() > 2 * EDGE_LINES {
                return Err(BadSavedPages(reader.at));
            }
            recent.push_back(RecentPage {
                lines,
                sum,
                position,
            });
        }
        if recent.pages.is_empty() {
            self.recent.remove(&source.0);
        } else {
            self.recent.insert(source.0, recent);
        }
        Ok(())
    }

    fn chrome_lines(&self, page: &PageLines, position: u64) -> ChromeLines {
        let Some(recent) = self.recent.get(&page.source) else {
            return ChromeLines::default();
        };
        // The pages forgotten by now are the oldest.
        let forgotten = (recent.pages)
            .partition_point(|old| old.position.saturating_add(FORGET_AFTER) <= position);
        let known = recent.pages.len() - forgotten;
        if known < MIN_PAGES {
            return ChromeLines::default();
        }
        let repeats = (REPEATED_SHARE * known as f64).ceil() as usize;
        let mut chrome = ChromeLines::default();
        for (edge, (_, _, hash)) in page.edges.iter().enumerate() {
            if usize::from(recent.buckets[bucket(*hash)]) >= repeats
                && is_chrome(recent.pages.range(forgotten..), *hash, repeats)
            {
                chrome.0 |= 1 << edge;
            }
        }
        chrome
    }
}

/// Reads [`SourceChrome::saved`] bytes in order.
struct SavedReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl SavedReader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], BadSavedPages> {
        let taken = (self.bytes.get(self.at..self.at + N))
            .and_then(|taken| <[u8; N]>::try_from(taken).ok())
            .ok_or(BadSavedPages(self.at))?;
        self.at += N;
        Ok(taken)
    }

    fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Whether `repeats` of a source's latest pages carry the line `hash`, the rest of each
/// page different. Most lines are a page's own: the walk stops once too few pages are left.
fn is_chrome<'a>(
    recent: impl DoubleEndedIterator<Item = &'a RecentPage> + ExactSizeIterator + Clone,
    hash: u32,
    repeats: usize,
) -> bool {
    let allowed_misses = recent.len() - repeats;
    let (mut hits, mut misses) = (0, 0);
    for page in recent.clone().rev() {
        if page.lines.binary_search(&hash).is_ok() {
            hits += 1;
        } else {
            misses += 1;
            if misses > allowed_misses {
                return false;
            }
        }
    }
    if hits < repeats {
        return false;
    }
    let mut rests: Vec<u32> = recent
        .filter(|page| page.lines.binary_search(&hash).is_ok())
        .map(|page| page.sum.wrapping_sub(hash))
        .collect();
    rests.sort_unstable();
    rests.dedup();
    rests.len() >= repeats
}

/// The byte ranges of a text's lines (without their line breaks).
fn line_ranges(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    text.split('\n').scan(0, |start, line| {
        let range = *start..*start + line.len();
        *start = range.end + 1;
        Some(range)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(source: &str, lines: &[&str]) -> PageLines {
        PageLines::new(source, vec![lines.join("\n")])
    }

    /// A [`SourceChrome`] shown pages one insert apart.
    #[derive(Default)]
    struct Stream {
        chrome: SourceChrome,
        position: u64,
    }

    impl Stream {
        fn show(&mut self, page: PageLines) -> Stripped {
            self.position += 1;
            self.chrome.strip(page, self.position)
        }

        /// Shows `count` pages of `source` with `line` and a line of their own.
        fn pages_with(&mut self, source: &str, line: &str, count: usize) {
            for i in 0..count {
                self.show(page(source, &[line, &format!("第{i}篇稿件的正文")]));
            }
        }
    }

    #[test]
    fn another_source_teaches_nothing() {
        let mut stream = Stream::default();
        stream.pages_with("甲网", "甲网首页", MIN_PAGES);
        assert_eq!(
            stream.show(page("乙网", &["甲网首页", "另一篇稿件"])),
            Stripped::Nothing
        );
        assert_eq!(
            stream.show(page("甲网", &["甲网首页", "又一篇稿件"])),
            Stripped::Texts(vec!["又一篇稿件".to_owned()])
        );
        assert_eq!(stream.chrome.sources(), 2);
    }

    #[test]
    fn a_line_on_fewer_than_three_in_four_pages_is_kept() {
        let mut stream = Stream::default();
        stream.pages_with("微博", "热门帖子的原文", 11);
        stream.pages_with("微博", "别的帖子", 5);
        // 11 of the latest 16: under 3 in 4.
        let repost = page("微博", &["热门帖子的原文", "转发评论"]);
        assert_eq!(stream.show(repost), Stripped::Nothing);
    }

    #[test]
    fn a_post_sent_again_and_again_is_not_chrome() {
        let mut stream = Stream::default();
        for _ in 0..RECENT_PAGES {
            stream.show(page("微博", &["同一条广告帖子"]));
        }
        let with_a_tail = ["同一条广告帖子", "特别声明：以上内容仅代表作者本人观点"];
        assert_eq!(stream.show(page("微博", &with_a_tail)), Stripped::Nothing);
    }

    #[test]
    fn a_site_whose_chrome_fills_both_ends_is_still_stripped() {
        let header: Vec<String> = (0..EDGE_LINES).map(|i| format!("导航栏目{i}")).collect();
        let footer: Vec<String> = (0..EDGE_LINES).map(|i| format!("页脚信息{i}")).collect();
        let page_of = |story: &str| {
            let mut lines: Vec<&str> = header.iter().map(String::as_str).collect();
            lines.push(story);
            lines.extend(footer.iter().map(String::as_str));
            page("甲网", &lines)
        };
        let mut stream = Stream::default();
        for i in 0..MIN_PAGES {
            stream.show(page_of(&format!("第{i}篇稿件的正文")));
        }
        assert_eq!(
            stream.show(page_of("新的稿件正文")),
            Stripped::Texts(vec!["新的稿件正文".to_owned()])
        );
    }

    #[test]
    fn updates_of_one_story_are_not_chrome_and_chrome_alone_is_boilerplate() {
        let mut stream = Stream::default();
        let story = ["第一段内容比较长一些", "第二段内容比较长一些"];
        for i in 0..MIN_PAGES {
            stream.show(page("甲网", &[story[0], story[1], &format!("第{i}次更新")]));
            stream.show(page("甲网", &[&format!("另一篇稿件{i}")]));
        }
        // A story updated again and again among the source's other stories.
        let update = [story[0], story[1], "又改了一处"];
        assert_eq!(stream.show(page("甲网", &update)), Stripped::Nothing);

        stream.pages_with("乙网", "乙网首页", RECENT_PAGES);
        let alone = stream.show(page("乙网", &["乙网首页"]));
        assert!(matches!(alone, Stripped::Everything(_)), "{alone:?}");
    }

    #[test]
    fn only_the_ends_are_read_and_old_pages_are_forgotten() {
        let mut stream = Stream::default();
        let numbered: Vec<String> = (0..2 * EDGE_LINES + 4)
            .map(|i| format!("第{i}行"))
            .collect();
        let mut lines: Vec<&str> = numbered.iter().map(String::as_str).collect();
        lines[EDGE_LINES + 1] = "中间的重复行";
        for _ in 0..MIN_PAGES {
            stream.show(page("甲网", &lines));
        }
        let stripped = stream.show(page("甲网", &["中间的重复行", "新的一篇文章的正文"]));
        assert_eq!(
            stripped,
            Stripped::Nothing,
            "a line in the middle of a page is never counted"
        );
        stream.pages_with("甲网", "另一个页头", RECENT_PAGES);
        assert_eq!(
            stream.show(page("甲网", &["第0行", "又一篇"])),
            Stripped::Nothing,
            "pages older than the latest {RECENT_PAGES} are forgotten"
        );
        assert_eq!(
            stream.show(page("甲网", &["另一个页头", "又一篇"])),
            Stripped::Texts(vec!["又一篇".to_owned()])
        );
        stream.position += FORGET_AFTER;
        assert_eq!(
            stream.show(page("甲网", &["另一个页头", "又一篇"])),
            Stripped::Nothing,
            "pages {FORGET_AFTER} inserts old are forgotten"
        );
    }

    #[test]
    fn saved_pages_are_read_back_whole_or_refused() {
        let mut stream = Stream::default();
        stream.pages_with("甲网", "甲网首页", RECENT_PAGES + 3);
        let source = page("甲网", &["任意"]).source();
        let saved = stream.chrome.saved(source).unwrap();
        let mut restored = SourceChrome::default();
        restored.restore(source, &saved).unwrap();
        assert_eq!(
            format!("{:?}", restored.recent),
            format!("{:?}", stream.chrome.recent)
        );
        for cut in 0..saved.len() {
            let cut_short = restored.clone().restore(source, &saved[..cut]);
            // Cut between two pages, what is there reads back.
            let page_bytes = 8 + 4 + 1 + 2 * 4;
            let between_pages = cut > 0 && (cut - 1) % page_bytes == 0;
            assert_eq!(cut_short.is_ok(), between_pages, "cut at {cut}");
        }
        let mut unsorted = saved.clone();
        unsorted[14..22].copy_from_slice(&[9, 0, 0, 0, 1, 0, 0, 0]);
        assert!(restored.restore(source, &unsorted).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_restore_or_are_refused_without_a_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        ) {
            let mut chrome = SourceChrome::default();
            if chrome.restore(SourceKey(7), &bytes).is_ok() {
                // What was read back saves as it came.
                let saved = chrome.saved(SourceKey(7));
                proptest::prop_assert_eq!(saved.unwrap_or(vec![SAVED_VERSION]), bytes);
            }
        }
    }

    #[test]
    fn sources_fallen_silent_are_let_go_and_nothing_strips_otherwise() {
        // One memory settled after every page (it lets silent sources go), one never.
        let (mut settled, mut kept) = (SourceChrome::default(), SourceChrome::default());
        let (mut position, mut stripped_steady) = (0, 0);
        for round in 0..6u64 {
            // Sites heard from in this round only, then a site heard from in every round.
            for site in 0..8 {
                for article in 0..MIN_PAGES + 1 {
                    let site = format!("站点{round}-{site}");
                    let lines = [&format!("{site}首页"), &format!("第{article}篇")[..]];
                    let stripped = settled.strip(page(&site, &lines), position);
                    assert_eq!(stripped, kept.strip(page(&site, &lines), position));
                    settled.settle();
                    position += 1;
                }
            }
            // Eight of its pages in every span of FORGET_AFTER: its header is chrome all along,
            // across the sweeps, which must not let it go.
            for article in 0..10 {
                let lines = ["常驻网首页", &format!("第{round}轮第{article}篇")];
                let stripped = settled.strip(page("常驻网", &lines), position);
                assert_eq!(stripped, kept.strip(page("常驻网", &lines), position));
                stripped_steady += usize::from(stripped != Stripped::Nothing);
                settled.settle();
                position += FORGET_AFTER / 8;
            }
        }
        assert!(stripped_steady > 40, "{stripped_steady}");
        assert_eq!(kept.sources(), 6 * 8 + 1);
        assert!(settled.sources() <= 2 * 8 + 1, "{}", settled.sources());
    }

    #[test]
    fn a_source_is_let_go_only_once_its_every_page_is_forgotten() {
        let mut chrome = SourceChrome::default();
        let last = 10;
        for position in last - 3..=last {
            chrome.strip(
                page("甲网", &["甲网首页", &format!("第{position}篇")]),
                position,
            );
        }
        // Another source's page takes the stream far enough for a sweep, one insert before
        // the first of those pages is forgotten.
        chrome.strip(page("乙网", &["乙网首页"]), last + FORGET_AFTER - 5);
        chrome.settle();
        let next = page("甲网", &["甲网首页", "第五篇"]);
        assert_eq!(
            chrome.strip(next, last + FORGET_AFTER - 4),
            Stripped::Texts(vec!["第五篇".to_owned()])
        );
        chrome.strip(page("乙网", &["乙网首页"]), last + 2 * FORGET_AFTER);
        chrome.settle();
        assert_eq!(
            chrome.sources(),
            1,
            "甲网's pages are all forgotten by then"
        );
    }

    #[test]
    fn forgetting_since_a_mark_gives_back_the_memory_before_it() {
        let mut stream = Stream::default();
        stream.pages_with("甲网", "甲网首页", RECENT_PAGES);
        let before = format!("{:?}", stream.chrome.recent);
        let mark = stream.chrome.mark();
        stream.pages_with("甲网", "另一个页头", 3);
        stream.pages_with("乙网", "乙网首页", 2);
        stream.chrome.forget_since(mark);
        assert_eq!(format!("{:?}", stream.chrome.recent), before);
        assert_eq!(
            stream.chrome.mark(),
            mark,
            "the newest position is taken back too"
        );
        stream.chrome.settle();
        assert_eq!(stream.chrome.mark().taught, 0);
    }
}
