//! The `tantivy-dedup dedup` command end to end (docs/service.md: "Articles", "Command line",
//! "Bad input"): JSON Lines in, one decision
//! per valid line out, in input order; bad lines reported with their line numbers and skipped;
//! clear exit statuses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// Three invented stories of a few hundred characters each (above any short-text threshold).
const FLOOD: &str = "南川县遭遇入汛以来最强降雨，县防汛抗旱指挥部于昨日18时启动防汛二级应急响应。\
据县气象台监测，过去24小时全县平均降雨量达到126毫米，其中石门镇最大降雨量达到213毫米，\
境内清水河水位一度超过警戒水位1.3米。县里已紧急转移安置沿河低洼地带群众2300余人，\
组织抢险队员600多名对12处险工险段开展巡查加固。目前，受损的两条乡村公路正在抢修，\
部分村庄的供电和通信已经恢复。县防指提醒，未来三天仍有强降雨过程，请群众不要前往河道、\
山塘等危险区域，及时关注预警信息，服从转移安排。";

const LIBRARY: &str = "东平市图书馆新馆日前正式向公众开放。新馆位于市文化中心北侧，总建筑面积4.2万平方米，\
设计藏书量300万册，设有少儿阅览区、古籍修复展示区、数字体验区和24小时自助借还区。\
开馆首日，前来参观借阅的市民超过1.5万人次。馆长林秋实介绍，新馆全面推行读者证与市民卡合一，\
市民刷卡即可借书，借阅期限延长到60天，还可以在全市87个分馆和服务点通借通还。\
为方便上班族，新馆工作日开放时间延长至晚上9点，周末还将定期举办讲座、展览和亲子阅读活动。\
不少市民表示，新馆环境明亮舒适，希望以后能常来这里看书学习。";

const MARATHON: &str = "第八届北湾国际马拉松赛昨日鸣枪开跑，来自国内外的2.6万名跑者参加了全程、半程和健康跑三个项目的比赛。\
赛道沿北湾海滨大道延伸，途经渔港、湿地公园和老城区，被不少跑者称为“最美海岸线赛道”。\
最终，男子全程冠军以2小时11分08秒的成绩打破赛会纪录，女子全程冠军成绩为2小时27分45秒。\
组委会在沿途设置了22个补给站和18个医疗点，安排医护人员和志愿者共计4000余人。\
赛事期间，北湾市区酒店入住率接近九成，餐饮和文旅消费明显增长。";

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn line(value: Value) -> String {
    serde_json::to_string(&value).unwrap()
}

/// The good articles, in order, and how each should be decided.
struct Expect {
    id: &'static str,
    duplicate: bool,
    /// The id of the article whose root this one must share.
    same_root_as: Option<&'static str>,
}

