//! `/metrics`: counters, gauges and latency histograms in the Prometheus text format, or in
//! OpenMetrics for a scraper that asks for it.

use std::collections::HashSet;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::Decision;
use crate::engine::IndexStats;
use crate::forest::ForestStats;

/// A request's labels: the route (its pattern, not the raw path) and the status.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

/// A route's label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// An ingest outcome's label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// Why connections were closed by the server rather than by their clients.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClosedLabels {
    reason: &'static str,
}

/// A shard's replica's labels: its shard (`I/N`) and its name (its URL on a coordinator that
/// has not heard its name yet).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReplicaLabels {
    shard: String,
    replica: String,
}

/// What the metrics show of a shard's replica ([`Metrics::set_replica`]).
pub struct ReplicaFigures<'a> {
    /// Its shard, `I/N`.
    pub shard: &'a str,
    /// Its name, or its URL when not known yet.
    pub name: &'a str,
    /// The log's clock at the last entry it committed, Unix milliseconds.
    pub applied_millis: u64,
    /// On a coordinator: how far behind the newest write answered on its shard.
    pub behind_ms: Option<u64>,
    /// On a coordinator: whether it answered its last health check or call.
    pub healthy: Option<bool>,
}

/// The media type of OpenMetrics text, as a scraper names it in `Accept`.
const OPENMETRICS_MEDIA_TYPE: &str = "application/openmetrics-text";

/// The text formats `/metrics` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0, for a scraper that lists it in `Accept` (Prometheus does).
    OpenMetrics,
    /// The Prometheus text format 0.0.4, for every other reader: `curl`, agents that predate
    /// OpenMetrics, and `promtool check metrics`, which lints this format only.
    Prometheus,
}

impl Exposition {
    /// OpenMetrics when the `Accept` header lists its media type without refusing it (`q=0`),
    /// the Prometheus text format otherwise (no header, `*/*`, `text/plain`).
    pub fn from_accept(accept: &str) -> Self {
        let asks_openmetrics = accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media_type = parts.next().unwrap_or_default();
            media_type.eq_ignore_ascii_case(OPENMETRICS_MEDIA_TYPE)
                && !parts.any(|parameter| {
                    parameter
                        .strip_prefix("q=")
                        .and_then(|quality| quality.trim().parse::<f32>().ok())
                        .is_some_and(|quality| quality == 0.0)
                })
        });
        if asks_openmetrics {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The service's metrics. Updating one is a few atomic operations.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    documents: Family<OutcomeLabels, Counter>,
    connections: Gauge,
    connections_closed: Family<ClosedLabels, Counter>,
    commit_latency: Histogram,
    checkpoint_pause: Histogram,
    checkpoint_failures: Counter,
    checkpoint_sequence: Gauge,
    queue_documents: Gauge,
    queue_bytes: Gauge,
    forest_nodes: Gauge,
    forest_roots: Gauge,
    forest_expired: Gauge,
    forest_heap_bytes: Gauge,
    forest_mapped_bytes: Gauge,
    index_documents: Gauge,
    index_clusters: Gauge,
    index_segments: Gauge,
    replica_applied: Family<ReplicaLabels, Gauge>,
    replica_behind: Family<ReplicaLabels, Gauge>,
    replica_healthy: Family<ReplicaLabels, Gauge>,
}

