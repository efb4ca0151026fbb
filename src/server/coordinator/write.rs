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
use super::chrome::BatchChrome;
use super::directory::Entry;
use super::shards::{relay, shard_unavailable};
use crate::Fingerprint;
use crate::article::{ArticleReader, ArticleRecord};
use crate::chrome::{ChromeLines, PageLines};
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
use crate::server::replica::{LogEntry, LogPosition};
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
    /// Its page's lines, for its source's chrome to be taken out in the write turn.
    page: Option<PageLines>,
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
            .map(|(position, raw, record)| {
                let (signature, page) = signer.sign_page(
                    &signer.record_parts(&record),
                    record.article.source.as_deref(),
                );
                Signed {
                    position,
                    raw,
                    signature,
                    page,
                    digest: record.digest(),
                    record,
                }
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
        // The turns order placing, the directory and the shards' logs; waiting for the
        // shards' commits does not need them, so the next batch is placed meanwhile.
        let ((appended, moved), unanswered) = in_turns(&state, move |state| async move {
            write_in_turn(&state, signed).await
        })
        .await?;
        let outcomes = answers(&state, appended).await?;
        drop(unanswered);
        // Answered: every stale copy is gone (unless a later write changed the entry since).
        // An entry left with its stale shards costs only a delete there at its next write.
        if let Err(error) = state.directory.settle(moved).await {
            tracing::warn!(%error, "clearing moved documents' stale shards in the directory");
        }
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

/// Runs `work` in the write turns (this coordinator's, then the one all coordinators of the
/// store share), in a task of its own: a client that goes away does not cut short a write
/// that holds them. The shared turn's lease is renewed while `work` runs, and given back
/// however it ends (a panic too). Returns with `work`'s result a place among the writes not
/// yet answered ([`UNANSWERED`](super::UNANSWERED)), taken before the turns and held by the
/// task, so that writes whose clients went away count too until they are appended.
async fn in_turns<T, W, F>(
    state: &Arc<CoordinatorState>,
    work: W,
) -> AppResult<(T, tokio::sync::OwnedSemaphorePermit)>
where
    W: FnOnce(Arc<CoordinatorState>) -> F + Send + 'static,
    F: std::future::Future<Output = AppResult<T>> + Send + 'static,
    T: Send + 'static,
{
    use futures_util::FutureExt;
    let state = state.clone();
    tokio::spawn(async move {
        let unanswered = state
            .unanswered
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the coordinator's writes were closed"))?;
        let _local = state.writing.lock().await;
        if state.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "shutting_down",
                "this coordinator is stopping and did not place this write; send it to \
                 another coordinator, or again once this one is back",
                1,
            ));
        }
        let turn = match state.turn.acquire().await {
            Ok(Some(turn)) => turn,
            Ok(None) => return Err(turn_busy()),
            Err(error) => return Err(store_failed(&error)),
        };
        let work = std::panic::AssertUnwindSafe(work(state.clone())).catch_unwind();
        // Renewed beside the work, which goes on while a renewal waits for the store.
        let renewing = async {
            let mut renewals = tokio::time::interval(super::turn::RENEW_EVERY);
            renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            renewals.tick().await; // the first tick is at once
            loop {
                renewals.tick().await;
                state.turn.renew(&turn).await;
            }
        };
        let done = tokio::select! {
            done = work => done,
            never = renewing => never,
        };
        state.turn.release(turn).await;
        let done = done.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        Ok((done, unanswered))
    })
    .await
    .map_err(|error| ApiError::internal(format!("a write in its turn: {error}")))?
}

/// Once the coordinator stops serving: no write begins its turn any more, and the one in its
/// turn (its task outlives its request) is waited for, at most for the turn's lease.
pub(super) async fn finish_turns(state: &CoordinatorState) {
    state
        .stopping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The writes queued before this one find `stopping` set and give the lock straight back.
    if tokio::time::timeout(super::turn::LEASE, state.writing.lock())
        .await
        .is_err()
    {
        tracing::warn!(
            "a write was still in its turn {:?} after the coordinator stopped serving; its \
             lease ends on its own",
            super::turn::LEASE
        );
    }
}

