//! Accepting and serving connections, with the limits that keep a crowd of idle, slow or
//! stalled clients from locking others out:
//!
//! - at most `max_connections` connections at once, and never more than the process's
//!   open-file limit leaves room for beside the index's own files ([`connection_cap`]); at
//!   most `max_connections_per_client` of them from one client address;
//! - the accept loop never waits for a slot. A connection beyond a cap makes way for itself
//!   by dropping at once (no graceful close that would wait for a head or a body) the
//!   connection, of all (or of its own address's), that does least for anyone: one with no
//!   request being handled (idle, or still sending its head), then one whose request body is
//!   still arriving, then one whose answer is being written; among those of a kind the one
//!   that has been so longest (a body: since it last brought bytes). A connection whose
//!   request is being handled (its body whole) never makes way; when every candidate is such,
//!   the newcomer is refused: a 503 `too_many_connections` written at once, then closed;
//! - the first request head on a connection must arrive within `first_head_timeout`; every
//!   head, keep-alive ones too, within `header_timeout` of when the server waits for it
//!   (hyper's header-read timeout);
//! - on shutdown, connections with no request being handled close at once; requests in flight
//!   get `shutdown_grace` to finish; then the rest are dropped.
//!
//! A body's own deadlines (`body_timeout`, `min_body_rate_kib`) are applied where bodies are
//! read (`api::read_body`).

use std::collections::{BTreeSet, HashMap, hash_map};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::{Body as _, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::error::ApiError;
use super::metrics::Metrics;
use crate::config::ServerConfig;

/// Open files kept for the index (segment files, merges, the settings), the store's
/// connections and the runtime, whatever the connections take.
const FILES_KEPT_FOR_THE_INDEX: u64 = 256;

/// hyper's buffer for a request head, held per connection: room for heads up to our own
/// limits ([`super::access::MAX_URI_BYTES`] and [`super::access::MAX_HEADER_BYTES`]) and as
/// much again, so that a head somewhat over them reaches the router, which answers in JSON;
/// only larger ones get hyper's bare 431 (or 414).
const MAX_HEAD_BYTES: usize = 2 * (super::access::MAX_URI_BYTES + super::access::MAX_HEADER_BYTES);

/// How often, at most, a body that keeps arriving moves back in the order of connections to
/// drop: often enough that a stalled body is always behind one that flows, rarely enough that
/// a fast one costs no lock per frame.
const PROGRESS_RESOLUTION: Duration = Duration::from_millis(100);

/// Connections the kernel queues for the server before it accepts them (the kernel caps it at
/// `net.core.somaxconn`). Clients that hold connections, each renewed as soon as it is dropped
/// to make way, keep the queue full of theirs when it is shallow; a full queue drops a new
/// client's SYN, which the client resends only a second later. This one holds a few thousand
/// beyond those served.
const LISTEN_BACKLOG: u32 = 4096;

/// Listens on the first of `addresses` that can be bound (as [`TcpListener::bind`] does), with
/// a deeper queue of connections not yet accepted than it gives.
pub async fn listen(addresses: &[SocketAddr]) -> std::io::Result<TcpListener> {
    let mut failure = None;
    for address in addresses {
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let listening = socket.and_then(|socket| {
            // As `TcpListener::bind`: a restarted server binds while old connections linger.
            socket.set_reuseaddr(true)?;
            socket.bind(*address)?;
            socket.listen(LISTEN_BACKLOG)
        });
        match listening {
            Ok(listener) => return Ok(listener),
            Err(error) => failure = Some(error),
        }
    }
    Err(failure.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")
    }))
}

/// The connections served at once: `configured`, lowered to what the open-file limit
/// (`RLIMIT_NOFILE`) leaves after 256 files kept for the index (half the limit when it is
/// smaller than twice that).
pub fn connection_cap(configured: usize) -> usize {
    let Some(limit) = open_file_limit() else {
        return configured;
    };
    let room = if limit >= 2 * FILES_KEPT_FOR_THE_INDEX {
        limit - FILES_KEPT_FOR_THE_INDEX
    } else {
        limit / 2
    };
    configured
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(1)
}

/// The soft limit on open files, if the system reports one.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given and reads nothing else.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// What a connection is doing, in the order connections are dropped to make way for others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// No request being handled: waiting for a request head, or reading one.
    AwaitingHead,
    /// A request's body is arriving, or stalled.
    ReceivingBody,
    /// The answer is being written (to a client that may not read it).
    Answering,
    /// The request's body is whole (or it had none) and its handler runs: never dropped for
    /// another connection.
    Handling,
}

