//! `/metrics` as a monitoring stack reads it (issue 16; README "Operating it"): a real server on
//! loopback (`server_api`'s), a few Chinese articles posted to it (a story, a repost of it, an
//! unrelated story, a re-send and an empty article, so that every outcome is counted), a
//! search, then scrapes of `/metrics`:
//!
//! - `promtool_accepts_a_live_scrape`: `promtool check metrics` exits 0, with no lint problem,
//!   on what a plain client gets (the Prometheus text format);
//! - `prometheus_gets_openmetrics_with_the_same_series`: Prometheus's own `Accept` header gets
//!   OpenMetrics, with the same series;
//! - `the_dashboard_queries_only_exported_metrics`: every PromQL expression of the Grafana
//!   dashboard (`docs/grafana/tantivy-dedup.json`) parses (`promtool check rules`) and names
//!   only metrics that the scrape has (a histogram `foo` as `foo_bucket`, `foo_sum` and
//!   `foo_count`), and its variables read an exported metric.
//!
//! `promtool` comes from Debian's `prometheus` package; missing, these tests fail (see
//! `required_programs`).

use std::collections::BTreeSet;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::required_programs::require_on_path;
use crate::server_api::{Reply, TestServer, server_config};

/// The `Accept` header of `curl` and most other plain clients.
const PLAIN_ACCEPT: &str = "*/*";
/// The `Accept` header Prometheus 2 scrapes with.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// An invented story; its repost below adds a byline and a source line, which leaves it a
/// near-duplicate.
const STORY: &str = "江北区图书馆今天起试行夜间开放，周一至周五的闭馆时间由晚上六点推迟到十点。\
馆方在二楼新设了一百二十个自习座位，并为夜间读者开通了自助借还和预约存包服务。\
负责人介绍，试行期为三个月，期间将根据到馆人数调整开放时段和安保人员配置。\
不少附近的上班族表示，下班后终于有了安静看书的去处。";

/// An invented story unrelated to [`STORY`].
const OTHER_STORY: &str = "南湖镇的三百亩茶园迎来春茶采摘高峰，茶农们清晨五点就上山抢收明前茶。\
今年镇里引进了两条自动化揉捻生产线，鲜叶从采摘到烘干只需六个小时。\
合作社负责人说，线上订单比去年同期翻了一番，最远发往新疆和黑龙江。";

/// A server on loopback after traffic that gives every metric family samples: documents of
/// every outcome, a search and a first scrape (so that `/metrics`' own series are in every
/// later one).
fn server_with_traffic() -> TestServer {
    let server = TestServer::start(server_config());
    let story = json!({"id": "library-1", "source": "江北日报", "content": STORY});
    let first = server.post_json(
        "/v1/documents",
        &json!([
            story,
            {"id": "library-2", "source": "城市晚报", "content": format!("本报记者 林晓\n{STORY}\n（来源：江北日报）")},
            {"id": "tea-1", "source": "南湖发布", "content": OTHER_STORY},
            {"id": "empty-1", "content": ""},
        ]),
    );
    let duplicates: Vec<&Value> = first.json["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", first.text))
        .iter()
        .map(|result| &result["duplicate"])
        .collect();
    assert_eq!(
        (first.status, &first.json["indexed"], duplicates),
        (
            200,
            &json!(3),
            vec![&json!(false), &json!(true), &json!(false), &Value::Null]
        ),
        "{}",
        first.text
    );
    let again = server.post_json("/v1/documents", &json!([story]));
    assert_eq!(again.json["unchanged"], json!(1), "{}", again.text);
    server.search(&[("q", "图书馆".to_owned())]);
    scrape(&server, PLAIN_ACCEPT);
    server
}

/// `/metrics` asked for with `accept`.
fn scrape(server: &TestServer, accept: &str) -> Reply {
    let reply = server.get_accepting("/metrics", accept);
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply
}

/// Runs `promtool` with `args` and `input` on its stdin.
fn promtool(args: &[&str], input: &str) -> Output {
    require_on_path("promtool", "prometheus");
    let mut stdin = tempfile::tempfile().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.rewind().unwrap();
    Command::new("promtool")
        .args(args)
        .stdin(stdin)
        .output()
        .unwrap()
}

