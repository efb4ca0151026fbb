//! Measurements of the Tantivy integration: ingest against plain Tantivy + tantivy-jieba,
//! collapse against Tantivy's terms aggregation, and detail-page latency.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use serde::Serialize;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector, AggregationLimitsGuard};
use tantivy::collector::DocSetCollector;
use tantivy::query::AllQuery;
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, IndexRecordOption, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions,
};
use tantivy::{DateTime, Index, TantivyDocument};

use crate::article::{ArticleReader, ArticleRecord};
use crate::bench::percentile;
use crate::config::Config;
use crate::dedup::BATCH_SIZE;
use crate::engine::schema::{self, fast_value};
use crate::engine::{CollapseCollector, DedupIndex, DedupSearcher, SearchRequest, Sort};
use crate::input;
use crate::{Error, Result};

/// A Tantivy error while measuring an index that was opened already (its path is known to the
/// caller).
pub(crate) fn index_error(source: tantivy::TantivyError) -> Error {
    Error::Index {
        path: Default::default(),
        source,
    }
}

/// One timed ingest of a corpus.
#[derive(Debug, Clone, Serialize)]
pub struct IngestRun {
    /// Documents indexed.
    pub documents: u64,
    /// Seconds from the first line read to the commit done.
    pub seconds: f64,
    /// Documents per second.
    pub documents_per_second: f64,
}

/// Ingest with dedup against plain Tantivy + tantivy-jieba, same corpus, same run.
#[derive(Debug, Clone, Serialize)]
pub struct IngestReport {
    /// Indexing threads of both writers.
    pub writer_threads: usize,
    /// Each round's plain Tantivy run.
    pub plain: Vec<IngestRun>,
    /// Each round's tantivy-dedup run.
    pub dedup: Vec<IngestRun>,
    /// Best dedup documents/s over best plain documents/s (target >= 0.9).
    pub ratio: f64,
    /// Median dedup documents/s over median plain documents/s.
    pub median_ratio: f64,
}

fn run_figures(documents: u64, started: Instant) -> IngestRun {
    let seconds = started.elapsed().as_secs_f64();
    IngestRun {
        documents,
        seconds,
        documents_per_second: documents as f64 / seconds,
    }
}

/// Indexes `corpus` into a fresh index under `dir` with tantivy-dedup (with `config`), then into
/// a plain Tantivy index with the same text fields tokenized by tantivy-jieba, `rounds` times
/// each, alternating. Returns the figures; the last dedup index is left at `dir/dedup`.
pub fn ingest_comparison(
    corpus: &Path,
    dir: &Path,
    config: &Config,
    rounds: usize,
) -> Result<IngestReport> {
    let threads = config.index.threads();
    let mut report = IngestReport {
        writer_threads: threads,
        plain: Vec::new(),
        dedup: Vec::new(),
        ratio: 0.0,
        median_ratio: 0.0,
    };
    for _ in 0..rounds.max(1) {
        let plain_dir = dir.join("plain");
        let _ = std::fs::remove_dir_all(&plain_dir);
        report.plain.push(plain_ingest(corpus, &plain_dir, config)?);
        let _ = std::fs::remove_dir_all(&plain_dir);

        report
            .dedup
            .push(dedup_ingest(corpus, &dir.join("dedup"), config)?);
    }
    let best = |runs: &[IngestRun]| {
        runs.iter()
            .map(|run| run.documents_per_second)
            .fold(0.0, f64::max)
    };
    let median = |runs: &[IngestRun]| {
        let mut rates: Vec<f64> = runs.iter().map(|run| run.documents_per_second).collect();
        rates.sort_by(f64::total_cmp);
        percentile(&rates, 0.5)
    };
    report.ratio = best(&report.dedup) / best(&report.plain);
    report.median_ratio = median(&report.dedup) / median(&report.plain);
    Ok(report)
}

/// Indexes `corpus` into a fresh tantivy-dedup index at `dir` (removing what was there).
pub fn dedup_ingest(corpus: &Path, dir: &Path, config: &Config) -> Result<IngestRun> {
    let _ = std::fs::remove_dir_all(dir);
    let started = Instant::now();
    let mut index = DedupIndex::create(dir, config.clone())?;
    let mut documents = 0u64;
    index.ingest(input::open(corpus)?, corpus, None, |_, outcome| {
        documents += u64::from(outcome.is_ok());
        ControlFlow::Continue(())
    })?;
    index.commit()?;
    let figures = run_figures(documents, started);
    index.close()?;
    Ok(figures)
}

