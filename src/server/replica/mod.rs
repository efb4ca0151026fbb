//! A shard's replica (`serve --shard I/N --replica NAME`): one of the processes that hold a
//! shard, each applying the shard's log in order into its own index.
//!
//! - The coordinator appends each write to the shard's log (`ShardLog`, a Redis Stream)
//!   and waits for its answer from any replica (`entry_answer`); so a write is answered
//!   once it is durable in the log and committed by one replica.
//! - A replica reads the log after the position its last commit records (Tantivy's commit
//!   payload, [`DedupIndex::log_position`](crate::engine::DedupIndex::log_position)), queues
//!   each entry's documents and deletes for its writer with the entry's position, and keeps
//!   each entry's answer once committed; then records the position in the store, which trims
//!   the log below the oldest position of any replica (and to `[server] log_max_entries`).
//! - A read carries the position it must see (header `x-log-after`); a replica behind
//!   it waits a moment for it, else answers 503 `replica_behind`, and the coordinator asks a
//!   sibling.
//! - Applying is at least once: after a crash the entries after the last commit are applied
//!   again, and a placed document applied twice is an `unchanged` re-send.

pub(crate) mod copy;
mod log;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::watch;

pub use copy::{COPY_POSITION_HEADER, COPY_SHARD_HEADER, CopyReport, unpack_copy};
pub use log::{BadPosition, LogPosition};
pub(crate) use log::{LogEntry, ShardLog};

use crate::engine::{Placed, ShardSpec};
use crate::forest::redis::RedisAddress;
use utoipa_axum::router::OpenApiRouter;

use crate::server::api::{
    AppResult, AppState, DeleteResponse, MEMORY_PER_BODY_BYTE, ReplicaStatus, ReplicaView,
    answer_batch, blocking, no_document, prepare_batch,
};
use crate::server::error::{ApiError, ErrorBody};
use crate::server::metrics::ReplicaFigures;
use crate::server::writer::{Pending, WriteError};
use crate::{Error, Result};

/// The header a read carries with the log position it must see: a replica not there yet
/// waits up to [`BEHIND_WAIT`] for it, then answers 503 `replica_behind`.
pub(crate) const LOG_AFTER_HEADER: &str = "x-log-after";

/// How long a read waits for its replica to reach the position it must see.
const BEHIND_WAIT: Duration = Duration::from_secs(1);

/// How long [`entry_answer`] waits for its entry to be applied.
const ENTRY_WAIT: Duration = Duration::from_secs(60);

/// The newest entries whose answers a replica keeps for the coordinators that wait for them.
const KEPT_ANSWERS: usize = 256;

/// Entries read from the log at once (applied together, one commit for all when they come
/// faster than the commit delay).
const READ_BATCH: usize = 64;

/// What a replica answered an entry: the answer of a shard's `POST /v1/documents` (for
/// `documents`) or `DELETE /v1/documents/{id}` (for `delete`).
#[derive(Clone)]
struct EntryAnswer {
    status: StatusCode,
    body: Bytes,
}

/// A replica of one shard: its name, its log and how far it has applied it. A server started
/// with it ([`Server::start_replica`](crate::server::Server::start_replica)) applies the log
/// while it serves.
///
/// ```no_run
/// use tantivy_dedup::config::Config;
/// use tantivy_dedup::engine::{DedupIndex, ShardSpec};
/// use tantivy_dedup::forest::redis::RedisAddress;
/// use tantivy_dedup::server::Server;
/// use tantivy_dedup::server::replica::Replica;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisAddress::parse("redis://127.0.0.1:7000")?;
/// let shard = ShardSpec { index: 0, count: 2 };
/// let index = DedupIndex::open_or_create_shard("shard-0-a".as_ref(), None)?;
/// let committed = index.log_position().map(str::to_owned);
/// let replica = Replica::connect(&store, shard, "a", committed.as_deref(), 100_000).await?;
/// let server = Server::start_replica(index, Config::default().server, shard, replica)?;
/// let listener = tantivy_dedup::server::listen(&["127.0.0.1:7711".parse()?]).await?;
/// server.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(())
/// # }
/// ```
pub struct Replica {
    name: String,
    shard: ShardSpec,
    log: ShardLog,
    address: RedisAddress,
    max_entries: u64,
    /// The last position committed (every entry up to it is in the index).
    applied: watch::Sender<LogPosition>,
    /// The answers of the newest entries applied, oldest first.
    answers: Mutex<VecDeque<(LogPosition, EntryAnswer)>>,
}

