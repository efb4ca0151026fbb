//! Damage and drift (issue 14): an index directory that lost files, whose files were cut, or
//! whose settings file was emptied is refused with a message that names what is wrong, never
//! opened as something else; temporaries left by a crash are removed when a writer opens it.

use std::fs;
use std::path::{Path, PathBuf};

use tantivy_dedup::Mode;
use tantivy_dedup::config::Config;
use tantivy_dedup::engine::{DedupIndex, DedupSearcher, SETTINGS_FILE, check_index};

use super::{config, run, workload};

/// Builds an index of the first `steps` steps of a workload in `path`, committed and closed;
/// returns its live documents.
fn built(path: &Path, config: Config, steps: usize) -> u64 {
    let mut index = DedupIndex::create(path, config).unwrap();
    // Seed 7 deletes a document whose node then expires and is made again by a later insert:
    // the replay `check` compares with must take it off where the writer did.
    run(&mut index, &workload(7, steps));
    index.commit().unwrap();
    let documents = index.searcher().stats().unwrap().documents;
    index.close().unwrap();
    documents
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The first file in `dir` (by name) whose name ends with `.{extension}`.
fn file_with_extension(dir: &Path, extension: &str) -> PathBuf {
    let name = names(dir)
        .into_iter()
        .find(|name| name.ends_with(&format!(".{extension}")))
        .unwrap_or_else(|| panic!("no .{extension} file in {}", dir.display()));
    dir.join(name)
}

/// The messages of the errors of several ways of opening `path`, each of which must fail.
fn refusals(path: &Path) -> Vec<String> {
    [
        DedupIndex::open(path).err(),
        DedupIndex::open_or_create(path, None).err(),
        DedupSearcher::open(path).err(),
    ]
    .into_iter()
    .enumerate()
    .map(|(way, error)| {
        error
            .unwrap_or_else(|| panic!("opening way {way} should be refused"))
            .to_string()
    })
    .collect()
}

#[test]
fn a_directory_with_index_files_but_no_meta_json_is_never_made_a_new_index() {
    // Creating an index where one lost its meta.json would let Tantivy's first commit delete
    // every old segment file: the directory is refused instead, and nothing in it changes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let documents = built(&path, config(), 300);
    let meta = fs::read(path.join("meta.json")).unwrap();
    let settings = fs::read(path.join(SETTINGS_FILE)).unwrap();
    fs::remove_file(path.join("meta.json")).unwrap();
    let before = names(&path);

    let mut messages = refusals(&path);
    messages.push(
        DedupIndex::open_or_create(&path, Some(config()))
            .err()
            .expect("no index is created over index files")
            .to_string(),
    );
    messages.push(
        DedupIndex::create(&path, config())
            .err()
            .expect("no index is created over index files")
            .to_string(),
    );
    let store = file_with_extension(&path, "store");
    let store = store.file_name().unwrap().to_string_lossy();
    for message in &messages {
        assert!(
            message.contains(&path.display().to_string())
                && message.contains("meta.json")
                && message.contains(store.as_ref()),
            "the message should name the directory, meta.json and the files found: {message}"
        );
    }
    assert_eq!(names(&path), before, "nothing was written or deleted");
    assert_eq!(fs::read(path.join(SETTINGS_FILE)).unwrap(), settings);

    // With meta.json back, every document is there.
    fs::write(path.join("meta.json"), meta).unwrap();
    let index = DedupIndex::open(&path).unwrap();
    assert_eq!(index.searcher().stats().unwrap().documents, documents);
}

#[test]
fn a_missing_or_cut_segment_file_is_refused_at_open_with_its_name() {
    // Tantivy opens a segment without its .pos file (every phrase query then fails), and reads
    // a file's footer only when it first opens it: the open checks each file of the last
    // commit instead, and names the one that is missing or too short.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let documents = built(&path, config(), 300);
    for (extension, remove) in [
        ("pos", true),
        ("store", false),
        ("fast", false),
        ("term", true),
    ] {
        let file = file_with_extension(&path, extension);
        let bytes = fs::read(&file).unwrap();
        if remove {
            fs::remove_file(&file).unwrap();
        } else {
            fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        }
        let name = file.file_name().unwrap().to_string_lossy();
        for message in refusals(&path) {
            assert!(
                message.contains(name.as_ref()) && message.contains("tantivy-dedup check"),
                "{extension}: the message should name the file and the check: {message}"
            );
        }
        fs::write(&file, &bytes).unwrap();
    }
    let index = DedupIndex::open(&path).unwrap();
    assert_eq!(index.searcher().stats().unwrap().documents, documents);
}

/// `text` without the lines for which `drop` holds.
fn without_lines(text: &str, mut drop: impl FnMut(&str) -> bool) -> String {
    text.lines()
        .filter(|line| !drop(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn an_emptied_or_partial_settings_file_is_refused_not_defaulted() {
    // An emptied settings file used to open a seed-mode index in default mode, and a key left
    // out took its default: either changes every later decision.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let mut seed = config();
    seed.dedup.mode = Mode::Seed;
    built(&path, seed, 200);
    let settings = path.join(SETTINGS_FILE);
    let text = fs::read_to_string(&settings).unwrap();
    for (damaged, missing) in [
        (String::new(), vec!["mode", "max_distance", "window"]),
        ("\n# emptied\n".to_owned(), vec!["mode", "max_distance"]),
        (
            without_lines(&text, |line| line.starts_with("mode =")),
            vec!["mode"],
        ),
        (
            without_lines(&text, |line| {
                line.starts_with("window =") || line.starts_with("min_figure_containment =")
            }),
            vec!["window", "min_figure_containment"],
        ),
        (
            without_lines(&text, |line| !line.starts_with("[index]")),
            vec!["[dedup]"],
        ),
    ] {
        fs::write(&settings, &damaged).unwrap();
        for message in refusals(&path) {
            assert!(
                message.contains(SETTINGS_FILE) && missing.iter().all(|key| message.contains(key)),
                "{damaged:?}: the message should name the file and {missing:?}: {message}"
            );
        }
    }
    fs::write(&settings, &text).unwrap();
    assert_eq!(
        DedupIndex::open(&path).unwrap().config().dedup.mode,
        Mode::Seed
    );
}

#[test]
fn fields_left_out_of_the_settings_file_are_caught_by_the_schema_check() {
    // `[fields]` may take its defaults in an index's settings file: every field option shapes
    // the Tantivy schema, which meta.json records, so a drifted field is refused anyway.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let mut custom = config();
    custom.fields.url.indexed = Some(true);
    built(&path, custom, 50);
    let settings = path.join(SETTINGS_FILE);
    let text = fs::read_to_string(&settings).unwrap();
    let mut in_fields = false;
    let without_fields = without_lines(&text, |line| {
        if line.starts_with('[') {
            in_fields = line.starts_with("[fields");
        }
        in_fields
    });
    assert!(!without_fields.contains("url"), "{without_fields}");
    fs::write(&settings, without_fields).unwrap();
    for message in refusals(&path) {
        assert!(
            message.contains("schema") && message.contains("url"),
            "{message}"
        );
    }
}

#[test]
fn temporaries_left_by_a_crash_are_removed_when_a_writer_opens_and_nothing_else() {
    // Tantivy's atomic writes (and tantivy-dedup's own) go through a temporary file named
    // `.tmp` and six letters or digits; kill -9 leaves it behind.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    built(&path, config(), 50);
    let temporaries = [".tmpAb12Cd", ".tmp0x9YZ7"];
    let others = [
        ".tmp",
        ".tmpAb12C",
        ".tmpAb12Cde",
        ".tmpAb-2Cd",
        ".tmpAb12Cd.bak",
        "tmpAb12Cd",
        "notes.tmp",
    ];
    for name in temporaries.iter().chain(&others) {
        fs::write(path.join(name), b"half written").unwrap();
    }
    fs::create_dir(path.join(".tmpDir123")).unwrap();

    // A reader never removes them: a writer in another process may be writing one.
    DedupSearcher::open(&path).unwrap();
    for name in temporaries {
        assert!(path.join(name).exists(), "{name}");
    }
    let index = DedupIndex::open(&path).unwrap();
    for name in temporaries {
        assert!(!path.join(name).exists(), "{name} should be removed");
    }
    for name in others.iter().chain(&[".tmpDir123"]) {
        assert!(path.join(name).exists(), "{name} is not a temporary");
    }
    index.close().unwrap();
}

#[test]
fn check_reads_a_sound_index_whole_and_names_each_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    built(&path, config(), 300);
    let searcher = DedupSearcher::open(&path).unwrap();
    let stats = searcher.stats().unwrap();
    assert!(stats.tombstones > 0, "the workload deletes and replaces");
    let records: u64 = searcher
        .tantivy_searcher()
        .segment_readers()
        .iter()
        .map(|segment| u64::from(segment.max_doc()))
        .sum();
    drop(searcher);

    let report = check_index(&path).unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(
        (report.documents, report.tombstones),
        (stats.documents, stats.tombstones)
    );
    // Deleted documents stay in their segments until a merge.
    assert_eq!(report.stored_documents, records);
    let replay = report.replay.expect("a sound index is replayed");
    assert_eq!(replay.replayed, stats.documents + stats.tombstones);
    assert_eq!(replay.mismatched_roots, 0);
    assert!(report.files >= 6 * report.segments && report.fast_values > 0);
    assert!(
        names(&path).iter().any(|name| name.ends_with(".del")),
        "deleted documents are recorded: {:?}",
        names(&path)
    );

    // Garbage inside a document store: every open still works (only its footer is read, and
    // the replay reads fast fields), and the check names it and skips the replay.
    let store = file_with_extension(&path, "store");
    let mut bytes = fs::read(&store).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&store, &bytes).unwrap();
    DedupIndex::open(&path).unwrap().close().unwrap();
    let report = check_index(&path).unwrap();
    assert_eq!(
        report
            .damaged
            .iter()
            .map(|damage| &damage.path)
            .collect::<Vec<_>>(),
        [&store],
        "{report:?}"
    );
    assert!(report.damaged[0].problem.contains("checksum"), "{report:?}");
    assert_eq!(report.replay, None);

    // The check needs the index to itself.
    let writer = DedupIndex::open(&path).unwrap();
    let busy = check_index(&path).unwrap_err().to_string();
    assert!(busy.contains("another process is writing"), "{busy}");
    writer.close().unwrap();
}
