//! What an index directory must hold, whether it does, and opening it: the settings file
//! read strictly ([`stored_settings`]), the schema checked and the tokenizer registered
//! ([`open_tantivy`]), Tantivy's failures on a missing or cut file named ([`index_error`]).
//!
//! - A new index is made only in a directory that is missing or empty ([`holds_index`]). One
//!   with files but no meta.json may be an index that lost its meta.json: an index created
//!   over it would have Tantivy delete every old segment file at its first commit.
//! - Every open checks each file of the last commit's segments: it must be there, with a
//!   footer Tantivy can read ([`check_files`]). That reads a few bytes at the end of each
//!   file; a checksum would read all of them. Tantivy itself opens a segment without its
//!   positions file (every phrase query then fails) and reads the other footers only when it
//!   opens the files.
//! - A writer's open removes the temporaries a crash left behind ([`remove_temporaries`]).
//! - `tantivy-dedup check` reads everything (`check_index`, in `check.rs`).

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tantivy::directory::error::OpenReadError;
use tantivy::directory::{Directory, MmapDirectory};
use tantivy::index::SegmentComponent;
use tantivy::{Index, IndexMeta, SegmentMeta, TantivyError};

use crate::config::Config;
use crate::engine::schema::{self, NewsFields, build_schema};
use crate::engine::tokenizer;
use crate::index::BlockLayout;
use crate::{Error, Result};

/// Tantivy's record of the last commit: its segments and the schema.
pub(crate) const META_FILE: &str = "meta.json";

/// Tantivy's list of the files it wrote, made with meta.json.
pub(crate) const MANAGED_FILE: &str = ".managed.json";

/// How many of the files found a refusal names.
const FILES_NAMED: usize = 6;

/// Whether `dir` holds an index (its meta.json); `false` when it is missing or empty
/// (temporaries aside), where a new index may be made.
///
/// A directory that holds anything else but no meta.json is refused, with the files found:
/// it may be an index that lost its meta.json, and making a new index there would have
/// Tantivy's first commit delete every old segment file.
pub(crate) fn holds_index(dir: &Path) -> Result<bool> {
    if dir.join(META_FILE).exists() {
        return Ok(true);
    }
    let io_error = |source| Error::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        entries => entries.map_err(io_error)?,
    };
    let mut found = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_error)?.file_name();
        // A new file system's lost+found is no sign of an index.
        if !is_temporary(&name) && name != "lost+found" {
            found.push(name.to_string_lossy().into_owned());
        }
    }
    if found.is_empty() {
        return Ok(false);
    }
    // Segment files (and the settings file) before Tantivy's hidden bookkeeping files.
    found.sort_by(|a, b| (a.starts_with('.'), a).cmp(&(b.starts_with('.'), b)));
    let mut named = found[..found.len().min(FILES_NAMED)].join(", ");
    if found.len() > FILES_NAMED {
        named.push_str(", ...");
    }
    Err(Error::NoIndex {
        path: dir.to_owned(),
        message: format!(
            "holds {} ({named}) but no {META_FILE}, so it is neither an index nor a place \
             for a new one. If it is an index that lost its {META_FILE}, restore {META_FILE} \
             from a backup (a new index made here would delete the old segment files); \
             otherwise give an empty or new directory",
            match found.len() {
                1 => "a file".to_owned(),
                files => format!("{files} files"),
            }
        ),
    })
}

