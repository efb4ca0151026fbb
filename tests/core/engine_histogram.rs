//! Histograms over long spans: a list page's `auto` width fits the index's span in at most
//! 200 buckets (a stray document dated 1990 beside this year's news gives year buckets, not an
//! error), its buckets equal a brute-force count at the width it chose, and a story of two
//! years gets a spread at a width that fits, where a fixed hourly one is refused.

use std::collections::{BTreeMap, BTreeSet};

use tantivy_dedup::Article;
use tantivy_dedup::config::Config;
use tantivy_dedup::engine::{
    AUTO_MAX_BUCKETS, DedupIndex, HistogramWidth, SearchRequest, StoryRequest,
};

use crate::engine_collapse::config;

/// 2024-05-01T00:00:00+08:00.
const MAY_2024: i64 = 1_714_492_800;
/// 1990-01-01T00:00:00+08:00.
const JAN_1990: i64 = 631_123_200;
const DAY: i64 = 86_400;
const ZONE_OFFSET: i64 = 8 * 3600;

const STORY: &str = "市气象台发布暴雨橙色预警，预计未来六小时内城区及东部山区将出现五十毫米以上降雨，\
                     请市民减少外出，注意防范城市内涝和山洪地质灾害。";
const OTHERS: [&str; 4] = [
    "新建的城市图书馆今天向市民开放，馆内藏书一百二十万册，设有少儿阅览区和古籍修复展示区。",
    "本市地铁五号线南延段完成全线轨道铺设，预计明年春季开通试运营，沿线将新增六座车站。",
    "全市中小学今年新增学位两万个，新建改扩建学校三十所，缓解部分片区入学紧张问题。",
    "第十届国际马拉松赛将于下月举行，报名人数突破八万，组委会提醒选手合理安排赛前训练。",
];

fn article(id: &str, content: &str, time: i64) -> Article {
    Article {
        id: id.into(),
        source: Some("新华网".into()),
        content: content.into(),
        published_at: Some(time),
        ..Default::default()
    }
}

/// Articles and distinct roots per bucket of `width` seconds from midnight UTC+8 (from a
/// Monday for whole weeks), empty buckets between included.
fn brute_force(documents: &[(i64, String)], width: i64) -> Vec<(i64, u64, u64)> {
    let origin = -ZONE_OFFSET + if width % (7 * DAY) == 0 { 4 * DAY } else { 0 };
    let mut buckets: BTreeMap<i64, (u64, BTreeSet<&str>)> = BTreeMap::new();
    for (time, root) in documents {
        let start = origin + (time - origin).div_euclid(width) * width;
        let entry = buckets.entry(start).or_default();
        entry.0 += 1;
        entry.1.insert(root);
    }
    let (Some(&first), Some(&last)) = (buckets.keys().next(), buckets.keys().last()) else {
        return Vec::new();
    };
    (0..=(last - first) / width)
        .map(|step| {
            let start = first + step * width;
            buckets
                .get(&start)
                .map_or((start, 0, 0), |(articles, roots)| {
                    (start, *articles, roots.len() as u64)
                })
        })
        .collect()
}

#[test]
fn an_auto_histogram_fits_any_span() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let mut documents = Vec::new();
    let mut add = |index: &mut DedupIndex, article: Article| {
        let time = article.published_at.unwrap();
        let decision = index.add_article(article).unwrap();
        documents.push((time, decision.root.to_string()));
    };
    for (slot, text) in OTHERS.iter().enumerate() {
        add(
            &mut index,
            article(&format!("o{slot}"), text, MAY_2024 + slot as i64 * 5 * 3600),
        );
    }
    add(&mut index, article("s1", STORY, MAY_2024 + 7200));
    index.commit().unwrap();
    let searcher = index.searcher();

    // A day of news: hours.
    let page = searcher
        .search(&SearchRequest::new("").histogram(HistogramWidth::Auto))
        .unwrap();
    assert_eq!(page.histogram_interval, Some(3600));

    // One document of 1990 beside them: 35 years fit in year buckets.
    add(&mut index, article("old", OTHERS[0], JAN_1990 + 3 * DAY));
    index.commit().unwrap();
    let searcher = index.searcher();
    let fixed_daily = SearchRequest::new("").histogram("1d".parse().unwrap());
    let refused = searcher.search(&fixed_daily).unwrap_err().to_string();
    assert!(refused.contains("buckets"), "{refused}");
    let page = searcher
        .search(&SearchRequest::new("").histogram(HistogramWidth::Auto))
        .unwrap();
    let width = page.histogram_interval.unwrap() as i64;
    assert_eq!(width, 365 * DAY);
    let buckets: Vec<(i64, u64, u64)> = page
        .histogram
        .unwrap()
        .iter()
        .map(|bucket| (bucket.start, bucket.articles, bucket.clusters))
        .collect();
    assert!(buckets.len() as u64 <= AUTO_MAX_BUCKETS);
    assert_eq!(buckets, brute_force(&documents, width));

    // Narrowed by `from`: the span that is left decides (a day: hours again).
    let mut recent = SearchRequest::new("").histogram(HistogramWidth::Auto);
    recent.from = Some(MAY_2024);
    let page = searcher.search(&recent).unwrap();
    assert_eq!(page.histogram_interval, Some(3600));
}

#[test]
fn a_story_of_two_years_gets_a_spread_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    // A window long enough for one story to last two years.
    let mut long_window: Config = config();
    long_window.dedup.window = std::time::Duration::from_secs(1_000 * DAY as u64);
    let mut index = DedupIndex::create(dir.path(), long_window).unwrap();
    let first = index
        .add_article(article("first", STORY, MAY_2024))
        .unwrap();
    let again = index
        .add_article(article(
            "again",
            &format!("{STORY}（完）"),
            MAY_2024 + 730 * DAY,
        ))
        .unwrap();
    assert_eq!(first.root, again.root, "one story");
    index.commit().unwrap();
    let searcher = index.searcher();

    let hourly = StoryRequest::default().interval("1h".parse().unwrap());
    let refused = searcher.story(first.root, &hourly).unwrap_err().to_string();
    assert!(refused.contains("buckets"), "{refused}");
    let story = searcher
        .story(first.root, &StoryRequest::default())
        .unwrap()
        .unwrap();
    assert_eq!(story.interval, 7 * DAY as u64);
    assert!(story.histogram.len() as u64 <= AUTO_MAX_BUCKETS);
    let articles: u64 = story.histogram.iter().map(|bucket| bucket.articles).sum();
    assert_eq!(articles, 2);
}
