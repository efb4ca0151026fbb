//! A server whose index lives on a file system that fills up (issue 33, item 2): a full disk is
//! an ordinary error. Writes are answered 503 and the server goes on serving reads; `/healthz`
//! answers 503 until a write succeeds again; a restart on the full disk listens; once there is
//! room, writes succeed and nothing committed before is lost. Before, the sketch store's sparse chunk files were written through
//! a mapping, and the page fault that found no free block killed the server with SIGBUS.
//!
//! The index is on a small tmpfs mounted for the test, which needs root (as CI runs): without
//! it the test fails, saying so, rather than skipping.
//!
//! And a document store overwritten under a running index (issue 33, item 9): the reads that
//! meet it answer 500 `index_damaged` (no path), and `/healthz` 503 from then on, where it
//! said ok while every such read failed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve_process::Serve;

/// A tmpfs mounted on a directory of its own, unmounted when dropped (after the server over it
/// has stopped: fields drop in order).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status();
        assert!(
            mounted.is_ok_and(|status| status.success()),
            "mounting a tmpfs failed: this test needs root (CI runs as root)"
        );
        Tmpfs { dir }
    }

    fn resize(&self, mib: u32) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={mib}m")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "remounting the tmpfs failed");
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A news article of its own for `number`.
fn article(number: usize) -> Value {
    json!({
        "id": format!("disk-{number}"),
        "content": format!(
            "第{number}号通报：本市今天发布防汛应急响应，第{number}批救援队伍已经抵达受灾地区。\
             气象部门预计未来三天仍有强降雨，相关部门要求做好人员转移和物资保障工作。"
        ),
        "published_at": 1_714_520_000 + number as i64 * 60,
    })
}

/// POSTs `documents` until they are answered 200 (the writer may still be reopening the index
/// after the failure), for at most 60 s.
fn post_until_accepted(server: &Serve, documents: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, answer) = server.try_post(documents);
        if status == 200 {
            return answer;
        }
        assert_eq!(status, 503, "{answer}");
        assert!(Instant::now() < deadline, "never accepted again: {answer}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `/healthz`'s status once it is 200, or after 10 s: the writer records a commit's success
/// just after answering the write it made.
fn healthz_settled(server: &Serve) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = server.get("/healthz").0;
        if status == 200 || Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_damaged_document_store_is_named_and_makes_the_server_unhealthy() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let server = Serve::start(&index, |_| {});
    let documents: Vec<Value> = (0..40).map(article).collect();
    assert_eq!(server.post(&Value::Array(documents))["indexed"], 40);
    assert_eq!(server.get("/healthz").0, 200);

    // Overwrite the start of every document store (their footers stay: the index opens).
    drop(server);
    for entry in std::fs::read_dir(&index).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "store")
        {
            let mut bytes = std::fs::read(&path).unwrap();
            // Its first blocks: the block index and the footer at its end stay whole.
            let end = bytes.len() / 3;
            for (at, byte) in bytes[16.min(end)..end].iter_mut().enumerate() {
                *byte = (at * 151 % 251) as u8;
            }
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let server = Serve::start(&index, |_| {});
    assert_eq!(
        server.get("/healthz").0,
        200,
        "nothing has read the stores yet"
    );
    let mut damaged = 0;
    for number in 0..40 {
        let (status, answer) = server.get(&format!("/v1/documents/disk-{number}"));
        if status != 200 {
            assert_eq!(status, 500, "{answer}");
            assert_eq!(answer["error"]["code"], "index_damaged", "{answer}");
            assert!(
                !answer.to_string().contains(&*dir.path().to_string_lossy()),
                "{answer}"
            );
            damaged += 1;
        }
    }
    assert!(damaged > 0, "no read met the damage");
    let (status, health) = server.get("/healthz");
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["error"]["code"], "index_damaged", "{health}");
}

/// Fills the file system under `dir` with one file until a write fails for want of room.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![7u8; 1 << 20];
    while file
        .write_all(&block)
        .and_then(|()| file.sync_data())
        .is_ok()
    {}
    path
}

#[test]
fn a_full_disk_is_an_error_the_server_survives_and_recovers_from() {
    let disk = Tmpfs::mount(32);
    let index = disk.path().join("index");
    let server = Serve::start(&index, |_| {});

    // 32 MiB cannot hold a sketch chunk (64 MiB): the first write fails, the server lives on.
    let (status, answer) = server.try_post(&json!([article(0)]));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(server.get("/v1/stats").0, 200, "reads are still served");
    let (status, health) = server.get("/healthz");
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["error"]["code"], "last_write_failed", "{health}");
    assert_eq!(answer["error"]["code"], "forest_failed", "{answer}");
    let path = disk.path().to_string_lossy();
    assert!(!answer.to_string().contains(&*path), "no path: {answer}");
    assert!(!health.to_string().contains(&*path), "no path: {health}");

    // Room again: the same documents are taken, and the server is healthy once committed.
    disk.resize(160);
    let answer = post_until_accepted(&server, &json!([article(0), article(1)]));
    assert_eq!(answer["indexed"], 2, "{answer}");
    assert_eq!(healthz_settled(&server), 200);

    // Another file takes the rest of the disk: commits fail, and the server lives on again.
    let filler = fill(disk.path());
    let mut failed = None;
    for number in 2..40 {
        let (status, answer) = server.try_post(&json!([article(number)]));
        if status != 200 {
            assert_eq!(status, 503, "{answer}");
            failed = Some(number);
            break;
        }
    }
    let failed = failed.expect("no write failed on a full disk");
    assert_eq!(server.get("/healthz").0, 503);
    assert_eq!(server.get("/v1/stats").0, 200);

    // A restart on the disk still full listens and serves what was committed.
    drop(server);
    let server = Serve::start(&index, |_| {});
    let (status, document) = server.get("/v1/documents/disk-1");
    assert_eq!(status, 200, "{document}");

    std::fs::remove_file(filler).unwrap();
    post_until_accepted(&server, &json!([article(failed)]));
    assert_eq!(healthz_settled(&server), 200);
    // Nothing acknowledged was lost.
    for number in (0..failed).chain([failed]) {
        let (status, document) = server.get(&format!("/v1/documents/disk-{number}"));
        assert_eq!(status, 200, "disk-{number}: {document}");
    }
}
