//! The HTTP service (`src/server/`) end to end, over real HTTP on loopback (docs/service.md).
//!
//! Each test starts its own in-process server (a fresh index in a temporary directory, a tokio
//! runtime on a background thread, a listener on `127.0.0.1:0`) and talks to it with `ureq`.
//! The corpus is generated from invented Chinese sentences: stories of six to ten sentences,
//! reposts whose edits normalisation removes (markup, comments, entities, punctuation width,
//! white space) or that change the text slightly (a footer, a changed character), and
//! unrelated stories.
//!
//! - `end_to_end_against_a_model`: batches in every body format; each answer, document page,
//!   detail page, list page (every sort, keyword queries, source and time filters,
//!   pagination), near-duplicate check and the statistics against a model built from the
//!   answers (the roots) and from the tokenizer (which documents match); re-sending,
//!   replacing and deleting documents; ids that need escaping; `/healthz` and `/metrics`;
//!   story pages (`server_api/story_pages.rs`).
//! - `concurrent_clients_make_one_cluster`: 64 clients at the same instant posting one story
//!   under 64 ids, 64 near-identical variants, and one id with the same text.
//! - `bad_input_table` and `mixed_batch_indexes_exactly_the_valid_documents`: every kind of
//!   bad request gets its exact 4xx status and a JSON error that names what is wrong; nothing
//!   else is lost; a batch mixing good and bad documents indexes exactly the good ones.
//! - `oversized_bodies_are_refused_whole`: body limits, with and without a declared length.
//! - The property tests: `parse_batch`, `Article::from_json_bytes` and the text pipeline on
//!   arbitrary input never panic, and `parse_batch` returns one result per document, in order.
//! - Regressions of bugs these tests found: over-long ids, a huge `max_future`, JSON arrays
//!   read as articles.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tantivy_dedup::config::{Config, IndexConfig, ServerConfig};
use tantivy_dedup::engine::DedupIndex;
use tantivy_dedup::server::{BatchLimits, BodyError, Server, parse_batch};
use tantivy_dedup::text::{AnalyzedText, Fingerprinter, Weighting, normalize};
use tantivy_dedup::verify::Sketch;
use tantivy_dedup::{Article, DedupConfig, Deduplicator};
use tempfile::TempDir;

mod hardening;
mod openapi;
mod story_pages;

/// `k`, the default near-duplicate distance.
const K: u32 = 3;
const BASE_TIME: i64 = 1_700_000_000;

// ---- the server fixture ---------------------------------------------------------------------

/// A server on loopback over a fresh index; stopped (queued writes committed, index closed)
/// by [`TestServer::stop`] or on drop. Other modules start theirs with it too.
pub(crate) struct TestServer {
    base: String,
    agent: ureq::Agent,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
    // Dropped after the thread is joined (fields drop after `Drop::drop`).
    _dir: TempDir,
}

/// An answer: status, raw body, and the body as JSON (`Value::Null` when it is not JSON).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) text: String,
    pub(crate) json: Value,
}

impl Reply {
    /// The `error` object of an error answer, checked to have a code and a message.
    fn error(&self) -> (&str, &str) {
        let code = self.json["error"]["code"].as_str();
        let message = self.json["error"]["message"].as_str();
        match (code, message) {
            (Some(code), Some(message)) if !code.is_empty() && !message.trim().is_empty() => {
                (code, message)
            }
            _ => panic!(
                "no error code and message in {}: {}",
                self.status, self.text
            ),
        }
    }
}

fn small_index_config(server: ServerConfig) -> Config {
    Config {
        index: IndexConfig {
            writer_threads: Some(1),
            writer_memory_mb: 15,
            // Forest checkpoints at most commits, so that the server tests run through them.
            checkpoint_inserts: 2,
            ..IndexConfig::default()
        },
        server,
        ..Config::default()
    }
}

pub(crate) fn server_config() -> ServerConfig {
    ServerConfig {
        commit_delay: Duration::from_millis(20),
        ..ServerConfig::default()
    }
}

