//! The `tantivy-dedup` binary: a thin shell over the `tantivy_dedup` library.

mod cli;

/// Articles are signed on every core at once, each with many small short-lived allocations;
/// glibc's malloc, shared by those threads, left `dedup` 15% slower on two cores
/// (BENCHMARKS.md, "The binary's allocator"). The library leaves the choice to its user.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::run()
}
