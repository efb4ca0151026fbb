//! The `tantivy-dedup` binary: a thin shell over the `tantivy_dedup` library.

mod allocator;
mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
