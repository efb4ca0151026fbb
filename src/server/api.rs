//! The endpoints: each handler reads and checks its request, runs the library on a blocking
//! thread (or hands writes to the writer), and answers JSON.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{MatchedPath, Path, Query, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::article::{Article, ArticleReader};
use crate::config::ServerConfig;
use crate::engine::{
    DEFAULT_FACET_LIMIT, DEFAULT_FRAGMENT_CHARS, DEFAULT_FRAGMENTS, DEFAULT_PAGE_SIZE,
    DedupSearcher, DocumentView, FRAGMENT_CHARS, IndexStats, ListOrder, MAX_FACET_LIMIT,
    MAX_FRAGMENTS, MAX_MEMBERS, MAX_OFFSET, MAX_PAGE_SIZE, NearDuplicates, Placed, PreparedArticle,
    Preparer, RecoveryReport, SearchPage, SearchRequest, SimilarPage, Sort, Story, StoryRequest,
    TrendSpan, list_items,
};
use crate::forest::Timestamp;
use crate::input::{TimeCoverage, split_documents};
use crate::local_time::{RangeEnd, TimeError, TimeZone};
use crate::server::access;
use crate::server::body::{BatchLimits, DocumentError, Refused, parse_document_with};
use crate::server::error::{ApiError, ErrorBody, ErrorDetail, INDEX_DAMAGED};
use crate::server::metrics::{Exposition, Metrics};
use crate::server::writer::{Pending, Reservation, WriteError, WriterHandle};
use crate::{Decision, Error, Fingerprint, Reason};

/// What every handler shares.
pub struct AppState {
    pub(crate) searcher: DedupSearcher,
    pub(crate) preparer: Preparer,
    pub(crate) writer: WriterHandle,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) config: ServerConfig,
    /// The zone a `from` or `to` without an offset is read in (`[index] time_zone`).
    pub(crate) time_zone: TimeZone,
    pub(crate) recovery: RecoveryReport,
    pub(crate) started: Instant,
    /// Reads running at once: one per core. More would only share the cores, each read
    /// slower, and each holding its own collapse buffers.
    pub(crate) readers: tokio::sync::Semaphore,
    /// Which shard this server is, when it is one of an index split by story: it then takes
    /// only placed documents, from its shard's log (`replica`).
    pub(crate) shard: Option<crate::engine::ShardSpec>,
    /// The shard's replica this server is, applying the shard's log.
    pub(crate) replica: Option<Arc<dyn ReplicaView>>,
    /// Whether a read has found the index damaged (a file that no longer reads as Tantivy
    /// wrote it): `/healthz` then answers 503 `index_damaged` until the server restarts on a
    /// restored index, so that a balancer sends reads elsewhere.
    pub(crate) damaged: std::sync::atomic::AtomicBool,
}

impl AppState {
    /// When a read that starts now must be over (`[server] read_timeout`): what [`read`]
    /// waits for a core until, and what a list page's [`SearchRequest::deadline`] is.
    ///
    /// [`read`]: AppState::read
    pub(crate) fn read_deadline(&self) -> std::time::Instant {
        std::time::Instant::now() + self.config.read_timeout
    }

    /// Runs a read on a blocking thread once a core is free for it; 503 `read_timeout` when
    /// none is free within `[server] read_timeout`.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> AppResult<T> + Send + 'static,
    ) -> AppResult<T> {
        let waiting = self.readers.acquire();
        let _permit = tokio::time::timeout_at(self.read_deadline().into(), waiting)
            .await
            .map_err(|_| ApiError::from(Error::DeadlineExceeded))?
            .map_err(|_| ApiError::unavailable("shutting_down", "the server is stopping", 1))?;
        let answer = blocking(work).await;
        if let Err(error) = &answer
            && error.code == INDEX_DAMAGED
        {
            self.damaged
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        answer
    }
}

pub(crate) type AppResult<T> = Result<T, ApiError>;

/// Runs blocking library work off the async threads; a panic in it becomes a 500, never a
/// dropped connection.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> AppResult<T> + Send + 'static,
) -> AppResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| Err(ApiError::internal(format!("request failed: {error}"))))
}

impl From<WriteError> for ApiError {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::QueueFull { .. } => {
                ApiError::unavailable("queue_full", error.to_string(), 1)
            }
            WriteError::Stopping => ApiError::unavailable("stopping", error.to_string(), 5),
            WriteError::StoreUnavailable(_) => {
                ApiError::unavailable("store_unavailable", error.to_string(), 1)
            }
            WriteError::Recovering => {
                ApiError::unavailable("writer_recovering", error.to_string(), 1)
            }
            WriteError::ForestFailed => {
                ApiError::unavailable("forest_failed", error.to_string(), 1)
            }
            WriteError::Unproven => {
                ApiError::unavailable("last_write_failed", error.to_string(), 1)
            }
            // Not worth retrying: the server needs a restart. Logged when the writer panicked,
            // not again for each request (nor for each health probe).
            WriteError::Failed(_) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "writer_failed",
                error.to_string(),
            ),
        }
    }
}

// What the OpenAPI document says of the errors several endpoints answer alike.
const SERVER_FAILED: &str = "The server failed (`internal`, or `writer_failed` when the \
     writer needs a restart); its log says why";
const CURSOR_GONE: &str = "The cursor's snapshot of the index is no longer kept \
     (`cursor_expired`): start the walk again with `cursor=*`";
const READ_UNAVAILABLE: &str = "The server is stopping (`shutting_down`), the read took \
     longer than `[server] read_timeout`, waiting for a core included (`read_timeout`), or a \
     walk would pin one more snapshot than the server keeps (`too_many_walks`); retry after \
     `Retry-After` seconds";
const WRITER_UNAVAILABLE: &str = "The writer takes no work now (`queue_full`, `stopping`, \
     `store_unavailable`, `forest_failed`, `writer_recovering`); retry after `Retry-After` \
     seconds";
const BODY_TIMEOUT: &str = "The body did not arrive whole in time (`body_timeout`), or \
     arrived slower than the server's minimum rate (`body_too_slow`)";
const INVALID_PATH: &str = "The id is not valid percent-encoded UTF-8 (`invalid_path`)";
const NO_DOCUMENT: &str = "No document has this id (`not_found`)";

/// Memory a byte of a POST body takes from when it is read until the writer has taken it:
/// the body itself, its parsed articles, then their analysis and Tantivy documents. One 24 MB
/// POST of news raised the server's peak RSS by 378 MiB, of which Tantivy's indexing arena
/// (bounded on its own by `index.writer_memory_mb`) is up to 256 MiB: about 6 bytes a byte
/// besides (BENCHMARKS.md "Reliability"). Room in the writer's queue is held at this rate
/// from when the body is whole (before it is parsed) until the writer has taken it, and at a
/// byte a byte while it arrives, which is all it takes then: so `queue_mib` bounds that
/// memory, and bodies that stall hold no more than they hold in memory.
pub const MEMORY_PER_BODY_BYTE: usize = 6;

/// How a body is read: its limit (`setting` names it in the 413, `code` is its code) and,
/// for a write, the queue room that grows by a byte a decoded byte as it arrives.
pub(crate) struct BodyLimit<'a> {
    pub(crate) bytes: usize,
    pub(crate) setting: &'static str,
    pub(crate) code: &'static str,
    pub(crate) reservation: Option<&'a mut Reservation>,
}

/// A body's bytes as they arrive, decoded when it came gzip-compressed.
enum Received {
    Plain(Capped),
    /// Every gzip member (`cat a.gz b.gz` is one valid stream; a decoder that stopped after
    /// the first member would drop the documents of the others without a word).
    Gzip(Box<flate2::write::MultiGzDecoder<Capped>>),
}

