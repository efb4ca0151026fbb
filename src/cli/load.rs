//! `tantivy-dedup load`: JSON Lines into a running server, in gzip-compressed batches.
//!
//! What `ingest` does to an index directory, `load` does through the HTTP API, so that a big
//! file can go into a service that is running (and holds the index's lock). Each batch is
//! answered after the commit that makes it durable; a batch that was sent but not answered (a
//! dropped connection, a restarted server) is sent again, which is safe because the server
//! recognises a document sent again unchanged.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use flate2::Compression;
use flate2::write::GzEncoder;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tantivy_dedup::config::AccessKeys;
use tantivy_dedup::input::{self, Lines};

use super::counted;

#[derive(Args)]
pub struct LoadArgs {
    /// Articles as JSON Lines, plain or gzip-compressed; `-` reads standard input
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// The server, as `serve` printed it ("listening on ...")
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:7700")]
    url: String,
    /// Documents per request: at most the server's `max_batch_documents` (1000 by default)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    batch: u64,
    /// File holding the server's write key [default: $TANTIVY_DEDUP_WRITE_KEY, if set]
    #[arg(long, value_name = "FILE")]
    write_key_file: Option<PathBuf>,
    /// Times a batch is sent again when no answer came (the server is down, restarting, or
    /// the connection dropped), 0.5 s after the first try and twice as long each time, 32 s at
    /// most: the default waits about 30 s in all for a server that restarts; 0 stops at the
    /// first failure
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=16))]
    retries: u32,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
}

/// Raw bytes in one request at most, well under the server's default `max_body_mib` (32),
/// which counts the body after decompression.
const MAX_BATCH_BYTES: usize = 8 << 20;

/// The longest `load` waits in all for a busy server (503 with Retry-After) on one batch.
const MAX_BUSY_WAIT: Duration = Duration::from_secs(600);

/// What `load` did.
#[derive(Debug, Default, Serialize)]
struct Summary {
    url: String,
    /// Documents the server indexed (new or changed).
    indexed: u64,
    /// Of those, the ones that joined an earlier story.
    duplicates: u64,
    /// Documents sent again unchanged: already indexed, nothing changed.
    unchanged: u64,
    /// Lines refused, by the server or (too long) before sending.
    refused: u64,
    requests: u64,
    /// Times a batch waited for a busy server or was sent again after no answer.
    retries: u64,
    seconds: f64,
    documents_per_second: f64,
}

