//! A server whose index lives on a file system that fills up (issue 33, item 2): a full disk is
//! an ordinary error. Writes are answered 503 and the server goes on serving reads; `/healthz`
//! answers 503 until a write succeeds again; a restart on the full disk listens; once there is
//! room, writes succeed and nothing committed before is lost. Before, the sketch store's sparse chunk files were written through
//! a mapping, and the page fault that found no free block killed the server with SIGBUS.
//!
//! The index is on a small tmpfs mounted for the test, which needs root (as CI runs): without
//! it the test fails, saying so, rather than skipping.

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
    assert_eq!(server.get("/healthz").0, 200);

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
    assert_eq!(server.get("/healthz").0, 200);
    // Nothing acknowledged was lost.
    for number in (0..failed).chain([failed]) {
        let (status, document) = server.get(&format!("/v1/documents/disk-{number}"));
        assert_eq!(status, 200, "disk-{number}: {document}");
    }
}
