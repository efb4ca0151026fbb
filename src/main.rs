//! The `tantivy-dedup` binary: a thin shell over the `tantivy_dedup` library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
