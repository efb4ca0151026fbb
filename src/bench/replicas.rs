//! Measurements of shards held by replica sets (`bench --only replicas`): durable ingest
//! through a coordinator with 2 shards of 1 replica, then of 2 replicas; how far a replica
//! lags its sibling under that load; and the time a replica killed (`kill -9`) after the
//! load, and written past while down, takes to answer again once restarted.
//!
//! The replicas are `serve` processes of this binary (so that one can be killed as a crash
//! would); the coordinator runs in this process. Every key goes under a prefix of this run's
//! own, which it leaves behind.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bench::Latency;
use crate::bench::http::{HttpIngestReport, LocalServer, get_json, http_ingest};
use crate::config::Config;
use crate::forest::redis::RedisAddress;
use crate::server::replica::LogPosition;
use crate::{Error, Result};

/// How the replicas part runs.
#[derive(Debug, Clone)]
pub struct ReplicasBench {
    /// Documents per POST.
    pub batch: usize,
    /// The corpus's first documents loaded in each setup.
    pub documents: usize,
    /// Documents written while the killed replica is down.
    pub written_while_down: usize,
}

/// A replica's lag behind its sibling.
#[derive(Debug, Clone, Serialize)]
pub struct Lag {
    /// How often each replica's position was read.
    pub sampled_every_ms: f64,
    /// Per log entry applied under the load, the time from the first replica of its shard
    /// having committed it to the second (to the sampling's precision).
    pub lag: Latency,
}

/// A replica killed and restarted.
#[derive(Debug, Clone, Serialize)]
pub struct Restart {
    /// Documents its shards held when it was killed.
    pub documents_before: usize,
    /// Documents written through the coordinator while it was down.
    pub written_while_down: usize,
    /// From the restart to its listening again.
    pub listening_seconds: f64,
    /// From the restart to its having applied everything its sibling has (the coordinator
    /// then sends it reads again).
    pub caught_up_seconds: f64,
}

/// The part's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicasReport {
    /// Through a coordinator, 2 shards of 1 replica.
    pub one_replica: HttpIngestReport,
    /// The same with 2 replicas per shard.
    pub two_replicas: HttpIngestReport,
    /// Documents per second with 2 replicas against 1 (target >= 0.6).
    pub ratio: f64,
    /// The second replica's lag under the 2-replica load (target p99 < 1 s).
    pub lag: Lag,
    /// A replica killed after the 2-replica load (target: answering within 10 s of its
    /// restart at 100,000 documents).
    pub restart: Restart,
}

/// How often the lag sampler reads the replicas' positions.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// Shards in each setup.
const SHARDS: usize = 2;

/// Runs the part on `corpus` over the cluster at `store`, with the replicas' indexes in
/// `scratch`.
pub fn replicas(
    corpus: &Path,
    settings: &Config,
    store: &RedisAddress,
    scratch: &Path,
    bench: &ReplicasBench,
) -> Result<ReplicasReport> {
    let commit_delay = Duration::from_millis(100);
    let stream = scratch.join("replicas-stream.jsonl");
    write_stream(corpus, bench.documents + bench.written_while_down, &stream)?;
    let load = |setup: &Setup, lines: std::ops::Range<usize>| {
        http_ingest(
            &setup.coordinator.url(),
            &stream,
            bench.batch,
            1,
            commit_delay,
            lines,
        )
    };
    eprintln!("bench: replicas: a coordinator and 2 shards of 1 replica");
    let one = Setup::start(settings, store, scratch, 1, commit_delay)?;
    let one_replica = load(&one, 0..bench.documents)?;
    one.stop()?;
    eprintln!("bench: replicas: a coordinator and 2 shards of 2 replicas");
    let mut two = Setup::start(settings, store, scratch, 2, commit_delay)?;
    let sampling = AtomicBool::new(true);
    let (two_replicas, samples) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| two.sample_positions(&sampling));
        let loaded = load(&two, 0..bench.documents);
        sampling.store(false, Ordering::Relaxed);
        let samples = sampler
            .join()
            .map_err(|_| Error::Server("the lag sampler panicked".to_owned()))
            .and_then(|samples| samples);
        (loaded, samples)
    });
    let (two_replicas, samples) = (two_replicas?, samples?);
    let lag = Lag {
        sampled_every_ms: SAMPLE_EVERY.as_secs_f64() * 1e3,
        lag: Latency::of(lags(&samples)),
    };
    eprintln!("bench: replicas: one replica killed, written past, restarted");
    two.replicas[0][1].kill();
    let end = bench.documents + bench.written_while_down;
    load(&two, bench.documents..end)?;
    let restarted = Instant::now();
    two.replicas[0][1].restart()?;
    let listening_seconds = restarted.elapsed().as_secs_f64();
    let target = two.replicas[0][0].applied()?;
    while two.replicas[0][1].applied()? < target {
        std::thread::sleep(Duration::from_millis(5));
    }
    let restart = Restart {
        documents_before: bench.documents,
        written_while_down: bench.written_while_down,
        listening_seconds,
        caught_up_seconds: restarted.elapsed().as_secs_f64(),
    };
    two.stop()?;
    Ok(ReplicasReport {
        ratio: two_replicas.documents_per_second / one_replica.documents_per_second.max(1e-9),
        one_replica,
        two_replicas,
        lag,
        restart,
    })
}

