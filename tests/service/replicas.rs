//! Shards held by replica sets (`serve --shard I/N --replica NAME`, SPEC §6 "Replicas"): real
//! server processes on loopback over a real Redis Cluster, each shard's writes through its log.
//!
//! - `a_killed_replica_costs_no_page_and_catches_up`: 2 shards x 2 replicas under a load of
//!   20,000 documents through the coordinator; one replica killed (`kill -9`) and restarted
//!   during it: every list page meanwhile complete, every write acknowledged and none lost,
//!   the restarted replica, caught up, answering byte for byte as its sibling.
//! - `a_client_reads_its_writes_from_any_replica`: a write read back at once through the
//!   coordinator, with a sibling that lags and then with the other replica killed; and
//!   through a second coordinator with the positions the write's answer gave.
//! - `the_log_is_trimmed_within_its_bound`: a replica away for fewer entries than the bound
//!   catches up; one away for more is refused with the way out.
//! - `a_replica_copied_while_writes_go_on_ends_identical`: `copy-replica` from a live
//!   replica under writes, then served: the same answers as its siblings, and the
//!   coordinator's answers over them those of one index fed the same stream.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::redis_cluster::RedisCluster;
use crate::serve_process::{Serve, pct};
use crate::server_api::{Doc, corpus};
use crate::shards::{compare_reads, list_pages};

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

/// Replica `name` of shard `shard` of `count`, its index in `dir`, on `addr` (port 0: any),
/// with the further arguments `extra`.
fn start_replica(
    dir: &Path,
    (shard, count): (usize, usize),
    name: &str,
    store: &str,
    addr: &str,
    extra: &[&str],
) -> Serve {
    Serve::start(&replica_dir(dir, shard, name), |command| {
        command
            .args(["--shard", &format!("{shard}/{count}"), "--replica", name])
            .args(["--store", store, "--addr", addr])
            .args(extra);
        if !extra.contains(&"--commit-delay") {
            command.args(["--commit-delay", "5ms"]);
        }
    })
}

fn replica_dir(dir: &Path, shard: usize, name: &str) -> PathBuf {
    dir.join(format!("shard-{shard}-{name}"))
}

/// A coordinator over `shards`, each the URLs of its replicas.
fn start_coordinator(shards: &[Vec<String>], store: &str) -> Serve {
    let listed: Vec<String> = shards.iter().map(|replicas| replicas.join("|")).collect();
    Serve::launch(|command| {
        command
            .args(["--coordinator", "--shards", &listed.join(",")])
            .args(["--store", store, "--shard-timeout", "5s"]);
    })
}

/// The port of a server's URL.
fn port(serve: &Serve) -> String {
    serve.base.rsplit(':').next().unwrap().to_owned()
}

/// The position a replica has applied its log up to.
fn applied(replica: &Serve) -> String {
    let (status, answer) = replica.get("/internal/v1/replica");
    assert_eq!(status, 200, "{answer}");
    answer["applied"].as_str().unwrap().to_owned()
}

