//! Dedup on a schema of the caller's own (`DedupFields` + `DedupWriter`), on a real index on
//! disk: it decides as the news index does (one insert path), reopening decides as an
//! uninterrupted run does, and collapsing the caller's own filters gives the counts of a
//! brute-force grouping of the live documents.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use tantivy::collector::Count;
use tantivy::query::{AllQuery, Query, RangeQuery, TermQuery};
use tantivy::schema::{
    DateOptions, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions,
};
use tantivy::{DateTime, Index, IndexWriter, TantivyDocument, Term};
use tantivy_dedup::engine::schema::{DELETED_AT, DedupFields, TOKENIZER};
use tantivy_dedup::engine::{ClusterOrdinals, CollapseCollector, DedupIndex, DedupWriter, Sort};
use tantivy_dedup::{Article, DedupConfig, Fingerprint};

use crate::engine_recovery::{SOURCES, Step, config, run, workload};

/// A platform's schema: an id, a body, its own `group` number, a publication time.
struct PlatformSchema {
    schema: Schema,
    id: Field,
    body: Field,
    group: Field,
    published: Field,
    dedup: DedupFields,
}

fn platform_schema(config: &DedupConfig) -> PlatformSchema {
    let mut builder = Schema::builder();
    let id = builder.add_text_field("id", STRING | STORED);
    let body = builder.add_text_field(
        "body",
        TextOptions::default().set_stored().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        ),
    );
    let group = builder.add_u64_field("group", INDEXED | FAST);
    let published =
        builder.add_date_field("published", DateOptions::default().set_indexed().set_fast());
    let dedup = DedupFields::add_to(&mut builder, config).unwrap();
    PlatformSchema {
        schema: builder.build(),
        id,
        body,
        group,
        published,
        dedup,
    }
}

/// The platform's own number for an article: its outlet's place in the list.
fn group_of(article: &Article) -> u64 {
    let source = article.source.as_deref().unwrap_or_default();
    SOURCES.iter().position(|&s| s == source).unwrap_or(0) as u64
}

fn document(fields: &PlatformSchema, article: &Article) -> TantivyDocument {
    let mut document = TantivyDocument::default();
    document.add_text(fields.id, &article.id);
    document.add_text(fields.body, &article.content);
    document.add_u64(fields.group, group_of(article));
    if let Some(time) = article.published_at {
        document.add_date(fields.published, DateTime::from_timestamp_secs(time));
    }
    document
}

/// An index of the platform's schema on disk, with its writer and the forest beside it.
struct Platform {
    fields: PlatformSchema,
    writer: IndexWriter,
    dedup: DedupWriter,
}

impl Platform {
    fn create(dir: &Path) -> Platform {
        let config = config().dedup;
        let fields = platform_schema(&config);
        std::fs::create_dir_all(dir).unwrap();
        let index = Index::create_in_dir(dir, fields.schema.clone()).unwrap();
        Self::with_index(fields, index)
    }

    fn open(dir: &Path) -> Platform {
        let index = Index::open_in_dir(dir).unwrap();
        let fields = platform_schema(&config().dedup);
        assert_eq!(index.schema(), fields.schema);
        Self::with_index(fields, index)
    }

    fn with_index(fields: PlatformSchema, index: Index) -> Platform {
        tantivy_dedup::engine::register_tokenizer(&index);
        let writer = index.writer_with_num_threads(1, 20_000_000).unwrap();
        let dedup = DedupWriter::builder(config().dedup)
            .id_field(fields.id)
            .time_field(fields.published)
            .text_fields([fields.body])
            .open(&index)
            .unwrap();
        Platform {
            fields,
            writer,
            dedup,
        }
    }

    /// Runs steps, committing every `commit_every`; returns each add's root (`None` for a
    /// delete) and keeps `live` (id → root and group) up to date.
    fn run(
        &mut self,
        steps: &[Step],
        commit_every: usize,
        live: &mut BTreeMap<String, (Fingerprint, u64)>,
    ) -> Vec<Option<Fingerprint>> {
        let mut roots = Vec::with_capacity(steps.len());
        for (number, step) in steps.iter().enumerate() {
            match step {
                Step::Add(article) => {
                    let document = document(&self.fields, article);
                    let decision = self.dedup.add_document(&self.writer, document).unwrap();
                    live.insert(article.id.clone(), (decision.root, group_of(article)));
                    roots.push(Some(decision.root));
                }
                Step::Delete(id) => {
                    let deleted = self.dedup.delete(&self.writer, id).unwrap();
                    assert_eq!(deleted, live.remove(id).is_some(), "delete {id}");
                    roots.push(None);
                }
            }
            if (number + 1) % commit_every == 0 {
                self.dedup.commit(&mut self.writer).unwrap();
            }
        }
        self.dedup.commit(&mut self.writer).unwrap();
        roots
    }

