//! Measurements of an index split into shards by story (`bench --only shards`): one process
//! serving the whole index, then a coordinator with 1 and with 3 shards (all on loopback,
//! placing in a Redis Cluster): durable ingest through each, list pages under concurrent
//! clients, story and detail pages, and every list page compared with the one process's.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::Result;
use crate::bench::http::{
    HttpIngestReport, LocalServer, TimedRequests, get_json, http_ingest, list_pages, timed_gets,
};
use crate::config::Config;
use crate::engine::ShardSpec;
use crate::forest::redis::RedisAddress;

/// How the shards part runs.
#[derive(Debug, Clone)]
pub struct ShardsBench {
    /// Shard counts measured behind a coordinator (besides one process alone).
    pub counts: Vec<usize>,
    /// Documents per POST.
    pub batch: usize,
    /// Clients posting at once.
    pub ingest_clients: usize,
    /// Clients posting at once in a second ingest into each setup, once its answers are
    /// compared: the `limit` documents after the first `limit` (0, or no `limit`: none).
    pub concurrent_ingest_clients: usize,
    /// Clients reading at once.
    pub clients: usize,
    /// Requests each reading client sends, per kind of page.
    pub requests: usize,
    /// The list pages' queries.
    pub queries: Vec<String>,
    /// Only the corpus's first documents.
    pub limit: Option<usize>,
}

/// One way of serving the index, measured.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// `direct` (one process) or `coordinator + N shards`.
    pub name: String,
    /// Shards behind the coordinator (0: one process).
    pub shards: usize,
    /// Durable ingest of the corpus, one ordered stream.
    pub ingest: HttpIngestReport,
    /// Durable ingest of the next documents from several clients at once (their batches
    /// reach the setups in different orders, so its answers are not compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_ingest: Option<HttpIngestReport>,
    /// The coordinator's round trips to the store per document placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_round_trips_per_document: Option<f64>,
    /// List pages (each query with every sort, first three pages).
    pub list_pages: TimedRequests,
    /// The same with facets by source and a daily histogram.
    pub faceted_list_pages: TimedRequests,
    /// Story pages of the largest stories.
    pub story_pages: TimedRequests,
    /// Detail pages of their representatives.
    pub detail_pages: TimedRequests,
    /// List pages whose answer differs from one process's (scores and all).
    pub differences: usize,
    /// List pages compared.
    pub compared: usize,
}

/// The figures of every setup, in the order run.
#[derive(Debug, Clone, Serialize)]
pub struct ShardsReport {
    /// Reading clients.
    pub clients: usize,
    /// One process, then the coordinator with each shard count.
    pub setups: Vec<Setup>,
}

/// Runs the part: `corpus` served by one process in `scratch`, then by a coordinator and
/// `bench.counts` shards placing in the cluster at `store` (under a key prefix of this run's
/// own, which it leaves behind).
pub fn shards(
    corpus: &Path,
    settings: &Config,
    store: &RedisAddress,
    scratch: &Path,
    bench: &ShardsBench,
) -> Result<ShardsReport> {
    let mut config = settings.clone();
    config.server.commit_delay = std::time::Duration::from_millis(100);
    eprintln!("bench: shards: one process");
    let direct = LocalServer::start(&scratch.join("direct"), config.clone())?;
    let reference = measure(&direct.url(), "direct".to_owned(), 0, corpus, bench, false)?;
    // One trend window for every setup (`trending` and `hot` pages would otherwise each count
    // the window up to the time they are asked).
    let pages = list_pages(
        "",
        &bench.queries,
        &format!(
            "&facets=source&histogram=1d&trend_end={}",
            crate::dedup::now()
        ),
    );
    let expected = answers(&direct.url(), &pages)?;
    let mut reference = reference;
    reference.concurrent_ingest = concurrent_ingest(&direct.url(), corpus, bench)?;
    let mut setups = vec![reference];
    for &count in &bench.counts {
        eprintln!("bench: shards: a coordinator and {count} shards");
        let address = RedisAddress {
            prefix: format!("td-bench-{}-{count}:", std::process::id()),
            ..store.clone()
        };
        let mut shards = Vec::with_capacity(count);
        for index in 0..count {
            let dir = scratch.join(format!("shards-{count}-{index}"));
            shards.push(LocalServer::start_replica(
                &dir,
                config.clone(),
                ShardSpec { index, count },
                address.clone(),
                "a",
            )?);
        }
        let urls = shards.iter().map(LocalServer::url).collect();
        let coordinator = LocalServer::start_coordinator(config.clone(), urls, address)?;
        let mut setup = measure(
            &coordinator.url(),
            format!("coordinator + {count} shards"),
            count,
            corpus,
            bench,
            true,
        )?;
        let found = answers(&coordinator.url(), &pages)?;
        setup.compared = pages.len();
        setup.differences = found
            .iter()
            .zip(&expected)
            .filter(|(found, expected)| found != expected)
            .count();
        setup.concurrent_ingest = concurrent_ingest(&coordinator.url(), corpus, bench)?;
        setups.push(setup);
        coordinator.stop()?;
        for shard in shards {
            shard.stop()?;
        }
    }
    direct.stop()?;
    Ok(ShardsReport {
        clients: bench.clients,
        setups,
    })
}