/// Decoded bytes, refused past the limit (`FileTooLarge`) as they are written: a few
/// compressed bytes can decode to gigabytes, so the limit must stop the decoder, not wait for
/// it.
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + data.len() > self.limit {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        self.bytes.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Received {
    fn new(gzip: bool, limit: usize) -> Self {
        let capped = Capped {
            bytes: Vec::new(),
            limit,
        };
        if gzip {
            Received::Gzip(Box::new(flate2::write::MultiGzDecoder::new(capped)))
        } else {
            Received::Plain(capped)
        }
    }

    /// Bytes decoded so far.
    fn len(&self) -> usize {
        match self {
            Received::Plain(capped) => capped.bytes.len(),
            Received::Gzip(decoder) => decoder.get_ref().bytes.len(),
        }
    }

    fn take(&mut self, data: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        match self {
            Received::Plain(capped) => capped.write_all(data),
            Received::Gzip(decoder) => decoder.write_all(data),
        }
    }

    /// The whole body, once it has all come: gzip data must end with a whole member, with
    /// nothing after it.
    fn finish(self) -> std::io::Result<Vec<u8>> {
        Ok(match self {
            Received::Plain(capped) => capped.bytes,
            Received::Gzip(decoder) => (*decoder).finish()?.bytes,
        })
    }
}

/// Reads a body whole within `server.body_timeout` (408 `body_timeout` after it), and at
/// `server.min_body_rate_kib` or faster in each `server.body_rate_window` (408
/// `body_too_slow`, so that a stalled body gives its room back a window after its last
/// bytes), decoding it
/// as it arrives when it came gzip-compressed (400 when it is not whole gzip data), up to its
/// limit in decoded bytes (413 past it, whatever `Content-Length` said), holding a byte in the
/// writer's queue per decoded byte as it arrives: what it takes in memory until it is parsed
/// (503 when the queue is full). A body that cannot be read is a 400.
pub(crate) async fn read_body(
    body: Body,
    gzip: bool,
    config: &ServerConfig,
    mut limit: BodyLimit<'_>,
) -> AppResult<axum::body::Bytes> {
    let window = config.body_rate_window;
    // Bytes a window must bring: the rate is per second, the window any length.
    let least_per_window =
        ((config.min_body_rate_kib << 10) as f64 * window.as_secs_f64()).ceil() as usize;
    let read = async {
        let mut body = body;
        let mut received = Received::new(gzip, limit.bytes);
        let refusal = |error: std::io::Error| {
            if error.kind() == std::io::ErrorKind::FileTooLarge {
                body_too_large(limit.bytes, limit.setting).with_code(limit.code)
            } else {
                ApiError::bad_request(
                    "invalid_body",
                    format!(
                        "the body is not whole gzip data (`Content-Encoding: gzip`): {error}; \
                         send whole gzip members and nothing after the last"
                    ),
                )
            }
        };
        let mut window_end = tokio::time::Instant::now() + window;
        let mut in_window = 0usize;
        // A body that brings nothing for a whole window is under any minimum: it is cut off
        // a window after its last bytes, not at the end of the window after the one they
        // came in.
        let mut last_bytes = tokio::time::Instant::now();
        loop {
            let deadline = if least_per_window > 0 {
                window_end.min(last_bytes + window)
            } else {
                window_end
            };
            let next = tokio::time::timeout_at(deadline, body.frame()).await;
            let now = tokio::time::Instant::now();
            if let Ok(Some(Ok(frame))) = &next
                && let Some(data) = frame.data_ref()
                && !data.is_empty()
            {
                in_window += data.len();
                last_bytes = now;
            }
            let stalled = least_per_window > 0 && now >= last_bytes + window;
            if stalled || now >= window_end {
                if stalled || in_window < least_per_window {
                    return Err(body_too_slow(config));
                }
                window_end = now + window;
                in_window = 0;
            }
            // A deadline passed with no frame: wait for the next.
            let Ok(frame) = next else {
                continue;
            };
            let Some(frame) = frame else {
                break;
            };
            let frame = frame.map_err(|error| {
                ApiError::bad_request(
                    "body_unreadable",
                    format!("the body could not be read: {error}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let before = received.len();
            received.take(&data).map_err(refusal)?;
            if let Some(reservation) = limit.reservation.as_deref_mut() {
                reservation.grow(received.len() - before)?;
            }
        }
        let bytes = received.finish().map_err(refusal)?;
        Ok(axum::body::Bytes::from(bytes))
    };
    tokio::time::timeout(config.body_timeout, read)
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the body did not arrive whole within {} (server.body_timeout); send smaller batches",
                    humantime::format_duration(config.body_timeout)
                ),
            ))
        })
}

/// The answer to a body that arrived slower than `server.min_body_rate_kib`.
fn body_too_slow(config: &ServerConfig) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "body_too_slow",
        format!(
            "the body arrived slower than {} KiB a second over {} (server.min_body_rate_kib, \
             server.body_rate_window); send it without pauses",
            config.min_body_rate_kib,
            humantime::format_duration(config.body_rate_window)
        ),
    )
}

fn body_too_large(limit: usize, setting: &str) -> ApiError {
    // The limits are set in whole MiB or KiB.
    let limit = if limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{} KiB", limit >> 10)
    };
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {limit}; send less per request ({setting})"),
    )
}

/// The `{id}` of a document's path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct DocumentId {
    /// The document's id, percent-encoded.
    id: String,
}

/// A path's parameters, or a JSON error (a bad percent-encoding, say).
fn path_value<T>(path: Result<Path<T>, PathRejection>) -> AppResult<T> {
    path.map(|Path(value)| value)
        .map_err(|rejection| ApiError::bad_request("invalid_path", rejection.body_text()))
}

/// The `{id}` of a path, or a JSON error.
pub(crate) fn path_id(path: Result<Path<DocumentId>, PathRejection>) -> AppResult<String> {
    path_value(path).map(|DocumentId { id }| id)
}

// ---- POST /v1/documents -------------------------------------------------------------------

/// One document's outcome in a POST's answer, in the order posted.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum DocumentResult {
    /// Indexed (committed and searchable), or already indexed as it is.
    Indexed {
        /// Its id.
        id: String,
        /// Its fingerprint.
        simhash: Fingerprint,
        /// Its cluster.
        root: Fingerprint,
        /// Whether it joined an earlier story.
        duplicate: bool,
        /// Whether it equals the document already indexed under its id (a retry): nothing
        /// was done, and the rest is that document's decision.
        unchanged: bool,
        /// Documents in its cluster now, itself included.
        cluster_size: u64,
        /// Why it was kept out of every other story, when it was (`degenerate`: its text
        /// has too little of its own to be compared; `boilerplate`: its text is a part of
        /// three stories or more, as a disclaimer or a footer alone is, told when it is
        /// placed and not again on an unchanged re-send). Absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<Reason>,
    },
    /// Refused; the rest of the batch was not affected.
    Failed {
        /// Its position in the batch, from 0.
        index: usize,
        /// Its id, when it had a readable one.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The status it would have had alone (400, 413).
        status: u16,
        /// Why.
        error: ErrorDetail,
    },
}

/// The answer to a POST of documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct IngestResponse {
    /// Present when every document was refused: the first document's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
    /// Documents indexed: added, or replacing the document with their id.
    indexed: usize,
    /// Documents equal to the one already indexed under their id: nothing done (a retry).
    unchanged: usize,
    /// Documents refused.
    failed: usize,
    /// Each document's outcome, in order.
    results: Vec<DocumentResult>,
    /// What the client should know although nothing failed (no document had the time field).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// Index a batch of documents.
///
/// Each document is fingerprinted, placed in its story and indexed; the answer comes once the
/// batch is committed (durable and searchable). A bad document is refused alone, the rest of
/// the batch indexed. A document sent again unchanged changes nothing (`unchanged`).
#[utoipa::path(
    post,
    path = "/v1/documents",
    tag = "documents",
    request_body(
        description = "The documents: a JSON array of them (or one object), or NDJSON (one \
            object a line); optionally `Content-Encoding: gzip`.",
        content(
            (Vec<Article> = "application/json"),
            (Article = "application/x-ndjson"),
        ),
    ),
    responses(
        (status = 200, description = "Committed: each document's outcome in order (refused \
            ones too, with their error)", body = IngestResponse),
        (status = 400, description = "The body is not JSON or NDJSON, or not whole gzip \
            data under `Content-Encoding: gzip` (`invalid_body`), or \
            every document was refused: then the answer is the `IngestResponse` with the \
            first document's `error`", body = ErrorBody),
        (status = 408, description = BODY_TIMEOUT, body = ErrorBody),
        (status = 413, description = "The body, a document or the batch is too large \
            (`body_too_large`, `document_too_large`, `batch_too_large`)", body = ErrorBody),
        (status = 503, description = WRITER_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn post_documents(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    if let Some(shard) = state.shard {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "shard_write",
            format!(
                "this server is shard {shard} of an index split by story: its documents are \
                 placed by a coordinator (serve --coordinator); send them there"
            ),
        ));
    }
    let (body, reservation) = receive_documents(&state, &headers, body).await?;
    let prepare_state = state.clone();
    let batch = blocking(move || {
        let documents =
            split_documents(&body, prepare_state.config.max_batch_documents).map_err(body_error)?;
        Ok(prepare_batch(
            &prepare_state,
            documents.into_iter().map(|document| (document, None)),
        ))
    })
    .await?;
    index_batch(&state, batch, reservation).await
}

