//! Checkpoint files: the in-memory forest written whole, so that opening an index loads it and
//! replays only the inserts made after it instead of every insert ever made.
//!
//! A checkpoint is one file of little-endian words: a magic number and format version, then
//! what the caller and each part of the forest write, in order ([`CheckpointWriter::put_u64`],
//! [`CheckpointWriter::put_slice`]: arrays are a length and their raw bytes, so that the
//! tables load at the speed of a file read), then the XXH3 checksum of everything before it.
//! It is written beside its final name and renamed into place after an `fsync`, so a crash
//! leaves the previous checkpoint or the new one, never a mix; a file whose checksum fails is
//! refused as a whole. Sketch chunks kept in files are not copied in: the checkpoint names
//! them, how much of each it covers and the checksum of that much, which loading checks (see
//! [`SketchStore::in_checkpoint_directory`]).
//!
//! Versions: 3 added the chunks' checksums. A version 2 file is still read, so that an index
//! whose tombstones were pruned (which only its checkpoint records) keeps its exact forest
//! across the upgrade; without checksums, loading checks instead that every node's sketch
//! record can be read and names that node, which finds zeroed or overwritten records but not
//! changed hashes. The next checkpoint saved is of version 3. Any other version is refused,
//! as a damaged file is: opening then replays every insert.
//!
//! [`SketchStore::in_checkpoint_directory`]: crate::verify::SketchStore::in_checkpoint_directory
//!
//! ```
//! use tantivy_dedup::forest::checkpoint::{CheckpointReader, CheckpointWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("example.checkpoint");
//! let mut out = CheckpointWriter::create(&path)?;
//! out.put_u64(42)?;
//! out.put_slice(&[1u32, 2, 3])?;
//! out.commit()?;
//!
//! let mut input = CheckpointReader::open(&path)?.expect("just written");
//! assert_eq!(input.get_u64()?, 42);
//! assert_eq!(input.get_vec::<u32>()?, vec![1, 2, 3]);
//! input.finish()?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use bytemuck::Pod;
use xxhash_rust::xxh3::Xxh3;

/// "tdforest" in ASCII, then the format's version: a file of a version outside
/// `OLDEST_VERSION..=VERSION` is not read.
const MAGIC: u64 = u64::from_le_bytes(*b"tdforest");
/// The version written.
const VERSION: u64 = 3;
/// The oldest version read.
const OLDEST_VERSION: u64 = 2;
/// The first version that records a checksum of each sketch chunk's covered words.
const CHUNK_CHECKSUMS: u64 = 3;

/// Buffer of the file's reader and writer: large, since a checkpoint is mostly large arrays.
const BUFFER_BYTES: usize = 1 << 20;

fn corrupt(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("checkpoint {}: {what}", path.display()),
    )
}

/// Writes a checkpoint under a temporary name, or into memory; [`commit`](Self::commit) puts
/// it in place, or [`finish`](Self::finish) then [`SavedCheckpoint::make_durable`] (on another
/// thread, say).
pub struct CheckpointWriter {
    path: PathBuf,
    temporary: PathBuf,
    out: Sink,
    hasher: Xxh3,
    written: u64,
    files: CheckpointFiles,
    /// The format version written.
    version: u64,
}

/// Where a checkpoint's bytes go first.
enum Sink {
    File(BufWriter<File>),
    /// A copy in memory, written to the file by [`SavedCheckpoint::make_durable`]: what the
    /// caller waits for is then a copy in memory, not the operating system's writing.
    Memory(Vec<u8>),
}

/// The files a checkpoint depends on besides its own.
#[derive(Debug, Default)]
struct CheckpointFiles {
    /// Files it names whose content must be durable before it is in place.
    sync: Vec<PathBuf>,
    /// Files only older checkpoints named: deleted once it is in place.
    obsolete: Vec<PathBuf>,
}

