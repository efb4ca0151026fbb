//! Dedup on your own Tantivy schema: a monitoring platform's index with its own fields
//! (sentiment, a platform facet, likes), a filtered list page collapsed by story with
//! "N similar" counts, and a story's detail page.
//!
//! Run with `cargo run --example own_schema` (it needs no cargo feature:
//! `--no-default-features` works too). The posts below were written for this example; accounts,
//! places and figures are made up.
//!
//! What the crate adds to a plain Tantivy program is three things:
//! - `DedupFields::add_to` puts the dedup fields into your `SchemaBuilder`;
//! - a `DedupWriter` beside your `IndexWriter` adds each document with its cluster's root,
//!   and replays the clusters when the index is opened again;
//! - `CollapseCollector` collapses any query of yours by cluster, with exact cluster sizes,
//!   and `DedupFields::cluster_query` lists a cluster.

use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, RangeQuery, TermQuery};
use tantivy::schema::{
    DateOptions, FAST, Facet, FacetOptions, INDEXED, IndexRecordOption, STORED, STRING, Schema,
    Value,
};
use tantivy::{DateTime, Index, IndexWriter, Order, TantivyDocument, Term, doc};
use tantivy_dedup::DedupConfig;
use tantivy_dedup::engine::schema::{DedupFields, chinese_text};
use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupWriter, Sort};

/// Invented posts: (id, platform, sentiment, likes, minutes after the first, text).
const POSTS: &[(&str, &str, i64, u64, i64, &str)] = &[
    (
        "w1",
        "/weibo/original",
        -1,
        5200,
        0,
        "临河市化工园区今天上午发生一起储罐泄漏事故，现场散发刺鼻气味，周边三个村庄的居民已经\
         紧急疏散。消防和环保部门正在处置，目前暂无人员伤亡报告，事故原因正在调查中。",
    ),
    (
        "w2",
        "/weibo/repost",
        -1,
        310,
        12,
        "转发：临河市化工园区今天上午发生一起储罐泄漏事故，现场散发刺鼻气味，周边三个村庄的居民\
         已经紧急疏散。消防和环保部门正在处置，目前暂无人员伤亡报告，事故原因正在调查中。",
    ),
    (
        "n1",
        "/news/portal",
        -1,
        0,
        40,
        "【临河新闻网】临河市化工园区今天上午发生一起储罐泄漏事故，现场散发刺鼻气味，周边三个\
         村庄的居民已经紧急疏散。消防和环保部门正在处置，目前暂无人员伤亡报告，事故原因正在\
         调查中。（编辑：王林）",
    ),
    (
        "w3",
        "/weibo/repost",
        -1,
        95,
        55,
        "临河市化工园区今天上午发生一起储罐泄漏事故！现场散发刺鼻气味，周边三个村庄的居民已经\
         紧急疏散。消防和环保部门正在处置，目前暂无人员伤亡报告，事故原因正在调查中。大家注意安全",
    ),
    (
        "w4",
        "/weibo/original",
        -1,
        870,
        70,
        "临河市自来水厂昨晚停电检修，城东片区停水近十个小时，不少居民反映事先没有收到通知，\
         早上起来无法洗漱做饭，希望有关部门今后提前发布停水公告。",
    ),
    (
        "n2",
        "/news/portal",
        1,
        0,
        90,
        "临河市第二届桃花节今天开幕，十万亩桃林进入盛花期，预计节会期间将接待游客五十万人次。\
         主办方开通了三条旅游专线公交，并在景区周边增设了四个临时停车场。",
    ),
    (
        "w5",
        "/weibo/repost",
        1,
        1400,
        100,
        "临河市第二届桃花节今天开幕，十万亩桃林进入盛花期，预计节会期间将接待游客五十万人次。\
         主办方开通了三条旅游专线公交，并在景区周边增设了四个临时停车场。周末约起来！",
    ),
];

