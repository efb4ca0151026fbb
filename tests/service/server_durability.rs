//! Durability of the HTTP service (docs/service.md, "Crashes"), against the real
//! `tantivy-dedup serve` binary:
//!
//! - **kill -9 during a steady ingest** (twice per run): a client posts a stream of batches
//!   one after the other and the server is killed while a POST is in flight. After a restart
//!   on the same directory every acknowledged document is there with the root it was
//!   acknowledged with, no document is indexed twice, and the batch in flight is there whole
//!   or not at all. The client then re-sends from its first unacknowledged batch
//!   (at-least-once) and finishes the stream; every answer and the final root of every
//!   document equal those of an uninterrupted run.
//! - **SIGTERM while a POST waits for its group commit**: the POST is still answered, the
//!   process exits with status 0 and the documents are there after a restart.
//! - **A graceful restart halfway through a stream** changes no later decision.
//!
//! The uninterrupted run is the library itself ([`DedupIndex`]), fed the same batches in the
//! same order with a commit after each, as the server does for a client that waits for its
//! answers. The stories are generated (deterministically per seed) from invented sentences:
//! reposts with HTML, half-width punctuation and dropped sentences form clusters; some ids are
//! sent again unchanged (a no-op) or with new text (a replacement, which leaves a tombstone);
//! event times grow past the dedup window so that clusters expire during the run.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::{Map, Value};
use tantivy_dedup::config::Config;
use tantivy_dedup::engine::DedupIndex;
use tantivy_dedup::{Article, Decision, Fingerprint};

use crate::serve_process::spawn_listening;

// ---- the stream of documents ----------------------------------------------------------------

const SENTENCES: &[&str] = &[
    "今年以来，当地累计改造老旧小区四十二个，惠及居民一万三千余户，加装电梯一百余部。",
    "气象部门预计，受冷空气南下影响，本周后期大部地区气温将下降六到八摄氏度。",
    "港区新建的自动化码头正式投入运营，单日最高可完成集装箱装卸作业八千标准箱。",
    "市人民医院开设夜间门诊，内科、儿科和皮肤科每天接诊至晚上九点。",
    "农业技术推广站的专家走进果园，现场讲解柑橘冬季修剪和病虫害防治要点。",
    "据统计，假期期间全市重点商圈客流量同比增长百分之十七，餐饮消费尤为活跃。",
    "警方破获一起电信网络诈骗案，抓获犯罪嫌疑人二十三名，追回涉案资金四百余万元。",
    "新建成的滨河绿道全长十二公里，沿线设置了六处休息驿站和两座儿童游乐场。",
    "教育部门要求各中小学严格落实课后服务，不得以任何形式增加学生课业负担。",
    "该项目总投资约三十五亿元，建成后预计年产值可达八十亿元，新增就业岗位一千二百个。",
    "水利部门加快推进灌区续建配套工程，新增和改善灌溉面积五万余亩。",
    "图书馆与社区合作开办少儿阅读角，每周末安排志愿者为孩子们讲绘本故事。",
    "市场监管局公布第三季度产品质量抽查结果，电动自行车等三类产品不合格率较高。",
    "首届乡村美食文化节吸引周边游客近十万人次，带动农副产品销售一千多万元。",
    "公交集团宣布新开通三条微循环线路，方便居民往返地铁站和大型社区。",
    "应急管理部门组织开展森林防火专项检查，排查整改各类隐患八十余处。",
    "研究团队成功研发一种新型可降解材料，在自然环境中六个月内即可完全分解。",
    "税务部门持续优化办税流程，企业开具发票的平均用时缩短至三分钟以内。",
    "社区卫生服务中心为辖区六十五岁以上老人免费开展年度健康体检。",
    "体育馆改造工程完工后将向市民免费或低收费开放，每天开放时间不少于十小时。",
    "受连日降雨影响，部分山区道路出现塌方，养护人员正连夜抢修。",
    "文物保护单位完成古建筑修缮，施工坚持最小干预原则，最大限度保留历史信息。",
];

