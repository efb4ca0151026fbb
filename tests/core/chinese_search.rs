//! Chinese search as its users expect it: traditional and simplified characters find each
//! other, with the characters highlighted as written, on text written for the test. (The
//! query syntax is tested end to end in the service tests, `cli_index`.)

use tantivy_dedup::config::Config;
use tantivy_dedup::engine::{DedupIndex, SearchRequest};

const T0: i64 = 1_750_000_000;

/// Three different stories (invented): one in simplified characters, one in traditional ones,
/// and one on another subject.
const STORIES: [(&str, &str, &str); 3] = [
    (
        "simplified",
        "滨海高铁今日开通",
        "滨海至山城的高铁今天上午正式开通运营，全程三百二十公里，最高时速三百五十公里，沿线设站八座。",
    ),
    (
        "traditional",
        "臺灣高鐵新增班次",
        "臺灣高鐵公司宣布，暑假期間每週增開六十個班次，並延長售票時間，旅客可透過網路訂票。",
    ),
    (
        "metro",
        "地铁三号线延误",
        "今天早高峰，地铁三号线因信号故障延误二十分钟，运营方已安排接驳公交疏导乘客。",
    ),
];

fn indexed(dir: &std::path::Path) -> DedupIndex {
    let mut index = DedupIndex::create(dir, Config::default()).unwrap();
    let reader = index.article_reader();
    for (minute, (id, title, content)) in STORIES.iter().enumerate() {
        let line = serde_json::json!({
            "id": id,
            "title": title,
            "content": content,
            "published_at": T0 + 60 * minute as i64,
        })
        .to_string();
        index.add_article(reader.read_str(&line).unwrap()).unwrap();
    }
    index.commit().unwrap();
    index
}

/// The ids of the stories a query finds, sorted.
fn found(index: &DedupIndex, query: &str) -> Vec<String> {
    let page = index.searcher().search(&SearchRequest::new(query)).unwrap();
    let mut ids: Vec<String> = page
        .clusters
        .into_iter()
        .map(|cluster| cluster.representative.id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn traditional_and_simplified_characters_find_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let index = indexed(dir.path());
    let cases: [(&str, &[&str]); 5] = [
        ("高铁", &["simplified", "traditional"]),
        ("高鐵", &["simplified", "traditional"]),
        ("台湾", &["traditional"]),
        ("臺灣", &["traditional"]),
        ("\"高铁公司宣布\"", &["traditional"]),
    ];
    for (query, expected) in cases {
        assert_eq!(found(&index, query), expected, "{query}");
    }
    // The highlight marks the characters as written.
    let page = index
        .searcher()
        .search(&SearchRequest::new("高铁").highlight(true))
        .unwrap();
    let traditional = page
        .clusters
        .iter()
        .find(|cluster| cluster.representative.id == "traditional")
        .unwrap();
    let snippet = traditional.representative.snippet.as_deref().unwrap();
    assert!(snippet.contains("<em>高鐵</em>"), "{snippet}");
}
