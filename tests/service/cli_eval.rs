//! `tantivy-dedup eval` end to end: a labeled file whose scores are known by hand.

use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

const HARBOUR: &str = "东港市今年第三季度港口货物吞吐量达到一亿二千万吨，同比增长百分之六点八，其中集装箱吞吐量\
    首次突破四百万标准箱。港务局负责人介绍，新建的自动化码头投入使用后，单箱作业时间缩短了三分之一，\
    船舶平均在港停留时间下降到一天以内。下一步，东港将加快铁路专用线建设，推动海铁联运量继续增长。";
const SCHOOL: &str = "西山区新建的三所中小学本周正式启用，可新增学位四千八百个，缓解了城区入学压力。\
    区教育局表示，新学校全部按照省级标准配备了实验室、图书馆和体育场馆，并从优质学校选派骨干教师\
    担任管理人员。今年秋季学期，全区义务教育阶段学生人数预计比去年增加两千余人。";
const WEATHER: &str = "受冷空气影响，北部山区明天起将出现大风降温天气，最低气温可降至零下五度。气象部门提醒\
    广大市民及时添衣保暖，农业生产单位要做好大棚蔬菜的防风防冻工作，出行注意交通安全。";

#[test]
fn eval_scores_a_hand_checked_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labeled.jsonl");
    let rows = [
        ("h1", HARBOUR.to_owned(), "h", "base"),
        ("h2", format!("<p>{HARBOUR}</p>"), "h", "copy"),
        ("h3", HARBOUR.replace('，', ","), "h", "width"),
        ("s1", SCHOOL.to_owned(), "s", "base"),
        ("w1", WEATHER.to_owned(), "w", "base"),
    ];
    let text: Vec<String> = rows
        .iter()
        .map(|(id, content, cluster, kind)| {
            json!({"id": id, "content": content, "cluster": cluster, "kind": kind,
                   "published_at": "2025-03-01T08:00:00+08:00"})
            .to_string()
        })
        .collect();
    std::fs::write(&path, text.join("\n")).unwrap();

    let output = Command::new(BIN)
        .args(["eval", "--json", "--mode", "seed"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Three true pairs, all in cluster h (markup and width are normalised away), all found;
    // nothing else merged.
    assert_eq!(report["documents"], 5);
    assert_eq!(report["all"]["actual"], 3);
    assert_eq!(report["all"]["predicted"], 3);
    assert_eq!(report["all"]["f1"], 1.0);
    assert_eq!(report["recall_by_kind"]["width"], 1.0);
    // All five texts are under 200 characters, so every pair is a short pair.
    assert!(HARBOUR.chars().count() < 200);
    assert_eq!(report["short"]["actual"], 3);
    assert_eq!(report["long"]["actual"], 0);

    let table = Command::new(BIN).arg("eval").arg(&path).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("precision") && table.contains("copy"),
        "{table}"
    );
}

#[test]
fn eval_rejects_unlabeled_lines_with_their_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unlabeled.jsonl");
    std::fs::write(
        &path,
        format!("{}\n", json!({"id": "a", "content": HARBOUR})),
    )
    .unwrap();
    let output = Command::new(BIN).arg("eval").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains(":1:") && message.contains("cluster"),
        "{message}"
    );
}

/// The quality gate's floors (`.ci/run`): each one missed is named on standard error and the
/// exit status is 1; met, 0. The file's labels call three copies of one text three stories,
/// so the cluster they make is a merge of three, and none of its pairs is true.
#[test]
fn eval_gates_on_f1_precision_and_stories_per_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labeled.jsonl");
    let rows = [
        ("h1", HARBOUR.to_owned(), "h"),
        ("h2", format!("<p>{HARBOUR}</p>"), "s"),
        ("h3", HARBOUR.replace('，', ","), "w"),
        ("s1", SCHOOL.to_owned(), "s"),
    ];
    let text: Vec<String> = rows
        .iter()
        .map(|(id, content, cluster)| {
            json!({"id": id, "content": content, "cluster": cluster}).to_string()
        })
        .collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    let gate = |flags: &[&str]| {
        let output = Command::new(BIN)
            .arg("eval")
            .arg(&path)
            .args(flags)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // The three harbour copies are one predicted cluster holding three true ones: three
    // predicted pairs, none true.
    let (status, message) = gate(&["--max-stories-per-cluster", "2"]);
    assert_eq!(status, Some(1), "{message}");
    assert!(message.contains("holds 3 true clusters"), "{message}");
    let (status, message) = gate(&["--min-precision", "0.5", "--min-f1", "0.5"]);
    assert_eq!(status, Some(1), "{message}");
    assert!(
        message.contains("precision 0.0000") && message.contains("F1 0.0000"),
        "{message}"
    );
    let (status, message) = gate(&["--max-stories-per-cluster", "3", "--min-precision", "0"]);
    assert_eq!(status, Some(0), "{message}");
}
