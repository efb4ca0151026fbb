//! The one ordered writer: a thread that owns the [`DedupIndex`], takes inserts and deletes
//! from a queue in arrival order, and commits them in groups.
//!
//! Group commit: commits are at least `commit_delay` apart. A change made when the last commit
//! is older than that is committed at once; otherwise the writer keeps taking work until the
//! delay since the last commit has passed, then commits everything at once. Only then does it
//! answer the requests of the group. An answer therefore always means "durable and
//! searchable"; a lone client waits for no timer, and under load many concurrent requests
//! share one commit's cost while the commit rate (and so the number of new segments) stays
//! bounded.
//!
//! Back-pressure: the queue is bounded by the bytes of the requests in it. A request that
//! would go past the bound is turned away at once (the caller answers 503 with Retry-After)
//! instead of waiting in memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::Decision;
use crate::engine::{DedupIndex, PreparedArticle};
use crate::server::metrics::Metrics;

/// What the writer is asked to do.
enum Job {
    /// Add prepared articles in order; the reply carries each one's decision.
    Add {
        articles: Vec<PreparedArticle>,
        bytes: usize,
        reply: oneshot::Sender<Result<Vec<Decision>, WriteError>>,
    },
    /// Delete by id; the reply says whether there was such a document.
    Delete {
        id: String,
        reply: oneshot::Sender<Result<bool, WriteError>>,
    },
    /// Commit at once from now on (the server is stopping: requests in flight should not
    /// wait out the commit delay).
    Drain,
    /// Commit what is queued and stop.
    Shutdown,
}

/// Why a write was not done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The queue is full; try again shortly.
    #[error(
        "the ingest queue is full ({queued_mib} MiB waiting for the writer); retry after a moment or send smaller batches"
    )]
    QueueFull {
        /// What is queued, MiB.
        queued_mib: usize,
    },
    /// The writer stopped (shutting down, or after a failure it cannot recover from).
    #[error("the index writer is not accepting writes: {0}")]
    Stopped(String),
    /// The index refused the write or the commit.
    #[error("the index could not be written: {0}")]
    Index(String),
}

/// State shared between the writer thread and the request handlers.
struct Shared {
    queued_bytes: AtomicUsize,
    queued_documents: AtomicU64,
    max_queued_bytes: usize,
    /// Why the writer stopped taking work, once it has.
    stopped: Mutex<Option<String>>,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn stop(&self, reason: String) {
        if let Ok(mut stopped) = self.stopped.lock() {
            stopped.get_or_insert(reason);
        }
    }

    /// Why the writer takes no work, if it doesn't.
    fn stopped(&self) -> Option<WriteError> {
        match self.stopped.lock() {
            Ok(stopped) => stopped.clone().map(WriteError::Stopped),
            Err(_) => Some(WriteError::Stopped("the writer failed".to_owned())),
        }
    }

    fn stopped_error(&self) -> WriteError {
        self.stopped()
            .unwrap_or_else(|| WriteError::Stopped("the writer stopped".to_owned()))
    }

    fn dequeued(&self, bytes: usize, documents: u64) {
        self.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
        self.queued_documents.fetch_sub(documents, Ordering::SeqCst);
        self.metrics.set_queue(
            self.queued_documents.load(Ordering::Relaxed),
            self.queued_bytes.load(Ordering::Relaxed),
        );
    }
}

/// The handlers' side of the writer: submits work and waits for its commit.
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
        stopped: Mutex::new(None),
        metrics,
    });
    let writer = Writer {
        index,
        commit_delay,
        shared: shared.clone(),
        waiting: Vec::new(),
        uncommitted: false,
        last_commit: Instant::now(),
        failed: false,
    };
    let thread = std::thread::Builder::new()
        .name("index-writer".into())
        .spawn(move || writer.run(receiver))?;
    Ok((
        WriterHandle {
            sender: sender.clone(),
            shared,
        },
        WriterThread { sender, thread },
    ))
}

impl WriterHandle {
    /// Queues articles (whose request body was `bytes` long) and waits until they are
    /// committed; their decisions in order.
    pub async fn add(
        &self,
        articles: Vec<PreparedArticle>,
        bytes: usize,
    ) -> Result<Vec<Decision>, WriteError> {
        let documents = articles.len() as u64;
        self.admit(bytes, documents)?;
        let (reply, answer) = oneshot::channel();
        self.send(
            Job::Add {
                articles,
                bytes,
                reply,
            },
            bytes,
            documents,
        )?;
        answer
            .await
            .unwrap_or_else(|_| Err(self.shared.stopped_error()))
    }

    /// Queues a delete and waits until it is committed; whether the document existed.
    pub async fn delete(&self, id: String) -> Result<bool, WriteError> {
        let bytes = id.len();
        self.admit(bytes, 0)?;
        let (reply, answer) = oneshot::channel();
        self.send(Job::Delete { id, reply }, bytes, 0)?;
        answer
            .await
            .unwrap_or_else(|_| Err(self.shared.stopped_error()))
    }

    /// From now on, commits without waiting for more work (for a server that is stopping).
    pub fn drain(&self) {
        let _ = self.sender.send(Job::Drain);
    }

    /// Whether the writer takes work, and if not, why.
    pub fn health(&self) -> Result<(), WriteError> {
        self.shared.stopped().map_or(Ok(()), Err)
    }

    /// Documents queued for the writer.
    pub fn queued_documents(&self) -> u64 {
        self.shared.queued_documents.load(Ordering::Relaxed)
    }

