//! Pigeonhole lookups against a linear popcount scan, at one million stored fingerprints (1%
//! planted near-duplicates): the forest's default 4 tables, the permuted layouts of 10, 16 and
//! 20 tables, and the scan. The 10M and 50M figures come from `tantivy-dedup bench`, which
//! measures each size in a fresh process.

use criterion::{Criterion, criterion_group, criterion_main};
use tantivy_dedup::bench::{PlantedFingerprints, linear_scan};
use tantivy_dedup::index::{BlockLayout, PigeonholeIndex};
use tantivy_dedup::{Fingerprint, Forest};

const STORED: usize = 1_000_000;

/// Times `lookup` over the queries in turn.
fn bench_lookups(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    queries: &[Fingerprint],
    lookup: impl Fn(Fingerprint) -> usize,
) {
    let mut next = 0;
    group.bench_function(name, |b| {
        b.iter(|| {
            let query = queries[next % queries.len()];
            next += 1;
            std::hint::black_box(lookup(query))
        })
    });
}

fn lookups(c: &mut Criterion) {
    let mut stream = PlantedFingerprints::new(7, 0.01, 3);
    let stored: Vec<Fingerprint> = (0..STORED).map(|_| stream.next_fingerprint()).collect();
    let queries: Vec<_> = (0..1024).map(|_| stream.query()).collect();
    let mut forest = Forest::new(3, 7 * 86_400).expect("valid settings");
    for &fingerprint in &stored {
        forest.insert(fingerprint, 0);
    }

    let mut group = c.benchmark_group("lookup_1m");
    bench_lookups(&mut group, "pigeonhole", &queries, |query| {
        let mut found = 0;
        forest.for_each_within(query, |_, _| found += 1);
        found
    });
    for tables in [10, 16, 20] {
        let layout = BlockLayout::with_tables(3, tables).expect("a layout of k = 3");
        let mut index = PigeonholeIndex::with_layout(layout);
        for &fingerprint in &stored {
            index.insert(fingerprint, ());
        }
        bench_lookups(&mut group, &format!("tables_{tables}"), &queries, |query| {
            let mut found = 0;
            index.for_each_within(query, |_, _| found += 1);
            found
        });
    }
    let flat: Vec<u64> = forest.fingerprints().map(|f| f.0).collect();
    group.sample_size(10);
    bench_lookups(&mut group, "linear_scan", &queries, |query| {
        linear_scan(&flat, query, 3)
    });
    group.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