/// A refused body's answer.
pub(crate) fn body_error(error: crate::input::BodyError) -> ApiError {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    ApiError::new(status, error.code(), error.to_string())
}

/// Reads a POST of documents under the body limit, holding room in the writer's queue as it
/// arrives and [`MEMORY_PER_BODY_BYTE`] a byte once it is whole (refused at once when the
/// writer takes no work, and 503 `queue_full` when the room is not there).
pub(crate) async fn receive_documents(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> AppResult<(axum::body::Bytes, Reservation)> {
    let limit = state.config.max_body_mib << 20;
    let gzip = access::gzip_body(headers);
    // The limit counts decoded bytes, so only a plain body's declared length says it is over.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if !gzip && declared.is_some_and(|length| length > limit) {
        return Err(body_too_large(limit, "server.max_body_mib"));
    }
    // Refused at once when the writer takes no work; room in its queue then grows with the
    // body, so that a full queue costs neither the memory nor the analysis of another body.
    // While the body arrives that room is the body's own bytes; what parsing and analysis
    // take besides is held once it is whole, so that a body that stalls holds only what it
    // holds in memory.
    let mut reservation = state.writer.reserve(0)?;
    let body = read_body(
        body,
        gzip,
        &state.config,
        BodyLimit {
            bytes: limit,
            setting: "server.max_body_mib",
            code: "body_too_large",
            reservation: Some(&mut reservation),
        },
    )
    .await?;
    reservation.grow(body.len() * (MEMORY_PER_BODY_BYTE - 1))?;
    Ok((body, reservation))
}

/// A batch parsed, checked and prepared: the documents to index with their positions, those
/// refused with theirs, and the warnings of the batch.
pub(crate) struct PreparedBatch {
    prepared: Vec<(usize, PreparedArticle)>,
    failed: Vec<(usize, DocumentResult)>,
    warnings: Vec<String>,
}

/// The limits a document of a POST is checked against, now.
pub(crate) fn batch_limits(config: &ServerConfig) -> BatchLimits {
    BatchLimits {
        max_documents: config.max_batch_documents,
        max_document_bytes: config.max_document_kib << 10,
        latest_time: crate::dedup::now().saturating_add(config.max_future.as_secs() as Timestamp),
    }
}

/// Parses, checks and prepares (analyses and fingerprints, in parallel) the documents of a
/// batch, each with where it was placed when a coordinator sent it.
pub(crate) fn prepare_batch<'a>(
    state: &AppState,
    documents: impl Iterator<Item = (&'a [u8], Option<Placed>)>,
) -> PreparedBatch {
    let limits = batch_limits(&state.config);
    let articles = ArticleReader::for_config(state.searcher.config());
    let mut failed = Vec::new();
    let mut records = Vec::new();
    let mut coverage = TimeCoverage::default();
    for (index, (document, placed)) in documents.enumerate() {
        match parse_document_with(document, &limits, &articles) {
            Ok(record) => {
                coverage.count(record.article.published_at);
                records.push((index, record, placed));
            }
            Err(refused) => failed.push((index, failed_result(index, refused))),
        }
    }
    let warnings: Vec<String> = coverage.warning(articles.time_key()).into_iter().collect();
    let preparer = &state.preparer;
    let prepared: Vec<_> = records
        .into_par_iter()
        .map(|(index, record, placed)| {
            let prepared = match placed {
                Some(placed) => preparer.prepare_placed(record, placed),
                None => preparer.prepare(record),
            };
            (index, prepared)
        })
        .collect();
    PreparedBatch {
        prepared,
        failed,
        warnings,
    }
}

/// Hands a prepared batch to the writer and answers, once it is committed, each document's
/// outcome in order.
pub(crate) async fn index_batch(
    state: &AppState,
    batch: PreparedBatch,
    reservation: Reservation,
) -> AppResult<Response> {
    let written = write_batch(state, batch, reservation).await?;
    answer_batch(state, written).await
}

/// A batch's documents written and committed: their decisions, and the refused documents.
pub(crate) struct WrittenBatch {
    positions: Vec<usize>,
    decisions: Vec<Decision>,
    failed: Vec<(usize, DocumentResult)>,
    warnings: Vec<String>,
}

/// Hands a prepared batch to the writer; returns once it is committed.
pub(crate) async fn write_batch(
    state: &AppState,
    batch: PreparedBatch,
    reservation: Reservation,
) -> AppResult<WrittenBatch> {
    batch.queue(state, reservation, None)?.written().await
}

impl PreparedBatch {
    /// Whether no document of the batch is to be written (every one was refused).
    #[cfg(feature = "redis")]
    pub(crate) fn is_empty(&self) -> bool {
        self.prepared.is_empty()
    }

    /// Queues the batch's documents for the writer, after everything queued before them (with
    /// `log_position`, as [`WriterHandle::queue_add`]).
    pub(crate) fn queue(
        self,
        state: &AppState,
        reservation: Reservation,
        log_position: Option<String>,
    ) -> AppResult<QueuedBatch> {
        let PreparedBatch {
            prepared,
            failed,
            warnings,
        } = self;
        state.metrics.count_rejected(failed.len() as u64);
        let (positions, prepared): (Vec<usize>, Vec<_>) = prepared.into_iter().unzip();
        let pending = if prepared.is_empty() {
            None
        } else {
            Some(
                state
                    .writer
                    .queue_add(prepared, reservation, log_position)?,
            )
        };
        Ok(QueuedBatch {
            positions,
            pending,
            failed,
            warnings,
        })
    }
}

/// A batch's documents queued for the writer ([`PreparedBatch::queue`]).
pub(crate) struct QueuedBatch {
    positions: Vec<usize>,
    pending: Option<Pending<Vec<Decision>>>,
    failed: Vec<(usize, DocumentResult)>,
    warnings: Vec<String>,
}

impl QueuedBatch {
    /// Waits until the batch is committed.
    pub(crate) async fn written(self) -> AppResult<WrittenBatch> {
        let decisions = match self.pending {
            Some(pending) => pending.committed().await?,
            None => Vec::new(),
        };
        Ok(WrittenBatch {
            positions: self.positions,
            decisions,
            failed: self.failed,
            warnings: self.warnings,
        })
    }
}

/// The answer to a written batch: each document's outcome in order, with its cluster's size
/// now.
pub(crate) async fn answer_batch(state: &AppState, written: WrittenBatch) -> AppResult<Response> {
    let WrittenBatch {
        positions,
        decisions,
        failed: mut results,
        warnings,
    } = written;
    let sizes = {
        let searcher = state.searcher.clone();
        let roots: Vec<Fingerprint> = decisions.iter().map(|decision| decision.root).collect();
        blocking(move || cluster_sizes(&searcher, &roots)).await?
    };
    let accepted = decisions.len();
    let unchanged = decisions
        .iter()
        .filter(|decision| decision.change.is_unchanged())
        .count();
    results.extend(
        positions
            .into_iter()
            .zip(decisions)
            .map(|(index, decision)| {
                let Decision {
                    id,
                    simhash,
                    root,
                    duplicate,
                    change,
                    reason,
                } = decision;
                let cluster_size = sizes.get(&root).copied().unwrap_or(1);
                (
                    index,
                    DocumentResult::Indexed {
                        id,
                        simhash,
                        root,
                        duplicate,
                        unchanged: change.is_unchanged(),
                        cluster_size,
                        reason,
                    },
                )
            }),
    );
    results.sort_unstable_by_key(|(index, _)| *index);
    let results: Vec<DocumentResult> = results.into_iter().map(|(_, result)| result).collect();
    let failed = results.len() - accepted;
    let (status, error) = match results.first() {
        Some(DocumentResult::Failed { status, error, .. }) if accepted == 0 => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            Some(ErrorDetail {
                code: error.code,
                message: format!("no document was indexed; the first: {}", error.message),
            }),
        ),
        _ => (StatusCode::OK, None),
    };
    let response = IngestResponse {
        error,
        indexed: accepted - unchanged,
        unchanged,
        failed,
        results,
        warnings,
    };
    Ok((status, Json(response)).into_response())
}

pub(crate) fn failed_result(index: usize, refused: Refused) -> DocumentResult {
    DocumentResult::Failed {
        index,
        id: refused.id,
        status: refused.error.status(),
        error: ErrorDetail {
            code: refused.error.code(),
            message: refused.error.to_string(),
        },
    }
}

