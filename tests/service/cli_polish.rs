//! What a newcomer tripped over in the first hour (issue 18), end to end through the binary:
//! `serve --addr` with a bare port or a host name and the `--port` hint; dates in `search` and
//! `/v1/search` read in the index's time zone, and times printed in it; JSON answers that end
//! with a line break; the command line's counts, sizes and missing sources; the evaluation
//! data that is not shipped with the repository.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve_process::{spawn_listening, stop};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

fn sample() -> PathBuf {
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

/// An index of the six sample articles in a fresh directory, with `config` as its settings
/// file when given.
fn sample_index(dir: &Path, config: Option<&str>) -> String {
    let index = dir.join("index");
    let mut command = Command::new(BIN);
    command
        .arg("ingest")
        .arg("--index")
        .arg(&index)
        .arg(sample());
    if let Some(text) = config {
        let path = dir.join("settings.toml");
        std::fs::write(&path, text).unwrap();
        command.arg("--config").arg(path);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    index.to_str().unwrap().to_owned()
}

// ---- serve --addr ---------------------------------------------------------------------------

/// A `serve` process, stopped with SIGTERM (killed if it does not stop) when dropped.
struct Serve {
    child: Child,
    /// `http://HOST:PORT` as the server printed it.
    base: String,
}

impl Serve {
    fn start(index: &Path, args: &[&str]) -> Self {
        let (child, base) = spawn_listening(
            Command::new(BIN)
                .arg("serve")
                .arg("--index")
                .arg(index)
                .args(args)
                .stdin(Stdio::null())
                .stderr(Stdio::null()),
            None,
        );
        Serve { child, base }
    }

    fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// An answer's status and raw body.
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("{error}: {:?}", self.body))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut response = response.unwrap();
    Answer {
        status: response.status().as_u16(),
        body: response.body_mut().read_to_string().unwrap(),
    }
}

fn get(url: &str) -> Answer {
    answer(agent().get(url).call())
}

#[test]
fn serve_listens_on_a_bare_port_and_on_a_host_name() {
    let dir = tempfile::tempdir().unwrap();
    for (n, addr) in ["0", "localhost:0"].into_iter().enumerate() {
        let server = Serve::start(&dir.path().join(format!("index-{n}")), &["--addr", addr]);
        // Both mean loopback, 127.0.0.1 (even where localhost also resolves to ::1).
        assert!(
            server.base.starts_with("http://127.0.0.1:"),
            "{addr}: {}",
            server.base
        );
        let health = get(&format!("http://localhost:{}/healthz", server.port()));
        assert_eq!(health.status, 200, "{addr}: {}", health.body);
        assert_eq!(health.json()["status"], "ok");
    }
}

#[test]
fn serve_answers_port_with_the_addr_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    for (args, expected) in [
        (vec!["--port", "7701"], "--addr 127.0.0.1:7701"),
        (vec!["--addr", "127.0.0.1"], "127.0.0.1:7700"),
        (vec!["--addr", "localhost"], "localhost:7700"),
        (vec!["--addr", "70000"], "0 to 65535"),
        (vec!["--addr", "local host:7700"], "HOST:PORT"),
    ] {
        let mut command = vec!["serve", "--index", index];
        command.extend(&args);
        let output = run(&command);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let message = stderr(&output);
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(
            !message.contains("invalid socket address syntax"),
            "{message}"
        );
    }
    assert!(!Path::new(index).exists(), "no index was created");
}

// ---- dates and time zones -------------------------------------------------------------------

/// The sample's times, UTC+8: run-1 2024-04-21 09:00, run-2 11:30, run-3 12:05; grain-1
/// 2024-04-22 10:00, grain-2 15:20, other-1 16:00.
fn hits(index: &str, filters: &[&str]) -> u64 {
    let mut args = vec!["search", "--index", index, "--json"];
    args.extend(filters);
    let output = run(&args);
    assert!(output.status.success(), "{filters:?}: {}", stderr(&output));
    let page: Value = serde_json::from_slice(&output.stdout).unwrap();
    page["total_hits"].as_u64().unwrap()
}

