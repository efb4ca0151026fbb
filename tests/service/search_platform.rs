//! The platform search's list-page parameters end to end (docs/service.md, "List page"): a real
//! `serve` process on loopback, a few hundred generated Chinese documents posted to it (six
//! stories, each reposted with light edits by several sources over four days, and unrelated
//! one-off articles), then every parameter checked against counts this test computes itself
//! from the acknowledged documents (each POST answer gives a document's root) and from the
//! tokenizer (which documents contain a word):
//!
//! - filters (a source term, closed and open time ranges), `exclude`, `fields=title`,
//!   `min_cluster_size`: totals, the clusters' sizes and hits;
//! - `facets=source`: articles and clusters of every value; `histogram=1h|1d`: every bucket,
//!   empty ones included;
//! - the platform's own fields (an `i64`, a `facet` path and a `u64` read from another key):
//!   filters, facets (articles and clusters) and a histogram under them, and their stored values;
//! - `highlight`: each `<em>` word is the query's word in the stored raw text at that place
//!   (raw text with entities, markup, full-width and upper-case letters), and the snippet
//!   without its marks and cut marks (`…`) is a piece of the HTML-escaped readable text (no
//!   markup, entities decoded);
//! - the stored `content` on document and detail pages, and not on list pages;
//! - bad parameters: 400 with a code and a message;
//! - `search --filter … --facets … --json` prints what `GET /v1/search` answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tantivy_dedup::text::{AnalyzedText, normalize, readable};

use crate::serve_process::{Serve, pct};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// 2024-05-01T00:00:00+08:00, the start of the generated days (the index's zone is UTC+8).
const DAY0: i64 = 1_714_492_800;
const ZONE_OFFSET: i64 = 8 * 3600;
const SOURCES: [&str; 5] = ["新华网", "人民网", "央视网", "澎湃新闻", "财新网"];
const EDITORS: [&str; 3] = ["张伟", "李娜", "王芳"];

/// The stories: a title and sentences; each is reposted with light edits.
const STORIES: [(&str, &str); 6] = [
    (
        "南方多地强降雨 防汛应急响应提升",
        "南方多地持续强降雨，多条河流超警戒水位。国家防总将防汛应急响应提升至三级。各地转移安置受灾群众，抢修受损道路和电力设施。气象部门预计未来三天仍有暴雨。水利部派出工作组赴一线指导。专家提醒公众远离河道和低洼地带。",
    ),
    (
        "某地发生五点八级地震",
        "中国地震台网正式测定，今日凌晨某地发生五点八级地震，震源深度十公里。震中附近房屋出现不同程度损坏。当地迅速启动应急预案，消防救援队伍连夜赶赴灾区。相关部门及时通报灾情。目前已搭建临时安置点，发放帐篷和食品。余震仍在持续，有关部门加强监测。",
    ),
    (
        "国家统计局发布一季度GDP数据",
        "国家统计局今天发布数据，一季度GDP同比增长百分之五点三。消费对经济增长的贡献率明显提升。高技术制造业投资保持较快增长。专家认为，经济运行开局良好，为全年目标打下基础。下一步将继续扩大内需，稳定就业。",
    ),
    (
        "新建高铁线路今日开通运营",
        "新建高铁线路今日正式开通运营，全长三百多公里，设计时速三百五十公里。沿线城市迈入高铁时代，出行时间大幅缩短。铁路部门增开多趟列车满足旅客需求。线路建设过程中攻克多项技术难题。开通首日客流火爆，车票一度售罄。",
    ),
    (
        "国产芯片取得新突破",
        "国内科研团队在芯片设计领域取得新突破，新一代处理器性能提升一倍。该成果已通过权威机构检测。团队负责人表示，将加快推进产业化应用。业内人士认为，这将增强产业链自主可控能力。多家企业已表达合作意向。",
    ),
    (
        "市卫健委通报流感防控情况",
        "市卫健委今日召开发布会，介绍近期流感防控情况。全市流感病例数量较上周有所下降。专家建议老人和儿童及时接种疫苗。各医疗机构加强发热门诊力量配备。学校和托幼机构落实晨午检制度。",
    ),
];

const CITIES: [&str; 8] = [
    "杭州", "成都", "西安", "武汉", "青岛", "昆明", "兰州", "厦门",
];
const EVENTS: [&str; 8] = [
    "马拉松比赛",
    "国际车展",
    "读书节",
    "美食博览会",
    "音乐季",
    "招聘会",
    "非遗展览",
    "科技周",
];
const PEOPLE: [&str; 6] = ["市民", "游客", "学生", "企业代表", "志愿者", "专家学者"];

/// A document as posted, with its root from the answer.
#[derive(Debug, Clone)]
struct Doc {
    id: String,
    title: String,
    content: String,
    source: String,
    time: i64,
    root: String,
    /// The platform's own fields (`[fields.*]` of [`OWN_FIELDS`]).
    sentiment: i64,
    platform: String,
    likes: u64,
}

/// The platform's own fields, declared in the server's settings file.
const OWN_FIELDS: &str = r#"
[fields.sentiment]
type = "i64"

[fields.platform]
type = "facet"

[fields.likes]
type = "u64"
from = "like_count"
"#;
const PLATFORMS: [&str; 4] = [
    "/weibo/original",
    "/weibo/repost",
    "/news/portal",
    "/news/app",
];

/// ASCII letters and digits as their full-width forms.
fn full_width(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                char::from_u32(c as u32 + 0xfee0).unwrap()
            } else {
                c
            }
        })
        .collect()
}

