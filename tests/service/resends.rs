//! Re-sends, replacements and interruptions, counted as what they are (issue 18, items 2, 3
//! and 7):
//!
//! - `ingest`'s summary counts an unchanged re-send as `unchanged` (not indexed, not a story
//!   started), a replacement as `replaced`, and its index totals equal what `stats` prints;
//! - `POST /v1/documents` marks an unchanged re-send `"unchanged": true`, counts it apart from
//!   `indexed`, and `/metrics` counts it under its own outcome, not as a new story again;
//! - Ctrl-C (SIGINT) or SIGTERM during `ingest` commits what was placed, says so, exits 130 and
//!   leaves only the committed segments' files; running the same command again goes on.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tantivy_dedup::config::{Config, IndexConfig, ServerConfig};
use tantivy_dedup::engine::DedupIndex;
use tantivy_dedup::server::Server;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// The sample articles by id: `run-1` and `grain-1` start two stories, `run-2` joins `run-1`'s.
fn sample(id: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/articles.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|article| article["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in the sample"))
}

/// A text unrelated to every sample story, long enough to be fingerprinted reliably.
const HARBOUR: &str = "东港市今年前十个月港口货物吞吐量达到一亿两千万吨，同比增长百分之六点八，\
集装箱吞吐量首次突破三百万标准箱。港务集团负责人介绍，新建的两个十万吨级泊位已经投入使用，\
铁水联运线路增加到十四条，通关时间比去年缩短了三分之一。下一步，东港将加快建设冷链物流园区，\
吸引更多航运企业设立区域总部，力争明年吞吐量再上新台阶。";

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", text(&output.stdout)))
}

fn stats(index: &str) -> Value {
    let output = run(&["stats", "--index", index, "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    json_of(&output)
}

// ---- the ingest summary -----------------------------------------------------------------------

/// A file with the same article twice and a replacement: the summary counts the second copy as
/// unchanged and the replacement as such, and its index totals are `stats`'s. The replaced
/// article was alone in its story, so the index has one cluster fewer than the stories
/// started, and the summary says why.
#[test]
fn ingest_counts_an_unchanged_line_and_a_replacement_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("articles.jsonl");
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();
    let mut replacement = sample("grain-1");
    replacement["content"] = json!(HARBOUR);
    let lines = [
        sample("run-1"),
        sample("run-1"),   // the same article again: unchanged
        sample("grain-1"), // a story of its own
        sample("run-2"),   // joins run-1's story
        replacement,       // grain-1 with another text: replaces it, and starts a story
    ];
    let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&input, body).unwrap();
    let input = input.to_str().unwrap();

    let ingested = run(&["ingest", "--index", index, input, "--json"]);
    assert!(ingested.status.success(), "{}", text(&ingested.stderr));
    let summary = json_of(&ingested);
    let counts = |keys: &[&str]| -> Vec<u64> {
        keys.iter()
            .map(|key| summary[key].as_u64().unwrap_or_else(|| panic!("{key}")))
            .collect()
    };
    assert_eq!(
        counts(&[
            "documents",
            "duplicates",
            "clusters_started",
            "replaced",
            "unchanged"
        ]),
        [4, 1, 3, 1, 1],
        "{summary}"
    );
    let stats = stats(index);
    assert_eq!(
        (stats["documents"].as_u64(), stats["clusters"].as_u64()),
        (Some(3), Some(2)),
        "run-1 with run-2, and grain-1's replacement: {stats}"
    );
    assert_eq!(stats["tombstones"], 1, "the replaced grain-1");
    assert_eq!(summary["index_documents"], stats["documents"]);
    assert_eq!(summary["index_clusters"], stats["clusters"]);
    assert_eq!(summary["index_clusters_before"], 0);

    // The text summary of the same input in a fresh index says the same, and why the
    // clusters are one fewer than the stories started.
    let again = dir.path().join("again");
    let printed = run(&["ingest", "--index", again.to_str().unwrap(), input]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let out = text(&printed.stdout);
    for expected in [
        "indexed 4 documents",
        "1 joined an earlier story, 3 started one, 1 replaced an earlier version of their id",
        "1 unchanged",
        "the index holds 3 documents in 2 clusters (as `stats` counts them), 2 more than before",
        "1 fewer than the stories started",
        "the forest holds",
        "within the last 7d (the window)",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }

    // Ingesting the first three lines again changes nothing, and the summary says so.
    let first_three = dir.path().join("first-three.jsonl");
    let body: String = lines[..3].iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&first_three, body).unwrap();
    let first_three = first_three.to_str().unwrap();
    let resent = json_of(&run(&["ingest", "--index", index, first_three, "--json"]));
    assert_eq!(
        (
            resent["documents"].as_u64(),
            resent["unchanged"].as_u64(),
            resent["replaced"].as_u64()
        ),
        (Some(1), Some(2), Some(1)),
        "run-1 twice unchanged; grain-1's first text replaces the second again: {resent}"
    );
    let stats = self::stats(index);
    assert_eq!(resent["index_documents"], stats["documents"]);
    assert_eq!(resent["index_clusters"], stats["clusters"]);
}