impl TestServer {
    pub(crate) fn start(server: ServerConfig) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = small_index_config(server);
        let index = DedupIndex::create(dir.path(), config.clone()).expect("create the index");
        let server = Server::start(index, config.server.clone()).expect("start the server");
        let (address_tx, address_rx) = std::sync::mpsc::channel::<SocketAddr>();
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|error| error.to_string())?;
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .map_err(|error| error.to_string())?;
                    let address = listener.local_addr().map_err(|error| error.to_string())?;
                    address_tx
                        .send(address)
                        .map_err(|error| error.to_string())?;
                    server
                        .serve(listener, async {
                            let _ = shutdown_rx.await;
                        })
                        .await
                        .map_err(|error| error.to_string())
                })
            })
            .expect("spawn the server thread");
        let address = address_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server listens");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        TestServer {
            base: format!("http://{address}"),
            agent,
            shutdown: Some(shutdown),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn address(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// Stops the server and checks that it shut down cleanly.
    fn stop(mut self) {
        let result = self.halt();
        assert_eq!(result, Some(Ok(())), "the server stops cleanly");
    }

    fn halt(&mut self) -> Option<Result<(), String>> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let thread = self.thread.take()?;
        Some(
            thread
                .join()
                .unwrap_or_else(|_| Err("the server thread panicked".to_owned())),
        )
    }

    fn reply(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
        let mut response = response.expect("an HTTP answer");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .expect("the answer's body");
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            content_type,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            json,
        }
    }

    fn get(&self, path: &str) -> Reply {
        Self::reply(self.agent.get(format!("{}{path}", self.base)).call())
    }

    /// A GET with `accept` as its `Accept` header.
    pub(crate) fn get_accepting(&self, path: &str, accept: &str) -> Reply {
        Self::reply(
            self.agent
                .get(format!("{}{path}", self.base))
                .header("accept", accept)
                .call(),
        )
    }

    fn delete(&self, path: &str) -> Reply {
        Self::reply(self.agent.delete(format!("{}{path}", self.base)).call())
    }

    fn post(&self, path: &str, body: &[u8]) -> Reply {
        Self::reply(
            self.agent
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .send(body),
        )
    }

    pub(crate) fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.post(path, body.to_string().as_bytes())
    }

    /// A document page (`None` for a 404).
    fn document(&self, id: &str) -> Option<Value> {
        let reply = self.get(&format!("/v1/documents/{}", pct(id)));
        match reply.status {
            200 => Some(reply.json),
            404 => {
                assert_eq!(reply.error().0, "not_found");
                None
            }
            status => panic!("GET document {id}: {status} {}", reply.text),
        }
    }

    fn stats(&self) -> Value {
        let reply = self.get("/v1/stats");
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json
    }

    /// A list page that must succeed.
    pub(crate) fn search(&self, params: &[(&str, String)]) -> Value {
        let reply = self.get(&format!("/v1/search?{}", query_string(params)));
        assert_eq!(reply.status, 200, "search {params:?}: {}", reply.text);
        reply.json
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// Percent-encodes everything but unreserved characters.
fn pct(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

fn query_string(params: &[(&str, String)]) -> String {
    params
        .iter()
        .map(|(name, value)| format!("{name}={}", pct(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A 64-bit hash as the API writes it: 16 lowercase hex digits.
fn hash(value: &Value) -> u64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a hash must be a string: {value}"));
    assert!(
        text.len() == 16
            && text
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)),
        "a hash must be 16 lowercase hex digits: {text:?}"
    );
    u64::from_str_radix(text, 16).expect("hex")
}

fn hex(value: u64) -> String {
    format!("{value:016x}")
}

fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

// ---- the invented corpus --------------------------------------------------------------------

/// Invented news sentences (none taken from any corpus).
const SENTENCES: [&str; 32] = [
    "清晨六点，江畔湿地公园的观鸟台上已经聚集了二十多名摄影爱好者，等待候鸟归巢。",
    "据园区管理处介绍，今年冬季飞抵湿地的白鹭和灰鹤数量比去年同期增加了近三成。",
    "为减少对鸟类的干扰，管理处在核心区外围新设了两公里长的竹篱隔离带。",
    "县农技站的技术员蹲在稻田边，手把手教农户用手机识别稻飞虱和纹枯病。",
    "今年全县推广的再生稻种植面积达到四万亩，头季亩产普遍超过六百公斤。",
    "一位种粮大户算了一笔账，采用无人机飞防后，每亩农药成本下降了十五元。",
    "老城区的十二条背街小巷完成了雨污分流改造，困扰居民多年的污水外溢问题基本解决。",
    "施工单位采用夜间作业、分段封闭的方式，尽量减少对沿街商户经营的影响。",
    "社区还在改造后的巷口设置了休息座椅和共享书架，吸引不少老人驻足聊天。",
    "市急救中心新配备的十台负压救护车本周投入使用，车内装有远程会诊终端。",
    "急救人员可以在转运途中把患者心电图实时传送给医院，为抢救争取宝贵时间。",
    "该中心负责人表示，全市平均急救反应时间已由十四分钟缩短到十一分钟。",
    "高新区一家企业发布了新一代巡检机器人，能够在零下三十度的环境中连续工作。",
    "这款机器人已在北方三座变电站试用，累计发现设备隐患四十余处。",
    "企业研发团队平均年龄不到三十二岁，其中博士占比接近四分之一。",
    "市博物馆的古籍修复室对公众开放参观，修复师现场演示了揭裱和补洞工艺。",
    "一部清代地方志经过两年修复重新装订成册，破损的书页被逐一补齐。",
    "馆方计划明年推出古籍数字化平台，让读者在网上就能翻阅珍贵藏书。",
    "受冷空气影响，本周后期全省将出现大风降温天气，部分山区有雨夹雪。",
    "气象部门提醒设施农业种植户提前加固大棚，做好蔬菜防冻保暖工作。",
    "交通运输部门已提前储备融雪剂三千吨，重点路段安排专人值守。",
    "城东新建的体育公园正式开放，园内设有笼式足球场、篮球场和环形跑道。",
    "公园夜间照明采用智能调光系统，晚上十点后自动降低亮度以节约用电。",
    "附近居民说，以前锻炼只能在马路边跑步，现在下楼走几分钟就有了好去处。",
    "海关数据显示，今年前三季度本省水果出口额同比增长百分之十八。",
    "柑橘和猕猴桃在东南亚市场最受欢迎，冷链运输让鲜果五天内即可上架。",
    "出口企业负责人表示，下一步将申请更多国际有机认证，开拓中东市场。",
    "一场以非遗手工为主题的市集在古镇开幕，竹编、剪纸和蓝印花布摊位前人头攒动。",
    "年轻的手艺人把传统纹样印在帆布包和手机壳上，不少游客当场下单。",
    "主办方介绍，市集将持续到月底，每个周末都会安排戏曲和皮影表演。",
    "警方提醒，近期出现冒充快递客服以理赔为由实施诈骗的案件，市民切勿轻信。",
    "凡是要求下载陌生软件、开启屏幕共享的电话，都应立即挂断并拨打反诈专线核实。",
];

const PLACES: [&str; 8] = [
    "青山县",
    "临江镇",
    "西湖街道",
    "北岸新区",
    "南塘村",
    "东坡社区",
    "石门乡",
    "云溪开发区",
];
const ORGS: [&str; 8] = [
    "卫生院",
    "消防站",
    "图书室",
    "农贸市场",
    "职业学校",
    "供电所",
    "养老院",
    "文化站",
];
const ACTIONS: [&str; 6] = [
    "完成了设备更新",
    "开展了安全检查",
    "举办了开放日活动",
    "启动了扩建工程",
    "调整了服务时间",
    "招募了一批志愿者",
];
const DETAILS: [&str; 6] = [
    "受到周边群众好评",
    "预计下月全面完工",
    "共投入资金八十万元",
    "参与人数超过五百人",
    "相关做法将在全市推广",
    "工作人员现场解答疑问",
];
pub(crate) const SOURCES: [&str; 6] = [
    "新华网",
    "人民网",
    "央视网",
    "澎湃新闻",
    "南方日报",
    "本地晚报",
];
const EDITORS: [&str; 4] = ["周明", "吴芳", "郑磊", "孙悦"];

/// Words searched for in the list-page checks; each is one token of the search index.
pub(crate) const QUERY_WORDS: [&str; 5] = ["古籍", "湿地", "诈骗", "大棚", "出口"];

/// A story: a title and its sentences.
#[derive(Debug, Clone)]
pub(crate) struct Story {
    title: String,
    sentences: Vec<String>,
}

impl Story {
    fn text(&self) -> String {
        self.sentences.concat()
    }
}

/// A sentence assembled from the banks ("{place}{org}{action}，{detail}。").
fn generated_sentence(rng: &mut SmallRng) -> String {
    format!(
        "{}{}{}，{}。",
        PLACES.choose(rng).unwrap(),
        ORGS.choose(rng).unwrap(),
        ACTIONS.choose(rng).unwrap(),
        DETAILS.choose(rng).unwrap()
    )
}

/// A story of six to ten sentences: some from the pool, the rest assembled.
fn story(rng: &mut SmallRng) -> Story {
    let length = rng.random_range(6..=10);
    let pooled = rng.random_range(2..=5).min(length);
    let mut sentences: Vec<String> = SENTENCES
        .choose_multiple(rng, pooled)
        .map(|s| s.to_string())
        .collect();
    while sentences.len() < length {
        sentences.push(generated_sentence(rng));
    }
    sentences.shuffle(rng);
    let title = format!(
        "{}{}：{}",
        PLACES.choose(rng).unwrap(),
        ORGS.choose(rng).unwrap(),
        ["新进展", "最新消息", "记者探访", "一线观察"]
            .choose(rng)
            .unwrap()
    );
    Story { title, sentences }
}

/// A repost that normalisation undoes: markup around sentences or the whole text, HTML
/// comments and entities, the other width of punctuation (NFKC folds `｡` and `､` to `。` and
/// `、`, and `，` to `,`), white space.
fn exact_repost(rng: &mut SmallRng, story: &Story) -> String {
    let mut sentences = story.sentences.clone();
    if rng.random_bool(0.5) {
        for sentence in &mut sentences {
            *sentence = sentence
                .replace('，', ",")
                .replace('。', "｡")
                .replace('、', "､");
        }
    }
    let separator = *["", "\n", "\n\n  ", "&nbsp;", "<!-- 广告位 -->", "<br/>"]
        .choose(rng)
        .unwrap();
    let mut text = if rng.random_bool(0.5) {
        sentences
            .iter()
            .map(|sentence| format!("<p>{sentence}</p>"))
            .collect::<Vec<_>>()
            .join(separator)
    } else {
        sentences.join(separator)
    };
    if rng.random_bool(0.5) {
        text = format!("<div class=\"article-body\">\n{text}\n</div>");
    }
    text
}

/// A repost with a small edit: an editor's footer, a changed character, or ASCII full stops
/// (not a width variant of `。`: jieba reads `.` as part of the next word, so the segmentation
/// may change).
fn edited_repost(rng: &mut SmallRng, story: &Story) -> String {
    let mut text = story.text();
    if rng.random_bool(0.2) {
        text = text.replace('。', ".");
    } else if rng.random_bool(0.5) {
        let chars: Vec<char> = text.chars().collect();
        let at = rng.random_range(0..chars.len());
        if ('\u{4e00}'..='\u{9fff}').contains(&chars[at]) {
            let mut chars = chars;
            chars[at] = *['的', '在', '和', '有'].choose(rng).unwrap();
            text = chars.into_iter().collect();
        }
    } else {
        text.push_str(&format!("（责任编辑：{}）", EDITORS.choose(rng).unwrap()));
    }
    text
}

/// How a document of the corpus was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Original,
    /// A repost normalisation undoes: it must share its original's fingerprint and root.
    Exact,
    Edited,
}

/// A corpus document with what the model knows about it.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) content: String,
    pub(crate) source: Option<String>,
    pub(crate) url: String,
    pub(crate) published_at: i64,
    pub(crate) story: usize,
    pub(crate) kind: Kind,
}

impl Doc {
    /// The article's JSON, with `published_at` in one of the accepted forms.
    pub(crate) fn json(&self, time_form: usize) -> Value {
        let time = match time_form % 3 {
            0 => json!(self.published_at),
            1 => json!(self.published_at.to_string()),
            _ => json!(rfc3339(self.published_at)),
        };
        let mut value = json!({
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "url": self.url,
            "published_at": time,
            "ignored_extra": {"tags": ["a", "b"]},
        });
        if let Some(source) = &self.source {
            value["source"] = json!(source);
        }
        value
    }
}

/// `time` as RFC 3339 in UTC+8.
fn rfc3339(time: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(time)
        .expect("a valid time")
        .to_offset(time::macros::offset!(+8))
        .format(&time::format_description::well_known::Rfc3339)
        .expect("formats")
}

/// The corpus: stories with 0-5 reposts each, in random arrival order, published at distinct
/// times that are not in arrival order.
pub(crate) fn corpus(seed: u64, stories: usize) -> (Vec<Story>, Vec<Doc>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let stories: Vec<Story> = (0..stories).map(|_| story(&mut rng)).collect();
    let mut made: Vec<(usize, Kind, String, String)> = Vec::new();
    for (index, story) in stories.iter().enumerate() {
        made.push((index, Kind::Original, story.title.clone(), story.text()));
        let reposts = if index % 4 == 0 {
            0
        } else {
            rng.random_range(0..=5)
        };
        for _ in 0..reposts {
            let title = match rng.random_range(0..3) {
                0 => story.title.clone(),
                1 => format!("转载：{}", story.title),
                _ => format!("{}（组图）", story.title),
            };
            if rng.random_bool(0.6) {
                made.push((index, Kind::Exact, title, exact_repost(&mut rng, story)));
            } else {
                made.push((index, Kind::Edited, title, edited_repost(&mut rng, story)));
            }
        }
    }
    made.shuffle(&mut rng);
    let mut slots: Vec<i64> = (0..made.len() as i64).collect();
    slots.shuffle(&mut rng);
    let docs = made
        .into_iter()
        .zip(slots)
        .enumerate()
        .map(|(n, ((story, kind, title, content), slot))| {
            let id = format!("d{n:04}");
            Doc {
                url: format!("https://news.example.cn/{id}.html"),
                id,
                title,
                content,
                source: (!rng.random_bool(0.06))
                    .then(|| SOURCES.choose(&mut rng).unwrap().to_string()),
                published_at: BASE_TIME + slot * 97 + rng.random_range(0..90),
                story,
                kind,
            }
        })
        .collect();
    (stories, docs)
}

/// The search index's tokens of a text.
fn tokens(text: &str) -> HashSet<String> {
    AnalyzedText::new(text)
        .tokens()
        .map(|(token, _)| token.to_owned())
        .collect()
}

/// The fingerprint the server's default settings give an article's content (the default
/// `[dedup]` settings fingerprint the body alone).
fn fingerprint(content: &str) -> u64 {
    let config = DedupConfig::default();
    assert_eq!(config.fields, ["content"]);
    config.fingerprinter().fingerprint(content).0
}

// ---- the model of the index -----------------------------------------------------------------

/// A live document as the server decided it.
#[derive(Debug, Clone)]
struct Live {
    doc: Doc,
    simhash: u64,
    root: u64,
    /// Insert order, for ties of the detail page's order.
    sequence: u64,
    /// Tokens of title and content.
    tokens: HashSet<String>,
}

/// What the index should hold, by id.
#[derive(Default)]
struct Model {
    live: BTreeMap<String, Live>,
    next_sequence: u64,
    tombstones: u64,
}

/// A list-page filter.
#[derive(Debug, Clone, Default)]
struct Filter {
    words: Vec<&'static str>,
    source: Option<&'static str>,
    from: Option<i64>,
    to: Option<i64>,
}

impl Filter {
    fn matches(&self, live: &Live) -> bool {
        self.words.iter().all(|word| live.tokens.contains(*word))
            && self
                .source
                .is_none_or(|source| live.doc.source.as_deref() == Some(source))
            && self.from.is_none_or(|from| live.doc.published_at >= from)
            && self.to.is_none_or(|to| live.doc.published_at <= to)
    }

    /// The query parameters (times in both accepted forms).
    fn params(&self, sort: &str) -> Vec<(&'static str, String)> {
        let mut params = vec![("q", self.words.join(" ")), ("sort", sort.to_owned())];
        if let Some(source) = self.source {
            params.push(("source", source.to_owned()));
        }
        if let Some(from) = self.from {
            params.push(("from", rfc3339(from)));
        }
        if let Some(to) = self.to {
            params.push(("to", to.to_string()));
        }
        params
    }
}

/// A cluster of a list page as the model expects it.
#[derive(Debug)]
struct ExpectedCluster {
    hits: u64,
    size: u64,
    newest: i64,
    oldest: i64,
    matching: BTreeSet<String>,
    sources: Vec<String>,
}

impl Model {
    fn record(&mut self, doc: Doc, simhash: u64, root: u64) {
        let tokens = tokens(&format!("{}\n{}", doc.title, doc.content));
        let live = Live {
            doc,
            simhash,
            root,
            sequence: self.next_sequence,
            tokens,
        };
        self.next_sequence += 1;
        if self.live.insert(live.doc.id.clone(), live).is_some() {
            self.tombstones += 1;
        }
    }

    fn remove(&mut self, id: &str) {
        assert!(self.live.remove(id).is_some(), "{id} is live");
        self.tombstones += 1;
    }

    fn cluster_size(&self, root: u64) -> u64 {
        self.live.values().filter(|live| live.root == root).count() as u64
    }

    fn roots(&self) -> BTreeSet<u64> {
        self.live.values().map(|live| live.root).collect()
    }

    /// The other members of a document's cluster, earliest first (then insert order).
    fn others(&self, id: &str) -> Vec<&Live> {
        let root = self.live[id].root;
        let mut others: Vec<&Live> = self
            .live
            .values()
            .filter(|live| live.root == root && live.doc.id != id)
            .collect();
        others.sort_by_key(|live| (live.doc.published_at, live.sequence));
        others
    }

    fn expected(&self, filter: &Filter) -> BTreeMap<u64, ExpectedCluster> {
        let mut clusters: BTreeMap<u64, ExpectedCluster> = BTreeMap::new();
        for live in self.live.values().filter(|live| filter.matches(live)) {
            let cluster = clusters
                .entry(live.root)
                .or_insert_with(|| ExpectedCluster {
                    hits: 0,
                    size: self.cluster_size(live.root),
                    newest: i64::MIN,
                    oldest: i64::MAX,
                    matching: BTreeSet::new(),
                    sources: self.sources(live.root),
                });
            cluster.hits += 1;
            cluster.newest = cluster.newest.max(live.doc.published_at);
            cluster.oldest = cluster.oldest.min(live.doc.published_at);
            cluster.matching.insert(live.doc.id.clone());
        }
        clusters
    }

    /// A cluster's sources, most frequent first, then by name.
    fn sources(&self, root: u64) -> Vec<String> {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for live in self.live.values().filter(|live| live.root == root) {
            if let Some(source) = &live.doc.source {
                *counts.entry(source).or_default() += 1;
            }
        }
        let mut sources: Vec<(&str, u64)> = counts.into_iter().collect();
        sources.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        sources
            .into_iter()
            .map(|(name, _)| name.to_owned())
            .collect()
    }
}

/// Checks a document view (`representative`, `document`, `similar[i]`) against the model.
fn check_view(view: &Value, live: &Live) {
    let doc = &live.doc;
    assert_eq!(view["id"], json!(doc.id), "{view}");
    assert_eq!(view["title"], json!(doc.title), "{view}");
    assert_eq!(view["source"], json!(doc.source), "{view}");
    assert_eq!(view["url"], json!(doc.url), "{view}");
    assert_eq!(view["published_at"], json!(doc.published_at), "{view}");
    assert_eq!(hash(&view["simhash"]), live.simhash, "{view}");
    assert_eq!(hash(&view["root"]), live.root, "{view}");
}

/// The order of two clusters of a list page: the sort's key, then the better score, then the
/// smaller root.
fn cluster_order(sort: &str, a: &Value, b: &Value) -> std::cmp::Ordering {
    let number = |cluster: &Value, key: &str| cluster[key].as_i64().expect("a number");
    let primary = match sort {
        "relevance" => std::cmp::Ordering::Equal,
        "similar_desc" => number(b, "cluster_size").cmp(&number(a, "cluster_size")),
        "similar_asc" => number(a, "cluster_size").cmp(&number(b, "cluster_size")),
        "newest" => number(b, "newest").cmp(&number(a, "newest")),
        "oldest" => number(a, "oldest").cmp(&number(b, "oldest")),
        other => panic!("unknown sort {other}"),
    };
    let score = |cluster: &Value| cluster["score"].as_f64().expect("a score");
    primary
        .then(score(b).total_cmp(&score(a)))
        .then(hash(&a["root"]).cmp(&hash(&b["root"])))
}

const SORTS: [&str; 5] = [
    "relevance",
    "similar_desc",
    "similar_asc",
    "newest",
    "oldest",
];

/// Checks one list page over every cluster against the model; returns the clusters.
fn check_search(server: &TestServer, model: &Model, filter: &Filter, sort: &str) -> Vec<Value> {
    let mut params = filter.params(sort);
    params.push(("limit", "1000".to_owned()));
    let page = server.search(&params);
    let expected = model.expected(filter);
    let context = format!("{filter:?} sort={sort}");
    let total_hits: u64 = expected.values().map(|cluster| cluster.hits).sum();
    assert_eq!(page["total_hits"], json!(total_hits), "{context}");
    assert_eq!(page["total_clusters"], json!(expected.len()), "{context}");
    let clusters = page["clusters"].as_array().expect("clusters").clone();
    assert_eq!(clusters.len(), expected.len(), "{context}");
    for cluster in &clusters {
        let root = hash(&cluster["root"]);
        let want = expected
            .get(&root)
            .unwrap_or_else(|| panic!("{context}: unexpected cluster {cluster}"));
        assert_eq!(cluster["hits"], json!(want.hits), "{context}: {cluster}");
        assert_eq!(
            cluster["cluster_size"],
            json!(want.size),
            "{context}: {cluster}"
        );
        assert_eq!(
            cluster["newest"],
            json!(want.newest),
            "{context}: {cluster}"
        );
        assert_eq!(
            cluster["oldest"],
            json!(want.oldest),
            "{context}: {cluster}"
        );
        assert_eq!(
            cluster["sources"],
            json!(want.sources),
            "{context}: {cluster}"
        );
        let representative = &cluster["representative"];
        let id = representative["id"].as_str().expect("an id");
        assert!(
            want.matching.contains(id),
            "{context}: the representative {id} must be a matching member of {cluster}"
        );
        check_view(representative, &model.live[id]);
        assert!(cluster["score"].as_f64().is_some_and(f64::is_finite));
    }
    for pair in clusters.windows(2) {
        assert_eq!(
            cluster_order(sort, &pair[0], &pair[1]),
            std::cmp::Ordering::Less,
            "{context}: out of order:\n{}\n{}",
            pair[0],
            pair[1]
        );
    }
    clusters
}

/// Pages of `limit` clusters concatenate to the full list, with the same totals on each page.
fn check_pagination(
    server: &TestServer,
    filter: &Filter,
    sort: &str,
    full: &[Value],
    limit: usize,
) {
    let mut concatenated = Vec::new();
    let mut offset = 0;
    loop {
        let mut params = filter.params(sort);
        params.push(("offset", offset.to_string()));
        params.push(("limit", limit.to_string()));
        let page = server.search(&params);
        assert_eq!(page["total_clusters"], json!(full.len()));
        let clusters = page["clusters"].as_array().expect("clusters");
        assert!(clusters.len() <= limit);
        if clusters.is_empty() {
            break;
        }
        concatenated.extend(clusters.iter().cloned());
        offset += limit;
    }
    assert_eq!(concatenated.len(), full.len(), "{filter:?} sort={sort}");
    for (got, want) in concatenated.iter().zip(full) {
        assert_eq!(got, want, "{filter:?} sort={sort} limit={limit}");
    }
    let roots: HashSet<u64> = concatenated.iter().map(|c| hash(&c["root"])).collect();
    assert_eq!(roots.len(), full.len(), "pages overlap");
}

/// Every document page and the statistics against the model.
fn check_documents(server: &TestServer, model: &Model) {
    for (id, live) in &model.live {
        let page = server
            .document(id)
            .unwrap_or_else(|| panic!("{id} is indexed"));
        check_view(&page["document"], live);
        assert_eq!(hash(&page["cluster"]["root"]), live.root);
        assert_eq!(
            page["cluster"]["size"],
            json!(model.cluster_size(live.root))
        );
        let others = model.others(id);
        let similar = page["similar"].as_array().expect("similar");
        assert_eq!(similar.len(), others.len().min(10), "similar of {id}");
        for (view, other) in similar.iter().zip(&others) {
            check_view(view, other);
        }
    }
    let stats = server.stats();
    assert_eq!(stats["index"]["documents"], json!(model.live.len()));
    assert_eq!(stats["index"]["clusters"], json!(model.roots().len()));
    assert_eq!(stats["index"]["tombstones"], json!(model.tombstones));
    assert_eq!(stats["queue_documents"], json!(0));
}

/// Posts a batch that must be indexed whole; returns the results in order.
fn post_batch(server: &TestServer, body: &[u8], expected: usize) -> Vec<Value> {
    let reply = server.post("/v1/documents", body);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["indexed"], json!(expected), "{}", reply.text);
    assert_eq!(reply.json["failed"], json!(0), "{}", reply.text);
    assert!(reply.json.get("error").is_none());
    let results = reply.json["results"].as_array().expect("results").clone();
    assert_eq!(results.len(), expected);
    results
}

