//! How a coordinator reaches its shards' replicas: HTTP/1.1 over pooled keep-alive
//! connections, each call bounded by a timeout; a read from a replica that has applied this
//! coordinator's writes, passed to a sibling when one fails; a write's answer from the first
//! replica that applies it; an unreachable or slow shard an error that names it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::config::Secret;
use crate::engine::ShardSpec;
use crate::server::api::ReplicaStatus;
use crate::server::error::ApiError;
use crate::server::replica::{LOG_AFTER_HEADER, LogPosition};
use crate::{Error, Result};

/// One shard's answer: its status and body.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

/// One read call of a shard: what to ask and how long to wait.
pub(crate) struct Call<'a> {
    pub(crate) method: Method,
    pub(crate) path_and_query: &'a str,
    pub(crate) body: Option<(Bytes, &'static str)>,
    pub(crate) timeout: Duration,
}

/// Why a shard did not answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("shard {shard} ({url}) {reason}")]
pub(crate) struct Unavailable {
    /// Its number.
    pub(crate) shard: usize,
    /// Where it is.
    pub(crate) url: String,
    /// What happened.
    pub(crate) reason: String,
}

/// The shards of an index split by story, in shard order (`--shards URL,…`: the first is
/// shard 0), each held by one or more replicas (`URL|URL`).
pub(crate) struct Shards {
    shards: Vec<ShardReplicas>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// The `Authorization` header the shards' internal routes need (the write key).
    authorization: Option<HeaderValue>,
}

/// One shard's replicas, as this coordinator sees them.
struct ShardReplicas {
    replicas: Vec<ReplicaLink>,
    /// The newest position of the shard's log whose write this coordinator has answered:
    /// reads go to replicas that have applied it, so that a client reads its own writes.
    answered: Mutex<LogPosition>,
    /// Where the next read starts looking, so that reads spread over the replicas.
    next: AtomicUsize,
}

/// One replica as this coordinator sees it.
struct ReplicaLink {
    url: String,
    /// Whether it answered the last health check or call.
    healthy: AtomicBool,
    /// What it said last: its name and the last position it committed.
    seen: Mutex<(Option<String>, LogPosition)>,
}

impl ReplicaLink {
    fn applied(&self) -> LogPosition {
        self.seen.lock().map_or(LogPosition::START, |seen| seen.1)
    }

    fn raise(&self, position: LogPosition) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.1 = seen.1.max(position);
        }
    }
}

/// The header of a coordinator's answers with, per shard, the newest position of its log
/// whose write the coordinator has answered (`0:1764400000000-3,1:1764400000002-0`): a client
/// that sends it back with its reads (as [`READ_AFTER_HEADER`]), through any coordinator, reads
/// its own writes.
pub(crate) const WRITE_POSITIONS_HEADER: &str = "x-write-positions";

/// The header of a client's read with the positions it must see
/// ([`WRITE_POSITIONS_HEADER`] of an answer to one of its writes).
pub(crate) const READ_AFTER_HEADER: &str = "x-read-after";

/// The positions a client's read must see, per shard ([`READ_AFTER_HEADER`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientPositions(Vec<LogPosition>);

impl ClientPositions {
    /// Reads `shard:position` pairs, comma-separated, for shards below `count`.
    pub(crate) fn parse(text: &str, count: usize) -> std::result::Result<Self, String> {
        let mut positions = vec![LogPosition::START; count];
        for pair in text
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
        {
            let parsed = pair.split_once(':').and_then(|(shard, position)| {
                Some((shard.parse::<usize>().ok()?, position.parse().ok()?))
            });
            match parsed {
                Some((shard, position)) if shard < count => positions[shard] = position,
                _ => {
                    return Err(format!(
                        "{READ_AFTER_HEADER}: {pair:?} is not a shard's position such as \
                         0:1764400000000-3 (the {WRITE_POSITIONS_HEADER} of an answer to a \
                         write, for shards 0 to {})",
                        count.saturating_sub(1)
                    ));
                }
            }
        }
        Ok(ClientPositions(positions))
    }

    fn get(&self, shard: usize) -> LogPosition {
        self.0.get(shard).copied().unwrap_or(LogPosition::START)
    }
}

tokio::task_local! {
    /// The positions the read being answered must see: set around each request by the
    /// coordinator's router, read by [`Shards::read`].
    pub(crate) static CLIENT_POSITIONS: ClientPositions;
}

