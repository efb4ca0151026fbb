//! `tantivy-dedup load` against a real `serve` on loopback: a gzip file sent in batches, its
//! bad line reported by number, the counts equal to what the server holds, a second load
//! counted as unchanged, the write key required when the server has one, the server's
//! warnings printed once each.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::serve_process::spawn_listening;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");
const KEY: &str = "a-write-key-for-the-load-test";

/// `serve` on a fresh index in `dir`, on a free loopback port, with a write key when given.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(dir: &Path, key: Option<&str>) -> Server {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--index"])
            .arg(dir.join("index"))
            .env_remove("TANTIVY_DEDUP_WRITE_KEY")
            .env_remove("TANTIVY_DEDUP_READ_KEY")
            .stderr(Stdio::null());
        if let Some(key) = key {
            command.env("TANTIVY_DEDUP_WRITE_KEY", key);
        }
        let (child, url) = spawn_listening(&mut command, None);
        Server { child, url }
    }

    fn documents(&self) -> u64 {
        let mut answer = ureq::get(format!("{}/v1/stats", self.url)).call().unwrap();
        let stats: Value =
            serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap();
        stats["index"]["documents"].as_u64().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Six to nine sentences from a vocabulary of common characters: unrelated to any other.
fn story(rng: &mut SmallRng) -> String {
    let characters: Vec<char> =
        "国家发展改革委员会今日召开新闻发布会介绍经济运行情况记者从有关部门获悉\
        全省各地持续推进重点项目建设工业生产保持稳定增长消费市场回暖明显农业农村工作扎实推进"
            .chars()
            .collect();
    let mut text = String::new();
    for _ in 0..rng.random_range(6..10) {
        for _ in 0..rng.random_range(14..31) {
            text.push(characters[rng.random_range(0..characters.len())]);
        }
        text.push('。');
    }
    text
}

/// Ten stories, each with a copy under a header and a copy with a source line: 30 documents
/// with their time under `time_key`, then a line without `content` (line 31), gzip-compressed.
fn write_file(path: &Path, time_key: &str) {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut lines = Vec::new();
    for story_number in 0..10 {
        let text = story(&mut rng);
        for (copy, content) in [
            text.clone(),
            format!("【转载】{text}"),
            format!("{text}（来源：新华网）"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut line = json!({
                "id": format!("s{story_number}-{copy}"),
                "content": content,
            });
            line[time_key] = json!(1_750_000_000 + 60 * lines.len() as i64);
            lines.push(line);
        }
    }
    lines.push(json!({"id": "no-content"}));
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for line in lines {
        writeln!(encoder, "{line}").unwrap();
    }
    std::fs::write(path, encoder.finish().unwrap()).unwrap();
}

fn load(url: &str, file: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["load", "--url", url, "--batch", "7"])
        .args(extra)
        .arg(file)
        .env_remove("TANTIVY_DEDUP_WRITE_KEY")
        .output()
        .unwrap()
}

#[test]
fn load_sends_a_file_in_batches_and_reports_each_refused_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("articles.jsonl.gz");
    write_file(&file, "published_at");
    let server = Server::start(dir.path(), None);

    let output = load(&server.url, &file, &["--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a refused line: {stderr}");
    assert!(
        stderr.contains(&format!("{}:31: refused", file.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("warning"),
        "every document had its time: {stderr}"
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["indexed"], 30, "{summary}");
    assert_eq!(summary["duplicates"], 20, "{summary}");
    assert_eq!(summary["refused"], 1, "{summary}");
    // 31 lines, 7 a request.
    assert_eq!(summary["requests"], 5, "{summary}");
    assert_eq!(server.documents(), 30);

    // Sent again (a load that was cut off and started over): nothing is new.
    let again = load(&server.url, &file, &["--json"]);
    let summary: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(summary["indexed"], 0, "{summary}");
    assert_eq!(summary["unchanged"], 30, "{summary}");
    assert_eq!(server.documents(), 30);
}

#[test]
fn load_needs_the_write_key_of_a_server_that_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("articles.jsonl.gz");
    write_file(&file, "published_at");
    let server = Server::start(dir.path(), Some(KEY));

    let refused = load(&server.url, &file, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("401"), "{stderr}");
    assert!(stderr.contains("--write-key-file"), "{stderr}");

    let key_file = dir.path().join("write.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let key_file = key_file.to_str().unwrap();
    let loaded = load(&server.url, &file, &["--write-key-file", key_file]);
    let stdout = String::from_utf8_lossy(&loaded.stdout);
    assert!(stdout.contains("load: 30 indexed by"), "{stdout}");
    assert_eq!(server.documents(), 30);
}

#[test]
fn load_says_when_no_server_answers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("articles.jsonl.gz");
    write_file(&file, "published_at");
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Sent again once, half a second later, then given up (the default waits about 30 s for
    // a server that restarts).
    let output = load(
        &format!("http://127.0.0.1:{port}"),
        &file,
        &["--retries", "1"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("is `tantivy-dedup serve` running there?"),
        "{stderr}"
    );
}

/// Issue 33, item 10: `load` dropped the warnings of the server's answers, so a file whose time
/// is under another key (`date`) was dated by its arrival without a word. Each warning is
/// printed once, naming the file, however many batches carried it.
#[test]
fn load_prints_each_warning_of_the_server_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dated-elsewhere.jsonl.gz");
    write_file(&file, "date");
    let server = Server::start(dir.path(), None);

    let output = load(&server.url, &file, &["--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Five batches, each of them without the time field.
    assert_eq!(summary["requests"], 5, "{summary}");
    assert_eq!(summary["indexed"], 30, "{summary}");
    let warning = format!(
        "{}: warning: no document had the time field `published_at`",
        file.display()
    );
    assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");
    assert!(stderr.contains("from = \"KEY\""), "{stderr}");
}