/// A repost of story `story`: the same text with light edits, the kind scrapes and reposts
/// bring (markup, entities, full-width or lower-case letters, a footer, a missing sentence).
fn repost(rng: &mut SmallRng, story: usize, source: &str) -> (String, String) {
    let (title, content) = STORIES[story];
    let mut title = title.to_owned();
    let mut sentences: Vec<String> = content.split_inclusive('。').map(str::to_owned).collect();
    if rng.random_bool(0.3) {
        sentences.pop();
    }
    if rng.random_bool(0.3) {
        sentences[0] = sentences[0].replacen('，', "，&nbsp;", 1);
    }
    if rng.random_bool(0.3) {
        sentences = sentences.iter().map(|s| format!("<p>{s}</p>")).collect();
    }
    let mut content = sentences.concat();
    match rng.random_range(0..4) {
        0 => {
            title = full_width(&title);
            content = full_width(&content);
        }
        1 => content = content.replace("GDP", "<b>GDP</b>"),
        2 => content = content.replace("GDP", "gdp"),
        _ => {}
    }
    if rng.random_bool(0.5) {
        content.push_str(&format!("（来源：{source}）"));
    }
    if rng.random_bool(0.4) {
        content.push_str(&format!("责任编辑：{}", EDITORS.choose(rng).unwrap()));
    }
    if rng.random_bool(0.2) {
        title = format!("快讯：{title}");
    }
    (title, content)
}

/// An unrelated one-off article.
fn one_off(rng: &mut SmallRng, n: usize) -> (String, String) {
    let mut content = String::new();
    for _ in 0..3 {
        content.push_str(&format!(
            "{}第{}届{}于{}月{}日举行，吸引{}余名{}参加。",
            CITIES.choose(rng).unwrap(),
            rng.random_range(2..40),
            EVENTS.choose(rng).unwrap(),
            rng.random_range(1..13),
            rng.random_range(1..29),
            rng.random_range(100..90_000),
            PEOPLE.choose(rng).unwrap()
        ));
    }
    (format!("本地资讯第{n}期"), content)
}

/// A `serve` process over a fresh index with the platform's own fields.
fn start_serve(index: &Path) -> Serve {
    let config = index.with_extension("toml");
    std::fs::write(&config, OWN_FIELDS).unwrap();
    Serve::start(index, |command| {
        command.arg("--config").arg(&config);
    })
}

/// Generates and posts the corpus; returns the documents with their roots.
fn post_corpus(server: &Serve) -> Vec<Doc> {
    let mut rng = SmallRng::seed_from_u64(20_240_501);
    let mut docs = Vec::new();
    for story in 0..STORIES.len() {
        // A story breaks on one of the four days and is reposted over the next day and a half.
        let start = DAY0 + (story as i64 % 4) * 86_400 + rng.random_range(0..36_000);
        for i in 0..30 {
            let source = SOURCES.choose(&mut rng).unwrap().to_string();
            let (title, content) = repost(&mut rng, story, &source);
            docs.push(Doc {
                id: format!("s{story}-{i}"),
                title,
                content,
                source,
                time: start + rng.random_range(0..130_000),
                root: String::new(),
                sentiment: rng.random_range(-1..=1),
                platform: PLATFORMS.choose(&mut rng).unwrap().to_string(),
                likes: rng.random_range(0..5000),
            });
        }
    }
    for n in 0..80 {
        let (title, content) = one_off(&mut rng, n);
        docs.push(Doc {
            id: format!("u{n}"),
            title,
            content,
            source: SOURCES.choose(&mut rng).unwrap().to_string(),
            time: DAY0 + rng.random_range(0..4 * 86_400),
            root: String::new(),
            sentiment: rng.random_range(-1..=1),
            platform: PLATFORMS.choose(&mut rng).unwrap().to_string(),
            likes: rng.random_range(0..5000),
        });
    }
    // Posted in publication order, as a feed would bring them.
    docs.sort_by_key(|doc| doc.time);
    for batch in docs.chunks_mut(60) {
        let body: Vec<Value> = batch
            .iter()
            .map(|doc| {
                json!({"id": doc.id, "title": doc.title, "content": doc.content,
                       "source": doc.source, "published_at": doc.time,
                       "sentiment": doc.sentiment, "platform": doc.platform,
                       "like_count": doc.likes})
            })
            .collect();
        let answer = server.post(&Value::Array(body));
        assert_eq!(answer["failed"], 0, "{answer}");
        for (doc, result) in batch.iter_mut().zip(answer["results"].as_array().unwrap()) {
            assert_eq!(result["id"], doc.id.as_str());
            doc.root = result["root"].as_str().unwrap().to_owned();
        }
    }
    docs
}

/// Whether `text` has `word` among its index tokens (the word must be one token).
fn has_word(text: &str, word: &str) -> bool {
    AnalyzedText::new(text)
        .tokens()
        .any(|(token, _)| token == word)
}

/// What a list page over the documents `matching` must say: totals, per root the hits, per
/// source the articles and clusters, and the histogram by `width` seconds.
struct Expected {
    total_hits: u64,
    total_clusters: u64,
    hits: BTreeMap<String, u64>,
    sizes: HashMap<String, u64>,
}

fn expected(all: &[Doc], matching: &dyn Fn(&Doc) -> bool, min_cluster_size: u64) -> Expected {
    let mut sizes: HashMap<String, u64> = HashMap::new();
    for doc in all {
        *sizes.entry(doc.root.clone()).or_default() += 1;
    }
    let mut hits: BTreeMap<String, u64> = BTreeMap::new();
    for doc in all.iter().filter(|doc| matching(doc)) {
        if sizes[&doc.root] >= min_cluster_size {
            *hits.entry(doc.root.clone()).or_default() += 1;
        }
    }
    Expected {
        total_hits: hits.values().sum(),
        total_clusters: hits.len() as u64,
        hits,
        sizes,
    }
}