/// The current size of each distinct cluster.
fn cluster_sizes(
    searcher: &DedupSearcher,
    roots: &[Fingerprint],
) -> AppResult<HashMap<Fingerprint, u64>> {
    let mut sizes = HashMap::with_capacity(roots.len());
    for root in roots {
        if !sizes.contains_key(root) {
            sizes.insert(*root, searcher.cluster_size(*root)?);
        }
    }
    Ok(sizes)
}

// ---- query parameters -----------------------------------------------------------------------

/// A list page's query parameters as text, checked one by one so that each error names its
/// parameter. `filter` and `exclude` may repeat; any other parameter given twice is refused.
/// What the OpenAPI document says of each is its doc comment and `param` attribute.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SearchParams {
    /// Keywords, all of which must match (segmented as the index is); empty or absent: every
    /// document. A word may name the text field it must be in (`title:灯塔`); other fields are
    /// refused (`filter` reads the declared ones).
    q: Option<String>,
    /// How clusters are ordered: by their best score, their size (largest or smallest
    /// first), their newest matching document, their oldest (`oldest`: the stories in the
    /// order they broke), the articles they gained in the trend window
    /// against the window before (`trending`: most first, with each story's `trend`), or
    /// `hot`: score × (1 + ln size) × ½ per trend window of the newest match's age. Or by a
    /// number, date or boolean field of your own that is fast: `likes:desc` (a story's
    /// largest value among its matching documents first) or `likes:asc` (its smallest
    /// first), with each story's `sort_value`; stories without a value come last.
    #[param(value_type = Option<String>, example = "similar_desc")]
    sort: Option<String>,
    /// Clusters to skip.
    #[param(value_type = Option<usize>, maximum = 10000)]
    offset: Option<String>,
    /// Clusters on the page.
    #[param(value_type = Option<usize>, maximum = 1000, default = json!(DEFAULT_PAGE_SIZE))]
    limit: Option<String>,
    /// Published at or after: a date (`2024-04-21`, from its start), a date and time
    /// (`2024-04-21 08:30`), both in the index's time zone, an RFC 3339 time (with `+`
    /// escaped) or Unix seconds.
    from: Option<String>,
    /// Published at or before, in the forms of `from` (a date alone: to its end).
    to: Option<String>,
    /// Only documents of this outlet.
    source: Option<String>,
    /// Repeatable, all must hold: `field:value`, `field:[a TO b]` (`*` for an open end) or
    /// `field:/facet/prefix`, on a declared field that is not text.
    #[param(required = false)]
    filter: Vec<String>,
    /// Repeatable: words (comma- or space-separated) that none of the matching documents may
    /// contain.
    #[param(required = false)]
    exclude: Vec<String>,
    /// The text fields `q` searches, comma-separated; absent: all of them.
    fields: Option<String>,
    /// Only clusters with at least this many documents.
    #[param(value_type = Option<u32>)]
    min_cluster_size: Option<String>,
    /// Fields to count the values of over all matching documents (comma-separated): adds
    /// `facets`.
    facets: Option<String>,
    /// Values per facet field, most articles first.
    #[param(value_type = Option<usize>, maximum = 1000, default = json!(DEFAULT_FACET_LIMIT))]
    facet_limit: Option<String>,
    /// `auto` or an interval (`1h`, `1d`, any duration): adds `histogram`, the matching
    /// documents per interval of publication time, and `histogram_interval`, its width in
    /// seconds. `auto` picks the finest of 1h, 3h, 6h, 12h, 1d, 7d, 30d, 365d that shows the
    /// index's time span (within `from`/`to`) in at most 200 buckets; a fixed interval over a
    /// span of more than 10,000 buckets is refused.
    histogram: Option<String>,
    /// Whether each representative (and member) gets a `snippet` with the matched words in
    /// `<em>` and `highlights`: per text field with a match (`title`, `content`), its
    /// fragments in text order.
    #[param(value_type = Option<bool>)]
    highlight: Option<String>,
    /// How many fragments a field's `highlights` have at most (0 to 10, default 3; 0: no
    /// `highlights`, the `snippet` alone); given, it turns `highlight` on.
    #[param(value_type = Option<usize>, minimum = 0, maximum = 10)]
    highlight_fragments: Option<String>,
    /// About how many characters a fragment shows (20 to 1,000, default 100); given, it turns
    /// `highlight` on.
    #[param(value_type = Option<usize>, minimum = 20, maximum = 1000)]
    highlight_chars: Option<String>,
    /// The trend window's length (`6h`, `30m`, `1d`; default 6h), which `sort=trending`,
    /// `sort=hot` and `min_recent` read.
    trend_window: Option<String>,
    /// When the trend window ends, in the forms of `from` (a date alone: its end); absent:
    /// the time of the request. The answer says it (`trend_end`).
    trend_end: Option<String>,
    /// Only stories with at least this many articles (matching or not) that joined within
    /// the trend window.
    #[param(value_type = Option<u32>)]
    min_recent: Option<String>,
    /// Lists up to this many of each story's other matching documents with it (`members`),
    /// best first in the page's order: the best scores, the newest for `sort=newest`, the
    /// oldest for `sort=oldest` (by a field of one's own: the best scores).
    #[param(value_type = Option<usize>, maximum = 100)]
    members: Option<String>,
    /// Deep paging past `offset`'s 10,000: `*` starts a walk through the list, whose pages
    /// each carry `next_cursor`, given here for the page after (absent on the last page).
    /// Each story comes once, as the list was when the walk started, while documents keep
    /// arriving; `offset` must then be absent. A walk's snapshot is kept 5 minutes after its
    /// last page: later, 410 `cursor_expired`.
    cursor: Option<String>,
    /// On a coordinator of shards (`serve --coordinator`), with a shard down or slow: `true`
    /// answers the stories of the shards that answered (each exact) with `"partial": true`
    /// and `shards`; `false` (the default) answers 503 `shard_unavailable`. A single index
    /// reads and ignores it.
    #[param(value_type = Option<bool>)]
    allow_partial: Option<String>,
}

/// The parameters of `GET /v1/search`, for the error that lists them.
const SEARCH_PARAMETERS: &str = "q, sort, offset, limit, from, to, source, filter, exclude, \
                                 fields, min_cluster_size, facets, facet_limit, histogram, \
                                 highlight, highlight_fragments, highlight_chars, \
                                 trend_window, trend_end, min_recent, members, cursor, \
                                 allow_partial";

impl SearchParams {
    /// Reads a raw query string (percent-decoded, `+` as a space).
    pub(crate) fn parse(query: Option<&str>) -> AppResult<Self> {
        let mut params = SearchParams::default();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let value = value.into_owned();
            let single = match name.as_ref() {
                "filter" => {
                    params.filter.push(value);
                    continue;
                }
                "exclude" => {
                    params.exclude.push(value);
                    continue;
                }
                "q" => &mut params.q,
                "sort" => &mut params.sort,
                "offset" => &mut params.offset,
                "limit" => &mut params.limit,
                "from" => &mut params.from,
                "to" => &mut params.to,
                "source" => &mut params.source,
                "fields" => &mut params.fields,
                "min_cluster_size" => &mut params.min_cluster_size,
                "facets" => &mut params.facets,
                "facet_limit" => &mut params.facet_limit,
                "histogram" => &mut params.histogram,
                "highlight" => &mut params.highlight,
                "highlight_fragments" => &mut params.highlight_fragments,
                "highlight_chars" => &mut params.highlight_chars,
                "trend_window" => &mut params.trend_window,
                "trend_end" => &mut params.trend_end,
                "min_recent" => &mut params.min_recent,
                "members" => &mut params.members,
                "cursor" => &mut params.cursor,
                "allow_partial" => &mut params.allow_partial,
                unknown => {
                    return Err(ApiError::bad_request(
                        "invalid_parameter",
                        format!(
                            "unknown parameter `{unknown}`; the parameters of /v1/search are \
                             {SEARCH_PARAMETERS}"
                        ),
                    ));
                }
            };
            if single.replace(value).is_some() {
                return Err(ApiError::bad_request(
                    "invalid_parameter",
                    format!("`{name}` is given twice; only `filter` and `exclude` may repeat"),
                ));
            }
        }
        Ok(params)
    }
}

/// Paging parameters of a detail page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PageParams {
    /// Documents to skip.
    #[param(value_type = Option<usize>)]
    offset: Option<String>,
    /// Documents on the page.
    #[param(value_type = Option<usize>, maximum = 1000, default = json!(DEFAULT_PAGE_SIZE))]
    limit: Option<String>,
}

