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
//! Back-pressure: the queue is bounded by the memory of the requests in it. A request's room
//! grows as its body arrives ([`Reservation::grow`]), by the bytes it holds, and once the body
//! is whole by what it will take parsed and prepared, so a request that would go past the
//! bound is turned away (503 with Retry-After) before it is parsed, and a client that sends
//! headers, or part of a body, and stalls holds only what it sent (until the body's minimum
//! rate cuts it off); the reservation is given back when the writer has taken the work. The
//! health probe says so while requests are turned away for want of room
//! ([`WriterHandle::health`]).
//!
//! Recovery: a failed write or commit (too many open files, a full disk) drops what was not
//! committed, answers the requests that waited for the commit with a retryable error, and
//! reopens the index at its last commit ([`DedupIndex::recover`]), again and again with a
//! growing pause while that fails; writes are refused meanwhile and taken again after. Until a
//! commit succeeds again the writer is not called healthy ([`WriterHandle::health`]): the
//! cause, a full disk say, may still be there.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::Decision;
use crate::engine::{CheckpointReport, DedupIndex, PreparedArticle};
use crate::server::metrics::Metrics;

/// What the writer is asked to do. Each write carries its queue reservation, given back when
/// the job is dropped (done, refused, or never taken).
enum Job {
    /// Add prepared articles in order; the reply carries each one's decision. With a log
    /// position, the changes so far come from a log up to it (see `LogPosition`).
    Add {
        articles: Vec<PreparedArticle>,
        reservation: Reservation,
        log_position: Option<String>,
        reply: oneshot::Sender<Result<Vec<Decision>, WriteError>>,
    },
    /// Delete by id; the reply says whether there was such a document.
    Delete {
        id: String,
        reservation: Reservation,
        log_position: Option<String>,
        reply: oneshot::Sender<Result<bool, WriteError>>,
    },
    /// Record that the changes queued before it come from an ordered log of writes up to
    /// `position` (a replica's log); the reply comes with the commit that records it.
    #[cfg(feature = "redis")]
    LogPosition {
        position: String,
        reply: oneshot::Sender<Result<(), WriteError>>,
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
    /// The writer panicked (a bug); it takes no more work until the server restarts, which
    /// reopens the index at its last commit.
    #[error("the index writer failed and takes no writes until the server restarts: {0}")]
    Failed(String),
    /// A write or commit failed (too many open files, a full disk): the request's changes were
    /// dropped with everything else not yet committed, and the writer reopens the index at its
    /// last commit as soon as it can. Retry the request.
    #[error(
        "the index writer is reopening the index after a failed write (the server's log says why); retry shortly"
    )]
    Recovering,
    /// The shared forest's store (`--store`) failed; the writer goes on. Documents of the
    /// request placed before the failure are indexed and the rest are not (a replacement that
    /// failed may have deleted the old version): re-sending the request completes it, the
    /// placed ones being unchanged re-sends, which change nothing.
    #[error("the shared forest's store failed, so the request was not completed; retry it: {0}")]
    StoreUnavailable(String),
    /// The in-memory forest could not place a document (its sketch store could not take the
    /// sketch: a full disk); the forest is as it was, and the documents of the request placed
    /// before it stay queued for the next commit (re-sending is safe: they are unchanged
    /// re-sends). Retry once the cause is mended.
    #[error(
        "the forest could not store the document's sketch (the server's log says why: a full disk?), so the request was not completed; retry it once that is mended"
    )]
    ForestFailed,
    /// Only for health probes: a write or commit failed and no commit has succeeded since. The
    /// writer takes writes (one must succeed to clear this), but the cause may still be there.
    #[error(
        "a write failed (the server's log says why) and no commit has succeeded since; writes are taken, so that one can"
    )]
    Unproven,
}

/// The writer's state as handlers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Running,
    Stopping,
    /// Reopening the index after a failed write or commit.
    Recovering,
    /// The writer panicked.
    Failed(String),
}