/// Writes the first `documents` articles of `corpus` to `stream`, the corpus over again when
/// it has fewer, each pass after the first with ids of its own (`<id>~2`, `<id>~3`…): the
/// same stories reposted, which join the earlier ones.
fn write_stream(corpus: &Path, documents: usize, stream: &Path) -> Result<()> {
    use std::io::Write;
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(stream).map_err(io_error(stream))?);
    let mut written = 0;
    for pass in 1.. {
        let before = written;
        let mut lines = crate::input::Lines::new(crate::input::open(corpus)?);
        while written < documents {
            let Some((_, line)) = lines.next_line().map_err(io_error(corpus))? else {
                break;
            };
            let Ok(line) = line else { continue };
            let mut article: serde_json::Value = match serde_json::from_slice(&line) {
                Ok(article) => article,
                Err(_) => continue,
            };
            if pass > 1
                && let Some(id) = article.get_mut("id")
            {
                let base = match &*id {
                    serde_json::Value::String(id) => id.clone(),
                    other => other.to_string(),
                };
                *id = serde_json::Value::from(format!("{base}~{pass}"));
            }
            serde_json::to_writer(&mut out, &article)
                .map_err(|error| io_error(stream)(std::io::Error::other(error)))?;
            out.write_all(b"\n").map_err(io_error(stream))?;
            written += 1;
        }
        if written >= documents || written == before {
            break;
        }
    }
    out.flush().map_err(io_error(stream))
}

/// A coordinator in this process over `SHARDS` shards of replica processes.
struct Setup {
    coordinator: LocalServer,
    /// Per shard, its replicas.
    replicas: Vec<Vec<ReplicaProcess>>,
}

impl Setup {
    fn start(
        settings: &Config,
        store: &RedisAddress,
        scratch: &Path,
        per_shard: usize,
        commit_delay: Duration,
    ) -> Result<Self> {
        let address = RedisAddress {
            prefix: format!("td-bench-{}-replicas-{per_shard}:", std::process::id()),
            ..store.clone()
        };
        let mut replicas = Vec::with_capacity(SHARDS);
        for shard in 0..SHARDS {
            let mut held = Vec::with_capacity(per_shard);
            for replica in 0..per_shard {
                let name = ["a", "b", "c", "d"][replica % 4];
                let dir = scratch.join(format!("replicas-{per_shard}-{shard}-{name}"));
                let arguments = vec![
                    "serve".to_owned(),
                    "--index".to_owned(),
                    dir.display().to_string(),
                    "--shard".to_owned(),
                    format!("{shard}/{SHARDS}"),
                    "--replica".to_owned(),
                    name.to_owned(),
                    "--store".to_owned(),
                    address.nodes.join(","),
                    "--store-prefix".to_owned(),
                    address.prefix.clone(),
                    "--commit-delay".to_owned(),
                    format!("{}ms", commit_delay.as_millis()),
                ];
                held.push(ReplicaProcess::start(arguments, dir.with_extension("log"))?);
            }
            replicas.push(held);
        }
        let urls = replicas
            .iter()
            .map(|held| {
                let urls: Vec<&str> = held.iter().map(|replica| replica.url.as_str()).collect();
                urls.join("|")
            })
            .collect();
        let mut config = settings.clone();
        config.server.commit_delay = commit_delay;
        let coordinator = LocalServer::start_coordinator(config, urls, address)?;
        Ok(Setup {
            coordinator,
            replicas,
        })
    }

