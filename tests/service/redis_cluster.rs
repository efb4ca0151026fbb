//! A real Redis Cluster of local `redis-server` processes for the integration tests.
//!
//! The nodes are real servers rather than a mock because what the fingerprint store must get
//! right is exactly what a mock would paper over: slot routing across nodes, `MOVED` answers,
//! and a node dying with `kill -9` and coming back from its append-only file. Each node
//! acknowledges a write only after `fsync` (`appendfsync always`), so a test may rely on every
//! acknowledged write surviving `stop_node` + `restart_node`.
//!
//! A missing `redis-server` fails the test instead of skipping it: a skipped test would let CI
//! pass without ever running the store against Redis.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::required_programs::require_on_path;

/// Client ports are taken from `PORT_LOW..PORT_LOW + PORT_SPAN` = 10000..22768, so that the
/// cluster bus ports (client port + 10000) stay below 32768 too. Linux hands out ephemeral ports
/// (`bind` to port 0, the local end of outgoing connections) from 32768 up, so no other test's
/// listener or client socket can take a node's port between our probe and the node's `bind`.
const PORT_LOW: u64 = 10_000;
const PORT_SPAN: u64 = 12_768;
/// Redis Cluster listens for its node-to-node bus on the client port plus this.
const BUS_OFFSET: u16 = 10_000;
/// How far apart the port sequences of two test processes start, so that concurrent test
/// binaries (which do not share `NEXT_PORT`) rarely even probe the same ports.
const PID_STRIDE: u64 = 257;

/// Far below a production setting (15 s), so that a killed node is declared failed, and a
/// restarted one accepted back, within seconds.
const NODE_TIMEOUT_MS: u64 = 2_000;
/// A cluster is ready when all of its hash slots are assigned (and it then says
/// `cluster_state:ok`).
const SLOTS: u32 = 16_384;

/// A node that exits right after start (typically: a port taken between our probe and its
/// `bind`) is retried on fresh ports this many times in all.
const START_ATTEMPTS: usize = 3;
const NODE_START_DEADLINE: Duration = Duration::from_secs(10);
/// A restarted master waits 2 s (Redis's writable delay) before it reports `cluster_state:ok`,
/// and the others clear their FAIL flag up to 2 × node timeout after setting it.
const CLUSTER_OK_DEADLINE: Duration = Duration::from_secs(30);
const CREATE_DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
const LOG_TAIL_LINES: usize = 20;

/// The Debian package of `redis-server` and `redis-cli`.
const REDIS_PACKAGE: &str = "redis-server";

/// A Redis Cluster of master-only nodes on loopback, killed and deleted on drop.
pub struct RedisCluster {
    /// Declared before `dir`: fields drop in order, so every process is dead before its
    /// directory is removed.
    nodes: Vec<Node>,
    dir: TempDir,
}

struct Node {
    port: u16,
    /// Holds `redis.conf`, `nodes.conf`, the append-only files and the logs.
    dir: PathBuf,
    /// `None` while stopped by `stop_node`.
    child: Option<Child>,
}

impl RedisCluster {
    /// Starts `nodes` masters, joins them into one cluster with the slots split evenly, and
    /// returns once every node reports `cluster_state:ok` with all slots assigned.
    ///
    /// Panics (with the nodes' log tails) if that does not happen within the deadlines.
    pub fn start(nodes: usize) -> RedisCluster {
        // `redis-cli --cluster create` refuses fewer than 3 masters.
        assert!(
            nodes >= 3,
            "a Redis Cluster needs at least 3 masters, got {nodes}"
        );
        require_on_path("redis-server", REDIS_PACKAGE);
        require_on_path("redis-cli", REDIS_PACKAGE);

        let dir = tempfile::Builder::new()
            .prefix("redis-cluster-")
            .tempdir()
            .expect("create the cluster's temporary directory");
        // Built before the first process starts, so a panic part-way still kills what started.
        let mut cluster = RedisCluster {
            nodes: Vec::with_capacity(nodes),
            dir,
        };
        for i in 0..nodes {
            cluster.start_new_node(i);
        }
        cluster.create();
        cluster.wait_cluster_ok("after cluster create");
        cluster
    }

