//! A coordinator's writes: each document placed in the shared forest, sent to the shard that
//! owns its root, answered once committed there; the id directory kept in step.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::CoordinatorState;
use super::directory::Entry;
use super::shards::{Answer, relay, shard_unavailable};
use crate::Fingerprint;
use crate::article::{ArticleReader, ArticleRecord};
use crate::dedup::now;
use crate::engine::{Placed, ShardSpec};
use crate::forest::Signature;
use crate::input::split_documents;
use crate::server::api::{
    AppResult, BodyLimit, DocumentId, batch_limits, blocking, body_error, failed_result,
    no_document, path_id, read_body,
};
use crate::server::body::parse_document_with;
use crate::server::error::{ApiError, ErrorDetail};
use crate::server::replica::LogEntry;
use crate::server::{DocumentResult, access};

/// The answer to a POST of documents, as a single server gives it: the shards' outcomes in
/// the order posted.
#[derive(Serialize)]
struct IngestAnswer {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
    indexed: usize,
    unchanged: usize,
    failed: usize,
    results: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// A document of the batch, read and signed.
struct Signed {
    position: usize,
    raw: Bytes,
    record: ArticleRecord,
    signature: Signature,
    digest: u64,
}

/// What each shard is sent: per document its position in the batch and its line; then the
/// ids whose documents moved to another shard's story (`None` for the position).
type ShardLines = BTreeMap<usize, Vec<(Option<usize>, Vec<u8>)>>;

pub(super) async fn post_documents(
    State(state): State<Arc<CoordinatorState>>,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    let limit = state.server.max_body_mib << 20;
    let body = read_body(
        body,
        access::gzip_body(&headers),
        &state.server,
        BodyLimit {
            bytes: limit,
            setting: "server.max_body_mib",
            code: "body_too_large",
            reservation: None,
        },
    )
    .await?;
    // Read and sign in parallel before taking the write turn.
    let sign_state = state.clone();
    let (signed, refused, warnings) = blocking(move || {
        let documents =
            split_documents(&body, sign_state.server.max_batch_documents).map_err(body_error)?;
        let limits = batch_limits(&sign_state.server);
        let articles = ArticleReader::for_config(&sign_state.config);
        let mut coverage = crate::input::TimeCoverage::default();
        let mut signed = Vec::new();
        let mut failed = Vec::new();
        for (position, raw) in documents.into_iter().enumerate() {
            match parse_document_with(raw, &limits, &articles) {
                Ok(record) => {
                    coverage.count(record.article.published_at);
                    signed.push((position, body.slice_ref(raw), record));
                }
                Err(refused) => failed.push(failed_result(position, refused)),
            }
        }
        use rayon::prelude::*;
        let signer = &sign_state.signer;
        let signed: Vec<Signed> = signed
            .into_par_iter()
            .map(|(position, raw, record)| Signed {
                position,
                raw,
                signature: signer.sign_record(&record),
                digest: record.digest(),
                record,
            })
            .collect();
        let warnings: Vec<String> = coverage.warning(articles.time_key()).into_iter().collect();
        Ok((signed, failed, warnings))
    })
    .await?;
    let accepted = signed.len();
    // With every document refused, the answer's error is the first one's, as a single
    // server gives it.
    let error = match refused.first() {
        Some(DocumentResult::Failed { status, error, .. }) if accepted == 0 => Some((
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            ErrorDetail {
                code: error.code,
                message: format!("no document was indexed; the first: {}", error.message),
            },
        )),
        _ => None,
    };
    let mut results = Vec::with_capacity(refused.len() + accepted);
    for result in &refused {
        if let DocumentResult::Failed { index, .. } = result {
            results.push((*index, to_value(result)?));
        }
    }
    if accepted > 0 {
        let _turn = state.writing.lock().await;
        let ids: Vec<String> = signed
            .iter()
            .map(|doc| doc.record.article.id.clone())
            .collect();
        let known = state.directory.get(&ids).await?;
        let plan = {
            let state = state.clone();
            blocking(move || place(&state, signed, known)).await?
        };
        // Recorded before the shards are sent anything: a retry after a failure below sends
        // the same places again (and deletes the stale copies then).
        let placed = plan.entries.iter();
        let placed = placed.map(|(id, entry)| (id.clone(), Some(entry.clone())));
        state.directory.set(placed.collect()).await?;
        let settled: Vec<(String, Option<Entry>)> = plan
            .entries
            .iter()
            .filter(|(_, entry)| !entry.stale.is_empty())
            .map(|(id, entry)| {
                let stale = Vec::new();
                (
                    id.clone(),
                    Some(Entry {
                        stale,
                        ..entry.clone()
                    }),
                )
            })
            .collect();
        let outcomes = send(&state, plan.lines).await?;
        // Answered: every stale copy is gone.
        state.directory.set(settled).await?;
        results.extend(outcomes);
    }
    results.sort_unstable_by_key(|(position, _)| *position);
    let results: Vec<Value> = results.into_iter().map(|(_, result)| result).collect();
    let unchanged = results
        .iter()
        .filter(|result| result.get("unchanged") == Some(&Value::Bool(true)))
        .count();
    let indexed = results
        .iter()
        .filter(|result| result.get("root").is_some())
        .count();
    let failed = results.len() - indexed;
    let (status, error) = match error {
        Some((status, error)) => (status, Some(error)),
        None => (StatusCode::OK, None),
    };
    let answer = IngestAnswer {
        error,
        indexed: indexed - unchanged,
        unchanged,
        failed,
        results,
        warnings,
    };
    Ok((status, Json(answer)).into_response())
}

fn to_value(result: &DocumentResult) -> AppResult<Value> {
    serde_json::to_value(result).map_err(ApiError::internal)
}

/// Where the documents of a batch go.
struct Plan {
    /// Per shard, its lines: the documents it is sent, then the deletes of the copies that
    /// moved away from it.
    lines: ShardLines,
    /// Per id, its entry once the batch is placed.
    entries: HashMap<String, Entry>,
}

/// Places the batch's documents in order, as one writer would (several in flight at once,
/// [`Pipeline`](crate::forest::Pipeline)): a re-send of what an id holds is only sent to its
/// shard (which answers `unchanged`); a replacement takes the old version's count off its
/// node, and a copy left on another shard is deleted there in the same request, after that
/// shard's documents, so that an id is never live twice once answered and each shard's
/// cluster sizes count the move.
fn place(
    state: &CoordinatorState,
    mut signed: Vec<Signed>,
    known: Vec<Option<Entry>>,
) -> AppResult<Plan> {
    let count = state.shards.count();
    let mut placer = state
        .placer
        .lock()
        .map_err(|_| ApiError::internal("the forest's connection was poisoned by a panic"))?;
    // First which documents are placed, and at what time: a document without `published_at`
    // takes the newest time placed before it, as one writer's clock would give it.
    let mut digests: HashMap<String, u64> = known
        .iter()
        .zip(&signed)
        .filter_map(|(entry, document)| {
            Some((document.record.article.id.clone(), entry.as_ref()?.digest))
        })
        .collect();
    let mut newest = placer.newest_time();
    let mut inserts = Vec::new();
    for document in &mut signed {
        let id = document.record.article.id.as_str();
        if digests.insert(id.to_owned(), document.digest) == Some(document.digest) {
            continue; // unchanged
        }
        let time = document
            .record
            .article
            .published_at
            .unwrap_or_else(|| newest.unwrap_or_else(now));
        newest = Some(newest.map_or(time, |newest| newest.max(time)));
        // Taken: the second pass needs the placement, not the signature.
        let signature = std::mem::replace(&mut document.signature, Fingerprint(0).into());
        inserts.push((signature.for_document(id), time));
    }
    let mut placements = placer
        .place_all(&inserts)
        .map_err(|error| store_failed(&error.into()))?
        .into_iter()
        .zip(inserts.iter().map(|(_, time)| *time));
    let mut lines = ShardLines::new();
    let mut entries: HashMap<String, Entry> = HashMap::new();
    // Per id, the shards that held or were sent a version of it.
    let mut copies: HashMap<String, BTreeSet<usize>> = HashMap::new();
    for (document, known) in signed.into_iter().zip(known) {
        let id = document.record.article.id.clone();
        let previous = entries.get(&id).cloned().or(known);
        let held = copies.entry(id.clone()).or_default();
        held.extend(
            previous
                .iter()
                .flat_map(|entry| entry.stale.iter().copied()),
        );
        let placed = match &previous {
            Some(entry) if entry.digest == document.digest => entry.placed(),
            _ => {
                if let Some(entry) = &previous {
                    // After the placements: a node's document count decides nothing.
                    placer
                        .remove_document(entry.node)
                        .map_err(|error| store_failed(&error.into()))?;
                    held.insert(entry.shard(count));
                }
                let (placement, time) = placements
                    .next()
                    .ok_or_else(|| ApiError::internal("a document of the batch was not placed"))?;
                Placed::new(&placement, time)
            }
        };
        let shard = ShardSpec::owner(placed.root, count);
        held.insert(shard);
        let entry = Entry {
            node: placed.node,
            root: placed.root,
            duplicate: placed.duplicate,
            digest: document.digest,
            time: placed.time,
            stale: held.iter().copied().filter(|&held| held != shard).collect(),
        };
        entries.insert(id, entry);
        let mut line = serde_json::to_vec(&serde_json::json!({ "placed": placed }))
            .map_err(ApiError::internal)?;
        // `{"placed":{…}}` becomes `{"placed":{…},"document":<as sent>}`.
        line.pop();
        line.extend_from_slice(b",\"document\":");
        line.extend_from_slice(&document.raw);
        line.push(b'}');
        lines
            .entry(shard)
            .or_default()
            .push((Some(document.position), line));
    }
    for (id, entry) in &entries {
        for &shard in &entry.stale {
            let line = serde_json::json!({ "delete": id }).to_string().into_bytes();
            lines.entry(shard).or_default().push((None, line));
        }
    }
    Ok(Plan { lines, entries })
}

fn store_failed(error: &crate::Error) -> ApiError {
    tracing::warn!(%error, "the shared forest's store failed");
    ApiError::unavailable(
        "store_unavailable",
        format!(
            "the shared forest's store failed, so the request was not completed; retry it: {error}"
        ),
        1,
    )
}

/// Appends each shard's lines to its log, all at once, and returns each document's outcome
/// by position once a replica of each shard has applied them.
async fn send(state: &Arc<CoordinatorState>, lines: ShardLines) -> AppResult<Vec<(usize, Value)>> {
    let mut calls = tokio::task::JoinSet::new();
    for (shard, documents) in lines {
        let (positions, lines): (Vec<Option<usize>>, Vec<Vec<u8>>) = documents.into_iter().unzip();
        let positions: Vec<usize> = positions.into_iter().flatten().collect();
        let entry = LogEntry::Documents(Bytes::from(lines.join(&b'\n')));
        let state = state.clone();
        calls.spawn(async move {
            let answer = write_to_shard(&state, shard, &entry).await;
            (shard, positions, answer)
        });
    }
    let mut outcomes = Vec::new();
    let mut failure = None;
    while let Some(call) = calls.join_next().await {
        let (shard, positions, answer) =
            call.map_err(|error| ApiError::internal(format!("sending to a shard: {error}")))?;
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                failure.get_or_insert(error);
                continue;
            }
        };
        let parsed: Value = serde_json::from_slice(&answer.body).map_err(|error| {
            ApiError::internal(format!("shard {shard} answered no JSON: {error}"))
        })?;
        let results = parsed
            .get("results")
            .and_then(Value::as_array)
            .filter(|results| results.len() == positions.len());
        let Some(results) = results else {
            // The shard refused the request as a whole (e.g. its own limits).
            return Err(relayed(answer.status, &parsed));
        };
        for (position, mut result) in positions.into_iter().zip(results.iter().cloned()) {
            if let Some(index) = result.get_mut("index") {
                *index = Value::from(position);
            }
            outcomes.push((position, result));
        }
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(outcomes),
    }
}