impl CheckpointWriter {
    /// Starts the checkpoint that will be `path` (written as `path` + `.partial` until then).
    pub fn create(path: &Path) -> io::Result<Self> {
        Self::create_in_format(path, VERSION)
    }

    /// [`create`](Self::create) in an older format this build reads, for tests of reading it.
    #[cfg(test)]
    pub(crate) fn create_version(path: &Path, version: u64) -> io::Result<Self> {
        Self::create_in_format(path, version)
    }

    fn create_in_format(path: &Path, version: u64) -> io::Result<Self> {
        let temporary = temporary_path(path);
        let file = File::create(&temporary)?;
        let out = Sink::File(BufWriter::with_capacity(BUFFER_BYTES, file));
        Self::start(path, temporary, out, version)
    }

    /// Starts the checkpoint that will be `path`, kept in memory until
    /// [`SavedCheckpoint::make_durable`] writes it: the caller's state is copied at memory
    /// speed, and the file is written away from it (at the cost of the copy's memory
    /// meanwhile).
    pub fn in_memory(path: &Path) -> io::Result<Self> {
        Self::start(
            path,
            temporary_path(path),
            Sink::Memory(Vec::new()),
            VERSION,
        )
    }

    fn start(path: &Path, temporary: PathBuf, out: Sink, version: u64) -> io::Result<Self> {
        debug_assert!((OLDEST_VERSION..=VERSION).contains(&version));
        let mut writer = CheckpointWriter {
            path: path.to_path_buf(),
            temporary,
            out,
            hasher: Xxh3::new(),
            written: 0,
            files: CheckpointFiles::default(),
            version,
        };
        writer.put_u64(MAGIC)?;
        writer.put_u64(version)?;
        Ok(writer)
    }

    /// Whether the checkpoint records the checksum of each sketch chunk's covered words
    /// (version 3 on).
    pub(crate) fn has_chunk_checksums(&self) -> bool {
        self.version >= CHUNK_CHECKSUMS
    }

