//! Recovery (docs/algorithm.md, "Recovery"): reopening an index rebuilds the forest from the index
//! itself, so the
//! decisions after a restart equal those of a run without one, with deletes, replacements,
//! expiry and documents that were never committed.
//!
//! The stories are generated from invented sentences.

use std::path::Path;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tantivy_dedup::config::Config;
use tantivy_dedup::engine::{CHECKPOINT_FILE, DedupIndex, DedupSearcher, FOREST_DIR, check_index};
use tantivy_dedup::{Article, Change, Decision, Deduplicator, Fingerprint};

mod damage;
mod sketch_chunks;

const SENTENCES: &[&str] = &[
    "市气象台今天上午发布暴雨蓝色预警信号，预计未来六小时内全市大部分地区将出现强降水。",
    "交通部门提醒广大市民雨天出行注意安全，尽量避开低洼积水路段，减速慢行。",
    "据了解，今年以来全市新开工重点项目一百二十个，完成投资同比增长百分之十一。",
    "区教育局表示，秋季学期将新增公办学位三千个，缓解城区学校入学压力。",
    "农业农村部门组织技术人员深入田间地头，指导农户做好晚稻病虫害防治工作。",
    "市场监管部门开展食品安全专项检查，抽检样品四百余批次，合格率达到百分之九十八。",
    "该公司负责人介绍，新生产线投产后年产能将提高一倍，带动就业岗位五百余个。",
    "文化旅游节期间，景区共接待游客二十八万人次，实现旅游收入一点六亿元。",
    "卫生健康委员会提醒，近期流感进入高发期，老人和儿童应及时接种疫苗。",
    "铁路部门宣布，新开通的城际列车将两地通行时间缩短至四十分钟以内。",
    "社区志愿者上门为独居老人送去米面油等生活物资，并帮助检查家中用电安全。",
    "环保部门通报，上半年全市空气质量优良天数比例同比上升五个百分点。",
    "科技企业孵化器今年累计引进创新团队三十六个，申请发明专利二百余项。",
    "消防救援支队在商业综合体开展应急疏散演练，检验预案的科学性和可操作性。",
    "图书馆推出夜间开放服务，每周五和周六延长开放时间至晚上十点。",
    "港口集装箱吞吐量连续三个月保持增长，外贸进出口形势总体平稳。",
];

pub(crate) const SOURCES: &[&str] = &["新华网", "人民网", "央视网", "澎湃新闻", "本地日报"];

/// One step of a workload.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Add(Article),
    Delete(String),
}

/// A workload: stories of six to ten sentences, each reposted with small edits (a sentence
/// dropped, swapped or added, a header), some ids re-sent with other text, some deleted, about
/// one document in ten undated, and event times spread over several windows so that clusters
/// expire during the run.
pub(crate) fn workload(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut stories: Vec<Vec<usize>> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    let mut time = 1_700_000_000i64;
    let mut workload = Vec::with_capacity(steps);
    for step in 0..steps {
        time += rng.random_range(0..600);
        if !ids.is_empty() && rng.random_bool(0.05) {
            let id = ids[rng.random_range(0..ids.len())].clone();
            workload.push(Step::Delete(id));
            continue;
        }
        let story = if stories.is_empty() || rng.random_bool(0.3) {
            let length = rng.random_range(6..=10);
            stories.push(
                (0..length)
                    .map(|_| rng.random_range(0..SENTENCES.len()))
                    .collect(),
            );
            stories.len() - 1
        } else {
            rng.random_range(0..stories.len())
        };
        let mut sentences = stories[story].clone();
        match rng.random_range(0..4) {
            0 => {}
            1 => {
                sentences.remove(rng.random_range(0..sentences.len()));
            }
            2 => {
                let at = rng.random_range(0..sentences.len());
                sentences[at] = rng.random_range(0..SENTENCES.len());
            }
            _ => sentences.push(rng.random_range(0..SENTENCES.len())),
        }
        let mut content: String = sentences.iter().map(|&i| SENTENCES[i]).collect();
        if rng.random_bool(0.3) {
            content = format!("<p>（{}讯）</p>{content}", SOURCES[step % SOURCES.len()]);
        }
        let id = if !ids.is_empty() && rng.random_bool(0.05) {
            ids[rng.random_range(0..ids.len())].clone()
        } else {
            format!("doc-{step}")
        };
        ids.push(id.clone());
        workload.push(Step::Add(Article {
            id,
            title: Some(format!("第{step}号稿件")),
            content,
            source: Some(SOURCES[rng.random_range(0..SOURCES.len())].to_owned()),
            url: Some(format!("https://news.example/{step}")),
            // The first document is dated, so undated ones never fall back to the wall clock.
            published_at: (step == 0 || !rng.random_bool(0.1)).then_some(time),
        }));
    }
    workload
}