fn query_params<T>(query: Result<Query<T>, QueryRejection>) -> AppResult<T> {
    query.map(|Query(params)| params).map_err(|rejection| {
        ApiError::bad_request(
            "invalid_parameter",
            format!(
                "{}; see the API reference in the README",
                rejection.body_text()
            ),
        )
    })
}

/// A whole number parameter in `0..=max`, `default` when absent.
fn count_param(name: &str, value: Option<&str>, default: usize, max: usize) -> AppResult<usize> {
    let Some(value) = value else {
        return Ok(default);
    };
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|count| *count <= max)
        .ok_or_else(|| {
            ApiError::bad_request(
                "invalid_parameter",
                format!("`{name}` must be a whole number from 0 to {max}, got {value:?}"),
            )
        })
}

/// A time parameter: a date, a date and time (both in `zone`), RFC 3339 or Unix seconds; a
/// date alone bounds the range at the `end` of that day ([`TimeZone::parse`]).
fn time_param(
    name: &str,
    value: Option<&str>,
    zone: TimeZone,
    end: RangeEnd,
) -> AppResult<Option<Timestamp>> {
    let Some(value) = value.filter(|value| !value.trim().is_empty()) else {
        return Ok(None);
    };
    let value = value.trim();
    zone.parse(value, end)
        // An unescaped `+` of an RFC 3339 offset arrives as a space (while the space of
        // `2024-04-21 08:30` is meant).
        .or_else(|error| zone.parse(&value.replace(' ', "+"), end).map_err(|_| error))
        .map(Some)
        .map_err(|error| {
            let message = match error {
                TimeError::Form { .. } => format!(
                    "`{name}` must be a date (2024-04-21), a date and time (2024-04-21 08:30 or \
                     2024-04-21 08:30:15), both in {zone}, an RFC 3339 time \
                     (2024-04-21T08:30:00%2B08:00, with `+` escaped) or Unix seconds; got {value:?}"
                ),
                TimeError::Range { .. } => format!("`{name}`: {error}"),
            };
            ApiError::bad_request("invalid_parameter", message)
        })
}

/// A boolean parameter: `true`/`1` or `false`/`0`/empty, `false` when absent.
fn flag_param(name: &str, value: Option<&str>) -> AppResult<bool> {
    match value.map(str::trim) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            "invalid_parameter",
            format!("`{name}` must be true or false, got {other:?}"),
        )),
    }
}

impl SearchParams {
    /// Whether a coordinator may answer without a shard (`allow_partial`).
    pub(crate) fn allow_partial(&self) -> AppResult<bool> {
        flag_param("allow_partial", self.allow_partial.as_deref())
    }

    /// The request, with dates and times without an offset read in `zone`.
    pub(crate) fn request(self, zone: TimeZone) -> AppResult<SearchRequest> {
        let _ = self.allow_partial()?;
        let order = match self.sort.as_deref() {
            None | Some("") => ListOrder::from(Sort::default()),
            Some(sort) => sort
                .parse::<ListOrder>()
                .map_err(|error| ApiError::bad_request("invalid_parameter", error.to_string()))?,
        };
        let from = time_param("from", self.from.as_deref(), zone, RangeEnd::Start)?;
        let to = time_param("to", self.to.as_deref(), zone, RangeEnd::End)?;
        if let (Some(from), Some(to)) = (from, to)
            && from > to
        {
            return Err(ApiError::bad_request(
                "invalid_parameter",
                "`from` is after `to`; the time range is empty",
            ));
        }
        let invalid = |name: &str, error: crate::Error| {
            let message = match error {
                crate::Error::Query(message) => message,
                other => other.to_string(),
            };
            ApiError::bad_request("invalid_parameter", format!("`{name}`: {message}"))
        };
        let mut request = SearchRequest::new(self.q.unwrap_or_default())
            .order(order)
            .page(
                count_param("offset", self.offset.as_deref(), 0, MAX_OFFSET)?,
                count_param(
                    "limit",
                    self.limit.as_deref(),
                    DEFAULT_PAGE_SIZE,
                    MAX_PAGE_SIZE,
                )?,
            )
            .published(from, to)
            .min_cluster_size(count_param(
                "min_cluster_size",
                self.min_cluster_size.as_deref(),
                0,
                u32::MAX as usize,
            )? as u64)
            .facet_limit(count_param(
                "facet_limit",
                self.facet_limit.as_deref(),
                DEFAULT_FACET_LIMIT,
                MAX_FACET_LIMIT,
            )?)
            .fields(list_items(self.fields.as_deref().unwrap_or_default()))
            .facets(list_items(self.facets.as_deref().unwrap_or_default()));
        if let Some(source) = self.source.filter(|source| !source.is_empty()) {
            request = request.source(source);
        }
        for filter in self
            .filter
            .iter()
            .filter(|filter| !filter.trim().is_empty())
        {
            request = request.filter(filter.parse().map_err(|error| invalid("filter", error))?);
        }
        for words in &self.exclude {
            request.exclude.extend(list_items(words).map(str::to_owned));
        }
        if let Some(interval) = self
            .histogram
            .filter(|interval| !interval.trim().is_empty())
        {
            request = request.histogram(
                interval
                    .parse()
                    .map_err(|error| invalid("histogram", error))?,
            );
        }
        request = request.highlight(flag_param("highlight", self.highlight.as_deref())?);
        let fragments = self
            .highlight_fragments
            .filter(|value| !value.trim().is_empty());
        let chars = self
            .highlight_chars
            .filter(|value| !value.trim().is_empty());
        if fragments.is_some() || chars.is_some() {
            let chars = count_param(
                "highlight_chars",
                chars.as_deref(),
                DEFAULT_FRAGMENT_CHARS,
                *FRAGMENT_CHARS.end(),
            )?;
            if chars < *FRAGMENT_CHARS.start() {
                return Err(ApiError::bad_request(
                    "invalid_parameter",
                    format!(
                        "`highlight_chars` must be a whole number from {} to {}, got {chars}",
                        FRAGMENT_CHARS.start(),
                        FRAGMENT_CHARS.end()
                    ),
                ));
            }
            request = request.highlight_fragments(
                count_param(
                    "highlight_fragments",
                    fragments.as_deref(),
                    DEFAULT_FRAGMENTS,
                    MAX_FRAGMENTS,
                )?,
                chars,
            );
        }
        let span = match self.trend_window.as_deref().map(str::trim) {
            None | Some("") => TrendSpan::default(),
            Some(span) => span
                .parse()
                .map_err(|error| invalid("trend_window", error))?,
        };
        let end = time_param("trend_end", self.trend_end.as_deref(), zone, RangeEnd::End)?;
        request = request
            .trend(span, end)
            .min_recent(count_param(
                "min_recent",
                self.min_recent.as_deref(),
                0,
                u32::MAX as usize,
            )? as u64)
            .members(count_param(
                "members",
                self.members.as_deref(),
                0,
                MAX_MEMBERS,
            )?);
        if let Some(cursor) = self.cursor.filter(|cursor| !cursor.trim().is_empty()) {
            request = request.cursor(cursor.parse().map_err(|error| invalid("cursor", error))?);
        }
        Ok(request)
    }
}

/// The names in [`SEARCH_PARAMETERS`].
fn search_parameters() -> impl Iterator<Item = &'static str> {
    SEARCH_PARAMETERS.split(", ")
}

/// The parameters `GET /v1/search` names otherwise, or does not default alike, as
/// `GET /v1/trending` names them.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TrendingOwnParams {
    /// The trend window's length (`6h`, `30m`, `1d`; default 6h; whole seconds from 1s to
    /// 366d).
    window: Option<String>,
    /// When it ends (inclusive), in the forms of `to` (a date alone: its end); absent: now.
    end: Option<String>,
    /// Only stories with at least this many articles (matching or not) within the window
    /// (default 1).
    #[param(value_type = Option<u32>)]
    min_recent: Option<String>,
}

/// The `/v1/search` parameters that `/v1/trending` names otherwise or refuses.
const NOT_ON_TRENDING: [&str; 4] = ["sort", "trend_window", "trend_end", "min_recent"];

/// The parameters of `GET /v1/trending`, for its documentation: its own
/// ([`TrendingOwnParams`]) and every other parameter of `/v1/search` but `sort`.
pub(crate) struct TrendingParams;