/// A batch in one of the body formats: a JSON array (compact or pretty), NDJSON, or, for a
/// single document, one (pretty-printed) object.
fn batch_body(documents: &[Value], format: usize) -> Vec<u8> {
    match (format % 4, documents) {
        (0, [one]) => serde_json::to_vec_pretty(one).expect("json"),
        (0 | 1, _) => serde_json::to_vec(documents).expect("json"),
        (2, _) => serde_json::to_vec_pretty(documents).expect("json"),
        _ => {
            let mut body = Vec::new();
            for document in documents {
                body.extend(serde_json::to_vec(document).expect("json"));
                body.extend(b"\r\n");
            }
            body
        }
    }
}

// ---- 1. end to end --------------------------------------------------------------------------

#[test]
fn end_to_end_against_a_model() {
    for word in QUERY_WORDS.into_iter().chain(["公园"]) {
        let words: Vec<String> = AnalyzedText::new(word)
            .tokens()
            .map(|(token, _)| token.to_owned())
            .collect();
        assert_eq!(words, [word], "a query word must be one token");
    }
    let (stories, docs) = corpus(0x05e4_ea91, 110);
    let server = TestServer::start(server_config());
    let mut model = Model::default();
    let answers = ingest(&server, &mut model, &docs);
    check_decisions(&stories, &answers);
    let stats = server.stats();
    let simhashes: HashSet<u64> = answers.iter().map(|answer| answer.1).collect();
    assert_eq!(stats["forest"]["nodes"], json!(simhashes.len()));
    assert_eq!(stats["forest"]["roots"], json!(model.roots().len()));
    check_documents(&server, &model);
    check_list_pages(&server, &model, &docs);
    check_detail_pages(&server, &model);
    story_pages::check_story_pages(&server, &model);
    story_pages::check_story_errors(&server, &model);
    check_near_duplicates(&server, &model);
    resend_replace_and_delete(&server, &mut model, &stories, &answers);
    // Deletes and replacements leave stories whose first documents are gone.
    story_pages::check_story_pages(&server, &model);
    check_service_endpoints(&server, &model);
    server.stop();
}

/// Posts the corpus in batches of every format and size; checks each answer, and returns
/// them in arrival order: (document, simhash, root, duplicate).
fn ingest(server: &TestServer, model: &mut Model, docs: &[Doc]) -> Vec<(Doc, u64, u64, bool)> {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut answers = Vec::new();
    let mut position = 0;
    let mut format = 0;
    while position < docs.len() {
        let size = rng.random_range(1..=40).min(docs.len() - position);
        let batch = &docs[position..position + size];
        let documents: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(i, doc)| doc.json(position + i))
            .collect();
        let results = post_batch(server, &batch_body(&documents, format), size);
        format += 1;
        for (doc, result) in batch.iter().zip(&results) {
            assert_eq!(result["id"], json!(doc.id));
            let (simhash, root) = (hash(&result["simhash"]), hash(&result["root"]));
            let duplicate = result["duplicate"].as_bool().expect("duplicate");
            model.record(doc.clone(), simhash, root);
            answers.push((doc.clone(), simhash, root, duplicate));
        }
        // Answered after the commit, so sizes count the whole batch, and the batch is
        // searchable at once (nothing else writes meanwhile).
        for (doc, result) in batch.iter().zip(&results) {
            let root = model.live[&doc.id].root;
            assert_eq!(
                result["cluster_size"],
                json!(model.cluster_size(root)),
                "{result}"
            );
        }
        let last = &batch[size - 1].id;
        assert!(
            server.document(last).is_some(),
            "{last} searchable on answer"
        );
        let all = server.search(&[("limit", "0".to_owned())]);
        assert_eq!(all["total_hits"], json!(model.live.len()));
        position += size;
    }

    answers
}

/// List pages: every sort, keyword queries, filters, pagination, pages past the end.
fn check_list_pages(server: &TestServer, model: &Model, docs: &[Doc]) {
    let times: Vec<i64> = docs.iter().map(|doc| doc.published_at).collect();
    let (earliest, latest) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let third = (latest - earliest) / 3;
    // The source with most documents about one word in the later two thirds.
    let busy_source = SOURCES
        .into_iter()
        .max_by_key(|source| {
            let filter = Filter {
                words: vec![QUERY_WORDS[2]],
                source: Some(source),
                from: Some(earliest + third),
                to: None,
            };
            model
                .live
                .values()
                .filter(|live| filter.matches(live))
                .count()
        })
        .expect("sources");
    let filters = [
        Filter::default(),
        Filter {
            source: Some("新华网"),
            ..Filter::default()
        },
        Filter {
            from: Some(earliest + third),
            to: Some(earliest + 2 * third),
            ..Filter::default()
        },
        Filter {
            words: vec![QUERY_WORDS[0]],
            ..Filter::default()
        },
        Filter {
            words: vec![QUERY_WORDS[1], "公园"],
            ..Filter::default()
        },
        Filter {
            words: vec![QUERY_WORDS[2]],
            source: Some(busy_source),
            from: Some(earliest + third),
            to: None,
        },
        Filter {
            words: vec![QUERY_WORDS[4]],
            from: None,
            to: Some(earliest + 2 * third),
            ..Filter::default()
        },
        Filter {
            words: vec!["鲸鱼"],
            ..Filter::default()
        },
    ];
    for (i, filter) in filters.iter().enumerate() {
        if filter.words != ["鲸鱼"] {
            assert!(
                !model.expected(filter).is_empty(),
                "{filter:?} should match"
            );
        }
        for sort in SORTS {
            let full = check_search(server, model, filter, sort);
            if i == 0 || i == 3 {
                check_pagination(server, filter, sort, &full, 7);
            }
        }
    }
    // An empty query scores every document alike, so relevance orders by root alone.
    let all = check_search(server, model, &Filter::default(), "relevance");
    let roots: Vec<u64> = all.iter().map(|cluster| hash(&cluster["root"])).collect();
    assert!(roots.windows(2).all(|pair| pair[0] < pair[1]));
    // Past the end, and an empty page: no clusters, the same totals.
    for (offset, limit) in [(10_000, 20), (roots.len(), 5), (0, 0)] {
        let page = server.search(&[("offset", offset.to_string()), ("limit", limit.to_string())]);
        assert_eq!(page["clusters"], json!([]));
        assert_eq!(page["total_clusters"], json!(roots.len()));
        assert_eq!(page["total_hits"], json!(model.live.len()));
    }
    // An unescaped `+` of a time zone (it arrives as a space) means the same time.
    let from = rfc3339(earliest + third);
    let escaped = server.get(&format!("/v1/search?limit=1000&from={}", pct(&from)));
    let unescaped = server.get(&format!("/v1/search?limit=1000&from={from}"));
    assert_eq!(escaped.status, 200, "{}", escaped.text);
    assert_eq!(unescaped.json, escaped.json);
}

/// Detail pages, paginated, for the largest clusters.
fn check_detail_pages(server: &TestServer, model: &Model) {
    let mut by_size: Vec<(u64, u64)> = model
        .roots()
        .into_iter()
        .map(|root| (model.cluster_size(root), root))
        .collect();
    by_size.sort_unstable_by(|a, b| b.cmp(a));
    assert!(by_size[0].0 >= 4, "the corpus has reposted stories");
    for &(size, root) in by_size.iter().take(4) {
        let id = model
            .live
            .values()
            .find(|live| live.root == root)
            .map(|live| live.doc.id.clone())
            .expect("a member");
        let others = model.others(&id);
        let mut concatenated = Vec::new();
        for offset in (0..size as usize + 2).step_by(2) {
            let reply = server.get(&format!(
                "/v1/documents/{id}/similar?offset={offset}&limit=2"
            ));
            assert_eq!(reply.status, 200, "{}", reply.text);
            assert_eq!(reply.json["cluster_size"], json!(size));
            assert_eq!(reply.json["total"], json!(size - 1));
            check_view(&reply.json["document"], &model.live[&id]);
            concatenated.extend(
                reply.json["documents"]
                    .as_array()
                    .expect("documents")
                    .clone(),
            );
        }
        assert_eq!(concatenated.len(), others.len());
        for (view, other) in concatenated.iter().zip(&others) {
            check_view(view, other);
        }
    }
}

/// Whether the check before publishing counts a live document as a near-duplicate of a text:
/// default mode's edge (reached within k or through a shared sketch key, and verified).
fn near_duplicate(text: &str, simhash: u64, other: &Live) -> bool {
    let config = DedupConfig::default();
    let sketch = |text: &str| Sketch::of(&[&normalize(text)], config.short_text_chars);
    let (a, b) = (sketch(text), sketch(&other.doc.content));
    let shares_key = a.keys().iter().any(|key| b.keys().contains(key));
    (distance(simhash, other.simhash) <= K || shares_key)
        && config.verifier().unwrap().matches(&a, &b)
}