    /// Reserves room in the queue, or refuses.
    fn admit(&self, bytes: usize, documents: u64) -> Result<(), WriteError> {
        self.health()?;
        let shared = &self.shared;
        let before = shared.queued_bytes.fetch_add(bytes, Ordering::SeqCst);
        if before > 0 && before + bytes > shared.max_queued_bytes {
            shared.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
            return Err(WriteError::QueueFull {
                queued_mib: before >> 20,
            });
        }
        shared
            .queued_documents
            .fetch_add(documents, Ordering::SeqCst);
        shared.metrics.set_queue(
            shared.queued_documents.load(Ordering::Relaxed),
            shared.queued_bytes.load(Ordering::Relaxed),
        );
        Ok(())
    }

    fn send(&self, job: Job, bytes: usize, documents: u64) -> Result<(), WriteError> {
        self.sender.send(job).map_err(|_| {
            self.shared.dequeued(bytes, documents);
            self.shared.stopped_error()
        })
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

struct Writer {
    index: DedupIndex,
    commit_delay: Duration,
    shared: Arc<Shared>,
    waiting: Vec<Waiting>,
    /// Whether changes wait for a commit.
    uncommitted: bool,
    /// When the last commit was made.
    last_commit: Instant,
    /// Whether a write or commit failed (the writer then refuses all work).
    failed: bool,
}

impl Writer {
    fn run(mut self, jobs: mpsc::Receiver<Job>) -> Result<(), String> {
        loop {
            let job = if self.uncommitted {
                match jobs
                    .recv_timeout(self.next_commit().saturating_duration_since(Instant::now()))
                {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => {
                        self.commit();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => None,
                }
            } else {
                jobs.recv().ok()
            };
            match job {
                Some(Job::Add {
                    articles,
                    bytes,
                    reply,
                }) => self.add(articles, bytes, reply),
                Some(Job::Delete { id, reply }) => self.delete(id, reply),
                Some(Job::Drain) => self.commit_delay = Duration::ZERO,
                Some(Job::Shutdown) | None => break,
            }
            if self.uncommitted && Instant::now() >= self.next_commit() {
                self.commit();
            }
        }
        self.shared.stop("the server is shutting down".to_owned());
        // Work that arrived before the shutdown is still done and committed.
        while let Ok(job) = jobs.try_recv() {
            match job {
                Job::Add {
                    articles,
                    bytes,
                    reply,
                } => self.add(articles, bytes, reply),
                Job::Delete { id, reply } => self.delete(id, reply),
                Job::Drain | Job::Shutdown => {}
            }
        }
        self.commit();
        self.index.close().map_err(|error| error.to_string())
    }

    fn add(
        &mut self,
        articles: Vec<PreparedArticle>,
        bytes: usize,
        reply: oneshot::Sender<Result<Vec<Decision>, WriteError>>,
    ) {
        let documents = articles.len() as u64;
        let result = if self.failed {
            Err(self.shared.stopped_error())
        } else {
            let added = articles
                .into_iter()
                .map(|article| {
                    let arrival = self.index.arrival_time();
                    self.index.add(article, arrival)
                })
                .collect::<crate::Result<Vec<_>>>();
            added.map_err(|error| self.fail(error.to_string()))
        };
        self.shared.dequeued(bytes, documents);
        match result {
            Ok(decisions) => {
                self.shared.metrics.count_decisions(&decisions);
                self.wait_for_commit(Waiting::Add(reply, decisions));
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    fn delete(&mut self, id: String, reply: oneshot::Sender<Result<bool, WriteError>>) {
        self.shared.dequeued(id.len(), 0);
        if self.failed {
            let _ = reply.send(Err(self.shared.stopped_error()));
            return;
        }
        match self.index.delete(&id) {
            Ok(deleted) => self.wait_for_commit(Waiting::Delete(reply, deleted)),
            Err(error) => {
                let _ = reply.send(Err(self.fail(error.to_string())));
            }
        }
    }

    fn wait_for_commit(&mut self, waiting: Waiting) {
        self.waiting.push(waiting);
        self.uncommitted = true;
    }

    /// Stops taking writes after an index failure: the forest may no longer match the index,
    /// and only reopening (which replays the last commit) brings them together again.
    fn fail(&mut self, message: String) -> WriteError {
        tracing::error!(%message, "index write failed; refusing writes until restart");
        self.failed = true;
        self.shared.stop(format!(
            "{message}; restart the server to reopen the index at its last commit"
        ));
        WriteError::Index(message)
    }

    /// Commits, then answers everything that waited for it.
    /// When the next commit may be made.
    fn next_commit(&self) -> Instant {
        self.last_commit + self.commit_delay
    }

    fn commit(&mut self) {
        self.uncommitted = false;
        if self.waiting.is_empty() {
            return;
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
                    .observe_commit(elapsed, self.index.forest().stats());
                tracing::debug!(
                    requests = waiting.len(),
                    retention_deleted = expired,
                    ms = elapsed.as_secs_f64() * 1e3,
                    "committed"
                );
                for waiting in waiting {
                    match waiting {
                        Waiting::Add(reply, decisions) => {
                            let _ = reply.send(Ok(decisions));
                        }
                        Waiting::Delete(reply, deleted) => {
                            let _ = reply.send(Ok(deleted));
                        }
                    }
                }
            }
            Err(error) => {
                let error = self.fail(error.to_string());
                for waiting in waiting {
                    match waiting {
                        Waiting::Add(reply, _) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                        Waiting::Delete(reply, _) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                    }
                }
            }
        }
    }
}