/// Waits until every replica of each shard has applied the same position (and it holds for a
/// moment: the log is no longer growing).
fn wait_caught_up(shards: &[&[Serve]]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut previous = Vec::new();
    loop {
        let positions: Vec<Vec<String>> = shards
            .iter()
            .map(|replicas| replicas.iter().map(applied).collect())
            .collect();
        let level = positions
            .iter()
            .all(|shard| shard.iter().all(|position| *position == shard[0]));
        if level && positions == previous {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replicas did not catch up: {positions:?}"
        );
        previous = positions;
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The reads two replicas of one shard must answer byte for byte alike: the list pages the
/// shards' tests compare with one index (every sort, keywords, offsets, facets, histograms,
/// filters, trending), then the stories and documents the shard holds.
fn compare_siblings(first: &Serve, second: &Serve, docs: &[Doc]) -> usize {
    let mut paths = list_pages(docs, true);
    let page = first.search("sort=similar_desc&limit=15");
    for cluster in page["clusters"].as_array().unwrap() {
        paths.push(format!("/v1/stories/{}", cluster["root"].as_str().unwrap()));
    }
    for doc in docs.iter().step_by(97) {
        paths.push(format!("/v1/documents/{}", pct(&doc.id)));
        paths.push(format!("/v1/documents/{}/similar", pct(&doc.id)));
    }
    for path in &paths {
        let (status, expected) = first.request("GET", path, None);
        let (again, answer) = second.request("GET", path, None);
        assert_eq!(
            (again, &answer),
            (status, &expected),
            "{path}: the replicas {} and {} answer differently",
            first.base,
            second.base
        );
    }
    paths.len()
}

/// The documents of `docs` in batches of `batch`.
fn batches(docs: &[Doc], batch: usize) -> Vec<Value> {
    docs.chunks(batch)
        .map(|chunk| Value::Array(chunk.iter().map(|doc| doc.json(0)).collect()))
        .collect()
}

#[test]
fn a_killed_replica_costs_no_page_and_catches_up() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(35, 8_000);
    assert!(docs.len() >= 20_000, "{} documents", docs.len());
    let docs = &docs[..20_000];
    let mut shards: Vec<Vec<Serve>> = (0..2)
        .map(|shard| {
            ["a", "b"]
                .iter()
                .map(|name| start_replica(dir.path(), (shard, 2), name, &store, "127.0.0.1:0", &[]))
                .collect()
        })
        .collect();
    let urls: Vec<Vec<String>> = shards
        .iter()
        .map(|replicas| {
            replicas
                .iter()
                .map(|replica| replica.base.clone())
                .collect()
        })
        .collect();
    let coordinator = start_coordinator(&urls, &store);
    let batches = batches(docs, 200);
    let sent = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let killed_port = port(&shards[0][1]);
    let restart = || {
        let addr = format!("127.0.0.1:{killed_port}");
        start_replica(dir.path(), (0, 2), "b", &store, &addr, &[])
    };
    let mut pages = 0;
    std::thread::scope(|scope| {
        let loader = scope.spawn(|| {
            for batch in &batches {
                let (status, answer) = coordinator.try_post(batch);
                assert_eq!(status, 200, "a write failed: {answer}");
                assert_eq!(answer["failed"], 0, "{answer}");
                sent.fetch_add(1, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut restarted = false;
        let mut killed_at = None;
        while !done.load(Ordering::SeqCst) && !loader.is_finished() {
            let (status, page) = coordinator.get("/v1/search?sort=similar_desc&limit=20");
            assert_eq!(status, 200, "a list page failed: {page}");
            assert!(page.get("partial").is_none(), "{page}");
            pages += 1;
            let progress = sent.load(Ordering::SeqCst);
            if killed_at.is_none() && progress >= batches.len() / 3 {
                shards[0][1].kill();
                killed_at = Some(Instant::now());
            }
            if !restarted && killed_at.is_some_and(|at| at.elapsed() > Duration::from_secs(2)) {
                shards[0][1] = restart();
                restarted = true;
            }
        }
        loader.join().unwrap();
        assert!(killed_at.is_some(), "the load ended before the kill");
        if !restarted {
            shards[0][1] = restart();
        }
    });
    assert!(
        pages > 10,
        "only {pages} list pages were read during the load"
    );
    wait_caught_up(&[&shards[0], &shards[1]]);
    // Nothing acknowledged is lost.
    let (status, stats) = coordinator.get("/v1/stats");
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["index"]["documents"], json!(docs.len()), "{stats}");
    for doc in docs.iter().step_by(13) {
        let (status, _) = coordinator.get(&format!("/v1/documents/{}", pct(&doc.id)));
        assert_eq!(status, 200, "{} was acknowledged", doc.id);
    }
    // The restarted replica answers as its sibling, and so do the other shard's.
    for replicas in &shards {
        let compared = compare_siblings(&replicas[0], &replicas[1], docs);
        assert!(compared > 20);
    }
    // The coordinator sees every replica.
    let replicas = stats["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 4, "{stats}");
}

#[test]
fn a_client_reads_its_writes_from_any_replica() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(36, 40);
    let quick = start_replica(dir.path(), (0, 1), "a", &store, "127.0.0.1:0", &[]);
    // A sibling that commits at most once a second lags behind each write.
    let slow = start_replica(
        dir.path(),
        (0, 1),
        "b",
        &store,
        "127.0.0.1:0",
        &["--commit-delay", "1s"],
    );
    let shards = [vec![quick.base.clone(), slow.base.clone()]];
    let coordinator = start_coordinator(&shards, &store);
    // A second coordinator, which answers none of these writes.
    let other = start_coordinator(&shards, &store);
    let (mut lagged, mut unseen_elsewhere) = (0, 0);
    let (first, rest) = docs.split_at(docs.len() / 2);
    for doc in first {
        let mut written = coordinator
            .agent
            .post(format!("{}/v1/documents", coordinator.base))
            .header("content-type", "application/json")
            .send(json!([doc.json(0)]).to_string().as_bytes())
            .unwrap();
        assert_eq!(written.status(), 200);
        let positions = written.headers()["x-write-positions"]
            .to_str()
            .unwrap()
            .to_owned();
        written.body_mut().read_to_string().unwrap();
        if applied(&slow) < applied(&quick) {
            lagged += 1;
        }
        let path = format!("/v1/documents/{}", pct(&doc.id));
        let (status, answer) = coordinator.get(&path);
        assert_eq!(status, 200, "{} was just written: {answer}", doc.id);
        // Through the other coordinator, with the positions the write's answer gave.
        let read = other
            .agent
            .get(format!("{}{path}", other.base))
            .header("x-read-after", &positions)
            .call()
            .unwrap();
        assert_eq!(
            read.status(),
            200,
            "{} was just written ({positions})",
            doc.id
        );
        // Without them a read could go to the sibling that lags, which has not got it yet.
        // (Asked of the sibling itself: which replica a coordinator asks first depends on
        // its turns and on what it last heard of each, which timing decides.)
        if slow.get(&path).0 == 404 {
            unseen_elsewhere += 1;
        }
    }
    assert!(lagged > 0, "the slow replica never lagged");
    assert!(
        unseen_elsewhere > 0,
        "the slow replica never missed a write just made: the test shows nothing"
    );
    let refused = other
        .agent
        .get(format!("{}/v1/search", other.base))
        .header("x-read-after", "7:1-0")
        .call()
        .unwrap();
    assert_eq!(refused.status(), 400);
    // A cursor walk reads its snapshot on the replica that pinned it, while documents arrive
    // between its pages. Read through the coordinator that wrote nothing, with both replicas
    // level and seen so by its health checks: it would otherwise ask them in turn.
    let list = "/v1/search?sort=newest";
    let level = || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while applied(&quick) != applied(&slow) {
            assert!(
                Instant::now() < deadline,
                "the slow replica did not catch up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(600));
    };
    level();
    let (_, at_start) = other.get(&format!("{list}&limit=1000"));
    let mut cursor = "*".to_owned();
    let mut walked = Vec::new();
    for turn in 0.. {
        level();
        let (status, page) = other.get(&format!("{list}&limit=5&cursor={}", pct(&cursor)));
        assert_eq!(status, 200, "page {turn} of the walk: {page}");
        walked.extend(page["clusters"].as_array().unwrap().iter().cloned());
        let Some(next) = page["next_cursor"].as_str() else {
            break;
        };
        cursor = next.to_owned();
        let mut arrival = first[turn % first.len()].json(0);
        arrival["id"] = json!(format!("walk-{turn}"));
        coordinator.post(&json!([arrival]));
    }
    assert!(walked.len() > 6, "{} stories walked", walked.len());
    assert_eq!(
        walked.as_slice(),
        at_start["clusters"].as_array().unwrap().as_slice()
    );
    // With the quick one gone, the slow one answers the writes and the reads.
    let mut quick = quick;
    quick.kill();
    for doc in rest {
        coordinator.post(&json!([doc.json(0)]));
        let (status, answer) = coordinator.get(&format!("/v1/documents/{}", pct(&doc.id)));
        assert_eq!(status, 200, "{} was just written: {answer}", doc.id);
        let page = coordinator.search(&format!("q={}&limit=50", pct(&doc.title)));
        assert!(page["total_hits"].as_u64().unwrap() >= 1, "{page}");
    }
}

/// Starts `serve` for replica `name` and returns its exit status and stderr, for a replica
/// that must be refused.
fn refused_replica(dir: &Path, name: &str, store: &str) -> String {
    let mut child = Command::new(BIN)
        .arg("serve")
        .arg("--index")
        .arg(replica_dir(dir, 0, name))
        .args(["--shard", "0/1", "--replica", name, "--store", store])
        .args(["--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a replica the log left behind went on running");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_log_is_trimmed_within_its_bound() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(37, 30);
    let bound = ["--log-max-entries", "10"];
    let mut replicas: Vec<Serve> = ["a", "b"]
        .iter()
        .map(|name| start_replica(dir.path(), (0, 1), name, &store, "127.0.0.1:0", &bound))
        .collect();
    let b_port = port(&replicas[1]);
    let urls = vec![replicas[0].base.clone(), replicas[1].base.clone()];
    let coordinator = start_coordinator(&[urls], &store);
    let mut written = docs.iter();
    let mut write = |count: usize| {
        for doc in written.by_ref().take(count) {
            coordinator.post(&json!([doc.json(0)]));
        }
    };
    write(5);
    // Away for fewer entries than the bound: it catches up from the log.
    replicas[1].kill();
    write(6);
    let b_addr = format!("127.0.0.1:{b_port}");
    replicas[1] = start_replica(dir.path(), (0, 1), "b", &store, &b_addr, &bound);
    wait_caught_up(&[&replicas]);
    compare_siblings(&replicas[0], &replicas[1], &docs[..11]);
    // Away for more: the log keeps the bound's entries only, and the replica is refused.
    replicas[1].kill();
    write(14);
    let message = refused_replica(dir.path(), "b", &store);
    assert!(
        message.contains("trimmed") && message.contains("Rebuild it from a copy"),
        "{message}"
    );
    // Its sibling goes on answering every write and read.
    let (status, stats) = coordinator.get("/v1/stats");
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["index"]["documents"], json!(25), "{stats}");
}

#[test]
fn a_replica_copied_while_writes_go_on_ends_identical() {
    let redis = RedisCluster::start(3);
    let store = redis.store_arg();
    let dir = tempfile::tempdir().unwrap();
    let (_, docs) = corpus(38, 400);
    let replicas: Vec<Serve> = ["a", "b"]
        .iter()
        .map(|name| start_replica(dir.path(), (0, 1), name, &store, "127.0.0.1:0", &[]))
        .collect();
    let urls = [replicas[0].base.clone(), replicas[1].base.clone()];
    // One insert in flight: the coordinator then decides exactly as one index does (with
    // several, a key posting at its cap can lose an older node to a later insert of the
    // batch, docs/scaling.md "Several inserts in flight"), so that its answers can be
    // compared with one index's below.
    let settings = dir.path().join("one-in-flight.toml");
    std::fs::write(&settings, "[server]\ninserts_in_flight = 1\n").unwrap();
    let coordinator = Serve::launch(|command| {
        command
            .args(["--coordinator", "--shards", &urls.join("|")])
            .args(["--store", &store, "--config"])
            .arg(&settings);
    });
    let batches = batches(&docs, 20);
    let sent = AtomicUsize::new(0);
    let copy_dir = replica_dir(dir.path(), 0, "c");
    std::thread::scope(|scope| {
        let loader = scope.spawn(|| {
            for batch in &batches {
                coordinator.post(batch);
                sent.fetch_add(1, Ordering::SeqCst);
            }
        });
        while sent.load(Ordering::SeqCst) < batches.len() / 2 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = Command::new(BIN)
            .args([
                "copy-replica",
                "--from",
                &replicas[1].base,
                "--replica",
                "c",
            ])
            .arg("--index")
            .arg(&copy_dir)
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{printed}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            printed.contains("of shard 0/1, at log position"),
            "{printed}"
        );
        assert!(
            !loader.is_finished(),
            "the writes ended before the copy did: the copy was not made under writes"
        );
        loader.join().unwrap();
    });
    // A copy into a directory that holds anything is refused.
    let again = Command::new(BIN)
        .args([
            "copy-replica",
            "--from",
            &replicas[0].base,
            "--replica",
            "d",
        ])
        .arg("--index")
        .arg(&copy_dir)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
    let copy = start_replica(dir.path(), (0, 1), "c", &store, "127.0.0.1:0", &[]);
    let all = [&replicas[0], &replicas[1], &copy];
    let positions = || all.map(applied);
    let deadline = Instant::now() + Duration::from_secs(60);
    while positions()
        .iter()
        .any(|position| *position != applied(&replicas[0]))
    {
        assert!(
            Instant::now() < deadline,
            "the copy did not catch up: {:?}",
            positions()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, stats) = copy.get("/v1/stats");
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["index"]["documents"], json!(docs.len()), "{stats}");
    compare_siblings(&replicas[0], &copy, &docs);
    // Through the coordinator, every answer is that of one index fed the same stream: list
    // pages of every kind, stories, documents, detail pages, near-duplicate checks, counts.
    let oracle = Serve::start(&dir.path().join("oracle"), |command| {
        command.args(["--commit-delay", "5ms"]);
    });
    for batch in &batches {
        oracle.post(batch);
    }
    compare_reads(&oracle, &coordinator, &docs, true);
}
