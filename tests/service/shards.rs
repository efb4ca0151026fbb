//! An index split into shards by story (`serve --shard I/N` behind `serve --coordinator`),
//! against one index holding the same documents (SPEC §6, "Search across shards"): real
//! server processes on loopback over a real Redis Cluster.
//!
//! - `every_answer_equals_one_index_with_one_to_four_shards`: the same stream of batches
//!   (then replacements, some moving a document to another story's shard, and deletes) sent
//!   to one index and to 1, 2, 3 and 4 shards; every list page (each sort, keywords, deep
//!   offsets, `min_cluster_size`, source and time filters, facets, histogram, highlights),
//!   story page, document, detail page, near-duplicate check and the statistics' counts
//!   compared field by field; a replaced document live on one shard only; a re-send through
//!   a second coordinator `unchanged`. Three sites' pages carry their site's chrome, which
//!   the coordinator learns and takes out, and each shard takes out the same.
//! - `concurrent_writes_moving_ids_leave_each_live_once_where_the_directory_says`: clients of
//!   two coordinators replacing the same ids at once with other stories' texts (a write's
//!   shards commit while the next is placed): each id live on one shard, the one the
//!   directory names, and a re-send of it `unchanged`.
//! - `a_coordinator_stopped_in_its_write_turn_finishes_it_and_gives_it_back`: a coordinator
//!   told to stop, with no grace, while a write holds the store's write turn: it exits with
//!   the turn given back, and every document sent again through another is live once.
//! - `a_shard_down_is_named_and_partial_pages_are_flagged`: a shard killed: list pages 503
//!   `shard_unavailable`, or flagged partial with exact per-story figures; the shard restarted:
//!   every answer as before, nothing acknowledged lost.
//! - `the_store_lets_go_of_the_chrome_of_sources_silent_for_the_forgetting_span`: a source's
//!   key of learned chrome kept by the write just before its pages are all forgotten, deleted
//!   by the one after, and kept again when the source is heard from again.

use std::path::Path;

use serde_json::{Value, json};

use tantivy_dedup::engine::{Cursor, SearchRequest, Sort, SortKey};

use crate::redis_cluster::RedisCluster;
use crate::serve_process::{Serve, pct};
use crate::server_api::{Doc, QUERY_WORDS, SOURCES, corpus};

/// Documents per POST.
const BATCH: usize = 25;

/// Shard servers and their coordinator, over one store.
struct Sharded {
    shards: Vec<Serve>,
    coordinator: Serve,
}

/// Shard `shard` of `count` over its index in `dir`, on `addr` (port 0: any).
fn start_shard(dir: &Path, shard: usize, count: usize, store: &str, addr: &str) -> Serve {
    Serve::start(&dir.join(format!("shard-{shard}")), |command| {
        command
            .args(["--shard", &format!("{shard}/{count}")])
            .args(["--store", store, "--commit-delay", "5ms", "--addr", addr]);
    })
}

fn start_coordinator(shards: &[Serve], store: &str) -> Serve {
    let urls: Vec<&str> = shards.iter().map(|shard| shard.base.as_str()).collect();
    Serve::launch(|command| {
        command
            .args(["--coordinator", "--shards", &urls.join(",")])
            .args(["--store", store, "--shard-timeout", "2s"]);
    })
}

impl Sharded {
    fn start(dir: &Path, count: usize, store: &str) -> Self {
        let shards: Vec<Serve> = (0..count)
            .map(|shard| start_shard(dir, shard, count, store, "127.0.0.1:0"))
            .collect();
        let coordinator = start_coordinator(&shards, store);
        Sharded {
            shards,
            coordinator,
        }
    }
}

/// The stream both sides are sent: batches of the corpus in order.
fn batches(docs: &[Doc]) -> Vec<Value> {
    docs.chunks(BATCH)
        .enumerate()
        .map(|(batch, chunk)| {
            Value::Array(
                chunk
                    .iter()
                    .enumerate()
                    .map(|(position, doc)| doc.json(batch + position))
                    .collect(),
            )
        })
        .collect()
}

