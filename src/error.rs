//! The library's error type.

use std::path::PathBuf;

/// Everything that can go wrong in tantivy-dedup's library calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is out of range or inconsistent; the message says which and why.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A configuration file is not valid TOML or does not match the settings it may hold.
    #[error("cannot read configuration {path}: {message}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The user dictionary (`[index] user_dict`) cannot be used: a line that is not a word
    /// with an optional frequency and tag, or a process that already splits text otherwise.
    #[error("cannot use the user dictionary {path} ([index] user_dict): {message}")]
    UserDictionary {
        /// The dictionary's file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A line of input data is unusable for the operation (e.g. labeled data without a label).
    #[error("{path}:{line}: {message}")]
    Data {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing a file failed.
    // The OS's message is the source, so that error chains (anyhow's `{:#}`) print it once.
    #[error("cannot read or write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// An input file does not exist. For a file of the project's evaluation data, `note`
    /// says that it is not shipped with the repository and where it comes from
    /// ([`input::missing_file`](crate::input::missing_file)).
    #[error("{}: no such file{note}", path.display())]
    MissingInput {
        /// The file.
        path: PathBuf,
        /// What the file is and where to get it, when known; else empty.
        note: String,
    },
    /// A directory that should hold an index does not (or does not exist).
    #[error("{path}: {message}")]
    NoIndex {
        /// The directory.
        path: PathBuf,
        /// What is missing, and what to do.
        message: String,
    },
    /// A file of the index is missing, or cut short or overwritten (at least where Tantivy
    /// looks first: its footer). The index is refused rather than opened without part of its
    /// data, which would answer errors (or nothing) for every document in that file.
    #[error(
        "{}: {message}. The index is damaged: `tantivy-dedup check --index {}` lists every \
         damaged file; restore the index from a backup",
        path.display(),
        path.parent().unwrap_or(path).display()
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Data read from a file of an open index is not what Tantivy wrote there (a document
    /// store block that does not decompress, a column cut short): the file was overwritten
    /// after the index opened, or the disk returns other bytes. Tantivy does not say which
    /// file; `check` does.
    #[error(
        "{}: the index is damaged: {message}. `tantivy-dedup check --index {}` names the \
         damaged file; restore the index from a backup",
        path.display(),
        path.display()
    )]
    DamagedData {
        /// The index directory.
        path: PathBuf,
        /// What could not be read.
        message: String,
    },
    /// A search passed its deadline ([`SearchRequest::deadline`](crate::engine::SearchRequest::deadline))
    /// and was stopped: it has no answer, rather than a partial one.
    #[error("the search took longer than its deadline and was stopped")]
    DeadlineExceeded,
    /// A list page's cursor reads a snapshot of the index that is no longer kept (pinned
    /// snapshots last [`KEEP_ALIVE`](crate::engine::KEEP_ALIVE) after their last use, and a
    /// restart keeps only an unchanged index's).
    #[error(
        "the cursor's snapshot of the index is gone (a walk's snapshot is kept {} seconds after \
         its last page, and a restart keeps it only if nothing was written since): start the \
         walk again with cursor=*",
        crate::engine::KEEP_ALIVE.as_secs()
    )]
    CursorExpired,
    /// A cursor walk would pin one more snapshot of the index than
    /// [`MAX_PINNED`](crate::engine::MAX_PINNED).
    #[error(
        "too many cursor walks are under way over different snapshots of the index (at most \
         {}); retry shortly, or page with offset",
        crate::engine::MAX_PINNED
    )]
    TooManyWalks,
    /// Another writer holds the index (Tantivy allows one at a time).
    #[error("{0}: another process is writing to this index (an index has one writer at a time)")]
    Busy(PathBuf),
    /// A search query cannot be parsed or asks for something the index cannot do.
    #[error("invalid query: {0}")]
    Query(String),
    /// The fingerprint store (the Redis Cluster) failed; the insert was not acknowledged.
    #[error(transparent)]
    Store(#[from] crate::forest::StoreError),
    /// The HTTP service could not run or stop cleanly.
    #[error("server: {0}")]
    Server(String),
    /// The search index failed (disk, corruption, lock).
    #[error("index {path}: {source}")]
    Index {
        /// The index directory.
        path: PathBuf,
        /// Tantivy's error.
        source: tantivy::TantivyError,
    },
}

/// A short alias for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