/// Plain Tantivy: the same fields, text tokenized by tantivy-jieba inside Tantivy's indexing
/// threads, lines parsed in parallel batches just as `ingest` does.
fn plain_ingest(corpus: &Path, dir: &Path, config: &Config) -> Result<IngestRun> {
    let tantivy_error = |source| Error::Index {
        path: dir.to_owned(),
        source,
    };
    let started = Instant::now();
    let mut builder = Schema::builder();
    let text = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("jieba")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let id = builder.add_text_field("id", STRING | STORED);
    let title = builder.add_text_field("title", text.clone());
    let content = builder.add_text_field("content", text);
    let source = builder.add_text_field("source", STRING | STORED | FAST);
    let url = builder.add_text_field("url", STORED);
    let published_at = builder.add_date_field(
        "published_at",
        DateOptions::default()
            .set_fast()
            .set_indexed()
            .set_stored()
            .set_precision(DateTimePrecision::Seconds),
    );
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })?;
    let index = Index::create_in_dir(dir, builder.build()).map_err(tantivy_error)?;
    index
        .tokenizers()
        .register("jieba", tantivy_jieba::JiebaTokenizer::new());
    let mut writer = index
        .writer_with_num_threads(config.index.threads(), config.index.writer_memory_mb << 20)
        .map_err(tantivy_error)?;
    let arrival = crate::dedup::now();
    let mut documents = 0u64;
    let mut failure = None;
    let read = input::for_each_batch(
        input::open(corpus)?,
        ArticleReader::default_schema(),
        BATCH_SIZE,
        |ArticleRecord { article, .. }| {
            let mut document = TantivyDocument::new();
            document.add_text(id, &article.id);
            if let Some(text) = &article.title {
                document.add_text(title, text);
            }
            document.add_text(content, &article.content);
            if let Some(text) = &article.source {
                document.add_text(source, text);
            }
            if let Some(text) = &article.url {
                document.add_text(url, text);
            }
            document.add_date(
                published_at,
                DateTime::from_timestamp_secs(article.published_at.unwrap_or(arrival)),
            );
            document
        },
        |batch| {
            for (_, document) in batch {
                let Ok(document) = document else { continue };
                if let Err(error) = writer.add_document(document) {
                    failure = Some(error);
                    return ControlFlow::Break(());
                }
                documents += 1;
            }
            ControlFlow::Continue(())
        },
    );
    if let Some(error) = failure {
        return Err(tantivy_error(error));
    }
    read.map_err(|source| Error::Io {
        path: corpus.to_owned(),
        source,
    })?;
    writer.commit().map_err(tantivy_error)?;
    let figures = run_figures(documents, started);
    writer.wait_merging_threads().map_err(tantivy_error)?;
    Ok(figures)
}

/// One broad query: collapse against the terms aggregation on `root`.
#[derive(Debug, Clone, Serialize)]
pub struct CollapseQueryReport {
    /// The keywords ("" for every document).
    pub query: String,
    /// Matching documents.
    pub hits: u64,
    /// Matching clusters.
    pub clusters: u64,
    /// Median milliseconds of the collapse: grouping, every cluster's size, sorting by size,
    /// the top 10 (what the terms aggregation computes, plus sizes).
    pub collapse_ms: f64,
    /// Median milliseconds of the whole list page (`search`, similar_desc, 10 clusters with
    /// their stored documents and sources).
    pub search_ms: f64,
    /// Median milliseconds of Tantivy's terms aggregation on `root` (size 10) for the query.
    pub terms_aggregation_ms: f64,
    /// `collapse_ms / terms_aggregation_ms` (target <= 1.0).
    pub ratio: f64,
    /// Collapse nanoseconds per matching document.
    pub ns_per_hit: f64,
}

/// Collapse figures: the cost of numbering the clusters, then each query.
#[derive(Debug, Clone, Serialize)]
pub struct CollapseReport {
    /// Milliseconds to number the clusters of the index (once per searcher generation: after
    /// each commit or merge, the first collapse pays it).
    pub numbering_ms: f64,
    /// Each query.
    pub queries: Vec<CollapseQueryReport>,
}

