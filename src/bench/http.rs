//! Measurements of the HTTP service: ingest with durable answers, and list pages under many
//! concurrent clients, against a real server on loopback.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bench::Latency;
use crate::config::Config;
use crate::engine::{DedupIndex, ShardSpec, Sort};
use crate::input::Lines;
use crate::server::Server;
use crate::{Error, Result};

/// What stops a [`LocalServer`]'s server.
type StopSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A server running in this process on a loopback port, for benchmarks and tests.
pub struct LocalServer {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl LocalServer {
    /// Opens (or creates) the index in `dir` with `config` and serves it on a free port of
    /// 127.0.0.1.
    pub fn start(dir: &Path, config: Config) -> Result<Self> {
        let index = DedupIndex::open_or_create(dir, Some(config.clone()))?;
        let server = Server::start(index, config.server)?;
        Self::serve(move |listener, stopped| async move { server.serve(listener, stopped).await })
    }

    /// Replica `name` of shard `shard` of an index split by story over the store `store`, its
    /// index in `dir`, on a free port of 127.0.0.1.
    #[cfg(feature = "redis")]
    pub fn start_replica(
        dir: &Path,
        config: Config,
        shard: ShardSpec,
        store: crate::forest::redis::RedisAddress,
        name: &str,
    ) -> Result<Self> {
        use crate::server::replica::Replica;
        let index = DedupIndex::open_or_create_shard(dir, Some(config.clone()))?;
        let name = name.to_owned();
        Self::serve(move |listener, stopped| async move {
            let max_entries = config.server.log_max_entries;
            let committed = index.log_position().map(str::to_owned);
            let replica =
                Replica::connect(&store, shard, &name, committed.as_deref(), max_entries).await?;
            let server = Server::start_replica(index, config.server, shard, replica)?;
            server.serve(listener, stopped).await
        })
    }

    /// A coordinator of `shards` (their URLs, shard 0 first) over the store `store`, on a
    /// free port of 127.0.0.1.
    #[cfg(feature = "redis")]
    pub fn start_coordinator(
        config: Config,
        shards: Vec<String>,
        store: crate::forest::redis::RedisAddress,
    ) -> Result<Self> {
        use crate::server::coordinator::Coordinator;
        Self::serve(move |listener, stopped| async move {
            let server = config.server.clone();
            let coordinator = Coordinator::start(config, server, &shards, &store).await?;
            coordinator.serve(listener, stopped).await
        })
    }

    /// Runs `serve` on a runtime of its own thread, with a listener on a free loopback port
    /// and a signal to stop.
    fn serve<F, Fut>(serve: F) -> Result<Self>
    where
        F: FnOnce(tokio::net::TcpListener, StopSignal) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new()
                .map_err(|error| Error::Server(format!("starting the async runtime: {error}")))?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|error| Error::Server(format!("binding a loopback port: {error}")))?;
                let _ = ready.send(listener.local_addr().ok());
                serve(
                    listener,
                    Box::pin(async move {
                        let _ = stopped.await;
                    }),
                )
                .await
            })
        });
        match bound.recv().ok().flatten() {
            Some(addr) => Ok(LocalServer {
                addr,
                shutdown: Some(shutdown),
                thread: Some(thread),
            }),
            None => Err(match thread.join() {
                Ok(Err(error)) => error,
                _ => Error::Server("the server did not start".to_owned()),
            }),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server: requests in flight finish, queued writes are committed.
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Server("the server thread panicked".to_owned())),
            None => Ok(()),
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Ingest over HTTP: every batch answered after its commit.
#[derive(Debug, Clone, Serialize)]
pub struct HttpIngestReport {
    /// Documents indexed (as the answers count them).
    pub documents: u64,
    /// POSTs sent.
    pub batches: usize,
    /// Documents per POST.
    pub batch_size: usize,
    /// Clients posting at once.
    pub clients: usize,
    /// The server's group-commit delay, milliseconds.
    pub commit_delay_ms: f64,
    /// From the first POST to the last answer.
    pub seconds: f64,
    /// Documents per second, durable (target >= 3,000 with batches of 500).
    pub documents_per_second: f64,
    /// Per-POST latency, including the wait for the commit.
    pub batch_latency: Latency,
}

/// List pages under concurrent clients.
#[derive(Debug, Clone, Serialize)]
pub struct HttpSearchReport {
    /// Clients searching at once.
    pub clients: usize,
    /// Requests answered.
    pub requests: usize,
    /// The queries rotated through ("" is every document), with every sort.
    pub queries: Vec<String>,
    /// The parameters added to every request (empty: the plain list page).
    pub parameters: String,
    /// Wall time.
    pub seconds: f64,
    /// Requests per second.
    pub requests_per_second: f64,
    /// Per-request latency (target p99 <= 50 ms with 32 clients).
    pub latency: Latency,
}

