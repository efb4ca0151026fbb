//! What an index directory must hold, and whether it does.
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
//! - `tantivy-dedup check` reads everything ([`check_index`]).

use std::ffi::OsStr;
use std::fmt::Display;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use tantivy::directory::error::{LockError, OpenReadError};
use tantivy::directory::{Directory, INDEX_WRITER_LOCK};
use tantivy::index::SegmentComponent;
use tantivy::{IndexMeta, ReloadPolicy, SegmentMeta, SegmentReader, TantivyDocument, TantivyError};

use crate::dedup::Deduplicator;
use crate::engine::recovery::{self, RecoveryReport};
use crate::engine::schema::ROOT;
use crate::engine::writer::{index_error, open_tantivy, stored_settings};
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
            "holds {} files ({named}) but no {META_FILE}, so it is neither an index nor a place \
             for a new one. If it is an index that lost its {META_FILE}, restore {META_FILE} \
             from a backup (a new index made here would delete the old segment files); \
             otherwise give an empty or new directory",
            found.len()
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
pub(crate) fn remove_temporaries(dir: &Path) -> Result<()> {
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        if is_temporary(&entry.file_name()) && entry.file_type().map_err(io_error(dir))?.is_file() {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io_error(&path))?;
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
fn read_failure(error: &OpenReadError) -> (String, bool) {
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
fn segment_files(metas: &IndexMeta) -> Vec<(&SegmentMeta, Vec<PathBuf>)> {
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

/// Checks that every file of the last commit's segments is there, with a footer Tantivy can
/// read (which holds the file's checksum and format version): a missing or cut file is
/// refused at open, named ([`Error::Damaged`]), instead of failing the searches that need it.
/// Reads the footers only; garbage inside a file is for [`check_index`].
pub(crate) fn check_files(dir: &Path, index: &tantivy::Index) -> Result<()> {
    // Held while the files of one commit are opened, as Tantivy's reader does: a writer in
    // another process may otherwise merge and delete them in between.
    let _meta_lock = index
        .directory()
        .acquire_lock(&tantivy::directory::META_LOCK)
        .map_err(|error| index_error(dir, tantivy::TantivyError::LockFailure(error, None)))?;
    let metas = index
        .load_metas()
        .map_err(|source| index_error(dir, source))?;
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

/// A file [`check_index`] found missing or damaged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    /// The file (`<segment>.*` for a segment that cannot be opened at all; the index
    /// directory for a failed replay).
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// What [`check_index`] read, and the damage it found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Segments of the last commit.
    pub segments: usize,
    /// Live documents, in the segments that could be read.
    pub documents: u64,
    /// Records of deleted or replaced documents, kept for the replay, in those segments.
    pub tombstones: u64,
    /// Stored documents decoded: every one of those segments, deleted ones included.
    pub stored_documents: u64,
    /// Fast field values decoded in those segments.
    pub fast_values: u64,
    /// Files whose checksum matched.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// What the forest's replay did; `None` when damage kept it from running.
    pub replay: Option<RecoveryReport>,
    /// Everything found missing or damaged, in the order found; empty for a sound index.
    pub damaged: Vec<Damage>,
}

impl CheckReport {
    /// Whether nothing was found damaged.
    pub fn is_sound(&self) -> bool {
        self.damaged.is_empty()
    }
}

/// Reads everything an index is made of, and reports what it read and every file it found
/// missing or damaged:
///
/// - meta.json and the settings file, as every open does;
/// - every file of the last commit: its footer, and the checksum of its whole content (the
///   CRC32 Tantivy wrote into the footer);
/// - in each segment whose files are sound: every stored document and every value of every
///   fast field, decoded, and the live documents counted against meta.json's;
/// - when nothing is damaged, the forest's replay (as an open does), with its invariants
///   checked.
///
/// Holds the index's writer lock meanwhile, so that no merge or garbage collection changes
/// files under it: while a server or an `ingest` writes, it fails with [`Error::Busy`]. An
/// error is what keeps the check from running at all (no index, meta.json or the settings
/// unreadable, another writer); damage is in the report.
pub fn check_index(dir: &Path) -> Result<CheckReport> {
    let config = stored_settings(dir)?;
    let (index, _) = open_tantivy(dir, &config)?;
    let _lock =
        index
            .directory()
            .acquire_lock(&INDEX_WRITER_LOCK)
            .map_err(|error| match error {
                LockError::LockBusy => Error::Busy(dir.to_owned()),
                error => index_error(dir, TantivyError::LockFailure(error, None)),
            })?;
    let metas = index
        .load_metas()
        .map_err(|source| index_error(dir, source))?;
    let mut report = CheckReport {
        segments: metas.segments.len(),
        ..CheckReport::default()
    };
    for (segment, files) in segment_files(&metas) {
        let damaged_before = report.damaged.len();
        for file in files {
            let path = dir.join(&file);
            let problem = match index.directory().validate_checksum(&file) {
                Ok(true) => {
                    let metadata = std::fs::metadata(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                    report.files += 1;
                    report.bytes += metadata.len();
                    continue;
                }
                Ok(false) => {
                    "its checksum does not match: the content is not what Tantivy wrote".to_owned()
                }
                Err(error) => read_failure(&error).0,
            };
            report.damaged.push(Damage { path, problem });
        }
        if report.damaged.len() == damaged_before
            && let Err(damage) = read_segment(dir, &index, segment, &mut report)
        {
            report.damaged.push(damage);
        }
    }
    if report.is_sound() {
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|source| index_error(dir, source))?;
        let mut dedup = Deduplicator::new(config.dedup)?;
        let replayed = recovery::replay(&reader.searcher(), Some(dedup.forest_mut()))
            .map_err(|error| error.to_string())
            .and_then(|(replay, _)| {
                dedup.forest().check_invariants()?;
                Ok(replay)
            });
        match replayed {
            Ok(replay) => report.replay = Some(replay),
            Err(problem) => report.damaged.push(Damage {
                path: dir.to_owned(),
                problem: format!("the forest's replay failed: {problem}"),
            }),
        }
    }
    Ok(report)
}

/// Decodes every stored document and every fast field value of a segment whose files are
/// sound, and counts its live documents and tombstones into `report`. The damage names the
/// file that failed.
fn read_segment(
    dir: &Path,
    index: &tantivy::Index,
    segment: &SegmentMeta,
    report: &mut CheckReport,
) -> std::result::Result<(), Damage> {
    let damage = |component, problem: &dyn Display| Damage {
        path: dir.join(segment.relative_path(component)),
        problem: problem.to_string(),
    };
    let reader = SegmentReader::open(&index.segment(segment.clone())).map_err(|error| Damage {
        path: dir.join(format!("{}.*", segment.id().uuid_string())),
        problem: format!("the segment cannot be opened: {error}"),
    })?;
    if reader.num_docs() != segment.num_docs() {
        return Err(damage(
            SegmentComponent::Delete,
            &format!(
                "{} live documents where {META_FILE} records {}",
                reader.num_docs(),
                segment.num_docs()
            ),
        ));
    }

    let store = reader
        .get_store_reader(1)
        .map_err(|error| damage(SegmentComponent::Store, &error))?;
    let mut stored = 0;
    for document in store.iter::<TantivyDocument>(None) {
        document.map_err(|error| damage(SegmentComponent::Store, &error))?;
        stored += 1;
    }
    if stored != u64::from(reader.max_doc()) {
        return Err(damage(
            SegmentComponent::Store,
            &format!(
                "{stored} documents where {META_FILE} records {}",
                reader.max_doc()
            ),
        ));
    }

    let fast = reader.fast_fields();
    let fast_damage = |error: &dyn Display| damage(SegmentComponent::FastFields, error);
    let mut values = 0;
    for (_, entry) in reader
        .schema()
        .fields()
        .filter(|(_, entry)| entry.is_fast())
    {
        for handle in fast
            .dynamic_column_handles(entry.name())
            .map_err(|error| fast_damage(&error))?
        {
            let column = handle
                .open_u64_lenient()
                .map_err(|error| fast_damage(&error))?;
            if let Some(column) = column {
                for doc in 0..reader.max_doc() {
                    values += column.values_for_doc(doc).count() as u64;
                }
            }
        }
    }
    let roots = fast.u64(ROOT).map_err(|error| fast_damage(&error))?;
    let live = reader
        .doc_ids_alive()
        .filter(|&doc| roots.first(doc).is_some())
        .count() as u64;

    report.stored_documents += stored;
    report.fast_values += values;
    report.documents += live;
    report.tombstones += u64::from(reader.num_docs()) - live;
    Ok(())
}