const FIRST_POST: i64 = 1_714_521_600; // 2024-05-01 08:00 +08:00

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. Your schema, plus the dedup fields. Text is segmented by the crate's tokenizer
    //    (normalisation + jieba), registered on the index below.
    let config = DedupConfig::default();
    let text = chinese_text() | STORED;
    let mut builder = Schema::builder();
    let id = builder.add_text_field("id", STRING | STORED);
    let body = builder.add_text_field("body", text);
    let platform = builder.add_facet_field("platform", FacetOptions::default().set_stored());
    let sentiment = builder.add_i64_field("sentiment", INDEXED | FAST | STORED);
    let likes = builder.add_u64_field("likes", FAST | STORED);
    let published = builder.add_date_field(
        "published",
        DateOptions::default().set_indexed().set_fast().set_stored(),
    );
    let dedup_fields = DedupFields::add_to(&mut builder, &config)?;
    let schema = builder.build();

    let dir = tempfile::tempdir()?;
    let index = Index::create_in_dir(dir.path(), schema.clone())?;
    tantivy_dedup::engine::register_tokenizer(&index);

    // 2. Your writer, and the forest beside it.
    let mut writer: IndexWriter = index.writer(50_000_000)?;
    let mut dedup = DedupWriter::builder(config.clone())
        .id_field(id)
        .time_field(published)
        .text_fields([body])
        .location(dir.path())
        .open(&index)?;
    for &(post_id, path, mood, like_count, minutes, content) in POSTS {
        let document = doc!(
            id => post_id,
            body => content,
            platform => Facet::from(path),
            sentiment => mood,
            likes => like_count,
            published => DateTime::from_timestamp_secs(FIRST_POST + 60 * minutes),
        );
        let decision = dedup.add_document(&writer, document)?;
        println!(
            "{post_id}: root {}{}",
            decision.root,
            if decision.duplicate {
                " (joined a story)"
            } else {
                ""
            }
        );
    }
    dedup.commit(&mut writer)?;

    // 3. A list page: negative posts on Weibo that mention the chemical park, one line per
    //    story, most similar first. The filter is yours; the collapse counts whole clusters.
    let searcher = dedup.reader().searcher();
    let keywords = QueryParser::for_index(&index, vec![body]).parse_query("化工园区")?;
    let negative = RangeQuery::new(
        std::ops::Bound::Included(Term::from_field_i64(sentiment, -1)),
        std::ops::Bound::Included(Term::from_field_i64(sentiment, -1)),
    );
    let weibo = TermQuery::new(
        Term::from_facet(platform, &Facet::from("/weibo")),
        IndexRecordOption::Basic,
    );
    let query = BooleanQuery::new(vec![
        (Occur::Must, keywords),
        (Occur::Must, Box::new(negative) as Box<dyn Query>),
        (Occur::Must, Box::new(weibo)),
    ]);
    let ordinals = Arc::new(ClusterOrdinals::build(&searcher)?);
    let page = searcher.search(
        &query,
        &CollapseCollector::new(ordinals, Sort::SimilarDesc, 0, 10),
    )?;
    println!(
        "\nlist page: {} matching posts in {} {}",
        page.total_hits,
        page.total_clusters,
        if page.total_clusters == 1 {
            "story"
        } else {
            "stories"
        }
    );
    for cluster in &page.clusters {
        let shown: TantivyDocument = searcher.doc(cluster.representative)?;
        let text = shown
            .get_first(body)
            .and_then(|value| value.as_str())
            .unwrap_or_default();
        println!(
            "  {} similar ({} of them match): {}…",
            cluster.size - 1,
            cluster.hits,
            text.chars().take(24).collect::<String>()
        );
    }

    // 4. The detail page of the top story: every outlet that carried it, earliest first.
    let top = page.clusters.first().ok_or("the list page is empty")?;
    let members = searcher.search(
        &dedup_fields.cluster_query(top.root),
        &TopDocs::with_limit(20).order_by_fast_field::<DateTime>("published", Order::Asc),
    )?;
    println!("\ndetail page of story {}:", top.root);
    for (time, address) in members {
        let member: TantivyDocument = searcher.doc(address)?;
        let minutes = time.map_or(0, |time| (time.into_timestamp_secs() - FIRST_POST) / 60);
        let value = |field| member.get_first(field);
        println!(
            "  +{minutes:>3} min  {:<3} {:<16} likes {}",
            value(id).and_then(|v| v.as_str()).unwrap_or_default(),
            value(platform)
                .and_then(|v| v.as_facet())
                .and_then(|encoded| Facet::from_encoded(encoded.as_bytes().to_vec()).ok())
                .map(|facet| facet.to_path_string())
                .unwrap_or_default(),
            value(likes).and_then(|v| v.as_u64()).unwrap_or_default(),
        );
    }

    // 5. Reopen: the forest is replayed from the index, and a repost added now joins the story
    //    it would have joined without the restart.
    drop(dedup);
    let mut dedup = DedupWriter::builder(config)
        .id_field(id)
        .time_field(published)
        .text_fields([body])
        .open(&index)?;
    let late = dedup.add_document(
        &writer,
        doc!(
            id => "w6",
            body => format!("#临河泄漏# {}", POSTS[0].5),
            platform => Facet::from("/weibo/repost"),
            sentiment => -1i64,
            likes => 12u64,
        ),
    )?;
    dedup.commit(&mut writer)?;
    println!(
        "\nafter reopening ({} inserts replayed), w6 joins story {}: {}",
        dedup.recovery().replayed,
        late.root,
        late.root == top.root
    );
    Ok(())
}
