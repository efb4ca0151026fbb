//! A shard's internal routes for reads, which its coordinator calls (`serve --shard I/N`; the
//! write key when keys are set): a list page's part with what an exact merge needs
//! ([`ShardPage`]), scored by statistics of every shard. (Its writes come from its log:
//! `replica.rs`.)

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::engine::{
    DedupSearcher, HistogramWidth, Interval, SearchRequest, ShardPage, TermStatistics,
};
use crate::server::api::{AppResult, AppState, SearchParams};
use crate::server::error::{ApiError, ErrorBody};

/// A list page's part: the query string of `/v1/search`, and the statistics to score by.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ShardSearch {
    /// The list page's query string, as `/v1/search` reads it.
    query: String,
    /// The sums of every shard's statistics for the query (absent: this shard's own).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    statistics: Option<TermStatistics>,
    /// The histogram's bucket width, seconds, in place of the query's own (the coordinator
    /// sizes an `auto` histogram to every shard's span at once).
    #[serde(default)]
    histogram_seconds: Option<u64>,
    /// The end of the trend window, Unix seconds, in place of the query's own: the
    /// coordinator reads it once (the time of the request, or `trend_end` in its time zone)
    /// for every shard.
    #[serde(default)]
    trend_end: Option<i64>,
    /// The walk's cursor, in place of the query's own: the coordinator's, with every shard's
    /// snapshot, of which this shard reads its own.
    #[serde(default)]
    cursor: Option<String>,
}

/// This shard's part of a list page: its first `offset + limit` stories with their figures,
/// every facet value's counts and the histogram's buckets that have documents.
#[utoipa::path(
    post,
    path = "/internal/v1/search",
    tag = "shards",
    request_body = ShardSearch,
    responses(
        (status = 200, description = "The shard's part", body = Object),
        (status = 400, description = "As `/v1/search`", body = ErrorBody),
    ),
)]
pub(crate) async fn shard_page(
    State(state): State<Arc<AppState>>,
    Json(search): Json<ShardSearch>,
) -> AppResult<Json<ShardPage>> {
    read_on_shard(&state, search, |searcher, request, statistics| {
        searcher.shard_page(request, statistics)
    })
    .await
}

/// What BM25 reads of this shard for a list page's query ([`TermStatistics`]).
#[utoipa::path(
    post,
    path = "/internal/v1/statistics",
    tag = "shards",
    request_body = ShardSearch,
    responses(
        (status = 200, description = "The shard's statistics", body = Object),
        (status = 400, description = "As `/v1/search`", body = ErrorBody),
    ),
)]
pub(crate) async fn term_statistics(
    State(state): State<Arc<AppState>>,
    Json(search): Json<ShardSearch>,
) -> AppResult<Json<TermStatistics>> {
    read_on_shard(&state, search, |searcher, request, _| {
        searcher.term_statistics(request)
    })
    .await
}

/// Runs `read` over the list page `search` asks for, on a reading thread of this shard.
async fn read_on_shard<T: Send + 'static>(
    state: &AppState,
    search: ShardSearch,
    read: impl FnOnce(&DedupSearcher, &SearchRequest, Option<&TermStatistics>) -> crate::Result<T>
    + Send
    + 'static,
) -> AppResult<Json<T>> {
    not_a_shard(state)?;
    let mut request = SearchParams::parse(Some(&search.query))?
        .request(state.time_zone)?
        .deadline(state.read_deadline());
    if let Some(interval) = search.histogram_seconds.and_then(Interval::from_seconds) {
        request = request.histogram(HistogramWidth::Fixed(interval));
    }
    if let Some(end) = search.trend_end {
        // The coordinator's reading of the window's end, the same for every shard.
        request.trend_end = Some(end);
    }
    if let Some(cursor) = &search.cursor {
        request.cursor = Some(cursor.parse()?);
    }
    if let (Some(spec), Some(cursor)) = (state.shard, request.cursor.as_mut()) {
        *cursor = cursor.for_shard(spec)?;
    }
    let searcher = state.searcher.clone();
    state
        .read(move || Ok(read(&searcher, &request, search.statistics.as_ref())?))
        .await
        .map(Json)
}

fn not_a_shard(state: &AppState) -> AppResult<()> {
    match state.shard {
        Some(_) => Ok(()),
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_a_shard",
            "this server is a whole index, not a shard (serve --shard I/N): it has no \
             coordinator's routes",
        )),
    }
}