/// Whether a file name is one the `tempfile` crate gives by default: `.tmp` and six ASCII
/// letters or digits. Tantivy's atomic writes (meta.json, .managed.json) go through such a
/// file, and so does [`write_atomically`]; a crash before the rename leaves it behind.
fn is_temporary(name: &OsStr) -> bool {
    name.to_str()
        .and_then(|name| name.strip_prefix(".tmp"))
        .is_some_and(|random| {
            random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Removes the temporaries ([`is_temporary`]) in `dir`, regular files only. Only the writer
/// may, holding the index's writer lock: a writer in another process could be writing one.
///
/// A temporary that is gone by the time it is removed is no error: the lock does not cover
/// Tantivy's background merges, and a Tantivy writer dropped without waiting for them (a
/// [`DedupIndex`](super::DedupIndex) waits) lets go of it while a merge may still save the
/// index's metadata through one.
pub(crate) fn remove_temporaries(dir: &Path) -> Result<()> {
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        if !is_temporary(&entry.file_name()) {
            continue;
        }
        let path = entry.path();
        let removed = entry.file_type().and_then(|file_type| {
            if file_type.is_file() {
                std::fs::remove_file(&path)
            } else {
                Ok(())
            }
        });
        if let Err(error) = removed
            && error.kind() != io::ErrorKind::NotFound
        {
            return Err(io_error(&path)(error));
        }
    }
    Ok(())
}

/// Writes `contents` to `path` through a temporary in the same directory, synced and then
/// renamed over `path`, so that a crash leaves no file or the whole file, never part of it.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let io_error = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .tempfile_in(dir)
        .map_err(io_error)?;
    file.write_all(contents).map_err(io_error)?;
    file.as_file().sync_data().map_err(io_error)?;
    file.persist(path).map_err(|error| io_error(error.error))?;
    Ok(())
}

/// Why Tantivy could not open a file for reading, in words, and whether the file itself is
/// at fault: missing, or cut short or overwritten where its footer is (rather than, say,
/// unreadable for its permissions).
pub(crate) fn read_failure(error: &OpenReadError) -> (String, bool) {
    match error {
        OpenReadError::FileDoesNotExist(_) => ("missing".to_owned(), true),
        OpenReadError::IoError { io_error, .. } => match io_error.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => (
                format!("cut short or overwritten at its end ({io_error})"),
                true,
            ),
            _ => (format!("cannot be read ({io_error})"), false),
        },
        OpenReadError::IncompatibleIndex(incompatibility) => (
            format!("written by an incompatible Tantivy version ({incompatibility:?})"),
            false,
        ),
    }
}

/// The file a Tantivy error blames and what is wrong with it, when the file itself is at
/// fault (see [`read_failure`]).
pub(crate) fn damaged_file(error: &TantivyError) -> Option<(&Path, String)> {
    let TantivyError::OpenReadError(error) = error else {
        return None;
    };
    let file = match error {
        OpenReadError::FileDoesNotExist(file) | OpenReadError::IoError { filepath: file, .. } => {
            file
        }
        OpenReadError::IncompatibleIndex(_) => return None,
    };
    let (message, damaged) = read_failure(error);
    damaged.then_some((file.as_path(), message))
}

/// The files opening a commit's segments reads, by segment: one per component Tantivy wrote,
/// and the deletes of a segment that has some. Sorted.
pub(crate) fn segment_files(metas: &IndexMeta) -> Vec<(&SegmentMeta, Vec<PathBuf>)> {
    let all = metas.list_segment_files();
    metas
        .segments
        .iter()
        .map(|segment| {
            let prefix = segment.id().uuid_string();
            // Listed for every segment, present only for one with deletes.
            let deletes = segment.relative_path(SegmentComponent::Delete);
            let mut files: Vec<PathBuf> = all
                .iter()
                .filter(|file| file.to_string_lossy().starts_with(&prefix))
                .filter(|file| segment.has_deletes() || **file != deletes)
                .cloned()
                .collect();
            files.sort();
            (segment, files)
        })
        .collect()
}

/// The last commit of `index` (in `dir`), read under Tantivy's meta lock, which the answer
/// holds: while it is held, no writer's garbage collection deletes a file of that commit.
fn last_commit(
    dir: &Path,
    index: &Index,
) -> Result<(tantivy::directory::DirectoryLock, IndexMeta)> {
    let lock = index
        .directory()
        .acquire_lock(&tantivy::directory::META_LOCK)
        .map_err(|error| index_error(dir, tantivy::TantivyError::LockFailure(error, None)))?;
    let metas = index
        .load_metas()
        .map_err(|source| index_error(dir, source))?;
    Ok((lock, metas))
}

/// Checks that every file of the last commit's segments is there, with a footer Tantivy can
/// read (which holds the file's checksum and format version): a missing or cut file is
/// refused at open, named ([`Error::Damaged`]), instead of failing the searches that need it.
/// Reads the footers only; garbage inside a file is for [`check_index`](super::check_index).
pub(crate) fn check_files(dir: &Path, index: &tantivy::Index) -> Result<()> {
    // Held while the files of one commit are opened, as Tantivy's reader does: a writer in
    // another process may otherwise merge and delete them in between.
    let (_meta_lock, metas) = last_commit(dir, index)?;
    let mut failures = segment_files(&metas)
        .into_iter()
        .flat_map(|(_, files)| files)
        .filter_map(|file| index.directory().open_read(&file).err());
    let Some(first) = failures.next() else {
        return Ok(());
    };
    match (index_error(dir, first.into()), failures.count()) {
        (Error::Damaged { path, message }, others) if others > 0 => Err(Error::Damaged {
            path,
            message: format!(
                "{message}; {others} more files of the last commit cannot be opened either"
            ),
        }),
        (error, _) => Err(error),
    }
}

