//! Damaged sketch chunks (issue 33): the files under `forest/` that hold default mode's sketch
//! records. The checkpoint records a checksum of what it covers of each one, so a chunk zeroed,
//! overwritten or cut while the index was closed is refused on open and every insert replayed
//! (reposts then still join their stories); bytes changed under an open index never panic a
//! write; `check` compares the chunks' sketches with the documents' `_sketch` column.
//!
//! The stories are random characters, so that no two share a shingle.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use tantivy_dedup::engine::{DedupIndex, FOREST_DIR, check_index};
use tantivy_dedup::{Article, Fingerprint};

use super::{SOURCES, config};

/// What the stories are written with.
const CHARACTERS: &str = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可\
    主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理\
    起小物现实加量都两体制机当使点从业本去把性好应开合还因由其些然前外天政四日那社义事平形相全表\
    间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情";

/// Stories indexed before the damage.
const STORIES: usize = 60;

const BASE_TIME: i64 = 1_700_000_000;

/// The sentences of story `n`: twelve of twenty to thirty random characters.
fn sentences(n: usize) -> Vec<String> {
    let characters: Vec<char> = CHARACTERS.chars().collect();
    let mut rng = SmallRng::seed_from_u64(n as u64);
    (0..12)
        .map(|_| {
            let mut sentence: String = (0..rng.random_range(20..=30))
                .map(|_| characters[rng.random_range(0..characters.len())])
                .collect();
            sentence.push('。');
            sentence
        })
        .collect()
}

/// The first article of story `n`, a minute after story `n - 1`'s.
fn original(n: usize) -> Article {
    Article {
        id: format!("story-{n}"),
        title: Some(format!("第{n}号稿件")),
        content: sentences(n).concat(),
        source: Some(SOURCES[n % SOURCES.len()].to_owned()),
        url: None,
        published_at: Some(BASE_TIME + 60 * n as i64),
    }
}

/// A repost of story `n` under `id`, at `time`: an outlet's header, a sentence left out and an
/// editor's line.
fn repost(n: usize, id: &str, time: i64) -> Article {
    let mut sentences = sentences(n);
    sentences.remove(3);
    let source = SOURCES[(n + 1) % SOURCES.len()];
    Article {
        id: id.to_owned(),
        title: None,
        content: format!("【{source}讯】{}（责任编辑：王明）", sentences.concat()),
        source: Some(source.to_owned()),
        url: None,
        published_at: Some(time),
    }
}

/// An index of [`STORIES`] stories in `path`, closed (so its checkpoint names the chunk files);
/// each story's root.
fn indexed(path: &Path) -> Vec<Fingerprint> {
    let mut index = DedupIndex::create(path, config()).unwrap();
    let roots = (0..STORIES)
        .map(|n| index.add_article(original(n)).unwrap().root)
        .collect();
    index.commit().unwrap();
    index.close().unwrap();
    roots
}

/// The sketch chunk files of the index in `path`.
fn chunk_files(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(path.join(FOREST_DIR))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|file| {
            file.extension()
                .is_some_and(|extension| extension == "sketches")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "default mode keeps sketch chunk files");
    files
}

/// Writes `bytes` over the start of every chunk file of `path`, where its records are.
fn overwrite_chunks(path: &Path, bytes: &[u8]) {
    for file in chunk_files(path) {
        let file = fs::OpenOptions::new().write(true).open(file).unwrap();
        file.write_all_at(bytes, 0).unwrap();
    }
}

/// `len` bytes of a seeded generator.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    SmallRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

/// Asserts that opening `path` refused its checkpoint because of the chunk file `chunk`, and
/// replayed every insert instead.
fn assert_replayed_for(index: &DedupIndex, chunk: &Path, inserts: u64) {
    let recovery = index.recovery();
    let refused = recovery.checkpoint_refused.as_deref().unwrap_or_default();
    let name = chunk.file_name().unwrap().to_string_lossy();
    assert!(
        refused.contains(name.as_ref()),
        "the refusal should name the chunk file {name}: {recovery:?}"
    );
    assert_eq!(recovery.checkpoint_sequence, None, "{recovery:?}");
    assert_eq!(recovery.replayed, inserts, "{recovery:?}");
}

/// Posts a repost of every story (ids `{prefix}-{n}`, after the stories) and asserts that each
/// joins its story.
fn assert_reposts_join(index: &mut DedupIndex, roots: &[Fingerprint], prefix: &str) {
    let strays: Vec<usize> = (0..STORIES)
        .filter(|&n| {
            let time = BASE_TIME + 60 * (STORIES + n) as i64;
            let decision = index
                .add_article(repost(n, &format!("{prefix}-{n}"), time))
                .unwrap();
            decision.root != roots[n] || !decision.duplicate
        })
        .collect();
    assert!(
        strays.is_empty(),
        "{} of {STORIES} reposts were decided new stories: {strays:?}",
        strays.len()
    );
}