/// State shared between the writer thread and the request handlers.
struct Shared {
    queued_bytes: AtomicUsize,
    queued_documents: AtomicU64,
    max_queued_bytes: usize,
    state: Mutex<State>,
    /// Whether a write or commit failed since the last commit that succeeded.
    write_failed: AtomicBool,
    /// The room the last request turned away for want of it needed in all, until a write is
    /// taken again (0: none turned away since).
    refused_needing: AtomicUsize,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn set(&self, state: State) {
        if let Ok(mut current) = self.state.lock() {
            // A panic is final; stopping does not hide it.
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
            Ok(State::Recovering) => Some(WriteError::Recovering),
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
    /// Holds `bytes` more, or refuses with [`WriteError::QueueFull`] (holding nothing more)
    /// when the queue would go past its bound. A request alone in the queue may pass it, so
    /// that the largest request is always let in eventually.
    pub fn grow(&mut self, bytes: usize) -> Result<(), WriteError> {
        let shared = &self.shared;
        let before = shared.queued_bytes.fetch_add(bytes, Ordering::SeqCst);
        if before + bytes > shared.max_queued_bytes && before > self.bytes {
            shared.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
            shared
                .refused_needing
                .store((self.bytes + bytes).max(1), Ordering::SeqCst);
            return Err(WriteError::QueueFull {
                queued_mib: before as f64 / f64::from(1 << 20),
            });
        }
        self.bytes += bytes;
        shared.publish_queue();
        Ok(())
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

/// A job queued for the writer, whose answer comes once it is committed.
pub struct Pending<T> {
    answer: oneshot::Receiver<Result<T, WriteError>>,
    shared: Arc<Shared>,
}

impl<T> Pending<T> {
    /// Waits for the commit that makes the job durable; its result.
    pub async fn committed(self) -> Result<T, WriteError> {
        self.answer
            .await
            .unwrap_or_else(|_| Err(self.shared.lost()))
    }
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
        write_failed: AtomicBool::new(false),
        refused_needing: AtomicUsize::new(0),
        metrics,
    });
    let writer = Writer {
        index,
        commit_delay,
        shared: shared.clone(),
        waiting: Vec::new(),
        last_commit: Instant::now(),
        recovery: None,
        checkpoint_counted: None,
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
    /// Reserves `bytes` in the queue, or refuses at once when the writer takes no work or
    /// the queue is full (see [`Reservation::grow`]).
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, WriteError> {
        self.takes_work()?;
        let mut reservation = Reservation {
            shared: self.shared.clone(),
            bytes: 0,
            documents: 0,
        };
        reservation.grow(bytes)?;
        Ok(reservation)
    }

    /// Queues articles, to be added after everything queued before them; their decisions
    /// come once they are committed ([`Pending::committed`]). With `log_position`, what is
    /// queued up to them comes from an ordered log of writes up to that position, which the
    /// commit that holds them records ([`queue_log_position`](Self::queue_log_position)).
    pub fn queue_add(
        &self,
        articles: Vec<PreparedArticle>,
        mut reservation: Reservation,
        log_position: Option<String>,
    ) -> Result<Pending<Vec<Decision>>, WriteError> {
        reservation.set_documents(articles.len() as u64);
        self.queue(|reply| Job::Add {
            articles,
            reservation,
            log_position,
            reply,
        })
    }

    /// Queues a delete and waits until it is committed; whether the document existed.
    pub async fn delete(&self, id: String) -> Result<bool, WriteError> {
        self.queue_delete(id, None)?.committed().await
    }

    /// Queues a delete after everything queued before it; whether the document existed
    /// comes once it is committed. `log_position` as for [`queue_add`](Self::queue_add).
    pub fn queue_delete(
        &self,
        id: String,
        log_position: Option<String>,
    ) -> Result<Pending<bool>, WriteError> {
        let reservation = self.reserve(id.len())?;
        self.queue(|reply| Job::Delete {
            id,
            reservation,
            log_position,
            reply,
        })
    }

    /// Queues the record that everything queued before it comes from an ordered log of
    /// writes up to `position`; answered once a commit holds it in its payload
    /// ([`DedupIndex::log_position`] after a reopen). (A position that comes with the last
    /// change of its entry, [`queue_add`](Self::queue_add)'s, is committed with it; this one
    /// is for an entry that changes nothing.)
    #[cfg(feature = "redis")]
    pub fn queue_log_position(&self, position: String) -> Result<Pending<()>, WriteError> {
        self.takes_work()?;
        self.queue(|reply| Job::LogPosition { position, reply })
    }

    /// Sends the job `make` builds around a reply channel; its reply comes through the
    /// [`Pending`].
    fn queue<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, WriteError>>) -> Job,
    ) -> Result<Pending<T>, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply))?;
        // A write was taken: the queue takes writes again.
        self.shared.refused_needing.store(0, Ordering::SeqCst);
        Ok(Pending {
            answer,
            shared: self.shared.clone(),
        })
    }

    /// Whether the writer takes work, and if not, why.
    fn takes_work(&self) -> Result<(), WriteError> {
        self.shared.refusal().map_or(Ok(()), Err)
    }

    /// Whether the writer takes work and, after a failed write or commit, has committed since
    /// ([`WriteError::Unproven`] until then); and whether the queue has room: after a request
    /// was turned away for want of it, [`WriteError::QueueFull`] until a write is taken again
    /// or the queue has room for that request.
    pub fn health(&self) -> Result<(), WriteError> {
        self.takes_work()?;
        if self.shared.write_failed.load(Ordering::Relaxed) {
            return Err(WriteError::Unproven);
        }
        let needing = self.shared.refused_needing.load(Ordering::SeqCst);
        let queued = self.shared.queued_bytes.load(Ordering::SeqCst);
        // As `Reservation::grow` decides: a request alone in the queue is let in.
        if needing > 0 && queued > 0 && queued + needing > self.shared.max_queued_bytes {
            return Err(WriteError::QueueFull {
                queued_mib: queued as f64 / f64::from(1 << 20),
            });
        }
        Ok(())
    }

    /// Documents queued for the writer.
    pub fn queued_documents(&self) -> u64 {
        self.shared.queued_documents.load(Ordering::Relaxed)
    }

    /// Bytes held in the queue: by requests whose bodies are being read, prepared or written.
    pub fn reserved_bytes(&self) -> usize {
        self.shared.queued_bytes.load(Ordering::Relaxed)
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
    #[cfg(feature = "redis")]
    LogPosition(oneshot::Sender<Result<(), WriteError>>),
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
            #[cfg(feature = "redis")]
            (Waiting::LogPosition(reply), None) => {
                let _ = reply.send(Ok(()));
            }
            #[cfg(feature = "redis")]
            (Waiting::LogPosition(reply), Some(error)) => {
                let _ = reply.send(Err(error.clone()));
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
    /// Set while the index is being reopened after a failure; writes are refused meanwhile.
    recovery: Option<Recovery>,
    /// The last forest checkpoint the metrics counted.
    checkpoint_counted: Option<CheckpointReport>,
}

/// The schedule of attempts to reopen the index after a failure.
struct Recovery {
    /// When to try next.
    next_attempt: Instant,
    /// The wait before the attempt after that: doubled each time, up to [`MAX_RETRY_DELAY`].
    delay: Duration,
}

/// The first wait before reopening the index again after a failed attempt.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(250);
/// The longest wait between two attempts to reopen the index.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);

impl Writer {
    fn run(mut self, jobs: mpsc::Receiver<Job>) -> Result<(), String> {
        loop {
            let deadline = match &self.recovery {
                Some(recovery) => Some(recovery.next_attempt),
                None => (!self.waiting.is_empty()).then(|| self.next_commit()),
            };
            let job = match deadline {
                None => jobs.recv().ok(),
                Some(deadline) => {
                    match jobs.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                        Ok(job) => Some(job),
                        Err(RecvTimeoutError::Timeout) => {
                            if self.recovery.is_some() {
                                self.recover();
                            } else {
                                // A failed commit answers its requests itself.
                                let _ = self.commit();
                            }
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => None,
                    }
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
                log_position,
                reply,
            } => {
                let _queued = reservation;
                if self.recovery.is_some() {
                    let _ = reply.send(Err(self.shared.lost()));
                    return;
                }
                let added = match self.index.add_all(articles) {
                    (decisions, None) => Ok(decisions),
                    (_, Some(error)) => Err(error),
                };
                match added {
                    Ok(decisions) => {
                        self.shared.metrics.count_decisions(&decisions);
                        if let Some(position) = log_position {
                            self.index.set_log_position(position);
                        }
                        self.waiting.push(Waiting::Add(reply, decisions));
                    }
                    // The articles of the batch added before the failure are dropped with the
                    // rest of what is not committed (or, with a shared store, reach the index
                    // with the next commit, and a retry is then a no-op for them; with
                    // inserts in flight, some after it may have been placed and not added: a
                    // retry places them again).
                    Err(error) => {
                        let _ = reply.send(Err(self.fail_unless_store(error)));
                    }
                }
            }
            Job::Delete {
                id,
                reservation,
                log_position,
                reply,
            } => {
                let _queued = reservation;
                if self.recovery.is_some() {
                    let _ = reply.send(Err(self.shared.lost()));
                    return;
                }
                match self.index.delete(&id) {
                    Ok(deleted) => {
                        if let Some(position) = log_position {
                            self.index.set_log_position(position);
                        }
                        self.waiting.push(Waiting::Delete(reply, deleted));
                    }
                    Err(error) => {
                        let _ = reply.send(Err(self.fail_unless_store(error)));
                    }
                }
            }
            #[cfg(feature = "redis")]
            Job::LogPosition { position, reply } => {
                if self.recovery.is_some() {
                    let _ = reply.send(Err(self.shared.lost()));
                    return;
                }
                self.index.set_log_position(position);
                self.waiting.push(Waiting::LogPosition(reply));
            }
            Job::Drain | Job::Shutdown => {}
        }
    }

    /// Handles a failed write or commit: everything not committed is dropped (the forest may
    /// no longer match the index, and only reopening at the last commit brings them together
    /// again), so the requests waiting for the next commit are answered with the error too;
    /// then the index is reopened, at once and later again while that fails.
    fn fail(&mut self, message: String) -> WriteError {
        tracing::error!(%message, "index write failed; reopening the index at its last commit");
        self.shared.write_failed.store(true, Ordering::Relaxed);
        let error = WriteError::Recovering;
        self.shared.set(State::Recovering);
        for waiting in std::mem::take(&mut self.waiting) {
            waiting.answer(Some(&error));
        }
        self.recovery = Some(Recovery {
            next_attempt: Instant::now(),
            delay: FIRST_RETRY_DELAY,
        });
        self.recover();
        error
    }

    /// One attempt to reopen the index at its last commit; writes are taken again once it
    /// succeeds, else the next attempt is scheduled.
    fn recover(&mut self) {
        let Some(recovery) = &mut self.recovery else {
            return;
        };
        match self.index.recover() {
            Ok(()) => {
                tracing::info!(
                    replayed = self.index.recovery().replayed,
                    "index reopened at its last commit; taking writes again"
                );
                self.recovery = None;
                self.shared.metrics.set_forest(self.index.forest_stats());
                self.shared.set(State::Running);
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    retry_in_ms = recovery.delay.as_millis() as u64,
                    "reopening the index failed; trying again"
                );
                recovery.next_attempt = Instant::now() + recovery.delay;
                recovery.delay = (recovery.delay * 2).min(MAX_RETRY_DELAY);
            }
        }
    }

    /// The answer to a write that failed: a forest's failure fails only that request, because
    /// the forest is left as it was (a shared store keeps its own consistency, an unsettled
    /// insert being abandoned; the in-memory forest refuses an insert whose sketch it cannot
    /// store, on a full disk, whole), so it cannot fall out of step with the index; anything
    /// else stops the writer ([`fail`](Self::fail)).
    fn fail_unless_store(&mut self, error: crate::Error) -> WriteError {
        match error {
            crate::Error::Store(error) if self.index.is_shared() => {
                tracing::warn!(%error, "shared store failed; the request is answered 503");
                WriteError::StoreUnavailable(error.to_string())
            }
            crate::Error::Store(error) => {
                tracing::error!(%error, "the forest could not place a document; the request is answered 503");
                self.shared.write_failed.store(true, Ordering::Relaxed);
                WriteError::ForestFailed
            }
            error => self.fail(error.to_string()),
        }
    }

    /// Counts in the metrics (and logs) the last forest checkpoint, if it is one not counted.
    fn count_checkpoint(&mut self) {
        let Some(report) = self.index.last_checkpoint() else {
            return;
        };
        if self.checkpoint_counted.as_ref() == Some(report) {
            return;
        }
        self.shared.metrics.observe_checkpoint(report);
        match &report.error {
            Some(error) => {
                tracing::warn!(%error, "the forest checkpoint failed; the last one stays")
            }
            None => tracing::info!(
                inserts = report.next_sequence,
                bytes = report.bytes,
                pause_ms = report.pause_ms,
                "forest checkpoint saved"
            ),
        }
        self.checkpoint_counted = Some(report.clone());
    }

    /// When the next commit may be made.
    fn next_commit(&self) -> Instant {
        self.last_commit + self.commit_delay
    }

    /// Commits, then answers everything that waited for it. A failure before the commit is
    /// durable fails the requests (their changes are dropped); one after it (making it visible,
    /// retention) answers them as done, since they survive whatever comes next, and then
    /// reopens the index, which also makes them visible.
    fn commit(&mut self) -> Result<(), String> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        if let Err(error) = self.index.persist() {
            self.last_commit = Instant::now();
            return Err(self.fail(error.to_string()).to_string());
        }
        let published = self.index.publish();
        let elapsed = started.elapsed();
        self.last_commit = Instant::now();
        let waiting = std::mem::take(&mut self.waiting);
        if published.is_ok() {
            // Proven again before anyone hears back: a client answered finds `/healthz` so.
            self.shared.write_failed.store(false, Ordering::Relaxed);
        }
        waiting.into_iter().for_each(|waiting| waiting.answer(None));
        match published {
            Ok(expired) => {
                self.shared
                    .metrics
                    .observe_commit(elapsed, self.index.forest_stats());
                self.count_checkpoint();
                tracing::debug!(
                    retention_deleted = expired,
                    ms = crate::server::log_ms(elapsed),
                    "committed"
                );
                Ok(())
            }
            Err(error) => Err(self.fail(error.to_string()).to_string()),
        }
    }
}