impl Replica {
    /// Replica `name` of `shard`, on the log in the store at `store`, resuming after
    /// `committed` (its index's last commit's [`log_position`]; `None`: a new index, from the
    /// log's start). Refused when the log was trimmed past `committed` (the replica stayed
    /// away for more than `max_entries` entries: rebuild it from a copy of a sibling), or
    /// ends before it (the store lost entries, or the index is another store's).
    ///
    /// [`log_position`]: crate::engine::DedupIndex::log_position
    pub async fn connect(
        store: &RedisAddress,
        shard: ShardSpec,
        name: &str,
        committed: Option<&str>,
        max_entries: u64,
    ) -> Result<Self> {
        check_name(name)?;
        let committed = match committed {
            Some(position) => position.parse().map_err(|error| {
                Error::Config(format!(
                    "the index's last commit records no log position: {error}"
                ))
            })?,
            None => LogPosition::START,
        };
        let log = ShardLog::connect(store, shard.index).await?;
        let bounds = log.bounds().await?;
        if committed < bounds.trimmed_through {
            return Err(Error::Config(format!(
                "replica {name:?} of shard {shard} has applied its log up to {committed}, but the \
                 log was trimmed through {}: it stayed away longer than the log keeps entries \
                 ([server] log_max_entries = {max_entries}). Rebuild it from a copy of a \
                 sibling's index (docs/scaling.md, \"Replicas\")",
                bounds.trimmed_through
            )));
        }
        if committed > bounds.last {
            return Err(Error::Config(format!(
                "replica {name:?} of shard {shard} has applied its log up to {committed}, but the \
                 log in the store ends at {}: the store lost entries (a Redis master lost \
                 without its append-only file?) or this index was built on another store",
                bounds.last
            )));
        }
        log.record(name, committed, max_entries).await?;
        Ok(Replica {
            name: name.to_owned(),
            shard,
            log,
            address: store.clone(),
            max_entries,
            applied: watch::Sender::new(committed),
            answers: Mutex::new(VecDeque::new()),
        })
    }

    /// The last position this replica has committed.
    pub fn applied(&self) -> LogPosition {
        *self.applied.borrow()
    }

    /// Whether this replica reaches `position` within `wait`.
    async fn reaches(&self, position: LogPosition, wait: Duration) -> bool {
        let mut applied = self.applied.subscribe();
        let reached = applied.wait_for(|applied| *applied >= position);
        matches!(tokio::time::timeout(wait, reached).await, Ok(Ok(_)))
    }

    fn answer(&self, position: LogPosition) -> Option<EntryAnswer> {
        let answers = self.answers.lock().ok()?;
        let found = answers.binary_search_by_key(&position, |(kept, _)| *kept);
        found.ok().map(|at| answers[at].1.clone())
    }

    fn keep(&self, position: LogPosition, answer: EntryAnswer) {
        if let Ok(mut answers) = self.answers.lock() {
            if answers.len() == KEPT_ANSWERS {
                answers.pop_front();
            }
            answers.push_back((position, answer));
        }
    }

    /// Applies the log from the last position committed, for as long as the server runs: a
    /// failure (the store, the writer) is logged and applying starts again from there.
    pub(crate) async fn follow(self: Arc<Self>, state: Arc<AppState>) {
        // One task: stopping the server stops both.
        tokio::join!(self.apply_log(&state), self.record_positions(&state));
    }