#[test]
fn search_reads_dates_and_times_in_the_index_zone() {
    let dir = tempfile::tempdir().unwrap();
    let index = sample_index(dir.path(), None);
    for (filters, expected) in [
        (vec!["--from", "2024-04-22"], 3),
        // A date alone as the end is the whole of that day.
        (vec!["--to", "2024-04-21"], 3),
        (vec!["--from", "2024-04-21", "--to", "2024-04-21"], 3),
        (vec!["--from", "2024-04-22 15:20"], 2),
        (vec!["--from", "2024-04-22T15:20:01"], 1),
        (vec!["--to", "2024-04-21 11:30:00"], 2),
        (vec!["--from", "2024-04-22T08:00:00Z"], 1),
        (vec!["--from", "1713772800"], 1),
        // 10:00 UTC is 18:00 in the index's zone.
        (vec!["--from", "2024-04-22 10:00"], 3),
        (vec!["--from", "2024-04-22 10:00", "--time-zone", "UTC"], 0),
    ] {
        assert_eq!(hits(&index, &filters), expected, "{filters:?}");
    }

    for bad in ["2024-4-21", "yesterday", "21/04/2024"] {
        let output = run(&["search", "--index", &index, "--from", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let message = stderr(&output);
        assert!(
            message.contains("--from")
                && message.contains("2024-04-21 08:30")
                && message.contains("+08:00")
                && message.contains("Unix seconds")
                && !message.contains("component"),
            "{bad}: {message}"
        );
    }
    let reversed = run(&[
        "search",
        "--index",
        &index,
        "--from",
        "2024-04-22",
        "--to",
        "2024-04-21",
    ]);
    assert_eq!(reversed.status.code(), Some(2));
    assert!(
        stderr(&reversed).contains("after --to"),
        "{}",
        stderr(&reversed)
    );
    let zone = run(&["search", "--index", &index, "--time-zone", "Asia/Shanghai"]);
    assert_eq!(zone.status.code(), Some(2));
    assert!(stderr(&zone).contains("\"+08:00\""), "{}", stderr(&zone));
}

#[test]
fn times_print_in_the_configured_zone() {
    let dir = tempfile::tempdir().unwrap();
    let index = sample_index(dir.path(), None);
    let detail = stdout(&run(&["similar", "--index", &index, "run-1"]));
    assert!(detail.contains("2024-04-21T09:00:00+08:00"), "{detail}");
    let utc = stdout(&run(&[
        "similar",
        "--index",
        &index,
        "run-1",
        "--time-zone",
        "UTC",
    ]));
    assert!(utc.contains("2024-04-21T01:00:00Z"), "{utc}");

    // The zone of the settings an index was created with is its readers' default.
    let west = tempfile::tempdir().unwrap();
    let index = sample_index(west.path(), Some("[index]\ntime_zone = \"-05:00\"\n"));
    let detail = stdout(&run(&["similar", "--index", &index, "run-1"]));
    assert!(detail.contains("2024-04-20T20:00:00-05:00"), "{detail}");
    // run-1..3 were published on the evening of 2024-04-20 there.
    assert_eq!(hits(&index, &["--to", "2024-04-20"]), 3);
    assert_eq!(
        hits(&index, &["--to", "2024-04-20", "--time-zone", "+08:00"]),
        0
    );
}

/// A request written by hand (a client library sets `Host` itself); the answer's status and
/// body.
fn raw_get(base: &str, path: &str, host: &str) -> Answer {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    Answer {
        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
        body: body.to_owned(),
    }
}

#[test]
fn http_search_reads_dates_in_the_index_zone_and_answers_end_with_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    let index = sample_index(dir.path(), None);
    let server = Serve::start(Path::new(&index), &["--addr", "127.0.0.1:0"]);
    let search = |query: &str| get(&format!("{}/v1/search?{query}", server.base));
    for (query, expected) in [
        ("from=2024-04-22", 3),
        ("to=2024-04-21", 3),
        ("from=2024-04-22%2015:20", 2),
        // A space for a date and time, a `+` for an unescaped offset.
        ("from=2024-04-22+15:20", 2),
        ("from=2024-04-22T15:20:00+08:00", 2),
        ("from=2024-04-22T15:20:00%2B08:00", 2),
        ("from=2024-04-22T07:20:00Z", 2),
    ] {
        let answer = search(query);
        assert_eq!(answer.status, 200, "{query}: {}", answer.body);
        assert_eq!(answer.json()["total_hits"], expected, "{query}");
    }
    let bad = search("from=2024-4-22");
    assert_eq!(bad.status, 400);
    let message = bad.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("`from`") && message.contains("2024-04-21 08:30"),
        "{message}"
    );

    // Every JSON answer ends with a line break: successes, refusals of the handlers, of the
    // access checks and of the router.
    let agent = agent();
    let base = &server.base;
    let answers = [
        get(&format!("{base}/v1/stats")),
        get(&format!("{base}/healthz")),
        get(&format!("{base}/v1/documents/run-1")),
        get(&format!("{base}/v1/documents/nope")),
        bad,
        get(&format!("{base}/no/such/endpoint")),
        raw_get(base, "/v1/stats", "rebinding.example"),
        answer(
            agent
                .post(format!("{base}/v1/documents"))
                .header("content-type", "application/json")
                .send(json!([{"id": "n1", "content": "新的一篇报道的正文。"}]).to_string()),
        ),
        answer(
            agent
                .post(format!("{base}/v1/documents"))
                .header("content-type", "text/plain")
                .send("x"),
        ),
    ];
    let statuses: Vec<u16> = answers.iter().map(|answer| answer.status).collect();
    assert_eq!(statuses, [200, 200, 200, 404, 400, 404, 421, 200, 415]);
    for answer in &answers {
        assert!(
            answer.body.ends_with("}\n") && !answer.body.ends_with("\n\n"),
            "{}: {:?}",
            answer.status,
            answer.body
        );
        answer.json();
    }
}