#[test]
fn zeroed_sketch_chunks_are_refused_on_open_and_reposts_still_join_their_stories() {
    // The attacker's report: 6 MiB of zeros over the chunk files passed start-up, then every
    // repost was decided a new story (a zeroed record reads as a sketch of nothing).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let roots = indexed(&path);
    let chunk = chunk_files(&path).remove(0);
    overwrite_chunks(&path, &vec![0; 6 << 20]);

    let mut index = DedupIndex::open(&path).unwrap();
    assert_reposts_join(&mut index, &roots, "repost");
    let refused = index
        .recovery()
        .checkpoint_refused
        .clone()
        .unwrap_or_default();
    assert!(refused.contains("checksum"), "{refused}");
    assert_replayed_for(&index, &chunk, STORIES as u64);
    index.commit().unwrap();
    index.close().unwrap();
}

#[test]
fn random_or_cut_sketch_chunks_are_refused_on_open() {
    let dir = tempfile::tempdir().unwrap();
    for damage in ["random", "cut"] {
        let path = dir.path().join(damage);
        let roots = indexed(&path);
        let chunk = chunk_files(&path).remove(0);
        match damage {
            "random" => overwrite_chunks(&path, &random_bytes(33, 1 << 20)),
            _ => fs::OpenOptions::new()
                .write(true)
                .open(&chunk)
                .unwrap()
                .set_len(4096)
                .unwrap(),
        }
        let mut index = DedupIndex::open(&path).unwrap();
        assert_reposts_join(&mut index, &roots, "repost");
        assert_replayed_for(&index, &chunk, STORIES as u64);
        index.close().unwrap();
    }
}

#[test]
fn a_sketch_chunk_damaged_under_an_open_index_fails_no_write() {
    // Random bytes over the records of an open index's chunk (its mapping sees them): no read
    // may run past the chunk or panic, and every write is answered; the stories' sketches are
    // unreadable, so their reposts may start stories of their own. Reopening then finds the
    // damage and replays every insert.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    indexed(&path);
    let mut index = DedupIndex::open(&path).unwrap();
    assert!(index.recovery().checkpoint_sequence.is_some());
    let chunk = chunk_files(&path).remove(0);
    overwrite_chunks(&path, &random_bytes(34, 1 << 20));
    for n in 0..STORIES {
        let time = BASE_TIME + 60 * (STORIES + n) as i64;
        index
            .add_article(repost(n, &format!("repost-{n}"), time))
            .unwrap();
    }
    // A story four hours later: every damaged node leaves the three-hour window, and its
    // record is released.
    let late = STORIES * 10;
    let mut story = original(late);
    story.published_at = Some(BASE_TIME + 4 * 3600);
    let late_root = index.add_article(story).unwrap().root;
    index.commit().unwrap();
    index.close().unwrap();

    let mut index = DedupIndex::open(&path).unwrap();
    assert_replayed_for(&index, &chunk, 2 * STORIES as u64 + 1);
    let decision = index
        .add_article(repost(late, "late-repost", BASE_TIME + 4 * 3600 + 60))
        .unwrap();
    assert_eq!(decision.root, late_root);
    index.close().unwrap();
}

#[test]
fn check_compares_the_chunks_sketches_with_the_sketch_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    indexed(&path);
    let report = check_index(&path).unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.sketches_compared, STORIES as u64);

    let chunk = chunk_files(&path).remove(0);
    let name = chunk.file_name().unwrap().to_string_lossy().into_owned();
    overwrite_chunks(&path, &vec![0; 6 << 20]);
    let report = check_index(&path).unwrap();
    let problems: Vec<String> = report
        .damaged
        .iter()
        .map(|damage| format!("{}: {}", damage.path.display(), damage.problem))
        .collect();
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains(&name) && problem.contains("checksum")),
        "the chunk file should be named: {problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains(&format!("{STORIES} documents"))
                && problem.contains("story-0")
                && problem.contains("forest.checkpoint")),
        "the documents whose sketches differ should be counted and named: {problems:?}"
    );

    fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let report = check_index(&path).unwrap();
    assert!(
        report
            .damaged
            .iter()
            .any(|damage| damage.path == chunk && damage.problem.contains("long")),
        "{report:?}"
    );
}
