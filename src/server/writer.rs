//! The one ordered writer: a thread that owns the [`DedupIndex`], takes inserts and deletes
//! from a queue in arrival order, and commits them in groups.
//!
//! Group commit: commits are at least `commit_delay` apart. A change made when the last commit
//! is older than that is committed at once; otherwise the writer keeps taking work until the
//! delay since the last commit has passed, then commits everything at once. Only then does it
//! answer the requests of the group. An answer therefore always means "durable and
//! searchable". A batch sent after a quiet moment waits for no timer; under load, many
//! requests share one commit's cost while the commit rate (and so the number of new segments)
//! stays bounded. A client that sends one small request at a time waits for the delay on each.
//!
//! Back-pressure: the queue is bounded by the bytes of the requests in it. Room is reserved
//! ([`WriterHandle::reserve`]) before a request's body is even read, so a request that would
//! go past the bound is turned away at once (503 with Retry-After) instead of being held in
//! memory; the reservation is given back when the writer has taken the work.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::Decision;
use crate::engine::{DedupIndex, PreparedArticle};
use crate::server::metrics::Metrics;

/// What the writer is asked to do. Each write carries its queue reservation, given back when
/// the job is dropped (done, refused, or never taken).
enum Job {
    /// Add prepared articles in order; the reply carries each one's decision.
    Add {
        articles: Vec<PreparedArticle>,
        reservation: Reservation,
        reply: oneshot::Sender<Result<Vec<Decision>, WriteError>>,
    },
    /// Delete by id; the reply says whether there was such a document.
    Delete {
        id: String,
        reservation: Reservation,
        reply: oneshot::Sender<Result<bool, WriteError>>,
    },
    /// Commit at once from now on (the server is stopping: requests in flight should not
    /// wait out the commit delay).
    Drain,
    /// Commit what is queued and stop.
    Shutdown,
}

/// Why a write was not done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteError {
    /// The queue is full; try again shortly.
    #[error(
        "the ingest queue is full ({queued_mib:.1} MiB waiting for the writer); retry after a moment or send smaller batches"
    )]
    QueueFull {
        /// What is queued, MiB.
        queued_mib: f64,
    },
    /// The server is stopping.
    #[error("the server is stopping and takes no more writes")]
    Stopping,
    /// A write or commit failed; the writer takes no more work until the server restarts
    /// (which reopens the index at its last commit).
    #[error("the index writer failed and takes no writes until the server restarts: {0}")]
    Failed(String),
    /// The shared forest's store (`--store`) failed; the writer goes on. Documents of the
    /// request placed before the failure are indexed and the rest are not (a replacement that
    /// failed may have deleted the old version): re-sending the request completes it, the
    /// placed ones being unchanged re-sends, which change nothing.
    #[error("the shared forest's store failed, so the request was not completed; retry it: {0}")]
    StoreUnavailable(String),
}

/// The writer's state as handlers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Running,
    Stopping,
    Failed(String),
}

/// State shared between the writer thread and the request handlers.
struct Shared {
    queued_bytes: AtomicUsize,
    queued_documents: AtomicU64,
    max_queued_bytes: usize,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn set(&self, state: State) {
        if let Ok(mut current) = self.state.lock() {
            // A failure is final; stopping does not hide it.
            if !matches!(*current, State::Failed(_)) {
                *current = state;
            }
        }
    }

    /// Why the writer takes no work, if it doesn't.
    fn refusal(&self) -> Option<WriteError> {
        match self.state.lock().as_deref() {
            Ok(State::Running) => None,
            Ok(State::Stopping) => Some(WriteError::Stopping),
            Ok(State::Failed(message)) => Some(WriteError::Failed(message.clone())),
            Err(_) => Some(WriteError::Failed("the writer's state is lost".to_owned())),
        }
    }

    /// The error for a request whose job was dropped unanswered.
    fn lost(&self) -> WriteError {
        self.refusal()
            .unwrap_or_else(|| WriteError::Failed("the index writer stopped".to_owned()))
    }

    fn publish_queue(&self) {
        self.metrics.set_queue(
            self.queued_documents.load(Ordering::Relaxed),
            self.queued_bytes.load(Ordering::Relaxed),
        );
    }
}

/// Room held in the writer's queue: bytes of a request, and once known its documents. Given
/// back when dropped.
pub struct Reservation {
    shared: Arc<Shared>,
    bytes: usize,
    documents: u64,
}

impl Reservation {
    /// Lowers the reservation to the request's actual size, once its body is read.
    pub fn set_bytes(&mut self, bytes: usize) {
        let released = self.bytes.saturating_sub(bytes);
        self.shared
            .queued_bytes
            .fetch_sub(released, Ordering::SeqCst);
        self.bytes -= released;
        self.shared.publish_queue();
    }

    /// Counts the request's documents in the queue.
    pub fn set_documents(&mut self, documents: u64) {
        self.shared
            .queued_documents
            .fetch_add(documents, Ordering::SeqCst);
        self.documents += documents;
        self.shared.publish_queue();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.queued_bytes.fetch_sub(self.bytes, Ordering::SeqCst);
        shared
            .queued_documents
            .fetch_sub(self.documents, Ordering::SeqCst);
        shared.publish_queue();
    }
}

