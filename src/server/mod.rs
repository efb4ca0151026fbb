//! The HTTP service (`tantivy-dedup serve`): the API of a news platform's backend over a
//! [`DedupIndex`], built on tokio and axum.
//!
//! - Writes (`POST /v1/documents`, `DELETE /v1/documents/{id}`) go through one ordered
//!   writer thread and a bounded queue; a write is answered only after the commit
//!   that makes it durable and searchable, and commits are grouped.
//! - Reads (search, detail pages, near-duplicate checks, statistics) run on blocking threads
//!   over the last commit and never wait for the writer.
//! - Bodies are read by [`parse_batch`]: a bad document is refused alone.
//!
//! ```no_run
//! use tantivy_dedup::config::ServerConfig;
//! use tantivy_dedup::engine::DedupIndex;
//! use tantivy_dedup::server::Server;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let index = DedupIndex::open_or_create("news-index".as_ref(), None)?;
//! let server = Server::start(index, ServerConfig::default())?;
//! let listener = tantivy_dedup::server::listen(&["127.0.0.1:7700".parse()?]).await?;
//! server.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(())
//! # }
//! ```

mod access;
mod api;
mod body;
mod connections;
#[cfg(feature = "redis")]
pub mod coordinator;
mod error;
mod internal;
mod metrics;
mod openapi;
#[cfg(feature = "redis")]
pub mod replica;
mod web;
mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use access::{MAX_HEADER_BYTES, MAX_URI_BYTES};
pub use api::{
    ClusterInfo, DeleteResponse, DocumentResponse, DocumentResult, ForestSize, Health,
    HealthStatus, IngestResponse, MEMORY_PER_BODY_BYTE, NearDuplicatesRequest, ReplicaStatus,
    StatsResponse,
};
pub use body::{
    BatchLimits, BodyError, DocumentError, Refused, parse_batch, parse_batch_with, parse_document,
};
pub use connections::{connection_cap, listen};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use metrics::{Exposition, Metrics, ReplicaFigures};
pub use openapi::openapi;
pub use writer::WriteError;

use crate::config::ServerConfig;
use crate::engine::{DedupIndex, ShardSpec};
use crate::{Error, Result};

/// A running service: the writer thread and the shared state of the handlers, served by
/// [`Server::serve`] (which also stops the writer cleanly, so it is the one way to run it).
pub struct Server {
    state: Arc<api::AppState>,
    writer: writer::WriterThread,
    /// The shard's replica this server is, if it is one.
    #[cfg(feature = "redis")]
    replica: Option<Arc<replica::Replica>>,
}

impl Server {
    /// Starts the writer thread over `index` (which becomes the server's: all writes go
    /// through it from now on).
    pub fn start(index: DedupIndex, config: ServerConfig) -> Result<Self> {
        Self::start_with(index, config, None)
    }

    /// [`start`](Self::start) for `replica` of shard `shard` of an index split by story (an
    /// index opened with [`DedupIndex::open_or_create_shard`]): the public writes are
    /// refused; the shard's log, applied in order, brings its documents, and the
    /// coordinator's internal routes (`/internal/v1/…`, write key) answer its list pages'
    /// parts and its writes' outcomes.
    #[cfg(feature = "redis")]
    pub fn start_replica(
        index: DedupIndex,
        config: ServerConfig,
        shard: ShardSpec,
        replica: replica::Replica,
    ) -> Result<Self> {
        let mut server = Self::start_with(index, config, Some(shard))?;
        let replica = Arc::new(replica);
        if let Some(state) = Arc::get_mut(&mut server.state) {
            state.replica = Some(replica.clone());
        }
        server.replica = Some(replica);
        Ok(server)
    }

    fn start_with(
        index: DedupIndex,
        config: ServerConfig,
        shard: Option<ShardSpec>,
    ) -> Result<Self> {
        config.validate()?;
        let metrics = Arc::new(Metrics::new());
        metrics.set_forest(index.forest_stats());
        let searcher = index.searcher();
        let preparer = index.preparer();
        let recovery = index.recovery().clone();
        metrics.set_checkpoint_inserts(recovery.checkpoint_sequence.unwrap_or(0));
        let time_zone = index.config().index.time_zone;
        let path = index.path().to_owned();
        let (handle, writer) = writer::start(
            index,
            config.commit_delay,
            config.queue_mib << 20,
            metrics.clone(),
        )
        .map_err(|source| Error::Io { path, source })?;
        let state = Arc::new(api::AppState {
            searcher,
            preparer,
            writer: handle,
            metrics,
            config,
            time_zone,
            recovery,
            started: Instant::now(),
            readers: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, |cores| cores.get()),
            ),
            shard,
            replica: None,
            damaged: std::sync::atomic::AtomicBool::new(false),
        });
        Ok(Server {
            state,
            writer,
            #[cfg(feature = "redis")]
            replica: None,
        })
    }

    /// The API's routes ([`routes()`]), behind the access checks of a server bound to `bound`.
    fn router(&self, bound: std::net::SocketAddr) -> Result<Router> {
        let state = self.state.clone();
        let (routes, _document) = routes().split_for_parts();
        let routes = routes.with_state(state.clone());
        // A replica's own routes beside; it answers any request once it has applied what the
        // request must see.
        #[cfg(feature = "redis")]
        let routes = match &self.replica {
            Some(replica) => {
                let (own, _document) = replica::routes().split_for_parts();
                let own = own.with_state(replica::ReplicaState {
                    app: state.clone(),
                    replica: replica.clone(),
                });
                routes
                    .merge(own)
                    .route_layer(axum::middleware::from_fn_with_state(
                        replica.clone(),
                        replica::at_position,
                    ))
            }
            None => routes,
        };
        let metrics = state.metrics.clone();
        let config = state.config.clone();
        finish_router(routes, (), metrics, &config, bound)
    }

    /// Serves the API on `listener` until `shutdown` completes, then lets requests in flight
    /// finish (for at most `server.shutdown_grace`), commits what is queued and closes the
    /// index.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let bound = listener
            .local_addr()
            .map_err(|error| Error::Server(format!("reading the bound address: {error}")))?;
        self.state.config.check_exposure(bound)?;
        let router = self.router(bound)?;
        let writer = self.state.writer.clone();
        let stopping = async move {
            shutdown.await;
            // Requests in flight wait for their commit; it should come now, not after the
            // commit delay.
            writer.drain();
        };
        let metrics = self.state.metrics.clone();
        #[cfg(feature = "redis")]
        let follower = self
            .replica
            .clone()
            .map(|replica| tokio::spawn(replica.follow(self.state.clone())));
        connections::serve(listener, router, &self.state.config, metrics, stopping).await;
        // What it queued is committed below; the rest is applied again at the next start.
        #[cfg(feature = "redis")]
        if let Some(follower) = follower {
            follower.abort();
        }
        tracing::info!("stopping: committing what is queued");
        let writer = self.writer;
        let closed = tokio::task::spawn_blocking(move || writer.shutdown())
            .await
            .unwrap_or_else(|_| Err("the index writer panicked".to_owned()));
        closed.map_err(|message| Error::Server(format!("closing the index: {message}")))
    }
}