fn turn_busy() -> ApiError {
    ApiError::unavailable(
        "write_turn_busy",
        "this write waited a minute for the write turn, which the store's coordinators take \
         in turn, and was not placed; retry it",
        1,
    )
}

/// The part of a write done in the turns: the batch's ids read in the directory, its
/// documents placed, their places recorded and appended to the shards' logs. Returns what was
/// appended and the entries of the ids that moved to another shard.
async fn write_in_turn(
    state: &Arc<CoordinatorState>,
    signed: Vec<Signed>,
) -> AppResult<(Vec<Appended>, Vec<(String, Entry)>)> {
    let ids: Vec<String> = signed
        .iter()
        .map(|doc| doc.record.article.id.clone())
        .collect();
    let sources = signed.iter().filter_map(|doc| doc.page.as_ref());
    let sources = sources.map(PageLines::source).collect();
    let chrome = async {
        match &state.chrome {
            Some(shared) => shared.load(sources).await.map(Some),
            None => Ok(None),
        }
    };
    let (known, chrome) = tokio::try_join!(state.directory.get(&ids), chrome)?;
    let mut plan = {
        let state = state.clone();
        blocking(move || place(&state, signed, known, chrome)).await?
    };
    // Recorded before the shards are sent anything: a retry after a failure below sends
    // the same places again (and deletes the stale copies then).
    let placed = plan.entries.iter();
    let placed = placed.map(|(id, entry)| (id.clone(), Some(entry.clone())));
    state.directory.set(placed.collect()).await?;
    if let (Some(shared), Some(chrome)) = (&state.chrome, plan.chrome.take()) {
        // Placed and recorded: a failure here must not have the write sent again (it would
        // be placed twice). Its pages are then missing from what the next writes read.
        if let Err(error) = shared.save(&chrome).await {
            tracing::warn!(%error, "saving what a write taught of its sources' chrome");
        }
    }
    let moved: Vec<(String, Entry)> = plan
        .entries
        .into_iter()
        .filter(|(_, entry)| !entry.stale.is_empty())
        .collect();
    let appended = append(state, plan.lines).await?;
    Ok((appended, moved))
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
    /// The chrome of its sources, with what its pages taught, to be saved.
    chrome: Option<BatchChrome>,
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
    mut chrome: Option<BatchChrome>,
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
    // Per insert, the lines taken out of its page, which its shard takes out too.
    let mut stripped = Vec::new();
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
        let mut signature = std::mem::replace(&mut document.signature, Fingerprint(0).into());
        let mut lines = ChromeLines::default();
        if let (Some(page), Some(batch)) = (document.page.take(), &mut chrome) {
            let position = batch.first + inserts.len() as u64;
            lines = batch.chrome.strip_lines(&page, position);
            let source = page.source_name().to_owned();
            let stripped = page.without(lines);
            if let Some(without) = state
                .signer
                .without_chrome(&signature, stripped, Some(&source))
            {
                signature = without;
            }
        }
        inserts.push((signature.for_document(id), time));
        stripped.push(lines);
    }
    // Failed, nothing is saved of what the batch's pages taught: sent again, they teach then.
    let placements = placer
        .place_all(&inserts)
        .map_err(|error| store_failed(&error.into()))?;
    if let Some(batch) = &mut chrome {
        batch.placed = inserts.len() as u64;
    }
    let mut placements = placements
        .into_iter()
        .zip(inserts.iter().map(|(_, time)| *time))
        .zip(stripped);
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
                let ((placement, time), chrome) = placements
                    .next()
                    .ok_or_else(|| ApiError::internal("a document of the batch was not placed"))?;
                Placed::new(&placement, time).with_chrome(chrome)
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
            via: placed.via,
            reason: placed.reason,
            chrome: placed.chrome,
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
    Ok(Plan {
        lines,
        entries,
        chrome,
    })
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

/// A shard's lines of a batch, appended to its log.
struct Appended {
    shard: usize,
    /// The batch positions of the documents among its lines, in order.
    positions: Vec<usize>,
    /// Where the lines stand in the shard's log.
    position: LogPosition,
}

