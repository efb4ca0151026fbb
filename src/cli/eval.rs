//! `tantivy-dedup eval`: pairwise accuracy on a labeled file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tantivy_dedup::eval::{EvalReport, PairScores, evaluate};

use super::ConfigArgs;

#[derive(Args)]
pub struct EvalArgs {
    /// Labeled articles as JSON Lines (plain or gzip): each with `cluster` (the truth) and
    /// optionally `kind`
    #[arg(value_name = "LABELED")]
    file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let mode = config.mode;
    let report = evaluate(&args.file, config)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, &format!("{mode:?}").to_lowercase());
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(report: &EvalReport, mode: &str) {
    println!(
        "{} documents, mode {mode}, {:.0} documents/s",
        report.documents, report.documents_per_second
    );
    println!(
        "{:<8} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "pairs", "precision", "recall", "F1", "true", "predicted"
    );
    let row = |name: &str, scores: &PairScores| {
        println!(
            "{name:<8} {:>9.3} {:>9.3} {:>9.3} {:>12} {:>12}",
            scores.precision, scores.recall, scores.f1, scores.actual, scores.predicted
        )
    };
    row("all", &report.all);
    row("long", &report.long);
    row("short", &report.short);
    if !report.recall_by_kind.is_empty() {
        println!("recall of the true pairs each kind takes part in:");
        for (kind, recall) in &report.recall_by_kind {
            println!("  {kind:<16} {recall:.3}");
        }
    }
}
