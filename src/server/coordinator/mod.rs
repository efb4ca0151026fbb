//! The coordinator of an index split into shards by story (`serve --coordinator`): the whole
//! public API and the web page over shard servers (`serve --shard I/N`), holding no index of
//! its own, so several may run.
//!
//! - A write is placed in the shared forest here, in the order received (one batch at a time,
//!   as one writer would decide), then sent to the shard that owns each document's root
//!   ([`ShardSpec::owner`](crate::engine::ShardSpec::owner)) and answered once that shard has
//!   committed it; the id directory (`directory.rs`) makes a re-send `unchanged` through any
//!   coordinator and tells where a replaced document's old copy is.
//! - A list page asks every shard for its part ([`ShardPage`](crate::engine::ShardPage)),
//!   scored by the sums of their statistics, and merges them
//!   ([`merge_pages`](crate::engine::merge_pages)): exact, since a story is whole on one
//!   shard. A story, a document and its detail page are asked of the one shard that holds
//!   them; a near-duplicate check of every shard.
//! - A shard down or slow: a list page answers 503 `shard_unavailable` naming it (or, with
//!   `allow_partial=true`, the other shards' stories, flagged); the other answers are never
//!   partial.

mod chrome;
mod cluster;
mod directory;
mod read;
mod shards;
mod turn;
mod write;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::Method;
use axum::routing::{get, post};

use crate::config::{Config, ServerConfig};
use crate::dedup::Signer;
use crate::engine::ShardSpec;
use crate::forest::redis::{RedisAddress, RedisStore};
use crate::forest::{ForestStore, Pipeline};
use crate::server::metrics::{Metrics, ReplicaFigures};
use crate::server::{api, connections, finish_router, web};
use crate::{Error, Result};

use crate::server::api::ReplicaStatus;
use crate::server::replica::{LogPosition, ShardLog};
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::server::error::ApiError;
use chrome::SharedChrome;
use directory::IdDirectory;
use shards::Shards;
use shards::{CLIENT_POSITIONS, ClientPositions, READ_AFTER_HEADER, WRITE_POSITIONS_HEADER};
use turn::WriteTurn;

/// How long a read waits for a shard by default (`--shard-timeout`).
pub const DEFAULT_SHARD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write waits for a shard's commit.
const WRITE_TIMEOUT: Duration = Duration::from_secs(120);

/// How many writes a coordinator keeps appended to the shards' logs and not yet answered: a
/// replica keeps the answers of its newest 256 entries, which leaves room for 8 coordinators.
const UNANSWERED: usize = 32;

/// What the coordinator's handlers share.
pub(crate) struct CoordinatorState {
    config: Config,
    server: ServerConfig,
    shards: Shards,
    /// Each shard's log, shard 0 first: a write is appended there and applied by the shard's
    /// replicas.
    logs: Vec<ShardLog>,
    directory: IdDirectory,
    /// The shared forest, through `server.inserts_in_flight` connections of this process
    /// sharing one link to each node: placing is one batch at a time, several of its
    /// documents in flight.
    placer: Arc<Mutex<Pipeline>>,
    signer: Signer,
    /// What the store's coordinators learned of each source's chrome (`None`: the settings
    /// do not learn it).
    chrome: Option<SharedChrome>,
    /// Held while a write is placed, recorded in the directory and appended to the shards'
    /// logs, so that batches are placed in the order received and every replica applies them
    /// in that order; not while the shards commit. Then the same for every coordinator of the
    /// store: [`WriteTurn`].
    writing: tokio::sync::Mutex<()>,
    /// Set once the coordinator stops serving: a write that has not begun its turn is refused.
    stopping: std::sync::atomic::AtomicBool,
    turn: WriteTurn,
    /// Places among the writes appended and not yet answered ([`UNANSWERED`]).
    unanswered: Arc<tokio::sync::Semaphore>,
    metrics: Arc<Metrics>,
    read_timeout: Duration,
    started: Instant,
}

/// A running coordinator; [`serve`](Self::serve) runs it.
///
/// ```no_run
/// use tantivy_dedup::config::{Config, ServerConfig};
/// use tantivy_dedup::forest::redis::RedisAddress;
/// use tantivy_dedup::server::coordinator::Coordinator;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisAddress::parse("redis://127.0.0.1:7000")?;
/// let shards = ["http://127.0.0.1:7701".to_owned(), "http://127.0.0.1:7702".to_owned()];
/// let coordinator =
///     Coordinator::start(Config::default(), ServerConfig::default(), &shards, &store).await?;
/// let listener = tantivy_dedup::server::listen(&["127.0.0.1:7700".parse()?]).await?;
/// coordinator.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(())
/// # }
/// ```
pub struct Coordinator {
    state: Arc<CoordinatorState>,
}

