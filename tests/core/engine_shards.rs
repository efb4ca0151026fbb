//! An index split into shards by story, in the library alone: the documents of one index
//! (which placed them) added to 1 to 4 shard indexes, each document to the shard that owns its
//! root, placed as the one index placed it. The merge of the shards' parts
//! ([`merge_pages`]), scored by the sums of their statistics, must equal the one index's list
//! page, field for field, for random requests (sort, keywords, page, minimum size, facets,
//! histogram, highlights, trend window, minimum of recent articles, members); and the near-duplicate checks merged must equal its check. A story
//! of 100,000 members lives on one shard, with exact counts.

use proptest::prelude::*;
use tantivy_dedup::engine::{
    DedupIndex, ListOrder, Placed, SearchRequest, ShardSpec, Sort, TermStatistics,
    merge_near_duplicates, merge_pages,
};
use tantivy_dedup::{Article, Decision};
use tempfile::TempDir;

use crate::engine_collapse::{BASE_TIME, config, corpus};

/// Words of the corpus's stories, searched for alone or together.
const WORDS: [&str; 8] = [
    "地铁", "记者", "今天", "全市", "预计", "发布", "城市", "项目",
];

/// One index and the same documents split into `count` shards.
struct Split {
    _dir: TempDir,
    whole: DedupIndex,
    shards: Vec<DedupIndex>,
    articles: Vec<Article>,
}

fn split(count: usize) -> Split {
    let dir = tempfile::tempdir().unwrap();
    let articles = corpus(7);
    let mut whole = DedupIndex::create(&dir.path().join("whole"), config()).unwrap();
    let decisions: Vec<Decision> = articles
        .iter()
        .map(|article| whole.add_article(article.clone()).unwrap())
        .collect();
    whole.commit().unwrap();
    let mut shards: Vec<DedupIndex> = (0..count)
        .map(|shard| {
            let path = dir.path().join(format!("shard-{shard}"));
            DedupIndex::open_or_create_shard(&path, Some(config())).unwrap()
        })
        .collect();
    for (article, decision) in articles.iter().zip(&decisions) {
        let shard = &mut shards[ShardSpec::owner(decision.root, count)];
        let placed = Placed {
            node: decision.simhash,
            root: decision.root,
            via: None,
            duplicate: decision.duplicate,
            time: article.published_at.unwrap(),
            reason: decision.reason,
            chrome: Default::default(),
        };
        let prepared = shard.prepare(article.clone()).placed(placed);
        shard.add(prepared).unwrap();
    }
    for shard in &mut shards {
        shard.commit().unwrap();
    }
    Split {
        _dir: dir,
        whole,
        shards,
        articles,
    }
}

/// The shards' list page, as a coordinator makes it: their parts scored by the sums of their
/// statistics (an `auto` histogram sized to the span of all their times), merged.
fn merged(shards: &[DedupIndex], request: &SearchRequest) -> tantivy_dedup::engine::SearchPage {
    let mut statistics = TermStatistics::default();
    for shard in shards {
        statistics.add(&shard.searcher().term_statistics(request).unwrap());
    }
    let request = &request
        .clone()
        .fix_histogram(statistics.published, config().index.time_zone);
    let pages = shards
        .iter()
        .map(|shard| {
            shard
                .searcher()
                .shard_page(request, Some(&statistics))
                .unwrap()
        })
        .collect();
    merge_pages(pages, request.shape()).unwrap()
}

/// Every built-in order, and the publication time's both ways (a date field: the orders by a
/// field's value).
fn orders() -> Vec<ListOrder> {
    let mut orders: Vec<ListOrder> = Sort::ALL.map(|(_, sort)| sort.into()).to_vec();
    orders.extend(["published_at:desc", "published_at:asc"].map(|order| order.parse().unwrap()));
    orders
}

fn request_strategy() -> impl Strategy<Value = SearchRequest> {
    (
        prop::sample::select(orders()),
        prop::collection::vec(prop::sample::select(WORDS.to_vec()), 0..3),
        0usize..60,
        1usize..25,
        0u64..4,
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["1h", "1d", "30m", "auto"])),
        any::<bool>(),
        // The trend window: its length, its end (the corpus is published a minute apart from
        // BASE_TIME on), a minimum of recent articles; and the members listed.
        (
            prop::sample::select(vec!["30m", "1h", "3h"]),
            0i64..300,
            0u64..3,
            0usize..4,
        ),
    )
        .prop_map(
            |(
                sort,
                words,
                offset,
                limit,
                min_size,
                facets,
                histogram,
                highlight,
                (span, end, min_recent, members),
            )| {
                let mut request = SearchRequest::new(words.join(" "))
                    .order(sort)
                    .page(offset, limit)
                    .min_cluster_size(min_size)
                    .highlight(highlight)
                    .facet_limit(3)
                    .trend(span.parse().unwrap(), Some(BASE_TIME + end * 60))
                    .min_recent(min_recent)
                    .members(members);
                if facets {
                    request = request.facets(["source"]);
                }
                if let Some(interval) = histogram {
                    request = request.histogram(interval.parse().unwrap());
                }
                request
            },
        )
}

