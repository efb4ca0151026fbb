//! Pigeonhole lookups against a linear popcount scan, at one million stored fingerprints (1%
//! planted near-duplicates): the default 4 tables ("pigeonhole"), the permuted layouts of 10,
//! 16 and 20 tables, and the scan. The 10M and 50M figures come from `tantivy-dedup bench`,
//! which measures each size in a fresh process.

use criterion::{Criterion, criterion_group, criterion_main};
use tantivy_dedup::Forest;
use tantivy_dedup::bench::{PlantedFingerprints, linear_scan};
use tantivy_dedup::index::BlockLayout;

fn lookups(c: &mut Criterion) {
    const STORED: usize = 1_000_000;
    let mut stream = PlantedFingerprints::new(7, 0.01, 3);
    let stored: Vec<_> = (0..STORED).map(|_| stream.next_fingerprint()).collect();
    let queries: Vec<_> = (0..1024).map(|_| stream.query()).collect();

    let mut group = c.benchmark_group("lookup_1m");
    for tables in [4, 10, 16, 20] {
        let layout = BlockLayout::with_tables(3, tables).expect("a layout of k = 3");
        let mut forest = Forest::with_layout(layout, 7 * 86_400).expect("valid settings");
        for &fingerprint in &stored {
            forest.place(fingerprint, 0);
        }
        let name = match tables {
            4 => "pigeonhole".to_string(),
            _ => format!("tables_{tables}"),
        };
        let mut next = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                let query = queries[next % queries.len()];
                next += 1;
                let mut found = 0;
                forest.for_each_within(query, |_, _| found += 1);
                std::hint::black_box(found)
            })
        });
    }
    let flat: Vec<u64> = stored.iter().map(|f| f.0).collect();
    group.sample_size(10);
    let mut next = 0;
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