    fn close(self) {
        drop(self.dedup);
        self.writer.wait_merging_threads().unwrap();
    }
}

/// [`platform_schema`] as a build before [`DELETED_AT`] made it.
fn platform_schema_before_deleted_at(config: &DedupConfig) -> PlatformSchema {
    let mut fields = platform_schema(config);
    let mut builder = Schema::builder();
    for (_, entry) in fields.schema.fields() {
        if entry.name() != DELETED_AT {
            builder.add_field(entry.clone());
        }
    }
    fields.schema = builder.build();
    fields.dedup = DedupFields::from_schema(&fields.schema).unwrap();
    fields
}

#[test]
fn an_index_made_before_deleted_at_replays_its_deletes_at_the_end() {
    // Its tombstones record no place among the inserts: the replay takes their documents off
    // at its end, as it did when the index was made, and says how many.
    let steps = workload(7, 300);
    let dir = tempfile::tempdir().unwrap();
    let fields = platform_schema_before_deleted_at(&config().dedup);
    assert_eq!(fields.dedup.deleted_at, None);
    let index = Index::create_in_dir(dir.path(), fields.schema.clone()).unwrap();
    let mut platform = Platform::with_index(fields, index);
    let mut live = BTreeMap::new();
    let mut roots = platform.run(&steps[..200], 37, &mut live);
    platform.close();

    let index = Index::open_in_dir(dir.path()).unwrap();
    let fields = platform_schema_before_deleted_at(&config().dedup);
    assert_eq!(index.schema(), fields.schema);
    let mut platform = Platform::with_index(fields, index);
    let deletes = steps[..200]
        .iter()
        .filter(|step| matches!(step, Step::Delete(_)))
        .count();
    let recovery = platform.dedup.recovery();
    assert!(deletes > 0 && recovery.deletes_at_end > 0, "{recovery:?}");
    assert_eq!(recovery.mismatched_roots, 0);
    roots.extend(platform.run(&steps[200..], 37, &mut live));
    platform.dedup.forest().check_invariants().unwrap();
    let news_dir = tempfile::tempdir().unwrap();
    let mut news = DedupIndex::create(news_dir.path(), config()).unwrap();
    assert_eq!(roots, run(&mut news, &steps), "decisions as before");
}

#[test]
fn an_own_schema_decides_as_the_news_index_and_reopens_exactly() {
    let steps = workload(11, 500);
    let dir = tempfile::tempdir().unwrap();

    // The news index, fingerprinting the same text, through the same insert path.
    let mut news = DedupIndex::create(&dir.path().join("news"), config()).unwrap();
    let expected = run(&mut news, &steps);

    let mut live = BTreeMap::new();
    let straight = Platform::create(&dir.path().join("straight")).run(&steps, 37, &mut live);
    assert_eq!(
        straight, expected,
        "the own schema decides as the news index"
    );

    // Reopened after each part: the replay gives the uninterrupted run's decisions.
    let path = dir.path().join("reopened");
    let mut platform = Platform::create(&path);
    let mut live = BTreeMap::new();
    let mut roots = Vec::new();
    for part in steps.chunks(120) {
        roots.extend(platform.run(part, 37, &mut live));
        platform.close();
        platform = Platform::open(&path);
        assert_eq!(platform.dedup.recovery().mismatched_roots, 0);
    }
    assert_eq!(roots, expected, "reopening changes no decision");
    platform.dedup.forest().check_invariants().unwrap();
}

/// The clusters a filter's matches fall in, by brute force over the live documents: per root,
/// (matching documents, all live documents).
fn brute_force(
    live: &BTreeMap<String, (Fingerprint, u64)>,
    matches: impl Fn(u64) -> bool,
) -> BTreeMap<Fingerprint, (u64, u64)> {
    let mut sizes: BTreeMap<Fingerprint, u64> = BTreeMap::new();
    for (root, _) in live.values() {
        *sizes.entry(*root).or_default() += 1;
    }
    let mut clusters: BTreeMap<Fingerprint, (u64, u64)> = BTreeMap::new();
    for (root, _) in live.values().filter(|(_, group)| matches(*group)) {
        clusters.entry(*root).or_insert((0, sizes[root])).0 += 1;
    }
    clusters
}