/// The same text a month later, after its story left the window, resumes its story under its
/// id (a story id is only ever its own text's again: issue 33, item 1), so the index counts
/// one cluster and the summary counts the document as joining an earlier story; the forest's
/// fingerprints expired.
#[test]
fn a_story_resumed_after_the_window_keeps_its_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("articles.jsonl");
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();
    let mut later = sample("run-1");
    later["id"] = json!("run-1-again");
    later["published_at"] = json!("2024-05-21T09:00:00+08:00");
    std::fs::write(&input, format!("{}\n{later}\n", sample("run-1"))).unwrap();

    let printed = run(&["ingest", "--index", index, input.to_str().unwrap()]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let out = text(&printed.stdout);
    for expected in [
        "indexed 2 documents",
        "1 joined an earlier story, 1 started one",
        "the index holds 2 documents in 1 cluster (as `stats` counts them), 1 more than before",
        "the forest holds 1 fingerprint in 1 cluster seen within the last 7d (the window)",
        "; 1 older fingerprint expired from it, and their documents stay searchable",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }
    assert!(!out.contains("than the stories started"), "{out}");
    let stats = stats(index);
    assert_eq!(
        (stats["documents"].as_u64(), stats["clusters"].as_u64()),
        (Some(2), Some(1))
    );
}

// ---- over HTTP --------------------------------------------------------------------------------