    /// Each replica's position every [`SAMPLE_EVERY`] until `sampling` is cleared: per shard,
    /// the samples' times and each replica's position then.
    fn sample_positions(&self, sampling: &AtomicBool) -> Result<Vec<Samples>> {
        let mut samples: Vec<Samples> = self.replicas.iter().map(|_| Vec::new()).collect();
        let started = Instant::now();
        while sampling.load(Ordering::Relaxed) {
            for (shard, held) in self.replicas.iter().enumerate() {
                let positions = held
                    .iter()
                    .map(ReplicaProcess::applied)
                    .collect::<Result<Vec<_>>>()?;
                samples[shard].push((started.elapsed(), positions));
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
        Ok(samples)
    }

    fn stop(self) -> Result<()> {
        self.coordinator.stop()?;
        for mut replica in self.replicas.into_iter().flatten() {
            replica.kill();
        }
        Ok(())
    }
}

/// One shard's samples: when, and each replica's position then.
type Samples = Vec<(Duration, Vec<LogPosition>)>;

/// Per position seen applied, the time from the first replica of its shard having it to the
/// last, milliseconds.
fn lags(shards: &[Samples]) -> Vec<f64> {
    let mut lags = Vec::new();
    for samples in shards {
        let mut seen: Vec<LogPosition> = samples
            .iter()
            .flat_map(|(_, positions)| positions.iter().copied())
            .filter(|position| *position > LogPosition::START)
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let replicas = samples.first().map_or(0, |(_, positions)| positions.len());
        for position in seen {
            // When each replica was first seen at or past it (positions only grow).
            let reached: Vec<Option<Duration>> = (0..replicas)
                .map(|replica| {
                    let at =
                        samples.partition_point(|(_, positions)| positions[replica] < position);
                    samples.get(at).map(|(time, _)| *time)
                })
                .collect();
            if let (Some(first), Some(last)) = (
                reached.iter().flatten().min(),
                reached.iter().copied().collect::<Option<Vec<_>>>(),
            ) {
                let last = last.into_iter().max().unwrap_or(*first);
                lags.push((last - *first).as_secs_f64() * 1e3);
            }
        }
    }
    lags
}

/// A replica process of this binary.
struct ReplicaProcess {
    arguments: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    url: String,
}

impl ReplicaProcess {
    /// Starts `serve` with `arguments` on a free loopback port, its log in `log`.
    fn start(arguments: Vec<String>, log: PathBuf) -> Result<Self> {
        let mut replica = ReplicaProcess {
            arguments,
            log,
            child: None,
            url: String::new(),
        };
        replica.spawn("127.0.0.1:0")?;
        Ok(replica)
    }

    /// Starts it again on its address.
    fn restart(&mut self) -> Result<()> {
        let address = self.url.trim_start_matches("http://").to_owned();
        self.spawn(&address)
    }

    fn spawn(&mut self, address: &str) -> Result<()> {
        let failed = |why: String| Error::Server(format!("starting a replica: {why}"));
        let program = std::env::current_exe().map_err(|error| failed(error.to_string()))?;
        let log = std::fs::File::create(&self.log).map_err(|error| failed(error.to_string()))?;
        let mut child = Command::new(program)
            .args(&self.arguments)
            .args(["--addr", address])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|error| failed(error.to_string()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".to_owned()))?;
        let mut lines = BufReader::new(stdout).lines();
        let url = lines
            .by_ref()
            .map_while(std::result::Result::ok)
            .find_map(|line| Some(line.strip_prefix("listening on ")?.trim().to_owned()));
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed(format!(
                "it stopped before listening; its log is {}",
                self.log.display()
            )));
        };
        std::thread::spawn(move || lines.for_each(drop));
        self.child = Some(child);
        self.url = url;
        Ok(())
    }

    /// The last position it has committed.
    fn applied(&self) -> Result<LogPosition> {
        let status = get_json(&format!("{}/internal/v1/replica", self.url))?;
        status["applied"]
            .as_str()
            .and_then(|position| position.parse().ok())
            .ok_or_else(|| Error::Server(format!("{} answered no position: {status}", self.url)))
    }

    /// Kills it at once, as a crash would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