/// How far behind its most advanced sibling, by the log's clock, a replica may be and still
/// be asked first for reads.
const CAUGHT_UP_WITHIN_MS: u64 = 1_000;

/// How long a health check waits for a replica.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);

impl Shards {
    /// The shards at `shards`, each one replica's URL (`http://host:port`, no path) or
    /// several joined by `|`, called with `key`.
    pub(crate) fn new(shards: &[String], key: Option<&Secret>) -> Result<Self> {
        let mut checked = Vec::with_capacity(shards.len());
        for shard in shards {
            let mut replicas = Vec::new();
            for url in shard.split('|') {
                replicas.push(ReplicaLink {
                    url: checked_url(url)?,
                    healthy: AtomicBool::new(true),
                    seen: Mutex::new((None, LogPosition::START)),
                });
            }
            checked.push(ShardReplicas {
                replicas,
                answered: Mutex::new(LogPosition::START),
                next: AtomicUsize::new(0),
            });
        }
        if checked.is_empty() {
            return Err(Error::Config(
                "--shards names no shard: give their URLs, comma-separated, shard 0 first"
                    .to_owned(),
            ));
        }
        let authorization = key
            .map(|key| HeaderValue::from_str(&key.bearer()))
            .transpose()
            .map_err(|_| Error::Config("the write key is not a valid header value".to_owned()))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Shards {
            shards: checked,
            client,
            authorization,
        })
    }

    /// How many shards there are.
    pub(crate) fn count(&self) -> usize {
        self.shards.len()
    }

    /// How many replicas shard `shard` has.
    pub(crate) fn replica_count(&self, shard: usize) -> usize {
        self.shards[shard].replicas.len()
    }

    /// Shard `shard`'s replicas' URLs, for messages.
    pub(crate) fn describe(&self, shard: usize) -> String {
        let urls: Vec<&str> = self.shards[shard]
            .replicas
            .iter()
            .map(|replica| replica.url.as_str())
            .collect();
        urls.join("|")
    }

    /// Calls `path_and_query` on replica `replica` of shard `shard` with `body` (JSON or
    /// NDJSON by `content_type`), waiting at most `timeout`; with `after`, the replica answers
    /// once it has applied that position of its log.
    pub(crate) async fn call_replica(
        &self,
        (shard, replica): (usize, usize),
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        timeout: Duration,
        after: Option<LogPosition>,
    ) -> std::result::Result<Answer, Unavailable> {
        let url = &self.shards[shard].replicas[replica].url;
        let unavailable = |reason: String| Unavailable {
            shard,
            url: url.clone(),
            reason,
        };
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{url}{path_and_query}"));
        if let Some(authorization) = &self.authorization {
            request = request.header(header::AUTHORIZATION, authorization.clone());
        }
        if let Some(after) = after.filter(|after| *after > LogPosition::START) {
            request = request.header(LOG_AFTER_HEADER, after.to_string());
        }
        let (bytes, content_type) = body.unwrap_or_default();
        if !content_type.is_empty() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let request = request
            .body(Full::new(bytes))
            .map_err(|error| unavailable(format!("could not be asked: {error}")))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Answer { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) if answer.status.is_server_error() => Err(unavailable(format!(
                "answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body).trim()
            ))),
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(unavailable(format!("did not answer: {}", cause(&*error)))),
            Err(_) => Err(unavailable(format!(
                "did not answer within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }

    /// A read of shard `shard`, from one of its replicas: first those that answer and have
    /// applied every write this coordinator answered on the shard (and the position the
    /// client asks for, [`CLIENT_POSITIONS`]) and are within a second of
    /// their most advanced sibling (in turn, to spread the reads), then those behind (which
    /// wait a moment for the coordinator's writes), then those that did not answer last
    /// time; each that fails is passed over for the next.
    pub(crate) async fn read(
        &self,
        shard: usize,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        timeout: Duration,
    ) -> std::result::Result<Answer, Unavailable> {
        let call = Call {
            method,
            path_and_query,
            body,
            timeout,
        };
        self.read_from(shard, None, call)
            .await
            .map(|(_, answer)| answer)
    }

    /// A read of shard `shard` as [`read`](Self::read) makes it, or with `replica` from that
    /// replica first (a cursor walk's snapshot is that process's: a sibling has it only if its
    /// index is the same, and otherwise refuses the walk, which is clearer than waiting for
    /// the replica); with the replica that answered.
    pub(crate) async fn read_from(
        &self,
        shard: usize,
        replica: Option<usize>,
        call: Call<'_>,
    ) -> std::result::Result<(usize, Answer), Unavailable> {
        let Call {
            method,
            path_and_query,
            body,
            timeout,
        } = call;
        let group = &self.shards[shard];
        let answered = group
            .answered
            .lock()
            .map_or(LogPosition::START, |floor| *floor);
        let asked = CLIENT_POSITIONS
            .try_with(|positions| positions.get(shard))
            .unwrap_or(LogPosition::START);
        let floor = answered.max(asked);
        // A replica further behind its most advanced sibling than `CAUGHT_UP_WITHIN` (one
        // that restarted and is catching up) is asked only when the others fail, even by a
        // coordinator that has written nothing to the shard.
        let newest = group
            .replicas
            .iter()
            .filter(|link| link.healthy.load(Ordering::Relaxed))
            .map(ReplicaLink::applied)
            .max()
            .unwrap_or(LogPosition::START);
        let lagging = |applied: LogPosition| {
            applied < floor || applied.millis() + CAUGHT_UP_WITHIN_MS < newest.millis()
        };
        let count = group.replicas.len();
        let first = group.next.fetch_add(1, Ordering::Relaxed) % count;
        let mut order: Vec<usize> = (0..count).map(|turn| (first + turn) % count).collect();
        order.sort_by_key(|&replica| {
            let link = &group.replicas[replica];
            (
                !link.healthy.load(Ordering::Relaxed),
                lagging(link.applied()),
            )
        });
        // The walk's replica first, asked for its snapshot whatever it has applied since.
        let pinned = replica.filter(|&replica| replica < count);
        if let Some(pinned) = pinned {
            order.retain(|&replica| replica != pinned);
            order.insert(0, pinned);
        }
        let mut failures = Vec::new();
        for replica in order {
            let link = &group.replicas[replica];
            let asked = (shard, replica);
            let floor = (Some(replica) != pinned).then_some(floor);
            let call = self.call_replica(
                asked,
                method.clone(),
                path_and_query,
                body.clone(),
                timeout,
                floor,
            );
            match call.await {
                Ok(answer) => {
                    link.healthy.store(true, Ordering::Relaxed);
                    if let Some(floor) = floor {
                        link.raise(floor);
                    }
                    return Ok((replica, answer));
                }
                Err(error) => {
                    link.healthy.store(false, Ordering::Relaxed);
                    failures.push(error);
                }
            }
        }
        Err(all_failed(shard, failures))
    }

    /// Waits for the answer to entry `position` of shard `shard`'s log from whichever of its
    /// replicas applies it first.
    pub(crate) async fn applied(
        &self,
        shard: usize,
        position: LogPosition,
        timeout: Duration,
    ) -> std::result::Result<Answer, Unavailable> {
        let path = format!("/internal/v1/log/{position}");
        let mut calls: FuturesUnordered<_> = (0..self.replica_count(shard))
            .map(|replica| {
                let path = path.clone();
                async move {
                    let asked = (shard, replica);
                    let answer = self.call_replica(asked, Method::GET, &path, None, timeout, None);
                    (replica, answer.await)
                }
            })
            .collect();
        let group = &self.shards[shard];
        let mut failures = Vec::new();
        while let Some((replica, answer)) = calls.next().await {
            let link = &group.replicas[replica];
            match answer {
                // Applied before it last started: a sibling may still have the answer.
                Ok(answer) if answer.status == StatusCode::GONE => {
                    failures.push(Unavailable {
                        shard,
                        url: link.url.clone(),
                        reason: String::from_utf8_lossy(&answer.body).trim().to_owned(),
                    });
                }
                Ok(answer) => {
                    link.healthy.store(true, Ordering::Relaxed);
                    link.raise(position);
                    if let Ok(mut answered) = group.answered.lock() {
                        *answered = (*answered).max(position);
                    }
                    return Ok(answer);
                }
                Err(error) => failures.push(error),
            }
        }
        Err(all_failed(shard, failures))
    }

    /// Asks every replica how far it has applied its log; one that does not answer gets no
    /// reads until it does.
    pub(crate) async fn check_health(&self) {
        let mut checks: FuturesUnordered<_> = self
            .shards
            .iter()
            .enumerate()
            .flat_map(|(shard, group)| {
                (0..group.replicas.len()).map(move |replica| (shard, replica))
            })
            .map(|asked| async move {
                let answer = self
                    .call_replica(
                        asked,
                        Method::GET,
                        "/internal/v1/replica",
                        None,
                        HEALTH_TIMEOUT,
                        None,
                    )
                    .await;
                (asked, answer)
            })
            .collect();
        while let Some(((shard, replica), answer)) = checks.next().await {
            let link = &self.shards[shard].replicas[replica];
            let status = answer
                .ok()
                .filter(|answer| answer.status == StatusCode::OK)
                .and_then(|answer| serde_json::from_slice::<ReplicaStatus>(&answer.body).ok());
            match status.and_then(|status| Some((status.name, status.applied.parse().ok()?))) {
                Some((name, applied)) => {
                    if let Ok(mut seen) = link.seen.lock() {
                        *seen = (name, applied);
                    }
                    link.healthy.store(true, Ordering::Relaxed);
                }
                None => link.healthy.store(false, Ordering::Relaxed),
            }
        }
    }

    /// Per shard, the newest position of its log whose write this coordinator has answered
    /// ([`WRITE_POSITIONS_HEADER`]).
    pub(crate) fn write_positions(&self) -> String {
        let pairs: Vec<String> = self
            .shards
            .iter()
            .enumerate()
            .map(|(shard, group)| {
                let answered = group
                    .answered
                    .lock()
                    .map_or(LogPosition::START, |floor| *floor);
                format!("{shard}:{answered}")
            })
            .collect();
        pairs.join(",")
    }

    /// Every replica as this coordinator sees it, shard 0 first.
    pub(crate) fn statuses(&self) -> Vec<ReplicaStatus> {
        let count = self.count();
        let mut statuses = Vec::new();
        for (index, group) in self.shards.iter().enumerate() {
            let floor = group
                .answered
                .lock()
                .map_or(LogPosition::START, |floor| *floor);
            for link in &group.replicas {
                let (name, applied) = link
                    .seen
                    .lock()
                    .map_or((None, LogPosition::START), |seen| seen.clone());
                statuses.push(ReplicaStatus {
                    name,
                    shard: ShardSpec { index, count }.to_string(),
                    applied: applied.to_string(),
                    url: Some(link.url.clone()),
                    healthy: Some(link.healthy.load(Ordering::Relaxed)),
                    // Nothing applied yet (or not heard yet): no figure.
                    behind_ms: (applied > LogPosition::START)
                        .then(|| floor.millis().saturating_sub(applied.millis())),
                    user_dictionary: None,
                });
            }
        }
        statuses
    }
}

/// The error of a shard none of whose replicas answered: each one's reason.
fn all_failed(shard: usize, mut failures: Vec<Unavailable>) -> Unavailable {
    if failures.len() == 1
        && let Some(only) = failures.pop()
    {
        return only;
    }
    let urls: Vec<&str> = failures
        .iter()
        .map(|failure| failure.url.as_str())
        .collect();
    let reasons: Vec<String> = failures
        .iter()
        .map(|failure| format!("{} {}", failure.url, failure.reason))
        .collect();
    Unavailable {
        shard,
        url: urls.join("|"),
        reason: format!("has no replica that answered: {}", reasons.join("; ")),
    }
}

/// A replica's URL, checked: `http://host:port`, no path.
fn checked_url(url: &str) -> Result<String> {
    let url = url.trim().trim_end_matches('/');
    let parsed: Uri = url.parse().map_err(|_| {
        Error::Config(format!(
            "--shards: {url:?} is not a URL such as http://127.0.0.1:7701"
        ))
    })?;
    if parsed.scheme_str() != Some("http")
        || parsed.host().is_none()
        || parsed
            .path_and_query()
            .is_some_and(|path| path.as_str() != "/")
    {
        return Err(Error::Config(format!(
            "--shards: {url:?} is not a shard's address such as http://127.0.0.1:7701 \
             (plain HTTP, no path)"
        )));
    }
    Ok(url.to_owned())
}

/// An error with its sources, for one log line.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// A shard's answer passed on as it came (JSON).
pub(crate) fn relay(answer: Answer) -> Response {
    let mut response = (answer.status, answer.body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The 503 of a shard that did not answer.
pub(crate) fn shard_unavailable(error: &Unavailable) -> ApiError {
    tracing::warn!(%error, "shard unavailable");
    ApiError::unavailable(
        "shard_unavailable",
        format!("{error}; retry shortly (a re-sent document that was indexed is `unchanged`)"),
        2,
    )
}