/// Appends `entry` to shard `shard`'s log; its answer once a replica has applied it.
async fn write_to_shard(
    state: &CoordinatorState,
    shard: usize,
    entry: &LogEntry,
) -> AppResult<Answer> {
    let position = state.logs[shard]
        .append(entry)
        .await
        .map_err(|error| store_failed(&error))?;
    state
        .shards
        .applied(shard, position, super::WRITE_TIMEOUT)
        .await
        .map_err(|error| shard_unavailable(&error))
}

/// A shard's refusal, answered as it came.
fn relayed(status: StatusCode, body: &Value) -> ApiError {
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no reason given");
    ApiError::new(
        status,
        "shard_refused",
        format!("a shard refused the documents sent to it: {message}"),
    )
}

pub(super) async fn delete_document(
    State(state): State<Arc<CoordinatorState>>,
    path: Result<Path<DocumentId>, PathRejection>,
) -> AppResult<Response> {
    let id = path_id(path)?;
    let _turn = state.writing.lock().await;
    let entry = state.directory.get(std::slice::from_ref(&id)).await?;
    let Some(entry) = entry.into_iter().next().flatten() else {
        return Err(no_document(&id));
    };
    let shard = entry.shard(state.shards.count());
    // A copy an unanswered move left behind goes too (it is not there: 404, which is fine).
    for &stale in &entry.stale {
        write_to_shard(&state, stale, &LogEntry::Delete(id.clone())).await?;
    }
    let answer = write_to_shard(&state, shard, &LogEntry::Delete(id.clone())).await?;
    if answer.status.is_success() || answer.status == StatusCode::NOT_FOUND {
        let placer = state.placer.clone();
        blocking(move || {
            let mut placer = placer
                .lock()
                .map_err(|_| ApiError::internal("the forest's connection was poisoned"))?;
            placer
                .remove_document(entry.node)
                .map_err(|error| store_failed(&error.into()))
        })
        .await?;
        state.directory.set(vec![(id, None)]).await?;
    }
    Ok(relay(answer))
}
