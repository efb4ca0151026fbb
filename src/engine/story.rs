//! The story view: one cluster as a monitoring analyst reads it. Its members, each with the
//! member it came into the story through and the evidence that put it there; the first outlet
//! to publish; how many articles each outlet carried; and the story's spread over time.
//!
//! Everything but the page of members is counted over the whole cluster from fast fields, in
//! one pass per segment; only the page's members are loaded from the document store.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::str::FromStr;

use serde::Serialize;
use tantivy::collector::DocSetCollector;
use tantivy::{DocAddress, DocId};

use crate::engine::answers::DocumentView;
use crate::engine::histogram::{self, HistogramWidth, Interval, TimeSpan};
use crate::engine::schema::{self, sketch_in};
use crate::engine::search::{DedupSearcher, Extra, SearchRequest, check_page};
use crate::engine::snippet::{self, Highlighter};
use crate::forest::Timestamp;
use crate::verify::Sketch;
use crate::{Error, Fingerprint, Result};

/// The order of a story's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorySort {
    /// Earliest published first (then in the order they were added).
    #[default]
    Time,
    /// By outlet name (members without one last), then earliest first.
    Source,
}

impl FromStr for StorySort {
    type Err = Error;

    fn from_str(text: &str) -> Result<StorySort> {
        match text {
            "time" => Ok(StorySort::Time),
            "source" => Ok(StorySort::Source),
            other => Err(Error::Query(format!(
                "a story's members sort by \"time\" or \"source\", got {other:?}"
            ))),
        }
    }
}

/// What a story page asks for: which members (a page of them, in which order) and the width
/// of the spread histogram's buckets.
///
/// ```
/// use tantivy_dedup::engine::{HistogramWidth, StoryRequest, StorySort};
///
/// let request = StoryRequest::default().page(20, 10).sort(StorySort::Source).interval("1d".parse()?);
/// assert_eq!((request.offset, request.limit), (20, 10));
/// assert_eq!(request.interval, HistogramWidth::Fixed("1d".parse()?));
/// assert_eq!(StoryRequest::default().interval, HistogramWidth::Auto);
/// # Ok::<(), tantivy_dedup::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoryRequest {
    /// Members to skip (at most [`MAX_OFFSET`](crate::engine::MAX_OFFSET)).
    pub offset: usize,
    /// Members to return (at most [`MAX_PAGE_SIZE`](crate::engine::MAX_PAGE_SIZE)).
    pub limit: usize,
    /// Their order.
    pub sort: StorySort,
    /// The spread histogram's bucket width; unless told, `auto`: the finest that shows the
    /// story's whole span in at most [`AUTO_MAX_BUCKETS`](crate::engine::AUTO_MAX_BUCKETS)
    /// (hours for a story of a week).
    pub interval: HistogramWidth,
    /// Keywords (a list page's query) whose words each member's `highlights` mark (its
    /// `snippet` stays the start of its text); empty: no highlights.
    pub query: String,
}

impl Default for StoryRequest {
    fn default() -> Self {
        StoryRequest {
            offset: 0,
            limit: crate::engine::DEFAULT_PAGE_SIZE,
            sort: StorySort::Time,
            interval: HistogramWidth::Auto,
            query: String::new(),
        }
    }
}

impl StoryRequest {
    /// Sets the page of members.
    pub fn page(mut self, offset: usize, limit: usize) -> Self {
        self.offset = offset;
        self.limit = limit;
        self
    }

    /// Sets the members' order.
    pub fn sort(mut self, sort: StorySort) -> Self {
        self.sort = sort;
        self
    }

    /// Sets the histogram's bucket width.
    pub fn interval(mut self, width: HistogramWidth) -> Self {
        self.interval = width;
        self
    }

    /// Marks the words of `query` in each member's highlights, as the list page the story was
    /// opened from marks them.
    pub fn highlight(mut self, query: impl Into<String>) -> Self {
        self.query = query.into();
        self
    }
}

/// The story's earliest member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct FirstPublished {
    /// Its id.
    pub id: String,
    /// Its outlet.
    pub source: Option<String>,
    /// When it was published, Unix seconds.
    #[cfg_attr(feature = "server", schema(value_type = i64))]
    pub published_at: Timestamp,
}