pub(crate) fn config() -> Config {
    let mut config = Config::default();
    // Short enough that clusters expire during the workload.
    config.dedup.window = Duration::from_secs(3 * 3600);
    config.index.writer_threads = Some(1);
    config.index.writer_memory_mb = 20;
    config
}

/// [`config`] with a forest checkpoint every `inserts` inserts.
fn checkpointing_every(inserts: u64) -> Config {
    let mut config = config();
    config.index.checkpoint_inserts = inserts;
    config
}

/// Runs steps on an index; returns the root each added document was given (`None` for a
/// delete).
pub(crate) fn run(index: &mut DedupIndex, steps: &[Step]) -> Vec<Option<Fingerprint>> {
    steps
        .iter()
        .map(|step| match step {
            Step::Add(article) => Some(index.add_article(article.clone()).unwrap().root),
            Step::Delete(id) => {
                index.delete(id).unwrap();
                None
            }
        })
        .collect()
}

#[test]
fn reopening_gives_the_decisions_of_an_uninterrupted_run() {
    let steps = workload(1, 600);
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config()).unwrap();
    let expected = run(&mut straight, &steps);
    straight.commit().unwrap();
    assert!(
        straight.forest().stats().expired > 0,
        "the workload should make clusters expire"
    );

    assert_reopening_gives(dir.path(), &steps, &expected, &[1, 150, 299, 451]);
}

/// Runs `steps` on fresh indexes under `dir`, each closed after `split` of them (for each
/// of `splits`) and opened again for the rest; asserts that each gives the `expected` roots.
fn assert_reopening_gives(
    dir: &Path,
    steps: &[Step],
    expected: &[Option<Fingerprint>],
    splits: &[usize],
) {
    for &split in splits {
        let path = dir.join(format!("split-{split}"));
        let mut index = DedupIndex::create(&path, config()).unwrap();
        let mut roots = run(&mut index, &steps[..split]);
        index.commit().unwrap();
        index.close().unwrap();

        let mut index = DedupIndex::open(&path).unwrap();
        let recovery = index.recovery().clone();
        assert_eq!(recovery.mismatched_roots, 0, "split {split}: {recovery:?}");
        roots.extend(run(&mut index, &steps[split..]));
        assert_eq!(roots, expected, "split at {split}");
        index.forest().check_invariants().unwrap();
    }
}

/// Runs steps on an index, committing after every `every` steps; the roots, as [`run`].
fn run_committing(
    index: &mut DedupIndex,
    steps: &[Step],
    every: usize,
) -> Vec<Option<Fingerprint>> {
    let mut roots = Vec::new();
    for part in steps.chunks(every) {
        roots.extend(run(index, part));
        index.commit().unwrap();
    }
    roots
}

