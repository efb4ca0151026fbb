//! `/metrics`: counters, gauges and latency histograms in the Prometheus text format.

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

/// The service's metrics. Updating one is a few atomic operations.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    documents: Family<OutcomeLabels, Counter>,
    commit_latency: Histogram,
    queue_documents: Gauge,
    queue_bytes: Gauge,
    forest_nodes: Gauge,
    forest_roots: Gauge,
    forest_expired: Gauge,
    index_documents: Gauge,
    index_clusters: Gauge,
    index_segments: Gauge,
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
        let commit_latency = latency_histogram();
        registry.register(
            "commit_duration_seconds",
            "Time of each group commit",
            commit_latency.clone(),
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
            registry,
            requests,
            latency,
            documents,
            commit_latency,
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

    /// Records a commit and the forest's size after it.
    pub fn observe_commit(&self, elapsed: Duration, forest: ForestStats) {
        self.commit_latency.observe(elapsed.as_secs_f64());
        self.set_forest(forest);
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
    }

    /// Sets the queue's size.
    pub fn set_queue(&self, documents: u64, bytes: usize) {
        self.queue_documents.set(documents as i64);
        self.queue_bytes.set(bytes as i64);
    }

    /// The text exposition, with the index's size as of now.
    pub fn render(&self, index: &IndexStats) -> String {
        self.index_documents.set(index.documents as i64);
        self.index_clusters.set(index.clusters as i64);
        self.index_segments.set(index.segments as i64);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