const PLACES: &[&str] = &[
    "临江市",
    "青川县",
    "北湖区",
    "东港镇",
    "云岭州",
    "南屏市",
    "石桥乡",
    "白沙县",
];
const REPORTERS: &[&str] = &["林晓", "陈默", "王一帆", "赵青", "孙立", "何苗"];
const SOURCES: &[&str] = &[
    "江城晨报",
    "南方新闻网",
    "都市频道",
    "财经周刊",
    "交通广播",
    "掌上新闻",
];

/// A story: a lead of its own, then five to nine sentences of the pool.
struct Story {
    title: String,
    sentences: Vec<String>,
}

impl Story {
    fn new(rng: &mut SmallRng) -> Story {
        let place = PLACES[rng.random_range(0..PLACES.len())];
        let month = rng.random_range(1..=12);
        let day = rng.random_range(1..=28);
        let reporter = REPORTERS[rng.random_range(0..REPORTERS.len())];
        let number = rng.random_range(2..=99);
        let mut pool: Vec<usize> = (0..SENTENCES.len()).collect();
        pool.shuffle(rng);
        let body = rng.random_range(5..=9);
        let mut sentences = vec![format!(
            "本报{place}{month}月{day}日电（记者{reporter}）{place}第{number}次工作推进会今天召开。"
        )];
        sentences.extend(pool[..body].iter().map(|&i| SENTENCES[i].to_owned()));
        Story {
            title: format!("{place}{month}月{day}日：第{number}次工作推进会召开"),
            sentences,
        }
    }

    /// The story as first published.
    fn original(&self) -> String {
        self.sentences.concat()
    }

    /// The story as another outlet reposts it: a sentence dropped, HTML, half-width
    /// punctuation, an editor's line.
    fn repost(&self, rng: &mut SmallRng) -> String {
        let mut sentences = self.sentences.clone();
        if sentences.len() > 6 && rng.random_bool(0.4) {
            sentences.remove(rng.random_range(1..sentences.len()));
        }
        let mut text = if rng.random_bool(0.4) {
            let paragraphs: String = sentences.iter().map(|s| format!("<p>{s}</p>")).collect();
            format!("<div class=\"article-body\">{paragraphs}</div>")
        } else {
            sentences.concat()
        };
        if rng.random_bool(0.4) {
            text = half_width(&text);
        }
        if rng.random_bool(0.2) {
            text.push_str("（责任编辑：周岚）");
        }
        text
    }
}

fn half_width(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '，' => ',',
            '。' => '.',
            '：' => ':',
            '（' => '(',
            '）' => ')',
            '、' => ',',
            other => other,
        })
        .collect()
}

/// One document of the stream.
#[derive(Debug, Clone, PartialEq)]
struct Doc {
    id: String,
    title: Option<String>,
    content: String,
    source: String,
    url: Option<String>,
    published_at: i64,
    /// Whether it is an earlier document sent again unchanged (no insert).
    resend: bool,
}

impl Doc {
    fn json(&self) -> Value {
        let mut object = Map::new();
        object.insert("id".into(), self.id.clone().into());
        object.insert("content".into(), self.content.clone().into());
        object.insert("source".into(), self.source.clone().into());
        object.insert("published_at".into(), self.published_at.into());
        if let Some(title) = &self.title {
            object.insert("title".into(), title.clone().into());
        }
        if let Some(url) = &self.url {
            object.insert("url".into(), url.clone().into());
        }
        Value::Object(object)
    }

    fn article(&self) -> Article {
        Article {
            id: self.id.clone(),
            title: self.title.clone(),
            content: self.content.clone(),
            source: Some(self.source.clone()),
            url: self.url.clone(),
            published_at: Some(self.published_at),
        }
    }
}

type Batch = Vec<Doc>;