#[test]
fn a_dropped_index_leaves_no_thread_of_it_writing() {
    // Dropped without `close`, as a crash would leave it, right after a commit that starts a
    // merge: what was not committed is lost, but the merge finishes before the drop returns.
    // Otherwise it could still save the index's metadata and delete the merged segments while
    // the next writer opens, in the same process. Tantivy's default merge policy merges eight
    // segments of one size, and a commit makes one (one writer thread): the merges start at
    // the 8th and the 15th commit, the last here. Long articles make the merge take a while;
    // without the wait, the files change after the drop.
    let steps: Vec<Step> = workload(4, 375)
        .into_iter()
        .map(|step| match step {
            Step::Add(mut article) => {
                article.content = article.content.repeat(40);
                Step::Add(article)
            }
            delete => delete,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dropped");
    let mut index = DedupIndex::create(&path, config()).unwrap();
    run_committing(&mut index, &steps, 25);
    drop(index);
    let files = || {
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        files.sort();
        files
    };
    let at_drop = files();
    for _ in 0..500 {
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(files(), at_drop, "files changed after the drop returned");
    }
}

/// Copies an index directory without its forest checkpoint, so that opening the copy replays
/// every insert.
fn copy_without_checkpoint(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_checkpoint_and_the_inserts_after_it_rebuild_the_forest_of_a_full_replay() {
    // Checkpoints every 50 inserts at commits every 40 steps; the process then dies without
    // closing, so reopening loads the last checkpoint and replays the inserts after it,
    // including deletes made since of documents the checkpoint holds. Tombstones are kept,
    // so that the full replay it is compared with is exact.
    let steps = workload(3, 600);
    let mut config = checkpointing_every(50);
    config.index.prune_tombstones = false;
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config.clone()).unwrap();
    let expected = run(&mut straight, &steps);

    for split in [130, 333, 517] {
        let path = dir.path().join(format!("split-{split}"));
        let mut index = DedupIndex::create(&path, config.clone()).unwrap();
        let mut roots = run_committing(&mut index, &steps[..split], 40);
        drop(index);

        let full = dir.path().join(format!("full-{split}"));
        copy_without_checkpoint(&path, &full);
        let replayed = DedupIndex::open(&full).unwrap();
        assert_eq!(replayed.recovery().checkpoint_sequence, None);

        let mut index = DedupIndex::open(&path).unwrap();
        let recovery = index.recovery().clone();
        let from = recovery
            .checkpoint_sequence
            .expect("a checkpoint was saved");
        assert!(
            from > 0 && recovery.replayed < replayed.recovery().replayed,
            "{recovery:?}"
        );
        assert_eq!(recovery.mismatched_roots, 0, "split {split}: {recovery:?}");
        assert_eq!(
            index.forest().nodes_in_order(),
            replayed.forest().nodes_in_order(),
            "split {split}"
        );
        let counts = |index: &DedupIndex| {
            let stats = index.forest().stats();
            (stats.nodes, stats.roots, stats.expired)
        };
        assert_eq!(counts(&index), counts(&replayed), "split {split}");

        roots.extend(run(&mut index, &steps[split..]));
        assert_eq!(roots, expected, "split at {split}");
        index.forest().check_invariants().unwrap();
    }
}

#[test]
fn a_replay_takes_each_deleted_document_off_where_the_writer_did() {
    // In these workloads a node expires after a document on it was deleted, and a later
    // insert makes a node of the same value. A replay that took every delete off at its end
    // took that one off the new node: the forest differed from the writer's, and `check`
    // called the sound checkpoint damaged. Each tombstone records the insert its delete came
    // before (`_deleted_at`), and the replay takes it off there. Commits every 40 steps and a
    // checkpoint every 100 inserts, and the process dies without closing: reopening loads a
    // checkpoint and replays what came after it, deletes of documents it holds among them.
    for seed in 5..=11 {
        let steps = workload(seed, 400);
        let mut config = checkpointing_every(100);
        config.index.prune_tombstones = false;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut index = DedupIndex::create(&path, config).unwrap();
        run_committing(&mut index, &steps, 40);
        let writers = index.forest().nodes_in_order();
        drop(index);

        let full = dir.path().join("full");
        copy_without_checkpoint(&path, &full);
        let replayed = DedupIndex::open(&full).unwrap();
        let recovery = replayed.recovery();
        assert_eq!(
            (recovery.checkpoint_sequence, recovery.deletes_at_end),
            (None, 0)
        );
        assert_eq!(replayed.forest().nodes_in_order(), writers, "seed {seed}");
        drop(replayed);
        let reopened = DedupIndex::open(&path).unwrap();
        assert!(reopened.recovery().checkpoint_sequence.is_some());
        assert_eq!(reopened.forest().nodes_in_order(), writers, "seed {seed}");
        drop(reopened);
        let report = check_index(&path).unwrap();
        assert!(
            report.damaged.is_empty() && report.checkpoint_replay.is_some(),
            "seed {seed}: {report:?}"
        );
    }
}

#[test]
fn check_of_an_index_made_before_deleted_at_leaves_node_counts_out() {
    // Its schema has no `_deleted_at` (taken out of the empty index's meta.json, as a build
    // before it wrote it), so its deletes are replayed at the end. Seed 9 then gives a full
    // replay whose node counts differ from the checkpoint's: not damage, and `check` says
    // why it does not compare them.
    let mut config = checkpointing_every(100);
    config.index.prune_tombstones = false;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    DedupIndex::create(&path, config).unwrap().close().unwrap();
    let meta_file = path.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_file).unwrap()).unwrap();
    let fields = meta["schema"].as_array_mut().unwrap();
    let before = fields.len();
    fields.retain(|field| field["name"] != "_deleted_at");
    assert_eq!(fields.len(), before - 1);
    std::fs::write(&meta_file, serde_json::to_vec(&meta).unwrap()).unwrap();

    let mut index = DedupIndex::open(&path).unwrap();
    run_committing(&mut index, &workload(9, 400), 40);
    drop(index);
    let report = check_index(&path).unwrap();
    let replay = report.replay.as_ref().unwrap();
    assert!(replay.deletes_at_end > 0, "{report:?}");
    assert!(
        report.damaged.is_empty() && report.checkpoint_replay.is_some(),
        "{report:?}"
    );
}