impl IntoParams for TrendingParams {
    fn into_params(
        parameter_in: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>,
    ) -> Vec<utoipa::openapi::path::Parameter> {
        let mut params = TrendingOwnParams::into_params(&parameter_in);
        params.extend(
            SearchParams::into_params(&parameter_in)
                .into_iter()
                .filter(|param| !NOT_ON_TRENDING.contains(&param.name.as_str())),
        );
        params
    }
}

/// The `/v1/search` query string that `GET /v1/trending?{query}` stands for: `window` and
/// `end` are the search's `trend_window` and `trend_end` (read here, so that an error names
/// them as the client did, `end` in `zone` when it has no offset), the order is `trending`,
/// and `min_recent` is 1 unless given. Refuses `sort` (and the search's own names for the
/// window).
pub(crate) fn trending_as_search(query: Option<&str>, zone: TimeZone) -> AppResult<String> {
    let mut search = form_urlencoded::Serializer::new(String::new());
    let mut own = TrendingOwnParams::default();
    for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let slot = match name.as_ref() {
            "window" => &mut own.window,
            "end" => &mut own.end,
            "min_recent" => &mut own.min_recent,
            "sort" | "trend_window" | "trend_end" => {
                return Err(ApiError::bad_request(
                    "invalid_parameter",
                    format!(
                        "`{name}` is not a parameter of /v1/trending, which orders by trend \
                         (`window`, `end`); use /v1/search?sort=… for another order"
                    ),
                ));
            }
            other if search_parameters().any(|known| known == other) => {
                search.append_pair(&name, &value);
                continue;
            }
            unknown => {
                let others: Vec<&str> = search_parameters()
                    .filter(|known| !NOT_ON_TRENDING.contains(known))
                    .collect();
                return Err(ApiError::bad_request(
                    "invalid_parameter",
                    format!(
                        "unknown parameter `{unknown}`; the parameters of /v1/trending are \
                         window, end, min_recent and {}",
                        others.join(", ")
                    ),
                ));
            }
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(ApiError::bad_request(
                "invalid_parameter",
                format!("`{name}` is given twice"),
            ));
        }
    }
    if let Some(window) = own
        .window
        .as_deref()
        .filter(|window| !window.trim().is_empty())
    {
        window.trim().parse::<TrendSpan>().map_err(|error| {
            let message = match error {
                Error::Query(message) => message,
                other => other.to_string(),
            };
            ApiError::bad_request("invalid_parameter", format!("`window`: {message}"))
        })?;
    }
    time_param("end", own.end.as_deref(), zone, RangeEnd::End)?;
    search.append_pair("sort", "trending");
    search.append_pair("min_recent", own.min_recent.as_deref().unwrap_or("1"));
    for (name, value) in [("trend_window", own.window), ("trend_end", own.end)] {
        if let Some(value) = value {
            search.append_pair(name, &value);
        }
    }
    Ok(search.finish())
}

// ---- reads ----------------------------------------------------------------------------------