/// A POST's answer, as far as `load` reads it.
#[derive(Deserialize)]
struct Answer {
    error: Option<ErrorBody>,
    #[serde(default)]
    results: Vec<Outcome>,
    /// What the server says although nothing failed (no document had the time field: they
    /// were all dated by their arrival, which the user must hear before loading a whole file).
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Outcome {
    Refused {
        index: usize,
        error: ErrorBody,
    },
    Indexed {
        duplicate: bool,
        #[serde(default)]
        unchanged: bool,
    },
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

/// One request's documents: the NDJSON body and each document's line number.
struct Batch {
    body: Vec<u8>,
    lines: Vec<u64>,
}

impl Batch {
    fn new() -> Self {
        Batch {
            body: Vec::new(),
            lines: Vec::new(),
        }
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if let Some(missing) = args
        .files
        .iter()
        .find(|file| file.as_os_str() != "-" && !file.is_file())
    {
        bail!("{}: no such file", missing.display());
    }
    let key = AccessKeys::load(args.write_key_file.as_deref(), None)?.write;
    let endpoint = format!("{}/v1/documents", args.url.trim_end_matches('/'));
    let client = Client {
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A batch is answered after its commit; a slow disk can take a while.
            .timeout_global(Some(Duration::from_secs(300)))
            .build()
            .into(),
        endpoint,
        authorization: key.map(|key| key.bearer()),
        retries: args.retries,
    };
    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {pos} documents  {per_sec}  {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let start = Instant::now();
    let mut summary = Summary {
        url: args.url.clone(),
        ..Summary::default()
    };
    for file in &args.files {
        progress.set_message(file.display().to_string());
        let mut lines = Lines::new(input::open(file)?);
        let mut batch = Batch::new();
        // Every batch of a file carries the same warnings: each is printed once.
        let mut warned = HashSet::new();
        loop {
            let line = lines
                .next_line()
                .with_context(|| format!("reading {}", file.display()))?;
            let full =
                batch.lines.len() as u64 >= args.batch || batch.body.len() >= MAX_BATCH_BYTES;
            if (line.is_none() || full) && !batch.lines.is_empty() {
                let sent = std::mem::replace(&mut batch, Batch::new());
                client.send(&sent, file, &progress, &mut summary, &mut warned)?;
                progress.inc(sent.lines.len() as u64);
            }
            match line {
                None => break,
                Some((number, Ok(text))) => {
                    batch.body.extend_from_slice(&text);
                    batch.body.push(b'\n');
                    batch.lines.push(number);
                }
                Some((number, Err(too_long))) => {
                    summary.refused += 1;
                    progress
                        .suspend(|| eprintln!("{}:{number}: refused: {too_long}", file.display()));
                }
            }
        }
    }
    progress.finish_and_clear();
    summary.seconds = start.elapsed().as_secs_f64();
    let sent = summary.indexed + summary.unchanged;
    summary.documents_per_second = sent as f64 / summary.seconds.max(1e-9);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "load: {} indexed by {}: {} joined an earlier story, {} started one; {} unchanged \
             (already indexed); {} refused; {}, {:.1} s, {:.0} documents/s",
            summary.indexed,
            summary.url,
            summary.duplicates,
            summary.indexed - summary.duplicates,
            summary.unchanged,
            summary.refused,
            counted(summary.requests, "request", "requests"),
            summary.seconds,
            summary.documents_per_second
        );
    }
    Ok(if summary.refused > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The server's documents endpoint and how to present the key.
struct Client {
    agent: ureq::Agent,
    endpoint: String,
    authorization: Option<String>,
    /// Times a request left unanswered is sent again.
    retries: u32,
}

impl Client {
    /// Sends one batch until the server answers it, and counts the answer: waits out a busy
    /// server (503 with Retry-After), sends again when no answer came, and stops on anything
    /// that sending again cannot fix (a refused key, a body too large, a wrong address). Prints
    /// the answer's warnings that are not in `warned` yet, and adds them.
    fn send(
        &self,
        batch: &Batch,
        file: &Path,
        progress: &ProgressBar,
        summary: &mut Summary,
        warned: &mut HashSet<String>,
    ) -> anyhow::Result<()> {
        let mut body = GzEncoder::new(Vec::new(), Compression::fast());
        body.write_all(&batch.body)?;
        let body = body.finish()?;
        let (mut failures, mut busy) = (0u32, Duration::ZERO);
        let (status, text) = loop {
            summary.requests += 1;
            let mut request = self
                .agent
                .post(&self.endpoint)
                .header("content-type", "application/x-ndjson")
                .header("content-encoding", "gzip");
            if let Some(authorization) = &self.authorization {
                request = request.header("authorization", authorization);
            }
            let answer = request.send(&body[..]).and_then(|mut response| {
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
                let text = response.body_mut().read_to_string()?;
                Ok((response.status().as_u16(), retry_after, text))
            });
            match answer {
                Ok((503, retry_after, _)) if busy < MAX_BUSY_WAIT => {
                    let wait = Duration::from_secs(retry_after.unwrap_or(1).clamp(1, 60));
                    progress.set_message(format!("the server is busy; waiting {wait:?}"));
                    thread::sleep(wait);
                    busy += wait;
                    summary.retries += 1;
                }
                Ok((status, _, text)) => break (status, text),
                Err(error) if failures < self.retries => {
                    let wait = Duration::from_millis(500 << failures.min(6));
                    progress.set_message(format!("no answer ({error}); again in {wait:?}"));
                    thread::sleep(wait);
                    failures += 1;
                    summary.retries += 1;
                }
                Err(error) => bail!(
                    "cannot reach {} ({error}); is `tantivy-dedup serve` running there?",
                    self.endpoint
                ),
            }
        };
        progress.set_message(file.display().to_string());
        let answer: Option<Answer> = serde_json::from_str(&text).ok();
        let Some(answer) = answer.filter(|answer| !answer.results.is_empty()) else {
            // No per-document results: the request as a whole was refused.
            let message = serde_json::from_str::<Answer>(&text)
                .ok()
                .and_then(|answer| answer.error)
                .map_or_else(
                    || text.trim().to_owned(),
                    |error| format!("{} ({})", error.message, error.code),
                );
            let hint = match status {
                401 => "; give the write key with --write-key-file or $TANTIVY_DEDUP_WRITE_KEY",
                413 => "; send fewer documents a request (--batch)",
                _ => "",
            };
            bail!("{} answered {status}: {message}{hint}", self.endpoint);
        };
        for warning in answer.warnings {
            if !warned.contains(&warning) {
                progress.suspend(|| eprintln!("{}: warning: {warning}", file.display()));
                warned.insert(warning);
            }
        }
        for outcome in answer.results {
            match outcome {
                Outcome::Indexed {
                    unchanged: true, ..
                } => summary.unchanged += 1,
                Outcome::Indexed { duplicate, .. } => {
                    summary.indexed += 1;
                    summary.duplicates += u64::from(duplicate);
                }
                Outcome::Refused { index, error } => {
                    summary.refused += 1;
                    let line = batch.lines.get(index).copied().unwrap_or_default();
                    progress.suspend(|| {
                        eprintln!(
                            "{}:{line}: refused: {} ({})",
                            file.display(),
                            error.message,
                            error.code
                        )
                    });
                }
            }
        }
        Ok(())
    }
}
