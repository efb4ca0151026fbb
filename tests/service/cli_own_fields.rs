//! Fields of one's own end to end: the real binary ingesting a JSON array file with a UTF-8
//! byte-order mark by a settings file with `[fields.NAME]` and a `from` key; the warning for a
//! file in which no document had the time field; the fields shown over HTTP, and the same
//! warning in a POST's answer.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::cli_index::{json, run, stderr};
use crate::serve_process::spawn_listening;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

const SETTINGS: &str = r#"
[fields.published_at]
from = "date"

[fields.platform]
type = "facet"

[fields.likes]
type = "u64"

[fields.keywords]
type = "string"
"#;

/// `serve` on the index in `dir`, on a free loopback port.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(index: &Path) -> Server {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--index"])
            .arg(index)
            .env_remove("TANTIVY_DEDUP_WRITE_KEY")
            .env_remove("TANTIVY_DEDUP_READ_KEY")
            .stderr(Stdio::null());
        let (child, url) = spawn_listening(&mut command, None);
        Server { child, url }
    }

    fn get(&self, path: &str) -> Value {
        let mut answer = ureq::get(format!("{}{path}", self.url)).call().unwrap();
        serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap()
    }

    fn post(&self, documents: &Value) -> Value {
        let mut answer = ureq::post(format!("{}/v1/documents", self.url))
            .header("content-type", "application/json")
            .send(documents.to_string())
            .unwrap();
        serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_json_array_file_with_own_fields_is_ingested_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("fields.toml");
    std::fs::write(&settings, SETTINGS).unwrap();
    let documents = json!([
        {"id": "w1", "content": "国家统计局今天发布数据，前三季度国内生产总值同比增长百分之五点二。",
         "date": "2024-05-01T08:00:00+08:00", "platform": "/weibo/repost", "likes": 12,
         "keywords": ["经济", "统计"]},
        {"id": "w2", "content": "东港市今年前十个月港口货物吞吐量达到一亿两千万吨。", "date": 1714600000,
         "likes": "many"},
        {"id": "w3", "content": "防汛物资储备充足，仓库管理规范有序。", "date": 1714700000, "platform": "weibo"}
    ]);
    let file = dir.path().join("batch.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(serde_json::to_vec_pretty(&documents).unwrap());
    std::fs::write(&file, bytes).unwrap();
    let index = dir.path().join("index");
    let output = run(&[
        "ingest",
        "--json",
        "--config",
        settings.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    let summary = json(&output);
    assert_eq!(
        (summary["documents"].as_u64(), summary["skipped"].as_u64()),
        (Some(1), Some(2))
    );
    let errors = stderr(&output);
    // Each bad element is named by its number, with the field.
    assert!(
        errors.contains(
            "batch.json:2: skipped: field `likes` must be an integer of 0 or more, got \"many\""
        ),
        "{errors}"
    );
    assert!(
        errors.contains("batch.json:3: skipped: field `platform` must be a path starting with `/`"),
        "{errors}"
    );
    assert!(
        !errors.contains("warning"),
        "every document had `date`: {errors}"
    );
    // Listed by an own field, each story with its value.
    let index_arg = index.to_str().unwrap();
    let listed = run(&["search", "--index", index_arg, "--sort", "likes:desc"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("     likes: 12\n"), "{listed}");
    let page = json(&run(&[
        "search",
        "--json",
        "--index",
        index_arg,
        "--sort",
        "likes:asc",
    ]));
    assert_eq!(page["clusters"][0]["sort_value"], 12, "{page}");

    let server = Server::start(&index);
    let detail = server.get("/v1/documents/w1");
    assert_eq!(
        detail["document"]["fields"],
        json!({"platform": "/weibo/repost", "likes": 12, "keywords": ["经济", "统计"]}),
        "{detail}"
    );
    assert_eq!(detail["document"]["published_at"], 1_714_521_600);

    // A POST in which no document has the time key gets a warning; the documents are indexed.
    let answer = server.post(&json!([
        {"id": "p1", "content": "沿海地区迎来强台风，多地启动应急响应。", "published_at": 1714800000, "likes": 3}
    ]));
    assert_eq!(answer["indexed"], 1, "{answer}");
    let warnings = answer["warnings"].as_array().unwrap();
    assert!(warnings[0].as_str().unwrap().contains("`date`"), "{answer}");
    assert_eq!(
        server.get("/v1/documents/p1")["document"]["fields"],
        json!({"likes": 3})
    );
    let dated = server
        .post(&json!({"id": "p2", "content": "今年粮食总产量再创新高。", "date": 1714800000}));
    assert!(dated.get("warnings").is_none(), "{dated}");
}

#[test]
fn a_file_without_the_time_field_gets_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("undated.jsonl");
    std::fs::write(
        &file,
        "\u{feff}{\"id\": \"u1\", \"content\": \"国务院常务会议今天召开，部署下一阶段工作。\", \"date\": \"2024-05-01\"}\n\
         {\"id\": \"u2\", \"content\": \"多地出台措施支持消费，汽车家电销量回升。\"}\n",
    )
    .unwrap();
    let index = dir.path().join("index");
    let output = run(&[
        "ingest",
        "--index",
        index.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains("undated.jsonl: warning: no document had the time field `published_at`")
            && errors.contains("each was dated by its arrival"),
        "{errors}"
    );
}