/// An input with good and bad lines, as bytes (one line is not UTF-8). Line numbers are
/// 1-based; line 5 is blank and must still be counted.
fn mixed_input() -> (Vec<u8>, Vec<Expect>, Vec<(u64, &'static str)>) {
    let mut lines: Vec<Vec<u8>> = vec![
        // 1
        line(json!({"id": "flood-1", "title": "南川县启动防汛二级应急响应", "content": FLOOD,
                    "source": "南川日报", "published_at": "2024-06-20T19:00:00+08:00"}))
        .into_bytes(),
        // 2
        line(json!({"id": "library-1", "content": LIBRARY, "published_at": 1_718_900_000}))
            .into_bytes(),
        // 3: malformed JSON
        r#"{"id": "broken", "content": "南川县遭遇强降雨"#.as_bytes().to_vec(),
        // 4: a repost of line 1 with another title, as HTML (the text itself unchanged)
        line(json!({"id": "flood-2", "title": "强降雨来袭！南川县紧急转移群众",
                    "content": format!("<div class=\"article\"><p>{}</p><!-- 责任编辑：王芳 --></div>",
                                       FLOOD.replace("毫米", "&nbsp;毫米")),
                    "source": "某某新闻网", "published_at": "2024-06-20T21:30:00+08:00"}))
        .into_bytes(),
        // 5: blank
        Vec::new(),
        // 6: missing content
        line(json!({"id": "no-content", "title": "只有标题"})).into_bytes(),
        // 7: invalid UTF-8 inside a string
        [&b"{\"id\": \"latin1\", \"content\": \"caf"[..], &[0xe9, 0xff], b"\"}"].concat(),
        // 8: an unparseable published_at
        line(json!({"id": "bad-date", "content": MARATHON, "published_at": "上周五"})).into_bytes(),
        // 9
        line(json!({"id": "marathon-1", "content": MARATHON, "published_at": "2024-06-21T08:00:00Z"}))
            .into_bytes(),
        // 10: the first story again, verbatim, with an integer id and a full-width copy
        line(json!({"id": 42, "content": FLOOD.replace('，', ",").replace('。', "｡"),
                    "published_at": "2024-06-21T09:00:00+08:00", "unknown_key": [1, 2, 3]}))
        .into_bytes(),
    ];
    // Windows line end on one line, to be sure it is tolerated.
    lines[1].push(b'\r');
    let mut bytes = Vec::new();
    for l in &lines {
        bytes.extend_from_slice(l);
        bytes.push(b'\n');
    }
    let expect = vec![
        Expect {
            id: "flood-1",
            duplicate: false,
            same_root_as: None,
        },
        Expect {
            id: "library-1",
            duplicate: false,
            same_root_as: None,
        },
        Expect {
            id: "flood-2",
            duplicate: true,
            same_root_as: Some("flood-1"),
        },
        Expect {
            id: "marathon-1",
            duplicate: false,
            same_root_as: None,
        },
        Expect {
            id: "42",
            duplicate: true,
            same_root_as: Some("flood-1"),
        },
    ];
    // Bad line numbers, each with a word its message must contain.
    let bad = vec![
        (3, "JSON"),
        (6, "content"),
        (7, "UTF-8"),
        (8, "published_at"),
    ];
    (bytes, expect, bad)
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(manifest_dir())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("running tantivy-dedup");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn is_hash(value: &Value) -> bool {
    value.as_str().is_some_and(|text| {
        text.len() == 16
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Parses stdout: one JSON object per line with exactly the keys id, simhash, root, duplicate.
fn decisions(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8");
    stdout
        .lines()
        .map(|text| {
            let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            let object = value.as_object().expect("a JSON object");
            let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["duplicate", "id", "root", "simhash"], "{text}");
            assert!(object["id"].is_string(), "{text}");
            assert!(is_hash(&object["simhash"]), "{text}");
            assert!(is_hash(&object["root"]), "{text}");
            assert!(object["duplicate"].is_boolean(), "{text}");
            value
        })
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether `text` contains `number` as a whole number (not part of a longer one).
fn mentions_number(text: &str, number: u64) -> bool {
    let needle = number.to_string();
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// The full check of a run over [`mixed_input`].
fn check_mixed_run(output: &Output, label: &str) {
    let (_, expect, bad) = mixed_input();
    let err = stderr(output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{label}: bad lines must give status 1\n{err}"
    );
    let decisions = decisions(output);
    let ids: Vec<&str> = decisions
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    let expected_ids: Vec<&str> = expect.iter().map(|e| e.id).collect();
    assert_eq!(
        ids, expected_ids,
        "{label}: one line per valid input, in input order\n{err}"
    );
    let root_of = |id: &str| decisions.iter().find(|d| d["id"] == id).unwrap()["root"].clone();
    for (decision, expected) in decisions.iter().zip(&expect) {
        assert_eq!(
            decision["duplicate"], expected.duplicate,
            "{label}: {}: {decision}",
            expected.id
        );
        match expected.same_root_as {
            Some(earlier) => assert_eq!(decision["root"], root_of(earlier), "{label}: {decision}"),
            // A first-of-its-story document is its own root.
            None => assert_eq!(decision["root"], decision["simhash"], "{label}: {decision}"),
        }
    }
    // The three stories are three clusters.
    let mut roots: Vec<String> = decisions.iter().map(|d| d["root"].to_string()).collect();
    roots.sort();
    roots.dedup();
    assert_eq!(roots.len(), 3, "{label}: {decisions:?}");
    // Each bad line is reported with its number and what is wrong with it.
    for (number, word) in bad {
        assert!(
            err.lines()
                .any(|l| mentions_number(l, number)
                    && l.to_lowercase().contains(&word.to_lowercase())),
            "{label}: no message for line {number} mentioning {word:?} in:\n{err}"
        );
    }
    // No good line is reported as bad.
    for good in [1, 2, 4, 9, 10] {
        assert!(
            !err.lines().any(|l| l.contains(&format!(":{good}:"))),
            "{label}: line {good} reported:\n{err}"
        );
    }
}

fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn plain_gzip_and_stdin_give_the_same_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _, _) = mixed_input();
    let plain = write_temp(dir.path(), "articles.jsonl", &bytes);
    let packed = write_temp(dir.path(), "articles.jsonl.gz", &gzip(&bytes));
    // Gzip is recognised by content, not by name.
    let disguised = write_temp(dir.path(), "articles.data", &gzip(&bytes));

    let from_plain = run(&["dedup", plain.to_str().unwrap()], None);
    check_mixed_run(&from_plain, "plain");
    let from_gzip = run(&["dedup", packed.to_str().unwrap()], None);
    check_mixed_run(&from_gzip, "gzip");
    let from_disguised = run(&["dedup", disguised.to_str().unwrap()], None);
    check_mixed_run(&from_disguised, "gzip without .gz");
    let from_stdin = run(&["dedup", "-"], Some(&bytes));
    check_mixed_run(&from_stdin, "stdin");

    assert_eq!(from_gzip.stdout, from_plain.stdout);
    assert_eq!(from_disguised.stdout, from_plain.stdout);
    assert_eq!(from_stdin.stdout, from_plain.stdout);
    // Gzip on standard input too.
    let gzip_stdin = run(&["dedup", "-"], Some(&gzip(&bytes)));
    assert_eq!(gzip_stdin.stdout, from_plain.stdout);
}

/// Issue 33, item 5: a file of several gzip members (`cat a.jsonl.gz b.jsonl.gz`, or one cut
/// mid-line into two members) is read whole by every command that reads files.
#[test]
fn every_gzip_member_of_a_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, expected, _) = mixed_input();
    let middle = bytes.len() / 2;
    let members = [gzip(&bytes[..middle]), gzip(&bytes[middle..])].concat();
    let packed = write_temp(dir.path(), "two-members.jsonl.gz", &members);

    let whole = run(&["dedup", "-"], Some(&bytes));
    check_mixed_run(&whole, "plain");
    let from_file = run(&["dedup", packed.to_str().unwrap()], None);
    check_mixed_run(&from_file, "two gzip members");
    assert_eq!(from_file.stdout, whole.stdout);
    let from_stdin = run(&["dedup", "-"], Some(&members));
    assert_eq!(from_stdin.stdout, whole.stdout);

    let index = dir.path().join("index");
    let ingested = run(
        &[
            "ingest",
            "--index",
            index.to_str().unwrap(),
            packed.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    let summary: Value = serde_json::from_slice(&ingested.stdout).unwrap();
    assert_eq!(summary["documents"], expected.len(), "{summary}");
}

#[test]
fn seed_mode_and_shipped_config_work() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _, _) = mixed_input();
    let path = write_temp(dir.path(), "articles.jsonl", &bytes);
    let path = path.to_str().unwrap();
    let default = run(&["dedup", path], None);
    let seed = run(&["dedup", path, "--mode", "seed"], None);
    check_mixed_run(&seed, "--mode seed");
    let config = run(&["dedup", path, "--config", "schema/news.toml"], None);
    check_mixed_run(&config, "--config schema/news.toml");
    // The shipped schema holds the built-in defaults.
    assert_eq!(config.stdout, default.stdout);
    let both = run(
        &[
            "dedup",
            path,
            "--config",
            "schema/news.toml",
            "--mode",
            "seed",
        ],
        None,
    );
    check_mixed_run(&both, "--config + --mode seed");
    // In seed mode the fingerprint is the documented TF simhash whatever the default adds;
    // --mode overrides the file's mode.
    assert_eq!(both.stdout, seed.stdout);
}

#[test]
fn clean_input_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let text = [
        line(json!({"id": "a", "content": LIBRARY, "published_at": "2024-06-20T10:00:00+08:00"})),
        line(json!({"id": "b", "content": MARATHON, "published_at": "2024-06-20T11:00:00+08:00"})),
        line(
            json!({"id": "c", "content": format!("<p>{LIBRARY}</p>\n<script>var a = 1;</script>"),
                    "published_at": "2024-06-20T12:00:00+08:00"}),
        ),
    ]
    .join("\n");
    let path = write_temp(dir.path(), "clean.jsonl", text.as_bytes());
    let output = run(&["dedup", path.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let decisions = decisions(&output);
    assert_eq!(decisions.len(), 3);
    assert_eq!(decisions[2]["duplicate"], true);
    assert_eq!(decisions[2]["root"], decisions[0]["root"]);
    assert_eq!(decisions[1]["duplicate"], false);

    // An empty file is no error either.
    let empty = write_temp(dir.path(), "empty.jsonl", b"");
    let output = run(&["dedup", empty.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stdout.is_empty());
}

#[test]
fn decisions_do_not_depend_on_the_title_by_default() {
    // docs/algorithm.md, "The fingerprint": by default only the body feeds the fingerprint,
    // since reposts change titles.
    let text = [
        line(json!({"id": "a", "title": "标题一", "content": MARATHON})),
        line(json!({"id": "b", "title": "完全不同的另一个标题", "content": MARATHON})),
    ]
    .join("\n");
    let output = run(&["dedup", "-"], Some(text.as_bytes()));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let decisions = decisions(&output);
    assert_eq!(decisions[0]["simhash"], decisions[1]["simhash"]);
    assert_eq!(decisions[1]["duplicate"], true);
}

#[test]
fn missing_file_exits_two_with_a_clear_message() {
    let output = run(&["dedup", "/no/such/dir/articles.jsonl"], None);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("/no/such/dir/articles.jsonl"), "{err}");
    assert!(err.to_lowercase().contains("no such file"), "{err}");
    assert!(output.stdout.is_empty());
}

#[test]
fn bad_config_exits_two_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_temp(
        dir.path(),
        "a.jsonl",
        line(json!({"id": "a", "content": FLOOD})).as_bytes(),
    );
    let input = input.to_str().unwrap();
    let cases: [(&str, &str, &str); 4] = [
        ("typo.toml", "[dedup]\nmax_distanse = 3\n", "max_distanse"),
        ("range.toml", "[dedup]\nmax_distance = 99\n", "max_distance"),
        ("window.toml", "[dedup]\nwindow = \"soon\"\n", "window"),
        ("syntax.toml", "[dedup\nmax_distance = 3\n", "syntax.toml"),
    ];
    for (name, text, needle) in cases {
        let config = write_temp(dir.path(), name, text.as_bytes());
        let output = run(
            &["dedup", input, "--config", config.to_str().unwrap()],
            None,
        );
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(needle),
            "{name}: message should name {needle:?}: {err}"
        );
        assert!(
            output.stdout.is_empty(),
            "{name}: decided despite a bad config"
        );
    }
    // A config file that does not exist.
    let output = run(&["dedup", input, "--config", "/no/such/config.toml"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("/no/such/config.toml"),
        "{}",
        stderr(&output)
    );
    // An unknown mode is a usage error.
    let output = run(&["dedup", input, "--mode", "fast"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("fast"), "{}", stderr(&output));
}

/// A `published_at` in milliseconds (a common producer mistake) reads as a date some 50,000
/// years ahead. docs/service.md, "Bad input": a bad document gets a clear error and costs
/// nothing else. Accepting it
/// moves the forest's clock so far that every later document is expired on arrival, and
/// deduplication silently stops for the rest of the stream. Either rejecting the line or
/// otherwise keeping it from moving the clock passes; this test FAILS against the current
/// src (see the report).
#[test]
fn a_millisecond_timestamp_does_not_stop_deduplication() {
    let text = [
        line(json!({"id": "a", "content": FLOOD, "published_at": 1_718_870_400})),
        line(json!({"id": "ms", "content": LIBRARY, "published_at": 1_718_870_400_000u64})),
        line(json!({"id": "b", "content": FLOOD, "published_at": 1_718_870_500})),
        line(json!({"id": "c", "content": FLOOD, "published_at": 1_718_870_600})),
    ]
    .join("\n");
    let output = run(&["dedup", "-"], Some(text.as_bytes()));
    let decisions = decisions(&output);
    for id in ["b", "c"] {
        let decision = decisions.iter().find(|d| d["id"] == id).expect(id);
        assert_eq!(
            decision["duplicate"],
            true,
            "{id}, an exact copy of a, after a millisecond timestamp: {decision}\n{}",
            stderr(&output)
        );
    }
}