#[test]
fn a_damaged_checkpoint_is_refused_and_every_insert_replayed() {
    let steps = workload(4, 300);
    let mut config = checkpointing_every(100);
    // Kept tombstones: the full replay that replaces the checkpoint is then exact.
    config.index.prune_tombstones = false;
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config.clone()).unwrap();
    let expected = run(&mut straight, &steps);

    let path = dir.path().join("damaged");
    let mut index = DedupIndex::create(&path, config).unwrap();
    let mut roots = run_committing(&mut index, &steps[..200], 50);
    index.close().unwrap();
    let checkpoint = path.join(FOREST_DIR).join(CHECKPOINT_FILE);
    let mut bytes = std::fs::read(&checkpoint).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&checkpoint, bytes).unwrap();

    let mut index = DedupIndex::open(&path).unwrap();
    let recovery = index.recovery().clone();
    assert_eq!(recovery.checkpoint_sequence, None);
    assert!(recovery.checkpoint_refused.is_some(), "{recovery:?}");
    assert_eq!(recovery.mismatched_roots, 0);
    assert_eq!(recovery.pruned_inserts, 0);
    roots.extend(run(&mut index, &steps[200..]));
    assert_eq!(roots, expected);
}

/// The names and contents of the files of `dir`.
fn files_of(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name(), std::fs::read(entry.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Tombstones counted by the index's statistics.
fn tombstones(path: &Path) -> u64 {
    DedupSearcher::open(path)
        .unwrap()
        .stats()
        .unwrap()
        .tombstones
}

#[test]
fn pruning_tombstones_a_checkpoint_holds_keeps_restart_equal_to_no_restart() {
    // Checkpoints every 50 inserts at commits every 20 steps, clusters expiring within the
    // run: the commits after each checkpoint prune the old tombstones it lists. The writer
    // dies without closing eight times; each reopening loads the checkpoint, prunes at its
    // first commit what that checkpoint lists (not the deletes made after it), and gives the
    // forest of an uninterrupted run, node by node. Only a full replay (the checkpoint
    // removed) misses the pruned inserts, and `check` says so.
    let mut steps = workload(5, 800);
    // Pairs of restarts a few steps apart: the first reopening prunes at its first commit,
    // and the second loads the same checkpoint again. Just before the first of each pair:
    // deletes of the three newest documents, and an old document reposted word for word (so
    // its node is still in the window) and then deleted. None of these tombstones is listed
    // by the checkpoint, and the old one is older than the window: the prune must leave them
    // all, or the second reopening cannot take their documents off their nodes.
    let mut restarts = vec![150, 155, 333, 338, 517, 522, 650, 800];
    for pair in (0..3).rev() {
        let at = restarts[2 * pair];
        let added = |step: &Step| match step {
            Step::Add(article) => Some(article.clone()),
            Step::Delete(_) => None,
        };
        let mut inserted: Vec<Step> = steps[..at]
            .iter()
            .rev()
            .filter_map(added)
            .take(3)
            .map(|article| Step::Delete(article.id))
            .collect();
        let newest_time = steps[..at]
            .iter()
            .filter_map(added)
            .filter_map(|article| article.published_at)
            .max()
            .unwrap();
        let touched_later = |id: &str, from: usize| {
            steps[from..at].iter().any(|step| match step {
                Step::Add(article) => article.id == id,
                Step::Delete(deleted) => deleted == id,
            })
        };
        let old = (0..at)
            .filter_map(|i| added(&steps[i]).map(|article| (i, article)))
            .find(|(i, article)| {
                article
                    .published_at
                    .is_some_and(|time| time < newest_time - 4 * 3600)
                    && !touched_later(&article.id, i + 1)
                    && !inserted
                        .iter()
                        .any(|step| matches!(step, Step::Delete(id) if *id == article.id))
            })
            .map(|(_, article)| article)
            .expect("an old document still live");
        inserted.push(Step::Add(Article {
            id: format!("repost-{at}"),
            published_at: Some(newest_time),
            ..old.clone()
        }));
        inserted.push(Step::Delete(old.id));
        let count = inserted.len();
        steps.splice(at..at, inserted);
        for later in &mut restarts[2 * pair..] {
            *later += count;
        }
    }
    let config = checkpointing_every(50);
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config.clone()).unwrap();
    let path = dir.path().join("pruned");
    let mut index = DedupIndex::create(&path, config.clone()).unwrap();
    let mut done = 0;
    let mut loaded = None;
    for (number, restart) in restarts.into_iter().enumerate() {
        let expected = run(&mut straight, &steps[done..restart]);
        let roots = run_committing(&mut index, &steps[done..restart], 20);
        assert_eq!(roots, expected, "up to {restart}");
        done = restart;
        drop(index);
        index = DedupIndex::open(&path).unwrap();
        let recovery = index.recovery().clone();
        if number % 2 == 1 && number < 6 {
            assert_eq!(recovery.checkpoint_sequence, loaded, "at {restart}");
        }
        loaded = recovery.checkpoint_sequence;
        assert!(loaded.is_some(), "{recovery:?}");
        assert_eq!(
            (recovery.mismatched_roots, recovery.pruned_inserts),
            (0, 0),
            "at {restart}: {recovery:?}"
        );
        // Node by node, document counts included (a delete made after a checkpoint of an
        // insert it holds changes only a count).
        assert_eq!(
            index.forest().nodes_in_order(),
            straight.forest().nodes_in_order(),
            "at {restart}"
        );
        index.forest().check_invariants().unwrap();
    }
    drop(index);

    let mut kept = config;
    kept.index.prune_tombstones = false;
    let unpruned = dir.path().join("unpruned");
    let mut index = DedupIndex::create(&unpruned, kept).unwrap();
    run_committing(&mut index, &steps, 20);
    drop(index);
    assert!(
        tombstones(&path) < tombstones(&unpruned) / 2,
        "{} tombstones kept, {} without pruning",
        tombstones(&path),
        tombstones(&unpruned)
    );

    let before = files_of(&path.join(FOREST_DIR));
    let report = check_index(&path).unwrap();
    assert_eq!(
        files_of(&path.join(FOREST_DIR)),
        before,
        "check changed forest/"
    );
    assert!(report.is_sound(), "{report:?}");
    let full = report.replay.unwrap();
    assert!(full.pruned_inserts > 0, "{full:?}");
    let from_checkpoint = report.checkpoint_replay.unwrap();
    assert_eq!(from_checkpoint.mismatched_roots, 0, "{from_checkpoint:?}");
    assert_eq!(from_checkpoint.pruned_inserts, 0, "{from_checkpoint:?}");

    // Without its checkpoint the index cannot be rebuilt exactly, and says so.
    let full = dir.path().join("without-checkpoint");
    copy_without_checkpoint(&path, &full);
    let report = check_index(&full).unwrap();
    assert!(
        report
            .damaged
            .iter()
            .any(|damage| damage.problem.contains("pruned")),
        "{report:?}"
    );
    let replayed = DedupIndex::open(&full).unwrap();
    assert!(replayed.recovery().pruned_inserts > 0);
}

#[test]
fn recovering_with_a_prune_queued_keeps_the_decisions_of_an_uninterrupted_run() {
    // `recover` (after a failed write) drops what was not committed and rebuilds the forest
    // from the last commit, while the prune of a durable checkpoint waits for the next commit
    // or the checkpoint is still being saved. The rebuild loads the newest checkpoint and
    // queues its prune again; the dropped documents are sent again, and the decisions, the
    // forest and `check` are those of a run without the failures.
    let steps = workload(6, 600);
    let config = checkpointing_every(50);
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config.clone()).unwrap();
    let expected = run(&mut straight, &steps);
    let path = dir.path().join("recovered");
    let mut index = DedupIndex::create(&path, config).unwrap();
    let mut roots = Vec::new();
    let mut done = 0;
    let mut pruned = 0;
    for failure in [170, 345, 520] {
        roots.extend(run_committing(&mut index, &steps[done..failure], 20));
        // Each stretch of commits since the last recovery pruned something.
        assert!(index.pruned_tombstones() > pruned, "before {failure}");
        pruned = index.pruned_tombstones();
        run(&mut index, &steps[failure..failure + 9]);
        index.recover().unwrap();
        let recovery = index.recovery().clone();
        assert!(recovery.checkpoint_sequence.is_some(), "{recovery:?}");
        assert_eq!(
            (recovery.mismatched_roots, recovery.pruned_inserts),
            (0, 0),
            "at {failure}: {recovery:?}"
        );
        done = failure;
    }
    roots.extend(run_committing(&mut index, &steps[done..], 20));
    assert!(index.pruned_tombstones() > pruned);
    assert_eq!(roots, expected);
    assert_eq!(
        index.forest().nodes_in_order(),
        straight.forest().nodes_in_order()
    );
    index.forest().check_invariants().unwrap();
    drop(index);
    let report = check_index(&path).unwrap();
    assert!(report.is_sound(), "{report:?}");
}

