//! Fields of one's own (`[fields.NAME]`): a schema with one of every type, documents read by
//! it and added to a real index on disk, their values found with plain Tantivy queries,
//! wrong types refused with the field named, `from` keys, and the settings an index keeps.

use std::ops::Bound;

use tantivy::collector::{Count, TopDocs};
use tantivy::query::{Query, RangeQuery, TermQuery};
use tantivy::schema::{Facet, IndexRecordOption};
use tantivy::{DateTime, Index, Term};
use tantivy_dedup::article::ArticleReader;
use tantivy_dedup::config::Config;
use tantivy_dedup::engine::DedupIndex;

const SETTINGS: &str = r#"
[dedup]
fields = ["content", "summary"]

[fields.published_at]
from = "date"

[fields.author]
type = "string"

[fields.keywords]
type = "string"

[fields.summary]
type = "text"

[fields.likes]
type = "u64"
from = "like_count"

[fields.delta]
type = "i64"

[fields.sentiment]
type = "f64"

[fields.verified]
type = "bool"

[fields.crawled]
type = "date"

[fields.platform]
type = "facet"
"#;

const LINES: [&str; 3] = [
    r#"{"id": "a", "content": "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二。", "date": "2024-05-01T08:00:00+08:00",
        "author": "张三", "keywords": ["经济", "统计"], "summary": "经济数据发布", "like_count": 120, "delta": -3,
        "sentiment": 0.75, "verified": true, "crawled": 1714521700, "platform": "/weibo/repost"}"#,
    r#"{"id": "b", "content": "东港市今年前十个月港口货物吞吐量达到一亿两千万吨，同比增长百分之六点八。", "date": 1714600000,
        "author": "李四", "keywords": "港口", "like_count": 5, "delta": 9, "sentiment": -0.2, "verified": false,
        "platform": "/wechat/article"}"#,
    r#"{"id": "c", "content": "防汛物资储备充足，仓库管理规范有序，各地做好了应对强降雨的准备。", "date": 1714700000,
        "platform": "/weibo/original"}"#,
];

fn config() -> Config {
    Config::from_toml_str(SETTINGS).unwrap()
}

/// The index with the three documents, committed, and the Tantivy index under it.
fn indexed(dir: &std::path::Path) -> (DedupIndex, Index) {
    let mut index = DedupIndex::create(dir, config()).unwrap();
    let reader = index.article_reader();
    for line in LINES {
        let record = reader.read_str(line).unwrap();
        index.add_article(record).unwrap();
    }
    index.commit().unwrap();
    (index, Index::open_in_dir(dir).unwrap())
}

