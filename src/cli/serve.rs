//! `tantivy-dedup serve`: the HTTP service over an index directory.

use std::convert::Infallible;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tantivy_dedup::config::{AccessKeys, Config, ListenAddr, ServerConfig};
use tantivy_dedup::engine::{DedupIndex, ShardSpec, stored_settings};
use tantivy_dedup::local_time::TimeZone;
use tantivy_dedup::server::Server;
use tantivy_dedup::server::coordinator::{self, Coordinator};
use tantivy_dedup::server::replica::Replica;

use super::{ConfigArgs, StoreArgs};

#[derive(Args)]
pub struct ServeArgs {
    /// Index directory; created with the settings of --config (or the defaults) when it is
    /// missing or empty, reopened when it holds an index (its forest replayed from it, unless
    /// --store); other files without an index's meta.json are refused
    #[arg(long, value_name = "DIR", required_unless_present = "coordinator")]
    index: Option<PathBuf>,
    /// Serve one shard of an index split by story: shard I (from 0) of N. The shard holds the
    /// stories whose root hashes to it, takes documents only from its coordinator (placed
    /// there), and answers the coordinator's internal routes (write key). Needs --store,
    /// which records N the first time (docs/scaling.md, "Search across shards")
    #[arg(
        long,
        value_name = "I/N",
        requires = "store",
        conflicts_with = "coordinator"
    )]
    shard: Option<ShardSpec>,
    /// With --shard: this replica's name. A shard is held by one or more replicas, each with
    /// its own index and name, each applying the shard's log in the store; the coordinator
    /// lists a shard's replicas joined by | (docs/scaling.md, "Replicas")
    #[arg(long, value_name = "NAME", default_value = "main", requires = "shard")]
    replica: String,
    /// The most entries a shard's log keeps; a replica further behind must be rebuilt from a
    /// copy of a sibling [default: [server] log_max_entries of --config, else 100000]
    #[arg(long, value_name = "N", requires = "shard")]
    log_max_entries: Option<u64>,
    /// Serve the public API and the web page over shard servers (--shards) instead of an
    /// index: places each document in the shared forest (--store), sends it to its story's
    /// shard, merges the shards' answers exactly. Holds no index (several may run)
    #[arg(long, requires_all = ["shards", "store"], conflicts_with = "index")]
    coordinator: bool,
    /// The coordinator's shards, comma-separated, shard 0 first: their URLs, and for a shard
    /// with several replicas their URLs joined by | (quote it in a shell):
    /// "http://127.0.0.1:7701|http://127.0.0.1:7711,http://127.0.0.1:7702|http://127.0.0.1:7712"
    #[arg(
        long,
        value_name = "URLS",
        value_delimiter = ',',
        requires = "coordinator"
    )]
    shards: Vec<String>,
    /// How long the coordinator waits for a shard's part of a read before answering without
    /// it (503 shard_unavailable, or a partial page with allow_partial=true) [default: 5s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "coordinator")]
    shard_timeout: Option<Duration>,
    /// Address to listen on: HOST:PORT, where HOST is an IP address or a name
    /// (127.0.0.1:7700, localhost:7700, [::1]:7700, 0.0.0.0:7700 for every interface), or a
    /// bare PORT on 127.0.0.1; port 0 picks a free port [default: server.addr of --config,
    /// else 127.0.0.1:7700]
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_addr)]
    addr: Option<ListenAddr>,
    /// Not an option: the port is part of --addr. Kept, hidden, so that `--port 7701` is
    /// answered with the --addr to write instead of "unexpected argument".
    #[arg(long, hide = true, value_name = "PORT", value_parser = port_hint)]
    port: Option<Infallible>,
    /// The readers' time zone, an offset from UTC ("+08:00", "-05:00", "UTC"): dates and times
    /// without an offset in /v1/search's `from` and `to` are read in it, and log lines are
    /// dated in it [default: [index] time_zone of --config, else the index's, else +08:00]
    #[arg(long, value_name = "OFFSET")]
    time_zone: Option<TimeZone>,
    /// Group commit: the shortest time between two commits; documents arriving sooner wait
    /// for the rest of it and are committed together. A POST is answered after its commit
    /// ("100ms", "1s") [default: 100ms]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    commit_delay: Option<Duration>,
    /// Largest request body, MiB [default: 32]
    #[arg(long, value_name = "MIB")]
    max_body_mib: Option<usize>,
    /// Largest document, KiB [default: 1024]
    #[arg(long, value_name = "KIB")]
    max_document_kib: Option<usize>,
    /// Most documents per POST [default: 1000]
    #[arg(long, value_name = "N")]
    max_batch_documents: Option<usize>,
    /// Request data waiting for the writer beyond which writes get 503 + Retry-After, MiB
    /// [default: 256]
    #[arg(long, value_name = "MIB")]
    queue_mib: Option<usize>,
    /// How far ahead of the clock `published_at` may be ("1d", "6h") [default: 1d]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_future: Option<Duration>,
    /// File holding the write key: POST and DELETE then need `Authorization: Bearer <key>`
    /// [default: $TANTIVY_DEDUP_WRITE_KEY; keys are never given on the command line]
    #[arg(long, value_name = "FILE")]
    write_key_file: Option<PathBuf>,
    /// File holding the read key: every other request but /healthz and /openapi.json then
    /// needs it (or the write key) [default: $TANTIVY_DEDUP_READ_KEY]
    #[arg(long, value_name = "FILE")]
    read_key_file: Option<PathBuf>,
    /// Listen on an address other than loopback without API keys (only behind a firewall or
    /// a proxy that checks who calls)
    #[arg(long)]
    insecure_no_auth: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

