//! A coordinator's reads: list pages merged from every shard's part, a story, a document and
//! its detail page from the shard that holds them, near-duplicate checks from every shard.

use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CoordinatorState;
use super::shards::{Answer, CLIENT_POSITIONS, Call, Unavailable, relay, shard_unavailable};
use crate::Fingerprint;
use crate::engine::{
    Cursor, HistogramWidth, IndexStats, MAX_WALK_SHARDS, NearDuplicates, SearchPage, ShardPage,
    ShardSpec, TermStatistics, merge_near_duplicates, merge_pages, next_cursor,
};
use crate::server::api::{
    AppResult, DocumentId, NEAR_DUPLICATES_LIMIT, SearchParams, metrics_answer, no_document,
    path_id, read_document_body, trending_as_search, unhealthy,
};
use crate::server::error::ApiError;
use crate::server::{ForestSize, Health, HealthStatus, StatsResponse};

/// Calls every shard at once; their answers in shard order.
async fn fan_out(
    state: &Arc<CoordinatorState>,
    method: Method,
    path: &str,
    body: Option<(Bytes, &'static str)>,
) -> Vec<Result<Answer, Unavailable>> {
    fan_out_to(state, &[], method, path, body)
        .await
        .into_iter()
        .map(|answer| answer.map(|(_, answer)| answer))
        .collect()
}

/// Calls every shard at once, shard `i` on replica `replicas[i]` when given (else any, as
/// [`Shards::read`](super::shards::Shards::read) picks); their answers in shard order, each
/// with the replica that gave it.
async fn fan_out_to(
    state: &Arc<CoordinatorState>,
    replicas: &[u32],
    method: Method,
    path: &str,
    body: Option<(Bytes, &'static str)>,
) -> Vec<Result<(usize, Answer), Unavailable>> {
    let mut calls = tokio::task::JoinSet::new();
    // The client's positions go with each call's task.
    let positions = CLIENT_POSITIONS.try_with(Clone::clone).unwrap_or_default();
    for shard in 0..state.shards.count() {
        let state = state.clone();
        let method = method.clone();
        let path = path.to_owned();
        let body = body.clone();
        let replica = replicas.get(shard).map(|&replica| replica as usize);
        calls.spawn(CLIENT_POSITIONS.scope(positions.clone(), async move {
            let call = Call {
                method,
                path_and_query: &path,
                body,
                timeout: state.read_timeout,
            };
            let answer = state.shards.read_from(shard, replica, call).await;
            (shard, answer)
        }));
    }
    let mut answers: Vec<Option<Result<(usize, Answer), Unavailable>>> =
        (0..state.shards.count()).map(|_| None).collect();
    while let Some(call) = calls.join_next().await {
        if let Ok((shard, answer)) = call {
            answers[shard] = Some(answer);
        }
    }
    answers
        .into_iter()
        .enumerate()
        .map(|(shard, answer)| {
            answer.unwrap_or_else(|| {
                Err(Unavailable {
                    shard,
                    url: state.shards.describe(shard),
                    reason: "was not asked (a task failed)".to_owned(),
                })
            })
        })
        .collect()
}

/// Which shards answered a list page that is partial.
#[derive(Debug, Serialize, Deserialize)]
struct ShardsAnswered {
    total: usize,
    answered: usize,
    /// The numbers of those that did not (shard 0 first).
    missing: Vec<usize>,
}

/// A merged list page: a single server's answer, flagged when a shard is missing from it.
#[derive(Serialize)]
struct MergedPage {
    #[serde(flatten)]
    page: SearchPage,
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shards: Option<ShardsAnswered>,
}

/// The list page's query, the statistics to score by and the histogram's width, as a shard
/// reads them.
#[derive(Serialize)]
struct ShardSearch<'a> {
    query: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    statistics: Option<&'a TermStatistics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    histogram_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trend_end: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
}

pub(super) async fn search(
    State(state): State<Arc<CoordinatorState>>,
    RawQuery(query): RawQuery,
) -> AppResult<Response> {
    list_page(&state, query.unwrap_or_default()).await
}

/// Trending stories: the list page `GET /v1/trending` stands for
/// ([`trending_as_search`]).
pub(super) async fn trending(
    State(state): State<Arc<CoordinatorState>>,
    RawQuery(query): RawQuery,
) -> AppResult<Response> {
    let zone = state.config.index.time_zone;
    list_page(&state, trending_as_search(query.as_deref(), zone)?).await
}

/// The list page of the `/v1/search` query string `query`.
async fn list_page(state: &Arc<CoordinatorState>, query: String) -> AppResult<Response> {
    let params = SearchParams::parse(Some(&query))?;
    let allow_partial = params.allow_partial()?;
    let zone = state.config.index.time_zone;
    // Every shard counts the same trend window.
    let mut request = params.request(zone)?.fix_trend_end(crate::dedup::now());
    let count = state.shards.count();
    // A walk reads each shard's snapshot where it was pinned: on one replica.
    let mut walk_replicas: Vec<u32> = Vec::new();
    if let Some(cursor) = &request.cursor {
        if count > MAX_WALK_SHARDS {
            return Err(ApiError::bad_request(
                "invalid_parameter",
                format!(
                    "a cursor walks at most {MAX_WALK_SHARDS} shards (its text grows with each), \
                     and this index has {count}: page with offset"
                ),
            ));
        }
        walk_replicas = cursor.replicas().to_vec();
        let known = |(shard, &replica): (usize, &u32)| {
            (replica as usize) < state.shards.replica_count(shard)
        };
        if cursor.is_pinned()
            && (cursor.snapshots().len() != count
                || walk_replicas.len() != count
                || !walk_replicas.iter().enumerate().all(known))
        {
            return Err(ApiError::bad_request(
                "invalid_query",
                "the cursor was made for other shards or replicas than this coordinator's: \
                 start again with cursor=*",
            ));
        }
    }
    if count == 1 && request.cursor.is_none() {
        // One shard holds every story: its own answer is the index's.
        let answer = state
            .shards
            .read(
                0,
                Method::GET,
                &format!("/v1/search?{query}"),
                None,
                state.read_timeout,
            )
            .await
            .map_err(|error| shard_unavailable(&error))?;
        return Ok(relay(answer));
    }
    let mut missing: Vec<Unavailable> = Vec::new();
    // Scores as one index would give them: every shard's statistics for the query, summed;
    // an `auto` histogram is sized to the span of all the shards' times, as one index's is.
    let scored = !request.query.trim().is_empty();
    let statistics = if scored || request.histogram == Some(HistogramWidth::Auto) {
        let body = json_body(&ShardSearch {
            query: &query,
            statistics: None,
            histogram_seconds: None,
            trend_end: None,
            cursor: None,
        })?;
        let mut sum = TermStatistics::default();
        let mut pinned = Vec::new();
        let path = "/internal/v1/statistics";
        for answer in fan_out_to(state, &walk_replicas, Method::POST, path, Some(body)).await {
            match answer {
                Ok((replica, answer)) => {
                    let statistics = parse_answer::<TermStatistics>(answer)?;
                    pinned.push((replica, statistics.snapshot));
                    sum.add(&statistics);
                }
                Err(error) => missing.push(error),
            }
        }
        // A walk's first page: its scores are read of the snapshots the statistics were, which
        // every shard pinned for the walk.
        if missing.is_empty()
            && request
                .cursor
                .as_ref()
                .is_some_and(|cursor| !cursor.is_pinned())
        {
            let (replicas, snapshots) = walk_snapshots(pinned)?;
            let first = Cursor::first_page(request.list_digest(), snapshots, request.trend_end)
                .on_replicas(replicas.clone());
            request.cursor = Some(first);
            walk_replicas = replicas;
        }
        if request.cursor.is_some() && !missing.is_empty() {
            // A walk is never partial: no page is read of the other shards.
            return Err(shard_unavailable(&missing[0]));
        }
        request = request.fix_histogram(sum.published, zone);
        Some(sum)
    } else {
        None
    };
    let shape = request.shape();
    let body = json_body(&ShardSearch {
        query: &query,
        statistics: statistics.as_ref().filter(|_| scored),
        histogram_seconds: shape.histogram.map(|interval| interval.seconds()),
        trend_end: request.trend_end,
        cursor: request.cursor.as_ref().map(ToString::to_string),
    })?;
    let mut pages = Vec::new();
    let mut pinned = Vec::new();
    let path = "/internal/v1/search";
    for answer in fan_out_to(state, &walk_replicas, Method::POST, path, Some(body)).await {
        match answer {
            Ok((replica, answer)) => {
                let page = parse_answer::<ShardPage>(answer)?;
                pinned.push((replica, page.snapshot));
                pages.push(page);
            }
            Err(error) if !missing.iter().any(|known| known.shard == error.shard) => {
                missing.push(error)
            }
            Err(_) => {}
        }
    }
    let shards = if missing.is_empty() {
        None
    } else if allow_partial && request.cursor.is_none() {
        missing.sort_by_key(|error| error.shard);
        for error in &missing {
            tracing::warn!(%error, "a partial list page: shard missing");
        }
        Some(ShardsAnswered {
            total: state.shards.count(),
            answered: state.shards.count() - missing.len(),
            missing: missing.iter().map(|error| error.shard).collect(),
        })
    } else {
        return Err(shard_unavailable(&missing[0]));
    };
    let following = pages.iter().map(|page| page.following).sum();
    let mut page = merge_pages(pages, shape)?;
    if request.cursor.is_some() {
        // A walk goes on over every shard's snapshot (in shard order: a walk is never
        // partial), each on the replica that pinned it.
        let (replicas, snapshots) = walk_snapshots(pinned)?;
        page.next_cursor = next_cursor(&request, snapshots, following, &page)
            .map(|next| next.on_replicas(replicas).to_string());
    }
    Ok(Json(MergedPage {
        page,
        partial: shards.as_ref().map(|_| true),
        shards,
    })
    .into_response())
}

/// The replicas and snapshots of a walk, one per shard in shard order, from what every shard
/// answered (the replica that answered, the snapshot it pinned).
fn walk_snapshots(pinned: Vec<(usize, Option<u64>)>) -> AppResult<(Vec<u32>, Vec<u64>)> {
    pinned
        .into_iter()
        .map(|(replica, snapshot)| {
            let snapshot = snapshot.ok_or_else(|| {
                ApiError::internal(
                    "a shard answered a cursor walk without its snapshot (a server of an \
                     older version?)",
                )
            })?;
            Ok((replica as u32, snapshot))
        })
        .collect::<AppResult<Vec<_>>>()
        .map(|pairs| pairs.into_iter().unzip())
}

fn json_body(value: &impl Serialize) -> AppResult<(Bytes, &'static str)> {
    let bytes = serde_json::to_vec(value).map_err(ApiError::internal)?;
    Ok((Bytes::from(bytes), "application/json"))
}

/// A shard's answer read as `T`; a refusal (4xx) is passed on as the shard gave it.
fn parse_answer<T: for<'de> Deserialize<'de>>(answer: Answer) -> AppResult<T> {
    if !answer.status.is_success() {
        return Err(refusal(answer));
    }
    serde_json::from_slice(&answer.body)
        .map_err(|error| ApiError::internal(format!("a shard's answer could not be read: {error}")))
}

/// A shard's refusal of a request (a 4xx): the same refusal, its code and message kept.
fn refusal(answer: Answer) -> ApiError {
    #[derive(Deserialize)]
    struct Refusal {
        error: Detail,
    }
    #[derive(Deserialize)]
    struct Detail {
        code: String,
        message: String,
    }
    match serde_json::from_slice::<Refusal>(&answer.body) {
        Ok(refusal) => ApiError::new(
            answer.status,
            static_code(&refusal.error.code),
            refusal.error.message,
        ),
        Err(_) => ApiError::new(
            answer.status,
            "shard_refused",
            "a shard refused the request",
        ),
    }
}

/// The codes a shard refuses a read with, as the API's own `&'static str`s.
fn static_code(code: &str) -> &'static str {
    const CODES: [&str; 7] = [
        "invalid_parameter",
        crate::server::error::CURSOR_EXPIRED,
        "invalid_query",
        "invalid_body",
        "document_too_large",
        "not_found",
        "invalid_field",
    ];
    CODES
        .into_iter()
        .find(|known| *known == code)
        .unwrap_or("shard_refused")
}

