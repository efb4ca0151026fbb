//! The index commands end to end (SPEC §4): `ingest` into a directory, then `search`, `similar`
//! and `stats` over it, as separate processes; and the mistakes a newcomer makes.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/articles.jsonl")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", stdout(output)))
}

#[test]
fn ingest_then_list_detail_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();
    let sample = sample();
    let sample = sample.to_str().unwrap();

    let ingested = run(&["ingest", "--index", index, sample, "--json"]);
    assert!(ingested.status.success(), "{}", stderr(&ingested));
    let summary = json(&ingested);
    assert_eq!(summary["documents"], 6);
    assert_eq!(
        summary["duplicates"], 3,
        "run-2 and run-3 join run-1, grain-2 joins grain-1"
    );

    // The list page: run-1's story (three articles) first when sorted by size.
    let listed = run(&[
        "search",
        "--index",
        index,
        "马拉松",
        "--sort",
        "similar_desc",
        "--json",
    ]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let page = json(&listed);
    assert_eq!(page["total_clusters"], 1);
    assert_eq!(page["clusters"][0]["cluster_size"], 3);
    let top = page["clusters"][0]["representative"]["id"]
        .as_str()
        .unwrap();
    assert!(["run-1", "run-2", "run-3"].contains(&top), "{top}");

    // The detail page of run-1 lists run-2 and run-3 (oldest first), and the text output
    // says so.
    let detail = run(&["similar", "--index", index, "run-1", "--json"]);
    assert!(detail.status.success(), "{}", stderr(&detail));
    let detail = json(&detail);
    assert_eq!(detail["total"], 2);
    assert_eq!(detail["documents"][0]["id"], "run-2");
    assert_eq!(detail["documents"][1]["id"], "run-3");
    let text = run(&["similar", "--index", index, "run-1"]);
    assert!(stdout(&text).contains("id run-3"), "{}", stdout(&text));

    let stats = json(&run(&["stats", "--index", index, "--json"]));
    assert_eq!(
        (stats["documents"].as_u64(), stats["clusters"].as_u64()),
        (Some(6), Some(3))
    );

    // Ingesting the same file again changes nothing: every article is identical to the
    // document with its id, so none is replaced (no tombstones) and the clusters stay.
    let again = run(&["ingest", "--index", index, sample]);
    assert!(again.status.success(), "{}", stderr(&again));
    let stats = json(&run(&["stats", "--index", index, "--json"]));
    assert_eq!(stats["documents"], 6);
    assert_eq!(stats["clusters"], 3);
    assert_eq!(stats["tombstones"], 0);

    // A page past the end is empty, and the text output says so.
    let past = run(&["search", "--index", index, "马拉松", "--offset", "100"]);
    assert!(past.status.success());
    assert!(
        stdout(&past).starts_with("no clusters on this page"),
        "{}",
        stdout(&past)
    );
}

#[test]
fn mistakes_get_clear_errors_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();

    let missing_input = run(&["ingest", "--index", index, "no-such-file.jsonl"]);
    assert_eq!(missing_input.status.code(), Some(2));
    assert!(
        stderr(&missing_input).contains("no such file"),
        "{}",
        stderr(&missing_input)
    );
    assert!(
        !Path::new(index).exists(),
        "no index is created for a mistyped input"
    );

    let no_index = run(&["search", "--index", index, "新闻"]);
    assert_eq!(no_index.status.code(), Some(2));
    assert!(
        stderr(&no_index).contains("no such directory"),
        "{}",
        stderr(&no_index)
    );

    let not_an_index = run(&["stats", "--index", dir.path().to_str().unwrap()]);
    assert!(
        stderr(&not_an_index).contains("not a tantivy-dedup index"),
        "{}",
        stderr(&not_an_index)
    );

    let sample = sample();
    assert!(
        run(&["ingest", "--index", index, sample.to_str().unwrap()])
            .status
            .success()
    );
    let unknown = run(&["similar", "--index", index, "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no document with id \"nope\""));
    for bad in [
        vec!["search", "--index", index, "新闻", "--sort", "bogus"],
        vec!["search", "--index", index, "新闻", "--limit", "5000"],
        vec!["search", "--index", index, "\"新闻"],
        vec!["search", "--index", index, "新闻", "--from", "yesterday"],
    ] {
        let output = run(&bad);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{bad:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("panicked"), "{bad:?}");
    }
}