/// About `documents` documents in batches of 20 to 50, every one dated later than the one
/// before (a re-sent document keeps its date). About 3% are earlier documents sent again
/// unchanged and 3% replace an earlier document's text; both only ever name ids of earlier
/// batches, and each batch starts with a new id, so whether a batch was committed can be seen.
fn stream(seed: u64, documents: usize) -> Vec<Batch> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut stories: Vec<Story> = Vec::new();
    let mut latest: HashMap<String, Doc> = HashMap::new();
    let mut earlier: Vec<String> = Vec::new();
    let mut time = 1_700_000_000i64;
    let mut batches = Vec::new();
    let mut made = 0;
    while made < documents {
        let size = rng.random_range(20..=50).min(documents - made);
        let mut batch: Batch = Vec::with_capacity(size);
        let mut in_batch = HashSet::new();
        for position in 0..size {
            time += rng.random_range(1..1500);
            let roll = rng.random_range(0..100);
            let old = (!earlier.is_empty() && position > 0)
                .then(|| earlier[rng.random_range(0..earlier.len())].clone())
                .filter(|id| !in_batch.contains(id));
            let doc = match old {
                Some(id) if roll < 3 => Doc {
                    resend: true,
                    ..latest[&id].clone()
                },
                Some(id) if roll < 6 => {
                    let story = Story::new(&mut rng);
                    Doc {
                        id,
                        title: Some(format!("更正：{}", story.title)),
                        content: story.original(),
                        source: SOURCES[rng.random_range(0..SOURCES.len())].to_owned(),
                        url: None,
                        published_at: time,
                        resend: false,
                    }
                }
                _ => {
                    let id = format!("n{seed}-{made:05}-{position}");
                    let (story, content) = if stories.is_empty() || rng.random_bool(0.35) {
                        stories.push(Story::new(&mut rng));
                        (stories.len() - 1, stories[stories.len() - 1].original())
                    } else {
                        let story =
                            rng.random_range(stories.len().saturating_sub(25)..stories.len());
                        (story, stories[story].repost(&mut rng))
                    };
                    let title = rng.random_bool(0.8).then(|| stories[story].title.clone());
                    let url = rng
                        .random_bool(0.5)
                        .then(|| format!("https://news.example.cn/{id}.html"));
                    Doc {
                        id,
                        title,
                        content,
                        source: SOURCES[rng.random_range(0..SOURCES.len())].to_owned(),
                        url,
                        published_at: time,
                        resend: false,
                    }
                }
            };
            in_batch.insert(doc.id.clone());
            batch.push(doc);
        }
        made += size;
        for doc in &batch {
            if latest.insert(doc.id.clone(), doc.clone()).is_none() {
                earlier.push(doc.id.clone());
            }
        }
        batches.push(batch);
    }
    batches
}

/// The ids of `batch` that no earlier batch used.
fn new_ids(batches: &[Batch], batch: usize) -> Vec<&str> {
    let seen: HashSet<&str> = batches[..batch]
        .iter()
        .flatten()
        .map(|doc| doc.id.as_str())
        .collect();
    batches[batch]
        .iter()
        .map(|doc| doc.id.as_str())
        .filter(|id| !seen.contains(id))
        .collect()
}

// ---- the uninterrupted run ------------------------------------------------------------------

const CONFIG: &str =
    "[index]\nwriter_memory_mb = 15\nwriter_threads = 1\n\n[server]\ncommit_delay = \"20ms\"\n";

/// Every decision of an uninterrupted run, batch by batch.
struct Baseline {
    decisions: Vec<Vec<Decision>>,
    /// The root of each live document at the end.
    roots: HashMap<String, Fingerprint>,
    documents: u64,
    clusters: u64,
    tombstones: u64,
}

impl Baseline {
    /// Checks that the stream exercises what the tests are about: clusters, re-sends and
    /// replacements.
    fn assert_varied(&self, batches: &[Batch]) {
        let decisions = self.decisions.iter().flatten();
        let duplicates = decisions.filter(|decision| decision.duplicate).count() as u64;
        assert!(duplicates * 4 > self.documents, "too few duplicates");
        assert!(self.clusters * 10 < self.documents * 8, "too few clusters");
        assert!(self.tombstones > 0, "no replacement");
        assert!(batches.iter().flatten().any(|doc| doc.resend), "no re-send");
    }
}

fn uninterrupted(batches: &[Batch]) -> Baseline {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::from_toml_str(CONFIG).unwrap();
    let mut index = DedupIndex::create(&dir.path().join("index"), config).unwrap();
    let mut decisions = Vec::with_capacity(batches.len());
    for batch in batches {
        let batch: Vec<Decision> = batch
            .iter()
            .map(|doc| index.add_article(doc.article()).unwrap())
            .collect();
        index.commit().unwrap();
        decisions.push(batch);
    }
    let searcher = index.searcher();
    let ids: HashSet<&str> = batches
        .iter()
        .flatten()
        .map(|doc| doc.id.as_str())
        .collect();
    let roots = ids
        .into_iter()
        .map(|id| {
            let view = searcher.document(id).unwrap().expect("indexed");
            (id.to_owned(), view.root)
        })
        .collect();
    let stats = searcher.stats().unwrap();
    Baseline {
        decisions,
        roots,
        documents: stats.documents,
        clusters: stats.clusters,
        tombstones: stats.tombstones,
    }
}