/// One outlet's share of a story.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Outlet {
    /// The outlet (`None` for members sent without one).
    pub source: Option<String>,
    /// Its articles in the story.
    pub articles: u64,
    /// When the first of them was published, Unix seconds.
    #[cfg_attr(feature = "server", schema(value_type = i64))]
    pub first_published_at: Timestamp,
}

/// One bucket of a story's spread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SpreadBucket {
    /// Where the bucket starts, Unix seconds; it ends where the next one starts.
    #[cfg_attr(feature = "server", schema(value_type = i64))]
    pub start: Timestamp,
    /// The story's articles published in it.
    pub articles: u64,
}

/// Why a member is in the story.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Evidence {
    /// Hamming distance from its fingerprint to the root's.
    pub distance: u32,
    /// Jaccard similarity of its text's shingle sketch and that of the member it came in
    /// through (the comparison that verified it); `None` for the first member, in seed mode
    /// (no sketches), and when that member is gone.
    pub similarity: Option<f64>,
    /// Shared shingles over those of the shorter of the two texts; `None` as `similarity`.
    pub containment: Option<f64>,
}

/// What a member's text says of where it came from: a "来源：", "转载自：" or "原标题：" line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Reprint {
    /// The outlet named by "来源" or "转载自" ("转自", "稿源").
    pub source: Option<String>,
    /// The headline named by "原标题".
    pub original_title: Option<String>,
}

/// One member of a story.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct StoryMember {
    /// The document (its `snippet` the start of its text, HTML-escaped; no `content`).
    #[serde(flatten)]
    pub document: DocumentView,
    /// The id of the member it came into the story through: an earlier member with its text
    /// (same node), or the one whose node it was attached to. `None` for the story's first
    /// member, for an index made before attachments were recorded, and when that member was
    /// deleted.
    pub attached_to: Option<String>,
    /// Why it is in the story.
    pub evidence: Evidence,
    /// What its text says of its origin, when it says anything.
    pub reprint: Option<Reprint>,
}

/// A story (cluster) page: see the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Story {
    /// The cluster's root hash.
    pub root: Fingerprint,
    /// Its live documents.
    pub cluster_size: u64,
    /// Its earliest member (then the first added).
    pub first_published: FirstPublished,
    /// Its outlets, most articles first (then the earliest first, then by name).
    pub outlets: Vec<Outlet>,
    /// The histogram's bucket width, seconds.
    pub interval: u64,
    /// Articles per bucket from the first member's bucket to the last's, empty ones included.
    pub histogram: Vec<SpreadBucket>,
    /// The page of members.
    pub members: Vec<StoryMember>,
}

/// What the pass over the cluster reads of each member.
struct Member {
    address: DocAddress,
    sequence: u64,
    time: Timestamp,
    node: Fingerprint,
    via: Option<Fingerprint>,
    source: Option<String>,
}

impl DedupSearcher {
    /// The story of the cluster whose root hash is `root`; `None` when no live document has
    /// it.
    ///
    /// ```
    /// use tantivy_dedup::engine::{DedupIndex, StoryRequest};
    /// use tantivy_dedup::{Article, config::Config};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut index = DedupIndex::create(dir.path(), Config::default())?;
    /// let flood = "南方多地持续强降雨，防汛应急响应提升至三级，各地转移安置受灾群众，抢修受损道路。";
    /// for (id, source, hour) in [("1", "新华网", 0), ("2", "人民网", 1), ("3", "新华网", 3)] {
    ///     let article = Article { id: id.into(), source: Some(source.into()), content: flood.into(),
    ///         published_at: Some(1_700_000_000 + hour * 3600), ..Default::default() };
    ///     index.add_article(article)?;
    /// }
    /// index.commit()?;
    ///
    /// let searcher = index.searcher();
    /// let root = searcher.document("2")?.unwrap().root;
    /// let story = searcher.story(root, &StoryRequest::default())?.unwrap();
    /// assert_eq!((story.cluster_size, story.first_published.id.as_str()), (3, "1"));
    /// assert_eq!(story.outlets[0].source.as_deref(), Some("新华网"));
    /// assert_eq!(story.histogram.iter().map(|b| b.articles).collect::<Vec<_>>(), [1, 1, 0, 1]);
    /// assert_eq!(story.members[1].attached_to.as_deref(), Some("1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn story(&self, root: Fingerprint, request: &StoryRequest) -> Result<Option<Story>> {
        check_page(request.offset, request.limit)?;
        let searcher = self.tantivy_searcher();
        let mut members = self.read_members(&searcher, root)?;
        // Insert order first: the node's earliest document is the one that made it.
        members.sort_unstable_by_key(|member| member.sequence);
        let Some(first) = members
            .iter()
            .min_by_key(|member| (member.time, member.sequence))
        else {
            return Ok(None);
        };
        let first_published = FirstPublished {
            id: self.id_of(&searcher, first.address)?,
            source: first.source.clone(),
            published_at: first.time,
        };
        let outlets = outlets(&members);
        let span = members
            .iter()
            .map(|member| TimeSpan::new(member.time, member.time))
            .reduce(TimeSpan::union);
        let interval = request
            .interval
            .resolve(span, self.config().index.time_zone);
        let histogram = self.spread(&members, interval)?;