#[test]
fn the_newest_insert_pruned_keeps_its_number() {
    // The newest insert is an old article, deleted: once a checkpoint lists its tombstone the
    // next commit prunes it, and no document records its sequence number any more. The
    // commit's payload still does, so a full replay counts it as pruned and never hands the
    // number out again.
    let config = checkpointing_every(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let mut index = DedupIndex::create(&path, config).unwrap();
    let article = |id: &str, sentence: usize, time: i64| Article {
        id: id.to_owned(),
        title: None,
        content: SENTENCES[sentence..sentence + 6].concat(),
        source: None,
        url: None,
        published_at: Some(time),
    };
    let t = 1_700_000_000;
    index.add_article(article("a", 0, t)).unwrap();
    index.add_article(article("b", 5, t + 86_400)).unwrap();
    index.commit().unwrap();
    index.add_article(article("late", 10, t)).unwrap();
    index.commit().unwrap();
    assert!(index.delete("late").unwrap());
    index.commit().unwrap();
    index.close().unwrap(); // a checkpoint that lists the tombstone

    let mut index = DedupIndex::open(&path).unwrap();
    index.commit().unwrap();
    assert_eq!(index.pruned_tombstones(), 1);
    index.close().unwrap();

    let full = dir.path().join("without-checkpoint");
    copy_without_checkpoint(&path, &full);
    let mut replayed = DedupIndex::open(&full).unwrap();
    assert_eq!(replayed.recovery().pruned_inserts, 1);
    assert_eq!(replayed.recovery().replayed, 2);
    // The next insert gets number 3, after the pruned one, as it would have without the copy.
    replayed.add_article(article("c", 3, t + 86_400)).unwrap();
    replayed.commit().unwrap();
    replayed.close().unwrap();
    let reopened = DedupIndex::open(&full).unwrap();
    assert_eq!(
        reopened.recovery().pruned_inserts,
        0,
        "the checkpoint after the copy"
    );
    drop(reopened);
    std::fs::remove_dir_all(full.join(FOREST_DIR)).unwrap();
    let reopened = DedupIndex::open(&full).unwrap();
    assert_eq!(
        (
            reopened.recovery().replayed,
            reopened.recovery().pruned_inserts
        ),
        (3, 1)
    );
}

#[test]
fn uncommitted_documents_are_lost_whole_and_can_be_sent_again() {
    // A crash between commits loses what was not committed, forest decisions included: the
    // reopened index decides as if those documents had never come, so sending them again
    // gives the uninterrupted run's decisions.
    let steps = workload(2, 400);
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config()).unwrap();
    let expected = run(&mut straight, &steps);

    let path = dir.path().join("crashed");
    let mut index = DedupIndex::create(&path, config()).unwrap();
    let mut roots = run(&mut index, &steps[..200]);
    index.commit().unwrap();
    run(&mut index, &steps[200..260]);
    drop(index); // no commit: as if the process died here

    let mut index = DedupIndex::open(&path).unwrap();
    roots.extend(run(&mut index, &steps[200..]));
    assert_eq!(roots, expected);
}