    /// The nodes' URLs, in node order, for `redis::cluster::ClusterClient::new`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| format!("redis://127.0.0.1:{}", node.port))
            .collect()
    }

    /// The URLs comma-joined, as the command line's `--store` takes them.
    pub fn store_arg(&self) -> String {
        self.urls().join(",")
    }

    /// Kills node `i` with SIGKILL, as a crash would: no shutdown, no final AOF rewrite. Once
    /// the others declare it failed (after the 2 s node timeout) the whole cluster says
    /// `cluster_state:fail` and refuses every key with `CLUSTERDOWN`, not only the node's
    /// (`cluster-require-full-coverage` is left at its default, `yes`, as in production).
    pub fn stop_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut child = node
            .child
            .take()
            .unwrap_or_else(|| panic!("stop_node({i}): node {i} is already stopped"));
        child
            .kill()
            .unwrap_or_else(|e| panic!("kill redis-server node {i}: {e}"));
        // Reaped so the port is free for `restart_node` and no zombie is left.
        child
            .wait()
            .unwrap_or_else(|e| panic!("wait for redis-server node {i}: {e}"));
    }

    /// Starts stopped node `i` again on its port, config and directory, so it reloads its
    /// append-only file and `nodes.conf` (its identity and slots), and returns once the whole
    /// cluster reports `cluster_state:ok` again.
    pub fn restart_node(&mut self, i: usize) {
        assert!(
            self.nodes[i].child.is_none(),
            "restart_node({i}): node {i} is running; stop_node({i}) first"
        );
        if let Err(e) = self.nodes[i].spawn_and_wait() {
            panic!("restart of node {i} failed: {e}\n{}", self.log_tails());
        }
        self.wait_cluster_ok(&format!("after restarting node {i}"));
    }

    /// Sum of `INFO memory` `used_memory` over the running nodes, in bytes (a stopped node
    /// holds nothing in memory).
    pub fn used_memory(&self) -> u64 {
        self.running()
            .map(|(i, node)| {
                let info: String = node
                    .query(redis::cmd("INFO").arg("memory"))
                    .unwrap_or_else(|e| panic!("INFO memory on node {i}: {e}"));
                info_field(&info, "used_memory")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("no used_memory in INFO memory of node {i}:\n{info}"))
            })
            .sum()
    }

    /// How many keys the running nodes hold (`DBSIZE` summed).
    pub fn key_count(&self) -> u64 {
        self.running()
            .map(|(i, node)| {
                node.query::<u64>(&redis::cmd("DBSIZE"))
                    .unwrap_or_else(|e| panic!("DBSIZE on node {i}: {e}"))
            })
            .sum()
    }

    /// The keys matching `pattern` on every running node (`KEYS`: for small test data only).
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        self.running()
            .flat_map(|(i, node)| {
                node.query::<Vec<String>>(redis::cmd("KEYS").arg(pattern))
                    .unwrap_or_else(|e| panic!("KEYS on node {i}: {e}"))
            })
            .collect()
    }

    /// The fields of hash `key`, from the node that owns its slot (the others answer MOVED).
    pub fn hash_fields(&self, key: &str) -> Vec<String> {
        self.running()
            .find_map(|(_, node)| node.query::<Vec<String>>(redis::cmd("HKEYS").arg(key)).ok())
            .unwrap_or_default()
    }

    /// Sets `key` to `value` on the node that owns its slot (the others answer MOVED).
    pub fn set(&self, key: &str, value: &str) {
        let owners = self
            .running()
            .filter(|(_, node)| {
                node.query::<()>(redis::cmd("SET").arg(key).arg(value))
                    .is_ok()
            })
            .count();
        assert_eq!(owners, 1, "SET {key}: {owners} nodes took it");
    }

    /// Deletes every key on every node (`FLUSHALL` acts on one node only in a cluster).
    ///
    /// Panics if a node is stopped: its keys would come back with it.
    pub fn flush_all(&self) {
        for (i, node) in self.nodes.iter().enumerate() {
            assert!(node.child.is_some(), "flush_all: node {i} is stopped");
            node.query::<()>(&redis::cmd("FLUSHALL"))
                .unwrap_or_else(|e| panic!("FLUSHALL on node {i}: {e}"));
        }
    }

    fn running(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.child.is_some())
    }

    /// Starts node `i` on fresh ports in a fresh directory, retrying on new ports if it exits
    /// at once: the probe in `free_port` cannot reserve the ports, only find them free.
    fn start_new_node(&mut self, i: usize) {
        let dir = self.dir.path().join(format!("node-{i}"));
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            if dir.exists() {
                fs::remove_dir_all(&dir).expect("clear the directory of a failed node");
            }
            fs::create_dir(&dir).expect("create the node's directory");
            let mut node = Node {
                port: free_port(),
                dir: dir.clone(),
                child: None,
            };
            node.write_config();
            match node.spawn_and_wait() {
                Ok(()) => {
                    self.nodes.push(node);
                    return;
                }
                // `node` drops here, which kills it if it is still running.
                Err(e) => failures.push(format!("port {}: {e}\n{}", node.port, node.log_tail())),
            }
        }
        panic!(
            "redis-server node {i} did not start in {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    /// Joins the nodes into a cluster: assigns the slots evenly and introduces them to each
    /// other, then waits (inside `redis-cli`) until they agree on the configuration.
    fn create(&self) {
        let log_path = self.dir.path().join("cluster-create.log");
        let log = File::create(&log_path).expect("create cluster-create.log");
        let mut command = Command::new("redis-cli");
        command.arg("--cluster").arg("create");
        command.args(
            self.nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port)),
        );
        command.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log's handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("run redis-cli --cluster create: {e}"));
        // `redis-cli` waits for the nodes to agree with no deadline of its own.
        let deadline = Instant::now() + CREATE_DEADLINE;
        let status = loop {
            match child.try_wait().expect("poll redis-cli") {
                Some(status) => break Some(status),
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => thread::sleep(POLL),
            }
        };
        if status.is_none_or(|status| !status.success()) {
            let output = fs::read_to_string(&log_path).unwrap_or_default();
            let outcome = match status {
                Some(status) => format!("failed ({status})"),
                None => format!("did not finish within {CREATE_DEADLINE:?}"),
            };
            panic!(
                "redis-cli --cluster create {outcome}:\n{output}\n{}",
                self.log_tails()
            );
        }
    }

    /// Waits until every running node reports `cluster_state:ok` with all slots assigned.
    fn wait_cluster_ok(&self, when: &str) {
        let deadline = Instant::now() + CLUSTER_OK_DEADLINE;
        loop {
            let states: Vec<String> = self
                .running()
                .filter_map(|(i, node)| match node.cluster_ok() {
                    Ok(()) => None,
                    Err(state) => Some(format!("node {i} (port {}): {state}", node.port)),
                })
                .collect();
            if states.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "Redis Cluster not ok {when} within {CLUSTER_OK_DEADLINE:?}:\n{}\n{}",
                    states.join("\n"),
                    self.log_tails()
                );
            }
            thread::sleep(POLL);
        }
    }

    fn log_tails(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, node)| format!("--- node {i} (port {}):\n{}", node.port, node.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A node's process dies with it, also while a panic unwinds: no test leaves a `redis-server`
/// behind unless the test process itself is killed.
impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Errors ignored: panicking in `drop` during an unwind would abort.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Node {
    /// Written once, so that a restart uses exactly the configuration the node was created
    /// with. `appendfsync always` makes every acknowledged write durable against `kill -9`;
    /// `save ""` leaves the AOF as the only persistence, so a restart tests exactly that.
    fn write_config(&self) {
        let config = format!(
            "port {port}\n\
             bind 127.0.0.1\n\
             protected-mode no\n\
             daemonize no\n\
             dir \"{dir}\"\n\
             logfile \"{log}\"\n\
             cluster-enabled yes\n\
             cluster-config-file nodes.conf\n\
             cluster-node-timeout {NODE_TIMEOUT_MS}\n\
             appendonly yes\n\
             appendfsync always\n\
             save \"\"\n",
            port = self.port,
            dir = self.dir.display(),
            log = self.log_path().display(),
        );
        fs::write(self.config_path(), config).expect("write redis.conf");
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("redis.conf")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// What `redis-server` prints before it has opened its log file (a bad config, say).
    fn stdio_path(&self) -> PathBuf {
        self.dir.join("stdio.log")
    }

    /// Spawns the server and waits until it answers `PING` (it answers `LOADING` while it
    /// replays its AOF); an error if it exits first or does not answer in time, in which case
    /// it is still in `self.child` and dies when the node drops.
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let stdio = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stdio_path())
            .expect("open the node's stdio.log");
        let child = Command::new("redis-server")
            .arg(self.config_path())
            .stdin(Stdio::null())
            .stdout(stdio.try_clone().expect("clone the log's handle"))
            .stderr(stdio)
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + NODE_START_DEADLINE;
        loop {
            let child = self.child.as_mut().expect("spawned above");
            if let Some(status) = child.try_wait().map_err(|e| format!("poll: {e}"))? {
                self.child = None;
                return Err(format!("redis-server exited at start ({status})"));
            }
            if self
                .query::<String>(&redis::cmd("PING"))
                .is_ok_and(|pong| pong == "PONG")
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("no PONG within {NODE_START_DEADLINE:?}"));
            }
            thread::sleep(POLL);
        }
    }

    /// `Ok` if this node sees the cluster as healthy, else what it reports instead.
    fn cluster_ok(&self) -> Result<(), String> {
        let info: String = self
            .query(redis::cmd("CLUSTER").arg("INFO"))
            .map_err(|e| format!("CLUSTER INFO: {e}"))?;
        let state = info_field(&info, "cluster_state");
        let assigned = info_field(&info, "cluster_slots_assigned");
        if state == Some("ok") && assigned == Some(SLOTS.to_string().as_str()) {
            Ok(())
        } else {
            Err(format!(
                "cluster_state:{}, cluster_slots_assigned:{}",
                state.unwrap_or("?"),
                assigned.unwrap_or("?")
            ))
        }
    }

    /// One command on a fresh connection: the nodes come and go, and a test polls rarely
    /// enough that reconnecting costs nothing worth caching a connection for.
    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))?;
        let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
        connection.set_read_timeout(Some(Duration::from_secs(5)))?;
        cmd.query(&mut connection)
    }

    fn log_tail(&self) -> String {
        [self.stdio_path(), self.log_path()]
            .iter()
            .map(|path| tail(path, LOG_TAIL_LINES))
            .collect::<Vec<_>>()
            .join("")
    }
}