/// The second ingest through `url`: the `limit` documents after the first `limit`, from
/// `concurrent_ingest_clients` clients, or `None` when there is none to do.
fn concurrent_ingest(
    url: &str,
    corpus: &Path,
    bench: &ShardsBench,
) -> Result<Option<HttpIngestReport>> {
    let Some(limit) = bench.limit.filter(|_| bench.concurrent_ingest_clients > 0) else {
        return Ok(None);
    };
    eprintln!(
        "bench: shards: {} clients posting documents {limit} to {}",
        bench.concurrent_ingest_clients,
        2 * limit
    );
    let report = post(
        url,
        corpus,
        bench,
        bench.concurrent_ingest_clients,
        limit..2 * limit,
    )?;
    Ok((report.documents > 0).then_some(report))
}

/// The corpus's documents `lines` posted through `url` in batches, from `clients` at once.
fn post(
    url: &str,
    corpus: &Path,
    bench: &ShardsBench,
    clients: usize,
    lines: std::ops::Range<usize>,
) -> Result<HttpIngestReport> {
    let commit_delay = std::time::Duration::from_millis(100);
    http_ingest(url, corpus, bench.batch, clients, commit_delay, lines)
}

/// Ingest then reads through `url`.
fn measure(
    url: &str,
    name: String,
    shards: usize,
    corpus: &Path,
    bench: &ShardsBench,
    coordinated: bool,
) -> Result<Setup> {
    let lines = 0..bench.limit.unwrap_or(usize::MAX);
    let ingest = post(url, corpus, bench, bench.ingest_clients, lines)?;
    let store_round_trips_per_document = if coordinated {
        let stats = get_json(&format!("{url}/v1/stats"))?;
        let trips = stats["forest"]["store_round_trips"].as_f64().unwrap_or(0.0);
        Some(trips / ingest.documents.max(1) as f64)
    } else {
        None
    };
    let pages = list_pages(url, &bench.queries, "");
    let list = timed_gets(&pages, bench.clients, bench.requests)?;
    let faceted = list_pages(url, &bench.queries, "&facets=source&histogram=1d");
    let faceted = timed_gets(&faceted, bench.clients, bench.requests)?;
    let largest = get_json(&format!("{url}/v1/search?sort=similar_desc&limit=200"))?;
    let clusters = largest["clusters"].as_array().cloned().unwrap_or_default();
    let stories: Vec<String> = clusters
        .iter()
        .filter_map(|cluster| Some(format!("{url}/v1/stories/{}", cluster["root"].as_str()?)))
        .collect();
    let details: Vec<String> = clusters
        .iter()
        .filter_map(|cluster| {
            let id = cluster["representative"]["id"].as_str()?;
            let id: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
            Some(format!("{url}/v1/documents/{id}/similar"))
        })
        .collect();
    Ok(Setup {
        name,
        shards,
        ingest,
        concurrent_ingest: None,
        store_round_trips_per_document,
        list_pages: list,
        faceted_list_pages: faceted,
        story_pages: timed_gets(&stories, bench.clients, bench.requests)?,
        detail_pages: timed_gets(&details, bench.clients, bench.requests)?,
        differences: 0,
        compared: 0,
    })
}

/// Each of `pages` (paths) asked of `url`, as JSON.
fn answers(url: &str, pages: &[String]) -> Result<Vec<Value>> {
    pages
        .iter()
        .map(|page| get_json(&format!("{url}{page}")))
        .collect()
}