/// The ids of the documents a query matches, sorted.
fn ids(index: &Index, query: &dyn Query) -> Vec<String> {
    let reader = index.reader().unwrap();
    let searcher = reader.searcher();
    let id = index.schema().get_field("id").unwrap();
    let mut ids: Vec<String> = searcher
        .search(query, &TopDocs::with_limit(10).order_by_score())
        .unwrap()
        .into_iter()
        .map(|(_, address)| {
            let document: tantivy::TantivyDocument = searcher.doc(address).unwrap();
            tantivy::schema::Value::as_str(&document.get_first(id).unwrap())
                .unwrap()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn own_fields_are_indexed_by_type_and_found_with_tantivy_queries() {
    let dir = tempfile::tempdir().unwrap();
    let (index, tantivy) = indexed(dir.path());
    let schema = tantivy.schema();
    let field = |name: &str| schema.get_field(name).unwrap();
    let term = |query: Term| TermQuery::new(query, IndexRecordOption::Basic);

    let cases: Vec<(Box<dyn Query>, Vec<&str>)> = vec![
        (
            Box::new(term(Term::from_field_text(field("author"), "张三"))),
            vec!["a"],
        ),
        (
            Box::new(term(Term::from_field_text(field("keywords"), "统计"))),
            vec!["a"],
        ),
        (
            Box::new(term(Term::from_field_text(field("keywords"), "港口"))),
            vec!["b"],
        ),
        (
            Box::new(term(Term::from_field_u64(field("likes"), 120))),
            vec!["a"],
        ),
        (
            Box::new(term(Term::from_field_i64(field("delta"), -3))),
            vec!["a"],
        ),
        (
            Box::new(term(Term::from_field_bool(field("verified"), false))),
            vec!["b"],
        ),
        (
            Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_u64(field("likes"), 10)),
                Bound::Unbounded,
            )),
            vec!["a"],
        ),
        (
            Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_f64(field("sentiment"), -1.0)),
                Bound::Excluded(Term::from_field_f64(field("sentiment"), 0.0)),
            )),
            vec!["b"],
        ),
        (
            Box::new(term(Term::from_field_date(
                field("crawled"),
                DateTime::from_timestamp_secs(1_714_521_700),
            ))),
            vec!["a"],
        ),
        (
            Box::new(term(Term::from_facet(
                field("platform"),
                &Facet::from_text("/wechat/article").unwrap(),
            ))),
            vec!["b"],
        ),
        // `from = "date"`: the time came from the input key `date`.
        (
            Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_date(
                    field("published_at"),
                    DateTime::from_timestamp_secs(1_714_600_000),
                )),
                Bound::Unbounded,
            )),
            vec!["b", "c"],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(ids(&tantivy, query.as_ref()), expected, "{query:?}");
    }
    // The own text field is searched like title and content (its words are only in it).
    let request = tantivy_dedup::engine::SearchRequest {
        query: "数据发布".to_owned(),
        ..Default::default()
    };
    let page = index.searcher().search(&request).unwrap();
    assert_eq!(page.clusters[0].representative.id, "a");
    // A facet prefix counts both Weibo documents.
    let reader = tantivy.reader().unwrap();
    let mut facets = tantivy::collector::FacetCollector::for_field("platform");
    facets.add_facet("/weibo");
    let counts = reader
        .searcher()
        .search(&tantivy::query::AllQuery, &facets)
        .unwrap();
    let weibo: Vec<(String, u64)> = counts
        .get("/weibo")
        .map(|(facet, count)| (facet.to_string(), count))
        .collect();
    assert_eq!(
        weibo,
        [
            ("/weibo/original".to_owned(), 1),
            ("/weibo/repost".to_owned(), 1)
        ]
    );
    // Fast fields are columns.
    let searcher = reader.searcher();
    let mut likes: Vec<u64> = searcher
        .segment_readers()
        .iter()
        .flat_map(|segment| {
            let column = segment.fast_fields().u64("likes").unwrap();
            (0..segment.max_doc())
                .flat_map(|doc| column.values_for_doc(doc).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
        .collect();
    likes.sort_unstable();
    assert_eq!(likes, [5, 120]);

    // The stored values come back with the document.
    let view = index.searcher().document("a").unwrap().unwrap();
    let shown = serde_json::to_value(&view).unwrap();
    assert_eq!(
        shown["fields"],
        serde_json::json!({
            "author": "张三", "keywords": ["经济", "统计"], "summary": "经济数据发布", "likes": 120,
            "delta": -3, "sentiment": 0.75, "verified": true, "crawled": 1_714_521_700,
            "platform": "/weibo/repost"
        })
    );
    let plain = index.searcher().document("c").unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&plain).unwrap()["fields"],
        serde_json::json!({"platform": "/weibo/original"})
    );
    assert_eq!(
        tantivy
            .reader()
            .unwrap()
            .searcher()
            .search(&tantivy::query::AllQuery, &Count)
            .unwrap(),
        3
    );
}

#[test]
fn an_own_text_field_in_dedup_fields_feeds_the_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let reader = index.article_reader();
    let line = |summary: &str| {
        format!(
            r#"{{"id": "x", "content": "同一段正文内容，用来比较摘要字段。", "summary": "{summary}"}}"#
        )
    };
    let first = index
        .add_article(
            reader
                .read_str(&line("今年粮食总产量再创新高，秋收工作进展顺利。"))
                .unwrap(),
        )
        .unwrap();
    let other = index
        .add_article(
            reader
                .read_str(&line("沿海地区迎来强台风，多地启动应急响应。"))
                .unwrap(),
        )
        .unwrap();
    assert_ne!(first.simhash, other.simhash);
    // The index's fingerprint is the one the signer makes without an index.
    let signer = tantivy_dedup::dedup::Signer::new(&config().dedup);
    let record = reader
        .read_str(&line("沿海地区迎来强台风，多地启动应急响应。"))
        .unwrap();
    assert_eq!(signer.sign_record(&record).fingerprint, other.simhash);
}

