//! The command-line tool, the HTTP service and the Redis store, end to end (feature `cli`):
//! the real binary and real servers on loopback, a real Redis Cluster of local `redis-server`
//! processes, `promtool` on a live `/metrics`, the web page in Debian's headless `chromium` (a
//! missing `redis-server`, `promtool` or `chromium` fails the tests that need it rather than
//! skipping them).
//!
//! One test binary with a module per subject (see `tests/core/main.rs` for why).

mod cli_dedup;
mod cli_eval;
mod cli_index;
mod cli_load;
mod cli_own_fields;
mod cli_polish;
mod cli_write;
mod full_disk;
mod metrics_scrape;
mod redis_cluster;
mod redis_cluster_smoke;
mod replicas;
mod required_programs;
mod resends;
mod search_platform;
mod serve_process;
mod server_api;
mod server_durability;
mod shards;
mod store_redis;
mod web_page;