/// The handlers' side of the writer: reserves room, submits work and waits for its commit.
#[derive(Clone)]
pub struct WriterHandle {
    sender: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

/// The writer thread, to be stopped when the server stops.
pub struct WriterThread {
    sender: mpsc::Sender<Job>,
    thread: std::thread::JoinHandle<Result<(), String>>,
}

/// Starts the writer thread over `index`.
pub fn start(
    index: DedupIndex,
    commit_delay: Duration,
    max_queued_bytes: usize,
    metrics: Arc<Metrics>,
) -> std::io::Result<(WriterHandle, WriterThread)> {
    let (sender, receiver) = mpsc::channel();
    let shared = Arc::new(Shared {
        queued_bytes: AtomicUsize::new(0),
        queued_documents: AtomicU64::new(0),
        max_queued_bytes,
        state: Mutex::new(State::Running),
        metrics,
    });
    let writer = Writer {
        index,
        commit_delay,
        shared: shared.clone(),
        waiting: Vec::new(),
        last_commit: Instant::now(),
        failed: false,
    };
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name("index-writer".into())
        .spawn(move || {
            // A panic must not leave a server that looks healthy with no writer behind it.
            std::panic::catch_unwind(AssertUnwindSafe(|| writer.run(receiver))).unwrap_or_else(
                |_| {
                    let message = "the index writer panicked".to_owned();
                    tracing::error!("{message}; refusing writes until restart");
                    thread_shared.set(State::Failed(message.clone()));
                    Err(message)
                },
            )
        })?;
    Ok((
        WriterHandle {
            sender: sender.clone(),
            shared,
        },
        WriterThread { sender, thread },
    ))
}

impl WriterHandle {
    /// Reserves `bytes` in the queue for a request about to be read, or refuses at once when
    /// the writer takes no work or the queue is full. A single request larger than the whole
    /// queue is let in when the queue is empty.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, WriteError> {
        self.health()?;
        let shared = &self.shared;
        let before = shared.queued_bytes.fetch_add(bytes, Ordering::SeqCst);
        let reservation = Reservation {
            shared: shared.clone(),
            bytes,
            documents: 0,
        };
        if before > 0 && before + bytes > shared.max_queued_bytes {
            return Err(WriteError::QueueFull {
                queued_mib: before as f64 / f64::from(1 << 20),
            });
        }
        shared.publish_queue();
        Ok(reservation)
    }

    /// Queues articles and waits until they are committed; their decisions in order.
    pub async fn add(
        &self,
        articles: Vec<PreparedArticle>,
        mut reservation: Reservation,
    ) -> Result<Vec<Decision>, WriteError> {
        reservation.set_documents(articles.len() as u64);
        self.request(|reply| Job::Add {
            articles,
            reservation,
            reply,
        })
        .await
    }

    /// Queues a delete and waits until it is committed; whether the document existed.
    pub async fn delete(&self, id: String) -> Result<bool, WriteError> {
        let reservation = self.reserve(id.len())?;
        self.request(|reply| Job::Delete {
            id,
            reservation,
            reply,
        })
        .await
    }

    /// Sends the job `make` builds around a reply channel, and waits for the reply.
    async fn request<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, WriteError>>) -> Job,
    ) -> Result<T, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply))?;
        answer.await.unwrap_or_else(|_| Err(self.shared.lost()))
    }

    /// Whether the writer takes work, and if not, why.
    pub fn health(&self) -> Result<(), WriteError> {
        self.shared.refusal().map_or(Ok(()), Err)
    }

    /// Documents queued for the writer.
    pub fn queued_documents(&self) -> u64 {
        self.shared.queued_documents.load(Ordering::Relaxed)
    }

    /// From now on, commits without waiting for more work (for a server that is stopping).
    pub fn drain(&self) {
        let _ = self.sender.send(Job::Drain);
    }

    fn send(&self, job: Job) -> Result<(), WriteError> {
        // A job that cannot be sent comes back in the error and is dropped here, which gives
        // its reservation back.
        self.sender.send(job).map_err(|_| self.shared.lost())
    }
}

impl WriterThread {
    /// Commits what is queued, stops the writer and closes the index (waiting for merges).
    pub fn shutdown(self) -> Result<(), String> {
        // If the thread already stopped, the send fails and join reports why.
        let _ = self.sender.send(Job::Shutdown);
        drop(self.sender);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the index writer panicked".to_owned()))
    }
}

/// A request waiting for the commit that makes its work durable.
enum Waiting {
    Add(
        oneshot::Sender<Result<Vec<Decision>, WriteError>>,
        Vec<Decision>,
    ),
    Delete(oneshot::Sender<Result<bool, WriteError>>, bool),
}

