//! A `tantivy-dedup serve` process started by a test: the one way every test here waits for
//! a server to listen and finds its address.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Spawns `command` (a `serve` command line) with its stdout piped, waits for its "listening
/// on URL" line, and returns the child and the URL. Its stdout keeps being read afterwards, so
/// the server never writes into a closed pipe. If the server exits before it listens, the
/// test fails, with the content of `log` (its stderr file) when given.
pub fn spawn_listening(command: &mut Command, log: Option<&Path>) -> (Child, String) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| Some(line.strip_prefix("listening on ")?.trim().to_owned()));
    let Some(url) = url else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "serve stopped before listening:\n{}",
            log.and_then(|log| std::fs::read_to_string(log).ok())
                .unwrap_or_default()
        );
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}

/// Stops a server as an operator would: SIGTERM, then up to 30 s for it to commit and exit,
/// then a kill.
pub fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