    fn put_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.written += bytes.len() as u64;
        match &mut self.out {
            Sink::File(file) => {
                self.hasher.update(bytes);
                file.write_all(bytes)
            }
            // Hashed whole at the end: one pass instead of a call per piece.
            Sink::Memory(buffer) => {
                buffer.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Appends one number.
    pub fn put_u64(&mut self, value: u64) -> io::Result<()> {
        self.put_bytes(&value.to_le_bytes())
    }

    /// Appends an array: its length, then its elements' bytes.
    pub fn put_slice<T: Pod>(&mut self, values: &[T]) -> io::Result<()> {
        self.put_u64(values.len() as u64)?;
        self.put_elements(values)
    }

    /// Appends the elements' bytes alone (the reader must know how many:
    /// [`CheckpointReader::get_elements`]), for many small arrays whose lengths were written
    /// together.
    pub fn put_elements<T: Pod>(&mut self, values: &[T]) -> io::Result<()> {
        self.put_bytes(bytemuck::cast_slice(values))
    }

    /// Records that the checkpoint names `file`, whose content must be on disk before the
    /// checkpoint is in place.
    pub(crate) fn depends_on(&mut self, file: PathBuf) {
        self.files.sync.push(file);
    }

    /// Records that `file` is named only by older checkpoints: it goes once this one is in
    /// place.
    pub(crate) fn supersedes(&mut self, file: PathBuf) {
        self.files.obsolete.push(file);
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends the checksum; the checkpoint is not written out (when in memory), in place or
    /// durable until [`SavedCheckpoint::make_durable`].
    pub fn finish(mut self) -> io::Result<SavedCheckpoint> {
        let checksum = match &self.out {
            Sink::File(_) => self.hasher.digest(),
            Sink::Memory(buffer) => xxhash_rust::xxh3::xxh3_64(buffer),
        };
        self.put_u64(checksum)?;
        let content = match self.out {
            Sink::File(file) => {
                Content::File(file.into_inner().map_err(io::IntoInnerError::into_error)?)
            }
            Sink::Memory(buffer) => Content::Memory(buffer),
        };
        Ok(SavedCheckpoint {
            content,
            path: self.path,
            temporary: self.temporary,
            bytes: self.written,
            files: self.files,
        })
    }

    /// [`finish`](Self::finish) then [`SavedCheckpoint::make_durable`]: the checkpoint's size.
    pub fn commit(self) -> io::Result<u64> {
        self.finish()?.make_durable()
    }
}

/// A checkpoint written but not yet in place: what is left is waiting for the disk, which
/// can be done away from the thread that wrote it.
#[derive(Debug)]
pub struct SavedCheckpoint {
    content: Content,
    path: PathBuf,
    temporary: PathBuf,
    bytes: u64,
    files: CheckpointFiles,
}

impl SavedCheckpoint {
    /// Makes the files it names and the checkpoint itself durable, renames it to its final
    /// name (replacing the previous checkpoint only then), makes the rename durable, and
    /// deletes the files only older checkpoints named. The checkpoint's size.
    pub fn make_durable(self) -> io::Result<u64> {
        for path in &self.files.sync {
            File::open(path)?.sync_data()?;
        }
        let file = match self.content {
            Content::File(file) => file,
            Content::Memory(buffer) => {
                let mut file = File::create(&self.temporary)?;
                file.write_all(&buffer)?;
                file
            }
        };
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.temporary, &self.path)?;
        sync_directory(&self.path)?;
        for path in &self.files.obsolete {
            remove_if_present(path)?;
        }
        Ok(self.bytes)
    }
}

/// Deletes `path`; one already gone is no error.
pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// What a saved checkpoint's bytes are in.
#[derive(Debug)]
enum Content {
    /// Its temporary file, written.
    File(File),
    /// Memory, to be written to its temporary file.
    Memory(Vec<u8>),
}

/// The name a checkpoint has until it is in place.
fn temporary_path(path: &Path) -> PathBuf {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    PathBuf::from(temporary)
}

/// Makes the entries of the directory holding `path` durable (a rename or a new file).
pub(crate) fn sync_directory(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

/// Reads a checkpoint in the order it was written; [`finish`](Self::finish) checks that
/// nothing was changed or cut off.
pub struct CheckpointReader {
    path: PathBuf,
    input: BufReader<File>,
    hasher: Xxh3,
    /// Bytes not read yet, the checksum included: what an array's length is checked against
    /// before anything is allocated for it.
    remaining: u64,
    /// The format version of the file.
    version: u64,
}

impl CheckpointReader {
    /// Opens the checkpoint at `path`; `None` when there is none. A file that is not a
    /// checkpoint of a version this build reads is an error.
    pub fn open(path: &Path) -> io::Result<Option<Self>> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let remaining = file.metadata()?.len();
        let mut reader = CheckpointReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(BUFFER_BYTES, file),
            hasher: Xxh3::new(),
            remaining,
            version: VERSION,
        };
        if reader.get_u64()? != MAGIC {
            return Err(corrupt(path, "not a forest checkpoint"));
        }
        reader.version = reader.get_u64()?;
        if !(OLDEST_VERSION..=VERSION).contains(&reader.version) {
            return Err(corrupt(
                path,
                format!(
                    "format version {}; this build reads versions {OLDEST_VERSION} to {VERSION}",
                    reader.version
                ),
            ));
        }
        Ok(Some(reader))
    }

    /// Whether the file records the checksum of each sketch chunk's covered words (version 3
    /// on).
    pub(crate) fn has_chunk_checksums(&self) -> bool {
        self.version >= CHUNK_CHECKSUMS
    }

    /// Where the checkpoint is (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An error naming the checkpoint, for content that makes no sense.
    pub fn invalid(&self, what: impl std::fmt::Display) -> io::Error {
        corrupt(&self.path, what)
    }

    fn get_bytes(&mut self, bytes: &mut [u8]) -> io::Result<()> {
        if bytes.len() as u64 > self.remaining {
            return Err(corrupt(&self.path, "cut off"));
        }
        self.input.read_exact(bytes)?;
        self.remaining -= bytes.len() as u64;
        self.hasher.update(bytes);
        Ok(())
    }

    /// Reads one number.
    pub fn get_u64(&mut self) -> io::Result<u64> {
        let mut bytes = [0; 8];
        self.get_bytes(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Reads a number that must fit a `usize` and be at most `max`.
    pub fn get_usize(&mut self, max: usize) -> io::Result<usize> {
        let value = self.get_u64()?;
        match usize::try_from(value) {
            Ok(value) if value <= max => Ok(value),
            _ => Err(corrupt(
                &self.path,
                format!("{value} where at most {max} fits"),
            )),
        }
    }

    /// Reads an array written by [`CheckpointWriter::put_slice`].
    pub fn get_vec<T: Pod>(&mut self) -> io::Result<Vec<T>> {
        let len = self.get_u64()?;
        self.get_elements(len)
    }

    /// Reads `len` elements written by [`CheckpointWriter::put_elements`].
    pub fn get_elements<T: Pod>(&mut self, len: u64) -> io::Result<Vec<T>> {
        let size = std::mem::size_of::<T>() as u64;
        if len.saturating_mul(size) > self.remaining {
            return Err(corrupt(&self.path, format!("an array of {len} is cut off")));
        }
        let mut values = vec![T::zeroed(); len as usize];
        self.get_bytes(bytemuck::cast_slice_mut(&mut values))?;
        Ok(values)
    }

    /// Checks the checksum and that the file ends there.
    pub fn finish(mut self) -> io::Result<()> {
        let computed = self.hasher.digest();
        let mut bytes = [0; 8];
        if self.remaining != 8 {
            return Err(corrupt(
                &self.path,
                format!("{} bytes where the checksum should end it", self.remaining),
            ));
        }
        self.input.read_exact(&mut bytes)?;
        if u64::from_le_bytes(bytes) != computed {
            return Err(corrupt(&self.path, "checksum mismatch"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_or_cut_file_is_refused() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c");
        let mut out = CheckpointWriter::create(&path)?;
        out.put_slice(&[7u64; 100])?;
        out.commit()?;
        let original = std::fs::read(&path)?;

        let mut changed = original.clone();
        changed[40] ^= 1;
        std::fs::write(&path, &changed)?;
        let mut input = CheckpointReader::open(&path)?.expect("present");
        input.get_vec::<u64>()?;
        assert!(input.finish().is_err());

        std::fs::write(&path, &original[..original.len() - 20])?;
        let mut input = CheckpointReader::open(&path)?.expect("present");
        assert!(input.get_vec::<u64>().is_err());

        std::fs::write(&path, b"not a checkpoint at all")?;
        assert!(CheckpointReader::open(&path).is_err());
        assert!(CheckpointReader::open(&dir.path().join("absent"))?.is_none());
        Ok(())
    }

    #[test]
    fn the_versions_read_are_the_oldest_to_the_current() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c");
        CheckpointWriter::create(&path)?.commit()?;
        let current = std::fs::read(&path)?;
        for version in [OLDEST_VERSION - 1, OLDEST_VERSION, VERSION, VERSION + 1] {
            let mut bytes = current.clone();
            bytes[8..16].copy_from_slice(&version.to_le_bytes());
            std::fs::write(&path, &bytes)?;
            let opened = CheckpointReader::open(&path);
            let readable = (OLDEST_VERSION..=VERSION).contains(&version);
            assert_eq!(opened.is_ok(), readable, "version {version}");
            if let Ok(Some(reader)) = opened {
                assert_eq!(reader.has_chunk_checksums(), version >= CHUNK_CHECKSUMS);
            }
        }
        Ok(())
    }
}