/// What the index must hold after `batches[..upto]`: each id's last version and root.
fn live_after<'a>(
    batches: &'a [Batch],
    baseline: &Baseline,
    upto: usize,
) -> HashMap<&'a str, (&'a Doc, Fingerprint)> {
    let mut live = HashMap::new();
    for (batch, decisions) in batches[..upto].iter().zip(&baseline.decisions) {
        for (doc, decision) in batch.iter().zip(decisions) {
            if !doc.resend {
                live.insert(doc.id.as_str(), (doc, decision.root));
            }
        }
    }
    live
}

// ---- the server -----------------------------------------------------------------------------

/// A client of one server process.
#[derive(Clone)]
struct Client {
    agent: ureq::Agent,
    base: String,
}

/// One document's answer to a POST.
#[derive(Debug, Deserialize)]
struct Ack {
    id: String,
    simhash: Fingerprint,
    root: Fingerprint,
    duplicate: bool,
}

#[derive(Debug, Deserialize)]
struct IngestAnswer {
    indexed: usize,
    unchanged: usize,
    failed: usize,
    results: Vec<Ack>,
}

/// What became of a POST.
#[derive(Debug)]
enum Posted {
    /// Answered 200: committed.
    Acked(Vec<Ack>),
    /// No answer (the connection failed): may or may not have been committed.
    Lost(String),
}

/// A document as `GET /v1/documents/{id}` shows it.
#[derive(Debug, Deserialize)]
struct Stored {
    title: Option<String>,
    source: Option<String>,
    published_at: Option<i64>,
    root: Fingerprint,
}