/// Checks a whole list page (asked with `limit=1000`) against the model.
fn check_page(page: &Value, model: &Expected, what: &str) {
    assert_eq!(page["total_hits"], model.total_hits, "{what}");
    assert_eq!(page["total_clusters"], model.total_clusters, "{what}");
    let clusters = page["clusters"].as_array().unwrap();
    assert_eq!(clusters.len() as u64, model.total_clusters, "{what}");
    for cluster in clusters {
        let root = cluster["root"].as_str().unwrap();
        assert_eq!(cluster["hits"], model.hits[root], "{what}: {root}");
        assert_eq!(cluster["cluster_size"], model.sizes[root], "{what}: {root}");
        assert!(cluster["representative"].get("content").is_none(), "{what}");
    }
}

/// The facet counts of `source` over the matching documents.
fn source_facets(all: &[Doc], matching: &dyn Fn(&Doc) -> bool) -> BTreeMap<String, (u64, u64)> {
    facet_counts(all, matching, &|doc| doc.source.clone())
}

/// The facet counts of a document value (as the answer prints it) over the matching documents.
fn facet_counts(
    all: &[Doc],
    matching: &dyn Fn(&Doc) -> bool,
    value: &dyn Fn(&Doc) -> String,
) -> BTreeMap<String, (u64, u64)> {
    let mut counts: BTreeMap<String, (u64, BTreeSet<String>)> = BTreeMap::new();
    for doc in all.iter().filter(|doc| matching(doc)) {
        let entry = counts.entry(value(doc)).or_default();
        entry.0 += 1;
        entry.1.insert(doc.root.clone());
    }
    counts
        .into_iter()
        .map(|(source, (articles, roots))| (source, (articles, roots.len() as u64)))
        .collect()
}

/// The histogram by buckets of `width` seconds aligned on midnight UTC+8, empty ones included.
fn histogram(all: &[Doc], matching: &dyn Fn(&Doc) -> bool, width: i64) -> Vec<Value> {
    let mut buckets: BTreeMap<i64, (u64, BTreeSet<String>)> = BTreeMap::new();
    for doc in all.iter().filter(|doc| matching(doc)) {
        let start = (doc.time + ZONE_OFFSET).div_euclid(width) * width - ZONE_OFFSET;
        let entry = buckets.entry(start).or_default();
        entry.0 += 1;
        entry.1.insert(doc.root.clone());
    }
    let (Some(&first), Some(&last)) = (buckets.keys().next(), buckets.keys().last()) else {
        return Vec::new();
    };
    (0..=(last - first) / width)
        .map(|step| {
            let start = first + step * width;
            let (articles, clusters) = buckets
                .get(&start)
                .map_or((0, 0), |(articles, roots)| (*articles, roots.len() as u64));
            json!({"start": start, "articles": articles, "clusters": clusters})
        })
        .collect()
}