/// A connection's place in the order connections are dropped in: its phase, when it entered
/// it (for a body, when it last brought bytes) in milliseconds since the registry started,
/// and its number, which orders connections of the same millisecond oldest first.
type Rank = (Phase, u64, u64);

/// One open connection.
struct Entry {
    client: IpAddr,
    rank: Rank,
    /// Request heads received so far.
    requests: u64,
    /// Notified to drop the connection at once.
    drop_now: Arc<Notify>,
}

/// The open connections, ranked. Invariant: `ranked` holds the rank of every entry and
/// nothing else, and `by_client` the same split by address, with no empty set.
#[derive(Default)]
struct Open {
    entries: HashMap<u64, Entry>,
    ranked: BTreeSet<Rank>,
    by_client: HashMap<IpAddr, BTreeSet<Rank>>,
    next_id: u64,
}

impl Open {
    fn insert(&mut self, client: IpAddr, now: u64) -> (u64, Arc<Notify>) {
        let id = self.next_id;
        self.next_id += 1;
        let rank = (Phase::AwaitingHead, now, id);
        let drop_now = Arc::new(Notify::new());
        self.ranked.insert(rank);
        self.by_client.entry(client).or_default().insert(rank);
        self.entries.insert(
            id,
            Entry {
                client,
                rank,
                requests: 0,
                drop_now: drop_now.clone(),
            },
        );
        (id, drop_now)
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        self.ranked.remove(&entry.rank);
        if let hash_map::Entry::Occupied(mut ranks) = self.by_client.entry(entry.client) {
            ranks.get_mut().remove(&entry.rank);
            if ranks.get().is_empty() {
                ranks.remove();
            }
        }
        Some(entry)
    }

    /// Moves connection `id` to `phase` as of `now`, if `allowed` says so of its phase.
    fn rerank(&mut self, id: u64, phase: Phase, now: u64, allowed: impl Fn(Phase) -> bool) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if !allowed(entry.rank.0) {
            return;
        }
        let old = std::mem::replace(&mut entry.rank, (phase, now, id));
        self.ranked.remove(&old);
        self.ranked.insert(entry.rank);
        if let Some(ranks) = self.by_client.get_mut(&entry.client) {
            ranks.remove(&old);
            ranks.insert(entry.rank);
        }
    }

    /// Drops the first connection in the order (of `client`'s, when given) unless it is
    /// handling a request; whether one was dropped.
    fn make_way(&mut self, client: Option<IpAddr>) -> bool {
        let ranks = match client {
            Some(client) => self.by_client.get(&client),
            None => Some(&self.ranked),
        };
        let Some(&(phase, _, id)) = ranks.and_then(BTreeSet::first) else {
            return false;
        };
        if phase == Phase::Handling {
            return false;
        }
        if let Some(entry) = self.remove(id) {
            entry.drop_now.notify_one();
        }
        true
    }

    fn of_client(&self, client: IpAddr) -> usize {
        self.by_client.get(&client).map_or(0, BTreeSet::len)
    }
}

/// The open connections and the caps they are held to.
struct Registry {
    open: Mutex<Open>,
    started: Instant,
    cap: usize,
    per_client: usize,
    metrics: Arc<Metrics>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Open> {
        // Nothing panics while the lock is held; were it poisoned, the sets are still whole.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes a connection from `client` in, dropping others to make room under both caps; or
    /// `None` when the connections that would have to make way are all handling requests.
    fn admit(self: &Arc<Self>, client: IpAddr) -> Option<Registration> {
        let now = self.now();
        let mut open = self.lock();
        let mut dropped = 0;
        if open.of_client(client) >= self.per_client {
            if !open.make_way(Some(client)) {
                drop(open);
                self.metrics.count_connections_closed("refused", 1);
                return None;
            }
            dropped += 1;
        }
        if open.entries.len() >= self.cap {
            if !open.make_way(None) {
                drop(open);
                self.metrics.count_connections_closed("refused", 1);
                return None;
            }
            dropped += 1;
        }
        let (id, drop_now) = open.insert(client, now);
        let count = open.entries.len();
        drop(open);
        self.metrics.set_connections(count);
        self.metrics.count_connections_closed("evicted", dropped);
        Some(Registration {
            tracker: Tracker {
                registry: self.clone(),
                id,
            },
            drop_now,
        })
    }

    /// Drops every connection with no request being handled (the server is stopping).
    fn drop_idle(&self) {
        let mut open = self.lock();
        while open
            .ranked
            .first()
            .is_some_and(|(phase, _, _)| *phase == Phase::AwaitingHead)
        {
            open.make_way(None);
        }
    }
}

/// What a connection's requests report of it to the registry.
#[derive(Clone)]
struct Tracker {
    registry: Arc<Registry>,
    id: u64,
}

impl Tracker {
    fn enter(&self, phase: Phase, allowed: impl Fn(Phase) -> bool) {
        let now = self.registry.now();
        self.registry.lock().rerank(self.id, phase, now, allowed);
    }