/// The JSON answer of a GET of `url`.
pub(crate) fn get_json(url: &str) -> Result<serde_json::Value> {
    let failed = |error: String| Error::Server(format!("GET {url}: {error}"));
    let text = ureq::get(url)
        .call()
        .map_err(|error| failed(error.to_string()))?
        .body_mut()
        .read_to_string()
        .map_err(|error| failed(error.to_string()))?;
    serde_json::from_str(&text).map_err(|error| failed(error.to_string()))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// The first error any load client met; the client that meets one stops.
#[derive(Default)]
struct FirstFailure(Mutex<Option<Error>>);

impl FirstFailure {
    fn record(&self, error: Error) {
        if let Ok(mut first) = self.0.lock() {
            first.get_or_insert(error);
        }
    }

    fn into_result(self) -> Result<()> {
        match self.0.into_inner().ok().flatten() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// A request's answer body when its status is a success; otherwise an error that names the
/// request (`what`) and the status.
fn successful<T>(
    answer: std::result::Result<(ureq::http::StatusCode, T), ureq::Error>,
    what: &str,
) -> Result<T>
where
    T: std::fmt::Debug,
{
    match answer {
        Ok((status, body)) if status.is_success() => Ok(body),
        Ok((status, body)) => Err(Error::Server(format!("{what} answered {status}: {body:?}"))),
        Err(error) => Err(Error::Server(format!("{what} failed: {error}"))),
    }
}

/// Posts the lines `lines` of `corpus` (JSON Lines, counted from 0) to `url` in NDJSON
/// batches of `batch_size` from `clients` threads, each waiting for its answer before sending
/// the next, and times it.
pub fn http_ingest(
    url: &str,
    corpus: &Path,
    batch_size: usize,
    clients: usize,
    commit_delay: Duration,
    lines: std::ops::Range<usize>,
) -> Result<HttpIngestReport> {
    let wanted = lines;
    let mut lines = Lines::new(crate::input::open(corpus)?);
    let mut batches: Vec<Vec<u8>> = Vec::new();
    let mut batch = Vec::new();
    let mut in_batch = 0;
    let mut read = 0usize;
    while let Some(line) = lines.next_line().map_err(|source| Error::Io {
        path: corpus.to_owned(),
        source,
    })? {
        if read >= wanted.end {
            break;
        }
        let (_, Ok(line)) = line else { continue };
        read += 1;
        if read <= wanted.start {
            continue;
        }
        batch.extend_from_slice(&line);
        batch.push(b'\n');
        in_batch += 1;
        if in_batch == batch_size {
            batches.push(std::mem::take(&mut batch));
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        batches.push(batch);
    }
    let next = AtomicUsize::new(0);
    let indexed = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(batches.len()));
    let failure = FirstFailure::default();
    let endpoint = format!("{url}/v1/documents");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..clients.max(1) {
            scope.spawn(|| {
                let agent = agent();
                while let Some(body) = batches.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let sent = Instant::now();
                    let answer = agent
                        .post(&endpoint)
                        .header("content-type", "application/x-ndjson")
                        .send(&body[..])
                        .and_then(|mut response| {
                            let status = response.status();
                            Ok((status, response.body_mut().read_to_string()?))
                        });
                    let elapsed = sent.elapsed().as_secs_f64() * 1e3;
                    match successful(answer, "a POST of a batch") {
                        Ok(text) => {
                            let count = serde_json::from_str::<serde_json::Value>(&text)
                                .ok()
                                .and_then(|answer| answer["indexed"].as_u64())
                                .unwrap_or(0);
                            indexed.fetch_add(count as usize, Ordering::Relaxed);
                            if let Ok(mut latencies) = latencies.lock() {
                                latencies.push(elapsed);
                            }
                        }
                        Err(error) => return failure.record(error),
                    }
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    failure.into_result()?;
    let documents = indexed.into_inner() as u64;
    Ok(HttpIngestReport {
        documents,
        batches: batches.len(),
        batch_size,
        clients,
        commit_delay_ms: commit_delay.as_secs_f64() * 1e3,
        seconds,
        documents_per_second: documents as f64 / seconds,
        batch_latency: Latency::of(latencies.into_inner().unwrap_or_default()),
    })
}

/// The parameters of the list page that counts over all matches, the platform's search page:
/// facets by source and a daily histogram (its p99 at 32 clients is the figure to watch).
pub const FACETED_LIST_PAGE: &str = "facets=source&histogram=1d";

/// `clients` threads each send `requests` list-page requests to `url`, rotating through
/// `queries` and every sort (and the first three pages), each with `parameters` (already
/// encoded, such as [`FACETED_LIST_PAGE`]; empty for none) added, and time every answer.
pub fn http_search(
    url: &str,
    queries: &[String],
    parameters: &str,
    clients: usize,
    requests: usize,
) -> Result<HttpSearchReport> {
    let parameters_suffix = if parameters.is_empty() {
        String::new()
    } else {
        format!("&{parameters}")
    };
    let plans = list_pages(url, queries, &parameters_suffix);
    let timed = timed_gets(&plans, clients, requests)?;
    Ok(HttpSearchReport {
        clients,
        requests: timed.latency.samples,
        queries: queries.to_vec(),
        parameters: parameters.to_owned(),
        seconds: timed.seconds,
        requests_per_second: timed.requests_per_second,
        latency: timed.latency,
    })
}

/// The list pages `http_search` rotates through: each query with every sort and one of the
/// first three pages, `suffix` added.
pub fn list_pages(url: &str, queries: &[String], suffix: &str) -> Vec<String> {
    queries
        .iter()
        .flat_map(|query| {
            Sort::ALL.iter().enumerate().map(move |(page, (sort, _))| {
                let query: String = url_encode(query);
                format!(
                    "{url}/v1/search?q={query}&sort={sort}&limit=20&offset={}{suffix}",
                    (page % 3) * 20
                )
            })
        })
        .collect()
}

/// Trending pages and pages with members against the most reposted stories' pages of the
/// same queries, timed one after the other in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct ListPageKindsReport {
    /// Clients at once.
    pub clients: usize,
    /// `GET /v1/search?q=…&sort=similar_desc&limit=20`, each query in turn.
    pub similar_desc: TimedRequests,
    /// `GET /v1/trending?q=…&limit=20` (window 6h up to the time of the request), the same
    /// queries.
    pub trending: TimedRequests,
    /// The `similar_desc` pages with `members=3`.
    pub members: TimedRequests,
    /// `trending`'s p99 over `similar_desc`'s (target at most 1.5).
    pub trending_p99_ratio: f64,
    /// `members`' p99 over `similar_desc`'s.
    pub members_p99_ratio: f64,
}

/// `clients` threads each GET `requests` pages of `queries` of each kind of
/// [`ListPageKindsReport`], one kind after the other.
pub fn http_list_page_kinds(
    url: &str,
    queries: &[String],
    clients: usize,
    requests: usize,
) -> Result<ListPageKindsReport> {
    let timed = |path: &str, suffix: &str| -> Result<TimedRequests> {
        let pages: Vec<String> = queries
            .iter()
            .map(|query| format!("{url}{path}q={}&limit=20{suffix}", url_encode(query)))
            .collect();
        timed_gets(&pages, clients, requests)
    };
    let similar_desc = timed("/v1/search?sort=similar_desc&", "")?;
    let trending = timed("/v1/trending?", "")?;
    let members = timed("/v1/search?sort=similar_desc&", "&members=3")?;
    let ratio = |kind: &TimedRequests| {
        kind.latency.p99_ms / similar_desc.latency.p99_ms.max(f64::MIN_POSITIVE)
    };
    Ok(ListPageKindsReport {
        clients,
        trending_p99_ratio: ratio(&trending),
        members_p99_ratio: ratio(&members),
        similar_desc,
        trending,
        members,
    })
}

/// Requests timed under concurrent clients.
#[derive(Debug, Clone, Serialize)]
pub struct TimedRequests {
    /// Wall time.
    pub seconds: f64,
    /// Requests answered per second.
    pub requests_per_second: f64,
    /// Per-request latency.
    pub latency: Latency,
}

/// `clients` threads each GET `requests` of `targets` (full URLs, rotated through) and time
/// every answer; any answer but a success is an error.
pub fn timed_gets(targets: &[String], clients: usize, requests: usize) -> Result<TimedRequests> {
    if targets.is_empty() {
        return Err(Error::Server("no request to time".to_owned()));
    }
    let latencies = Mutex::new(Vec::with_capacity(clients * requests));
    let failure = FirstFailure::default();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for client in 0..clients.max(1) {
            let (latencies, failure) = (&latencies, &failure);
            scope.spawn(move || {
                let agent = agent();
                let mut mine = Vec::with_capacity(requests);
                for request in 0..requests {
                    let target = &targets[(client * 7 + request) % targets.len()];
                    let sent = Instant::now();
                    let answer = agent.get(target).call().and_then(|mut response| {
                        let status = response.status();
                        Ok((status, response.body_mut().read_to_string()?))
                    });
                    match successful(answer, target) {
                        Ok(_) => mine.push(sent.elapsed().as_secs_f64() * 1e3),
                        Err(error) => return failure.record(error),
                    }
                }
                if let Ok(mut latencies) = latencies.lock() {
                    latencies.extend(mine);
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    failure.into_result()?;
    let latencies = latencies.into_inner().unwrap_or_default();
    Ok(TimedRequests {
        seconds,
        requests_per_second: latencies.len() as f64 / seconds,
        latency: Latency::of(latencies),
    })
}

/// Percent-encodes a query parameter's value.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}
