//! The library's tests, over the core alone (no feature needed: `cargo test
//! --no-default-features` runs them): text, index, forest, verification and the Tantivy
//! engine, each against brute force or an independent model, on text written for the tests.
//!
//! One test binary with a module per subject, rather than a binary per file: each binary links
//! Tantivy and jieba again, which costs more than the tests take to run.

mod chinese_search;
mod engine_collapse;
mod engine_deadline;
mod engine_histogram;
mod engine_ordinals;
mod engine_recovery;
mod engine_shards;
mod forest_invariants;
mod index_bruteforce;
mod own_fields;
mod own_schema;
mod quality;
mod text_golden;