/// The corpus with the pages of three sites in their site's chrome (a header line and a
/// footer line on each), then pages of each of them that are their chrome alone: what a
/// coordinator learns of a source's pages and takes out of them before placing them, the
/// shard that stores them must take out too, as one index does.
fn in_sites_chrome(mut docs: Vec<Doc>) -> Vec<Doc> {
    let sites = &SOURCES[..3];
    let header = |site: &str| format!("{site}首页 > 新闻中心 > 正文");
    let footer =
        |site: &str| format!("版权所有 {site} 未经书面授权不得转载 违法和不良信息举报电话：12377");
    for doc in &mut docs {
        if let Some(site) = doc
            .source
            .clone()
            .filter(|source| sites.contains(&source.as_str()))
        {
            doc.content = format!("{}\n{}\n{}", header(&site), doc.content, footer(&site));
        }
    }
    let last = docs.iter().map(|doc| doc.published_at).max().unwrap_or(0);
    for (n, site) in sites.iter().enumerate() {
        let mut alone = docs[n].clone();
        alone.id = format!("chrome-{n}");
        alone.title = String::new();
        alone.content = format!("{}\n{}", header(site), footer(site));
        alone.source = Some((*site).to_owned());
        alone.published_at = last + 1 + n as i64;
        docs.push(alone);
    }
    docs
}