impl Coordinator {
    /// Connects to the store (checking the `[dedup]` settings and the shard count against
    /// what it records) for the shards at `shard_urls`, shard 0 first. The shards' internal
    /// routes are called with `server.keys`' write key.
    pub async fn start(
        config: Config,
        server: ServerConfig,
        shard_urls: &[String],
        store: &RedisAddress,
    ) -> Result<Self> {
        Self::start_with_timeout(config, server, shard_urls, store, DEFAULT_SHARD_TIMEOUT).await
    }

    /// [`start`](Self::start), a read waiting at most `read_timeout` for each shard.
    pub async fn start_with_timeout(
        config: Config,
        server: ServerConfig,
        shard_urls: &[String],
        store: &RedisAddress,
        read_timeout: Duration,
    ) -> Result<Self> {
        config.validate()?;
        server.validate()?;
        // The coordinator fingerprints: with the settings' user dictionary, before any text
        // is split (the store records its hash, and refuses writers with another).
        if let Some(user_dict) = &config.index.user_dict {
            crate::text::use_user_dictionary(user_dict)?;
        }
        let shards = Shards::new(shard_urls, server.keys.write.as_ref())?;
        check_order(&shards).await?;
        let directory = IdDirectory::connect(store).await?;
        directory.check_shard_count(shards.count()).await?;
        let logs = ShardLog::connect_all(store, shards.count()).await?;
        let turn = WriteTurn::connect(store).await?;
        let signer = Signer::new(&config.dedup);
        let chrome = if signer.learns_chrome() {
            Some(SharedChrome::connect(store).await?)
        } else {
            None
        };
        let dedup = config.dedup.clone();
        let address = store.clone();
        let connections = server.inserts_in_flight;
        let placer = tokio::task::spawn_blocking(move || {
            let stores = RedisStore::connect_several(&address, &dedup, connections)?
                .into_iter()
                .map(|store| Box::new(store) as Box<dyn ForestStore + Send>)
                .collect();
            Ok::<_, Error>(Pipeline::new(stores)?)
        })
        .await
        .map_err(|error| Error::Server(format!("connecting to the store: {error}")))??;
        let state = Arc::new(CoordinatorState {
            signer,
            config,
            server,
            shards,
            logs,
            directory,
            placer: Arc::new(Mutex::new(placer)),
            chrome,
            writing: tokio::sync::Mutex::new(()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            turn,
            unanswered: Arc::new(tokio::sync::Semaphore::new(UNANSWERED)),
            metrics: Arc::new(Metrics::new()),
            read_timeout,
            started: Instant::now(),
        });
        tokio::spawn(watch_health(Arc::downgrade(&state)));
        Ok(Coordinator { state })
    }

    /// The public API's routes over the shards, served as one server serves them.
    fn router(&self, bound: std::net::SocketAddr) -> Result<Router> {
        let state = self.state.clone();
        let routes = Router::new()
            .route("/v1/documents", post(write::post_documents))
            .route(
                "/v1/documents/{id}",
                get(read::held_document).delete(write::delete_document),
            )
            .route("/v1/documents/{id}/similar", get(read::held_document))
            .route("/v1/search", get(read::search))
            .route("/v1/trending", get(read::trending))
            .route("/v1/stories/{root}", get(read::get_story))
            .route("/v1/near-duplicates", post(read::near_duplicates))
            .route("/v1/stats", get(read::stats))
            .route("/healthz", get(read::healthz))
            .route("/metrics", get(read::metrics))
            .route("/openapi.json", get(api::openapi_json))
            .route("/", get(web::list_page))
            .route("/story/{root}", get(web::story_page))
            .route("/check", get(web::check_page))
            .route("/assets/{file}", get(web::asset));
        let routes = routes.route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            client_positions,
        ));
        let metrics = state.metrics.clone();
        finish_router(routes, state.clone(), metrics, &state.server, bound)
    }

    /// Serves on `listener` until `shutdown` completes, then lets requests in flight finish
    /// (for at most `server.shutdown_grace`) and the write in its turn finish its turn (for
    /// at most the turn's lease, whatever the grace: stopped in the middle, it would keep the
    /// other coordinators waiting until the lease ends).
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let bound = listener
            .local_addr()
            .map_err(|error| Error::Server(format!("reading the bound address: {error}")))?;
        self.state.server.check_exposure(bound)?;
        let router = self.router(bound)?;
        let metrics = self.state.metrics.clone();
        connections::serve(listener, router, &self.state.server, metrics, shutdown).await;
        write::finish_turns(&self.state).await;
        Ok(())
    }
}