    /// A request head arrived: its body arrives next, or it is handled at once.
    fn request(&self, body_whole: bool) {
        let now = self.registry.now();
        let mut open = self.registry.lock();
        if let Some(entry) = open.entries.get_mut(&self.id) {
            entry.requests += 1;
        }
        let phase = if body_whole {
            Phase::Handling
        } else {
            Phase::ReceivingBody
        };
        open.rerank(self.id, phase, now, |_| true);
    }

    /// Bytes of the body arrived: a body that flows goes behind those that stall.
    fn body_progress(&self) {
        self.enter(Phase::ReceivingBody, |phase| phase == Phase::ReceivingBody);
    }

    /// The body is whole: the request is being handled.
    fn body_whole(&self) {
        self.enter(Phase::Handling, |phase| phase == Phase::ReceivingBody);
    }

    fn answering(&self) {
        self.enter(Phase::Answering, |_| true);
    }

    /// The answer is written (or dropped): the connection waits for its next request.
    fn answered(&self) {
        self.enter(Phase::AwaitingHead, |_| true);
    }

    /// Whether no request head has arrived on the connection yet.
    fn awaiting_first_head(&self) -> bool {
        self.registry
            .lock()
            .entries
            .get(&self.id)
            .is_some_and(|entry| entry.requests == 0)
    }
}

/// A connection's place in the registry, held by the task that serves it: removed when the
/// task ends, however it ends.
struct Registration {
    tracker: Tracker,
    drop_now: Arc<Notify>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let registry = &self.tracker.registry;
        let mut open = registry.lock();
        // Gone already when it was dropped to make way.
        if open.remove(self.tracker.id).is_some() {
            let count = open.entries.len();
            drop(open);
            registry.metrics.set_connections(count);
        }
    }
}

/// The router as hyper calls it, reporting each request's phases to the registry.
#[derive(Clone)]
struct Tracked {
    router: TowerToHyperService<Router>,
    tracker: Tracker,
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<AnswerBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.tracker.request(request.body().is_end_stream());
        let tracker = self.tracker.clone();
        let request = request.map(|body| {
            Body::new(RequestBody {
                body,
                tracker: tracker.clone(),
                reported: Instant::now(),
            })
        });
        let answer = self.router.call(request);
        Box::pin(async move {
            let response = answer.await?;
            tracker.answering();
            Ok(response.map(|body| AnswerBody { body, tracker }))
        })
    }
}

/// A request's body, reporting to the registry as it arrives.
struct RequestBody {
    body: Incoming,
    tracker: Tracker,
    /// When progress was last reported.
    reported: Instant,
}