/// Sends `body` to both and checks that both answer the same.
pub(crate) fn same(
    oracle: &Serve,
    sharded: &Serve,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Value {
    let (expected_status, expected) = oracle.request(method, path, body);
    let (status, answer) = sharded.request(method, path, body);
    let parse = |text: &str| -> Value {
        serde_json::from_str(text).unwrap_or_else(|error| panic!("{path}: {error}: {text}"))
    };
    let (expected, answer) = (parse(&expected), parse(&answer));
    assert_eq!(
        (status, &answer),
        (expected_status, &expected),
        "{method} {path} differs from one index"
    );
    answer
}

/// The list pages compared: every sort with and without keywords at several depths, and with
/// each kind of condition and count.
pub(crate) fn list_pages(docs: &[Doc], keywords: bool) -> Vec<String> {
    let from = docs.iter().map(|doc| doc.published_at).min().unwrap_or(0);
    let to = docs.iter().map(|doc| doc.published_at).max().unwrap_or(0);
    let middle = from + (to - from) / 2;
    let mut queries: Vec<&str> = vec![""];
    if keywords {
        queries.extend(QUERY_WORDS);
        queries.push("古籍 出口");
    }
    // A trend window of a sixth of the span, ending in its middle (a fixed end: "now"
    // differs from one request to the next).
    let trend = format!("{}s", ((to - from) / 6).max(1));
    let mut pages = Vec::new();
    for sort in [
        "relevance",
        "similar_desc",
        "similar_asc",
        "newest",
        "oldest",
        "trending",
        "hot",
        "published_at:desc",
        "published_at:asc",
    ] {
        let sort = &format!("{sort}&trend_window={trend}&trend_end={middle}");
        for q in &queries {
            for (offset, limit) in [(0, 10), (3, 7), (15, 20), (500, 5)] {
                pages.push(format!(
                    "/v1/search?sort={sort}&q={}&offset={offset}&limit={limit}&members={}",
                    pct(q),
                    offset % 4
                ));
            }
        }
        pages.push(format!(
            "/v1/search?sort={sort}&facets=source&facet_limit=3&histogram=1h&limit=15"
        ));
        pages.push(format!(
            "/v1/search?sort={sort}&min_cluster_size=2&facets=source&histogram=1d"
        ));
        pages.push(format!(
            "/v1/search?sort={sort}&histogram=auto&from={middle}&limit=5"
        ));
        pages.push(format!(
            "/v1/search?sort={sort}&source={}&from={middle}&limit=30",
            pct(SOURCES[0])
        ));
        pages.push(format!(
            "/v1/search?sort={sort}&to={middle}&filter={}&limit=30&offset=2",
            pct(&format!("source:{}", SOURCES[1]))
        ));
        if keywords {
            pages.push(format!(
                "/v1/search?sort={sort}&q={}&histogram=auto",
                pct(QUERY_WORDS[0])
            ));
            pages.push(format!(
                "/v1/search?sort={sort}&q={}&highlight=true&facets=source&exclude={}",
                pct(QUERY_WORDS[1]),
                pct(QUERY_WORDS[2])
            ));
        }
    }
    for q in &queries {
        pages.push(format!(
            "/v1/trending?window={trend}&end={middle}&q={}&limit=15&facets=source",
            pct(q)
        ));
    }
    pages.push(format!(
        "/v1/trending?window={trend}&end={middle}&min_recent=2&offset=1"
    ));
    pages.push("/v1/search?sort=bogus".to_owned());
    pages.push("/v1/trending?sort=newest".to_owned());
    pages
}

/// Compares every read this test makes of both: list pages, the stories of the largest
/// clusters, documents and their detail pages, near-duplicate checks, the statistics' counts.
pub(crate) fn compare_reads(oracle: &Serve, sharded: &Serve, docs: &[Doc], keywords: bool) {
    for page in list_pages(docs, keywords) {
        same(oracle, sharded, "GET", &page, None);
    }
    let (_, largest) = oracle.get("/v1/search?sort=similar_desc&limit=25");
    for cluster in largest["clusters"].as_array().unwrap() {
        let root = cluster["root"].as_str().unwrap();
        same(oracle, sharded, "GET", &format!("/v1/stories/{root}"), None);
        let path = format!("/v1/stories/{root}?sort=source&histogram=1h&offset=1&limit=2");
        same(oracle, sharded, "GET", &path, None);
    }
    same(oracle, sharded, "GET", "/v1/stories/0123456789abcdef", None);
    same(oracle, sharded, "GET", "/v1/stories/not-a-root", None);
    for doc in docs.iter().step_by(5) {
        let id = pct(&doc.id);
        same(oracle, sharded, "GET", &format!("/v1/documents/{id}"), None);
        let path = format!("/v1/documents/{id}/similar?offset=1&limit=3");
        same(oracle, sharded, "GET", &path, None);
    }
    same(oracle, sharded, "GET", "/v1/documents/no-such-id", None);
    for doc in docs.iter().step_by(9) {
        let body = json!({"content": doc.content, "title": doc.title, "limit": 4}).to_string();
        same(oracle, sharded, "POST", "/v1/near-duplicates", Some(&body));
    }
    let counts = |server: &Serve| {
        let (status, stats) = server.get("/v1/stats");
        assert_eq!(status, 200, "{stats}");
        let index = &stats["index"];
        (
            index["documents"].clone(),
            index["clusters"].clone(),
            index["tombstones"].clone(),
        )
    };
    assert_eq!(counts(sharded), counts(oracle), "the statistics' counts");
}

/// Walks the list `path` with a cursor on both, a page of 7 at a time, and compares each page
/// with the oracle's (their cursors apart: each names its own snapshots); `between` runs
/// after the first page. The walk must be the list as it was when it started, each story
/// once. Returns how many stories it walked.
pub(crate) fn walk_both(
    oracle: &Serve,
    sharded: &Serve,
    path: &str,
    mut between: impl FnMut(),
) -> usize {
    let (_, at_start) = oracle.get(&format!("{path}&limit=1000"));
    let mut cursors = ("*".to_owned(), "*".to_owned());
    let mut walked: Vec<Value> = Vec::new();
    for turn in 0.. {
        let page = |server: &Serve, cursor: &str| {
            let (status, mut page) = server.get(&format!("{path}&limit=7&cursor={}", pct(cursor)));
            assert_eq!(status, 200, "{path}: {page}");
            let next = page.as_object_mut().unwrap().remove("next_cursor");
            (page, next.and_then(|next| next.as_str().map(str::to_owned)))
        };
        let (expected, expected_next) = page(oracle, &cursors.0);
        let (answer, next) = page(sharded, &cursors.1);
        assert_eq!(answer, expected, "page {turn} of the walk {path}");
        walked.extend(expected["clusters"].as_array().unwrap().iter().cloned());
        match (expected_next, next) {
            (Some(expected_next), Some(next)) => cursors = (expected_next, next),
            (None, None) => break,
            other => panic!("{path}: one walk ends, the other goes on: {other:?}"),
        }
        if turn == 0 {
            between();
        }
    }
    assert_eq!(
        walked.as_slice(),
        at_start["clusters"].as_array().unwrap().as_slice(),
        "{path}: the walk is the list at its start"
    );
    walked.len()
}

/// Which of `shards` hold a live document `id`.
fn holders(shards: &[Serve], id: &str) -> Vec<usize> {
    shards
        .iter()
        .enumerate()
        .filter(|(_, shard)| shard.get(&format!("/v1/documents/{}", pct(id))).0 == 200)
        .map(|(number, _)| number)
        .collect()
}

#[test]
fn every_answer_equals_one_index_with_one_to_four_shards() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let docs = in_sites_chrome(corpus(32, 60).1);
    let stream = batches(&docs);
    // Replacements: a document takes another story's text (so it may move to another shard),
    // or an edited text of its own; then deletes.
    let replaced: Vec<Value> = docs
        .iter()
        .step_by(6)
        .enumerate()
        .map(|(n, doc)| {
            let other = &docs[(n * 37 + 11) % docs.len()];
            let mut json = doc.json(n);
            json["content"] = if n % 2 == 0 {
                json!(other.content)
            } else {
                json!(format!("{}（更新）", doc.content))
            };
            json
        })
        .collect();
    let deleted: Vec<&str> = docs
        .iter()
        .skip(3)
        .step_by(10)
        .map(|doc| doc.id.as_str())
        .collect();

    for count in 1..=4 {
        redis.flush_all();
        let shards_dir = dir.path().join(format!("split-{count}"));
        let sharded = Sharded::start(&shards_dir, count, &store);
        let oracle = Serve::start(&shards_dir.join("oracle"), |command| {
            command.args(["--commit-delay", "5ms"]);
        });
        let mut boilerplate = 0;
        for batch in &stream {
            let expected = oracle.post(batch);
            let answer = sharded.coordinator.post(batch);
            assert_eq!(answer, expected, "{count} shards: a batch's answer");
            let results = expected["results"].as_array().unwrap();
            boilerplate += (results.iter())
                .filter(|result| result["reason"] == "boilerplate")
                .count();
        }
        assert_eq!(
            boilerplate, 3,
            "each site's page of its chrome alone is boilerplate"
        );
        // Every answer, with keyword queries: no document was deleted yet, so BM25's
        // statistics (which count deleted documents until a merge drops them) agree.
        compare_reads(&oracle, &sharded.coordinator, &docs, true);
        // Cursor walks, while reposts with new ids arrive at both after their first page and
        // one of those leaves again.
        let mut arrivals = docs.iter().step_by(4).enumerate().cycle();
        let from = docs.iter().map(|doc| doc.published_at).min().unwrap();
        let to = docs.iter().map(|doc| doc.published_at).max().unwrap();
        let window = format!(
            "trend_window={}s&trend_end={}",
            (to - from) / 6 + 1,
            (from + to) / 2
        );
        // With keywords first, and documents leaving only after them: BM25 counts deleted
        // documents until a merge, which one index and the shards do not do alike.
        for (q, leaving) in [(QUERY_WORDS[0], false), ("", true)] {
            for (sort, _) in Sort::ALL {
                let path = format!("/v1/search?sort={sort}&q={}&members=1&{window}", pct(q));
                let walked = walk_both(&oracle, &sharded.coordinator, &path, || {
                    let batch: Vec<Value> = arrivals
                        .by_ref()
                        .take(3)
                        .map(|(n, doc)| {
                            let mut json = doc.json(n);
                            json["id"] = json!(format!("{}-walk-{n}", doc.id));
                            json
                        })
                        .collect();
                    let gone = format!("/v1/documents/{}", pct(batch[0]["id"].as_str().unwrap()));
                    let batch = Value::Array(batch);
                    assert_eq!(sharded.coordinator.post(&batch), oracle.post(&batch));
                    if leaving {
                        same(&oracle, &sharded.coordinator, "DELETE", &gone, None);
                    }
                });
                assert!(walked > 7, "{path}: {walked} stories");
            }
        }

        let replacements = Value::Array(replaced.clone());
        let expected = oracle.post(&replacements);
        let answer = sharded.coordinator.post(&replacements);
        assert_eq!(answer, expected, "{count} shards: the replacements' answer");
        for doc in replaced.iter() {
            let id = doc["id"].as_str().unwrap();
            assert_eq!(
                holders(&sharded.shards, id).len(),
                1,
                "{count} shards: {id} must be live on one shard after its replacement"
            );
        }
        for id in &deleted {
            same(
                &oracle,
                &sharded.coordinator,
                "DELETE",
                &format!("/v1/documents/{id}"),
                None,
            );
            assert!(holders(&sharded.shards, id).is_empty(), "{id} deleted");
        }
        compare_reads(&oracle, &sharded.coordinator, &docs, false);

        // A re-send through another coordinator changes nothing.
        let second = start_coordinator(&sharded.shards, &store);
        let resent = second.post(&replacements);
        assert_eq!(resent["unchanged"], json!(replaced.len()), "{resent}");
        assert_eq!(
            resent,
            oracle.post(&replacements),
            "{count} shards: a re-send"
        );
        // The sites' pages again under new ids, through the second coordinator: it takes out
        // the chrome that the first learned (kept in the store), as one index does.
        let sites_pages: Vec<Value> = (docs.iter())
            .filter(|doc| doc.content.contains("版权所有"))
            .rev()
            .take(12)
            .enumerate()
            .map(|(n, doc)| {
                let mut json = doc.json(n);
                json["id"] = json!(format!("{}-again", doc.id));
                json
            })
            .collect();
        let sites_pages = Value::Array(sites_pages);
        let answer = second.post(&sites_pages);
        assert_eq!(
            answer,
            oracle.post(&sites_pages),
            "{count} shards: pages again"
        );
        let boilerplate = (answer["results"].as_array().unwrap().iter())
            .filter(|result| result["reason"] == "boilerplate")
            .count();
        // Not every site's: the replacements gave some of their pages other sites' texts.
        assert!(boilerplate > 0, "{answer}");
        compare_reads(&oracle, &second, &docs, false);
    }
}