#[test]
fn the_index_decides_as_the_dedup_command_does() {
    // Without deletes, the index and the index-free pipeline see the same inserts, so they
    // must give every document the same fingerprint and root.
    let steps: Vec<Step> = workload(3, 300)
        .into_iter()
        .filter(|step| matches!(step, Step::Add(_)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let mut dedup = Deduplicator::new(config().dedup).unwrap();
    for step in &steps {
        let Step::Add(article) = step else { continue };
        let arrival = index.arrival_time();
        let from_index = index.add_article(article.clone()).unwrap();
        let alone = dedup.add_article(article, arrival).unwrap();
        // Only the index knows whether an id was there before (`Replaced`).
        let from_index = Decision {
            change: Change::Added,
            ..from_index
        };
        assert_eq!(from_index, alone, "{}", article.id);
    }
}

#[test]
fn replacing_and_deleting_leave_one_live_document_per_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let article = |id: &str, sentence: usize| Article {
        id: id.into(),
        content: SENTENCES[sentence..sentence + 4].concat(),
        published_at: Some(1_700_000_000),
        ..Default::default()
    };
    index.add_article(article("a", 0)).unwrap();
    index.add_article(article("b", 0)).unwrap();
    index.commit().unwrap();
    // Replaced twice: once after a commit, once before the next.
    index.add_article(article("a", 5)).unwrap();
    index.add_article(article("a", 9)).unwrap();
    assert!(index.delete("b").unwrap());
    assert!(!index.delete("b").unwrap(), "already deleted");
    assert!(!index.delete("never-sent").unwrap());
    index.commit().unwrap();

    let searcher = index.searcher();
    let stats = searcher.stats().unwrap();
    assert_eq!(stats.documents, 1);
    assert_eq!(stats.tombstones, 3, "a twice and b once");
    let a = searcher.document("a").unwrap().unwrap();
    assert_eq!(a.simhash, index.prepare(article("a", 9)).simhash());
    assert!(searcher.document("b").unwrap().is_none());

    // Without the checkpoint `close` saves, the replay sees all four inserts.
    drop(searcher);
    drop(index);
    let index = DedupIndex::open(dir.path()).unwrap();
    assert_eq!(index.recovery().replayed, 4);
    assert_eq!(index.recovery().tombstones, 3);
}

#[test]
fn sending_an_identical_article_again_changes_nothing() {
    // A client that lost an answer sends its batch again: whether the first send was
    // committed or is still pending, the identical article keeps its first decision and adds
    // no insert, so the clusters are those of a single send.
    let mut seen = std::collections::HashSet::new();
    let steps: Vec<Step> = workload(4, 220)
        .into_iter()
        .filter(|step| matches!(step, Step::Add(article) if seen.insert(article.id.clone())))
        .take(200)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut once = DedupIndex::create(&dir.path().join("once"), config()).unwrap();
    let expected = run(&mut once, &steps);

    let path = dir.path().join("twice");
    let mut index = DedupIndex::create(&path, config()).unwrap();
    let mut roots = run(&mut index, &steps[..120]);
    index.commit().unwrap();
    // Again after its commit, and again before it (the last 20 are pending).
    assert_eq!(run(&mut index, &steps[..120]), roots);
    roots.extend(run(&mut index, &steps[120..]));
    assert_eq!(run(&mut index, &steps[180..]), roots[180..]);
    assert_eq!(roots, expected);
    index.commit().unwrap();
    let stats = index.searcher().stats().unwrap();
    assert_eq!(stats.tombstones, 0);
    let Step::Add(first) = &steps[0] else {
        unreachable!("only adds")
    };
    let first = index.searcher().document(&first.id).unwrap().unwrap();
    assert_eq!(Some(first.root), expected[0]);
    drop(index); // without the checkpoint `close` saves: every insert is replayed
    assert_eq!(
        DedupIndex::open(&path).unwrap().recovery().replayed,
        steps.len() as u64
    );
}

#[test]
fn an_existing_index_refuses_settings_that_would_change_its_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    DedupIndex::create(dir.path(), config())
        .unwrap()
        .close()
        .unwrap();
    let mut other = config();
    other.dedup.max_distance = 4;
    let error = DedupIndex::open_or_create(dir.path(), Some(other))
        .err()
        .expect("k cannot change");
    assert!(error.to_string().contains("max_distance"), "{error}");
    // The window may change.
    let mut longer = config();
    longer.dedup.window = Duration::from_secs(86_400);
    DedupIndex::open_or_create(dir.path(), Some(longer))
        .unwrap()
        .close()
        .unwrap();
    // An index keeps learning sources' chrome as it was made to, whatever the settings say
    // (one made before the setting existed reads `false`).
    let mut blind = config();
    blind.dedup.source_chrome = false;
    let opened = DedupIndex::open_or_create(dir.path(), Some(blind)).unwrap();
    assert!(opened.config().dedup.source_chrome);
}