/// Latency buckets from 0.1 ms to about 6.5 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the `tantivy_dedup_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tantivy_dedup");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer HTTP requests, by method and route (a POST's includes waiting for its commit)",
            latency.clone(),
        );
        let documents = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "documents",
            "Documents posted, by outcome: new_story, duplicate (joined an earlier story), unchanged (a re-send equal to the indexed document: nothing done) or rejected",
            documents.clone(),
        );
        let connections_closed = Family::<ClosedLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Connections the server closed to protect the others, by reason: evicted (dropped to make way for a new connection at max_connections or max_connections_per_client), refused (a new connection turned away with 503 because every connection that could make way was handling a request) or first_head_timeout (no request head within first_head_timeout)",
            connections_closed.clone(),
        );
        let commit_latency = latency_histogram();
        registry.register(
            "commit_duration_seconds",
            "Time of each group commit",
            commit_latency.clone(),
        );
        let checkpoint_pause = latency_histogram();
        registry.register(
            "checkpoint_pause_seconds",
            "Time the writer waited while each forest checkpoint was copied (the file is written and made durable by a thread of its own)",
            checkpoint_pause.clone(),
        );
        let checkpoint_failures = Counter::default();
        registry.register(
            "checkpoint_failures",
            "Forest checkpoints that could not be saved (the previous one stays; a restart then replays more)",
            checkpoint_failures.clone(),
        );
        let replica_applied = Family::<ReplicaLabels, Gauge>::default();
        registry.register(
            "replica_applied_milliseconds",
            "The last position of its shard's log a replica has committed, as the log's clock (Unix milliseconds), by shard and replica: a replica's own, or on a coordinator each replica's as last heard",
            replica_applied.clone(),
        );
        let replica_behind = Family::<ReplicaLabels, Gauge>::default();
        registry.register(
            "replica_behind_milliseconds",
            "On a coordinator: how far each replica is behind the newest write the coordinator answered on its shard, by the log's clock",
            replica_behind.clone(),
        );
        let replica_healthy = Family::<ReplicaLabels, Gauge>::default();
        registry.register(
            "replica_healthy",
            "On a coordinator: 1 when a replica answered its last health check or call, else 0 (it then gets no reads)",
            replica_healthy.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let gauge = Gauge::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        Metrics {
            queue_documents: gauge(
                &mut registry,
                "queue_documents",
                "Documents waiting for the writer",
            ),
            queue_bytes: gauge(
                &mut registry,
                "queue_bytes",
                "Request bytes waiting for the writer",
            ),
            forest_nodes: gauge(
                &mut registry,
                "forest_nodes",
                "Distinct fingerprints in the window (after the last commit; with --store, those this process created)",
            ),
            forest_roots: gauge(
                &mut registry,
                "forest_roots",
                "Clusters in the window (after the last commit; with --store, those this process started)",
            ),
            forest_expired: gauge(
                &mut registry,
                "forest_expired",
                "Fingerprints that left the forest as the window passed them by, since the forest was last rebuilt from the index (at start, or after a failed write), its replay included; their documents stay in the index",
            ),
            forest_heap_bytes: gauge(
                &mut registry,
                "forest_heap_bytes",
                "Heap the in-memory forest holds (tables, nodes, expiry queue and default mode's key postings, by capacity), after the last commit",
            ),
            forest_mapped_bytes: gauge(
                &mut registry,
                "forest_mapped_bytes",
                "Bytes of default mode's sketch files mapped into memory (disk, of which the page cache keeps what was read lately), after the last commit",
            ),
            index_documents: gauge(
                &mut registry,
                "index_documents",
                "Live documents in the index",
            ),
            index_clusters: gauge(
                &mut registry,
                "index_clusters",
                "Clusters among the live documents",
            ),
            index_segments: gauge(&mut registry, "index_segments", "Tantivy segments"),
            connections: gauge(&mut registry, "connections", "Client connections open"),
            checkpoint_sequence: gauge(
                &mut registry,
                "checkpoint_inserts",
                "Inserts the last forest checkpoint saved holds: a restart replays those made since",
            ),
            registry,
            requests,
            latency,
            documents,
            connections_closed,
            commit_latency,
            checkpoint_pause,
            checkpoint_failures,
            replica_applied,
            replica_behind,
            replica_healthy,
        }
    }

    /// Sets a shard's replica's position (the log's clock at the last entry it committed)
    /// and, on a coordinator, how far behind it is and whether it answers.
    pub fn set_replica(&self, replica: ReplicaFigures<'_>) {
        let labels = ReplicaLabels {
            shard: replica.shard.to_owned(),
            replica: replica.name.to_owned(),
        };
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        self.replica_applied
            .get_or_create(&labels)
            .set(gauge(replica.applied_millis));
        if let Some(behind_ms) = replica.behind_ms {
            self.replica_behind
                .get_or_create(&labels)
                .set(gauge(behind_ms));
        }
        if let Some(healthy) = replica.healthy {
            self.replica_healthy
                .get_or_create(&labels)
                .set(i64::from(healthy));
        }
    }

    /// Records an answered request.
    pub fn observe_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let route = route.to_owned();
        let method = method.to_owned();
        self.latency
            .get_or_create(&RouteLabels {
                method: method.clone(),
                route: route.clone(),
            })
            .observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&RequestLabels {
                method,
                route,
                status,
            })
            .inc();
    }

    /// Counts documents refused by validation.
    pub fn count_rejected(&self, documents: u64) {
        self.documents
            .get_or_create(&OutcomeLabels {
                outcome: "rejected",
            })
            .inc_by(documents);
    }

    /// Counts the writer's decisions. An unchanged re-send is counted as such, not as a new
    /// story or a duplicate again: it placed nothing.
    pub fn count_decisions(&self, decisions: &[Decision]) {
        let (mut new_stories, mut duplicates, mut unchanged) = (0u64, 0u64, 0u64);
        for decision in decisions {
            match (decision.change.is_unchanged(), decision.duplicate) {
                (true, _) => unchanged += 1,
                (false, true) => duplicates += 1,
                (false, false) => new_stories += 1,
            }
        }
        for (outcome, count) in [
            ("duplicate", duplicates),
            ("new_story", new_stories),
            ("unchanged", unchanged),
        ] {
            self.documents
                .get_or_create(&OutcomeLabels { outcome })
                .inc_by(count);
        }
    }

    /// Sets the client connections open.
    pub fn set_connections(&self, open: usize) {
        self.connections
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// Counts `closed` connections closed by the server for `reason` (see `connections_closed`).
    pub fn count_connections_closed(&self, reason: &'static str, closed: u64) {
        if closed > 0 {
            self.connections_closed
                .get_or_create(&ClosedLabels { reason })
                .inc_by(closed);
        }
    }

    /// Records a commit and the forest's size after it.
    pub fn observe_commit(&self, elapsed: Duration, forest: ForestStats) {
        self.commit_latency.observe(elapsed.as_secs_f64());
        self.set_forest(forest);
    }

    /// Records a forest checkpoint the writer finished (saved or failed).
    pub fn observe_checkpoint(&self, report: &crate::engine::CheckpointReport) {
        self.checkpoint_pause.observe(report.pause_ms / 1e3);
        match report.error {
            Some(_) => {
                self.checkpoint_failures.inc();
            }
            None => self.set_checkpoint_inserts(report.next_sequence),
        }
    }

    /// Sets the inserts the last forest checkpoint holds (at start: the one the index opened
    /// from).
    pub fn set_checkpoint_inserts(&self, inserts: u64) {
        self.checkpoint_sequence
            .set(i64::try_from(inserts).unwrap_or(i64::MAX));
    }

    /// The forest's nodes, roots and expired nodes after the last commit.
    pub fn forest(&self) -> (u64, u64, u64) {
        (
            self.forest_nodes.get().max(0) as u64,
            self.forest_roots.get().max(0) as u64,
            self.forest_expired.get().max(0) as u64,
        )
    }

    /// Sets the forest's size.
    pub fn set_forest(&self, forest: ForestStats) {
        self.forest_nodes.set(forest.nodes as i64);
        self.forest_roots.set(forest.roots as i64);
        self.forest_expired
            .set(i64::try_from(forest.expired).unwrap_or(i64::MAX));
        self.forest_heap_bytes.set(forest.heap_bytes as i64);
        self.forest_mapped_bytes.set(forest.mapped_bytes as i64);
    }

    /// Sets the queue's size.
    pub fn set_queue(&self, documents: u64, bytes: usize) {
        self.queue_documents.set(documents as i64);
        self.queue_bytes.set(bytes as i64);
    }

    /// The text exposition in `format`, with the index's size as of now.
    pub fn render(&self, index: &IndexStats, format: Exposition) -> String {
        self.index_documents.set(index.documents as i64);
        self.index_clusters.set(index.clusters as i64);
        self.index_segments.set(index.segments as i64);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        match format {
            Exposition::OpenMetrics => text,
            Exposition::Prometheus => openmetrics_to_prometheus(&text),
        }
    }
}

