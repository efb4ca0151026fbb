//! `tantivy-dedup delete`: documents out of an index by id, committed at once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tantivy_dedup::engine::{DedupIndex, stored_settings};

use super::{StoreArgs, counted};

#[derive(Args)]
pub struct DeleteArgs {
    /// Index directory (as written by `ingest`); it must exist
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Ids of the documents to delete
    #[arg(value_name = "ID", required = true)]
    ids: Vec<String>,
    /// Print the outcome as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// What `delete` did.
#[derive(Serialize)]
struct Outcome {
    deleted: Vec<String>,
    not_found: Vec<String>,
}

pub fn run(args: DeleteArgs) -> anyhow::Result<ExitCode> {
    let opening = || format!("opening {}", args.index.display());
    // Refused when there is no index (the error names the directory): deleting from nothing
    // must not create one.
    let settings = stored_settings(&args.index)?;
    let mut index =
        DedupIndex::open_or_create_with_store(&args.index, Some(settings), args.store.shared()?, 1)
            .with_context(opening)?;
    let mut outcome = Outcome {
        deleted: Vec::new(),
        not_found: Vec::new(),
    };
    for id in args.ids {
        if index.delete(&id)? {
            outcome.deleted.push(id);
        } else {
            outcome.not_found.push(id);
        }
    }
    index.commit()?;
    index.close()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!(
            "delete: deleted {} from {}; the clusters keep their other documents",
            counted(outcome.deleted.len() as u64, "document", "documents"),
            args.index.display()
        );
        if !outcome.not_found.is_empty() {
            eprintln!(
                "delete: no document with id {}",
                outcome.not_found.join(", ")
            );
        }
    }
    Ok(if outcome.not_found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