/// A server over a fresh index in `dir`, on a runtime of its own; stopped when `stop` is sent.
struct TestServer {
    base: String,
    agent: ureq::Agent,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(dir: &Path) -> Self {
        let config = Config {
            index: IndexConfig {
                writer_threads: Some(1),
                writer_memory_mb: 15,
                ..IndexConfig::default()
            },
            server: ServerConfig {
                commit_delay: Duration::from_millis(20),
                ..ServerConfig::default()
            },
            ..Config::default()
        };
        let index = DedupIndex::create(dir, config.clone()).unwrap();
        let server = Server::start(index, config.server).unwrap();
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                address_tx.send(listener.local_addr().unwrap()).unwrap();
                server
                    .serve(listener, async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let address = address_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        TestServer {
            base: format!("http://{address}"),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn post(&self, articles: &[Value]) -> Value {
        let mut response = self
            .agent
            .post(format!("{}/v1/documents", self.base))
            .header("content-type", "application/json")
            .send(Value::Array(articles.to_vec()).to_string().as_str())
            .unwrap();
        let body = response.body_mut().read_to_string().unwrap();
        assert_eq!(response.status().as_u16(), 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// `tantivy_dedup_documents_total` by outcome.
    fn documents_by_outcome(&self) -> Vec<(String, u64)> {
        let mut response = self
            .agent
            .get(format!("{}/metrics", self.base))
            .call()
            .unwrap();
        let body = response.body_mut().read_to_string().unwrap();
        let mut outcomes: Vec<(String, u64)> = body
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("tantivy_dedup_documents_total{outcome=\"")?;
                let (outcome, value) = rest.split_once("\"} ")?;
                Some((outcome.to_owned(), value.parse().ok()?))
            })
            .collect();
        outcomes.sort();
        outcomes
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn outcomes(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs
        .iter()
        .map(|(outcome, count)| (outcome.to_string(), *count))
        .collect()
}

/// Re-posting indexed documents answers `"unchanged": true` with their decisions, counts them
/// apart from `indexed`, and adds them to `/metrics` as `unchanged`, not as new stories or
/// duplicates again; a changed article under an indexed id is indexed again.
#[test]
fn a_reposted_batch_is_unchanged_in_the_answer_and_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let batch = [sample("run-1"), sample("run-2"), sample("grain-1")];

    let first = server.post(&batch);
    assert_eq!(
        (&first["indexed"], &first["unchanged"]),
        (&json!(3), &json!(0))
    );
    let results = first["results"].as_array().unwrap();
    assert!(
        results.iter().all(|result| result["unchanged"] == false),
        "{first}"
    );

    let again = server.post(&batch);
    assert_eq!(
        (&again["indexed"], &again["unchanged"], &again["failed"]),
        (&json!(0), &json!(3), &json!(0)),
        "{again}"
    );
    for (result, earlier) in again["results"].as_array().unwrap().iter().zip(results) {
        assert_eq!(result["unchanged"], true, "{again}");
        for key in ["id", "simhash", "root", "duplicate", "cluster_size"] {
            assert_eq!(result[key], earlier[key], "{key}: the first decision again");
        }
    }
    assert_eq!(
        server.documents_by_outcome(),
        outcomes(&[
            ("duplicate", 1),
            ("new_story", 2),
            ("rejected", 0),
            ("unchanged", 3)
        ])
    );

    let mut changed = sample("grain-1");
    changed["content"] = json!(HARBOUR);
    let replaced = server.post(&[changed]);
    assert_eq!(
        (&replaced["indexed"], &replaced["unchanged"]),
        (&json!(1), &json!(0)),
        "{replaced}"
    );
    assert_eq!(replaced["results"][0]["unchanged"], false);
    assert_eq!(
        server.documents_by_outcome(),
        outcomes(&[
            ("duplicate", 1),
            ("new_story", 3),
            ("rejected", 0),
            ("unchanged", 3)
        ])
    );
}

// ---- interrupted ingest -----------------------------------------------------------------------

/// Short generated articles, each its own story, one JSON line each.
fn generated(count: usize) -> String {
    const PLACES: [&str; 8] = [
        "东港", "南川", "西岭", "北湾", "青石", "白沙", "金桥", "云台",
    ];
    const THINGS: [&str; 8] = [
        "新建学校",
        "修缮桥梁",
        "开通公交",
        "举办展览",
        "发放补贴",
        "整治河道",
        "建成公园",
        "开放图书馆",
    ];
    (0..count)
        .map(|i| {
            let place = PLACES[i % PLACES.len()];
            let thing = THINGS[(i / PLACES.len()) % THINGS.len()];
            let content = format!(
                "{place}第{i}号通报：当地今天{thing}，共有{}户居民受益，第{}批项目同步推进，编号{i}。",
                i % 977 + 3,
                i % 41 + 1
            );
            format!(
                "{}\n",
                json!({"id": format!("gen-{i}"), "content": content, "published_at": 1_700_000_000 + i as i64})
            )
        })
        .collect()
}

/// `ingest` with SIGINT at its default disposition, or ignored when `ignore_interrupt`, as a
/// shell without job control starts a command in the background. (A test process started that
/// way would otherwise pass its own ignored SIGINT on.)
fn ingest_command(ignore_interrupt: bool) -> Command {
    let mut command = Command::new(BIN);
    let disposition = if ignore_interrupt {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    };
    // SAFETY: signal() is async-signal-safe, so it may run between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGINT, disposition);
            Ok(())
        });
    }
    command
}

/// Sends `signal` (`INT` or `TERM`) to a child process of this test.
fn send_signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} failed");
}

/// The number in `message` right after `before` (such as "committed the 4097 documents").
fn number_after(message: &str, before: &str) -> u64 {
    let at = message
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} not in {message}"));
    message[at + before.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {before:?} in {message}"))
}

/// Every file of the index directory belongs to a segment of its last commit (or is one of the
/// index's own files), and `check` finds the index sound.
fn assert_only_committed_files(index: &Path) {
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(index.join("meta.json")).unwrap()).unwrap();
    let segments: Vec<String> = meta["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|segment| segment["segment_id"].as_str().unwrap().replace('-', ""))
        .collect();
    for entry in std::fs::read_dir(index).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let own = [
            "meta.json",
            ".managed.json",
            ".tantivy-meta.lock",
            ".tantivy-writer.lock",
            "tantivy-dedup.toml",
            "forest",
        ];
        let segment = name.split('.').next().unwrap_or_default();
        assert!(
            own.contains(&name.as_str()) || segments.iter().any(|id| id == segment),
            "{name} belongs to no committed segment of {segments:?}"
        );
    }
    let checked = run(&["check", "--index", index.to_str().unwrap(), "--json"]);
    assert!(checked.status.success(), "{}", text(&checked.stdout));
    assert_eq!(json_of(&checked)["damaged"], json!([]));
}