// ---- the command line's words ---------------------------------------------------------------

#[test]
fn counts_sizes_and_missing_sources_read_well() {
    let dir = tempfile::tempdir().unwrap();
    let index = sample_index(dir.path(), None);

    let alone = stdout(&run(&["similar", "--index", &index, "other-1"]));
    assert!(alone.contains("this document alone"), "{alone}");
    let detail = stdout(&run(&["similar", "--index", &index, "grain-1"]));
    assert!(
        detail.contains("2 documents; 1 other, earliest first"),
        "{detail}"
    );
    let one = stdout(&run(&["search", "--index", &index, "图书馆"]));
    assert!(
        one.starts_with("1 matching document in 1 cluster; cluster 1:"),
        "{one}"
    );
    assert!(one.contains("source: 滨江日报"), "{one}");

    // Sizes in a unit chosen by their magnitude.
    let stats = stdout(&run(&["stats", "--index", &index]));
    let disk = stats
        .lines()
        .find_map(|line| line.strip_prefix("disk"))
        .unwrap()
        .trim();
    assert!(disk.ends_with(" KiB"), "{stats}");
    let number = disk.trim_end_matches(" KiB");
    assert!(
        number.parse::<f64>().is_ok() && number.split('.').nth(1).map(str::len) == Some(1),
        "{stats}"
    );
    let checked = stdout(&run(&["check", "--index", &index]));
    assert!(
        checked.contains(" KiB) checksummed") && !checked.contains("kB"),
        "{checked}"
    );

    // A document without a source shows none, not `[-]`.
    let file = dir.path().join("unsourced.jsonl");
    std::fs::write(
        &file,
        format!(
            "{}\n",
            json!({"id": "u1", "title": "无来源的报道", "content": "一篇没有注明来源的报道，正文在这里。"})
        ),
    )
    .unwrap();
    let unsourced = dir.path().join("unsourced");
    let unsourced = unsourced.to_str().unwrap();
    assert!(
        run(&["ingest", "--index", unsourced, file.to_str().unwrap()])
            .status
            .success()
    );
    let listed = stdout(&run(&["search", "--index", unsourced]));
    assert!(!listed.contains("[-]"), "{listed}");
    assert!(listed.contains("source unknown"), "{listed}");
    let shown = stdout(&run(&["similar", "--index", unsourced, "u1"]));
    assert!(shown.starts_with("无来源的报道  20"), "{shown}");
}