        // A node's documents in insert order, so a member finds the earliest document of the
        // node it came in through.
        let mut by_node: HashMap<Fingerprint, Vec<usize>> = HashMap::new();
        for (position, member) in members.iter().enumerate() {
            by_node.entry(member.node).or_default().push(position);
        }
        let came_through = |position: usize| -> Option<usize> {
            let member = &members[position];
            let earlier = by_node.get(&member.via?)?;
            earlier.first().copied().filter(|&it| it < position)
        };

        let mut order: Vec<usize> = (0..members.len()).collect();
        match request.sort {
            StorySort::Time => order.sort_by_key(|&at| (members[at].time, members[at].sequence)),
            StorySort::Source => order.sort_by(|&a, &b| {
                let key = |at: usize| {
                    let member = &members[at];
                    (
                        member.source.is_none(),
                        member.source.as_deref(),
                        member.time,
                    )
                };
                key(a).cmp(&key(b))
            }),
        }
        let highlighter = match request.query.trim() {
            "" => None,
            query => Some(Highlighter::new(
                &*self.keywords(&SearchRequest::new(query))?,
            )),
        };
        let mut page = Vec::with_capacity(request.limit.min(members.len()));
        for &position in order.iter().skip(request.offset).take(request.limit) {
            let member = &members[position];
            let through = came_through(position);
            let mut document = self.view(&searcher, member.address, Extra::Content)?;
            let content = document.content.take().unwrap_or_default();
            // The snippet stays the start of the text (it names a post without a title).
            document.snippet = Some(snippet::lead(&content));
            if let Some(highlighter) = &highlighter {
                let marks = self.marks(document.title.as_deref(), Some(&content), highlighter);
                document.highlights = Some(marks.highlights);
            }
            let (similarity, containment) = match through {
                Some(through) => {
                    let mine = self.sketch_of(&searcher, member.address)?;
                    let theirs = self.sketch_of(&searcher, members[through].address)?;
                    match (mine, theirs) {
                        (Some(mine), Some(theirs)) => {
                            let similarity = mine.similarity(&theirs);
                            (Some(similarity.jaccard), Some(similarity.containment))
                        }
                        _ => (None, None),
                    }
                }
                None => (None, None),
            };
            page.push(StoryMember {
                attached_to: through
                    .map(|through| self.id_of(&searcher, members[through].address))
                    .transpose()?,
                evidence: Evidence {
                    distance: member.node.distance(root),
                    similarity,
                    containment,
                },
                reprint: reprint_line(&content),
                document,
            });
        }
        Ok(Some(Story {
            root,
            cluster_size: members.len() as u64,
            first_published,
            outlets,
            interval: interval.seconds(),
            histogram,
            members: page,
        }))
    }

    /// Every live member of the cluster, read from fast fields.
    fn read_members(&self, searcher: &tantivy::Searcher, root: Fingerprint) -> Result<Vec<Member>> {
        let query = self.fields().dedup.cluster_query(root);
        let addresses = searcher
            .search(&query, &DocSetCollector)
            .map_err(self.error())?;
        let mut by_segment: Vec<Vec<DocId>> = vec![Vec::new(); searcher.segment_readers().len()];
        for address in addresses {
            by_segment[address.segment_ord as usize].push(address.doc_id);
        }
        let mut members = Vec::new();
        let mut name = String::new();
        for (segment_ord, docs) in by_segment.into_iter().enumerate() {
            if docs.is_empty() {
                continue;
            }
            let fast = searcher.segment_reader(segment_ord as u32).fast_fields();
            let read = || -> tantivy::Result<_> {
                Ok((
                    fast.u64(schema::SEQUENCE)?,
                    fast.i64(schema::EVENT_TIME)?,
                    fast.u64(schema::SIMHASH)?,
                    fast.column_opt::<u64>(schema::VIA)?,
                    fast.str("source")?,
                ))
            };
            let (sequences, times, nodes, vias, sources) = read().map_err(self.error())?;
            for doc in docs {
                let source = sources.as_ref().and_then(|column| {
                    let ordinal = column.term_ords(doc).next()?;
                    name.clear();
                    column
                        .ord_to_str(ordinal, &mut name)
                        .ok()
                        .filter(|&found| found)
                        .map(|_| name.clone())
                });
                members.push(Member {
                    address: DocAddress::new(segment_ord as u32, doc),
                    sequence: sequences.first(doc).unwrap_or(0),
                    time: times.first(doc).unwrap_or(0),
                    node: Fingerprint(nodes.first(doc).unwrap_or(0)),
                    via: vias
                        .as_ref()
                        .and_then(|column| column.first(doc))
                        .map(Fingerprint),
                    source,
                });
            }
        }
        Ok(members)
    }

    /// Articles per bucket of `interval`, aligned as the list page's histogram is.
    fn spread(&self, members: &[Member], interval: Interval) -> Result<Vec<SpreadBucket>> {
        let origin = interval.origin(self.config().index.time_zone);
        let mut counts: HashMap<Timestamp, u64> = HashMap::new();
        for member in members {
            *counts
                .entry(interval.bucket_start(member.time, origin))
                .or_default() += 1;
        }
        Ok(
            histogram::fill_gaps(counts.into_iter().collect(), interval)?
                .into_iter()
                .map(|(start, articles)| SpreadBucket { start, articles })
                .collect(),
        )
    }

    fn id_of(&self, searcher: &tantivy::Searcher, address: DocAddress) -> Result<String> {
        Ok(self.view(searcher, address, Extra::None)?.id)
    }

    fn sketch_of(
        &self,
        searcher: &tantivy::Searcher,
        address: DocAddress,
    ) -> Result<Option<Sketch>> {
        let fast = searcher.segment_reader(address.segment_ord).fast_fields();
        let column = fast.u64(schema::SKETCH).map_err(self.error())?;
        sketch_in(&column, address.doc_id).map_err(self.error())
    }
}