/// Check before publishing: the text of an indexed document finds it at distance 0, and the
/// matches are exactly the live documents with an edge to it (nearest, then earliest, first);
/// a check indexes nothing.
fn check_near_duplicates(server: &TestServer, model: &Model) {
    let before = server.stats()["index"].clone();
    let sample: Vec<String> = model.live.keys().step_by(29).cloned().collect();
    for id in &sample {
        let live = &model.live[id];
        let reply = server.post_json(
            "/v1/near-duplicates",
            &json!({"content": live.doc.content, "title": "一个无关的标题", "limit": 1000}),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(hash(&reply.json["simhash"]), live.simhash);
        let mut want: Vec<(u32, i64, &str)> = model
            .live
            .values()
            .filter(|other| near_duplicate(&live.doc.content, live.simhash, other))
            .map(|other| {
                let d = distance(live.simhash, other.simhash);
                (d, other.doc.published_at, other.doc.id.as_str())
            })
            .collect();
        want.sort_unstable();
        let matches = reply.json["matches"].as_array().expect("matches");
        let got: Vec<(u32, &str)> = matches
            .iter()
            .map(|m| {
                (
                    m["distance"].as_u64().unwrap() as u32,
                    m["document"]["id"].as_str().unwrap(),
                )
            })
            .collect();
        let want: Vec<(u32, &str)> = want.iter().map(|&(d, _, id)| (d, id)).collect();
        assert_eq!(got, want, "near-duplicates of {id}");
        assert!(got.contains(&(0, id.as_str())));
        for m in matches {
            check_view(
                &m["document"],
                &model.live[m["document"]["id"].as_str().unwrap()],
            );
        }
        let one = server.post_json(
            "/v1/near-duplicates",
            &json!({"content": live.doc.content, "limit": 1}),
        );
        assert_eq!(one.json["matches"].as_array().map(Vec::len), Some(1));
    }
    let fresh = story(&mut SmallRng::seed_from_u64(99)).text();
    let reply = server.post_json("/v1/near-duplicates", &json!({"content": fresh}));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let simhash = hash(&reply.json["simhash"]);
    assert_eq!(simhash, fingerprint(&fresh));
    let near = model
        .live
        .values()
        .filter(|live| near_duplicate(&fresh, simhash, live))
        .count();
    assert_eq!(reply.json["matches"].as_array().map(Vec::len), Some(near));
    assert_eq!(server.stats()["index"], before, "a check indexes nothing");
}

/// Re-sending unchanged (a no-op), re-sending with other text (a replacement), one id twice in
/// a batch, deleting, and ids that need escaping in a path.
fn resend_replace_and_delete(
    server: &TestServer,
    model: &mut Model,
    stories: &[Story],
    answers: &[(Doc, u64, u64, bool)],
) {
    // Re-sending a document unchanged (even with its time written another way) is a no-op.
    let (resent_id, resent) = model
        .live
        .iter()
        .find(|(_, live)| model.cluster_size(live.root) >= 3)
        .map(|(id, live)| (id.clone(), live.clone()))
        .expect("a reposted story");
    for form in 0..3 {
        let reply = server.post(
            "/v1/documents",
            resent.doc.json(form).to_string().as_bytes(),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            (&reply.json["indexed"], &reply.json["unchanged"]),
            (&json!(0), &json!(1)),
            "an unchanged re-send is not indexed again: {}",
            reply.text
        );
        let results = reply.json["results"].as_array().expect("results");
        assert_eq!(results[0]["unchanged"], json!(true));
        assert_eq!(hash(&results[0]["simhash"]), resent.simhash);
        assert_eq!(hash(&results[0]["root"]), resent.root);
        let duplicate = answers.iter().find(|a| a.0.id == resent_id).unwrap().3;
        assert_eq!(results[0]["duplicate"], json!(duplicate));
        assert_eq!(
            results[0]["cluster_size"],
            json!(model.cluster_size(resent.root))
        );
    }
    check_documents(server, model);

    // Re-sending an id with other text replaces the document: it moves to the other story's
    // cluster, and the old cluster shrinks.
    let (target_root, target_simhash, target_content) = model
        .live
        .values()
        .find(|live| live.root != resent.root && model.cluster_size(live.root) >= 2)
        .map(|live| (live.root, live.simhash, live.doc.content.clone()))
        .expect("another story");
    let old_size = model.cluster_size(resent.root);
    let target_size = model.cluster_size(target_root);
    let mut replaced = resent.doc.clone();
    replaced.title = "改写后的标题".to_owned();
    replaced.content = target_content;
    replaced.published_at = BASE_TIME - 1_000;
    let results = post_batch(server, replaced.json(2).to_string().as_bytes(), 1);
    assert_eq!(hash(&results[0]["simhash"]), target_simhash);
    assert_eq!(hash(&results[0]["root"]), target_root);
    assert_eq!(results[0]["duplicate"], json!(true));
    assert_eq!(results[0]["cluster_size"], json!(target_size + 1));
    model.record(replaced, target_simhash, target_root);
    assert_eq!(model.cluster_size(resent.root), old_size - 1);
    check_documents(server, model);

    // The same id twice in one batch: the second replaces the first.
    let twice_a = Doc {
        id: "twice".into(),
        title: "第一版".into(),
        content: stories[1].text(),
        source: Some("央视网".into()),
        url: "https://news.example.cn/twice.html".into(),
        published_at: BASE_TIME - 2_000,
        story: 1,
        kind: Kind::Original,
    };
    let twice_b = Doc {
        title: "第二版".into(),
        content: stories[2].text(),
        published_at: BASE_TIME - 1_500,
        story: 2,
        ..twice_a.clone()
    };
    let body = batch_body(&[twice_a.json(0), twice_b.json(1)], 1);
    let results = post_batch(server, &body, 2);
    let (simhash, root) = (hash(&results[1]["simhash"]), hash(&results[1]["root"]));
    model.record(
        twice_a,
        hash(&results[0]["simhash"]),
        hash(&results[0]["root"]),
    );
    model.record(twice_b, simhash, root);
    check_documents(server, model);

    // Deleting: a 404 afterwards, the cluster shrinks, a second delete is a 404.
    let victim = model
        .live
        .values()
        .find(|live| live.root != resent.root && model.cluster_size(live.root) >= 3)
        .map(|live| live.doc.id.clone())
        .expect("a cluster to shrink");
    let victim_root = model.live[&victim].root;
    let reply = server.delete(&format!("/v1/documents/{victim}"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json, json!({"id": victim, "deleted": true}));
    model.remove(&victim);
    assert!(server.document(&victim).is_none());
    let again = server.delete(&format!("/v1/documents/{victim}"));
    assert_eq!(again.status, 404);
    assert_eq!(again.error().0, "not_found");
    let member = model
        .live
        .values()
        .find(|live| live.root == victim_root)
        .map(|live| live.doc.id.clone())
        .expect("the cluster keeps members");
    let page = server.document(&member).expect("a member");
    assert_eq!(
        page["cluster"]["size"],
        json!(model.cluster_size(victim_root))
    );
    let similar = page["similar"].as_array().expect("similar");
    assert!(similar.iter().all(|view| view["id"] != json!(victim)));
    // The only document of a cluster: the cluster leaves the list page.
    let single = model
        .live
        .values()
        .find(|live| model.cluster_size(live.root) == 1)
        .map(|live| live.doc.id.clone())
        .expect("a story without reposts");
    let reply = server.delete(&format!("/v1/documents/{}", pct(&single)));
    assert_eq!(reply.status, 200, "{}", reply.text);
    model.remove(&single);
    check_documents(server, model);
    for sort in SORTS {
        check_search(server, model, &Filter::default(), sort);
        check_search(
            server,
            model,
            &Filter {
                words: vec![QUERY_WORDS[0]],
                ..Filter::default()
            },
            sort,
        );
    }

    // Ids that need escaping in a path.
    let odd = Doc {
        id: "稿件/2024 #1?x=%".into(),
        title: "特殊编号".into(),
        content: stories[5].text(),
        source: None,
        url: "https://news.example.cn/odd".into(),
        published_at: BASE_TIME + 5,
        story: 5,
        kind: Kind::Exact,
    };
    let results = post_batch(server, odd.json(0).to_string().as_bytes(), 1);
    model.record(
        odd.clone(),
        hash(&results[0]["simhash"]),
        hash(&results[0]["root"]),
    );
    check_documents(server, model);
    let reply = server.get(&format!("/v1/documents/{}/similar", pct(&odd.id)));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = server.delete(&format!("/v1/documents/{}", pct(&odd.id)));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["id"], json!(odd.id));
    model.remove(&odd.id);
    check_documents(server, model);
}

/// `/healthz` and `/metrics`.
fn check_service_endpoints(server: &TestServer, model: &Model) {
    let health = server.get("/healthz");
    assert_eq!(health.status, 200);
    assert_eq!(health.json["status"], json!("ok"));
    let metrics = server.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .starts_with("text/plain; version=0.0.4"),
        "{}",
        metrics.content_type
    );
    for line in metrics.text.lines() {
        if !line.starts_with('#') && !line.trim().is_empty() {
            assert!(line.starts_with("tantivy_dedup_"), "{line}");
        }
    }
    for needle in [
        "tantivy_dedup_http_requests_total{",
        "route=\"/v1/documents\"",
        "route=\"/v1/search\"",
        "tantivy_dedup_commit_duration_seconds",
        &format!("tantivy_dedup_index_documents {}", model.live.len()),
    ] {
        assert!(
            metrics.text.contains(needle),
            "{needle} in\n{}",
            metrics.text
        );
    }
}

/// The clusters the answers describe keep the forest's rules (docs/algorithm.md, "The forest"),
/// with default mode's
/// edges: two nodes are joined when the sketches of the texts that made them verify.
fn check_decisions(stories: &[Story], answers: &[(Doc, u64, u64, bool)]) {
    let config = DedupConfig::default();
    let verifier = config.verifier().unwrap();
    let mut node_sketch: HashMap<u64, Sketch> = HashMap::new();
    for (doc, simhash, _, _) in answers {
        node_sketch
            .entry(*simhash)
            .or_insert_with(|| Sketch::of(&[&normalize(&doc.content)], config.short_text_chars));
    }
    let edge = |a: u64, b: u64| verifier.matches(&node_sketch[&a], &node_sketch[&b]);
    let mut root_of_simhash: HashMap<u64, u64> = HashMap::new();
    let mut first_of_root: HashMap<u64, usize> = HashMap::new();
    for (position, (doc, simhash, root, _)) in answers.iter().enumerate() {
        let known = root_of_simhash.entry(*simhash).or_insert(*root);
        assert_eq!(
            known, root,
            "one fingerprint, one node, one root ({})",
            doc.id
        );
        first_of_root.entry(*root).or_insert(position);
    }
    for (position, (doc, simhash, root, duplicate)) in answers.iter().enumerate() {
        let first = first_of_root[root] == position;
        assert_eq!(
            *duplicate, !first,
            "{}: duplicate iff not the first of its cluster",
            doc.id
        );
        if first {
            assert_eq!(
                simhash, root,
                "{}: a cluster's first document is its root",
                doc.id
            );
        }
    }
    // No two roots within k verify (candidates within k are always found; those found through
    // a shared key depend on which nodes its posting still holds); a leaf has an edge to its
    // root or to another node of its tree.
    let roots: Vec<u64> = first_of_root.keys().copied().collect();
    for (i, a) in roots.iter().enumerate() {
        for b in &roots[i + 1..] {
            assert!(
                distance(*a, *b) > K || !edge(*a, *b),
                "roots {} and {} are within k and verify",
                hex(*a),
                hex(*b)
            );
        }
    }
    for (&node, &root) in &root_of_simhash {
        if node != root {
            let attached = root_of_simhash.iter().any(|(&other, &other_root)| {
                other_root == root && other != node && edge(node, other)
            });
            assert!(
                attached,
                "leaf {} verifies against nothing in its tree",
                hex(node)
            );
        }
    }
    // Reposts that normalisation undoes share their original's fingerprint and root.
    let mut original: HashMap<usize, (u64, u64)> = HashMap::new();
    for (doc, simhash, root, _) in answers {
        if doc.kind == Kind::Original {
            original.insert(doc.story, (*simhash, *root));
            assert_eq!(*simhash, fingerprint(&stories[doc.story].text()));
        }
    }
    for (doc, simhash, root, _) in answers {
        if doc.kind == Kind::Exact {
            assert_eq!(
                (*simhash, *root),
                original[&doc.story],
                "{} is a repost of story {} that normalisation undoes:\n{}",
                doc.id,
                doc.story,
                doc.content
            );
        }
    }
    // The stories are unrelated: (almost) each is a cluster of its own.
    let clusters = roots.len();
    assert!(
        clusters * 10 >= stories.len() * 9 && clusters <= stories.len() + answers.len() / 4,
        "{clusters} clusters for {} stories",
        stories.len()
    );
}

// ---- 2. concurrent clients ------------------------------------------------------------------