/// Passes a read to the shard that holds what it reads.
async fn forward(state: &CoordinatorState, shard: usize, uri: &Uri) -> AppResult<Response> {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |path| path.as_str().to_owned());
    let answer = state
        .shards
        .read(shard, Method::GET, &path, None, state.read_timeout)
        .await
        .map_err(|error| shard_unavailable(&error))?;
    Ok(relay(answer))
}

/// The shard that holds the live document `id`.
async fn holder(state: &CoordinatorState, id: &str) -> AppResult<usize> {
    let entry = state.directory.get(&[id.to_owned()]).await?;
    match entry.into_iter().next().flatten() {
        Some(entry) => Ok(entry.shard(state.shards.count())),
        None => Err(no_document(id)),
    }
}

/// A document or its detail page, from the shard that holds it.
pub(super) async fn held_document(
    State(state): State<Arc<CoordinatorState>>,
    path: Result<Path<DocumentId>, PathRejection>,
    uri: Uri,
) -> AppResult<Response> {
    let id = path_id(path)?;
    let shard = holder(&state, &id).await?;
    forward(&state, shard, &uri).await
}

pub(super) async fn get_story(
    State(state): State<Arc<CoordinatorState>>,
    Path(root): Path<String>,
    uri: Uri,
) -> AppResult<Response> {
    // A root that does not parse is refused by any shard as it would be by one index.
    let shard = root
        .parse::<Fingerprint>()
        .map_or(0, |root| ShardSpec::owner(root, state.shards.count()));
    forward(&state, shard, &uri).await
}