#[test]
fn wrong_types_are_refused_with_the_field_named() {
    let reader = ArticleReader::new(&config().fields);
    for (pair, needle) in [
        (
            r#""like_count": "abc""#,
            r#"field `like_count` must be an integer of 0 or more, got "abc""#,
        ),
        (r#""delta": "3""#, "field `delta` must be an integer"),
        (r#""sentiment": true"#, "field `sentiment` must be a number"),
        (r#""verified": 1"#, "field `verified` must be true or false"),
        (
            r#""crawled": "next week""#,
            "field `crawled` must be a time",
        ),
        (
            r#""platform": "weibo/repost""#,
            "field `platform` must be a path starting with `/`",
        ),
        (
            r#""keywords": ["a", {}]"#,
            "field `keywords` must be a string",
        ),
        (r#""date": "soon""#, "field `date` must be a time"),
    ] {
        let line = format!(r#"{{"id": "a", "content": "x", {pair}}}"#);
        let message = reader.read_str(&line).unwrap_err().to_string();
        assert!(message.contains(needle), "{line}: {message}");
    }
    // Keys the schema does not declare are ignored, whatever they hold.
    assert!(
        reader
            .read_str(r#"{"id": "a", "content": "x", "likes": "not read: from is like_count"}"#)
            .is_ok()
    );
}

#[test]
fn the_settings_round_trip_and_a_changed_field_set_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let (index, _) = indexed(&path);
    drop(index);
    // Reopened without settings: the index's own, the same as created.
    let reopened = DedupIndex::open(&path).unwrap();
    assert_eq!(reopened.config().fields, config().fields);
    assert_eq!(reopened.searcher().stats().unwrap().documents, 3);
    drop(reopened);
    // The same settings open it; so does another input key (`from` is not part of the index).
    DedupIndex::open_or_create(&path, Some(config())).unwrap();
    let renamed =
        Config::from_toml_str(&SETTINGS.replace("from = \"like_count\"", "from = \"likes_total\""))
            .unwrap();
    DedupIndex::open_or_create(&path, Some(renamed)).unwrap();
    for changed in [
        SETTINGS.replace(
            "[fields.delta]\ntype = \"i64\"",
            "[fields.delta]\ntype = \"f64\"",
        ),
        SETTINGS.replace("[fields.verified]\ntype = \"bool\"\n", ""),
        format!("{SETTINGS}\n[fields.region]\ntype = \"string\"\n"),
        SETTINGS.replace(
            "[fields.author]\ntype = \"string\"",
            "[fields.author]\ntype = \"string\"\nstored = false",
        ),
    ] {
        let config = Config::from_toml_str(&changed).unwrap();
        let message = match DedupIndex::open_or_create(&path, Some(config)) {
            Ok(_) => panic!("opened with other fields:\n{changed}"),
            Err(error) => error.to_string(),
        };
        assert!(message.contains("fields cannot change"), "{message}");
    }
}

/// A document of the sorted-list test: its story's root and its own values, as sent.
struct Valued {
    root: u64,
    likes: Vec<u64>,
    sentiment: Option<f64>,
    delta: Option<i64>,
    crawled: Option<i64>,
}

/// Lists ordered by each number and date field of one's own, both ways, equal brute force
/// over the documents sent: a story's value is the largest (`desc`) or smallest (`asc`) of its
/// documents' values, every value of a multi-valued field included; stories without one come
/// last; equal values go by score (all equal here), then the smaller root. A cursor walk gives
/// the same list. Text and string fields, unknown fields and unknown directions are refused.
#[test]
fn a_list_sorted_by_an_own_field_equals_brute_force() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use tantivy_dedup::engine::{Cursor, SearchRequest, SortValue, compare_values};

    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let reader = index.article_reader();
    let mut rng = SmallRng::seed_from_u64(0x5047_f1e1d);
    let mut docs: Vec<Valued> = Vec::new();
    let cities = [
        "杭州", "成都", "西安", "武汉", "青岛", "昆明", "兰州", "厦门",
    ];
    for story in 0..60 {
        let city = cities[story % cities.len()];
        let text = format!(
            "{city}第{story}届科技周开幕，{}家企业携新品参展，预计接待观众{}万人次。主办方介绍，本届展会设{}个展区。",
            rng.random_range(10..900),
            rng.random_range(2..90),
            rng.random_range(3..20)
        );
        for copy in 0..rng.random_range(1..5) {
            let mut line = serde_json::json!({"id": format!("{story}-{copy}"), "content": text});
            let likes: Vec<u64> = match rng.random_range(0..10) {
                0..=1 => Vec::new(),
                2 => vec![rng.random_range(0..500), rng.random_range(0..500)],
                _ => vec![rng.random_range(0..500)],
            };
            match likes.as_slice() {
                [] => {}
                [one] => line["like_count"] = (*one).into(),
                several => line["like_count"] = several.into(),
            }
            let sentiment = rng
                .random_bool(0.8)
                .then(|| f64::from(rng.random_range(-40..40i32)) / 16.0);
            let delta = rng.random_bool(0.7).then(|| rng.random_range(-30..30i64));
            let crawled = rng
                .random_bool(0.8)
                .then(|| 1_714_521_600 + rng.random_range(0..40i64) * 3600);
            for (key, value) in [
                ("sentiment", sentiment.map(serde_json::Value::from)),
                ("delta", delta.map(serde_json::Value::from)),
                ("crawled", crawled.map(serde_json::Value::from)),
            ] {
                if let Some(value) = value {
                    line[key] = value;
                }
            }
            let decision = index
                .add_article(reader.read_str(&line.to_string()).unwrap())
                .unwrap();
            docs.push(Valued {
                root: decision.root.0,
                likes,
                sentiment,
                delta,
                crawled,
            });
            if docs.len().is_multiple_of(25) {
                index.commit().unwrap();
            }
        }
    }
    index.commit().unwrap();
    let searcher = index.searcher();
    assert!(searcher.stats().unwrap().segments >= 2);

    type Values = fn(&Valued) -> Vec<SortValue>;
    let fields: [(&str, Values); 4] = [
        ("likes", |doc| {
            doc.likes.iter().map(|&v| SortValue::Unsigned(v)).collect()
        }),
        ("sentiment", |doc| {
            doc.sentiment.map(SortValue::Float).into_iter().collect()
        }),
        ("delta", |doc| {
            doc.delta.map(SortValue::Signed).into_iter().collect()
        }),
        ("crawled", |doc| {
            doc.crawled.map(SortValue::Signed).into_iter().collect()
        }),
    ];
    for (field, values) in fields {
        for descending in [true, false] {
            // root -> the story's value: the first of its documents' values in the order.
            let mut stories: std::collections::BTreeMap<u64, Option<SortValue>> =
                Default::default();
            for doc in &docs {
                let value = stories.entry(doc.root).or_default();
                for candidate in values(doc) {
                    if compare_values(Some(candidate), *value, descending).is_lt() {
                        *value = Some(candidate);
                    }
                }
            }
            let mut expected: Vec<(u64, Option<SortValue>)> = stories.into_iter().collect();
            expected.sort_by(|a, b| compare_values(a.1, b.1, descending).then(a.0.cmp(&b.0)));
            assert!(expected.iter().any(|story| story.1.is_none()), "{field}");
            let order = format!("{field}:{}", if descending { "desc" } else { "asc" });
            let request = SearchRequest::new("").order(order.parse().unwrap());
            let page = searcher.search(&request.clone().page(0, 1000)).unwrap();
            let listed: Vec<(u64, Option<SortValue>)> = page
                .clusters
                .iter()
                .map(|cluster| (cluster.root.0, cluster.sort_value))
                .collect();
            assert_eq!(listed, expected, "{order}");
            let mut walk = request.page(0, 7).cursor(Cursor::start());
            let mut walked = Vec::new();
            loop {
                let page = searcher.search(&walk).unwrap();
                walked.extend(
                    page.clusters
                        .iter()
                        .map(|cluster| (cluster.root.0, cluster.sort_value)),
                );
                let Some(next) = page.next_cursor else { break };
                walk.cursor = Some(next.parse().unwrap());
            }
            assert_eq!(walked, expected, "{order}, walked");
        }
    }
    for (order, refusal) in [
        ("author:desc", "holds text"),
        ("summary:asc", "cannot sort by"),
        ("nosuch:asc", "cannot sort by"),
    ] {
        let request = SearchRequest::new("").order(order.parse().unwrap());
        let error = searcher.search(&request).unwrap_err().to_string();
        assert!(error.contains(refusal), "{order}: {error}");
    }
    assert!(
        "likes:up"
            .parse::<tantivy_dedup::engine::ListOrder>()
            .is_err()
    );
    assert!(":desc".parse::<tantivy_dedup::engine::ListOrder>().is_err());
}