fn facets_of(page: &Value, field: &str) -> BTreeMap<String, (u64, u64)> {
    page["facets"][field]
        .as_array()
        .unwrap()
        .iter()
        .map(|count| {
            (
                match &count["value"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                },
                (
                    count["articles"].as_u64().unwrap(),
                    count["clusters"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn html_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Checks a document's highlights: a field with a match in its text has up to `count`
/// fragments, each a snippet of that field's text (as [`check_snippet`] checks one), in text
/// order, and a field without one is left out.
fn check_highlights(shown: &Value, doc: &Doc, word: &str, count: usize) {
    let highlights = shown["highlights"].as_object().unwrap();
    for (field, raw) in [("title", &doc.title), ("content", &doc.content)] {
        let matched = has_word(raw, word);
        assert_eq!(highlights.contains_key(field), matched, "{field}: {shown}");
        let Some(fragments) = highlights.get(field).and_then(Value::as_array) else {
            continue;
        };
        assert!(!fragments.is_empty() && fragments.len() <= count, "{shown}");
        let text = html_escape(&readable(raw));
        let mut from = 0;
        for fragment in fragments {
            let fragment = fragment.as_str().unwrap();
            check_snippet(fragment, &[raw], word);
            let plain = fragment.replace("<em>", "").replace("</em>", "");
            let inner = plain.trim_matches('…');
            let at = text[from..].find(inner).map(|at| at + from);
            from = at.unwrap_or_else(|| panic!("{fragment:?} is not after the one before"))
                + inner.len();
        }
    }
}

/// Checks a snippet against the raw texts it may come from: without its marks it is a piece of
/// one of them as a reader sees it (no markup, entities decoded) HTML-escaped, marked `…`
/// where it is cut, and each marked piece is `word` as written.
fn check_snippet(snippet: &str, raws: &[&str], word: &str) {
    let mut plain = String::new();
    let mut marked = Vec::new();
    let mut rest = snippet;
    while let Some(open) = rest.find("<em>") {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 4..];
        let close = after.find("</em>").expect("an <em> is closed");
        marked.push(after[..close].to_owned());
        plain.push_str(&after[..close]);
        rest = &after[close + 5..];
    }
    plain.push_str(rest);
    assert!(!marked.is_empty(), "no mark in {snippet:?}");
    assert!(!plain.contains('<') && !plain.contains('>'), "{snippet:?}");
    // Markup is gone (a full-width "<ｐ>" is text, shown escaped).
    let text_has_brackets = raws.iter().any(|raw| readable(raw).contains('<'));
    assert!(
        (text_has_brackets || !plain.contains("&lt;")) && !plain.contains("&amp;nbsp"),
        "{snippet:?}"
    );
    let inner = plain.strip_prefix('…').unwrap_or(&plain);
    let inner = inner.strip_suffix('…').unwrap_or(inner);
    let source = raws
        .iter()
        .map(|raw| html_escape(&readable(raw)))
        .find(|shown| shown.contains(inner))
        .unwrap_or_else(|| panic!("{snippet:?} is not a piece of {raws:?}"));
    assert_eq!(
        plain.starts_with('…'),
        !source.starts_with(inner),
        "{snippet:?}"
    );
    assert_eq!(
        plain.ends_with('…'),
        !source.ends_with(inner),
        "{snippet:?}"
    );
    for piece in marked {
        assert_eq!(normalize(&html_unescape(&piece)), word, "{snippet:?}");
    }
}

#[test]
fn list_page_parameters_against_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let server = start_serve(&index);
    let docs = post_corpus(&server);
    let all = docs.as_slice();
    for word in ["防汛", "地震", "通报", "gdp", "李娜", "暴雨"] {
        assert_eq!(
            AnalyzedText::new(word)
                .tokens()
                .filter(|(_, span)| span.whole_word)
                .count(),
            1,
            "{word} is one word"
        );
    }
    // The premise: clusters of several documents exist, and one-document ones too.
    let everything = expected(all, &|_| true, 0);
    assert!(everything.sizes.values().filter(|&&size| size >= 5).count() >= 4);
    assert!(everything.sizes.values().any(|&size| size == 1));
    check_page(&server.search("limit=1000"), &everything, "everything");

    // Filters: a source term, a closed range of whole days, open ranges.
    let xinhua = |doc: &Doc| doc.source == "新华网";
    check_page(
        &server.search(&format!("limit=1000&filter={}", pct("source:新华网"))),
        &expected(all, &xinhua, 0),
        "source filter",
    );
    let days = |doc: &Doc| doc.time >= DAY0 + 86_400 && doc.time < DAY0 + 3 * 86_400;
    check_page(
        &server.search(&format!(
            "limit=1000&filter={}",
            pct("published_at:[2024-05-02 TO 2024-05-03]")
        )),
        &expected(all, &days, 0),
        "closed time range",
    );
    let since = DAY0 + 2 * 86_400 + 12 * 3600;
    let after = |doc: &Doc| doc.time >= since;
    check_page(
        &server.search(&format!(
            "limit=1000&filter={}",
            pct("published_at:[2024-05-03 12:00 TO *]")
        )),
        &expected(all, &after, 0),
        "open upper end",
    );
    let until = DAY0 + 86_400 + 5000;
    let before = |doc: &Doc| doc.time <= until;
    check_page(
        &server.search(&format!(
            "limit=1000&filter={}&filter={}",
            pct(&format!("published_at:[* TO {until}]")),
            pct("source:[人民网 TO 人民网]")
        )),
        &expected(all, &|doc| before(doc) && doc.source == "人民网", 0),
        "open lower end and a second filter",
    );

    // Keywords, exclude, fields.
    let flood = |doc: &Doc| has_word(&doc.title, "防汛") || has_word(&doc.content, "防汛");
    let flood_model = expected(all, &flood, 0);
    assert!(flood_model.total_hits >= 20);
    check_page(
        &server.search(&format!("limit=1000&q={}", pct("防汛"))),
        &flood_model,
        "q",
    );
    let edited = |doc: &Doc| has_word(&doc.title, "李娜") || has_word(&doc.content, "李娜");
    let flood_not_edited = expected(all, &|doc| flood(doc) && !edited(doc), 0);
    assert!(flood_not_edited.total_hits < flood_model.total_hits);
    check_page(
        &server.search(&format!(
            "limit=1000&q={}&exclude={}",
            pct("防汛"),
            pct("李娜")
        )),
        &flood_not_edited,
        "exclude",
    );
    let storm = |doc: &Doc| has_word(&doc.title, "暴雨") || has_word(&doc.content, "暴雨");
    check_page(
        &server.search(&format!(
            "limit=1000&q={}&exclude={}&exclude={}",
            pct("防汛"),
            pct("李娜"),
            pct("暴雨")
        )),
        &expected(all, &|doc| flood(doc) && !edited(doc) && !storm(doc), 0),
        "exclude repeated",
    );
    let reported = |doc: &Doc| has_word(&doc.title, "通报") || has_word(&doc.content, "通报");
    let in_title = |doc: &Doc| has_word(&doc.title, "通报");
    let title_model = expected(all, &in_title, 0);
    assert!(title_model.total_hits < expected(all, &reported, 0).total_hits);
    check_page(
        &server.search(&format!("limit=1000&q={}&fields=title", pct("通报"))),
        &title_model,
        "fields=title",
    );
    check_page(
        &server.search(&format!(
            "limit=1000&q={}&fields=title,content",
            pct("通报")
        )),
        &expected(all, &reported, 0),
        "fields=title,content",
    );

    // min_cluster_size: clusters and totals of the clusters kept only; facets agree.
    let big = expected(all, &|_| true, 5);
    assert!(big.total_clusters < everything.total_clusters);
    let page = server.search("limit=1000&min_cluster_size=5&facets=source");
    check_page(&page, &big, "min_cluster_size");
    let in_big = |doc: &Doc| everything.sizes[&doc.root] >= 5;
    assert_eq!(facets_of(&page, "source"), source_facets(all, &in_big));
    check_page(
        &server.search(&format!("limit=1000&q={}&min_cluster_size=5", pct("防汛"))),
        &expected(all, &flood, 5),
        "q and min_cluster_size",
    );

    // Facets over every match, not the page; most articles first.
    for (query, matching) in [
        ("limit=1", &(|_: &Doc| true) as &dyn Fn(&Doc) -> bool),
        (&*format!("limit=2&q={}", pct("防汛")), &flood),
        (
            &*format!("limit=0&filter={}", pct("source:新华网")),
            &xinhua,
        ),
    ] {
        let page = server.search(&format!("{query}&facets=source"));
        assert_eq!(
            facets_of(&page, "source"),
            source_facets(all, matching),
            "{query}"
        );
        let articles: Vec<u64> = page["facets"]["source"]
            .as_array()
            .unwrap()
            .iter()
            .map(|count| count["articles"].as_u64().unwrap())
            .collect();
        assert!(
            articles.windows(2).all(|pair| pair[0] >= pair[1]),
            "{articles:?}"
        );
        assert!(page.get("histogram").is_none());
    }
    let limited = server.search("limit=0&facets=source&facet_limit=2");
    assert_eq!(limited["facets"]["source"].as_array().unwrap().len(), 2);
    assert!(server.search("limit=0").get("facets").is_none());

    // Histograms by the hour and by the day, empty buckets included.
    for (interval, width) in [("1h", 3600), ("1d", 86_400)] {
        let page = server.search(&format!("limit=0&q={}&histogram={interval}", pct("防汛")));
        let buckets = page["histogram"].as_array().unwrap();
        assert_eq!(*buckets, histogram(all, &flood, width), "{interval}");
        if width == 3600 {
            assert!(buckets.iter().any(|bucket| bucket["articles"] == 0));
        }
        let page = server.search(&format!("limit=0&histogram={interval}&facets=source"));
        assert_eq!(
            *page["histogram"].as_array().unwrap(),
            histogram(all, &|_| true, width)
        );
        assert_eq!(facets_of(&page, "source"), source_facets(all, &|_| true));
    }

    // `auto`: four days of news fit in hours.
    let page = server.search("limit=0&histogram=auto");
    assert_eq!(page["histogram_interval"], 3600);
    assert_eq!(
        *page["histogram"].as_array().unwrap(),
        histogram(all, &|_| true, 3600)
    );

    // Answers are compressed when the client accepts gzip: the same JSON, a fraction of it.
    let heavy = "/v1/search?limit=100&histogram=1h&facets=source";
    let (status, plain) = server.request("GET", heavy, None);
    assert_eq!(status, 200);
    let (encoding, sent) = server.get_accepting_gzip(heavy);
    assert_eq!(encoding.as_deref(), Some("gzip"));
    let mut unzipped = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&sent[..]), &mut unzipped)
        .unwrap();
    assert_eq!(unzipped, plain);
    assert!(
        sent.len() * 3 < plain.len(),
        "{} of {}",
        sent.len(),
        plain.len()
    );

    // The platform's own fields: filters by their schema types, facets of a number and of a
    // hierarchical path, and a histogram under an own-field filter.
    let negative = |doc: &Doc| doc.sentiment == -1;
    let popular = |doc: &Doc| doc.likes >= 1000;
    let weibo = |doc: &Doc| doc.platform.starts_with("/weibo/");
    for (filter, matching) in [
        ("sentiment:-1", &negative as &dyn Fn(&Doc) -> bool),
        ("likes:[1000 TO *]", &popular),
        ("platform:/weibo", &weibo),
    ] {
        check_page(
            &server.search(&format!("limit=1000&filter={}", pct(filter))),
            &expected(all, matching, 0),
            filter,
        );
    }
    let negative_on_weibo = |doc: &Doc| negative(doc) && weibo(doc);
    let page = server.search(&format!(
        "limit=1000&filter={}&filter={}&facets=platform,sentiment,source&histogram=1d",
        pct("sentiment:-1"),
        pct("platform:/weibo")
    ));
    check_page(
        &page,
        &expected(all, &negative_on_weibo, 0),
        "two own filters",
    );
    assert_eq!(
        facets_of(&page, "platform"),
        facet_counts(all, &negative_on_weibo, &|doc| doc.platform.clone())
    );
    assert_eq!(
        facets_of(&page, "sentiment"),
        facet_counts(all, &negative_on_weibo, &|doc| doc.sentiment.to_string())
    );
    assert_eq!(
        facets_of(&page, "source"),
        source_facets(all, &negative_on_weibo)
    );
    assert_eq!(
        *page["histogram"].as_array().unwrap(),
        histogram(all, &negative_on_weibo, 86_400)
    );
    let every_platform = server.search("limit=0&facets=platform,likes&facet_limit=1000");
    assert_eq!(
        facets_of(&every_platform, "platform"),
        facet_counts(all, &|_| true, &|doc| doc.platform.clone())
    );
    assert_eq!(
        facets_of(&every_platform, "likes"),
        facet_counts(all, &|_| true, &|doc| doc.likes.to_string())
    );
    // Sorted by an own field: a story's largest (`desc`) or smallest (`asc`) value among its
    // matching documents first, shown as `sort_value`; equal values by score (all equal
    // without keywords), then the smaller root.
    let by_value = |matching: &dyn Fn(&Doc) -> bool, value: fn(&Doc) -> i64, descending: bool| {
        let mut stories: BTreeMap<String, i64> = BTreeMap::new();
        for doc in all.iter().filter(|doc| matching(doc)) {
            let value = value(doc);
            stories
                .entry(doc.root.clone())
                .and_modify(|best| {
                    *best = if descending {
                        (*best).max(value)
                    } else {
                        (*best).min(value)
                    }
                })
                .or_insert(value);
        }
        let mut list: Vec<(String, i64)> = stories.into_iter().collect();
        list.sort_by(|a, b| {
            let by_value = if descending {
                b.1.cmp(&a.1)
            } else {
                a.1.cmp(&b.1)
            };
            by_value.then(a.0.cmp(&b.0))
        });
        list
    };
    for (order, filter, matching, value, descending) in [
        (
            "likes:desc",
            "",
            &(|_: &Doc| true) as &dyn Fn(&Doc) -> bool,
            (|doc: &Doc| doc.likes as i64) as fn(&Doc) -> i64,
            true,
        ),
        (
            "likes:asc",
            "platform:/weibo",
            &weibo,
            |doc| doc.likes as i64,
            false,
        ),
        ("sentiment:asc", "", &|_| true, |doc| doc.sentiment, false),
        (
            "sentiment:desc",
            "source:新华网",
            &xinhua,
            |doc| doc.sentiment,
            true,
        ),
    ] {
        let filter = match filter {
            "" => String::new(),
            filter => format!("&filter={}", pct(filter)),
        };
        let page = server.search(&format!("sort={order}&limit=1000{filter}"));
        let listed: Vec<(String, i64)> = page["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cluster| {
                let value = cluster["sort_value"].as_i64().unwrap();
                (cluster["root"].as_str().unwrap().to_owned(), value)
            })
            .collect();
        assert_eq!(listed, by_value(matching, value, descending), "{order}");
    }
    for order in ["platform:desc", "content:asc", "likes:up", "nosuch:desc"] {
        let (status, refused) = server.get(&format!("/v1/search?sort={}", pct(order)));
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{order}: {refused}");
        assert!(message.contains("sort"), "{order}: {refused}");
    }

    // Stored own values come back under "fields", as the document was sent.
    let (status, shown) = server.get(&format!("/v1/documents/{}", all[0].id));
    assert_eq!(status, 200);
    let fields = &shown["document"]["fields"];
    assert_eq!(fields["sentiment"], all[0].sentiment, "{shown}");
    assert_eq!(fields["platform"], all[0].platform.as_str(), "{shown}");
    assert_eq!(fields["likes"], all[0].likes, "{shown}");

    // Snippets: the marked words in raw form at their place in the stored raw text.
    let by_id: HashMap<&str, &Doc> = docs.iter().map(|doc| (doc.id.as_str(), doc)).collect();
    for (word, query) in [("gdp", "GDP"), ("防汛", "防汛"), ("通报", "通报")] {
        let page = server.search(&format!("limit=1000&q={}&highlight=true", pct(query)));
        let clusters = page["clusters"].as_array().unwrap();
        assert!(!clusters.is_empty());
        for cluster in clusters {
            let representative = &cluster["representative"];
            let doc = by_id[representative["id"].as_str().unwrap()];
            assert_eq!(representative["title"], doc.title.as_str());
            let snippet = representative["snippet"].as_str().unwrap();
            check_snippet(snippet, &[&doc.title, &doc.content], word);
            check_highlights(representative, doc, word, 3);
        }
    }
    // Highlights to measure: one fragment of about 30 characters per field, on the list's
    // members too; and on the story page, each member marked by the list's keywords.
    let page = server.search(&format!(
        "limit=50&q={}&highlight_fragments=1&highlight_chars=30&members=2",
        pct("防汛")
    ));
    for cluster in page["clusters"].as_array().unwrap() {
        let members = cluster["members"].as_array().unwrap();
        for shown in std::iter::once(&cluster["representative"]).chain(members) {
            let doc = by_id[shown["id"].as_str().unwrap()];
            check_highlights(shown, doc, "防汛", 1);
            for fragment in shown["highlights"]["content"].as_array().unwrap() {
                let plain = html_unescape(
                    &fragment
                        .as_str()
                        .unwrap()
                        .replace("<em>", "")
                        .replace("</em>", ""),
                );
                assert!(plain.trim_matches('…').chars().count() <= 31, "{fragment}");
            }
        }
    }
    let root = page["clusters"][0]["root"].as_str().unwrap();
    let (status, story) = server.get(&format!("/v1/stories/{root}?q={}&limit=100", pct("防汛")));
    assert_eq!(status, 200, "{story}");
    for member in story["members"].as_array().unwrap() {
        check_highlights(member, by_id[member["id"].as_str().unwrap()], "防汛", 3);
    }
    let (status, plain_story) = server.get(&format!("/v1/stories/{root}"));
    assert_eq!(status, 200);
    assert!(
        plain_story["members"][0].get("highlights").is_none(),
        "{plain_story}"
    );
    // No fragments: the snippet alone.
    let snippets = server.search(&format!("limit=5&q={}&highlight_fragments=0", pct("防汛")));
    for cluster in snippets["clusters"].as_array().unwrap() {
        let representative = &cluster["representative"];
        assert!(representative.get("highlights").is_none(), "{cluster}");
        assert!(
            representative["snippet"].as_str().unwrap().contains("<em>"),
            "{cluster}"
        );
    }
    for bad in [
        "highlight_fragments=11",
        "highlight_chars=10",
        "highlight_chars=2000",
        "highlight_fragments=x",
    ] {
        let (status, refused) = server.get(&format!("/v1/search?q=gdp&{bad}"));
        assert_eq!(status, 400, "{bad}: {refused}");
    }
    // Normalisation changed these texts' offsets: full-width letters, markup, lower case.
    let gdp_docs: Vec<&Doc> = docs
        .iter()
        .filter(|doc| doc.id.starts_with("s2-"))
        .collect();
    assert!(gdp_docs.iter().any(|doc| doc.title.contains("ＧＤＰ")));
    assert!(
        gdp_docs
            .iter()
            .any(|doc| doc.content.contains("<b>GDP</b>"))
    );
    for doc in gdp_docs.iter().take(12) {
        let page = server.search(&format!(
            "limit=1&q=gdp&highlight=true&filter={}",
            pct(&format!("published_at:{}", doc.time))
        ));
        for cluster in page["clusters"].as_array().unwrap() {
            let id = cluster["representative"]["id"].as_str().unwrap();
            let snippet = cluster["representative"]["snippet"].as_str().unwrap();
            check_snippet(snippet, &[&by_id[id].title, &by_id[id].content], "gdp");
        }
    }
    assert!(
        server.search("limit=3&q=gdp")["clusters"][0]["representative"]
            .get("snippet")
            .is_none()
    );

    // The stored content on document and detail pages.
    let doc = &docs[0];
    let (status, page) = server.get(&format!("/v1/documents/{}", pct(&doc.id)));
    assert_eq!(status, 200);
    assert_eq!(page["document"]["content"], doc.content.as_str());
    let (status, page) = server.get(&format!("/v1/documents/{}/similar", pct(&doc.id)));
    assert_eq!(status, 200);
    assert_eq!(page["document"]["content"], doc.content.as_str());
    for other in page["documents"].as_array().unwrap() {
        let id = other["id"].as_str().unwrap();
        assert_eq!(other["content"], by_id[id].content.as_str());
    }

    // Trending, looking back from the end of the second day over a day: every story with an
    // article in the window (the flood story's last reposts among them), by articles gained
    // against the day before, each
    // with its figures counted here from what was posted; `q` narrows the stories, not the
    // figures (which count every article of a story).
    let end = DAY0 + 2 * 86_400;
    let day = 86_400;
    // root -> (recent, previous, recent outlets)
    let mut trends: HashMap<&str, (i64, i64, BTreeSet<&str>)> = HashMap::new();
    for doc in all {
        let trend = trends.entry(doc.root.as_str()).or_default();
        if doc.time > end - day && doc.time <= end {
            trend.0 += 1;
            trend.2.insert(doc.source.as_str());
        } else if doc.time > end - 2 * day && doc.time <= end - day {
            trend.1 += 1;
        }
    }
    for (keywords, matching) in [
        ("", &(|_: &Doc| true) as &dyn Fn(&Doc) -> bool),
        ("防汛", &flood),
    ] {
        let roots: BTreeSet<&str> = all
            .iter()
            .filter(|doc| matching(doc) && trends[doc.root.as_str()].0 >= 1)
            .map(|doc| doc.root.as_str())
            .collect();
        let page = server.get(&format!(
            "/v1/trending?window=1d&end={end}&limit=1000&q={}",
            pct(keywords)
        ));
        assert_eq!(page.0, 200, "{}", page.1);
        let page = page.1;
        assert_eq!(
            (&page["trend_window"], &page["trend_end"]),
            (&json!(day), &json!(end))
        );
        assert_eq!(page["total_clusters"], roots.len(), "{keywords:?}");
        let clusters = page["clusters"].as_array().unwrap();
        assert_eq!(clusters.len(), roots.len(), "{keywords:?}");
        let mut ranked: Vec<(i64, i64)> = Vec::new();
        for cluster in clusters {
            let root = cluster["root"].as_str().unwrap();
            assert!(roots.contains(root), "{keywords:?}: {cluster}");
            let (recent, previous, outlets) = &trends[root];
            assert_eq!(
                cluster["trend"],
                json!({"recent": recent, "recent_outlets": outlets.len(),
                       "previous": previous, "growth": recent - previous}),
                "{keywords:?}: {root}"
            );
            ranked.push((recent - previous, *recent));
        }
        assert!(
            ranked.windows(2).all(|pair| pair[0] >= pair[1]),
            "most gained first: {ranked:?}"
        );
        assert!(!roots.is_empty(), "{keywords:?}");
        if keywords.is_empty() {
            assert!(
                roots.len() >= 3 && ranked.first() > ranked.last(),
                "{ranked:?}"
            );
        }
    }
    // Members: each story's other documents, newest first on a `newest` page.
    let page = server.search("sort=newest&members=3&limit=1000");
    for cluster in page["clusters"].as_array().unwrap() {
        let representative = cluster["representative"]["id"].as_str().unwrap();
        let mut others: Vec<&Doc> = all
            .iter()
            .filter(|doc| doc.root == cluster["root"].as_str().unwrap())
            .filter(|doc| doc.id != representative)
            .collect();
        others.sort_by_key(|doc| std::cmp::Reverse(doc.time));
        let expected: Vec<&str> = others.iter().take(3).map(|doc| doc.id.as_str()).collect();
        let listed: Vec<&str> = cluster["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|member| member["id"].as_str().unwrap())
            .collect();
        assert_eq!(listed, expected, "{cluster}");
    }
    assert!(
        server.search("limit=3")["clusters"][0]
            .get("members")
            .is_none()
    );
    // Facets and the histogram count the same stories as the page: those with an article in
    // the window.
    let trending_story = |doc: &Doc| trends[doc.root.as_str()].0 >= 1;
    let counted = server.get(&format!(
        "/v1/trending?window=1d&end={end}&limit=0&facets=source&histogram=1d"
    ));
    assert_eq!(counted.0, 200, "{}", counted.1);
    assert_eq!(
        facets_of(&counted.1, "source"),
        source_facets(all, &trending_story)
    );
    assert_eq!(
        *counted.1["histogram"].as_array().unwrap(),
        histogram(all, &trending_story, 86_400)
    );
    assert!(counted.1["total_hits"].as_u64() < Some(all.len() as u64));
    // The same page through /v1/search, and the figures absent where no order reads them.
    let through_search = server.search(&format!(
        "sort=trending&trend_window=1d&trend_end={end}&min_recent=1&limit=1000"
    ));
    let (_, trending) = server.get(&format!("/v1/trending?window=1d&end={end}&limit=1000"));
    assert_eq!(through_search, trending);
    let plain = server.search("limit=5");
    assert!(plain["clusters"][0].get("trend").is_none() && plain.get("trend_end").is_none());
    let hot = server.search(&format!("sort=hot&trend_end={end}&limit=5"));
    let values: Vec<f64> = hot["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cluster| cluster["hot"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|pair| pair[0] >= pair[1]),
        "{values:?}"
    );
    for (query, hint) in [
        ("sort=newest", "not a parameter of /v1/trending"),
        ("trend_window=1h", "not a parameter of /v1/trending"),
        ("window=0s", "trend window"),
        ("window=often", "trend window"),
        ("end=soon", "`end` must be a date"),
        ("window=0s", "`window`: a trend window"),
        ("window=1h&window=2h", "twice"),
        (
            "colour=red",
            "the parameters of /v1/trending are window, end, min_recent and q",
        ),
        ("min_recent=x", "min_recent"),
        ("members=101", "members"),
    ] {
        let (status, answer) = server.get(&format!("/v1/trending?{query}"));
        assert_eq!(status, 400, "{query}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(hint), "{query}: {message}");
    }

    // Bad parameters: 400 with a code and a message that says what is wrong.
    for (query, hint) in [
        ("filter=content:x", "not text"),
        ("filter=title:x", "not text"),
        ("filter=root:1", "not text"),
        ("filter=simhash:1", "not text"),
        ("filter=_seq:1", "not text"),
        ("filter=block0:1", "not text"),
        ("filter=nothing:1", "source"),
        ("filter=source", "field:[a TO b]"),
        ("filter=published_at:%5Bsoon%20TO%20*%5D", "not a time"),
        (
            "filter=published_at:%5B2024-05-03%20TO%202024-05-01%5D",
            "empty",
        ),
        ("filter=published_at:%5B*%20TO%20*%5D", "at least one end"),
        ("filter=source:%5Ba%20TO%20b", "`]`"),
        ("histogram=0s", "at least 1"),
        ("histogram=often", "duration"),
        ("histogram=1s", "buckets"),
        ("fields=source", "indexed text fields"),
        ("fields=nothing", "title, content"),
        ("facets=content", "not text"),
        ("facets=url", "not a fast field"),
        ("facets=root", "not text"),
        ("facet_limit=5000", "facet_limit"),
        ("facet_limit=x", "facet_limit"),
        ("min_cluster_size=-1", "min_cluster_size"),
        ("highlight=maybe", "true or false"),
        ("trend_window=2y", "trend window"),
        ("sort=trending&trend_end=never", "trend_end"),
        ("colour=red", "unknown parameter"),
        ("q=a&q=b", "twice"),
        ("limit=1001", "limit"),
    ] {
        let (status, answer) = server.get(&format!("/v1/search?{query}"));
        assert_eq!(status, 400, "{query}: {answer}");
        let code = answer["error"]["code"].as_str().unwrap_or_default();
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(!code.is_empty(), "{query}: {answer}");
        assert!(message.contains(hint), "{query}: {message}");
    }
    // No input panics: odd encodings and bytes answer 200 or 400.
    for query in [
        "filter=%FF%FE",
        "filter=%3A",
        "filter=source:%5B%20TO%20%5D",
        "exclude=%22%5C",
        "exclude=%E2%80%8B",
        "histogram=99999999999999999999d",
        "q=%28&highlight=true",
        "fields=",
        "facets=,,",
        "filter=published_at:99999999999999999999",
    ] {
        let (status, answer) = server.get(&format!("/v1/search?{query}"));
        assert!(status == 200 || status == 400, "{query}: {status} {answer}");
    }

    // The command line: the same options, the same JSON.
    let query = format!(
        "q={}&filter={}&filter={}&facets=source&histogram=1d&highlight=true&min_cluster_size=2&limit=5&members=2",
        pct("防汛"),
        pct("source:新华网"),
        pct("published_at:[2024-05-01 TO *]")
    );
    let http = server.search(&query);
    let output = Command::new(BIN)
        .args(["search", "--index"])
        .arg(&index)
        .args([
            "防汛",
            "--filter",
            "source:新华网",
            "--filter",
            "published_at:[2024-05-01 TO *]",
            "--facets",
            "source",
            "--histogram",
            "1d",
            "--highlight",
            "--min-cluster-size",
            "2",
            "--limit",
            "5",
            "--members",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(cli, http);
    assert!(http["facets"]["source"].as_array().unwrap().len() == 1);
    assert!(
        http["clusters"][0]["members"].as_array().unwrap().len() == 2,
        "{http}"
    );
    // Trending on the command line: the JSON of /v1/trending, and a line of figures a story.
    let trending_cli = |json: bool| {
        let mut command = Command::new(BIN);
        command.args(["search", "--index"]).arg(&index).args([
            "--sort",
            "trending",
            "--trend-window",
            "1d",
            "--trend-end",
            &end.to_string(),
            "--min-recent",
            "1",
            "--limit",
            "1000",
        ]);
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    };
    assert_eq!(
        serde_json::from_slice::<Value>(&trending_cli(true)).unwrap(),
        trending
    );
    let human = String::from_utf8(trending_cli(false)).unwrap();
    let first = &trending["clusters"][0]["trend"];
    assert!(
        human.starts_with("trend window: 1d up to 2024-05-03T00:00:00+08:00"),
        "{human}"
    );
    assert!(
        human.contains(&format!(
            "{:+} in the window: {} article",
            first["growth"].as_i64().unwrap(),
            first["recent"]
        )),
        "{human}"
    );
    // Human output shows the counts briefly.
    let output = Command::new(BIN)
        .args(["search", "--index"])
        .arg(&index)
        .args([
            "--facets",
            "source",
            "--histogram",
            "1d",
            "--filter",
            "source:新华网",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("facet source (articles/clusters): 新华网 "),
        "{text}"
    );
    assert!(text.contains("histogram by 1d"), "{text}");
    let output = Command::new(BIN)
        .args(["search", "--index"])
        .arg(&index)
        .args(["--filter", "content:x"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not text"));
}
