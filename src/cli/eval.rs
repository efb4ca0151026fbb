//! `tantivy-dedup eval`: pairwise accuracy on a labeled file.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tantivy_dedup::eval::{EvalReport, evaluate};

use super::{ConfigArgs, counted};

#[derive(Args)]
pub struct EvalArgs {
    /// Labeled articles as JSON Lines (plain or gzip): each with `cluster` (the truth) and
    /// optionally `kind`
    #[arg(value_name = "LABELED")]
    file: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    /// Exit with status 1 when the F1 of all pairs is below this (a quality gate for CI)
    #[arg(long, value_name = "F1")]
    min_f1: Option<f64>,
    /// Exit with status 1 when the precision of all pairs is below this
    #[arg(long, value_name = "P")]
    min_precision: Option<f64>,
    /// Exit with status 1 when a predicted cluster holds more than this many true clusters (a
    /// list page's line that puts that many unrelated stories together)
    #[arg(long, value_name = "N")]
    max_stories_per_cluster: Option<usize>,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let mode = config.mode;
    let report = evaluate(&args.file, config)?;
    let mut out = io::stdout().lock();
    let written = if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["mode"] = mode.name().into();
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)
    } else {
        write_table(&mut out, &report, mode.name())
    };
    match written {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => return Err(error.into()),
        _ => {}
    }
    let failures = gate_failures(&args, &report);
    for failure in &failures {
        eprintln!("eval: {failure} on {}", args.file.display());
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What the report misses of the floors the arguments set, each said in a line.
fn gate_failures(args: &EvalArgs, report: &EvalReport) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(floor) = args.min_f1.filter(|&floor| report.all.f1 < floor) {
        failures.push(format!(
            "F1 {:.4} is below the required {floor}",
            report.all.f1
        ));
    }
    if let Some(floor) = args
        .min_precision
        .filter(|&floor| report.all.precision < floor)
    {
        failures.push(format!(
            "precision {:.4} is below the required {floor}",
            report.all.precision
        ));
    }
    if let Some(most) = args
        .max_stories_per_cluster
        .filter(|&most| report.over_merged.largest > most)
    {
        failures.push(format!(
            "a predicted cluster holds {} true clusters, more than the {most} allowed",
            report.over_merged.largest
        ));
    }
    failures
}

fn write_table(out: &mut impl Write, report: &EvalReport, mode: &str) -> io::Result<()> {
    writeln!(
        out,
        "{}, mode {mode}, {:.0} documents/s",
        counted(report.documents as u64, "document", "documents"),
        report.documents_per_second
    )?;
    writeln!(
        out,
        "{:<8} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "pairs", "precision", "recall", "F1", "true", "predicted"
    )?;
    let rows = [
        ("all", &report.all),
        ("long", &report.long),
        ("short", &report.short),
    ];
    for (name, scores) in rows {
        writeln!(
            out,
            "{name:<8} {:>9.3} {:>9.3} {:>9.3} {:>12} {:>12}",
            scores.precision, scores.recall, scores.f1, scores.actual, scores.predicted
        )?;
    }
    let merged = report.over_merged;
    writeln!(
        out,
        "over-merged: {} more than one true cluster; the largest holds {}",
        counted(
            merged.clusters as u64,
            "predicted cluster holds",
            "predicted clusters hold"
        ),
        merged.largest
    )?;
    if !report.recall_by_kind.is_empty() {
        writeln!(out, "recall of the true pairs each kind takes part in:")?;
        for (kind, recall) in &report.recall_by_kind {
            writeln!(out, "  {kind:<16} {recall:.3}")?;
        }
    }
    Ok(())
}
