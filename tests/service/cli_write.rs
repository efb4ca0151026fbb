//! `near-duplicates` and `delete` on an index, as separate processes: a check before
//! publishing finds the story's indexed copies (the text given as an argument or on standard
//! input), and a delete removes documents by id, commits, and names the ids it did not find.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::cli_index::{json, run, sample, stderr, stdout};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// The sample's `run-1` body: its story has three indexed documents (run-1, run-2, run-3).
fn marathon_story() -> String {
    let first_line = std::fs::read_to_string(sample())
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let article: Value = serde_json::from_str(&first_line).unwrap();
    assert_eq!(article["id"], "run-1");
    article["content"].as_str().unwrap().to_owned()
}

fn ingested_sample(dir: &std::path::Path) -> String {
    let index = dir.join("news").to_str().unwrap().to_owned();
    let sample = sample();
    let ingested = run(&["ingest", "--index", &index, sample.to_str().unwrap()]);
    assert!(ingested.status.success(), "{}", stderr(&ingested));
    index
}

fn ids(answer: &Value) -> Vec<&str> {
    let mut ids: Vec<&str> = answer["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|near| near["document"]["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn near_duplicates_finds_the_indexed_copies_of_a_text() {
    let dir = tempfile::tempdir().unwrap();
    let index = ingested_sample(dir.path());
    let repost = format!("转发：{}（来源：某某网）", marathon_story());

    let answer = run(&["near-duplicates", "--index", &index, &repost, "--json"]);
    assert!(answer.status.success(), "{}", stderr(&answer));
    assert_eq!(ids(&json(&answer)), ["run-1", "run-2", "run-3"]);

    let text = run(&["near-duplicates", "--index", &index, &repost]);
    assert!(
        stdout(&text).contains("3 near-duplicates, nearest first:"),
        "{}",
        stdout(&text)
    );

    // The same from standard input.
    let mut child = Command::new(BIN)
        .args(["near-duplicates", "--index", &index, "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(repost.as_bytes())
        .unwrap();
    let piped = child.wait_with_output().unwrap();
    assert_eq!(ids(&json(&piped)), ["run-1", "run-2", "run-3"]);

    let unrelated = run(&[
        "near-duplicates",
        "--index",
        &index,
        "气象台今天发布暴雨预警，预计未来三天南方地区将有强降雨过程，请注意防范。",
    ]);
    assert!(
        stdout(&unrelated).contains("no near-duplicate in the index"),
        "{}",
        stdout(&unrelated)
    );

    let empty = run(&["near-duplicates", "--index", &index, ""]);
    assert!(!empty.status.success());
    assert!(
        stderr(&empty).contains("must not be empty"),
        "{}",
        stderr(&empty)
    );
}

#[test]
fn delete_removes_documents_by_id_and_names_the_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let index = ingested_sample(dir.path());

    let deleted = run(&["delete", "--index", &index, "run-2", "no-such-id", "--json"]);
    assert_eq!(deleted.status.code(), Some(1), "an id was not found");
    let outcome = json(&deleted);
    assert_eq!(outcome["deleted"], serde_json::json!(["run-2"]));
    assert_eq!(outcome["not_found"], serde_json::json!(["no-such-id"]));

    let stats = json(&run(&["stats", "--index", &index, "--json"]));
    assert_eq!(stats["documents"], 5);
    let similar = json(&run(&["similar", "--index", &index, "run-1", "--json"]));
    let others: Vec<&str> = similar["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|document| document["id"].as_str().unwrap())
        .collect();
    assert_eq!(others, ["run-3"], "the cluster keeps its other documents");

    let nothing = run(&[
        "delete",
        "--index",
        &dir.path().join("none").to_string_lossy(),
        "x",
    ]);
    assert!(!nothing.status.success());
    assert!(
        stderr(&nothing).contains("no such directory"),
        "{}",
        stderr(&nothing)
    );
    assert!(!dir.path().join("none").exists(), "no index was created");
}
