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