    async fn apply_log(&self, state: &Arc<AppState>) {
        let mut reader = loop {
            match self.log.reader(&self.address).await {
                Ok(reader) => break reader,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the shard's log; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        loop {
            let from = self.applied();
            let entries = match reader.read_after(from, READ_BATCH).await {
                Ok(entries) if entries.is_empty() => continue,
                Ok(entries) => entries,
                Err(error) => {
                    tracing::warn!(%error, "reading the shard's log failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(error) = self.apply(state, entries).await {
                tracing::warn!(
                    error = %error.message,
                    after = %self.applied(),
                    "applying the shard's log failed; applying again from the last commit"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }

    /// Records in the store (which trims the log) and in the metrics each position committed,
    /// off the path of applying: the newest one each time the previous record is done.
    async fn record_positions(&self, state: &AppState) {
        let mut applied = self.applied.subscribe();
        let shard = self.shard.to_string();
        loop {
            let position = *applied.borrow_and_update();
            state.metrics.set_replica(ReplicaFigures {
                shard: &shard,
                name: &self.name,
                applied_millis: position.millis(),
                behind_ms: None,
                healthy: None,
            });
            if let Err(error) = self
                .log
                .record(&self.name, position, self.max_entries)
                .await
            {
                tracing::warn!(%error, "recording the replica's position failed");
            }
            if applied.changed().await.is_err() {
                return;
            }
        }
    }

    /// Queues `entries` for the writer in order (each followed by its position), then waits
    /// for their commits and keeps their answers.
    async fn apply(
        &self,
        state: &Arc<AppState>,
        entries: Vec<(LogPosition, LogEntry)>,
    ) -> AppResult<()> {
        let mut queued = Vec::with_capacity(entries.len());
        for (position, entry) in entries {
            queued.push((position, queue_entry(state, entry, position).await?));
        }
        for (position, work) in queued {
            let answer = match work.answer(state).await {
                Ok(answer) => answer,
                Err(error) if error.status.is_server_error() => return Err(error),
                Err(refusal) => refusal.into_response(),
            };
            let (parts, body) = answer.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX)
                .await
                .map_err(ApiError::internal)?;
            self.keep(
                position,
                EntryAnswer {
                    status: parts.status,
                    body,
                },
            );
            self.applied.send_replace(position);
        }
        Ok(())
    }
}

/// A replica's name: what the log records its position under.
fn check_name(name: &str) -> Result<()> {
    let fits = |character: char| character.is_ascii_alphanumeric() || "._-".contains(character);
    if name.is_empty() || name.len() > 64 || !name.chars().all(fits) {
        return Err(Error::Config(format!(
            "--replica {name:?}: a replica's name is 1 to 64 letters, digits, '.', '_' or '-', \
             different for each replica of a shard (e.g. a, b or the host's name)"
        )));
    }
    Ok(())
}

/// One line of a `documents` entry: a document as its client sent it with where the
/// coordinator placed it, or the id of a document that moved to another shard's story.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    placed: Option<Placed>,
    #[serde(borrow)]
    document: Option<&'a RawValue>,
    delete: Option<String>,
}

/// An entry's work queued for the writer; its last change carries the entry's position, so
/// that the commit that holds the entry records it.
enum Queued {
    /// Its documents, then the deletes of the ids that moved away; the record of its
    /// position on its own when it changes nothing (every document refused by this shard).
    Documents {
        batch: crate::server::api::QueuedBatch,
        moved: Vec<Pending<bool>>,
        recorded: Option<Pending<()>>,
    },
    Delete {
        id: String,
        deleted: Pending<bool>,
    },
    /// An entry that is not one of ours: the record of its position, and its refusal.
    Refused {
        recorded: Pending<()>,
        refusal: ApiError,
    },
}

impl Queued {
    /// The entry's answer once committed (as a shard's POST or DELETE gives it).
    async fn answer(self, state: &AppState) -> AppResult<Response> {
        match self {
            Queued::Documents {
                batch,
                moved,
                recorded,
            } => {
                let written = batch.written().await?;
                for delete in moved {
                    delete.committed().await?;
                }
                if let Some(recorded) = recorded {
                    recorded.committed().await?;
                }
                answer_batch(state, written).await
            }
            Queued::Delete { id, deleted } => match deleted.committed().await? {
                true => Ok(Json(DeleteResponse { id, deleted: true }).into_response()),
                false => Err(no_document(&id)),
            },
            Queued::Refused { recorded, refusal } => {
                recorded.committed().await?;
                Err(refusal)
            }
        }
    }
}

/// Queues the documents and deletes of the entry at `position` for the writer.
async fn queue_entry(
    state: &Arc<AppState>,
    entry: LogEntry,
    position: LogPosition,
) -> AppResult<Queued> {
    let position = position.to_string();
    let lines = match entry {
        LogEntry::Delete(id) => {
            let deleted = state.writer.queue_delete(id.clone(), Some(position))?;
            return Ok(Queued::Delete { id, deleted });
        }
        LogEntry::Documents(lines) => lines,
    };
    let room = lines.len() * MEMORY_PER_BODY_BYTE;
    let reservation = loop {
        match state.writer.reserve(room) {
            Ok(reservation) => break reservation,
            // The writer is busy with what was queued before: wait for room, in order.
            Err(WriteError::QueueFull { .. }) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(error) => return Err(error.into()),
        }
    };
    let prepare_state = state.clone();
    let parsed = blocking(move || {
        let mut documents = Vec::new();
        let mut moved = Vec::new();
        for (number, line) in lines.split(|byte| *byte == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let invalid = |why: String| {
                ApiError::bad_request(
                    "invalid_log_entry",
                    format!(
                        "line {} of a log entry: neither a placed document nor a delete: {why}",
                        number + 1
                    ),
                )
            };
            let line: Line = match serde_json::from_slice(line) {
                Ok(line) => line,
                Err(error) => return Ok(Err(invalid(error.to_string()))),
            };
            match line {
                Line {
                    placed: Some(placed),
                    document: Some(document),
                    delete: None,
                } => documents.push((document.get().as_bytes(), Some(placed))),
                Line {
                    placed: None,
                    document: None,
                    delete: Some(id),
                } => moved.push(id),
                _ => {
                    return Ok(Err(invalid(
                        "expected {\"placed\", \"document\"} or {\"delete\"}".into(),
                    )));
                }
            }
        }
        Ok(Ok((
            prepare_batch(&prepare_state, documents.into_iter()),
            moved,
        )))
    })
    .await?;
    let (batch, moved) = match parsed {
        Ok(parsed) => parsed,
        Err(refusal) => {
            let recorded = state.writer.queue_log_position(position)?;
            return Ok(Queued::Refused { recorded, refusal });
        }
    };
    // The entry's position goes with its last change, or alone when it changes nothing.
    let changes_nothing = batch.is_empty() && moved.is_empty();
    let batch_position = (moved.is_empty() && !batch.is_empty()).then(|| position.clone());
    let batch = batch.queue(state, reservation, batch_position)?;
    let last = moved.len().saturating_sub(1);
    let moved = moved
        .into_iter()
        .enumerate()
        .map(|(index, id)| {
            let position = (index == last).then(|| position.clone());
            state.writer.queue_delete(id, position)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let recorded = changes_nothing
        .then(|| state.writer.queue_log_position(position))
        .transpose()?;
    Ok(Queued::Documents {
        batch,
        moved,
        recorded,
    })
}

/// What a replica's routes share: the server's state and the replica.
#[derive(Clone)]
pub(crate) struct ReplicaState {
    pub(crate) app: Arc<AppState>,
    pub(crate) replica: Arc<Replica>,
}

/// A replica's own routes, with their documentation (served beside the server's).
pub(crate) fn routes() -> OpenApiRouter<ReplicaState> {
    use utoipa_axum::routes;
    OpenApiRouter::new()
        .routes(routes!(entry_answer))
        .routes(routes!(replica_status))
        .routes(routes!(copy::copy_index))
}

/// The answer to log entry `position` of this replica's shard, once applied: what the
/// shard's `POST /v1/documents` (or `DELETE`) answers for it. The coordinator asks every
/// replica of the shard and takes the first answer.
#[utoipa::path(
    get,
    path = "/internal/v1/log/{position}",
    tag = "shards",
    params(("position" = String, Path, description = "The entry's position, as the log gave it")),
    responses(
        (status = 200, description = "The entry's answer, as the shard's POST /v1/documents \
            or DELETE /v1/documents/{id} gives it", body = Object),
        (status = 410, description = "Applied before this replica last started: its answer \
            is not kept", body = ErrorBody),
        (status = 503, description = "Not applied within a minute", body = ErrorBody),
    ),
)]
pub(crate) async fn entry_answer(
    State(state): State<ReplicaState>,
    Path(position): Path<String>,
) -> AppResult<Response> {
    let replica = &state.replica;
    let position: LogPosition = position.parse().map_err(|error: BadPosition| {
        ApiError::bad_request("invalid_position", error.to_string())
    })?;
    if !replica.reaches(position, ENTRY_WAIT).await {
        return Err(behind(replica, position));
    }
    let answer = replica.answer(position).ok_or_else(|| {
        ApiError::new(
            StatusCode::GONE,
            "answer_gone",
            format!(
                "entry {position} was applied before this replica last started (or is older \
                 than its {KEPT_ANSWERS} newest): its answer is not kept"
            ),
        )
    })?;
    let mut response = (answer.status, answer.body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn behind(replica: &Replica, position: LogPosition) -> ApiError {
    ApiError::unavailable(
        "replica_behind",
        format!(
            "replica {:?} of shard {} has applied its log up to {}, not yet {position}",
            replica.name,
            replica.shard,
            replica.applied()
        ),
        1,
    )
}

impl ReplicaView for Replica {
    fn status(&self) -> ReplicaStatus {
        ReplicaStatus {
            name: Some(self.name.clone()),
            shard: self.shard.to_string(),
            applied: self.applied().to_string(),
            url: None,
            healthy: None,
            behind_ms: None,
            user_dictionary: crate::text::user_dictionary_digest(),
        }
    }
}

/// This replica's name, shard and position.
#[utoipa::path(
    get,
    path = "/internal/v1/replica",
    tag = "shards",
    responses(
        (status = 200, description = "The replica's state", body = ReplicaStatus),
    ),
)]
pub(crate) async fn replica_status(State(state): State<ReplicaState>) -> Json<ReplicaStatus> {
    Json(state.replica.status())
}

/// Before any route of a replica: a request with [`LOG_AFTER_HEADER`] is answered once the
/// replica has committed that position, or 503 `replica_behind` after [`BEHIND_WAIT`].
pub(crate) async fn at_position(
    State(replica): State<Arc<Replica>>,
    request: Request,
    next: Next,
) -> Response {
    let wanted = request
        .headers()
        .get(LOG_AFTER_HEADER)
        .map(|value| {
            value
                .to_str()
                .ok()
                .and_then(|text| text.parse::<LogPosition>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_position",
                        format!("{LOG_AFTER_HEADER} is not a log position"),
                    )
                })
        })
        .transpose();
    match wanted {
        Err(refusal) => refusal.into_response(),
        Ok(Some(position)) if !replica.reaches(position, BEHIND_WAIT).await => {
            behind(&replica, position).into_response()
        }
        Ok(_) => next.run(request).await,
    }
}