/// `clients` threads each post one body at the same instant; their answers' first results.
fn post_at_once(server: &TestServer, bodies: Vec<Vec<u8>>) -> Vec<Value> {
    let barrier = Arc::new(Barrier::new(bodies.len()));
    let threads: Vec<_> = bodies
        .into_iter()
        .map(|body| {
            let barrier = barrier.clone();
            let agent = server.agent.clone();
            let url = format!("{}/v1/documents", server.base);
            std::thread::spawn(move || {
                barrier.wait();
                TestServer::reply(
                    agent
                        .post(url)
                        .header("content-type", "application/json")
                        .send(&body[..]),
                )
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|thread| {
            let reply = thread.join().expect("a client thread");
            assert_eq!(reply.status, 200, "{}", reply.text);
            let counts = (
                reply.json["indexed"].as_u64(),
                reply.json["unchanged"].as_u64(),
            );
            assert!(
                matches!(counts, (Some(1), Some(0)) | (Some(0), Some(1))),
                "one document, indexed or unchanged: {}",
                reply.text
            );
            reply.json["results"][0].clone()
        })
        .collect()
}

/// Variants of `text` whose fingerprints are within 1 of its own (so pairwise within
/// 2 <= k), not all equal: small edits of the words, plus markup now and then.
fn near_variants(rng: &mut SmallRng, story: &Story, count: usize) -> Vec<String> {
    let base = fingerprint(&story.text());
    let mut variants: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for _ in 0..20_000 {
        if variants.len() == count {
            break;
        }
        let mut text = edited_repost(rng, story);
        if rng.random_bool(0.5) {
            text = edited_repost(
                rng,
                &Story {
                    title: String::new(),
                    sentences: vec![text],
                },
            );
        }
        if rng.random_bool(0.3) {
            text = format!("<p>{}</p>", text.replace('，', ","));
        }
        if distance(fingerprint(&text), base) <= 1 && seen.insert(text.clone()) {
            variants.push(text);
        }
    }
    assert_eq!(variants.len(), count, "enough near variants");
    variants
}

#[test]
fn concurrent_clients_make_one_cluster() {
    const CLIENTS: usize = 64;
    let server = TestServer::start(server_config());
    let mut rng = SmallRng::seed_from_u64(0xc0c0);
    let stories: Vec<Story> = (0..3)
        .map(|_| {
            let mut story = story(&mut rng);
            while story.sentences.len() < 9 {
                story.sentences.push(generated_sentence(&mut rng));
            }
            story
        })
        .collect();
    let prints: Vec<u64> = stories.iter().map(|s| fingerprint(&s.text())).collect();
    for (i, a) in prints.iter().enumerate() {
        for b in &prints[i + 1..] {
            assert!(distance(*a, *b) > 2 * K, "the three stories are unrelated");
        }
    }
    let article = |id: String, content: String, n: usize| {
        json!({
            "id": id,
            "title": "同一时刻",
            "content": content,
            "source": SOURCES[n % SOURCES.len()],
            "published_at": BASE_TIME + n as i64,
        })
        .to_string()
        .into_bytes()
    };

    // The same story under 64 ids.
    let bodies = (0..CLIENTS)
        .map(|n| article(format!("same-{n}"), stories[0].text(), n))
        .collect();
    let results = post_at_once(&server, bodies);
    let roots: HashSet<u64> = results.iter().map(|r| hash(&r["root"])).collect();
    assert_eq!(roots.len(), 1, "one root for one story: {results:?}");
    let root_same = *roots.iter().next().unwrap();
    assert_eq!(root_same, prints[0]);
    let firsts = results
        .iter()
        .filter(|r| r["duplicate"] == json!(false))
        .count();
    assert_eq!(firsts, 1, "exactly one document starts the story");
    let sizes: Vec<u64> = results
        .iter()
        .map(|r| r["cluster_size"].as_u64().unwrap())
        .collect();
    assert!(
        sizes
            .iter()
            .all(|&size| (1..=CLIENTS as u64).contains(&size))
    );
    assert_eq!(
        sizes.iter().max(),
        Some(&(CLIENTS as u64)),
        "the last commit sees all"
    );

    // 64 near-identical variants.
    let variants = near_variants(&mut rng, &stories[1], CLIENTS);
    let distinct: HashSet<u64> = variants.iter().map(|v| fingerprint(v)).collect();
    assert!(
        distinct.len() >= 3,
        "variants with different fingerprints: {}",
        distinct.len()
    );
    let bodies = variants
        .iter()
        .enumerate()
        .map(|(n, text)| article(format!("near-{n}"), text.clone(), n))
        .collect();
    let results = post_at_once(&server, bodies);
    for (result, variant) in results.iter().zip(&variants) {
        assert_eq!(hash(&result["simhash"]), fingerprint(variant));
    }
    let roots: HashSet<u64> = results.iter().map(|r| hash(&r["root"])).collect();
    assert_eq!(
        roots.len(),
        1,
        "one root for near-identical variants: {results:?}"
    );
    let root_near = *roots.iter().next().unwrap();
    let firsts: Vec<&Value> = results
        .iter()
        .filter(|r| r["duplicate"] == json!(false))
        .collect();
    assert_eq!(firsts.len(), 1, "exactly one variant starts the story");
    assert_eq!(hash(&firsts[0]["simhash"]), root_near);

    // One id and text from 64 clients: one document, no tombstones.
    let body = article("only-one".into(), stories[2].text(), 0);
    let results = post_at_once(&server, vec![body; CLIENTS]);
    let decisions: HashSet<String> = results
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["simhash"], r["root"], r["duplicate"], r["cluster_size"]
            )
        })
        .collect();
    assert_eq!(
        decisions.len(),
        1,
        "every client gets the same decision: {decisions:?}"
    );
    assert_eq!(results[0]["duplicate"], json!(false));
    assert_eq!(results[0]["cluster_size"], json!(1));
    let indexed = results.iter().filter(|r| r["unchanged"] == false).count();
    assert_eq!(
        indexed, 1,
        "the first indexes it, the others find it unchanged"
    );

    let stats = server.stats();
    assert_eq!(stats["index"]["documents"], json!(2 * CLIENTS + 1));
    assert_eq!(stats["index"]["clusters"], json!(3));
    assert_eq!(stats["index"]["tombstones"], json!(0));
    let page = server.search(&[("sort", "similar_desc".into())]);
    assert_eq!(page["total_clusters"], json!(3));
    assert_eq!(page["total_hits"], json!(2 * CLIENTS + 1));
    let clusters = page["clusters"].as_array().unwrap();
    let sizes: BTreeMap<u64, u64> = clusters
        .iter()
        .map(|c| (hash(&c["root"]), c["cluster_size"].as_u64().unwrap()))
        .collect();
    assert_eq!(sizes[&root_same], CLIENTS as u64);
    assert_eq!(sizes[&root_near], CLIENTS as u64);
    assert_eq!(sizes[&prints[2]], 1);
    let page = server.document("only-one").expect("indexed");
    assert_eq!(page["cluster"]["size"], json!(1));
    let page = server.document("near-0").expect("indexed");
    assert_eq!(page["cluster"]["size"], json!(CLIENTS));
    assert_eq!(page["similar"].as_array().map(Vec::len), Some(10));
    server.stop();
}

// ---- 3. bad input ---------------------------------------------------------------------------

/// Limits small enough to reach in a test.
fn strict_config() -> ServerConfig {
    ServerConfig {
        commit_delay: Duration::from_millis(20),
        max_body_mib: 1,
        max_document_kib: 8,
        max_batch_documents: 40,
        ..ServerConfig::default()
    }
}

/// One bad request and what must come back: the exact status, the error code, and a word the
/// message must contain (the field or parameter at fault).
struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
    needle: &'static str,
}

fn case(
    name: &'static str,
    method: &'static str,
    path: &str,
    body: impl Into<Vec<u8>>,
    status: u16,
    code: &'static str,
    needle: &'static str,
) -> Case {
    Case {
        name,
        method,
        path: path.to_owned(),
        body: body.into(),
        status,
        code,
        needle,
    }
}

impl TestServer {
    fn request(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        let url = format!("{}{path}", self.base);
        let agent = &self.agent;
        Self::reply(match method {
            "GET" => agent.get(url).call(),
            "DELETE" => agent.delete(url).call(),
            "POST" => agent
                .post(url)
                .header("content-type", "application/json")
                .send(body),
            "PUT" => agent.put(url).send(body),
            "PATCH" => agent.patch(url).send(body),
            other => panic!("no method {other}"),
        })
    }
}

/// A cursor after a story of `/v1/search`'s list of every document, by relevance, on a
/// snapshot no server pinned.
fn forged_cursor() -> String {
    let list = tantivy_dedup::engine::SearchRequest::new("").list_digest();
    let last = tantivy_dedup::engine::SortKey {
        size: 1,
        newest: BASE_TIME,
        oldest: BASE_TIME,
        score: 1.0,
        joined: Default::default(),
        hot: 0.0,
        value: None,
        root: tantivy_dedup::Fingerprint(7),
    };
    tantivy_dedup::engine::Cursor::after_story(list, vec![12_345], None, &last).to_string()
}

/// A valid article's JSON with `overrides` applied (`null` removes a field).
fn article_with(id: &str, overrides: Value) -> Value {
    let mut article = json!({
        "id": id,
        "title": "灯塔重新点亮",
        "content": "港口的灯塔今晚重新点亮，渔民们在码头燃放烟花庆祝。维修工程历时半年，更换了全部照明设备。",
        "source": "本地晚报",
        "published_at": BASE_TIME,
    });
    if let (Some(article), Some(overrides)) = (article.as_object_mut(), overrides.as_object()) {
        for (key, value) in overrides {
            if value.is_null() {
                article.remove(key);
            } else {
                article.insert(key.clone(), value.clone());
            }
        }
    }
    article
}

fn bytes(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// `published_at` this many seconds from now.
fn from_now(seconds: i64) -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or(0)
        + seconds
}

