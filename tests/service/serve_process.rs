//! A `tantivy-dedup serve` process started by a test: the one way every test here waits for
//! a server to listen and finds its address; [`Serve`], such a process over an index with a
//! client for its API.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");

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
    if let Ok(Some(_)) = child.try_wait() {
        return; // stopped before: its process id may be another's by now
    }
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

/// A `serve` process on loopback over an index, stopped (SIGTERM, then killed) when dropped,
/// with a client for its API.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A client that answers every status as a response (none is an error).
    pub agent: ureq::Agent,
}

impl Serve {
    /// Starts `tantivy-dedup serve --index INDEX --addr 127.0.0.1:0`, with the further
    /// arguments and environment `configure` gives it.
    pub fn start(index: &Path, configure: impl FnOnce(&mut Command)) -> Self {
        Self::launch(|command| {
            command.arg("--index").arg(index);
            configure(command);
        })
    }

    /// Starts `tantivy-dedup serve` with the further arguments and environment `configure`
    /// gives it (a coordinator has no `--index`), on `--addr 127.0.0.1:0` unless they name
    /// an address.
    pub fn launch(configure: impl FnOnce(&mut Command)) -> Self {
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        configure(&mut command);
        if !command.get_args().any(|arg| arg == "--addr") {
            command.args(["--addr", "127.0.0.1:0"]);
        }
        let (child, base) = spawn_listening(&mut command, None);
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        Serve { child, base, agent }
    }

    /// Status and JSON of a GET.
    pub fn get(&self, path_and_query: &str) -> (u16, Value) {
        let mut response = self
            .agent
            .get(format!("{}{path_and_query}", self.base))
            .call()
            .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        let json = serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}: {text}"));
        (status, json)
    }

    /// A GET that accepts gzip: the answer's `content-encoding` and its body as sent.
    pub fn get_accepting_gzip(&self, path_and_query: &str) -> (Option<String>, Vec<u8>) {
        let mut response = self
            .agent
            .get(format!("{}{path_and_query}", self.base))
            .header("accept-encoding", "gzip")
            .call()
            .unwrap();
        let encoding = response
            .headers()
            .get("content-encoding")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        (encoding, response.body_mut().read_to_vec().unwrap())
    }

    /// Status and body of any request (`body`: JSON).
    pub fn request(&self, method: &str, path_and_query: &str, body: Option<&str>) -> (u16, String) {
        let url = format!("{}{path_and_query}", self.base);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.unwrap_or_default().as_bytes()),
        };
        let mut response = response.unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    }

    /// Stops the process as an operator would ([`stop`]) and waits for it to exit.
    pub fn stop(&mut self) {
        stop(&mut self.child);
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A list page that must be answered 200.
    pub fn search(&self, query: &str) -> Value {
        let (status, json) = self.get(&format!("/v1/search?{query}"));
        assert_eq!(status, 200, "{query}: {json}");
        json
    }

    /// POSTs documents, which must be answered 200.
    pub fn post(&self, documents: &Value) -> Value {
        let (status, answer) = self.try_post(documents);
        assert_eq!(status, 200, "{answer}");
        answer
    }

    /// Status and JSON (`null` when the answer is not JSON) of a POST of documents.
    pub fn try_post(&self, documents: &Value) -> (u16, Value) {
        let mut response = self
            .agent
            .post(format!("{}/v1/documents", self.base))
            .header("content-type", "application/json")
            .send(documents.to_string().as_bytes())
            .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Percent-encodes a query parameter's value.
pub fn pct(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}