/// The files of an index's last commit, to copy the index while a writer goes on (a new
/// replica of a shard starts from such a copy of a sibling's). While this is held, Tantivy
/// deletes none of them: their segments stay alive in the index's inventory, which its
/// garbage collection keeps. `meta.json` is written from the commit as it was loaded, so that
/// a commit made meanwhile changes nothing in the copy.
///
/// ```
/// use tantivy_dedup::config::Config;
/// use tantivy_dedup::engine::{CommitFiles, DedupIndex};
/// use tantivy_dedup::Article;
///
/// let dir = tempfile::tempdir()?;
/// let mut index = DedupIndex::create(dir.path(), Config::default())?;
/// let article = Article {
///     id: "a".into(),
///     content: "市气象台今天上午发布暴雨蓝色预警信号，预计未来六小时内全市将出现强降水。".into(),
///     ..Default::default()
/// };
/// index.add_article(article)?;
/// index.set_log_position("1764400000000-0".into());
/// index.commit()?;
/// let files = index.searcher().commit_files()?;
/// // Written on while the copy is taken: the copy is of the commit it was taken at.
/// index.set_log_position("1764400000001-0".into());
/// index.commit()?;
/// assert_eq!(files.log_position().as_deref(), Some("1764400000000-0"));
/// assert!(files.files().iter().all(|file| files.dir().join(file).is_file()));
/// assert_eq!(files.meta_json()?.0, CommitFiles::META_FILE);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CommitFiles {
    dir: PathBuf,
    /// Keeps the segments alive; also what `meta.json` is written from.
    metas: IndexMeta,
    /// The files besides `meta.json`, relative to `dir`: the settings file, the user
    /// dictionary's copy when there is one, and every segment's.
    files: Vec<PathBuf>,
}

impl CommitFiles {
    /// The name of the file that makes a directory of these files an index (written last by
    /// a copy, so that a copy cut short holds none).
    pub const META_FILE: &'static str = META_FILE;

    /// The last commit of `index`, in `dir`.
    pub(crate) fn of(dir: &Path, index: &Index) -> Result<Self> {
        // Held while the commit's files are listed, as `check_files` does.
        let (_meta_lock, metas) = last_commit(dir, index)?;
        let mut files = vec![PathBuf::from(SETTINGS_FILE)];
        if dir.join(USER_DICT_FILE).is_file() {
            files.push(PathBuf::from(USER_DICT_FILE));
        }
        files.extend(
            segment_files(&metas)
                .into_iter()
                .flat_map(|(_, files)| files)
                .filter(|file| dir.join(file).exists()),
        );
        Ok(CommitFiles {
            dir: dir.to_owned(),
            metas,
            files,
        })
    }

    /// The index directory they are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files to copy besides `meta.json`, relative to [`dir`](Self::dir).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The name and content of the commit's `meta.json`.
    pub fn meta_json(&self) -> Result<(&'static str, Vec<u8>)> {
        let json = serde_json::to_vec_pretty(&self.metas).map_err(|error| Error::Io {
            path: self.dir.join(META_FILE),
            source: io::Error::other(error),
        })?;
        Ok((META_FILE, json))
    }

    /// The log position the commit records, for an index that applies a log of writes
    /// ([`DedupWriter::log_position`](crate::engine::DedupWriter::log_position)).
    pub fn log_position(&self) -> Option<String> {
        crate::engine::recovery::recorded_log_position(self.metas.payload.as_deref())
    }
}

/// The file in an index directory that records the settings the index was created with.
pub const SETTINGS_FILE: &str = "tantivy-dedup.toml";

/// The file in an index directory that holds the copy of its user dictionary (`[index]
/// user_dict`), taken when the index was made: the index's words were split with it, whatever
/// becomes of the file it was copied from.
pub const USER_DICT_FILE: &str = "user_dict.txt";

/// The directory in an index directory that holds the forest's checkpoint and the sketch
/// files it names ([`DedupWriterBuilder::checkpoints_in`](crate::engine::DedupWriterBuilder::checkpoints_in)).
pub const FOREST_DIR: &str = "forest";

pub(crate) fn open_directory(dir: &Path) -> Result<MmapDirectory> {
    MmapDirectory::open(dir).map_err(|error| index_error(dir, error.into()))
}