fn bad_cases() -> Vec<Case> {
    let docs = "/v1/documents";
    let one = |overrides: Value| bytes(article_with("bad", overrides));
    // Deeper than the JSON parser's recursion limit, within the size limits.
    let nested = format!("{}{}", "[".repeat(2_000), "]".repeat(2_000));
    let nested_field = format!(
        "{{\"id\": \"deep\", \"content\": \"正文\", \"title\": {}{}}}",
        "[".repeat(2_000),
        "]".repeat(2_000)
    );
    let too_big = bytes(article_with("big", json!({"content": "长".repeat(3_000)})));
    let many = |n: usize| {
        let documents: Vec<Value> = (0..n)
            .map(|i| article_with(&format!("many-{i}"), json!({})))
            .collect();
        documents
    };
    let ndjson = |documents: Vec<Value>| batch_body(&documents, 3);
    vec![
        // Whole bodies.
        case("empty body", "POST", docs, "", 400, "invalid_body", "empty"),
        case(
            "white space",
            "POST",
            docs,
            " \r\n\t ",
            400,
            "invalid_body",
            "empty",
        ),
        case(
            "a byte-order mark only",
            "POST",
            docs,
            "\u{feff}",
            400,
            "invalid_body",
            "empty",
        ),
        case(
            "an empty array",
            "POST",
            docs,
            "[]",
            400,
            "invalid_body",
            "empty",
        ),
        case(
            "form data",
            "POST",
            docs,
            "id=a&content=b",
            400,
            "invalid_body",
            "JSON",
        ),
        case("a number", "POST", docs, "42", 400, "invalid_body", "JSON"),
        case(
            "a string",
            "POST",
            docs,
            "\"正文\"",
            400,
            "invalid_body",
            "JSON",
        ),
        case("null", "POST", docs, "null", 400, "invalid_body", "JSON"),
        case(
            "a malformed array",
            "POST",
            docs,
            "[{\"id\": \"a\", \"content\": \"正文\"},",
            400,
            "invalid_body",
            "malformed",
        ),
        case(
            // The array parses; its one element is too deep to read.
            "a nested array",
            "POST",
            docs,
            nested.clone(),
            400,
            "invalid_json",
            "JSON",
        ),
        case(
            "invalid UTF-8 in an array",
            "POST",
            docs,
            b"[{\"id\": \"u2\", \"content\": \"\xff\xfe\"}]".to_vec(),
            400,
            "invalid_body",
            "",
        ),
        case(
            "too many documents",
            "POST",
            docs,
            serde_json::to_vec(&many(41)).unwrap(),
            413,
            "batch_too_large",
            "41",
        ),
        case(
            "too many NDJSON lines",
            "POST",
            docs,
            ndjson(many(41)),
            413,
            "batch_too_large",
            "41",
        ),
        // One document (no document indexed: the first one's status and code).
        case(
            "a malformed object",
            "POST",
            docs,
            "{\"id\": \"a\", \"content\": ",
            400,
            "invalid_json",
            "JSON",
        ),
        case(
            "a nested field",
            "POST",
            docs,
            nested_field,
            400,
            "invalid_json",
            "JSON",
        ),
        case(
            "invalid UTF-8 in an NDJSON line",
            "POST",
            docs,
            b"{\"id\": \"u1\", \"content\": \"\xff\xfe\"}\n".to_vec(),
            400,
            "invalid_json",
            "UTF-8",
        ),
        case(
            "an array of scalars",
            "POST",
            docs,
            "[1, \"x\", null]",
            400,
            "invalid_json",
            "JSON",
        ),
        case(
            "id is a boolean",
            "POST",
            docs,
            one(json!({"id": true})),
            400,
            "invalid_field",
            "`id`",
        ),
        case(
            "id is a fraction",
            "POST",
            docs,
            one(json!({"id": 1.5})),
            400,
            "invalid_field",
            "`id`",
        ),
        case(
            "id is empty",
            "POST",
            docs,
            one(json!({"id": ""})),
            400,
            "invalid_field",
            "`id`",
        ),
        case(
            "id is blank",
            "POST",
            docs,
            one(json!({"id": "  "})),
            400,
            "invalid_field",
            "`id`",
        ),
        case(
            "id is missing",
            "POST",
            docs,
            one(json!({"id": null})),
            400,
            "missing_field",
            "`id`",
        ),
        case(
            "content is a number",
            "POST",
            docs,
            one(json!({"content": 5})),
            400,
            "invalid_field",
            "`content`",
        ),
        case(
            "content is empty",
            "POST",
            docs,
            one(json!({"content": ""})),
            400,
            "invalid_field",
            "`content`",
        ),
        case(
            "content is only control characters",
            "POST",
            docs,
            one(json!({"content": "\u{1}\u{2}\u{3}"})),
            400,
            "invalid_field",
            "`content`",
        ),
        case(
            "content is missing",
            "POST",
            docs,
            one(json!({"content": null})),
            400,
            "missing_field",
            "`content`",
        ),
        case(
            "content is null",
            "POST",
            docs,
            "{\"id\": \"a\", \"content\": null}",
            400,
            "missing_field",
            "`content`",
        ),
        case(
            "title is an array",
            "POST",
            docs,
            one(json!({"title": ["标题"]})),
            400,
            "invalid_field",
            "`title`",
        ),
        case(
            "source is an object",
            "POST",
            docs,
            one(json!({"source": {}})),
            400,
            "invalid_field",
            "`source`",
        ),
        case(
            "url is a number",
            "POST",
            docs,
            one(json!({"url": 80})),
            400,
            "invalid_field",
            "`url`",
        ),
        case(
            "date is a word",
            "POST",
            docs,
            one(json!({"published_at": "yesterday"})),
            400,
            "invalid_field",
            "published_at",
        ),
        case(
            "date is 1e15",
            "POST",
            docs,
            one(json!({"published_at": 1e15})),
            400,
            "invalid_field",
            "published_at",
        ),
        case(
            "date in milliseconds",
            "POST",
            docs,
            one(json!({"published_at": 1_718_870_400_000i64})),
            400,
            "invalid_field",
            "milliseconds",
        ),
        case(
            "date before 1970",
            "POST",
            docs,
            one(json!({"published_at": -1})),
            400,
            "invalid_field",
            "published_at",
        ),
        case(
            "date is a boolean",
            "POST",
            docs,
            one(json!({"published_at": true})),
            400,
            "invalid_field",
            "published_at",
        ),
        case(
            "date ten days ahead",
            "POST",
            docs,
            one(json!({"published_at": from_now(10 * 86_400)})),
            400,
            "invalid_date",
            "published_at",
        ),
        case(
            "date in 2099",
            "POST",
            docs,
            one(json!({"published_at": "2099-01-01T00:00:00+08:00"})),
            400,
            "invalid_date",
            "published_at",
        ),
        case(
            "a document over the limit",
            "POST",
            docs,
            too_big,
            413,
            "document_too_large",
            "bytes",
        ),
        // List pages.
        case(
            "a cursor that is not one",
            "GET",
            "/v1/search?cursor=not-a-cursor",
            "",
            400,
            "invalid_parameter",
            "cursor",
        ),
        case(
            "a cursor with an offset",
            "GET",
            "/v1/search?cursor=*&offset=2",
            "",
            400,
            "invalid_query",
            "offset must be 0",
        ),
        case(
            "a cursor of another list",
            "GET",
            &format!("/v1/search?q=%E7%81%AF%E5%A1%94&cursor={}", forged_cursor()),
            "",
            400,
            "invalid_query",
            "another list",
        ),
        case(
            "a cursor whose snapshot is gone",
            "GET",
            &format!("/v1/search?cursor={}", forged_cursor()),
            "",
            410,
            "cursor_expired",
            "cursor=*",
        ),
        case(
            "unknown sort",
            "GET",
            "/v1/search?sort=popular",
            "",
            400,
            "invalid_parameter",
            "sort",
        ),
        case(
            "sort in capitals",
            "GET",
            "/v1/search?sort=NEWEST",
            "",
            400,
            "invalid_parameter",
            "sort",
        ),
        case(
            "negative offset",
            "GET",
            "/v1/search?offset=-1",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "offset is a word",
            "GET",
            "/v1/search?offset=ten",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "offset is a fraction",
            "GET",
            "/v1/search?offset=1.5",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "offset past the window",
            "GET",
            "/v1/search?offset=10001",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "offset beyond 64 bits",
            "GET",
            "/v1/search?offset=99999999999999999999999",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "negative limit",
            "GET",
            "/v1/search?limit=-5",
            "",
            400,
            "invalid_parameter",
            "`limit`",
        ),
        case(
            "limit is a word",
            "GET",
            "/v1/search?limit=all",
            "",
            400,
            "invalid_parameter",
            "`limit`",
        ),
        case(
            "limit over 1000",
            "GET",
            "/v1/search?limit=1001",
            "",
            400,
            "invalid_parameter",
            "`limit`",
        ),
        case(
            "unknown parameter",
            "GET",
            "/v1/search?q=a&page=2",
            "",
            400,
            "invalid_parameter",
            "page",
        ),
        case(
            "a parameter twice",
            "GET",
            "/v1/search?sort=newest&sort=relevance",
            "",
            400,
            "invalid_parameter",
            "sort",
        ),
        case(
            "from is a word",
            "GET",
            "/v1/search?from=yesterday",
            "",
            400,
            "invalid_parameter",
            "`from`",
        ),
        case(
            "to is a word",
            "GET",
            "/v1/search?to=tomorrow",
            "",
            400,
            "invalid_parameter",
            "`to`",
        ),
        case(
            "from in milliseconds",
            "GET",
            "/v1/search?from=1718870400000",
            "",
            400,
            "invalid_parameter",
            "`from`",
        ),
        case(
            "from after to",
            "GET",
            "/v1/search?from=1700000100&to=1700000000",
            "",
            400,
            "invalid_parameter",
            "`from`",
        ),
        case(
            "an unknown field in q",
            "GET",
            "/v1/search?q=nosuchfield%3Ax",
            "",
            400,
            "invalid_query",
            "nosuchfield",
        ),
        // Detail pages.
        case(
            "negative similar offset",
            "GET",
            "/v1/documents/seed-0/similar?offset=-1",
            "",
            400,
            "invalid_parameter",
            "`offset`",
        ),
        case(
            "similar limit over 1000",
            "GET",
            "/v1/documents/seed-0/similar?limit=1001",
            "",
            400,
            "invalid_parameter",
            "`limit`",
        ),
        case(
            "unknown similar parameter",
            "GET",
            "/v1/documents/seed-0/similar?sort=newest",
            "",
            400,
            "invalid_parameter",
            "sort",
        ),
        case(
            "similar of nothing",
            "GET",
            "/v1/documents/nothing/similar",
            "",
            404,
            "not_found",
            "nothing",
        ),
        case(
            "no such document",
            "GET",
            "/v1/documents/nothing",
            "",
            404,
            "not_found",
            "nothing",
        ),
        case(
            "delete nothing",
            "DELETE",
            "/v1/documents/nothing",
            "",
            404,
            "not_found",
            "nothing",
        ),
        // Checks before publishing.
        case(
            "an id that is not UTF-8 once decoded",
            "GET",
            "/v1/documents/%FF",
            "",
            400,
            "invalid_path",
            "UTF-8",
        ),
        case(
            "check without content",
            "POST",
            "/v1/near-duplicates",
            "{}",
            400,
            "missing_field",
            "`content`",
        ),
        case(
            "check a title only",
            "POST",
            "/v1/near-duplicates",
            "{\"title\": \"标题\"}",
            400,
            "missing_field",
            "`content`",
        ),
        case(
            "check empty content",
            "POST",
            "/v1/near-duplicates",
            "{\"content\": \" \"}",
            400,
            "invalid_field",
            "`content`",
        ),
        case(
            "check a number",
            "POST",
            "/v1/near-duplicates",
            "{\"content\": 5}",
            400,
            "invalid_field",
            "`content`",
        ),
        case(
            "check an empty body",
            "POST",
            "/v1/near-duplicates",
            "",
            400,
            "invalid_body",
            "JSON",
        ),
        case(
            "check not JSON",
            "POST",
            "/v1/near-duplicates",
            "content=x",
            400,
            "invalid_body",
            "JSON",
        ),
        case(
            "check an array",
            "POST",
            "/v1/near-duplicates",
            "[{\"content\": \"正文\"}]",
            400,
            "invalid_body",
            "object",
        ),
        case(
            "check a nested body",
            "POST",
            "/v1/near-duplicates",
            nested,
            400,
            "invalid_body",
            "JSON",
        ),
        case(
            "check invalid UTF-8",
            "POST",
            "/v1/near-duplicates",
            b"{\"content\": \"\xff\"}".to_vec(),
            400,
            "invalid_body",
            "",
        ),
        case(
            "check a negative limit",
            "POST",
            "/v1/near-duplicates",
            "{\"content\": \"正文\", \"limit\": -1}",
            400,
            "invalid_body",
            "`limit`",
        ),
        case(
            "check a limit in words",
            "POST",
            "/v1/near-duplicates",
            "{\"content\": \"正文\", \"limit\": \"ten\"}",
            400,
            "invalid_body",
            "`limit`",
        ),
        case(
            "check a limit over 1000",
            "POST",
            "/v1/near-duplicates",
            "{\"content\": \"正文\", \"limit\": 1001}",
            400,
            "invalid_body",
            "`limit`",
        ),
        case(
            "check a text over the limit",
            "POST",
            "/v1/near-duplicates",
            bytes(json!({"content": "长".repeat(3_000)})),
            413,
            "document_too_large",
            "KiB",
        ),
        // Routes and methods.
        case(
            "unknown path",
            "GET",
            "/v2/search",
            "",
            404,
            "not_found",
            "/v2/search",
        ),
        case(
            "the API's prefix alone",
            "GET",
            "/v1",
            "",
            404,
            "not_found",
            "/v1",
        ),
        case(
            "a trailing slash",
            "GET",
            "/v1/stats/",
            "",
            404,
            "not_found",
            "/v1/stats/",
        ),
        case(
            "PUT a search",
            "PUT",
            "/v1/search",
            "",
            405,
            "method_not_allowed",
            "PUT",
        ),
        case(
            "GET a check",
            "GET",
            "/v1/near-duplicates",
            "",
            405,
            "method_not_allowed",
            "GET",
        ),
        case(
            "POST statistics",
            "POST",
            "/v1/stats",
            "",
            405,
            "method_not_allowed",
            "POST",
        ),
        case(
            "GET the collection",
            "GET",
            "/v1/documents",
            "",
            405,
            "method_not_allowed",
            "GET",
        ),
        case(
            "PATCH a document",
            "PATCH",
            "/v1/documents/seed-0",
            "{}",
            405,
            "method_not_allowed",
            "PATCH",
        ),
    ]
}

#[test]
fn bad_input_table() {
    let server = TestServer::start(strict_config());
    let seeded: Vec<Value> = (0..3)
        .map(|i| article_with(&format!("seed-{i}"), json!({"published_at": BASE_TIME + i})))
        .collect();
    post_batch(&server, &serde_json::to_vec(&seeded).unwrap(), 3);
    let before = server.stats()["index"].clone();

    let mut failures = Vec::new();
    for case in bad_cases() {
        let reply = server.request(case.method, &case.path, &case.body);
        let problem = if reply.status != case.status {
            Some(format!(
                "status {} instead of {}",
                reply.status, case.status
            ))
        } else if !reply.content_type.starts_with("application/json") {
            Some(format!("content type {:?}", reply.content_type))
        } else {
            let code = reply.json["error"]["code"].as_str().unwrap_or_default();
            let message = reply.json["error"]["message"].as_str().unwrap_or_default();
            if code != case.code {
                Some(format!("code {code:?} instead of {:?}", case.code))
            } else if message.trim().is_empty() || !message.contains(case.needle) {
                Some(format!("the message does not name {:?}", case.needle))
            } else {
                None
            }
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}: {}", case.name, reply.text));
            continue;
        }
        // A refused POST of documents reports each document, none indexed.
        if case.method == "POST"
            && case.path == "/v1/documents"
            && reply.json.get("results").is_some()
        {
            assert_eq!(reply.json["indexed"], json!(0), "{}", case.name);
            let results = reply.json["results"].as_array().expect("results");
            assert_eq!(reply.json["failed"], json!(results.len()), "{}", case.name);
            for (index, result) in results.iter().enumerate() {
                assert_eq!(result["index"], json!(index), "{}", case.name);
                assert!(result["error"]["code"].is_string(), "{}", case.name);
            }
            assert_eq!(results[0]["status"], json!(case.status), "{}", case.name);
        }
    }
    assert!(
        failures.is_empty(),
        "bad requests answered wrongly:\n{}",
        failures.join("\n")
    );

    // Nothing was lost or added, and the service is healthy.
    assert_eq!(server.stats()["index"]["documents"], before["documents"]);
    assert_eq!(server.stats()["index"]["tombstones"], before["tombstones"]);
    for seed in &seeded {
        assert!(server.document(seed["id"].as_str().unwrap()).is_some());
    }
    let health = server.get("/healthz");
    assert_eq!(health.status, 200, "{}", health.text);
    assert_eq!(health.json["status"], json!("ok"));
    // Boundaries that are accepted.
    for path in [
        "/v1/search?offset=10000&limit=1000",
        "/v1/search?offset=0&limit=0",
        "/v1/search?offset=%2020&limit=5",
        "/v1/search?sort=&from=&to=&source=&q=",
        "/v1/search?q=%FF%FE",
        "/v1/search?from=1700000000&to=1700000000",
        "/v1/documents/seed-0/similar?offset=999999999&limit=1000",
    ] {
        let reply = server.get(path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    }
    let reply = server.get("/v1/search?from=1700000001&to=1700000001");
    assert_eq!(reply.json["total_hits"], json!(1));
    let reply = server.post(
        "/v1/near-duplicates",
        b"{\"content\": \"x\", \"limit\": 0, \"id\": 5}",
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["matches"], json!([]));
    let metrics = server.get("/metrics").text;
    assert!(metrics.contains("outcome=\"rejected\""), "{metrics}");
    server.stop();
}

/// What one entry of a mixed batch must give: indexed under this id, or refused with this
/// status and code, reporting this id.
enum Outcome {
    Indexed(&'static str),
    Refused(u16, &'static str, Option<&'static str>),
}

/// A valid document of the mixed batches, about the lighthouse (so a search finds exactly the
/// indexed ones).
fn lighthouse(id: Value, n: usize) -> Value {
    let mut rng = SmallRng::seed_from_u64(n as u64);
    let mut article = article_with("x", json!({}));
    article["id"] = id;
    article["content"] = json!(format!(
        "{}{}",
        article["content"].as_str().unwrap(),
        story(&mut rng).text()
    ));
    article["published_at"] = json!(BASE_TIME + 3_600 + n as i64);
    article
}

fn check_mixed(server: &TestServer, body: &[u8], outcomes: &[Outcome]) {
    let reply = server.post("/v1/documents", body);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let indexed = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Indexed(_)))
        .count();
    assert_eq!(reply.json["indexed"], json!(indexed), "{}", reply.text);
    assert_eq!(
        reply.json["failed"],
        json!(outcomes.len() - indexed),
        "{}",
        reply.text
    );
    assert!(reply.json.get("error").is_none());
    let results = reply.json["results"].as_array().expect("results");
    assert_eq!(results.len(), outcomes.len());
    for (index, (result, outcome)) in results.iter().zip(outcomes).enumerate() {
        match outcome {
            Outcome::Indexed(id) => {
                assert_eq!(result["id"], json!(id), "#{index}: {result}");
                hash(&result["simhash"]);
                hash(&result["root"]);
                assert!(result.get("error").is_none(), "#{index}: {result}");
                let page = server
                    .document(id)
                    .unwrap_or_else(|| panic!("{id} is indexed"));
                assert_eq!(page["document"]["title"], json!("灯塔重新点亮"));
            }
            Outcome::Refused(status, code, id) => {
                assert_eq!(result["index"], json!(index), "#{index}: {result}");
                assert_eq!(result["status"], json!(status), "#{index}: {result}");
                assert_eq!(result["error"]["code"], json!(code), "#{index}: {result}");
                let message = result["error"]["message"].as_str().unwrap_or_default();
                assert!(!message.trim().is_empty(), "#{index}: {result}");
                assert_eq!(
                    result.get("id").and_then(Value::as_str),
                    *id,
                    "#{index}: {result}"
                );
                if let Some(id) = id.filter(|id| !id.trim().is_empty()) {
                    assert!(server.document(id).is_none(), "{id} must not be indexed");
                }
            }
        }
    }
}

