//! `tantivy-dedup copy-replica`: a new replica's index, copied from a running sibling.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use tantivy_dedup::config::AccessKeys;
use tantivy_dedup::server::replica::{COPY_POSITION_HEADER, COPY_SHARD_HEADER, unpack_copy};

use super::{counted, size};

#[derive(Args)]
pub struct CopyReplicaArgs {
    /// A running replica of the shard to copy (serve --shard I/N --replica NAME): its URL,
    /// such as http://127.0.0.1:7711
    #[arg(long, value_name = "URL")]
    from: String,
    /// The new replica's name, different from its siblings': the shard's log keeps every
    /// entry after the commit copied for it
    #[arg(long, value_name = "NAME")]
    replica: String,
    /// The new replica's index directory: missing or empty
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// File holding the servers' write key [default: $TANTIVY_DEDUP_WRITE_KEY, if set]
    #[arg(long, value_name = "FILE")]
    write_key_file: Option<PathBuf>,
}

pub fn run(args: CopyReplicaArgs) -> anyhow::Result<ExitCode> {
    let key = AccessKeys::load(args.write_key_file.as_deref(), None)?.write;
    let from = args.from.trim_end_matches('/');
    let url = format!(
        "{from}/internal/v1/copy?replica={}",
        form_urlencoded::byte_serialize(args.replica.as_bytes()).collect::<String>()
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(key) = &key {
        request = request.header("authorization", key.bearer());
    }
    let started = Instant::now();
    let mut response = request
        .call()
        .with_context(|| format!("asking {from} for a copy"))?;
    let status = response.status().as_u16();
    if status != 200 {
        let body = response.body_mut().read_to_string().unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|answer| Some(answer.pointer("/error/message")?.as_str()?.to_owned()))
            .unwrap_or(body);
        let hint = if status == 401 {
            "; give the write key with --write-key-file or $TANTIVY_DEDUP_WRITE_KEY"
        } else {
            ""
        };
        bail!("{from} answered {status}: {}{hint}", message.trim());
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("?")
            .to_owned()
    };
    let (position, shard) = (header(COPY_POSITION_HEADER), header(COPY_SHARD_HEADER));
    let report = unpack_copy(response.body_mut().as_reader(), &args.index)
        .with_context(|| format!("copying {from} into {}", args.index.display()))?;
    println!(
        "copy-replica: copied {} ({}) of shard {shard}, at log position {position}, into {} in \
         {:.1} s",
        counted(report.files as u64, "file", "files"),
        size(report.bytes),
        args.index.display(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "start it with: tantivy-dedup serve --index {} --shard {shard} --replica {} --store <the \
         shard's store>, then add its URL to the coordinators' --shards",
        args.index.display(),
        args.replica
    );
    Ok(ExitCode::SUCCESS)
}
