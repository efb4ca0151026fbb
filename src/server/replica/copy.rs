//! A new replica from a copy of a sibling's committed index. The sibling first records the new
//! replica at its last commit's log position, so that the log keeps every entry after it, then
//! streams that commit's files as a tar archive (`copy_index`); `tantivy-dedup copy-replica`
//! unpacks it into a new index directory ([`unpack_copy`]), and the new replica, once started,
//! applies the log from there. The sibling goes on writing meanwhile: the files of the commit
//! copied stay on disk until the copy is done ([`CommitFiles`]).

use std::io::{self, Read, Write};
use std::path::{Component, Path};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::{LogPosition, ReplicaState, check_name};
use crate::engine::CommitFiles;
use crate::server::api::{AppResult, blocking};
use crate::server::error::{ApiError, ErrorBody};
use crate::{Error, Result};

/// The header of a copy's answer that says the log position of the commit copied.
pub const COPY_POSITION_HEADER: &str = "x-log-position";

/// The header of a copy's answer that says the shard copied (`I/N`).
pub const COPY_SHARD_HEADER: &str = "x-shard";

/// The bytes sent at once.
const CHUNK_BYTES: usize = 256 << 10;

/// Who the copy is for.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CopyParams {
    /// The new replica's name: the log keeps every entry after the commit copied for it.
    replica: String,
}

/// This replica's last commit as a tar archive, for a new replica of the shard
/// (`tantivy-dedup copy-replica`): first the settings file and the segments' files, then
/// `meta.json`, so that an archive cut short holds no index.
#[utoipa::path(
    get,
    path = "/internal/v1/copy",
    tag = "shards",
    params(CopyParams),
    responses(
        (status = 200, description = "The archive; `x-log-position` is the commit's log \
            position, `x-shard` the shard", content_type = "application/x-tar", body = String),
        (status = 400, description = "A name that is not a replica's, or this one's",
            body = ErrorBody),
    ),
)]
pub(crate) async fn copy_index(
    State(state): State<ReplicaState>,
    Query(params): Query<CopyParams>,
) -> AppResult<Response> {
    let replica = &state.replica;
    check_name(&params.replica)
        .map_err(|error| ApiError::bad_request("invalid_replica", error.to_string()))?;
    if params.replica == replica.name {
        return Err(ApiError::bad_request(
            "invalid_replica",
            format!(
                "{:?} is this replica's own name: a copy needs a name of its own",
                params.replica
            ),
        ));
    }
    let searcher = state.app.searcher.clone();
    let files = blocking(move || Ok(searcher.commit_files()?)).await?;
    let position = match files.log_position() {
        Some(position) => position
            .parse()
            .map_err(|error: super::BadPosition| ApiError::internal(error))?,
        None => LogPosition::START,
    };
    replica
        .log
        .record(&params.replica, position, replica.max_entries)
        .await
        .map_err(|error| ApiError::unavailable("store_unavailable", error.to_string(), 1))?;
    tracing::info!(copy = %params.replica, %position, files = files.files().len() + 1, "copying this replica's last commit");
    let (sender, receiver) = mpsc::channel::<io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let mut chunks = Chunks {
            sender: sender.clone(),
            buffer: Vec::with_capacity(CHUNK_BYTES),
        };
        if let Err(error) = write_archive(&files, &mut chunks).and_then(|()| chunks.flush()) {
            tracing::warn!(%error, "the copy was not sent whole");
            let _ = sender.blocking_send(Err(error));
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    for (name, value) in [
        (COPY_POSITION_HEADER, position.to_string()),
        (COPY_SHARD_HEADER, replica.shard.to_string()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}

/// Writes `files` as a tar archive, `meta.json` last.
fn write_archive(files: &CommitFiles, out: impl Write) -> io::Result<()> {
    let mut archive = tar::Builder::new(out);
    for file in files.files() {
        archive.append_path_with_name(files.dir().join(file), file)?;
    }
    let (name, json) = files.meta_json().map_err(io::Error::other)?;
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    archive.append_data(&mut header, name, json.as_slice())?;
    archive.into_inner()?.flush()
}

/// A writer that sends what it is given in chunks to an HTTP body.
struct Chunks {
    sender: mpsc::Sender<io::Result<Bytes>>,
    buffer: Vec<u8>,
}

impl Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK_BYTES {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK_BYTES),
        ));
        self.sender
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the copy's client left"))
    }
}

/// What [`unpack_copy`] unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Files written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Unpacks a copy of a replica's index (the archive of `GET /internal/v1/copy`) into `dir`,
/// which must be missing or empty. An archive cut short (no `meta.json`), or holding anything
/// but plain files of one directory, is refused.
pub fn unpack_copy(archive: impl Read, dir: &Path) -> Result<CopyReport> {
    let io_error = |source: io::Error| Error::Io {
        path: dir.to_owned(),
        source,
    };
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::Config(format!(
                    "{} is not empty: a copy goes into a new directory",
                    dir.display()
                )));
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io_error)?;
        }
        Err(error) => return Err(io_error(error)),
    }
    let mut report = CopyReport { files: 0, bytes: 0 };
    let mut whole = false;
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries().map_err(io_error)? {
        let mut entry = entry.map_err(io_error)?;
        let path = entry.path().map_err(io_error)?.into_owned();
        let plain = matches!(
            path.components().collect::<Vec<_>>().as_slice(),
            [Component::Normal(_)]
        );
        if !plain || entry.header().entry_type() != tar::EntryType::Regular {
            return Err(Error::Config(format!(
                "the copy holds {}, which is not a file of an index directory",
                path.display()
            )));
        }
        report.bytes += entry.size();
        entry.unpack(dir.join(&path)).map_err(io_error)?;
        report.files += 1;
        whole |= path == Path::new(CommitFiles::META_FILE);
    }
    if !whole {
        return Err(Error::Config(format!(
            "the copy was cut short (it has no meta.json): {} holds no index; delete it and copy \
             again",
            dir.display()
        )));
    }
    Ok(report)
}