pub(super) async fn near_duplicates(
    State(state): State<Arc<CoordinatorState>>,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    let body = read_document_body(&state.server, &headers, body).await?;
    let limit = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|value| value.get("limit")?.as_u64())
        .map_or(NEAR_DUPLICATES_LIMIT, |limit| limit as usize);
    let mut answers = Vec::new();
    let asked = Some((body, "application/json"));
    for answer in fan_out(&state, Method::POST, "/v1/near-duplicates", asked).await {
        let answer = answer.map_err(|error| shard_unavailable(&error))?;
        answers.push(parse_answer::<NearDuplicates>(answer)?);
    }
    let simhash = answers
        .first()
        .map_or(Fingerprint(0), |answer| answer.simhash);
    Ok(Json(merge_near_duplicates(simhash, answers, limit)).into_response())
}

/// The index's figures: the sums of every shard's.
async fn index_stats(state: &Arc<CoordinatorState>) -> AppResult<IndexStats> {
    #[derive(Deserialize)]
    struct ShardStats {
        index: IndexStats,
    }
    let mut sum = IndexStats::default();
    for answer in fan_out(state, Method::GET, "/v1/stats", None).await {
        let answer = answer.map_err(|error| shard_unavailable(&error))?;
        let stats = parse_answer::<ShardStats>(answer)?.index;
        sum.documents += stats.documents;
        sum.clusters += stats.clusters;
        sum.tombstones += stats.tombstones;
        sum.segments += stats.segments;
        sum.disk_bytes += stats.disk_bytes;
    }
    Ok(sum)
}