impl Waiting {
    /// Answers the request: its result, or `error` for all of it.
    fn answer(self, error: Option<&WriteError>) {
        match (self, error) {
            (Waiting::Add(reply, decisions), None) => {
                let _ = reply.send(Ok(decisions));
            }
            (Waiting::Delete(reply, deleted), None) => {
                let _ = reply.send(Ok(deleted));
            }
            (Waiting::Add(reply, _), Some(error)) => {
                let _ = reply.send(Err(error.clone()));
            }
            (Waiting::Delete(reply, _), Some(error)) => {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

struct Writer {
    index: DedupIndex,
    commit_delay: Duration,
    shared: Arc<Shared>,
    /// Requests whose changes wait for the next commit.
    waiting: Vec<Waiting>,
    /// When the last commit was made.
    last_commit: Instant,
    /// Whether a write or commit failed (the writer then refuses all work).
    failed: bool,
}

impl Writer {
    fn run(mut self, jobs: mpsc::Receiver<Job>) -> Result<(), String> {
        loop {
            let job = if self.waiting.is_empty() {
                jobs.recv().ok()
            } else {
                let wait = self.next_commit().saturating_duration_since(Instant::now());
                match jobs.recv_timeout(wait) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => {
                        // A failed commit answers its requests and stops the writer itself.
                        let _ = self.commit();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => None,
                }
            };
            match job {
                Some(Job::Drain) => self.commit_delay = Duration::ZERO,
                Some(Job::Shutdown) | None => break,
                Some(job) => self.take(job),
            }
            if !self.waiting.is_empty() && Instant::now() >= self.next_commit() {
                let _ = self.commit();
            }
        }
        self.shared.set(State::Stopping);
        // Work that arrived before the shutdown is still done and committed.
        while let Ok(job) = jobs.try_recv() {
            self.take(job);
        }
        let committed = self.commit();
        let closed = self.index.close().map_err(|error| error.to_string());
        committed.and(closed)
    }

    /// Does an add or a delete; its reservation is given back once the job is done here.
    fn take(&mut self, job: Job) {
        match job {
            Job::Add {
                articles,
                reservation,
                reply,
            } => {
                let _queued = reservation;
                if self.failed {
                    let _ = reply.send(Err(self.shared.lost()));
                    return;
                }
                let added = articles
                    .into_iter()
                    .map(|article| {
                        let arrival = self.index.arrival_time();
                        self.index.add(article, arrival)
                    })
                    .collect::<crate::Result<Vec<_>>>();
                match added {
                    Ok(decisions) => {
                        self.shared.metrics.count_decisions(&decisions);
                        self.waiting.push(Waiting::Add(reply, decisions));
                    }
                    // Articles of the batch added before the failure may reach the index with
                    // the commit of other requests: the batch is answered as failed, and a
                    // retry of it is then a no-op for them.
                    Err(error) => {
                        let _ = reply.send(Err(self.fail_unless_store(error)));
                    }
                }
            }
            Job::Delete {
                id,
                reservation,
                reply,
            } => {
                let _queued = reservation;
                if self.failed {
                    let _ = reply.send(Err(self.shared.lost()));
                    return;
                }
                match self.index.delete(&id) {
                    Ok(deleted) => self.waiting.push(Waiting::Delete(reply, deleted)),
                    Err(error) => {
                        let _ = reply.send(Err(self.fail_unless_store(error)));
                    }
                }
            }
            Job::Drain | Job::Shutdown => {}
        }
    }

    /// Stops taking writes after an index failure: the forest may no longer match the index,
    /// and only reopening (which replays the last commit) brings them together again.
    fn fail(&mut self, message: String) -> WriteError {
        tracing::error!(%message, "index write failed; refusing writes until restart");
        self.failed = true;
        let message =
            format!("{message}; restart the server to reopen the index at its last commit");
        self.shared.set(State::Failed(message.clone()));
        WriteError::Failed(message)
    }

    /// The answer to a write that failed: a shared store's failure fails only that request,
    /// because the store keeps its own consistency (an unsettled insert is abandoned) and there
    /// is no in-memory forest to fall out of step with the index; anything else stops the
    /// writer ([`fail`](Self::fail)).
    fn fail_unless_store(&mut self, error: crate::Error) -> WriteError {
        match error {
            crate::Error::Store(error) => {
                tracing::warn!(%error, "shared store failed; the request is answered 503");
                WriteError::StoreUnavailable(error.to_string())
            }
            error => self.fail(error.to_string()),
        }
    }

    /// When the next commit may be made.
    fn next_commit(&self) -> Instant {
        self.last_commit + self.commit_delay
    }

    /// Commits, then answers everything that waited for it.
    fn commit(&mut self) -> Result<(), String> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let result = self.index.commit();
        let elapsed = started.elapsed();
        self.last_commit = Instant::now();
        let waiting = std::mem::take(&mut self.waiting);
        match result {
            Ok(expired) => {
                self.shared
                    .metrics
                    .observe_commit(elapsed, self.index.forest_stats());
                tracing::debug!(
                    requests = waiting.len(),
                    retention_deleted = expired,
                    ms = elapsed.as_secs_f64() * 1e3,
                    "committed"
                );
                waiting.into_iter().for_each(|waiting| waiting.answer(None));
                Ok(())
            }
            Err(error) => {
                let error = self.fail(error.to_string());
                for waiting in waiting {
                    waiting.answer(Some(&error));
                }
                Err(error.to_string())
            }
        }
    }
}