/// A post with too little of its own is answered with why it starts a story of its own
/// (issue 34): `"reason": "degenerate"`, on a re-send too; a post with words of its own has no
/// reason.
#[test]
fn degenerate_and_boilerplate_posts_are_answered_with_their_reason() {
    let server = TestServer::start(server_config());
    let codes = "[哈哈]".repeat(11);
    let story = "滨海大桥主桥今天上午顺利合龙，这座跨海大桥预计明年五月建成通车。";
    let reply = server.post_json(
        "/v1/documents",
        &json!([
            {"id": "codes", "content": codes},
            {"id": "laughter", "content": "哈哈哈哈哈哈哈哈"},
            {"id": "story", "content": story},
        ]),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let results = &reply.json["results"];
    assert_eq!(results[0]["reason"], "degenerate", "{}", reply.text);
    assert_eq!(results[1]["reason"], "degenerate", "{}", reply.text);
    assert_ne!(results[0]["root"], results[1]["root"], "{}", reply.text);
    assert!(results[2].get("reason").is_none(), "{}", reply.text);
    let again = server.post_json("/v1/documents", &json!([{"id": "codes", "content": codes}]));
    assert_eq!(
        again.json["results"][0]["unchanged"], true,
        "{}",
        again.text
    );
    assert_eq!(
        again.json["results"][0]["reason"], "degenerate",
        "{}",
        again.text
    );
    // A page that is only a source's tail, once three stories carry the tail, is boilerplate.
    let tail = "（来源：江城日报 记者：李华 责任编辑：王芳 校对：赵强）欢迎关注江城日报微信公众号和\
                客户端，获取更多本地新闻资讯，转载请注明出处。";
    let briefs = [
        "市交通运输局今天宣布，地铁六号线二期工程完成全部轨道铺设，预计年底开通试运营，沿线将新增\
         站点九座，方便东部新城居民出行。",
        "今年夏粮收购工作全面启动，全省设立收购网点一千余个，各地粮食部门延长收购时间，为农民售粮\
         提供免费检测和烘干服务。",
        "市卫生健康委员会提醒，近期进入流感高发季节，老人和儿童应及时接种疫苗，出现发热症状要尽早\
         就医，避免前往人员密集场所。",
    ];
    let mut batch: Vec<Value> = briefs
        .iter()
        .enumerate()
        .map(|(i, brief)| json!({"id": format!("brief-{i}"), "content": format!("{brief}{tail}")}))
        .collect();
    batch.push(json!({"id": "tail-only", "content": tail}));
    let reply = server.post_json("/v1/documents", &Value::Array(batch));
    let results = &reply.json["results"];
    assert_eq!(results[3]["reason"], "boilerplate", "{}", reply.text);
    assert_eq!(results[3]["duplicate"], false, "{}", reply.text);
    for brief in 0..3 {
        assert!(results[brief].get("reason").is_none(), "{}", reply.text);
    }
}

#[test]
fn mixed_batch_indexes_exactly_the_valid_documents() {
    let server = TestServer::start(strict_config());
    let bad = |id: &str, overrides: Value| article_with(id, overrides).to_string().into_bytes();
    let valid = |id: Value, n: usize| lighthouse(id, n).to_string().into_bytes();
    let too_big = bad("too-big", json!({"content": "灯塔".repeat(1_500)}));
    let future = from_now(30 * 86_400);
    use Outcome::{Indexed, Refused};
    let lines: Vec<(Vec<u8>, Outcome)> = vec![
        (valid(json!("v0"), 0), Indexed("v0")),
        (
            b"{\"id\": \"bad-json\", \"content\": ".to_vec(),
            Refused(400, "invalid_json", None),
        ),
        (valid(json!(7001), 1), Indexed("7001")),
        (
            bad("x", json!({"id": true})),
            Refused(400, "invalid_field", None),
        ),
        (valid(json!("v2"), 2), Indexed("v2")),
        (
            bad("bad-content", json!({"content": 42})),
            Refused(400, "invalid_field", Some("bad-content")),
        ),
        (
            bad("bad-title", json!({"title": ["a"]})),
            Refused(400, "invalid_field", Some("bad-title")),
        ),
        (
            bad("x", json!({"id": null})),
            Refused(400, "missing_field", None),
        ),
        (valid(json!("v3"), 3), Indexed("v3")),
        (bad("", json!({})), Refused(400, "invalid_field", Some(""))),
        (
            bad("no-content", json!({"content": null})),
            Refused(400, "missing_field", Some("no-content")),
        ),
        (
            bad("blank", json!({"content": " \n "})),
            Refused(400, "invalid_field", Some("blank")),
        ),
        (
            bad("yesterday", json!({"published_at": "yesterday"})),
            Refused(400, "invalid_field", Some("yesterday")),
        ),
        (valid(json!("v4"), 4), Indexed("v4")),
        (
            bad("ms", json!({"published_at": 1e15})),
            Refused(400, "invalid_field", Some("ms")),
        ),
        (
            bad("future", json!({"published_at": future})),
            Refused(400, "invalid_date", Some("future")),
        ),
        (too_big, Refused(413, "document_too_large", Some("too-big"))),
        (b"[1, 2]".to_vec(), Refused(400, "invalid_json", None)),
        (b"42".to_vec(), Refused(400, "invalid_json", None)),
        (valid(json!("v5"), 5), Indexed("v5")),
        (
            bad("fraction", json!({"id": 7.5})),
            Refused(400, "invalid_field", Some("7.5")),
        ),
        (valid(json!("v6"), 6), Indexed("v6")),
    ];
    // NDJSON, behind a byte-order mark, with an invalid UTF-8 line too.
    let mut body = b"\xEF\xBB\xBF".to_vec();
    let mut outcomes = Vec::new();
    for (line, outcome) in lines {
        body.extend(line);
        body.extend(b"\n");
        outcomes.push(outcome);
    }
    body.extend(b"{\"id\": \"bad-utf8\", \"content\": \"\xff\xfe\"}\n");
    outcomes.push(Refused(400, "invalid_json", None));
    body.extend(valid(json!("v7"), 7));
    outcomes.push(Indexed("v7"));
    check_mixed(&server, &body, &outcomes);

    // A JSON array: elements that are not objects, bad fields, dates and sizes.
    let elements = vec![
        (lighthouse(json!("a0"), 10), Indexed("a0")),
        (json!(42), Refused(400, "invalid_json", None)),
        (json!("正文"), Refused(400, "invalid_json", None)),
        (json!(null), Refused(400, "invalid_json", None)),
        (lighthouse(json!("a1"), 11), Indexed("a1")),
        (
            article_with("a-future", json!({"published_at": future})),
            Refused(400, "invalid_date", Some("a-future")),
        ),
        (
            article_with("a-big", json!({"content": "灯塔".repeat(1_500)})),
            Refused(413, "document_too_large", Some("a-big")),
        ),
        (
            article_with("a-url", json!({"url": ["x"]})),
            Refused(400, "invalid_field", Some("a-url")),
        ),
        (lighthouse(json!("a2"), 12), Indexed("a2")),
    ];
    let (elements, outcomes): (Vec<Value>, Vec<Outcome>) = elements.into_iter().unzip();
    check_mixed(&server, &serde_json::to_vec(&elements).unwrap(), &outcomes);

    // Exactly the valid documents are there.
    let page = server.search(&[("q", "灯塔".into()), ("limit", "1000".into())]);
    assert_eq!(page["total_hits"], json!(11), "{page}");
    assert_eq!(server.stats()["index"]["documents"], json!(11));
    let health = server.get("/healthz");
    assert_eq!(health.status, 200);
    server.stop();
}

/// A raw HTTP/1.1 exchange: writes the head and (in another thread) the body, and returns
/// the server's answer: its head and as much body as its `content-length` says (all it sent
/// before closing the connection when it says none), or nothing if it answered nothing.
fn raw_exchange(address: &str, head: String, body: Vec<u8>) -> String {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream.write_all(head.as_bytes()).expect("write the head");
    let mut writer = stream.try_clone().expect("clone the stream");
    let sender = std::thread::spawn(move || {
        // The server may close before reading it all; that is its right.
        let _ = writer.write_all(&body);
    });
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                answer.extend_from_slice(&buffer[..n]);
                // A kept-alive connection stays open after the answer: stop at its end.
                if answer_is_whole(&answer) {
                    break;
                }
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `answer` holds a whole HTTP/1.1 answer with a `content-length`: its head and that
/// many bytes of body.
fn answer_is_whole(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok());
    length.is_some_and(|length| answer.len() >= end + 4 + length)
}

#[test]
fn oversized_bodies_are_refused_whole() {
    let server = TestServer::start(strict_config());
    let limit = 1usize << 20;
    // Exactly at the limit: accepted.
    let document = article_with("at-limit", json!({})).to_string();
    let mut body = format!("[{document}");
    body.push_str(&" ".repeat(limit - body.len() - 1));
    body.push(']');
    assert_eq!(body.len(), limit);
    post_batch(&server, body.as_bytes(), 1);

    // One byte over, with a declared length: refused before it is read.
    let mut over = body.clone().into_bytes();
    over.insert(1, b' ');
    let head = format!(
        "POST /v1/documents HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        server.address(),
        over.len()
    );
    let answer = raw_exchange(server.address(), head, over.clone());
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"body_too_large\""), "{answer}");

    // Over the limit in chunks, without a declared length: refused once the limit is passed.
    let mut chunked = Vec::new();
    for piece in over.chunks(64 << 10) {
        chunked.extend(format!("{:x}\r\n", piece.len()).into_bytes());
        chunked.extend(piece);
        chunked.extend(b"\r\n");
    }
    chunked.extend(b"0\r\n\r\n");
    let head = format!(
        "POST /v1/documents HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        server.address()
    );
    let answer = raw_exchange(server.address(), head, chunked);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"body_too_large\""), "{answer}");

    // With a client that waits for `100 Continue`, the ordinary way.
    let reply = TestServer::reply(
        server
            .agent
            .post(format!("{}/v1/documents", server.base))
            .header("content-type", "application/json")
            .header("expect", "100-continue")
            .send(&over[..]),
    );
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_eq!(reply.error().0, "body_too_large");

    // A check over the document limit.
    let check = bytes(json!({"content": "长".repeat(40_000)}));
    let head = format!(
        "POST /v1/near-duplicates HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        server.address(),
        check.len()
    );
    let answer = raw_exchange(server.address(), head, check);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"document_too_large\""), "{answer}");

    // Nothing else was lost, and the server goes on.
    assert_eq!(server.stats()["index"]["documents"], json!(1));
    post_batch(&server, &bytes(article_with("after", json!({}))), 1);
    assert_eq!(server.get("/healthz").status, 200);
    server.stop();
}

// ---- 4. property tests ----------------------------------------------------------------------

/// The documents in a body, counted without `parse_batch`: a JSON array's elements; one
/// object (UTF-8, parsing whole); else the non-blank lines of NDJSON. `None` when the body is
/// none of these.
fn document_count(body: &[u8]) -> Option<usize> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let first = body.iter().find(|byte| !byte.is_ascii_whitespace())?;
    match first {
        b'[' => serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body)
            .ok()
            .map(|documents| documents.len()),
        b'{' => {
            let whole = std::str::from_utf8(body).is_ok()
                && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
            Some(if whole {
                1
            } else {
                body.split(|byte| *byte == b'\n')
                    .filter(|line| line.iter().any(|byte| !byte.is_ascii_whitespace()))
                    .count()
            })
        }
        _ => None,
    }
}

/// What `parse_batch` must make of any body: no panic; per-document results, as many as
/// there are documents, each a valid article or a refusal that explains itself; or a whole-body
/// error that fits the body.
fn check_any_body(body: &[u8], limits: &BatchLimits) -> Result<(), TestCaseError> {
    match parse_batch(body, limits) {
        Ok(documents) => {
            prop_assert!(!documents.is_empty());
            prop_assert!(documents.len() <= limits.max_documents);
            prop_assert_eq!(Some(documents.len()), document_count(body));
            for document in documents {
                match document {
                    Ok(article) => {
                        prop_assert!(!article.id.trim().is_empty());
                        prop_assert!(!article.content.trim().is_empty());
                        prop_assert!(
                            article
                                .published_at
                                .is_none_or(|time| (0..=limits.latest_time).contains(&time))
                        );
                    }
                    Err(refused) => {
                        prop_assert!([400, 413].contains(&refused.error.status()));
                        prop_assert!(!refused.error.code().is_empty());
                        prop_assert!(!refused.error.to_string().trim().is_empty());
                    }
                }
            }
        }
        Err(BodyError::TooManyDocuments { found, limit }) => {
            prop_assert!(found > limit);
            prop_assert_eq!(Some(found), document_count(body));
        }
        Err(BodyError::NoDocuments) => prop_assert_eq!(document_count(body), Some(0)),
        Err(BodyError::Empty) => {
            let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            prop_assert!(body.iter().all(u8::is_ascii_whitespace));
        }
        Err(error) => prop_assert!(!error.to_string().is_empty()),
    }
    Ok(())
}

const PROP_LIMITS: BatchLimits = BatchLimits {
    max_documents: 8,
    max_document_bytes: 300,
    latest_time: 2_000_000_000,
};

/// Arbitrary JSON values, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "1700000000",
            "2024-05-01T08:00:00+08:00",
            "1969-12-31T23:59:59Z",
            "9999-12-31T23:59:59+23:59",
            "-0",
            "  ",
            "\u{feff}",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "id",
                    "content",
                    "title",
                    "source",
                    "url",
                    "published_at",
                    "other",
                ])
                .prop_map(str::to_owned),
                inner,
                0..7,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Bodies that look like JSON: arbitrary values, objects and arrays rendered compactly, pretty