/// Times the collapse and the terms aggregation on each query, `repeats` times each after a
/// warm-up, and reports medians.
pub fn collapse_comparison(
    searcher: &DedupSearcher,
    queries: &[&str],
    repeats: usize,
) -> Result<CollapseReport> {
    let aggregations: Aggregations =
        serde_json::from_str(r#"{"by_root": {"terms": {"field": "root", "size": 10}}}"#)
            .map_err(|error| Error::Query(error.to_string()))?;
    let tantivy = searcher.tantivy_searcher();
    let started = Instant::now();
    let numbered = crate::engine::ClusterOrdinals::build(&tantivy).map_err(index_error)?;
    let numbering_ms = started.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box(numbered);
    let mut reports = Vec::new();
    for &keywords in queries {
        let request = SearchRequest::new(keywords)
            .sort(Sort::SimilarDesc)
            .page(0, 10);
        let query = searcher.query(&request)?;
        let collector = AggregationCollector::from_aggs(
            aggregations.clone(),
            AggContextParams::new(
                AggregationLimitsGuard::default(),
                tantivy.index().tokenizers().clone(),
            ),
        );
        let time = |work: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
            work()?;
            let mut samples = Vec::with_capacity(repeats);
            for _ in 0..repeats.max(1) {
                let started = Instant::now();
                work()?;
                samples.push(started.elapsed().as_secs_f64() * 1e3);
            }
            samples.sort_by(f64::total_cmp);
            Ok(percentile(&samples, 0.5))
        };
        let (mut hits, mut clusters) = (0, 0);
        let collapse_ms = time(&mut || {
            let collector = CollapseCollector::new(
                searcher.cluster_ordinals(&tantivy)?,
                Sort::SimilarDesc,
                0,
                10,
            );
            let collapsed = tantivy.search(&*query, &collector).map_err(index_error)?;
            hits = collapsed.total_hits;
            clusters = collapsed.total_clusters;
            std::hint::black_box(collapsed.clusters);
            Ok(())
        })?;
        let search_ms = time(&mut || {
            std::hint::black_box(searcher.search(&request)?);
            Ok(())
        })?;
        let terms_aggregation_ms = time(&mut || {
            std::hint::black_box(tantivy.search(&*query, &collector).map_err(index_error)?);
            Ok(())
        })?;
        reports.push(CollapseQueryReport {
            query: keywords.to_owned(),
            hits,
            clusters,
            collapse_ms,
            search_ms,
            terms_aggregation_ms,
            ratio: collapse_ms / terms_aggregation_ms,
            ns_per_hit: collapse_ms * 1e6 / hits.max(1) as f64,
        });
    }
    Ok(CollapseReport {
        numbering_ms,
        queries: reports,
    })
}

/// Detail-page latency.
#[derive(Debug, Clone, Serialize)]
pub struct DetailReport {
    /// Detail pages timed.
    pub queries: usize,
    /// Of the documents asked for, how many had others in their cluster.
    pub with_others: usize,
    /// Median microseconds.
    pub p50_us: f64,
    /// 99th percentile microseconds (target <= 1000).
    pub p99_us: f64,
}

/// Times `similar(id, 0, 10)` for `queries` documents drawn at random (half of them from
/// clusters with several documents, when there are enough).
pub fn detail_latency(searcher: &DedupSearcher, queries: usize) -> Result<DetailReport> {
    let tantivy = searcher.tantivy_searcher();
    let all = tantivy
        .search(&AllQuery, &DocSetCollector)
        .map_err(index_error)?;
    let mut ids = Vec::new();
    let mut repeated = Vec::new();
    for address in all {
        let document: TantivyDocument = tantivy.doc(address).map_err(index_error)?;
        let Some(id) = document
            .get_first(searcher.fields().id)
            .and_then(|value| tantivy::schema::Value::as_str(&value))
            .map(str::to_owned)
        else {
            continue;
        };
        let root = fast_value::<u64>(&tantivy, address, schema::ROOT).map_err(index_error)?;
        if let Some(root) = root
            && searcher.cluster_size(crate::Fingerprint(root))? > 1
        {
            repeated.push(id.clone());
        }
        ids.push(id);
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let mut samples = Vec::with_capacity(queries);
    let mut with_others = 0;
    for i in 0..queries {
        let pool = if i % 2 == 0 && !repeated.is_empty() {
            &repeated
        } else {
            &ids
        };
        let Some(id) = pool.choose(&mut rng) else {
            break;
        };
        let started = Instant::now();
        let page = searcher.similar(id, 0, 10)?;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
        with_others += usize::from(page.is_some_and(|page| page.total > 0));
    }
    samples.sort_by(f64::total_cmp);
    Ok(DetailReport {
        queries: samples.len(),
        with_others,
        p50_us: percentile(&samples, 0.5),
        p99_us: percentile(&samples, 0.99),
    })
}