pub(super) async fn stats(State(state): State<Arc<CoordinatorState>>) -> AppResult<Response> {
    let index = index_stats(&state).await?;
    let forest = {
        let placer = state.placer.clone();
        crate::server::api::blocking(move || {
            let placer = placer
                .lock()
                .map_err(|_| ApiError::internal("the forest's connection was poisoned"))?;
            Ok(placer.stats())
        })
        .await?
    };
    Ok(Json(StatsResponse {
        index,
        forest: ForestSize {
            nodes: forest.nodes as u64,
            roots: forest.roots as u64,
            expired: forest.expired,
            window_seconds: state.config.dedup.window_seconds(),
            store_round_trips: Some(forest.round_trips),
        },
        queue_documents: 0,
        queue_reserved_bytes: 0,
        recovery: Default::default(),
        uptime_seconds: state.started.elapsed().as_secs(),
        shard: None,
        replicas: state.shards.statuses(),
        time_zone: state.config.index.time_zone.to_string(),
    })
    .into_response())
}

pub(super) async fn healthz(State(state): State<Arc<CoordinatorState>>) -> Response {
    let down = fan_out(&state, Method::GET, "/healthz", None)
        .await
        .into_iter()
        .enumerate()
        .find_map(|(shard, answer)| match answer {
            Ok(answer) if answer.status == StatusCode::OK => None,
            Ok(answer) => Some(format!(
                "shard {shard} answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body).trim()
            )),
            Err(error) => Some(error.to_string()),
        });
    match down {
        None => Json(Health {
            status: HealthStatus::Ok,
            queue_documents: Some(0),
            error: None,
        })
        .into_response(),
        Some(why) => unhealthy(ApiError::unavailable("shard_unavailable", why, 1)),
    }
}

pub(super) async fn metrics(
    State(state): State<Arc<CoordinatorState>>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let index = index_stats(&state).await?;
    Ok(metrics_answer(&state.metrics, &index, &headers))
}