/// Each outlet's articles and first publication, most articles first.
fn outlets(members: &[Member]) -> Vec<Outlet> {
    let mut by_source: HashMap<Option<&str>, (u64, Timestamp)> = HashMap::new();
    for member in members {
        let entry = by_source
            .entry(member.source.as_deref())
            .or_insert((0, member.time));
        entry.0 += 1;
        entry.1 = entry.1.min(member.time);
    }
    let mut outlets: Vec<Outlet> = by_source
        .into_iter()
        .map(|(source, (articles, first))| Outlet {
            source: source.map(str::to_owned),
            articles,
            first_published_at: first,
        })
        .collect();
    outlets.sort_by(|a, b| {
        (Reverse(a.articles), a.first_published_at, &a.source).cmp(&(
            Reverse(b.articles),
            b.first_published_at,
            &b.source,
        ))
    });
    outlets
}

/// The labels that name where a text came from, and what each names.
const REPRINT_LABELS: [(&str, bool); 6] = [
    ("原标题", false),
    ("转载自", true),
    ("转自", true),
    ("稿源", true),
    ("来源", true),
    ("出处", true),
];

/// The longest source name taken from a reprint line; longer is a sentence, not a name.
const MAX_SOURCE_CHARS: usize = 30;

/// What a text's "来源：…" / "转载自：…" / "原标题：…" lines say of its origin; `None` when it
/// has none. A source ends at the first space, punctuation mark or markup, a title at the end
/// of its line, a closing bracket or markup; book-title marks (《》) around a title are dropped.
/// Values are given as the text spells them.
///
/// ```
/// use tantivy_dedup::engine::reprint_line;
///
/// let text = "原标题：《秋粮收购进度过半》\n记者从国家粮食和物资储备局获悉……（来源：经济日报 责任编辑：李明）";
/// let reprint = reprint_line(text).unwrap();
/// assert_eq!(reprint.source.as_deref(), Some("经济日报"));
/// assert_eq!(reprint.original_title.as_deref(), Some("秋粮收购进度过半"));
/// assert_eq!(reprint_line("本文转载自:人民网，如有侵权请联系删除").unwrap().source.as_deref(), Some("人民网"));
/// assert_eq!(reprint_line("<p>转载自：长江日报</p>").unwrap().source.as_deref(), Some("长江日报"));
/// assert_eq!(reprint_line("今日来源地天气晴好"), None);
/// ```
pub fn reprint_line(text: &str) -> Option<Reprint> {
    let mut found = Reprint {
        source: None,
        original_title: None,
    };
    for (label, names_source) in REPRINT_LABELS {
        let slot = if names_source {
            &mut found.source
        } else {
            &mut found.original_title
        };
        if slot.is_some() {
            continue;
        }
        *slot = text.match_indices(label).find_map(|(at, _)| {
            let rest = &text[at + label.len()..];
            let value = rest
                .strip_prefix('：')
                .or_else(|| rest.strip_prefix(':'))?
                .trim_start();
            if names_source {
                let name: String = value
                    .chars()
                    .take_while(|&c| !c.is_whitespace() && !is_separator(c))
                    .collect();
                (!name.is_empty() && name.chars().count() <= MAX_SOURCE_CHARS).then_some(name)
            } else {
                let line = value.lines().next().unwrap_or_default();
                let title = line
                    .split(['）', ')', '】', '<'])
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .trim_start_matches('《')
                    .trim_end_matches('》')
                    .trim();
                (!title.is_empty()).then(|| title.to_owned())
            }
        });
    }
    (found.source.is_some() || found.original_title.is_some()).then_some(found)
}