/// A list page: one result per story.
///
/// The matching documents collapsed to one representative per cluster, with the cluster's
/// size and sources; optionally facet counts and a histogram over all matching documents.
#[utoipa::path(
    get,
    path = "/v1/search",
    tag = "search",
    params(SearchParams),
    responses(
        (status = 200, description = "The page of clusters", body = SearchPage),
        (status = 400, description = "A parameter is unknown, repeated or invalid \
            (`invalid_parameter`), or the query cannot be read (`invalid_query`)",
            body = ErrorBody),
        (status = 410, description = CURSOR_GONE, body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> AppResult<Json<SearchPage>> {
    let request = SearchParams::parse(query.as_deref())?
        .request(state.time_zone)?
        .deadline(state.read_deadline());
    let searcher = state.searcher.clone();
    state
        .read(move || Ok(searcher.search(&request)?))
        .await
        .map(Json)
}

/// Trending stories: those with articles in the last `window` (default 6h), those that
/// gained the most against the window before first.
///
/// `GET /v1/search?sort=trending&min_recent=1` with `window` for `trend_window` and `end` for
/// `trend_end`: each story carries `trend` (`recent`, `recent_outlets`, `previous`,
/// `growth`), the answer `trend_window` and `trend_end`. `q` and the other list page
/// parameters narrow it as on `/v1/search`.
#[utoipa::path(
    get,
    path = "/v1/trending",
    tag = "search",
    params(TrendingParams),
    responses(
        (status = 200, description = "The page of trending stories", body = SearchPage),
        (status = 400, description = "As `/v1/search`, or `sort` given", body = ErrorBody),
        (status = 410, description = CURSOR_GONE, body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn trending(
    state: State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> AppResult<Json<SearchPage>> {
    let query = trending_as_search(query.as_deref(), state.time_zone)?;
    search(state, RawQuery(Some(query))).await
}

/// A document with its cluster and the first of its similar documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentResponse {
    /// The document.
    pub document: DocumentView,
    /// Its cluster.
    pub cluster: ClusterInfo,
    /// The first other documents of the cluster, earliest first.
    pub similar: Vec<DocumentView>,
}

/// A cluster's id and size.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterInfo {
    /// The root hash.
    pub root: Fingerprint,
    /// All its documents, this one included.
    pub size: u64,
}

/// Similar documents shown with a document.
const SIMILAR_ON_DOCUMENT: usize = 10;

pub(crate) fn no_document(id: &str) -> ApiError {
    ApiError::not_found(format!("no document has id {id:?}"))
}

/// A document, its cluster and its first similar documents.
///
/// The document with its stored body, its cluster's root and size, and the first 10 other
/// documents of the cluster, earliest first.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}",
    tag = "documents",
    params(DocumentId),
    responses(
        (status = 200, description = "The document", body = DocumentResponse),
        (status = 400, description = INVALID_PATH, body = ErrorBody),
        (status = 404, description = NO_DOCUMENT, body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn get_document(
    State(state): State<Arc<AppState>>,
    path: Result<Path<DocumentId>, PathRejection>,
) -> AppResult<Json<DocumentResponse>> {
    let id = path_id(path)?;
    let searcher = state.searcher.clone();
    state
        .read(move || {
            let page = searcher
                .similar(&id, 0, SIMILAR_ON_DOCUMENT)?
                .ok_or_else(|| no_document(&id))?;
            Ok(Json(DocumentResponse {
                cluster: ClusterInfo {
                    root: page.document.root,
                    size: page.cluster_size,
                },
                document: page.document,
                similar: page.documents,
            }))
        })
        .await
}

/// A detail page: the other documents of a document's cluster.
///
/// Earliest first, paginated.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/similar",
    tag = "documents",
    params(DocumentId, PageParams),
    responses(
        (status = 200, description = "The page", body = SimilarPage),
        (status = 400, description = "The id is not valid percent-encoded UTF-8 \
            (`invalid_path`), or a parameter is unknown or invalid (`invalid_parameter`)",
            body = ErrorBody),
        (status = 404, description = NO_DOCUMENT, body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn get_similar(
    State(state): State<Arc<AppState>>,
    path: Result<Path<DocumentId>, PathRejection>,
    query: Result<Query<PageParams>, QueryRejection>,
) -> AppResult<Json<SimilarPage>> {
    let id = path_id(path)?;
    let params = query_params(query)?;
    let offset = count_param("offset", params.offset.as_deref(), 0, usize::MAX >> 1)?;
    let limit = count_param(
        "limit",
        params.limit.as_deref(),
        DEFAULT_PAGE_SIZE,
        MAX_PAGE_SIZE,
    )?;
    let searcher = state.searcher.clone();
    state
        .read(move || {
            searcher
                .similar(&id, offset, limit)?
                .map(Json)
                .ok_or_else(|| no_document(&id))
        })
        .await
}

/// The `{root}` of a story's path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct StoryRoot {
    /// The story's root hash, 16 hex digits (a list page's `clusters[i].root`).
    root: String,
}

/// The parameters of a story page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct StoryParams {
    /// Members to skip.
    #[param(value_type = Option<usize>, maximum = 10_000)]
    offset: Option<String>,
    /// Members on the page.
    #[param(value_type = Option<usize>, maximum = 1000, default = json!(DEFAULT_PAGE_SIZE))]
    limit: Option<String>,
    /// The members' order: `time` (earliest first) or `source` (by outlet, then time).
    #[param(value_type = Option<String>, pattern = "^(time|source)$", default = "time")]
    sort: Option<String>,
    /// The spread histogram's bucket width: `auto` (the finest of 1h, 3h, 6h, 12h, 1d, 7d,
    /// 30d, 365d that shows the story's span in at most 200 buckets), or `1h`, `1d`, `30m` or
    /// any whole number of seconds.
    #[param(value_type = Option<String>, default = "auto")]
    histogram: Option<String>,
    /// Keywords (the list page's `q` the story was opened from): each member gets
    /// `highlights`, its fragments per field around their matches as a list page gives them
    /// (its `snippet` stays the start of its text).
    q: Option<String>,
}

impl StoryParams {
    fn request(self) -> AppResult<StoryRequest> {
        let invalid = |name: &str, error: crate::Error| {
            ApiError::bad_request("invalid_parameter", format!("`{name}`: {error}"))
        };
        let mut request = StoryRequest::default().page(
            count_param("offset", self.offset.as_deref(), 0, MAX_OFFSET)?,
            count_param(
                "limit",
                self.limit.as_deref(),
                DEFAULT_PAGE_SIZE,
                MAX_PAGE_SIZE,
            )?,
        );
        if let Some(sort) = self.sort.filter(|sort| !sort.trim().is_empty()) {
            request = request.sort(
                sort.trim()
                    .parse()
                    .map_err(|error| invalid("sort", error))?,
            );
        }
        if let Some(interval) = self
            .histogram
            .filter(|interval| !interval.trim().is_empty())
        {
            request = request.interval(
                interval
                    .parse()
                    .map_err(|error| invalid("histogram", error))?,
            );
        }
        if let Some(query) = self.q {
            request = request.highlight(query);
        }
        Ok(request)
    }
}

/// A story page.
///
/// The cluster of a root hash as a monitoring page shows it: its first outlet, each outlet's
/// articles, the articles per interval, and a page of its members, each with the member it
/// came into the story through (the forest's link), the evidence (Hamming distance to the root,
/// sketch similarity to that member) and what a reprint line of its text names.
#[utoipa::path(
    get,
    path = "/v1/stories/{root}",
    tag = "documents",
    params(StoryRoot, StoryParams),
    responses(
        (status = 200, description = "The story", body = Story),
        (status = 400, description = "The root is not 16 hex digits (`invalid_path`), a \
            parameter is unknown or invalid (`invalid_parameter`), or `q` is not a query \
            (`invalid_query`)", body = ErrorBody),
        (status = 404, description = "No live document belongs to the story", body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn get_story(
    State(state): State<Arc<AppState>>,
    path: Result<Path<StoryRoot>, PathRejection>,
    query: Result<Query<StoryParams>, QueryRejection>,
) -> AppResult<Json<Story>> {
    let StoryRoot { root: text } = path_value(path)?;
    let root: Fingerprint = text.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_path",
            format!("a story is named by its root hash, 16 hex digits; got {text:?}"),
        )
    })?;
    let request = query_params(query)?.request()?;
    let searcher = state.searcher.clone();
    state
        .read(move || {
            searcher.story(root, &request)?.map(Json).ok_or_else(|| {
                ApiError::not_found(format!("no live document belongs to story {root}"))
            })
        })
        .await
}

/// The most near-duplicates a check returns by default.
pub(crate) const NEAR_DUPLICATES_LIMIT: usize = 20;

/// The body of `POST /v1/near-duplicates`: a text as a document would be posted, without the
/// need for an id, and how many near-duplicates to return. The handler reads it field by
/// field, so that each error names its field; this type is what clients (and the OpenAPI
/// document) see of it.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct NearDuplicatesRequest {
    /// The text to check (required, non-empty).
    pub content: String,
    /// Its headline, as a document's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The outlet, as a document's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Its address, as a document's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its time, as a document's `published_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::article::openapi::event_time)]
    pub published_at: Option<Timestamp>,
    /// The most near-duplicates to return.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 1000, default = json!(NEAR_DUPLICATES_LIMIT))]
    pub limit: Option<usize>,
}

/// A body of one document (a text to check) under `server.max_document_kib`.
pub(crate) async fn read_document_body(
    config: &ServerConfig,
    headers: &HeaderMap,
    body: Body,
) -> AppResult<axum::body::Bytes> {
    read_body(
        body,
        access::gzip_body(headers),
        config,
        BodyLimit {
            bytes: config.max_document_kib << 10,
            setting: "server.max_document_kib",
            code: "document_too_large",
            reservation: None,
        },
    )
    .await
}

/// Check a text before publishing.
///
/// The indexed near-duplicates of a text that is not indexed, by the rule the clusters
/// follow, nearest first. Nothing is written.
#[utoipa::path(
    post,
    path = "/v1/near-duplicates",
    tag = "search",
    request_body(content = NearDuplicatesRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The text's fingerprint and its near-duplicates",
            body = NearDuplicates),
        (status = 400, description = "The body is not a JSON object with a `content` \
            (`invalid_body`, or the code of the field at fault)", body = ErrorBody),
        (status = 408, description = BODY_TIMEOUT, body = ErrorBody),
        (status = 413, description = "The text is larger than a document may be \
            (`document_too_large`)", body = ErrorBody),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn near_duplicates(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Json<NearDuplicates>> {
    let body = read_document_body(&state.config, &headers, body).await?;
    let invalid = |message: String| ApiError::bad_request("invalid_body", message);
    let mut value: Value = serde_json::from_slice(&body).map_err(|error| {
        invalid(format!(
            "the body must be a JSON object such as {{\"content\": \"...\"}}: {error}"
        ))
    })?;
    let object = value.as_object_mut().ok_or_else(|| {
        invalid("the body must be a JSON object such as {\"content\": \"...\"}".to_owned())
    })?;
    let limit = match object.remove("limit") {
        None | Some(Value::Null) => NEAR_DUPLICATES_LIMIT,
        Some(Value::Number(number)) => number
            .as_u64()
            .filter(|limit| *limit as usize <= MAX_PAGE_SIZE)
            .ok_or_else(|| {
                invalid(format!(
                    "`limit` must be a whole number from 0 to {MAX_PAGE_SIZE}"
                ))
            })? as usize,
        Some(_) => {
            return Err(invalid(format!(
                "`limit` must be a whole number from 0 to {MAX_PAGE_SIZE}"
            )));
        }
    };
    // A text to check need not have an id.
    object
        .entry("id")
        .or_insert_with(|| Value::String("unindexed".to_owned()));
    let article = Article::from_json_value(value).map_err(|error| {
        let error = DocumentError::from(error);
        ApiError::bad_request(error.code(), error.to_string())
    })?;
    let searcher = state.searcher.clone();
    state
        .read(move || Ok(Json(searcher.near_duplicates(&article, limit)?)))
        .await
}

// ---- writes ---------------------------------------------------------------------------------

/// The answer to a DELETE.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeleteResponse {
    /// The id.
    pub id: String,
    /// Always true (a missing document is a 404).
    pub deleted: bool,
}

/// Delete a document.
///
/// The answer comes once the deletion is committed. Its cluster keeps its other documents
/// and its root.
#[utoipa::path(
    delete,
    path = "/v1/documents/{id}",
    tag = "documents",
    params(DocumentId),
    responses(
        (status = 200, description = "Deleted and committed", body = DeleteResponse),
        (status = 400, description = INVALID_PATH, body = ErrorBody),
        (status = 404, description = NO_DOCUMENT, body = ErrorBody),
        (status = 503, description = WRITER_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn delete_document(
    State(state): State<Arc<AppState>>,
    path: Result<Path<DocumentId>, PathRejection>,
) -> AppResult<Json<DeleteResponse>> {
    let id = path_id(path)?;
    if state.writer.delete(id.clone()).await? {
        Ok(Json(DeleteResponse { id, deleted: true }))
    } else {
        Err(no_document(&id))
    }
}

// ---- service --------------------------------------------------------------------------------

/// A shard's replica as its server's handlers see it (`serve --shard I/N --replica NAME`).
pub(crate) trait ReplicaView: Send + Sync {
    /// Its name, shard and position now.
    fn status(&self) -> ReplicaStatus;
}

/// A replica's state: its own answer to its coordinators' health checks, and in a
/// coordinator's `/v1/stats`, each replica as the coordinator sees it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplicaStatus {
    /// Its name (`--replica`; absent: it has not answered this coordinator yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its shard, `I/N`.
    pub shard: String,
    /// The last position of its shard's log it has committed (as last seen, on a
    /// coordinator).
    pub applied: String,
    /// Where the coordinator reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether it answered the coordinator's last health check or call (a replica that does
    /// not gets no reads until it does and has caught up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// How far behind the newest write the coordinator had answered on its shard, by the
    /// log's clock, milliseconds (absent while it has applied nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_ms: Option<u64>,
    /// The hash of the jieba user dictionary it splits text with (absent: none, or not asked
    /// of it), which a coordinator compares with its own at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_dictionary: Option<String>,
}

/// The answer of `/v1/stats`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatsResponse {
    /// The index's size.
    pub index: IndexStats,
    /// The forest after the last commit.
    pub forest: ForestSize,
    /// Documents waiting for the writer.
    pub queue_documents: u64,
    /// Room held in the writer's queue, bytes: by bodies being read, prepared or written, at
    /// `MEMORY_PER_BODY_BYTE` per body byte (bounded by `server.queue_mib`).
    pub queue_reserved_bytes: usize,
    /// What opening the index replayed at start.
    pub recovery: RecoveryReport,
    /// Seconds since the server started.
    pub uptime_seconds: u64,
    /// Which shard this server is (`I/N`), when it is one (`serve --shard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Which of the shard's replicas this server is, and how far it has applied the shard's
    /// log, when it is one; on a coordinator, every shard's replicas as it sees them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaStatus>,
    /// The index's time zone (`[index] time_zone`, e.g. `+08:00`): days and histogram buckets
    /// start at its midnights, and the web page shows times in it.
    pub time_zone: String,
}

/// The forest's size: what was seen within the window only, so far fewer nodes and roots than
/// the index's documents and clusters once the window has passed older stories by (their
/// documents stay in the index, searchable; `expired` counts the fingerprints that left). With
/// a shared store (`serve --store`), this process's own share: the nodes it created and the
/// clusters it started since it started (the shared forest's totals would need a scan of the
/// cluster).
#[derive(Debug, Serialize, ToSchema)]
pub struct ForestSize {
    /// Distinct fingerprints seen within the window.
    pub nodes: u64,
    /// Clusters seen within the window.
    pub roots: u64,
    /// Fingerprints that left the forest as the window passed them by, since the forest was
    /// last rebuilt from the index (at start, or after a failed write), its replay included.
    pub expired: u64,
    /// The window, seconds (`[dedup] window`).
    pub window_seconds: u64,
    /// A coordinator's round trips to the shared store so far (batches of commands), for
    /// the figure of round trips per insert; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_round_trips: Option<u64>,
}

/// Statistics of the service.
///
/// The index's and the forest's sizes, the writer's queue, and what the last start replayed.
#[utoipa::path(
    get,
    path = "/v1/stats",
    tag = "service",
    responses(
        (status = 200, description = "The statistics", body = StatsResponse),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn stats(State(state): State<Arc<AppState>>) -> AppResult<Json<StatsResponse>> {
    let searcher = state.searcher.clone();
    let index = state.read(move || Ok(searcher.stats()?)).await?;
    let (nodes, roots, expired) = state.metrics.forest();
    Ok(Json(StatsResponse {
        index,
        forest: ForestSize {
            nodes,
            roots,
            expired,
            window_seconds: state.searcher.config().dedup.window_seconds(),
            store_round_trips: None,
        },
        queue_documents: state.writer.queued_documents(),
        queue_reserved_bytes: state.writer.reserved_bytes(),
        recovery: state.recovery.clone(),
        uptime_seconds: state.started.elapsed().as_secs(),
        shard: state.shard.map(|shard| shard.to_string()),
        replicas: state
            .replica
            .iter()
            .map(|replica| replica.status())
            .collect(),
        time_zone: state.time_zone.to_string(),
    }))
}

/// Whether the service takes writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// The writer takes writes.
    Ok,
    /// It does not: `error` says why.
    Unavailable,
}

/// The answer of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Whether the service takes writes.
    pub status: HealthStatus,
    /// Documents waiting for the writer, when it takes writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_documents: Option<u64>,
    /// Why it does not, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Health probe: whether the service takes writes.
///
/// `200 {"status": "ok"}` while the writer takes writes, else `503 {"status": "unavailable"}`
/// with why; also 503 (`last_write_failed`) after a failed write or commit (a full disk, say)
/// until a commit succeeds again, though writes are taken meanwhile so that one can; and 503
/// (`queue_full`) after a write was turned away for want of room in the write queue, until a
/// write is taken again or the queue has room for the one turned away; and 503
/// (`index_damaged`) from the first read that found the index damaged. A probe's answer, so
/// it is never a 500 and logs nothing (the failure itself was logged when it happened). Open
/// without keys.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses(
        (status = 200, description = "The writer takes writes", body = Health),
        (status = 503, description = "The writer takes no writes now (`queue_full` while \
            writes are turned away for want of queue room), a read found the index \
            damaged (`index_damaged`), or a write failed and none has been committed \
            since (`status`: `unavailable`, with the `error`); retry after `Retry-After` seconds",
            body = Health),
    ),
)]
pub(crate) async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    if state.damaged.load(std::sync::atomic::Ordering::Relaxed) {
        return unhealthy(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            INDEX_DAMAGED,
            "a read found the index damaged: `tantivy-dedup check --index DIR` names the \
             file; restore the index from a backup and restart",
        ));
    }
    match state.writer.health() {
        Ok(()) => Json(Health {
            status: HealthStatus::Ok,
            queue_documents: Some(state.writer.queued_documents()),
            error: None,
        })
        .into_response(),
        Err(error) => unhealthy(ApiError::from(error)),
    }
}

