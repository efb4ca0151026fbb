//! Accepting and serving connections, with the limits that keep a crowd of idle or slow
//! clients from taking the server down:
//!
//! - at most `max_connections` connections at once, and never more than the process's
//!   open-file limit leaves room for beside the index's own files ([`connection_cap`]); a
//!   connection beyond the cap makes the oldest one close (at once when it is idle, after its
//!   request otherwise), so that clients holding connections cannot lock others out;
//! - hyper's header-read timeout (`header_timeout`): a connection that sends no whole request
//!   head within it is closed, whether it trickles its headers or sits idle between requests;
//! - on shutdown, idle connections close at once and requests in flight get `shutdown_grace`
//!   to finish; then the rest are dropped.
//!
//! The body's own deadline (`body_timeout`) is applied where bodies are read.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::ServerConfig;

/// Open files kept for the index (segment files, merges, the settings), the store's
/// connections and the runtime, whatever the connections take.
const FILES_KEPT_FOR_THE_INDEX: u64 = 256;

/// hyper's buffer for a request head, held per connection: room for heads up to our own
/// limits ([`super::access::MAX_URI_BYTES`] and [`super::access::MAX_HEADER_BYTES`]) and as
/// much again, so that a head somewhat over them reaches the router, which answers in JSON;
/// only larger ones get hyper's bare 431 (or 414).
const MAX_HEAD_BYTES: usize = 2 * (super::access::MAX_URI_BYTES + super::access::MAX_HEADER_BYTES);

/// The connections served at once: `configured`, lowered to what the open-file limit
/// (`RLIMIT_NOFILE`) leaves after 256 files kept for the index (half the limit when it is
/// smaller than twice that).
pub fn connection_cap(configured: usize) -> usize {
    let Some(limit) = open_file_limit() else {
        return configured;
    };
    let room = if limit >= 2 * FILES_KEPT_FOR_THE_INDEX {
        limit - FILES_KEPT_FOR_THE_INDEX
    } else {
        limit / 2
    };
    configured
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(1)
}

/// The soft limit on open files, if the system reports one.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given and reads nothing else.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The connections open, oldest first, each by the signal that asks it to close. An entry
/// whose connection has closed no longer upgrades.
#[derive(Default)]
struct OpenConnections(Mutex<VecDeque<Weak<Notify>>>);

impl OpenConnections {
    /// Registers a new connection; its signal.
    fn open(&self, cap: usize) -> Arc<Notify> {
        let signal = Arc::new(Notify::new());
        if let Ok(mut open) = self.0.lock() {
            if open.len() >= 2 * cap {
                open.retain(|entry| entry.strong_count() > 0);
            }
            open.push_back(Arc::downgrade(&signal));
        }
        signal
    }

    /// Asks the oldest open connection to close: at once when it is idle, after its request
    /// otherwise.
    fn close_oldest(&self) {
        let Ok(mut open) = self.0.lock() else {
            return;
        };
        while let Some(entry) = open.pop_front() {
            if let Some(signal) = entry.upgrade() {
                signal.notify_one();
                return;
            }
        }
    }
}

/// How often, while every slot is taken, another old connection is asked to close.
const EVICTION_INTERVAL: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` completes, then closes the connections as
/// the module documents. A client arriving when every slot is taken makes the oldest
/// connection close (at once if it is idle), so that held connections cannot lock others out.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let cap = connection_cap(config.max_connections);
    if cap < config.max_connections {
        tracing::warn!(
            max_connections = config.max_connections,
            cap,
            "the open-file limit (ulimit -n) leaves room for fewer connections; raise it to serve more"
        );
    }
    let permits = Arc::new(Semaphore::new(cap));
    let open = OpenConnections::default();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let (stopping, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    'accepting: loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of files or memory for the moment: others may free some.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = loop {
            if let Ok(permit) = permits.clone().try_acquire_owned() {
                break permit;
            }
            open.close_oldest();
            tokio::select! {
                () = &mut shutdown => break 'accepting,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => break permit,
                    Err(_) => break 'accepting,
                },
                () = tokio::time::sleep(EVICTION_INTERVAL) => {}
            }
        };
        let _ = stream.set_nodelay(true);
        let connection = http.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let evicted = open.open(cap);
        let mut stop = stop.clone();
        // Finished connections are reaped here, so the set holds only open ones.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            tokio::pin!(connection);
            let closing = tokio::select! {
                result = connection.as_mut() => Some(result),
                () = evicted.notified() => None,
                _ = stop.changed() => None,
            };
            let result = match closing {
                Some(result) => result,
                None => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every connection has closed once every slot is free again.
    let slots = u32::try_from(cap).unwrap_or(u32::MAX);
    tokio::select! {
        _ = permits.acquire_many(slots) => {}
        () = tokio::time::sleep(config.shutdown_grace) => {
            tracing::warn!(
                grace_ms = config.shutdown_grace.as_millis() as u64,
                connections = tasks.len(),
                "requests still in flight after the shutdown grace period are dropped"
            );
            tasks.abort_all();
        }
    }
}
