//! Fingerprinting throughput on the news corpus (one core), reported by criterion in bytes/s.
//!
//! Reads `../shared/data/xwlb-news.jsonl.gz` (or the file named by `TANTIVY_DEDUP_CORPUS`);
//! without it (it is not shipped with the repository: README "Evaluation data"), falls back to
//! generated text so the bench still runs, and says so.

use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tantivy_dedup::bench::load_contents;
use tantivy_dedup::text::{Fingerprinter, Weighting};

fn corpus() -> Vec<String> {
    let path = std::env::var_os("TANTIVY_DEDUP_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data/xwlb-news.jsonl.gz"));
    match load_contents(&path, Some(2_000)) {
        Ok(texts) if !texts.is_empty() => texts,
        read => {
            let why = match read {
                Err(error) => error.to_string(),
                Ok(_) => format!("{}: no text", path.display()),
            };
            eprintln!("{why}\nfingerprint bench: using generated text instead");
            (0..2_000)
                .map(|i| format!("第{i}条消息：今天上午，市政府召开新闻发布会，介绍城市更新和民生工程进展情况。").repeat(8))
                .collect()
        }
    }
}

fn fingerprinting(c: &mut Criterion) {
    let texts = corpus();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mut group = c.benchmark_group("fingerprint");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    for (name, weighting) in [("tf", Weighting::Tf), ("tf-idf", Weighting::TfIdf)] {
        let fingerprinter = Fingerprinter::new(weighting, false);
        fingerprinter.fingerprint("预热");
        group.bench_function(name, |b| {
            b.iter(|| {
                for text in &texts {
                    std::hint::black_box(fingerprinter.fingerprint(text));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fingerprinting);
criterion_main!(benches);