/// The last `lines` lines of a file, or a note that it could not be read.
fn tail(path: &Path, lines: usize) -> String {
    match File::open(path) {
        Ok(file) => {
            let all: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
            let mut out = format!("{}:\n", path.display());
            for line in &all[all.len().saturating_sub(lines)..] {
                out.push_str(line);
                out.push('\n');
            }
            out
        }
        Err(e) => format!("{}: {e}\n", path.display()),
    }
}

/// The value of `name` in an `INFO`-style answer (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// A client port whose bus port is free too. Ports are handed out from a per-process sequence
/// (so clusters started by parallel test threads never get the same port), starting at an
/// offset derived from the process id (so concurrent test processes rarely collide either), and
/// each is probed by binding it; a port taken anyway between probe and use makes the node exit,
/// and `start_new_node` retries.
fn free_port() -> u16 {
    static NEXT_PORT: AtomicU64 = AtomicU64::new(0);
    let offset = u64::from(std::process::id()) * PID_STRIDE;
    for _ in 0..PORT_SPAN {
        let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(PORT_LOW + (offset + n) % PORT_SPAN).expect("port below 22768");
        let free = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(port) && free(port + BUS_OFFSET) {
            return port;
        }
    }
    panic!(
        "no free port pair (P, P + {BUS_OFFSET}) for Redis with P in {PORT_LOW}..{}",
        PORT_LOW + PORT_SPAN
    );
}