#[test]
fn cli_and_http_pages_have_the_same_default_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.jsonl");
    // 25 unrelated one-document stories: more than a default page.
    let lines: Vec<String> = (0..25)
        .map(|n| {
            json!({"id": format!("d{n}"), "content": format!("第{n}号通告：编号{n}的{}。", "事项".repeat(n + 1))})
                .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    assert!(
        run(&["ingest", "--index", index, file.to_str().unwrap()])
            .status
            .success()
    );
    let output = run(&["search", "--index", index, "--json"]);
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    let server = Serve::start(Path::new(index), &["--addr", "0"]);
    let http = get(&format!("{}/v1/search", server.base)).json();
    assert_eq!(cli["total_clusters"], http["total_clusters"]);
    let shown = cli["clusters"].as_array().unwrap().len();
    assert_eq!(shown, http["clusters"].as_array().unwrap().len());
    assert_eq!(shown, tantivy_dedup::engine::DEFAULT_PAGE_SIZE);
}

// ---- the evaluation data --------------------------------------------------------------------

/// The explanation of a missing evaluation file: the file, that it is not shipped, README's
/// section.
fn explains_missing_data(output: &Output, path: &Path, source: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    let message = stderr(output);
    for needle in [
        path.to_str().unwrap(),
        "no such file",
        "not shipped with the repository",
        "README \"Evaluation data\"",
        source,
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
}

#[test]
fn eval_and_bench_explain_missing_evaluation_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("shared/data");
    let labeled = data.join("neardup-dev.jsonl.gz");
    let web = data.join("web-dev.jsonl.gz");
    let corpus = data.join("xwlb-news.jsonl.gz");

    let eval = Command::new(BIN)
        .arg("eval")
        .arg(&labeled)
        .output()
        .unwrap();
    explains_missing_data(&eval, &labeled, "xwlb-news");
    let eval = Command::new(BIN).arg("eval").arg(&web).output().unwrap();
    explains_missing_data(&eval, &web, "thunlp/Chinese_Rumor_Dataset");

    let bench = Command::new(BIN)
        .args(["bench", "--only", "dedup", "--labeled"])
        .arg(&labeled)
        .output()
        .unwrap();
    explains_missing_data(&bench, &labeled, "xwlb-news");
    let bench = Command::new(BIN)
        .args(["bench", "--only", "ingest", "--corpus"])
        .arg(&corpus)
        .output()
        .unwrap();
    explains_missing_data(&bench, &corpus, "Xinwen Lianbo");

    // The defaults, `../shared/data/...`, from a directory beside which there is none; the
    // files are checked before any part runs, so the lookup part (minutes) never starts.
    let clone = dir.path().join("clone");
    std::fs::create_dir(&clone).unwrap();
    let started = Instant::now();
    let bench = Command::new(BIN)
        .arg("bench")
        .current_dir(&clone)
        .output()
        .unwrap();
    explains_missing_data(
        &bench,
        Path::new("../shared/data/xwlb-news.jsonl.gz"),
        "Xinwen Lianbo",
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let bench = Command::new(BIN)
        .args(["bench", "--only", "dedup"])
        .current_dir(&clone)
        .output()
        .unwrap();
    explains_missing_data(
        &bench,
        Path::new("../shared/data/neardup-dev.jsonl.gz"),
        "xwlb-news",
    );
}