/// Fails with promtool's output unless it exited 0.
fn assert_promtool_passed(output: &Output, what: &str, input: &str) {
    assert!(
        output.status.success(),
        "promtool {what}: {}\n{}{}\non\n{input}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The series of an exposition: each sample line without its value.
fn series(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| Some(line.rsplit_once(' ')?.0))
        .collect()
}

/// The metric names of an exposition's samples.
fn sample_names(text: &str) -> BTreeSet<&str> {
    series(text)
        .into_iter()
        .map(|series| series.split('{').next().unwrap_or(series))
        .collect()
}

#[test]
fn promtool_accepts_a_live_scrape() {
    let server = server_with_traffic();
    let reply = scrape(&server, PLAIN_ACCEPT);
    assert!(
        reply.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        reply.content_type
    );
    let output = promtool(&["check", "metrics"], &reply.text);
    assert_promtool_passed(&output, "check metrics", &reply.text);
    let lint = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(lint.trim().is_empty(), "promtool's lint: {lint}");
}

/// The value of the sample `name` (no labels) in an exposition.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn forest_checkpoints_show_in_the_metrics() {
    // The test servers save a checkpoint every 2 inserts, on a thread of its own; the writer
    // counts it at the commit after the thread is done.
    let server = server_with_traffic();
    let mut saved = None;
    for attempt in 0..50 {
        let text = format!("{OTHER_STORY}（第{attempt}次转载）");
        let reply = server.post_json(
            "/v1/documents",
            &json!([{"id": format!("again-{attempt}"), "content": text}]),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        let metrics = scrape(&server, PLAIN_ACCEPT).text;
        saved =
            sample(&metrics, "tantivy_dedup_checkpoint_inserts").filter(|&inserts| inserts > 0.0);
        if saved.is_some() {
            assert!(sample(&metrics, "tantivy_dedup_checkpoint_pause_seconds_count") >= Some(1.0));
            assert_eq!(
                sample(&metrics, "tantivy_dedup_checkpoint_failures_total"),
                Some(0.0)
            );
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(saved.is_some(), "no checkpoint was counted");
}

#[test]
fn prometheus_gets_openmetrics_with_the_same_series() {
    let server = server_with_traffic();
    let openmetrics = scrape(&server, PROMETHEUS_ACCEPT);
    let prometheus = scrape(&server, PLAIN_ACCEPT);
    assert!(
        openmetrics
            .content_type
            .starts_with("application/openmetrics-text; version=1.0.0"),
        "{}",
        openmetrics.content_type
    );
    assert!(
        openmetrics.text.ends_with("# EOF\n"),
        "{}",
        openmetrics.text
    );
    assert!(
        prometheus
            .content_type
            .starts_with("text/plain; version=0.0.4"),
        "{}",
        prometheus.content_type
    );
    assert_eq!(series(&openmetrics.text), series(&prometheus.text));
    let prometheus = prometheus.text;
    for (outcome, count) in [
        ("new_story", 2),
        ("duplicate", 1),
        ("unchanged", 1),
        ("rejected", 1),
    ] {
        let sample = format!("tantivy_dedup_documents_total{{outcome=\"{outcome}\"}} {count}\n");
        assert!(prometheus.contains(&sample), "{sample} in\n{prometheus}");
    }
}

// ---- the dashboard --------------------------------------------------------------------------

fn dashboard_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana/tantivy-dedup.json")
}

/// The dashboard's panels, those inside rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, into: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            into.push(panel);
            walk(&panel["panels"], into);
        }
    }
    let mut all = Vec::new();
    walk(&dashboard["panels"], &mut all);
    all
}