/// Appends each shard's lines to its log, all at once: from then on every replica applies
/// them in that order, whatever is written after.
async fn append(state: &Arc<CoordinatorState>, lines: ShardLines) -> AppResult<Vec<Appended>> {
    let appends = lines.into_iter().map(|(shard, documents)| {
        let (positions, lines): (Vec<Option<usize>>, Vec<Vec<u8>>) = documents.into_iter().unzip();
        let positions: Vec<usize> = positions.into_iter().flatten().collect();
        let entry = LogEntry::Documents(Bytes::from(lines.join(&b'\n')));
        async move {
            let position = state.logs[shard]
                .append(&entry)
                .await
                .map_err(|error| store_failed(&error))?;
            Ok::<_, ApiError>(Appended {
                shard,
                positions,
                position,
            })
        }
    });
    // Every append finished before the turn passes on, failed or not: one still on its way
    // could land behind the next write's lines.
    futures_util::future::join_all(appends)
        .await
        .into_iter()
        .collect()
}

/// Each document's outcome by batch position, once a replica of each shard has applied the
/// lines appended for it.
async fn answers(
    state: &Arc<CoordinatorState>,
    appended: Vec<Appended>,
) -> AppResult<Vec<(usize, Value)>> {
    let calls = appended.into_iter().map(|appended| async move {
        let answer = state
            .shards
            .applied(appended.shard, appended.position, super::WRITE_TIMEOUT)
            .await
            .map_err(|error| shard_unavailable(&error));
        (appended, answer)
    });
    let mut outcomes = Vec::new();
    let mut failure = None;
    for (appended, answer) in futures_util::future::join_all(calls).await {
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                failure.get_or_insert(error);
                continue;
            }
        };
        let shard = appended.shard;
        let positions = appended.positions;
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
    // In the turns, as a write: the deletes appended to the logs (every replica applies them
    // after what was written before), the document taken off the forest and the directory;
    // then its shard's answer.
    let (appended, _unanswered) = in_turns(&state, move |state| async move {
        delete_in_turn(&state, id).await
    })
    .await?;
    // Answered once no shard holds it: every shard's answer awaited, the holder's relayed.
    let shards = &state.shards;
    let waits = appended.into_iter().map(|(shard, position)| async move {
        shards
            .applied(shard, position, super::WRITE_TIMEOUT)
            .await
            .map_err(|error| shard_unavailable(&error))
    });
    let mut answers = futures_util::future::try_join_all(waits).await?;
    let answer = answers
        .pop()
        .ok_or_else(|| ApiError::internal("a delete was appended to no log"))?;
    Ok(relay(answer))
}

/// The part of a delete done in the turns: the delete appended to the log of the shard that
/// holds `id` (and of any shard that may hold a stale copy), then `id` taken off the forest
/// and the directory. Returns each shard and where the delete stands in its log, the holder
/// last.
async fn delete_in_turn(
    state: &Arc<CoordinatorState>,
    id: String,
) -> AppResult<Vec<(usize, LogPosition)>> {
    let entry = state.directory.get(std::slice::from_ref(&id)).await?;
    let Some(entry) = entry.into_iter().next().flatten() else {
        return Err(no_document(&id));
    };
    let shard = entry.shard(state.shards.count());
    // A copy an unanswered move left behind goes too (it is not there: nothing to do).
    let deletes = entry.stale.iter().chain([&shard]).map(|&shard| {
        let entry = LogEntry::Delete(id.clone());
        async move {
            let position = state.logs[shard]
                .append(&entry)
                .await
                .map_err(|error| store_failed(&error))?;
            Ok::<_, ApiError>((shard, position))
        }
    });
    let appended = futures_util::future::join_all(deletes)
        .await
        .into_iter()
        .collect::<AppResult<Vec<_>>>()?;
    // The directory first: a retry after a failure between the two then finds no document,
    // where the other order would take the count off its node twice.
    state.directory.set(vec![(id, None)]).await?;
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
    Ok(appended)
}