/// Marks that end a source's name: punctuation, and the start of markup or an entity.
fn is_separator(c: char) -> bool {
    matches!(
        c,
        '，' | '。'
            | '；'
            | '、'
            | '）'
            | '】'
            | '」'
            | '|'
            | '｜'
            | ','
            | ';'
            | ')'
            | ']'
            | '/'
            | '<'
            | '&'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reprint_lines_name_sources_and_titles() {
        let source = |text: &str| reprint_line(text).and_then(|found| found.source);
        assert_eq!(
            source("【来源：央视新闻客户端】"),
            Some("央视新闻客户端".into())
        );
        assert_eq!(
            source("稿源: 中国新闻网 | 编辑：王"),
            Some("中国新闻网".into())
        );
        assert_eq!(source("转自：  澎湃新闻。"), Some("澎湃新闻".into()));
        // A label without a colon is a word in a sentence.
        assert_eq!(source("资金来源稳定"), None);
        // A label followed by a sentence is not a name.
        let long = format!("来源：{}", "很长".repeat(20));
        assert_eq!(source(&long), None);
        let title =
            reprint_line("原标题：多地迎来降温\n正文").and_then(|found| found.original_title);
        assert_eq!(title, Some("多地迎来降温".into()));
        assert_eq!(reprint_line(""), None);
    }

    #[test]
    fn outlets_rank_by_articles_then_first_time() {
        let member = |source: Option<&str>, time| Member {
            address: DocAddress::new(0, 0),
            sequence: 0,
            time,
            node: Fingerprint(0),
            via: None,
            source: source.map(str::to_owned),
        };
        let members = [
            member(Some("乙"), 5),
            member(Some("甲"), 9),
            member(None, 1),
            member(Some("乙"), 3),
            member(Some("丙"), 2),
        ];
        let ranked: Vec<(Option<String>, u64, Timestamp)> = outlets(&members)
            .into_iter()
            .map(|outlet| (outlet.source, outlet.articles, outlet.first_published_at))
            .collect();
        assert_eq!(
            ranked,
            [
                (Some("乙".into()), 2, 3),
                (None, 1, 1),
                (Some("丙".into()), 1, 2),
                (Some("甲".into()), 1, 9),
            ]
        );
    }
}