#[test]
fn a_run_with_another_window_leaves_the_checkpoint_of_the_index_settings() {
    // A run with another window replays every insert and neither checkpoints nor prunes:
    // the checkpoint stays the one of the index's own settings, which the next ordinary run
    // loads, and `check` (with the index's settings) finds nothing wrong.
    let steps = workload(6, 300);
    let config = checkpointing_every(50);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("news");
    let mut index = DedupIndex::create(&path, config.clone()).unwrap();
    run_committing(&mut index, &steps[..150], 20);
    index.close().unwrap();
    let checkpoint = path.join(FOREST_DIR).join(CHECKPOINT_FILE);
    let saved = std::fs::read(&checkpoint).unwrap();

    let mut longer = config;
    longer.dedup.window = Duration::from_secs(86_400);
    let mut index = DedupIndex::open_or_create(&path, Some(longer)).unwrap();
    let recovery = index.recovery().clone();
    assert_eq!(recovery.checkpoint_sequence, None, "{recovery:?}");
    assert_eq!(recovery.checkpoint_refused, None, "{recovery:?}");
    run_committing(&mut index, &steps[150..], 20);
    assert_eq!(index.pruned_tombstones(), 0);
    index.close().unwrap();
    assert_eq!(std::fs::read(&checkpoint).unwrap(), saved);

    let report = check_index(&path).unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.checkpoint_refused, None, "{report:?}");
    let index = DedupIndex::open(&path).unwrap();
    assert!(index.recovery().checkpoint_sequence.is_some());
}