/// A query of the platform's with the rule it stands for: its name, the query, and which
/// `group` values it matches.
type Filter = (String, Box<dyn Query>, Box<dyn Fn(u64) -> bool>);

#[test]
fn collapsing_own_filters_counts_as_brute_force() {
    let steps = workload(12, 400);
    let dir = tempfile::tempdir().unwrap();
    let mut platform = Platform::create(dir.path());
    let mut live = BTreeMap::new();
    platform.run(&steps, 50, &mut live);
    let searcher = platform.dedup.reader().searcher();
    let ordinals = Arc::new(ClusterOrdinals::build(&searcher).unwrap());
    let group = platform.fields.group;
    let dedup = &platform.fields.dedup;

    let filters: Vec<Filter> = vec![
        (
            "every live document".into(),
            Box::new(dedup.live(Box::new(AllQuery))),
            Box::new(|_| true),
        ),
        (
            "group = 2".into(),
            Box::new(TermQuery::new(
                Term::from_field_u64(group, 2),
                IndexRecordOption::Basic,
            )),
            Box::new(|g| g == 2),
        ),
        (
            "group in 1..=3".into(),
            Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_u64(group, 1)),
                Bound::Included(Term::from_field_u64(group, 3)),
            )),
            Box::new(|g| (1..=3).contains(&g)),
        ),
    ];
    for (name, query, matches) in &filters {
        let expected = brute_force(&live, matches);
        let page = searcher
            .search(
                query.as_ref(),
                &CollapseCollector::new(Arc::clone(&ordinals), Sort::SimilarDesc, 0, 1000),
            )
            .unwrap();
        let found: BTreeMap<Fingerprint, (u64, u64)> = page
            .clusters
            .iter()
            .map(|cluster| (cluster.root, (cluster.hits, cluster.size)))
            .collect();
        assert_eq!(found, expected, "{name}");
        assert_eq!(page.total_clusters, expected.len() as u64, "{name}");
        let hits: u64 = expected.values().map(|(hits, _)| hits).sum();
        assert_eq!(page.total_hits, hits, "{name}");
        let sizes: Vec<u64> = page.clusters.iter().map(|cluster| cluster.size).collect();
        assert!(
            sizes.is_sorted_by(|a, b| a >= b),
            "{name}: most similar first"
        );
    }

    // The detail query lists exactly a cluster's live documents; tombstones are never
    // counted, though the workload left some.
    let roots: BTreeSet<Fingerprint> = live.values().map(|(root, _)| *root).collect();
    assert!(
        roots.len() > 20 && roots.len() < live.len(),
        "clusters of several"
    );
    for root in roots {
        let size = live.values().filter(|(r, _)| *r == root).count();
        let counted = searcher.search(&dedup.cluster_query(root), &Count).unwrap();
        assert_eq!(counted, size, "cluster {root}");
    }
    let everything = searcher.search(&AllQuery, &Count).unwrap();
    assert!(everything > live.len(), "AllQuery also sees the tombstones");
    assert_eq!(
        searcher
            .search(&dedup.live(Box::new(AllQuery)), &Count)
            .unwrap(),
        live.len()
    );
}

#[test]
fn a_schema_without_the_dedup_fields_or_with_other_settings_is_refused() {
    let mut builder = Schema::builder();
    let body = builder.add_text_field("body", STRING);
    let index = Index::create_in_ram(builder.build());
    let error = DedupWriter::builder(DedupConfig::default())
        .text_fields([body])
        .open(&index)
        .err()
        .unwrap();
    assert!(error.to_string().contains("DedupFields::add_to"), "{error}");

    let fields = platform_schema(&DedupConfig::default());
    let index = Index::create_in_ram(fields.schema.clone());
    let other_k = DedupConfig {
        max_distance: 5,
        ..DedupConfig::default()
    };
    let error = DedupWriter::builder(other_k)
        .text_fields([fields.body])
        .open(&index)
        .err()
        .unwrap();
    assert!(error.to_string().contains("block fields"), "{error}");
    for builder in [
        DedupWriter::builder(DedupConfig::default()),
        DedupWriter::builder(DedupConfig::default()).text_fields([fields.group]),
        DedupWriter::builder(DedupConfig::default())
            .text_fields([fields.body])
            .time_field(fields.group),
    ] {
        assert!(builder.open(&index).is_err());
    }
}