/// `routes` served as every server of the API serves them, whatever answers the routes: each
/// request observed in `metrics` and the log, JSON answers to unknown routes and methods, the
/// access checks of a server bound to `bound`, CORS, and a line break after every JSON answer.
pub(crate) fn finish_router<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    state: S,
    metrics: Arc<Metrics>,
    config: &ServerConfig,
    bound: std::net::SocketAddr,
) -> Result<Router> {
    let access = Arc::new(access::Access::new(config, bound));
    let router = routes
        .route_layer(axum::middleware::from_fn_with_state(metrics, api::observe))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::wrong_method)
        .with_state(state)
        // Layers run outermost last: CORS answers preflights before the access checks.
        // Gzip bodies are decoded by the handlers as they read them (`api::read_body`).
        .layer(axum::middleware::from_fn_with_state(access, access::check));
    let router = match cors(&config.cors_origins)? {
        Some(cors) => router.layer(cors),
        None => router,
    };
    // So that every JSON answer gets it, the access checks' refusals too.
    let router = router.layer(axum::middleware::map_response(api::end_json_with_newline));
    // Outermost, over the finished answer: gzip when the client accepts it (a 14-year list
    // page's histogram is a few hundred kilobytes of JSON, a tenth of that in gzip); answers
    // under 32 bytes stay as they are.
    Ok(router.layer(tower_http::compression::CompressionLayer::new()))
}

/// Every route the service serves, with its documentation: the router is built from this list
/// and from nothing else, and the OpenAPI document ([`openapi()`]) from the same list, so no
/// route is served undocumented nor documented unserved.
///
/// A route is its handler, annotated with `#[utoipa::path(method, path = "...", params(...),
/// request_body = ..., responses(...))]` (the method and path it is served at come from
/// there), and one line here; handlers of one path share a line (`routes!` refuses
/// handlers of different paths). Who may call it follows [`access::key_needed`].
fn routes() -> OpenApiRouter<Arc<api::AppState>> {
    OpenApiRouter::with_openapi(openapi::Description::openapi())
        .routes(routes!(api::post_documents))
        .routes(routes!(api::get_document, api::delete_document))
        .routes(routes!(api::get_similar))
        .routes(routes!(api::search))
        .routes(routes!(api::trending))
        .routes(routes!(api::get_story))
        .routes(routes!(api::near_duplicates))
        .routes(routes!(api::stats))
        .routes(routes!(api::healthz))
        .routes(routes!(api::metrics))
        .routes(routes!(api::openapi_json))
        .routes(routes!(internal::shard_page))
        .routes(routes!(internal::term_statistics))
        .routes(routes!(web::list_page))
        .routes(routes!(web::story_page))
        .routes(routes!(web::check_page))
        .routes(routes!(web::asset))
}

/// A duration as logged: milliseconds to the microsecond, the precision it is measured to
/// (`ms=1.272`, not `ms=1.2720000000000001`).
pub(crate) fn log_ms(elapsed: std::time::Duration) -> f64 {
    (elapsed.as_secs_f64() * 1e6).round() / 1e3
}

/// The CORS layer of `server.cors_origins`, if any are named.
fn cors(origins: &[String]) -> Result<Option<tower_http::cors::CorsLayer>> {
    use axum::http::{HeaderValue, Method, header};
    if origins.is_empty() {
        return Ok(None);
    }
    let origins = origins
        .iter()
        .map(|origin| {
            HeaderValue::from_str(origin.trim_end_matches('/')).map_err(|_| {
                Error::Config(format!("server.cors_origins: {origin:?} is not an origin"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(
        tower_http::cors::CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::CONTENT_ENCODING,
            ]),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn logged_milliseconds_have_no_float_noise() {
        // 1.272 ms as seconds times 1e3 is 1.2720000000000002.
        assert_eq!(
            super::log_ms(Duration::from_nanos(1_272_000)).to_string(),
            "1.272"
        );
        assert_eq!(
            super::log_ms(Duration::from_nanos(1_272_499)).to_string(),
            "1.272"
        );
        assert_eq!(super::log_ms(Duration::from_secs(3)).to_string(), "3000");
    }
}