/// Around every request: the positions the client's read must see (its `x-read-after`), for
/// the shards' reads; on every answer, the positions of the writes this coordinator has
/// answered (`x-write-positions`), for the client to send back.
async fn client_positions(
    State(state): State<Arc<CoordinatorState>>,
    request: Request,
    next: Next,
) -> Response {
    let asked = request
        .headers()
        .get(READ_AFTER_HEADER)
        .map(|value| {
            let text = value.to_str().unwrap_or("(not text)");
            ClientPositions::parse(text, state.shards.count())
        })
        .transpose();
    let positions = match asked {
        Ok(positions) => positions.unwrap_or_default(),
        Err(why) => return ApiError::bad_request("invalid_position", why).into_response(),
    };
    let mut response = CLIENT_POSITIONS.scope(positions, next.run(request)).await;
    if let Ok(value) = HeaderValue::from_str(&state.shards.write_positions()) {
        response.headers_mut().insert(WRITE_POSITIONS_HEADER, value);
    }
    response
}

/// How often the coordinator asks every replica how far it has applied its log.
const HEALTH_INTERVAL: Duration = Duration::from_millis(500);

/// Checks the replicas' health every [`HEALTH_INTERVAL`] for as long as the coordinator runs.
async fn watch_health(state: std::sync::Weak<CoordinatorState>) {
    loop {
        tokio::time::sleep(HEALTH_INTERVAL).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        state.shards.check_health().await;
        for replica in state.shards.statuses() {
            let applied = replica.applied.parse::<LogPosition>().unwrap_or_default();
            state.metrics.set_replica(ReplicaFigures {
                shard: &replica.shard,
                name: replica
                    .name
                    .as_deref()
                    .or(replica.url.as_deref())
                    .unwrap_or_default(),
                applied_millis: applied.millis(),
                behind_ms: replica.behind_ms,
                healthy: replica.healthy,
            });
        }
    }
}

/// Checks that each replica that answers is of the shard `--shards` lists it under: a list
/// out of order would send stories to shards that do not own them. A replica that does not
/// answer yet is only reported (it may start later).
async fn check_order(shards: &Shards) -> Result<()> {
    let count = shards.count();
    for index in 0..count {
        for replica in 0..shards.replica_count(index) {
            let asked = shards
                .call_replica(
                    (index, replica),
                    Method::GET,
                    "/internal/v1/replica",
                    None,
                    Duration::from_secs(2),
                    None,
                )
                .await;
            let answer = match asked {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::warn!(%error, "a replica did not answer at start; it is checked by its answers from now on");
                    continue;
                }
            };
            let status = serde_json::from_slice::<ReplicaStatus>(&answer.body).ok();
            let expected = ShardSpec { index, count }.to_string();
            let theirs = status
                .as_ref()
                .and_then(|status| status.user_dictionary.clone());
            let ours = crate::text::user_dictionary_digest();
            if status.is_some() && theirs != ours {
                let described = |digest: Option<String>| {
                    digest.map_or_else(
                        || "no user dictionary".to_owned(),
                        |digest| format!("the user dictionary {digest}"),
                    )
                };
                return Err(Error::Config(format!(
                    "{}, a replica of shard {expected}, splits text with {}, and this \
                     coordinator with {}: give every process the same settings (--config)",
                    shards.describe(index),
                    described(theirs),
                    described(ours)
                )));
            }
            let says = status.map(|status| status.shard);
            if says.as_deref() != Some(expected.as_str()) {
                return Err(Error::Config(format!(
                    "--shards lists {} as a replica of shard {expected}, but it says it is {}: \
                     list every shard in order, shard 0 first (its replicas joined by |), each \
                     started with --shard I/{count}",
                    shards.describe(index),
                    says.map_or_else(
                        || "no shard's replica".to_owned(),
                        |shard| format!("of shard {shard}")
                    )
                )));
            }
        }
    }
    Ok(())
}

/// Records, for a shard server, that the store's index is split into `count` shards, or
/// checks that it is (`serve --shard I/N`): a shard with another count is refused.
pub async fn check_shard_count(store: &RedisAddress, count: usize) -> Result<()> {
    IdDirectory::connect(store)
        .await?
        .check_shard_count(count)
        .await
}