impl ServeArgs {
    /// The `[server]` settings of --config (or the defaults) with the flags over them.
    fn server_config(&self, file: Option<&Config>) -> ServerConfig {
        let mut server = file.map(|config| config.server.clone()).unwrap_or_default();
        let flags = &self;
        if let Some(never) = flags.port {
            match never {}
        }
        if let Some(addr) = &flags.addr {
            server.addr = addr.clone();
        }
        if let Some(delay) = flags.commit_delay {
            server.commit_delay = delay;
        }
        if let Some(mib) = flags.max_body_mib {
            server.max_body_mib = mib;
        }
        if let Some(kib) = flags.max_document_kib {
            server.max_document_kib = kib;
        }
        if let Some(documents) = flags.max_batch_documents {
            server.max_batch_documents = documents;
        }
        if let Some(entries) = flags.log_max_entries {
            server.log_max_entries = entries;
        }
        if let Some(mib) = flags.queue_mib {
            server.queue_mib = mib;
        }
        if let Some(future) = flags.max_future {
            server.max_future = future;
        }
        server.insecure_no_auth = flags.insecure_no_auth;
        server
    }
}

/// `--addr`'s value.
fn parse_addr(text: &str) -> Result<ListenAddr, String> {
    text.parse().map_err(|error| match error {
        tantivy_dedup::Error::Config(message) => message,
        other => other.to_string(),
    })
}

/// `--port`'s answer: the --addr that says the same.
fn port_hint(text: &str) -> Result<Infallible, String> {
    let port = text.trim();
    Err(
        if !port.is_empty() && port.bytes().all(|byte| byte.is_ascii_digit()) {
            format!(
                "serve has no --port; write --addr 127.0.0.1:{port} (or --addr {port}, the same; \
             --addr 0.0.0.0:{port} for every interface)"
            )
        } else {
            "serve has no --port; write --addr HOST:PORT, e.g. --addr 127.0.0.1:7700".to_owned()
        },
    )
}