#[test]
fn concurrent_writes_moving_ids_leave_each_live_once_where_the_directory_says() {
    const IDS: usize = 8;
    const ROUNDS: usize = 24;
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(34, 40);
    let texts: Vec<&Doc> = docs
        .iter()
        .filter(|doc| doc.kind == crate::server_api::Kind::Original)
        .collect();
    let sharded = Sharded::start(dir.path(), 3, &store);
    let second = start_coordinator(&sharded.shards, &store);
    // Each client posts every id in each round, each with another story's text: most
    // replacements move the id to another story, often on another shard.
    let batch = |client: usize, round: usize| {
        let documents = (0..IDS)
            .map(|id| {
                let text = texts[(id + round * 3 + client * 5) % texts.len()];
                let mut json = text.json(round);
                json["id"] = json!(format!("mover-{id}"));
                json
            })
            .collect();
        Value::Array(documents)
    };
    std::thread::scope(|scope| {
        for client in 0..4 {
            let coordinator = [&sharded.coordinator, &second][client % 2];
            let batch = &batch;
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    coordinator.post(&batch(client, round));
                }
            });
        }
    });
    for id in (0..IDS).map(|id| format!("mover-{id}")) {
        let held = holders(&sharded.shards, &id);
        assert_eq!(held.len(), 1, "{id} is live on shards {held:?}");
        let path = format!("/v1/documents/{id}");
        let (status, found) = sharded.coordinator.get(&path);
        assert_eq!(status, 200, "the directory leads to {id}: {found}");
        assert_eq!(found, sharded.shards[held[0]].get(&path).1, "{id}");
        // The version held is the one the directory records: sent again, it is unchanged.
        let content = &found["document"]["content"];
        let sent = (0..4)
            .flat_map(|client| (0..ROUNDS).map(move |round| (client, round)))
            .flat_map(|(client, round)| batch(client, round).as_array().unwrap().clone())
            .find(|document| document["id"] == json!(id) && &document["content"] == content)
            .unwrap_or_else(|| panic!("{id} holds a text that was sent: {found}"));
        let resent = second.post(&Value::Array(vec![sent]));
        assert_eq!(resent["unchanged"], json!(1), "{id} sent again: {resent}");
    }
    let (_, stats) = sharded.coordinator.get("/v1/stats");
    assert_eq!(
        stats["index"]["documents"],
        json!(IDS),
        "one live copy an id: {stats}"
    );
}