/// or as lines, then perhaps cut or spliced.
fn json_ish_body() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(json_value(), 1..6),
        0..4usize,
        any::<prop::sample::Index>(),
        prop::sample::select(vec![
            "", "[", "{", "}", "]", ",", "\n", "\"", "\\", "\u{feff}",
        ]),
        0..3usize,
    )
        .prop_map(|(values, format, at, splice, mutation)| {
            let mut text = match format {
                0 => serde_json::to_string(&values).unwrap_or_default(),
                1 => serde_json::to_string_pretty(&values).unwrap_or_default(),
                2 => serde_json::to_string_pretty(&values[0]).unwrap_or_default(),
                _ => values
                    .iter()
                    .map(|value| value.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let boundaries: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .collect();
            let at = boundaries[at.index(boundaries.len())];
            match mutation {
                0 => {}
                1 => text.truncate(at),
                _ => text.insert_str(at, splice),
            }
            text.into_bytes()
        })
}

/// One entry of a generated batch, with what `parse_batch` must make of it.
#[derive(Debug, Clone)]
struct Entry {
    json: String,
    /// `Ok(id)` or `Err(code)`.
    expected: Result<String, &'static str>,
}

/// A generated object with an id, content and date each valid or not in a known way, or (not
/// first in NDJSON) a line that is no JSON object.
/// A field's JSON value (`null`: left out) and whether it is valid (the error code if not).
type Field<T> = (Value, Result<T, &'static str>);

fn entry(object: bool) -> impl Strategy<Value = Entry> {
    let id: BoxedStrategy<Field<String>> = prop_oneof![
        "[a-z][a-z0-9-]{0,10}".prop_map(|id| (json!(id), Ok(id))),
        (0u32..100_000).prop_map(|n| (json!(n), Ok(n.to_string()))),
        Just((json!(""), Err("invalid_field"))),
        Just((json!(false), Err("invalid_field"))),
        Just((Value::Null, Err("missing_field"))),
    ]
    .boxed();
    let content: BoxedStrategy<Field<()>> = prop_oneof![
        "[\u{4e00}-\u{9fa5}，。a-z ]{1,60}".prop_map(|text| {
            let valid = !text.trim().is_empty();
            (
                json!(text),
                if valid { Ok(()) } else { Err("invalid_field") },
            )
        }),
        Just((json!(""), Err("invalid_field"))),
        Just((json!(3.5), Err("invalid_field"))),
        Just((Value::Null, Err("missing_field"))),
    ]
    .boxed();
    let time: BoxedStrategy<Field<()>> = prop_oneof![
        Just((Value::Null, Ok(()))),
        Just((json!(1_700_000_000), Ok(()))),
        Just((json!("2024-05-01T08:00:00+08:00"), Ok(()))),
        Just((json!(2_100_000_000), Err("invalid_date"))),
        Just((json!("yesterday"), Err("invalid_field"))),
        Just((json!(1_718_870_400_000i64), Err("invalid_field"))),
    ]
    .boxed();
    let junk = prop::sample::select(vec![
        "not json",
        "{\"id\": ",
        "[1,",
        "}",
        "42",
        "\"正文\"",
        "[]",
    ]);
    let made =
        (id, content, time).prop_map(|((id, id_ok), (content, content_ok), (time, time_ok))| {
            let mut object = serde_json::Map::new();
            for (key, value) in [("id", id), ("content", content), ("published_at", time)] {
                if !value.is_null() {
                    object.insert(key.to_owned(), value);
                }
            }
            let json = Value::Object(object).to_string();
            // Checked in this order: the date's range against the clock comes last.
            let expected = match (id_ok, content_ok, time_ok) {
                (Err(code), _, _) | (Ok(_), Err(code), _) | (Ok(_), Ok(()), Err(code)) => Err(code),
                (Ok(id), Ok(()), Ok(())) => Ok(id),
            };
            Entry { json, expected }
        });
    if object {
        made.boxed()
    } else {
        prop_oneof![
            4 => made,
            1 => junk.prop_map(|junk| Entry { json: junk.to_owned(), expected: Err("invalid_json") }),
        ]
        .boxed()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parse_batch_survives_any_bytes(
        prefix in prop::sample::select(vec!["", "[", "{", "\u{feff}{", " \n[", "{\"id\": \"a\", \"content\": \"x\"}\n"]),
        bytes in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut body = prefix.as_bytes().to_vec();
        body.extend(bytes);
        check_any_body(&body, &PROP_LIMITS)?;
    }

    #[test]
    fn parse_batch_survives_json_ish_bodies(body in json_ish_body()) {
        check_any_body(&body, &PROP_LIMITS)?;
    }

    #[test]
    fn parse_batch_answers_each_document_in_order(
        first in entry(true),
        rest in prop::collection::vec(entry(false), 0..10),
        ndjson in any::<bool>(),
        max_documents in 1usize..=10,
        max_document_bytes in 40usize..=240,
    ) {
        let limits = BatchLimits { max_documents, max_document_bytes, latest_time: 2_000_000_000 };
        let mut entries = vec![first];
        entries.extend(rest);
        let body = if ndjson {
            entries.iter().map(|entry| entry.json.as_str()).collect::<Vec<_>>().join("\n")
        } else {
            // Junk is no JSON in an array: array entries must be values.
            for entry in &mut entries {
                if serde_json::from_str::<Value>(&entry.json).is_err() {
                    entry.json = "[1,2]".to_owned();
                }
            }
            format!("[{}]", entries.iter().map(|entry| entry.json.as_str()).collect::<Vec<_>>().join(", "))
        };
        match parse_batch(body.as_bytes(), &limits) {
            Ok(documents) => {
                prop_assert!(entries.len() <= max_documents);
                prop_assert_eq!(documents.len(), entries.len());
                for (document, entry) in documents.iter().zip(&entries) {
                    let expected = if entry.json.len() > max_document_bytes {
                        Err("document_too_large")
                    } else {
                        entry.expected.clone()
                    };
                    match (document, expected) {
                        (Ok(article), Ok(id)) => prop_assert_eq!(&article.id, &id),
                        (Err(refused), Err(code)) => {
                            prop_assert_eq!(refused.error.code(), code, "{}", entry.json);
                            let readable = serde_json::from_str::<Value>(&entry.json)
                                .ok()
                                .and_then(|value| match value.get("id") {
                                    Some(Value::String(id)) => Some(id.clone()),
                                    Some(Value::Number(id)) => Some(id.to_string()),
                                    _ => None,
                                });
                            prop_assert_eq!(&refused.id, &readable);
                        }
                        (got, want) => prop_assert!(false, "{} gave {:?}, expected {:?}", entry.json, got, want),
                    }
                }
            }
            Err(BodyError::TooManyDocuments { found, limit }) => {
                prop_assert_eq!(found, entries.len());
                prop_assert_eq!(limit, max_documents);
                prop_assert!(found > limit);
            }
            Err(error) => prop_assert!(false, "{} refused whole: {}", body, error),
        }
    }

    #[test]
    fn articles_from_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Article::from_json_bytes(&bytes);
        let mut object = b"{\"id\": \"a\", \"content\": \"".to_vec();
        object.extend(&bytes);
        object.extend(b"\"}");
        if let Ok(article) = Article::from_json_bytes(&object) {
            prop_assert_eq!(article.id, "a");
        }
    }

    #[test]
    fn articles_from_any_json(value in json_value()) {
        let text = value.to_string();
        match Article::from_json_bytes(text.as_bytes()) {
            Ok(article) => {
                prop_assert!(!article.id.trim().is_empty());
                prop_assert!(!article.content.trim().is_empty());
                prop_assert!(article
                    .published_at
                    .is_none_or(|time| tantivy_dedup::article::TIME_RANGE.contains(&time)));
                prop_assert_eq!(article.clone().digest(), article.digest());
            }
            Err(error) => prop_assert!(!error.to_string().trim().is_empty()),
        }
    }

    #[test]
    fn text_pipeline_survives_any_text(text in nasty_text()) {
        let analyzed = AnalyzedText::new(&text);
        let normalized = analyzed.normalized();
        for (token, span) in analyzed.tokens() {
            prop_assert!(!token.is_empty());
            prop_assert_eq!(&normalized[span.range()], token);
        }
        for weighting in [Weighting::Tf, Weighting::TfIdf, Weighting::LogTf, Weighting::LogTfIdf] {
            for longest_sentence in [false, true] {
                for guarded in [false, true] {
                    let fingerprinter = Fingerprinter::new(weighting, longest_sentence).guarded(guarded);
                    prop_assert_eq!(
                        fingerprinter.fingerprint(&text),
                        fingerprinter.fingerprint_analyzed(&[&analyzed]),
                        "{:?} {} {}", weighting, longest_sentence, guarded
                    );
                }
            }
        }
        let dedup = Deduplicator::new(DedupConfig::default()).expect("default settings");
        let article = Article { id: "p".into(), title: Some(text.clone()), content: text.clone(), ..Default::default() };
        let print = dedup.fingerprint(&article);
        prop_assert_eq!(print, DedupConfig::default().fingerprinter().fingerprint(&text));
        prop_assert_eq!(print, dedup.fingerprint(&article.clone()));
    }
}

/// Strings built to stress normalisation and segmentation: arbitrary Unicode, control
/// characters, emoji sequences, combining marks, full-width forms, markup and entities
/// (including ones that name no character), and very long runs.
fn nasty_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f-\\x9f]{1,20}",
        "[\u{300}-\u{36f}\u{20d0}-\u{20ff}]{1,30}",
        "[\u{4e00}-\u{9fa5}，。、！？]{1,80}",
        "[\u{ff01}-\u{ff5e}\u{3000}]{1,20}",
        "[a-zA-Z0-9 .,!?-]{1,30}",
        "[\u{1f300}-\u{1faff}\u{200d}\u{fe0f}\u{1f3fb}-\u{1f3ff}]{1,20}",
        prop::sample::select(vec![
            "<p>",
            "</p>",
            "<div class=\"x\">",
            "<!--",
            "-->",
            "<script>var a = '<p>';</script>",
            "<style>p{}</style>",
            "&nbsp;",
            "&amp;",
            "&amp;lt;",
            "&#x1F600;",
            "&#0;",
            "&#xD800;",
            "&#99999999999;",
            "&#x110000;",
            "&",
            "<",
            ">",
            "<<>>",
            "&#",
            "&#x;",
            "\u{feff}",
            "\u{200b}",
            "\u{202e}",
            "\u{2028}",
            "\r\n",
            "\t",
            "👨\u{200d}👩\u{200d}👧",
            "e\u{301}",
            "\u{1100}\u{1161}\u{11a8}",
            "ﷺ",
            "ﬃ",
            "㍿",
            "①",
            "\u{fdfa}",
        ])
        .prop_map(str::to_owned),
        (any::<char>(), 1..2_000usize).prop_map(|(c, n)| c.to_string().repeat(n)),
        (
            prop::sample::select(vec!["中", "a", " ", "。", "\n", "<p>", "&nbsp;", "\u{301}"]),
            1..3_000usize
        )
            .prop_map(|(s, n)| s.repeat(n)),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
}

// ---- 5. regressions: bugs found by these tests ------------------------------------------------

/// An id longer than Tantivy's longest term (65,530 bytes) used to be accepted while Tantivy
/// dropped its term, so the document could never be found, replaced or deleted by id. Such ids
/// are refused (`invalid_field` on `id`), or re-sending replaces.
#[test]
fn ids_longer_than_a_term_are_refused_or_replaced() {
    let server = TestServer::start(server_config());
    let id = "k".repeat(65_531);
    let body = article_with(&id, json!({}));
    let first = server.post_json("/v1/documents", &body);
    if first.status == 400 {
        assert_eq!(first.error().0, "invalid_field");
        assert!(first.error().1.contains("`id`"), "{}", first.text);
        return;
    }
    assert_eq!(first.status, 200, "{}", first.text);
    let again = server.post_json("/v1/documents", &body);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        server.stats()["index"]["documents"],
        json!(1),
        "re-ingesting an existing id replaces that document (docs/service.md, Stored fields)"
    );
    server.stop();
}

/// `max_future` used to be cast to seconds with `as i64`, so 2^63 s or more wrapped negative
/// and every dated document was refused; `parse_batch` itself overflowed computing the
/// allowance for such limits. Now such a setting is refused, and no limits make it panic.
#[test]
fn a_huge_max_future_is_refused_and_never_panics() {
    let limits = BatchLimits {
        max_documents: 1,
        max_document_bytes: 1 << 10,
        latest_time: i64::MIN,
    };
    let body = br#"{"id": "a", "content": "x", "published_at": 5}"#;
    let parsed =
        std::panic::catch_unwind(|| parse_batch(body, &limits).map(|documents| documents.len()));
    assert!(parsed.is_ok(), "parse_batch must not panic on any limits");

    let huge = ServerConfig {
        max_future: Duration::from_secs(1 << 63),
        ..server_config()
    };
    let refused = huge
        .validate()
        .expect_err("a max_future past 100 years is refused");
    assert!(refused.to_string().contains("max_future"), "{refused}");
}

/// serde reads a JSON array into a struct by position, so
/// `["id", title, content, source, url, published_at]` used to be indexed as an article,
/// although the API (and the error `not a valid JSON object`) speaks of objects only.
#[test]
fn a_json_array_is_not_an_article() {
    assert!(Article::from_json(r#"["arr", null, "正文", null, null, null]"#).is_err());
    let server = TestServer::start(server_config());
    let reply = server.post(
        "/v1/documents",
        "[[\"arr\", null, \"数组形式的正文\", null, null, null]]".as_bytes(),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.error().0, "invalid_json");
    server.stop();
}