/// OpenMetrics text (what `prometheus_client` writes) in the Prometheus text format 0.0.4. For
/// the counters, gauges and histograms registered here the two differ in two places only:
/// OpenMetrics names a counter's `HELP` and `TYPE` without the `_total` its samples carry,
/// where the Prometheus format names them as the samples (a reader of that format otherwise
/// sees a counter without help or type), and it ends with `# EOF`, which that format lacks.
fn openmetrics_to_prometheus(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len() + 2 * "_total".len() * counters.len());
    for line in openmetrics.lines().filter(|&line| line != "# EOF") {
        let counter_descriptor = ["# HELP ", "# TYPE "].into_iter().find_map(|keyword| {
            let (name, rest) = line.strip_prefix(keyword)?.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{keyword}{name}_total {rest}"))
        });
        text.push_str(counter_descriptor.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_the_accept_header_lists_it_unrefused() {
        let prometheus_scraper = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, format) in [
            (prometheus_scraper, Exposition::OpenMetrics),
            ("Application/OpenMetrics-Text", Exposition::OpenMetrics),
            ("", Exposition::Prometheus),
            ("*/*", Exposition::Prometheus),
            ("text/plain; version=0.0.4", Exposition::Prometheus),
            ("application/openmetrics-text; q=0", Exposition::Prometheus),
            ("application/openmetrics-text-x", Exposition::Prometheus),
        ] {
            assert_eq!(Exposition::from_accept(accept), format, "{accept:?}");
        }
    }

    /// A counter's help and type take its samples' name; gauges and histograms keep theirs;
    /// `# EOF` goes; the samples are written as they were.
    #[test]
    fn prometheus_text_names_counters_as_their_samples() {
        let metrics = Metrics::new();
        metrics.count_rejected(2);
        metrics.observe_request("GET", "/v1/search", 200, Duration::from_millis(2));
        metrics.observe_commit(Duration::from_millis(3), ForestStats::default());
        let index = IndexStats {
            documents: 1,
            clusters: 1,
            tombstones: 0,
            segments: 1,
            disk_bytes: 0,
        };
        let openmetrics = metrics.render(&index, Exposition::OpenMetrics);
        let prometheus = metrics.render(&index, Exposition::Prometheus);
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
        assert!(!prometheus.contains("# EOF"), "{prometheus}");
        for expected in [
            "# HELP tantivy_dedup_documents_total Documents posted",
            "# TYPE tantivy_dedup_documents_total counter\n",
            "# TYPE tantivy_dedup_http_requests_total counter\n",
            "# TYPE tantivy_dedup_commit_duration_seconds histogram\n",
            "# TYPE tantivy_dedup_queue_bytes gauge\n",
        ] {
            assert!(prometheus.contains(expected), "{expected} in\n{prometheus}");
        }
        let samples = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|line| !line.starts_with('#'))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(samples(&prometheus), samples(&openmetrics));
    }
}