impl Client {
    fn post(&self, batch: &[Doc]) -> Posted {
        let body = Value::Array(batch.iter().map(Doc::json).collect()).to_string();
        let response = self
            .agent
            .post(format!("{}/v1/documents", self.base))
            .header("content-type", "application/json")
            .send(body.as_str());
        let mut response = match response {
            Ok(response) => response,
            Err(error) => return Posted::Lost(error.to_string()),
        };
        let status = response.status().as_u16();
        let text = match response.body_mut().read_to_string() {
            Ok(text) => text,
            Err(error) => return Posted::Lost(error.to_string()),
        };
        assert_eq!(status, 200, "POST /v1/documents answered {status}: {text}");
        let answer: IngestAnswer = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (answer.indexed + answer.unchanged, answer.failed),
            (batch.len(), 0),
            "{text}"
        );
        Posted::Acked(answer.results)
    }

    fn get(&self, path: &str) -> (u16, String) {
        let mut response = self
            .agent
            .get(format!("{}{path}", self.base))
            .call()
            .unwrap_or_else(|error| panic!("GET {path}: {error}"));
        let text = response.body_mut().read_to_string().unwrap();
        (response.status().as_u16(), text)
    }

    fn document(&self, id: &str) -> Option<Stored> {
        #[derive(Deserialize)]
        struct Page {
            document: Stored,
        }
        match self.get(&format!("/v1/documents/{id}")) {
            (200, text) => Some(serde_json::from_str::<Page>(&text).unwrap().document),
            (404, _) => None,
            (status, text) => panic!("GET /v1/documents/{id} answered {status}: {text}"),
        }
    }

    fn stats(&self) -> Value {
        let (status, text) = self.get("/v1/stats");
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Documents the writer has placed (answered or not), from `/metrics`.
    fn documents_placed(&self) -> u64 {
        let (status, text) = self.get("/metrics");
        assert_eq!(status, 200, "{text}");
        text.lines()
            .filter(|line| {
                ["new_story", "duplicate", "unchanged"]
                    .iter()
                    .any(|outcome| {
                        line.starts_with(&format!(
                            "tantivy_dedup_documents_total{{outcome=\"{outcome}\"}}"
                        ))
                    })
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

/// A running `tantivy-dedup serve`, killed when dropped (so that a failing test leaves no
/// process behind).
struct Server {
    child: Arc<Mutex<Child>>,
    pid: u32,
    client: Client,
}

fn lock(child: &Mutex<Child>) -> MutexGuard<'_, Child> {
    child
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Server {
    /// Starts the server on `dir/index` with `dir/config.toml`; waits until it listens.
    fn start(dir: &Path, flags: &[&str]) -> Server {
        let config = dir.join("config.toml");
        if !config.exists() {
            std::fs::write(&config, CONFIG).unwrap();
        }
        let log = next_log(dir);
        let (child, base) = spawn_listening(
            Command::new(env!("CARGO_BIN_EXE_tantivy-dedup"))
                .arg("serve")
                .arg("--index")
                .arg(dir.join("index"))
                .args(["--addr", "127.0.0.1:0", "--config"])
                .arg(&config)
                .args(flags)
                .stdin(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
            Some(&log),
        );
        let pid = child.id();
        Server {
            child: Arc::new(Mutex::new(child)),
            pid,
            client: Client {
                agent: ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(60)))
                    .build()
                    .into(),
                base,
            },
        }
    }

    /// SIGKILL after `delay`, from another thread.
    fn kill_after(&self, delay: Duration) -> JoinHandle<()> {
        let child = self.child.clone();
        thread::spawn(move || {
            thread::sleep(delay);
            let _ = lock(&child).kill();
        })
    }

    /// Waits for the process to exit (at most 30 s).
    fn wait(&self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = lock(&self.child).try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not stop");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM: a graceful stop.
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then the exit status.
    fn stop(self) -> ExitStatus {
        self.terminate();
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A fresh log file for the next server started on `dir`.
fn next_log(dir: &Path) -> PathBuf {
    (0..)
        .map(|n| dir.join(format!("server-{n}.log")))
        .find(|path| !path.exists())
        .unwrap()
}

// ---- checks ---------------------------------------------------------------------------------

/// The server's answers for batch `number` equal the uninterrupted run's decisions.
fn assert_decisions(acks: &[Ack], baseline: &Baseline, number: usize) {
    let expected = &baseline.decisions[number];
    assert_eq!(acks.len(), expected.len(), "batch {number}");
    for (ack, decision) in acks.iter().zip(expected) {
        assert_eq!(
            (&ack.id, ack.simhash, ack.root, ack.duplicate),
            (
                &decision.id,
                decision.simhash,
                decision.root,
                decision.duplicate
            ),
            "batch {number}: the answer differs from the uninterrupted run's decision"
        );
    }
}

/// Posts `batches[from..to]` in order until one is not answered; checks every answer against
/// the uninterrupted run. Returns the first batch not acknowledged (`to` if all were).
fn post_batches(
    client: &Client,
    batches: &[Batch],
    baseline: &Baseline,
    from: usize,
    to: usize,
) -> usize {
    for (number, batch) in batches.iter().enumerate().take(to).skip(from) {
        match client.post(batch) {
            Posted::Acked(acks) => assert_decisions(&acks, baseline, number),
            Posted::Lost(error) => {
                eprintln!("batch {number} lost: {error}");
                return number;
            }
        }
    }
    to
}

/// The server holds exactly what `batches[..upto]` leaves: every id with its last version and
/// the root it was acknowledged with, each once, and no cluster more or less.
fn assert_holds(client: &Client, batches: &[Batch], baseline: &Baseline, upto: usize) {
    let live = live_after(batches, baseline, upto);
    for (id, (doc, root)) in &live {
        let stored = client
            .document(id)
            .unwrap_or_else(|| panic!("{id}, acknowledged, is missing"));
        assert_eq!(stored.root, *root, "{id}: root");
        assert_eq!(
            (&stored.title, stored.source.as_deref(), stored.published_at),
            (
                &doc.title,
                Some(doc.source.as_str()),
                Some(doc.published_at)
            ),
            "{id}: not its last version"
        );
    }
    let stats = client.stats();
    let roots: HashSet<Fingerprint> = live.values().map(|(_, root)| *root).collect();
    assert_eq!(
        stats["index"]["documents"].as_u64(),
        Some(live.len() as u64),
        "live documents (an id indexed twice, or one too many or too few): {stats}"
    );
    assert_eq!(
        stats["index"]["clusters"].as_u64(),
        Some(roots.len() as u64),
        "{stats}"
    );
    assert_eq!(stats["recovery"]["mismatched_roots"].as_u64(), Some(0));
    // The same counts by another path: a list page of everything.
    let (status, text) = client.get("/v1/search?q=&limit=1");
    assert_eq!(status, 200, "{text}");
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (page["total_hits"].as_u64(), page["total_clusters"].as_u64()),
        (Some(live.len() as u64), Some(roots.len() as u64)),
        "search over everything"
    );
}

/// After a crash during batch `lost` (the first one not acknowledged): the batch is there
/// whole or not at all, and the server holds exactly the acknowledged batches and it. Returns
/// whether it was committed.
fn check_after_crash(client: &Client, batches: &[Batch], baseline: &Baseline, lost: usize) -> bool {
    let committed = if lost < batches.len() {
        let new = new_ids(batches, lost);
        let present = new
            .iter()
            .filter(|id| client.document(id).is_some())
            .count();
        assert!(
            present == 0 || present == new.len(),
            "batch {lost} is partly committed: {present} of its {} new ids",
            new.len()
        );
        present > 0
    } else {
        false
    };
    let upto = lost + usize::from(committed);
    if upto < batches.len() {
        let next = &batches[upto][0].id;
        assert!(client.document(next).is_none(), "{next} was never sent");
    }
    assert_holds(client, batches, baseline, upto);
    committed
}

/// Re-sends batch `number`, whose documents are all live unchanged: every answer is the
/// original decision, and the index does not change.
fn resend_unchanged(client: &Client, batches: &[Batch], baseline: &Baseline, number: usize) {
    let before = client.stats();
    match client.post(&batches[number]) {
        Posted::Acked(acks) => assert_decisions(&acks, baseline, number),
        Posted::Lost(error) => panic!("batch {number} sent again: {error}"),
    }
    let after = client.stats();
    for count in ["documents", "clusters", "tombstones"] {
        assert_eq!(
            after["index"][count], before["index"][count],
            "{count} after sending batch {number} again unchanged"
        );
    }
}

/// Every document's final root equals the uninterrupted run's, and so do the counts.
fn assert_final(client: &Client, baseline: &Baseline) {
    for (id, root) in &baseline.roots {
        let stored = client
            .document(id)
            .unwrap_or_else(|| panic!("{id} is missing"));
        assert_eq!(
            stored.root, *root,
            "{id}: root differs from the uninterrupted run"
        );
    }
    let stats = client.stats();
    assert_eq!(
        stats["index"]["documents"].as_u64(),
        Some(baseline.documents),
        "{stats}"
    );
    assert_eq!(
        stats["index"]["clusters"].as_u64(),
        Some(baseline.clusters),
        "{stats}"
    );
}

// ---- the tests ------------------------------------------------------------------------------

/// Streams `documents` documents, killing the server with SIGKILL during two POSTs.
fn kill_twice_during_ingest(seed: u64, documents: usize) {
    let batches = stream(seed, documents);
    let baseline = uninterrupted(&batches);
    baseline.assert_varied(&batches);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x6b696c6c);
    let n = batches.len();
    let crashes = [
        rng.random_range(2..n / 3),
        rng.random_range(n / 2..n * 3 / 4),
    ];
    let mut server = Server::start(dir.path(), &[]);
    let mut next = 0;
    for crash in crashes {
        let started = Instant::now();
        let from = next;
        next = post_batches(&server.client, &batches, &baseline, next, crash);
        assert_eq!(next, crash, "batch {next} lost before the kill");
        // Kill while a POST is in flight, at a random point of the time a POST takes: from
        // reading the request, through preparing, placing and committing, to answering (or,
        // if the delay outlasts that POST, during the next).
        let per_batch = started.elapsed() / (crash - from) as u32;
        let delay = per_batch.mul_f64(rng.random_range(0.0..1.2));
        let killer = server.kill_after(delay);
        next = post_batches(&server.client, &batches, &baseline, crash, n);
        killer.join().unwrap();
        assert!(!server.wait().success());
        drop(server);

        server = Server::start(dir.path(), &[]);
        let committed = check_after_crash(&server.client, &batches, &baseline, next);
        eprintln!(
            "seed {seed}: killed {} ms into batch {crash} (a POST takes {} ms); batch {next} \
             was the first unacknowledged, and was {}committed",
            delay.as_millis(),
            per_batch.as_millis(),
            if committed { "" } else { "not " }
        );
        // The client re-sends from its first unacknowledged batch (below): when that batch
        // was committed, its documents come again unchanged and must get their decisions
        // back. When it was not, re-send the last acknowledged batch as well (its answer
        // could have been lost on the way), which must change nothing either.
        if !committed && next > 0 {
            resend_unchanged(&server.client, &batches, &baseline, next - 1);
        }
    }
    let lost = post_batches(&server.client, &batches, &baseline, next, n);
    assert_eq!(lost, n, "batch {lost} was not answered");
    assert_final(&server.client, &baseline);
    assert!(server.stop().success());
}

#[test]
fn kill_9_during_ingest_loses_no_acknowledged_document() {
    kill_twice_during_ingest(1, 2000);
}

#[test]
fn kill_9_during_ingest_another_stream() {
    kill_twice_during_ingest(2, 1200);
}

#[test]
fn sigterm_commits_the_batch_waiting_for_its_commit() {
    let batches = stream(5, 40);
    let baseline = uninterrupted(&batches[..1]);
    let batch = batches[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--commit-delay", "5s"]);
    let client = server.client.clone();
    let posting = thread::spawn(move || client.post(&batch));

    // Wait until the writer has placed the batch: it now waits for its commit, for 5 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.client.documents_placed() < batches[0].len() as u64 {
        assert!(
            Instant::now() < deadline,
            "the batch never reached the writer"
        );
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        server.client.document(&batches[0][0].id).is_none(),
        "committed already: the test needs a longer commit delay"
    );
    server.terminate();
    let terminated = Instant::now();

    match posting.join().unwrap() {
        Posted::Acked(acks) => assert_decisions(&acks, &baseline, 0),
        Posted::Lost(error) => panic!("the POST in flight at SIGTERM was not answered: {error}"),
    }
    let status = server.wait();
    let stopped_after = terminated.elapsed();
    eprintln!(
        "answered and stopped {:.2} s after SIGTERM",
        stopped_after.as_secs_f64()
    );
    assert!(status.success(), "exit status after SIGTERM: {status}");
    // The stopping server commits at once instead of waiting out the 5 s delay.
    assert!(
        stopped_after < Duration::from_secs(4),
        "the commit waited for the delay: stopped {stopped_after:?} after SIGTERM"
    );
    drop(server);

    let server = Server::start(dir.path(), &[]);
    assert_holds(&server.client, &batches, &baseline, 1);
    assert!(server.stop().success());
}

#[test]
fn restart_midway_changes_no_later_decision() {
    let batches = stream(3, 1200);
    let baseline = uninterrupted(&batches);
    baseline.assert_varied(&batches);
    let dir = tempfile::tempdir().unwrap();
    let half = batches.len() / 2;

    let server = Server::start(dir.path(), &[]);
    assert_eq!(
        post_batches(&server.client, &batches, &baseline, 0, half),
        half
    );
    assert!(server.stop().success());

    let server = Server::start(dir.path(), &[]);
    // A clean stop saved the forest's checkpoint of every insert so far (live documents and
    // tombstones): the restart loads it and replays nothing.
    let inserts = batches[..half]
        .iter()
        .flatten()
        .filter(|doc| !doc.resend)
        .count();
    let stats = server.client.stats();
    assert_eq!(
        stats["recovery"]["checkpoint_sequence"].as_u64(),
        Some(inserts as u64),
        "{stats}"
    );
    assert_eq!(stats["recovery"]["replayed"].as_u64(), Some(0), "{stats}");
    assert_holds(&server.client, &batches, &baseline, half);

    let n = batches.len();
    assert_eq!(
        post_batches(&server.client, &batches, &baseline, half, n),
        n
    );
    assert_final(&server.client, &baseline);
    assert!(server.stop().success());
}