/// The metric names a PromQL expression selects: every identifier but functions (followed by
/// `(`), aggregation operators and keywords, label names (inside `{}` and in the list after
/// `by`, `without`, `on`, `ignoring`, `group_left`, `group_right`), durations (inside `[]`,
/// after `offset`), numbers, strings and Grafana's variables (`$name`, `${name}`).
fn metric_names(expr: &str) -> Vec<String> {
    const LABEL_LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 17] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    // The index of the first character from `from` on that is not `part`.
    let end_of = |from: usize, part: &dyn Fn(char) -> bool| {
        (from..chars.len())
            .find(|&i| !part(chars[i]))
            .unwrap_or(chars.len())
    };
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            '"' | '\'' | '`' => after_string(&chars, i),
            '{' => after_group(&chars, i, '}'),
            '[' => after_group(&chars, i, ']'),
            '$' if chars.get(i + 1) == Some(&'{') => after_group(&chars, i + 1, '}'),
            '$' => end_of(i + 1, &is_word),
            '0'..='9' | '.' => end_of(i, &|c| is_word(c) || c == '.'),
            c if is_word(c) => {
                let end = end_of(i, &is_word);
                let word: String = chars[i..end].iter().collect();
                let next = end_of(end, &char::is_whitespace);
                let opens = chars.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) && opens {
                    after_group(&chars, next, ')')
                } else {
                    if !opens
                        && !LABEL_LISTS.contains(&word.as_str())
                        && !KEYWORDS.contains(&word.as_str())
                    {
                        names.push(word);
                    }
                    end
                }
            }
            _ => i + 1,
        };
    }
    names
}

/// The index after the string literal that opens at `open` (a backslash escapes a character).
fn after_string(chars: &[char], open: usize) -> usize {
    let quote = chars[open];
    let mut i = open + 1;
    while i < chars.len() && chars[i] != quote {
        i += if chars[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// The index after the `close` that ends the group opening at `open`, strings skipped whole.
fn after_group(chars: &[char], open: usize, close: char) -> usize {
    let mut i = open + 1;
    while i < chars.len() && chars[i] != close {
        i = if matches!(chars[i], '"' | '\'' | '`') {
            after_string(chars, i)
        } else {
            i + 1
        };
    }
    i + 1
}

#[test]
fn metric_names_skips_all_but_the_metrics() {
    let expr = r#"(sum by (le, route) (rate(a_bucket{job=~"$job", s=~"[45].{2}"}[5m] offset 1h))
        or vector(0)) / on (route) group_left sum(rate(b_total{x="}"}[${__range}])) > bool 0.5e3
        and ignoring(status) c unless count without (d) (e:recorded) * ${scale} + $shift"#;
    assert_eq!(
        metric_names(expr),
        ["a_bucket", "b_total", "c", "e:recorded"]
    );
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let text = std::fs::read_to_string(dashboard_path()).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    assert!(
        dashboard["__inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|input| input["name"] == "DS_PROMETHEUS" && input["pluginId"] == "prometheus"),
        "import asks for the Prometheus data source"
    );
    assert!(dashboard["schemaVersion"].as_u64().is_some());
    let datasource = json!({"type": "prometheus", "uid": "${DS_PROMETHEUS}"});

    let mut ids = BTreeSet::new();
    let mut queries = Vec::new();
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().unwrap();
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: id twice"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"], datasource, "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            assert_eq!(target["datasource"], datasource, "{title}");
            queries.push((title, target["expr"].as_str().unwrap()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        assert_eq!(variable["datasource"], datasource, "{}", variable["name"]);
        // `label_values(SELECTOR, LABEL)`: the selector is PromQL.
        let definition = variable["definition"].as_str().unwrap();
        let selector = definition
            .strip_prefix("label_values(")
            .and_then(|arguments| Some(arguments.rsplit_once(',')?.0))
            .unwrap_or_else(|| panic!("not label_values(SELECTOR, LABEL): {definition}"));
        queries.push(("a variable", selector));
    }

    let server = server_with_traffic();
    let scrape = scrape(&server, PROMETHEUS_ACCEPT);
    let exported = sample_names(&scrape.text);
    for (title, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{title}: no metric in {expr}");
        for name in names {
            assert!(
                exported.contains(name.as_str()),
                "{title}: {name} is not exported; {expr}\nexported: {exported:?}"
            );
        }
    }

    // Each expression as a recording rule: promtool parses it with Prometheus's own parser.
    // A JSON string is a YAML scalar.
    let rules: String = queries
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| {
            format!(
                "      - record: dashboard_query_{i}\n        expr: {}\n",
                json!(expr)
            )
        })
        .collect();
    let rules = format!("groups:\n  - name: dashboard\n    rules:\n{rules}");
    let output = promtool(&["check", "rules", "/dev/stdin"], &rules);
    assert_promtool_passed(&output, "check rules", &rules);
}