/// Ctrl-C in the middle of a large file (with the default `--commit-every`, so nothing was
/// committed before it): the documents placed are committed, the message says how many and
/// where it stopped, the exit status is 130, and no uncommitted segment file is left behind.
#[test]
fn ctrl_c_during_ingest_commits_what_was_placed() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.jsonl");
    let total = 200_000;
    std::fs::write(&input, generated(total)).unwrap();
    let index = dir.path().join("news");
    // The signal must come after the first document is placed, and how long the dictionary and
    // the first batch take depends on the machine: a signal that comes too early (the index is
    // left as it was, which is right too) is tried again later in a fresh directory.
    let mut waits = [1_500, 5_000, 15_000].into_iter().peekable();
    let (output, message) = loop {
        let wait = waits.next().unwrap();
        let _ = std::fs::remove_dir_all(&index);
        let child = ingest_command(false)
            .args(["ingest", "--index", index.to_str().unwrap()])
            .arg(&input)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The index exists once it is opened; ingesting the whole file takes far longer.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !index.join("meta.json").exists() {
            assert!(Instant::now() < deadline, "the index was never created");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(wait));
        send_signal(&child, "INT");
        let output = child.wait_with_output().unwrap();
        let message = text(&output.stderr);
        if message.contains("no document was placed before it") && waits.peek().is_some() {
            assert_eq!(output.status.code(), Some(130), "{message}");
            continue;
        }
        break (output, message);
    };
    assert_eq!(output.status.code(), Some(130), "{message}");
    assert!(
        message.contains("ingest: interrupted at line "),
        "{message}"
    );
    assert!(
        message.contains("run the same command again to go on"),
        "{message}"
    );
    let committed = number_after(&message, "committed the ");
    assert!(
        committed > 0 && committed < total as u64,
        "{committed} documents: {message}"
    );
    assert_eq!(
        number_after(&message, "interrupted at line "),
        committed,
        "every line up to the one it stopped at was placed: {message}"
    );
    let index_arg = index.to_str().unwrap();
    assert_eq!(stats(index_arg)["documents"], committed, "{message}");
    assert_only_committed_files(&index);
}

/// SIGTERM while `ingest` waits for standard input: it commits what it placed once the input
/// ends (here: the lines of the first full batch, and the one line it read after the signal),
/// and the same command run again recognises those as unchanged and indexes the rest. Started
/// with SIGINT ignored, it leaves it so: a SIGINT before the SIGTERM changes nothing (else the
/// SIGTERM would be a second signal, which quits at once).
#[test]
fn sigterm_during_ingest_from_stdin_commits_and_a_second_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index_arg = index.to_str().unwrap();
    // More than one batch (2,048 lines): the first is placed while the rest waits for more
    // input, which never comes before the signal.
    let total = 3_000;
    let input = generated(total);
    let ingest = [
        "ingest",
        "--index",
        index_arg,
        "--commit-every",
        "1000",
        "-",
    ];
    let mut child = ingest_command(true)
        .args(ingest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The periodic commits show when the first batch has been placed.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let output = run(&["stats", "--index", index_arg, "--json"]);
        if output.status.success() && json_of(&output)["documents"] == 2_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first batch was never placed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    send_signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(300));
    send_signal(&child, "TERM");
    // The writer of standard input goes away too, as a pipeline's does on Ctrl-C.
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let message = text(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{message}");
    assert!(
        message.contains(
            "ingest: interrupted at line 2049 of -: committed the 2049 documents placed up to there"
        ),
        "{message}"
    );
    assert_eq!(stats(index_arg)["documents"], 2_049);
    assert_only_committed_files(&index);

    let mut again = Command::new(BIN)
        .args(ingest)
        .arg("--json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = again.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let output = again.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary = json_of(&output);
    assert_eq!(
        (summary["unchanged"].as_u64(), summary["documents"].as_u64()),
        (Some(2_049), Some(total as u64 - 2_049)),
        "{summary}"
    );
    assert_eq!(stats(index_arg)["documents"], total);
}
