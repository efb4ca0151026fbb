//! Pigeonhole lookups against a linear popcount scan, at one million stored fingerprints (1%
//! planted near-duplicates). The 10M and 50M figures come from `tantivy-dedup bench`, which
//! measures each size in a fresh process.

use criterion::{Criterion, criterion_group, criterion_main};
use tantivy_dedup::Forest;
use tantivy_dedup::bench::{PlantedFingerprints, linear_scan};

fn lookups(c: &mut Criterion) {
    const STORED: usize = 1_000_000;
    let mut stream = PlantedFingerprints::new(7, 0.01, 3);
    let mut forest = Forest::new(3, 7 * 86_400).expect("valid settings");
    for _ in 0..STORED {
        forest.insert(stream.next_fingerprint(), 0);
    }
    let queries: Vec<_> = (0..1024).map(|_| stream.query()).collect();
    let flat: Vec<u64> = forest.fingerprints().map(|f| f.0).collect();

    let mut group = c.benchmark_group("lookup_1m");
    let mut next = 0;
    group.bench_function("pigeonhole", |b| {
        b.iter(|| {
            let query = queries[next % queries.len()];
            next += 1;
            let mut found = 0;
            forest.for_each_within(query, |_, _| found += 1);
            std::hint::black_box(found)
        })
    });
    group.sample_size(10);
    group.bench_function("linear_scan", |b| {
        b.iter(|| {
            let query = queries[next % queries.len()];
            next += 1;
            std::hint::black_box(linear_scan(&flat, query, 3))
        })
    });
    group.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