#[test]
fn a_commit_records_the_log_position_of_what_it_holds() {
    // A shard's replica resumes its log after the position its last commit records: a
    // position set after the last commit is lost with the changes it came with, and one
    // committed survives a reopen, and a checkpoint's, and the index's copy.
    let steps = workload(4, 60);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replica");
    let mut index = DedupIndex::create(&path, checkpointing_every(10)).unwrap();
    assert_eq!(index.log_position(), None);
    run(&mut index, &steps[..30]);
    index.set_log_position("1764400000000-7".to_owned());
    index.commit().unwrap();
    run(&mut index, &steps[30..]);
    index.set_log_position("1764400000009-0".to_owned());
    assert_eq!(index.log_position(), Some("1764400000009-0"));
    let copied = index.searcher().commit_files().unwrap();
    assert_eq!(copied.log_position().as_deref(), Some("1764400000000-7"));
    drop(index); // no commit: as if the process died here
    let index = DedupIndex::open(&path).unwrap();
    assert_eq!(index.log_position(), Some("1764400000000-7"));
    // What a copy takes: the settings, every segment's files, then meta.json of that commit.
    let files = copied.files();
    assert!(
        files
            .iter()
            .any(|file| file.ends_with("tantivy-dedup.toml"))
    );
    assert!(files.iter().all(|file| path.join(file).is_file()));
    let (name, meta) = copied.meta_json().unwrap();
    assert_eq!(name, "meta.json");
    let meta: serde_json::Value = serde_json::from_slice(&meta).unwrap();
    assert!(
        meta["payload"]
            .as_str()
            .unwrap()
            .contains("1764400000000-7")
    );
}

/// [`workload`] without deletes, every page under its source's own header and footer lines.
fn pages_under_chrome(seed: u64, steps: usize) -> Vec<Step> {
    workload(seed, steps)
        .into_iter()
        .filter_map(|step| match step {
            Step::Add(mut article) => {
                let source = article.source.clone().unwrap_or_default();
                article.content = format!(
                    "{source} 首页 > 新闻 > 正文\n{}\n版权所有 {source} 未经授权不得转载 新闻热线：12345678",
                    article.content
                );
                Some(Step::Add(article))
            }
            Step::Delete(_) => None,
        })
        .collect()
}

#[test]
fn what_the_stream_taught_of_each_sources_chrome_is_read_again_on_open() {
    let steps = pages_under_chrome(5, 400);
    let dir = tempfile::tempdir().unwrap();
    let mut straight = DedupIndex::create(&dir.path().join("straight"), config()).unwrap();
    let expected = run(&mut straight, &steps);
    straight.commit().unwrap();

    // The chrome was learned: without it, the same pages make other stories.
    let mut blind_config = config();
    blind_config.dedup.source_chrome = false;
    let mut blind = DedupIndex::create(&dir.path().join("blind"), blind_config).unwrap();
    assert_ne!(run(&mut blind, &steps), expected);

    // The pipeline without an index learns the same.
    let mut dedup = Deduplicator::new(config().dedup).unwrap();
    let mut arrival = 0;
    let alone: Vec<Option<Fingerprint>> = steps
        .iter()
        .map(|step| {
            let Step::Add(article) = step else {
                return None;
            };
            arrival = article.published_at.unwrap_or(arrival);
            Some(dedup.add_article(article, arrival).unwrap().root)
        })
        .collect();
    assert_eq!(alone, expected, "the dedup pipeline and the index");

    assert_reopening_gives(dir.path(), &steps, &expected, &[3, 37, 201]);
}