/// The health probe's 503: why, and when to ask again.
pub(crate) fn unhealthy(error: ApiError) -> Response {
    let body = Health {
        status: HealthStatus::Unavailable,
        queue_documents: None,
        error: Some(error.body().error),
    };
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from(1));
    response
}

/// Metrics for Prometheus.
///
/// Requests by route and status, their durations, the writer's queue and commits, the
/// index's and the forest's sizes: in OpenMetrics for a scraper that asks for it in `Accept`
/// (Prometheus does), in the Prometheus text format 0.0.4 otherwise (see
/// [`Exposition::from_accept`]).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses(
        (status = 200, description = "The metrics: OpenMetrics when `Accept` asks for it, the \
            Prometheus text format otherwise",
            content(
                (String = "text/plain; version=0.0.4; charset=utf-8"),
                (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
            )),
        (status = 503, description = READ_UNAVAILABLE, body = ErrorBody),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let searcher = state.searcher.clone();
    let index = state.read(move || Ok(searcher.stats()?)).await?;
    Ok(metrics_answer(&state.metrics, &index, &headers))
}

/// `/metrics`' answer: `metrics` with the index's figures, in the format `Accept` asks for.
pub(crate) fn metrics_answer(
    metrics: &Metrics,
    index: &IndexStats,
    headers: &HeaderMap,
) -> Response {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    let format = Exposition::from_accept(&accept.join(","));
    let text = metrics.render(index, format);
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

/// This API's OpenAPI 3.1 document.
///
/// What `tantivy-dedup openapi` prints. Open without keys: it says how to call the API,
/// nothing about the data.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this API",
            content_type = "application/json", body = Object),
        (status = 500, description = SERVER_FAILED, body = ErrorBody),
    ),
)]
pub(crate) async fn openapi_json() -> AppResult<Response> {
    let document = crate::server::openapi()?;
    Ok(([(header::CONTENT_TYPE, "application/json")], document).into_response())
}

pub(crate) async fn no_route(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint {} {}; the endpoints are listed in the README's API reference",
        request.method(),
        request.uri().path()
    ))
}

pub(crate) async fn wrong_method(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not allowed on {}; see the README's API reference",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Ends a JSON answer with a line break, so that the shell prompt after `curl` starts on a
/// line of its own and answers can be appended to a JSON Lines file as they come. Every JSON
/// answer is made whole before it is sent, so reading it whole here copies it once and waits
/// for nothing.
pub(crate) async fn end_json_with_newline(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Vec::from(bytes),
        Err(error) => {
            return ApiError::internal(format!("reading an answer's body: {error}"))
                .into_response();
        }
    };
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
        parts.headers.remove(header::CONTENT_LENGTH);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Records every answered request in the metrics and the log.
pub(crate) async fn observe(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    metrics.observe_request(method.as_str(), &route, status, elapsed);
    let ms = crate::server::log_ms(elapsed);
    // A probe's 503 says what was logged when the writer failed; a line per probe would bury it.
    if response.status().is_server_error() && route != "/healthz" {
        tracing::warn!(%method, %path, status, ms, "request failed");
    } else {
        tracing::debug!(%method, %path, status, ms, "request");
    }
    response
}