impl hyper::body::Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(context);
        match &polled {
            Poll::Ready(None) => self.tracker.body_whole(),
            Poll::Ready(Some(Ok(_))) if self.body.is_end_stream() => self.tracker.body_whole(),
            Poll::Ready(Some(Ok(_))) if self.reported.elapsed() >= PROGRESS_RESOLUTION => {
                self.reported = Instant::now();
                self.tracker.body_progress();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body: the connection awaits its next request once it is written, or dropped.
struct AnswerBody {
    body: Body,
    tracker: Tracker,
}

impl hyper::body::Body for AnswerBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for AnswerBody {
    fn drop(&mut self) {
        self.tracker.answered();
    }
}

/// The whole answer to a connection refused because every connection that could make way is
/// handling a request: written as the connection is accepted, with no wait.
fn refusal() -> Vec<u8> {
    let body = ApiError::unavailable(
        "too_many_connections",
        "every connection this server (or this client address) may hold is handling a \
         request; retry shortly",
        1,
    )
    .body();
    let json = serde_json::to_string(&body).unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{json}\n",
        json.len() + 1
    )
    .into_bytes()
}

/// Answers a refused connection `refusal` and closes it, waiting for nothing: the socket
/// buffer of a new connection takes the answer, and what the client sent already is read
/// away first, since closing a socket with unread bytes resets it, and the reset may discard
/// the answer before the client reads it.
fn refuse(stream: &TcpStream, refusal: &[u8]) {
    let _ = stream.try_write(refusal);
    let mut sink = [0u8; 4096];
    // Bounded: a head is what a client sends before any answer.
    for _ in 0..4 {
        if !matches!(stream.try_read(&mut sink), Ok(read) if read > 0) {
            break;
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then closes the connections as
/// the module documents.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let cap = connection_cap(config.max_connections);
    if cap < config.max_connections {
        tracing::warn!(
            max_connections = config.max_connections,
            cap,
            "the open-file limit (ulimit -n) leaves room for fewer connections; raise it to serve more"
        );
    }
    let registry = Arc::new(Registry {
        open: Mutex::default(),
        started: Instant::now(),
        cap,
        per_client: config.max_connections_per_client.min(cap),
        metrics,
    });
    let refused = refusal();
    let router = TowerToHyperService::new(router);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let (stopping, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, client) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of files or memory for the moment: others may free some.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // IPv4 clients of a dual-stack listener count as their IPv4 address.
        let Some(registration) = registry.admit(client.ip().to_canonical()) else {
            refuse(&stream, &refused);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = Tracked {
            router: router.clone(),
            tracker: registration.tracker.clone(),
        };
        let connection = http.serve_connection(TokioIo::new(stream), service);
        // Finished connections are reaped here, so the set holds only open ones.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(run(
            connection,
            registration,
            config.first_head_timeout,
            stop.clone(),
        ));
    }
    drop(listener);
    let _ = stopping.send(true);
    registry.drop_idle();
    let closed = tokio::time::timeout(config.shutdown_grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if closed.is_err() {
        tracing::warn!(
            grace_ms = config.shutdown_grace.as_millis() as u64,
            connections = tasks.len(),
            "requests still in flight after the shutdown grace period are dropped"
        );
        tasks.abort_all();
    }
}

/// Serves one connection until it closes, is dropped to make way for another, sends no
/// request head within `first_head_timeout`, or the server stops (then its request in flight,
/// if any, is finished first).
async fn run(
    connection: http1::Connection<TokioIo<TcpStream>, Tracked>,
    registration: Registration,
    first_head_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    tokio::pin!(connection);
    let first_head = tokio::time::sleep(first_head_timeout);
    tokio::pin!(first_head);
    let mut first_head_due = true;
    let result = loop {
        tokio::select! {
            result = connection.as_mut() => break result,
            () = registration.drop_now.notified() => return,
            () = &mut first_head, if first_head_due => {
                first_head_due = false;
                if registration.tracker.awaiting_first_head() {
                    registration
                        .tracker
                        .registry
                        .metrics
                        .count_connections_closed("first_head_timeout", 1);
                    return;
                }
            }
            _ = stop.changed() => {
                connection.as_mut().graceful_shutdown();
                break tokio::select! {
                    result = connection.as_mut() => result,
                    () = registration.drop_now.notified() => return,
                };
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection closed with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn connections_make_way_in_order() {
        let mut open = Open::default();
        let (handling, _) = open.insert(client(1), 0);
        let (answering, _) = open.insert(client(1), 1);
        let (stalled, _) = open.insert(client(2), 2);
        let (flowing, _) = open.insert(client(2), 3);
        let (idle, idle_signal) = open.insert(client(3), 4);
        open.rerank(handling, Phase::Handling, 5, |_| true);
        open.rerank(answering, Phase::Answering, 5, |_| true);
        open.rerank(stalled, Phase::ReceivingBody, 6, |_| true);
        open.rerank(flowing, Phase::ReceivingBody, 7, |_| true);
        // Progress is reported only for a body still arriving.
        open.rerank(idle, Phase::ReceivingBody, 8, |phase| {
            phase == Phase::ReceivingBody
        });
        let order: Vec<u64> = std::iter::from_fn(|| {
            let first = open.ranked.first().map(|rank| rank.2)?;
            open.make_way(None).then_some(first)
        })
        .collect();
        assert_eq!(order, [idle, stalled, flowing, answering]);
        // The idle connection was told to close.
        assert!(
            futures_ready(idle_signal.notified()),
            "the dropped connection is notified"
        );
        // The one handling a request stays, and its address's set is kept in step.
        assert_eq!(open.entries.len(), 1);
        assert_eq!(open.of_client(client(1)), 1);
        assert_eq!(open.of_client(client(2)), 0);
        assert!(!open.by_client.contains_key(&client(2)));
        assert!(!open.make_way(Some(client(1))));
        assert!(!open.make_way(None));
    }

    /// Whether a future is ready at its first poll.
    fn futures_ready(future: impl Future) -> bool {
        let waker = std::task::Waker::noop();
        let mut context = Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        future.as_mut().poll(&mut context).is_ready()
    }
}
