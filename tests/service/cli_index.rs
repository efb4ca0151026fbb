//! The index commands end to end (docs/service.md, "Command line"): `ingest` into a directory, then
//! `search`, `similar`, `story`
//! and `stats` over it, as separate processes; the mistakes a newcomer makes; and `check`, with
//! directories that lost or damaged files (issue 14).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

pub(crate) fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/articles.jsonl")
}

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn json(output: &Output) -> Value {
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

    // The story page, named by a member's id or by the root hash: run-1 first, run-2 (a
    // "【转载】" copy whose footer names 滨江日报) came in through it, and the same by root.
    let root = detail["document"]["root"].as_str().unwrap();
    let story = json(&run(&["story", "--index", index, "run-3", "--json"]));
    assert_eq!(story["root"], root);
    assert_eq!(story["cluster_size"], 3);
    assert_eq!(story["first_published"]["id"], "run-1");
    assert_eq!(story["outlets"].as_array().map(Vec::len), Some(3));
    assert_eq!(story["members"][1]["id"], "run-2");
    assert_eq!(story["members"][1]["attached_to"], "run-1");
    assert_eq!(story["members"][1]["reprint"]["source"], "滨江日报");
    let text = stdout(&run(&[
        "story",
        "--index",
        index,
        root,
        "--histogram",
        "1d",
    ]));
    assert!(text.contains("came in through run-1"), "{text}");
    assert!(text.contains("articles per 1d"), "{text}");
    // Its members highlighted by a list's keywords: per field with a match, fragments.
    let marked_story = ["story", "--index", index, root, "--highlight", "马拉松"];
    let marked = json(&run(&[&marked_story[..], &["--json"]].concat()));
    for member in marked["members"].as_array().unwrap() {
        let fragments = member["highlights"]["content"].as_array().unwrap();
        assert!(
            fragments[0].as_str().unwrap().contains("<em>马拉松</em>"),
            "{member}"
        );
        // The snippet stays the start of the text: it names a post without a title.
        assert!(
            !member["snippet"].as_str().unwrap().contains("<em>"),
            "{member}"
        );
    }
    let text = stdout(&run(&marked_story));
    assert!(text.contains("     content: "), "{text}");
    let listed = json(&run(&[
        "search",
        "--index",
        index,
        "马拉松",
        "--highlight",
        "--highlight-fragments",
        "1",
        "--json",
    ]));
    let highlights = &listed["clusters"][0]["representative"]["highlights"];
    assert_eq!(
        highlights["content"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let refused = run(&[
        "search",
        "--index",
        index,
        "马拉松",
        "--highlight-fragments",
        "11",
    ]);
    assert!(!refused.status.success());

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

    // A walk with a cursor, a story a command: the list's stories, each once, in order.
    let list = ["search", "--index", index, "", "--sort", "similar_desc"];
    let whole = json(&run(&[&list[..], &["--json"]].concat()));
    let roots = |page: &Value| -> Vec<Value> {
        let clusters = page["clusters"].as_array().unwrap();
        clusters
            .iter()
            .map(|cluster| cluster["root"].clone())
            .collect()
    };
    let mut cursor = "*".to_owned();
    let mut walked = Vec::new();
    let mut last_cursor = None;
    loop {
        let page = run(&[&list[..], &["--limit", "1", "--cursor", &cursor, "--json"]].concat());
        assert!(page.status.success(), "{}", stderr(&page));
        let page = json(&page);
        walked.extend(roots(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
        last_cursor = Some(cursor.clone());
    }
    assert_eq!(walked, roots(&whole));
    let text = stdout(&run(
        &[&list[..], &["--limit", "1", "--cursor", "*"]].concat()
    ));
    assert!(text.contains("next page: --cursor "), "{text}");
    // Once the index changed, a command cannot go on with the walk.
    let article = dir.path().join("one.jsonl");
    std::fs::write(
        &article,
        "{\"id\": \"late\", \"content\": \"一篇后来的文章，与前面的都不一样。\"}\n",
    )
    .unwrap();
    assert!(
        run(&["ingest", "--index", index, article.to_str().unwrap()])
            .status
            .success()
    );
    let cursor = last_cursor.unwrap();
    let expired = run(&[&list[..], &["--limit", "1", "--cursor", &cursor]].concat());
    assert!(!expired.status.success());
    assert!(
        stderr(&expired).contains("cursor=*"),
        "{}",
        stderr(&expired)
    );
}

/// README "Query syntax": each example query finds on the sample file what the README says
/// (articles, stories), and a query that does not parse is refused with a clear error.
#[test]
fn the_readme_query_syntax_examples_find_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();
    let sample = sample();
    let ingested = run(&["ingest", "--index", index, sample.to_str().unwrap()]);
    assert!(ingested.status.success(), "{}", stderr(&ingested));
    let examples = [
        ("马拉松 滨江", 3, 1),
        ("马拉松 OR 夏粮", 5, 2),
        ("马拉松 -转载", 2, 1),
        ("\"国际马拉松\"", 3, 1),
        ("(马拉松 OR 图书馆) -肯尼亚", 1, 1),
        ("title:图书馆", 1, 1),
        ("马拉松^2 OR 夏粮", 5, 2),
    ];
    for (query, hits, stories) in examples {
        let found = run(&["search", "--index", index, query, "--json"]);
        assert!(found.status.success(), "{query}: {}", stderr(&found));
        let page = json(&found);
        assert_eq!(
            (page["total_hits"].as_u64(), page["total_clusters"].as_u64()),
            (Some(hits), Some(stories)),
            "{query}"
        );
    }
    let broken = run(&["search", "--index", index, "马拉松 AND ("]);
    assert!(!broken.status.success());
    assert!(
        stderr(&broken).contains("invalid query"),
        "{}",
        stderr(&broken)
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
    let unknown = run(&["story", "--index", index, "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no document has id \"nope\""));
    for bad in [
        vec!["search", "--index", index, "新闻", "--sort", "bogus"],
        vec!["search", "--index", index, "新闻", "--limit", "5000"],
        vec!["search", "--index", index, "\"新闻"],
        vec!["search", "--index", index, "新闻", "--from", "yesterday"],
        vec!["story", "--index", index, "run-1", "--histogram", "0s"],
        vec!["story", "--index", index, "run-1", "--sort", "newest"],
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
    // An unknown order says what an order is, and does not call the query invalid.
    let unknown_sort = run(&["search", "--index", index, "新闻", "--sort", "bogus"]);
    assert!(
        stderr(&unknown_sort).contains("sort must be one of")
            && !stderr(&unknown_sort).contains("invalid query"),
        "{}",
        stderr(&unknown_sort)
    );
}

#[test]
fn a_file_cut_short_keeps_what_was_read_before_it() {
    use std::io::Write;

    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index = index.to_str().unwrap();
    // 400 distinct articles, gzip-compressed, then cut at 60% of the bytes (a download or
    // copy that stopped early).
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for number in 0..400 {
        let line = serde_json::json!({
            "id": format!("cut-{number}"),
            "content": format!("第{number}号通报：本市第{number}个社区完成了管网改造，居民用水恢复正常。"),
        });
        writeln!(encoder, "{line}").unwrap();
    }
    let compressed = encoder.finish().unwrap();
    let cut = dir.path().join("cut.jsonl.gz");
    std::fs::write(&cut, &compressed[..compressed.len() * 6 / 10]).unwrap();

    let ingested = run(&[
        "ingest",
        "--index",
        index,
        cut.to_str().unwrap(),
        sample().to_str().unwrap(),
    ]);
    assert_eq!(ingested.status.code(), Some(1), "{}", stderr(&ingested));
    let message = stderr(&ingested);
    assert!(
        message.contains("cut.jsonl.gz: reading failed after"),
        "{message}"
    );
    let stats = json(&run(&["stats", "--index", index, "--json"]));
    let documents = stats["documents"].as_u64().unwrap();
    // The lines before the cut and the whole second file are committed.
    let sample_lines = std::fs::read_to_string(sample()).unwrap().lines().count() as u64;
    assert!(
        documents > sample_lines + 100 && documents < sample_lines + 400,
        "{documents} documents: {message}"
    );
    let read = message
        .split("reading failed after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse::<u64>().ok())
        .unwrap();
    assert_eq!(documents, read + sample_lines, "{message}");
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The first file in `dir` (by name) whose name ends with `.{extension}`.
fn file_with_extension(dir: &Path, extension: &str) -> std::path::PathBuf {
    let name = names(dir)
        .into_iter()
        .find(|name| name.ends_with(&format!(".{extension}")))
        .unwrap_or_else(|| panic!("no .{extension} file in {}", dir.display()));
    dir.join(name)
}

#[test]
fn ingest_refuses_an_index_directory_that_lost_its_meta_json() {
    // It used to create a new index there, whose first commit deleted every old segment.
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let sample = sample();
    let ingest = [
        "ingest",
        "--index",
        index.to_str().unwrap(),
        sample.to_str().unwrap(),
    ];
    assert!(run(&ingest).status.success());
    let saved = dir.path().join("meta.json.saved");
    std::fs::rename(index.join("meta.json"), &saved).unwrap();
    let before = names(&index);

    let refused = run(&ingest);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("meta.json") && stderr(&refused).contains("backup"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(names(&index), before, "nothing was written or deleted");

    std::fs::rename(&saved, index.join("meta.json")).unwrap();
    let stats = json(&run(&[
        "stats",
        "--index",
        index.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(stats["documents"], 6);
}

#[test]
fn check_reads_every_file_and_names_the_damaged_ones() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index_arg = index.to_str().unwrap();
    let sample = sample();
    assert!(
        run(&["ingest", "--index", index_arg, sample.to_str().unwrap()])
            .status
            .success()
    );
    let sound = run(&["check", "--index", index_arg]);
    assert!(sound.status.success(), "{}", stderr(&sound));
    assert!(stdout(&sound).contains("6 documents"), "{}", stdout(&sound));
    let report = json(&run(&["check", "--index", index_arg, "--json"]));
    assert_eq!(report["documents"], 6);
    assert_eq!(report["damaged"], serde_json::json!([]));

    // Garbage inside a .store file: opening cannot see it (that would mean reading every
    // file), so `stats` still runs; `check` finds it.
    let store = file_with_extension(&index, "store");
    let mut bytes = std::fs::read(&store).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle - 8..middle + 8] {
        *byte ^= 0x5a;
    }
    std::fs::write(&store, &bytes).unwrap();
    assert!(run(&["stats", "--index", index_arg]).status.success());
    let checked = run(&["check", "--index", index_arg]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    let store_name = store.file_name().unwrap().to_str().unwrap();
    assert!(
        stdout(&checked).contains(store_name),
        "{}",
        stdout(&checked)
    );

    // A missing .pos file: every command refuses to open the index and names the file;
    // `check` names both.
    let positions = file_with_extension(&index, "pos");
    std::fs::remove_file(&positions).unwrap();
    let positions_name = positions.file_name().unwrap().to_str().unwrap();
    let stats = run(&["stats", "--index", index_arg]);
    assert_eq!(stats.status.code(), Some(2));
    assert!(
        stderr(&stats).contains(positions_name) && stderr(&stats).contains("tantivy-dedup check"),
        "{}",
        stderr(&stats)
    );
    let checked = run(&["check", "--index", index_arg, "--json"]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    let damaged: Vec<String> = json(&checked)["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|damage| damage["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        damaged.iter().any(|path| path.ends_with(store_name))
            && damaged.iter().any(|path| path.ends_with(positions_name)),
        "{damaged:?}"
    );
}

#[test]
fn check_compares_the_forest_checkpoint_sketches_with_the_index() {
    // Issue 33: zeros over a sketch chunk of the forest checkpoint passed `check`.
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("news");
    let index_arg = index.to_str().unwrap();
    let sample = sample();
    let ingest = || run(&["ingest", "--index", index_arg, sample.to_str().unwrap()]);
    assert!(ingest().status.success());
    let sound = run(&["check", "--index", index_arg, "--json"]);
    assert!(sound.status.success(), "{}", stderr(&sound));
    assert_eq!(json(&sound)["damaged"], serde_json::json!([]));
    assert_eq!(json(&sound)["sketches_compared"], 6);

    let chunk = file_with_extension(&index.join("forest"), "sketches");
    let chunk_name = chunk.file_name().unwrap().to_str().unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    file.write_all_at(&vec![0; 1 << 20], 0).unwrap();
    let checked = run(&["check", "--index", index_arg]);
    assert_eq!(checked.status.code(), Some(1), "{}", stderr(&checked));
    let text = stdout(&checked);
    for expected in [
        chunk_name,
        "checksum",
        "6 documents",
        "_sketch",
        "run-1",
        "forest.checkpoint",
    ] {
        assert!(
            text.contains(expected),
            "the report should say {expected:?}: {text}"
        );
    }
    assert!(
        stderr(&checked).contains("forest checkpoint"),
        "{}",
        stderr(&checked)
    );

    // Opening refuses the checkpoint, says why, and replays every insert; the checkpoint it
    // saves at the end is sound.
    let reopened = ingest();
    assert!(reopened.status.success(), "{}", stderr(&reopened));
    let warning = stderr(&reopened);
    assert!(
        warning.contains(chunk_name) && warning.contains("replaying every insert"),
        "{warning}"
    );
    let again = run(&["check", "--index", index_arg]);
    assert!(again.status.success(), "{}", stdout(&again));
}

/// `serve` without API keys refuses any address but loopback, and a key that is too short;
/// neither leaves an index directory behind, and neither does a port in use.
#[test]
fn serve_refuses_to_expose_an_unguarded_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    let serve = |addr: &str, key: Option<&str>| {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--index", index, "--addr", addr])
            .env_remove("TANTIVY_DEDUP_WRITE_KEY")
            .env_remove("TANTIVY_DEDUP_READ_KEY");
        if let Some(key) = key {
            command.env("TANTIVY_DEDUP_WRITE_KEY", key);
        }
        command.output().unwrap()
    };
    let exposed = serve("0.0.0.0:0", None);
    assert!(!exposed.status.success());
    let message = stderr(&exposed);
    assert!(message.contains("without API keys"), "{message}");
    assert!(message.contains("--insecure-no-auth"), "{message}");
    assert!(!Path::new(index).exists(), "no index was created");

    let weak = serve("0.0.0.0:0", Some("short"));
    assert!(!weak.status.success());
    let message = stderr(&weak);
    assert!(message.contains("TANTIVY_DEDUP_WRITE_KEY"), "{message}");
    assert!(message.contains("at least 16"), "{message}");
    assert!(
        !message.contains("short"),
        "the key is not shown: {message}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = serve(&taken.local_addr().unwrap().to_string(), None);
    assert!(!busy.status.success());
    assert!(
        stderr(&busy).contains("cannot listen on"),
        "{}",
        stderr(&busy)
    );
    assert!(!Path::new(index).exists(), "no index was created");
}

#[test]
fn a_user_dictionary_keeps_new_words_whole() {
    // README "A user dictionary", as written there.
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    std::fs::write(
        path("chip.jsonl"),
        r#"{"id":"chip-1","title":"新品发布","content":"记者从凌霄微电子获悉，新一代车规级芯片已经量产。"}"#,
    )
    .unwrap();
    // Written in traditional characters: normalised as text is, the word is 凌霄微电子.
    std::fs::write(path("words.txt"), "# 用户词典\n凌霄微電子\n").unwrap();
    std::fs::write(
        path("settings.toml"),
        "[index]\nuser_dict = \"words.txt\"\n",
    )
    .unwrap();
    let hits = |index: &str| {
        let found = run(&["search", "--index", index, "凌霄微电子", "--json"]);
        assert!(found.status.success(), "{}", stderr(&found));
        json(&found)["total_hits"].as_u64()
    };
    let ingest = |config: Option<&str>, index: &str| {
        let mut args = vec!["ingest".to_owned()];
        if let Some(config) = config {
            args.extend(["--config".to_owned(), path(config)]);
        }
        args.extend(["--index".to_owned(), index.to_owned(), path("chip.jsonl")]);
        Command::new(BIN).args(&args).output().unwrap()
    };
    let with = path("news-dict");
    let made = ingest(Some("settings.toml"), &with);
    assert!(made.status.success(), "{}", stderr(&made));
    // `search` runs in a process of its own, with the index's own copy of the dictionary.
    std::fs::remove_file(path("words.txt")).unwrap();
    assert_eq!(hits(&with), Some(1));
    // jieba alone glues 从 to 凌霄: the query's words are not the article's.
    let without = path("news");
    let made = ingest(None, &without);
    assert!(made.status.success(), "{}", stderr(&made));
    assert_eq!(hits(&without), Some(0));

    // Settings naming another dictionary than an index's own are refused.
    std::fs::write(path("words.txt"), "滨江智联\n").unwrap();
    for (index, says) in [
        (
            &with,
            "the index keeps the user dictionary it was made with",
        ),
        (&without, "this index was made without one"),
    ] {
        let refused = ingest(Some("settings.toml"), index);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(stderr(&refused).contains(says), "{}", stderr(&refused));
    }
    // The same words written otherwise (a comment, traditional characters) are the same.
    std::fs::write(path("words.txt"), "# 芯片\n凌霄微电子\n").unwrap();
    let again = ingest(Some("settings.toml"), &with);
    assert!(again.status.success(), "{}", stderr(&again));

    // A bad line is refused by number, in the user dictionary's name, and nothing is made.
    std::fs::write(path("words.txt"), "凌霄微电子\n凌霄 many\n").unwrap();
    let refused = ingest(Some("settings.toml"), &path("news-bad"));
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("cannot use the user dictionary")
            && stderr(&refused)
                .contains(r#"line 2: the frequency "many" of "凌霄" is not a whole number"#),
        "{}",
        stderr(&refused)
    );
    assert!(!Path::new(&path("news-bad")).exists());
}