/// Opens the Tantivy index in `dir`, checks that its schema is the one `config` builds, loads
/// its user dictionary and registers the tokenizer. Reads meta.json, no segment file.
pub(crate) fn open_tantivy(dir: &Path, config: &Config) -> Result<(Index, NewsFields)> {
    match &config.index.user_dict {
        Some(user_dict) => crate::text::use_user_dictionary(user_dict)?,
        None => crate::text::require_no_user_dictionary()?,
    }
    let layout = BlockLayout::new(config.dedup.max_distance)?;
    let (schema, mut fields) = build_schema(&config.fields, &layout);
    let index = Index::open(open_directory(dir)?).map_err(|source| index_error(dir, source))?;
    schema::check_schema(&index.schema(), &schema)?;
    fields.dedup.via = index.schema().get_field(schema::VIA).ok();
    fields.dedup.deleted_at = index.schema().get_field(schema::DELETED_AT).ok();
    tokenizer::register(&index);
    Ok((index, fields))
}

/// The error for a Tantivy failure on the index in `dir`: [`Error::Damaged`] when Tantivy
/// could not read one of its files because the file is missing or cut short,
/// [`Error::DamagedData`] when data it read does not decode, else [`Error::Index`].
pub(crate) fn index_error(dir: &Path, source: tantivy::TantivyError) -> Error {
    if let Some((file, message)) = damaged_file(&source) {
        return Error::Damaged {
            path: dir.join(file),
            message,
        };
    }
    match source {
        TantivyError::DataCorruption(corruption) => Error::DamagedData {
            path: dir.to_owned(),
            message: format!("{corruption:?}"),
        },
        TantivyError::IoError(error)
            if matches!(
                error.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            ) =>
        {
            Error::DamagedData {
                path: dir.to_owned(),
                message: format!("data does not decode ({error})"),
            }
        }
        source => Error::Index {
            path: dir.to_owned(),
            source,
        },
    }
}

/// The settings an index was created with, read strictly ([`Config::from_index_settings`]):
/// a missing, emptied or partial settings file is refused, never filled in with defaults.
pub fn stored_settings(dir: &Path) -> Result<Config> {
    let no_index = |message: String| Error::NoIndex {
        path: dir.to_owned(),
        message,
    };
    if !holds_index(dir)? {
        return Err(no_index(if dir.exists() {
            "not a tantivy-dedup index (`tantivy-dedup ingest --index DIR FILE` creates one)"
                .to_owned()
        } else {
            "no such directory".to_owned()
        }));
    }
    let path = dir.join(SETTINGS_FILE);
    if !path.exists() {
        return Err(no_index(format!(
            "a Tantivy index without tantivy-dedup's {SETTINGS_FILE}: restore the file from a \
             backup (an index tantivy-dedup did not write cannot be opened by it)"
        )));
    }
    Config::from_index_settings(&path)
}

#[cfg(test)]
mod tests {
    use tantivy::schema::Schema;

    use super::*;

    /// An index whose schema is `config`'s without the fields named in `leave_out`.
    fn index_without(dir: &Path, config: &Config, leave_out: &[&str]) {
        let layout = BlockLayout::new(config.dedup.max_distance).unwrap();
        let (full, _) = build_schema(&config.fields, &layout);
        let mut builder = Schema::builder();
        for (_, entry) in full
            .fields()
            .filter(|(_, entry)| !leave_out.contains(&entry.name()))
        {
            builder.add_field(entry.clone());
        }
        Index::create_in_dir(dir, builder.build()).unwrap();
    }

    #[test]
    fn an_index_made_before_the_later_fields_opens_without_them() {
        let config = Config::default();
        let dir = tempfile::tempdir().unwrap();
        index_without(dir.path(), &config, &[schema::DELETED_AT]);
        let (_, fields) = open_tantivy(dir.path(), &config).unwrap();
        assert_eq!(fields.dedup.deleted_at, None);
        assert!(fields.dedup.via.is_some());
        let dir = tempfile::tempdir().unwrap();
        index_without(dir.path(), &config, &[schema::VIA, schema::DELETED_AT]);
        let (_, fields) = open_tantivy(dir.path(), &config).unwrap();
        assert_eq!((fields.dedup.via, fields.dedup.deleted_at), (None, None));
    }

    #[test]
    fn an_index_without_another_dedup_field_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        index_without(dir.path(), &config, &[schema::ROOT]);
        let error = open_tantivy(dir.path(), &config).unwrap_err().to_string();
        assert!(error.contains("different schema"), "{error}");
    }
}