#[test]
fn merged_shard_pages_equal_one_index() {
    for count in 1..=4 {
        let split = split(count);
        let config = ProptestConfig {
            cases: 48,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        proptest!(config, |(request in request_strategy())| {
            let expected = split.whole.searcher().search(&request).unwrap();
            prop_assert_eq!(merged(&split.shards, &request), expected, "{} shards", count);
        });
        // Near-duplicate checks: every shard's matches merged.
        for article in split.articles.iter().step_by(7) {
            let expected = split.whole.searcher().near_duplicates(article, 5).unwrap();
            let answers = split
                .shards
                .iter()
                .map(|shard| shard.searcher().near_duplicates(article, 5).unwrap())
                .collect();
            let merged = merge_near_duplicates(expected.simhash, answers, 5);
            assert_eq!(merged, expected, "{count} shards: {}", article.id);
        }
    }
}

#[test]
fn a_shard_refuses_documents_it_was_not_given_a_place_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut shard = DedupIndex::open_or_create_shard(dir.path(), Some(config())).unwrap();
    let article = corpus(7).remove(0);
    let error = shard.add_article(article).unwrap_err();
    assert!(error.to_string().contains("coordinator"), "{error}");
}

#[test]
fn a_story_of_100000_members_lives_on_one_shard_with_exact_counts() {
    const MEMBERS: usize = 100_000;
    const COUNT: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let mut shards: Vec<DedupIndex> = (0..COUNT)
        .map(|shard| {
            let path = dir.path().join(format!("shard-{shard}"));
            DedupIndex::open_or_create_shard(&path, Some(config())).unwrap()
        })
        .collect();
    // One wire story reprinted 100,000 times (one node, one root), and one other story.
    let text =
        "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二，就业形势总体稳定。";
    let root = tantivy_dedup::Fingerprint(0x5a5a_1234_abcd_0001);
    let other_root = tantivy_dedup::Fingerprint(0x0123_4567_89ab_cdef);
    let owner = ShardSpec::owner(root, COUNT);
    let sources = ["新华网", "人民网", "央视网", "澎湃新闻", "中国新闻网"];
    for (number, target) in (0..=MEMBERS).map(|number| {
        let target = if number == MEMBERS { other_root } else { root };
        (number, target)
    }) {
        let article = Article {
            id: format!("m{number}"),
            content: if target == root {
                text.to_owned()
            } else {
                "另一条新闻：城市地铁新线今天开通。".to_owned()
            },
            source: Some(sources[number % sources.len()].to_owned()),
            published_at: Some(1_700_000_000 + number as i64),
            ..Article::default()
        };
        let placed = Placed {
            node: target,
            root: target,
            via: None,
            duplicate: number > 0 && target == root,
            time: article.published_at.unwrap(),
            reason: None,
            chrome: Default::default(),
        };
        let shard = &mut shards[ShardSpec::owner(target, COUNT)];
        let prepared = shard.prepare(article).placed(placed);
        shard.add(prepared).unwrap();
    }
    for shard in &mut shards {
        shard.commit().unwrap();
    }
    let request = SearchRequest::new("")
        .sort(Sort::SimilarDesc)
        .page(0, 10)
        .facets(["source"]);
    let pages: Vec<_> = shards
        .iter()
        .map(|shard| shard.searcher().shard_page(&request, None).unwrap())
        .collect();
    assert_eq!(pages[owner].clusters[0].cluster_size, MEMBERS as u64);
    for (shard, page) in pages.iter().enumerate() {
        let held = page.clusters.iter().any(|cluster| cluster.root == root);
        assert_eq!(
            held,
            shard == owner,
            "shard {shard}: the story lives on its owner only"
        );
    }
    let page = merge_pages(pages, request.shape()).unwrap();
    assert_eq!(page.total_hits, MEMBERS as u64 + 1);
    assert_eq!(page.total_clusters, 2);
    assert_eq!(page.clusters[0].root, root);
    assert_eq!(page.clusters[0].cluster_size, MEMBERS as u64);
    assert_eq!(page.clusters[0].hits, MEMBERS as u64);
    assert_eq!(
        page.clusters[0].representative.id, "m0",
        "the first inserted"
    );
    let facets = &page.facets.unwrap()["source"];
    let counted: u64 = facets.iter().map(|count| count.articles).sum();
    assert_eq!(counted, MEMBERS as u64 + 1);
    let story = shards[owner]
        .searcher()
        .story(root, &Default::default())
        .unwrap()
        .unwrap();
    assert_eq!(story.cluster_size, MEMBERS as u64);
    assert_eq!(story.first_published.id, "m0");
}