/// The settings the index will be opened with, `--time-zone` over them: with the flag, the
/// settings are those of --config, else the index's own, else the defaults, so that the flag
/// changes the zone and nothing else.
fn settings(args: &ServeArgs) -> anyhow::Result<Option<Config>> {
    let config = args.config.load_if_given()?;
    let Some(zone) = args.time_zone else {
        return Ok(config);
    };
    let mut config = match config {
        Some(config) => config,
        None => match args.index.as_deref().map(stored_settings) {
            Some(Ok(stored)) => stored,
            None => Config::default(),
            // A new index: the defaults, as without the flag.
            Some(Err(tantivy_dedup::Error::NoIndex { .. })) => Config::default(),
            Some(Err(error)) => return Err(error.into()),
        },
    };
    config.index.time_zone = zone;
    Ok(Some(config))
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = settings(&args)?;
    // The zone of the index's own settings when nothing else names one; what is wrong with
    // those settings is reported when the index is opened.
    let zone = config
        .as_ref()
        .map(|config| config.index.time_zone)
        .or_else(|| {
            Some(
                stored_settings(args.index.as_deref()?)
                    .ok()?
                    .index
                    .time_zone,
            )
        })
        .unwrap_or_default();
    init_logging(zone);
    let mut server_config = args.server_config(config.as_ref());
    server_config.keys = AccessKeys::load(
        args.write_key_file.as_deref(),
        args.read_key_file.as_deref(),
    )?;
    server_config.validate()?;
    let store = args.store.address()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Bound before the index is opened or created: a busy port leaves no directory behind.
    let listener = server_config
        .addr
        .resolve()
        .and_then(|candidates| runtime.block_on(tantivy_dedup::server::listen(&candidates)))
        .with_context(|| format!("cannot listen on {}", server_config.addr))?;
    let addr = listener.local_addr()?;
    server_config.check_exposure(addr)?;
    let keys = if server_config.keys.enabled() {
        "API keys required"
    } else {
        "no API keys"
    };
    if args.coordinator {
        let store = store.context("--coordinator needs --store")?;
        let timeout = args
            .shard_timeout
            .unwrap_or(coordinator::DEFAULT_SHARD_TIMEOUT);
        return runtime.block_on(async move {
            let coordinator = Coordinator::start_with_timeout(
                config.unwrap_or_default(),
                server_config,
                &args.shards,
                &store,
                timeout,
            )
            .await?;
            println!("listening on http://{addr}");
            tracing::info!(%addr, shards = args.shards.len(), "coordinating ({keys}); stop with Ctrl-C or SIGTERM");
            coordinator.serve(listener, shutdown_signal()).await?;
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        });
    }
    let dir = args
        .index
        .as_deref()
        .context("serve needs --index (or --coordinator)")?;
    let forest = match (&store, args.shard) {
        (Some(_), Some(shard)) => format!("shard {shard}: placed by its coordinator"),
        (Some(address), None) => format!("forest on Redis at {address}"),
        (None, _) => "replaying its forest".to_string(),
    };
    tracing::info!(index = %dir.display(), "opening the index ({forest})");
    let index = match (args.shard, store.clone()) {
        (Some(shard), Some(store)) => {
            runtime.block_on(coordinator::check_shard_count(&store, shard.count))?;
            DedupIndex::open_or_create_shard(dir, config)?
        }
        (_, store) => {
            let store = store.map(super::shared_forest);
            DedupIndex::open_or_create_with_store(
                dir,
                config,
                store,
                server_config.inserts_in_flight,
            )?
        }
    };
    let recovery = index.recovery();
    if let Some(why) = &recovery.checkpoint_refused {
        tracing::warn!(%why, "the forest checkpoint was not used: replaying every insert");
    }
    if recovery.pruned_inserts > 0 {
        tracing::warn!(
            pruned = recovery.pruned_inserts,
            "the index no longer records these inserts (their tombstones were pruned after the \
             checkpoint held them): the forest replayed without them is close to, not the same \
             as, the writer's"
        );
    }
    tracing::info!(
        checkpoint = recovery.checkpoint_sequence.unwrap_or(0),
        replayed = recovery.replayed,
        tombstones = recovery.tombstones,
        ms = recovery.elapsed.as_millis(),
        "index open"
    );
    let server = match (args.shard, store) {
        (Some(shard), Some(store)) => {
            let committed = index.log_position().map(str::to_owned);
            let replica = runtime.block_on(Replica::connect(
                &store,
                shard,
                &args.replica,
                committed.as_deref(),
                server_config.log_max_entries,
            ))?;
            tracing::info!(replica = %args.replica, applied = %replica.applied(), "applying the shard's log");
            Server::start_replica(index, server_config, shard, replica)?
        }
        _ => Server::start(index, server_config)?,
    };
    runtime.block_on(async move {
        // On stdout, for people and for scripts that start the server on port 0.
        println!("listening on http://{addr}");
        tracing::info!(%addr, "serving ({keys}); stop with Ctrl-C or SIGTERM (queued writes are committed)");
        server.serve(listener, shutdown_signal()).await?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

/// Logs to stderr at the level of `RUST_LOG` (default `info`), each line dated in `zone` to
/// the millisecond.
fn init_logging(zone: TimeZone) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let timer = tracing_subscriber::fmt::time::OffsetTime::new(
        zone.offset(),
        time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3][offset_hour sign:mandatory]:[offset_minute]"
        ),
    );
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(timer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
    tracing::info!("shutdown signal received");
}

/// `tantivy-dedup openapi`: prints the document `serve` answers at `/openapi.json`, byte for
/// byte.
pub fn openapi() -> anyhow::Result<ExitCode> {
    let document = tantivy_dedup::server::openapi()?;
    super::print(|out| writeln!(out, "{document}"))
}