#[test]
fn a_coordinator_stopped_in_its_write_turn_finishes_it_and_gives_it_back() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(35, 160);
    let batches: Vec<Value> = docs
        .chunks(100)
        .map(|chunk| Value::Array(chunk.iter().map(|doc| doc.json(0)).collect()))
        .collect();
    let shard = start_shard(dir.path(), 0, 1, &store, "127.0.0.1:0");
    // No grace for requests in flight: the process stops serving as soon as it is told to,
    // in the middle of a write's turn.
    let settings = dir.path().join("no-grace.toml");
    std::fs::write(&settings, "[server]\nshutdown_grace = \"1ms\"\n").unwrap();
    let mut stopping = Serve::launch(|command| {
        command
            .args(["--coordinator", "--shards", &shard.base, "--store", &store])
            .arg("--config")
            .arg(&settings);
    });
    let lease = || redis.keys("*{write-turn}");
    let (agent, url) = (
        &stopping.agent.clone(),
        &format!("{}/v1/documents", stopping.base),
    );
    std::thread::scope(|scope| {
        for client in 0..3 {
            let batches = &batches;
            // Writes until the coordinator is gone (its answers do not matter here).
            scope.spawn(move || {
                for batch in batches.iter().cycle().skip(client) {
                    let sent = agent
                        .post(url)
                        .header("content-type", "application/json")
                        .send(batch.to_string().as_bytes());
                    if sent.is_err() {
                        break;
                    }
                }
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while lease().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no write took the turn"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        stopping.stop();
    });
    assert_eq!(
        lease(),
        Vec::<String>::new(),
        "the stopped coordinator gave its write turn back"
    );
    // Nothing is lost: every batch sent again through another coordinator leaves each
    // document live once.
    let coordinator = start_coordinator(std::slice::from_ref(&shard), &store);
    for batch in &batches {
        coordinator.post(batch);
    }
    let (_, stats) = coordinator.get("/v1/stats");
    assert_eq!(stats["index"]["documents"], json!(docs.len()), "{stats}");
}

#[test]
fn the_store_lets_go_of_the_chrome_of_sources_silent_for_the_forgetting_span() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let shard = start_shard(dir.path(), 0, 1, &store, "127.0.0.1:0");
    let coordinator = start_coordinator(std::slice::from_ref(&shard), &store);
    let page = |id: &str, source: &str, story: &str| {
        let content =
            format!("{source}首页 新闻 图片 视频\n{story}\n版权所有 {source} 违法和不良信息举报");
        json!({"id": id, "source": source, "content": content})
    };
    let sources = || {
        let mut keys = redis.keys("*src:*");
        keys.sort();
        keys
    };
    coordinator.post(&json!([
        page(
            "a1",
            "甲网",
            "市政府召开常务会议，研究部署今年冬季供暖保障工作。"
        ),
        page(
            "a2",
            "甲网",
            "全市中小学下周起调整作息时间，上午第一节课推迟半小时。"
        ),
    ]));
    let first = sources();
    assert_eq!(first.len(), 1, "{first:?}");
    // The stream moves on to where 甲网's pages (at 0 and 1, saved when it stood at 2) are
    // about to be forgotten, as that many inserts of other sources would move it: the next
    // write (its page at FORGET_AFTER) still keeps them, the one after lets them go.
    let placed = redis.keys("*placed");
    assert_eq!(placed.len(), 1, "{placed:?}");
    let span = tantivy_dedup::chrome::FORGET_AFTER;
    redis.set(&placed[0], &span.to_string());
    coordinator.post(&json!([page(
        "b1",
        "乙网",
        "新建的城市图书馆今天对外开放，首日接待读者三千余人次。"
    )]));
    assert_eq!(sources().len(), 2, "{:?}", sources());
    coordinator.post(&json!([page(
        "b2",
        "乙网",
        "地铁三号线南延段完成全线贯通，预计明年上半年开通运营。"
    )]));
    let second = sources();
    assert_eq!(
        second.len(),
        1,
        "甲网's key is gone, 乙网's kept: {second:?}"
    );
    assert_ne!(second, first);
    // 甲网 heard from again is kept again, beside 乙网, which is not silent for long enough.
    coordinator.post(&json!([page(
        "a3",
        "甲网",
        "本市今年第一场雪如期而至，环卫工人连夜清扫主干道积雪。"
    )]));
    assert_eq!(sources().len(), 2, "{:?}", sources());
    assert_eq!(redis.keys("*src-heard").len(), 1);
}

/// What a coordinator over `shards` (their addresses, comma-separated) and `store`, with
/// `more` arguments, says on standard error when it refuses to start (`what` names it):
/// killed, and the test failed, if it is still running after 30 seconds or if it exits well.
fn refused_coordinator(shards: &str, store: &str, more: &[&std::ffi::OsStr], what: &str) -> String {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tantivy-dedup"))
        .args([
            "serve",
            "--coordinator",
            "--shards",
            shards,
            "--store",
            store,
        ])
        .args(["--addr", "127.0.0.1:0"])
        .args(more)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} went on running");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success(), "{what} started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_shard_down_is_named_and_partial_pages_are_flagged() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(33, 40);
    let mut sharded = Sharded::start(dir.path(), 3, &store);
    for batch in batches(&docs) {
        sharded.coordinator.post(&batch);
    }
    // Shards listed out of order would misroute stories: the coordinator refuses to start.
    let swapped = [&sharded.shards[1], &sharded.shards[0], &sharded.shards[2]]
        .map(|shard| shard.base.as_str())
        .join(",");
    let message = refused_coordinator(
        &swapped,
        &store,
        &[],
        "a coordinator with its shards out of order",
    );
    assert!(message.contains("in order, shard 0 first"), "{message}");
    // A coordinator that would fingerprint with a user dictionary its shards do not split
    // with is refused too.
    std::fs::write(dir.path().join("words.txt"), "凌霄微电子\n").unwrap();
    let settings = dir.path().join("settings.toml");
    std::fs::write(&settings, "[index]\nuser_dict = \"words.txt\"\n").unwrap();
    let in_order = sharded
        .shards
        .iter()
        .map(|shard| shard.base.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let message = refused_coordinator(
        &in_order,
        &store,
        &["--config".as_ref(), settings.as_os_str()],
        "a coordinator with another user dictionary",
    );
    assert!(
        message.contains("splits text with no user dictionary"),
        "{message}"
    );
    let everything = "/v1/search?sort=similar_desc&limit=1000";
    let full = sharded
        .coordinator
        .search(&everything["/v1/search?".len()..]);
    let size_of = |root: &Value| {
        full["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|cluster| &cluster["root"] == root)
            .map(|cluster| cluster["cluster_size"].clone())
    };
    // A shard's refusal of a walk whose snapshot it no longer keeps reaches the client.
    let list = SearchRequest::new("").sort(Sort::SimilarDesc);
    let last = SortKey {
        size: 1,
        newest: 0,
        oldest: 0,
        score: 1.0,
        joined: Default::default(),
        hot: 0.0,
        value: None,
        root: tantivy_dedup::Fingerprint(7),
    };
    let forged = Cursor::after_story(list.list_digest(), vec![1, 2, 3], None, &last)
        .on_replicas(vec![0, 0, 0]);
    let (status, gone) = sharded.coordinator.get(&format!(
        "/v1/search?sort=similar_desc&cursor={}",
        pct(&forged.to_string())
    ));
    assert_eq!(
        (status, &gone["error"]["code"]),
        (410, &json!("cursor_expired")),
        "{gone}"
    );
    let port = sharded.shards[1]
        .base
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    sharded.shards[1].kill();

    let (status, refusal) = sharded.coordinator.get(everything);
    assert_eq!(status, 503, "{refusal}");
    assert_eq!(refusal["error"]["code"], "shard_unavailable", "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shard 1"),
        "{refusal}"
    );
    // A walk is never partial: its next page would miss the shard's stories for good.
    let (status, refusal) = sharded
        .coordinator
        .get(&format!("{everything}&allow_partial=true&cursor=*"));
    assert_eq!(status, 503, "{refusal}");
    let (status, partial) = sharded
        .coordinator
        .get(&format!("{everything}&allow_partial=true"));
    assert_eq!(status, 200, "{partial}");
    assert_eq!(partial["partial"], json!(true));
    assert_eq!(
        partial["shards"],
        json!({"total": 3, "answered": 2, "missing": [1]})
    );
    let shown = partial["clusters"].as_array().unwrap();
    assert!(!shown.is_empty() && shown.len() < full["clusters"].as_array().unwrap().len());
    for cluster in shown {
        assert_eq!(
            Some(cluster["cluster_size"].clone()),
            size_of(&cluster["root"]),
            "a partial page's stories are whole: {cluster}"
        );
    }
    // A story is never partial: the down shard's stories are refused, the others answered.
    for cluster in full["clusters"].as_array().unwrap().iter().take(12) {
        let root = cluster["root"].as_str().unwrap();
        let (status, _) = sharded.coordinator.get(&format!("/v1/stories/{root}"));
        let on_live_shard = shown.iter().any(|shown| shown["root"] == cluster["root"]);
        assert_eq!(status, if on_live_shard { 200 } else { 503 }, "{root}");
    }
    let check = json!({"content": docs[0].content}).to_string();
    let (status, _) = sharded
        .coordinator
        .request("POST", "/v1/near-duplicates", Some(&check));
    assert_eq!(status, 503, "a near-duplicate check is never partial");
    let (status, health) = sharded.coordinator.get("/healthz");
    assert_eq!(status, 503, "{health}");
    // Back on the same address: every answer as before the kill.
    sharded.shards[1] = start_shard(dir.path(), 1, 3, &store, &format!("127.0.0.1:{port}"));
    let again = sharded
        .coordinator
        .search(&everything["/v1/search?".len()..]);
    assert_eq!(again, full, "after the shard's restart");
    for doc in &docs {
        let (status, _) = sharded
            .coordinator
            .get(&format!("/v1/documents/{}", pct(&doc.id)));
        assert_eq!(status, 200, "{} was acknowledged", doc.id);
    }
    assert_eq!(sharded.coordinator.get("/healthz").0, 200);

    // Down again: a write with documents for the down shard is refused; retried once the
    // shard is back, it is completed, each document placed once.
    let (_, more) = corpus(34, 8);
    let more: Vec<Value> = more
        .iter()
        .map(|doc| {
            let mut json = doc.json(0);
            json["id"] = json!(format!("late-{}", doc.id));
            json
        })
        .collect();
    let late = Value::Array(more.clone());
    sharded.shards[1].kill();
    let (status, refused) = sharded.coordinator.try_post(&late);
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "shard_unavailable", "{refused}");
    sharded.shards[1] = start_shard(dir.path(), 1, 3, &store, &format!("127.0.0.1:{port}"));
    let retried = sharded.coordinator.post(&late);
    assert_eq!(retried["failed"], json!(0), "{retried}");
    let resent = sharded.coordinator.post(&late);
    assert_eq!(resent["unchanged"], json!(more.len()), "{resent}");
    let (_, stats) = sharded.coordinator.get("/v1/stats");
    assert_eq!(
        stats["index"]["documents"],
        json!(docs.len() + more.len()),
        "{stats}"
    );
}
