//! Where a [`SketchStore`](super::SketchStore) keeps its sketches: records packed into chunks,
//! in memory or in memory-mapped files.
//!
//! A sketch of a long text is 200 hashes (800 bytes), sixteen times what the rest of a node
//! costs; kept in mapped files, sketches cost the heap nothing, and the operating system keeps
//! the recently read ones in its page cache (a lookup reads only its candidates' sketches).

use std::io;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;
use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use super::SketchView;
use super::sketch::is_stored_shift;
use crate::Fingerprint;
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter, remove_if_present};

/// Words (`u32`) a chunk holds: 64 MiB (16 KiB in unit tests, so that chunks fill, empty and
/// are evacuated after a few records).
pub(super) const CHUNK_WORDS: usize = if cfg!(test) { 1 << 12 } else { 1 << 24 };

/// Records start at multiples of this many words, so that a 32-bit [`Address`] reaches
/// 64 GiB of chunks.
const UNIT_WORDS: usize = 4;

/// Bits of an address that locate a record inside its chunk.
const OFFSET_BITS: u32 = (CHUNK_WORDS / UNIT_WORDS).trailing_zeros();

/// Chunks that may exist at once (the last address is kept free: see [`Address::NONE`]).
const MAX_CHUNKS: usize = 1 << (32 - OFFSET_BITS);

/// A record's header: the node's fingerprint (two words), then its sketch's shift (top
/// byte) and number of hashes (low 24 bits).
const HEADER_WORDS: usize = 3;

/// The longest sketch a record holds (a 24-bit count; sketches keep at most 100,000 shingle
/// hashes, and a whole one also its titles' distinct pairs of letters).
const MAX_HASHES: usize = (1 << 24) - 1;

/// Where a record is: its chunk's number (high bits) and its offset in units (low bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub(super) struct Address(pub(super) u32);

// SAFETY: a transparent wrapper of a `u32`, for which every bit pattern is valid.
unsafe impl bytemuck::Zeroable for Address {}
// SAFETY: as above; `Copy`, no padding, no pointers.
unsafe impl bytemuck::Pod for Address {}

impl Address {
    /// No record: the one address a chunk never hands out (the last unit of the last chunk,
    /// where no record of at least [`HEADER_WORDS`] words can start).
    pub(super) const NONE: Address = Address(u32::MAX);

    fn new(chunk: usize, word: usize) -> Address {
        Address(((chunk as u32) << OFFSET_BITS) | (word / UNIT_WORDS) as u32)
    }

    fn chunk(self) -> usize {
        (self.0 >> OFFSET_BITS) as usize
    }

    fn word(self) -> usize {
        (self.0 & ((1 << OFFSET_BITS) - 1)) as usize * UNIT_WORDS
    }
}

/// Where new chunks go.
#[derive(Debug, Clone)]
pub(super) enum Backing {
    /// On the heap.
    Memory,
    /// In files created (and at once unlinked) in this directory, mapped into memory: they
    /// vanish when the store is dropped or the process ends, and no other process sees them.
    Directory(PathBuf),
    /// In named files of this directory, mapped into memory and kept when the store is
    /// dropped: a checkpoint names them instead of copying them. A file that a checkpoint
    /// names is deleted only once a later checkpoint no longer does.
    Files(PathBuf),
    /// The named files of a checkpoint in this directory, read and never changed: they are
    /// mapped copy-on-write, so what is written to their records stays in this process, new
    /// chunks are on the heap, and no file is created or deleted (what `check` replays into
    /// while the index's own writer may later use the directory).
    Snapshot(PathBuf),
}

/// The extension of a chunk's file in a [`Backing::Files`] directory.
const CHUNK_EXTENSION: &str = "sketches";

/// The file of chunk file number `id` in `dir`.
fn chunk_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}.{CHUNK_EXTENSION}"))
}

/// The numbers of the chunk files in `dir`.
fn chunk_files(dir: &Path) -> io::Result<Vec<u64>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .extension()
            .is_some_and(|extension| extension == CHUNK_EXTENSION)
            && let Some(id) = path
                .file_stem()
                .and_then(|stem| stem.to_str())
                .and_then(|stem| u64::from_str_radix(stem, 16).ok())
        {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Deletes the chunk files of `dir` that are not in `keep`.
fn remove_chunk_files(dir: &Path, keep: &[u64]) -> io::Result<()> {
    for id in chunk_files(dir)? {
        if !keep.contains(&id) {
            remove_if_present(&chunk_path(dir, id))?;
        }
    }
    Ok(())
}

/// A chunk's named file ([`Backing::Files`]).
struct ChunkFile {
    id: u64,
    /// Words written when the last checkpoint was saved (which flushes the file when more
    /// were written since).
    synced: usize,
    /// Whether a checkpoint names the file (then it outlives the chunk until the next one).
    saved: bool,
    /// XXH3 of the chunk's words `0..used` (records and padding) as they were written, or as
    /// they were found when the chunk was loaded: what a checkpoint records with the file, so
    /// that loading it finds bytes changed since, whenever they changed.
    written: Xxh3,
}

/// A chunk file of a checkpoint that is not as the checkpoint recorded it (missing, cut, or
/// changed in the words it covers), found while it was loaded read-only for `check`.
#[derive(Debug)]
pub(crate) struct ChunkDamage {
    /// The chunk file.
    pub(crate) path: PathBuf,
    /// What is wrong with it.
    pub(crate) problem: String,
}

/// The words of one chunk.
enum Words {
    /// Grows as records are appended, up to [`CHUNK_WORDS`].
    Memory(Vec<u32>),
    /// [`CHUNK_WORDS`] words of a sparse file: pages take disk and memory once written.
    Mapped(MmapMut),
}

impl Words {
    fn as_slice(&self) -> &[u32] {
        match self {
            Words::Memory(words) => words,
            Words::Mapped(map) => bytemuck::cast_slice(map),
        }
    }
}

struct Chunk {
    words: Words,
    /// Words written (records and the padding after each).
    used: usize,
    /// Words of the records still live.
    live: usize,
    /// Its named file, with [`Backing::Files`].
    file: Option<ChunkFile>,
}

impl Chunk {
    /// A new empty chunk; with [`Backing::Files`] its file is number `file_id`.
    fn new(backing: &Backing, file_id: u64) -> io::Result<Chunk> {
        let (words, file) = match backing {
            Backing::Memory | Backing::Snapshot(_) => (Words::Memory(Vec::new()), None),
            Backing::Directory(dir) => (Words::Mapped(map_new_file(dir)?), None),
            Backing::Files(dir) => {
                let file = ChunkFile {
                    id: file_id,
                    synced: 0,
                    saved: false,
                    written: Xxh3::new(),
                };
                (
                    Words::Mapped(map_named_file(&chunk_path(dir, file_id), true)?),
                    Some(file),
                )
            }
        };
        Ok(Chunk {
            words,
            used: 0,
            live: 0,
            file,
        })
    }

    /// Appends a record at `self.used` (which the caller checked has room).
    fn write(&mut self, node: Fingerprint, shift: u8, hashes: &[u32]) {
        let header = [
            node.0 as u32,
            (node.0 >> 32) as u32,
            (u32::from(shift) << 24) | hashes.len() as u32,
        ];
        let start = self.used;
        let end = start + HEADER_WORDS + hashes.len();
        let size = record_words(hashes.len());
        match &mut self.words {
            Words::Memory(words) => {
                words.resize(start, 0);
                words.extend_from_slice(&header);
                words.extend_from_slice(hashes);
            }
            Words::Mapped(map) => {
                let words: &mut [u32] = bytemuck::cast_slice_mut(map);
                words[start..start + HEADER_WORDS].copy_from_slice(&header);
                words[start + HEADER_WORDS..end].copy_from_slice(hashes);
                // Hashed from the mapping, padding included, while it is in the cache: the
                // padding of a chunk loaded from a checkpoint may hold what a crashed process
                // wrote after it.
                if let Some(file) = &mut self.file {
                    file.written
                        .update(bytemuck::cast_slice(&words[start..start + size]));
                }
            }
        }
        self.used += size;
        self.live += size;
    }

    /// The record at `word`, its node and sketch, if one can be read there: its header and
    /// hashes lie inside the words written and its shift is one a sketch can have. Anything
    /// else is a record damaged in its file since it was written (a mapped file can be changed
    /// under the store): `None`, never a read past the chunk. The hashes of a record damaged
    /// but readable may be out of order, which makes comparisons with it wrong, never unsafe.
    fn read(&self, word: usize) -> Option<(Fingerprint, SketchView<'_>)> {
        let words = self.words.as_slice();
        let written = &words[..self.used.min(words.len())];
        let start = word.checked_add(HEADER_WORDS)?;
        let header = written.get(word..start)?;
        let node = Fingerprint(u64::from(header[0]) | (u64::from(header[1]) << 32));
        let (shift, len) = ((header[2] >> 24) as u8, (header[2] & 0xff_ffff) as usize);
        if !is_stored_shift(shift) {
            return None;
        }
        // At most 2^24 - 1 hashes after a start inside the chunk: no overflow.
        let hashes = written.get(start..start + len)?;
        Some((node, SketchView::from_parts(shift, hashes)))
    }

    fn mapped_bytes(&self) -> usize {
        match &self.words {
            Words::Memory(_) => 0,
            Words::Mapped(map) => map.len(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.words {
            Words::Memory(words) => words.capacity() * std::mem::size_of::<u32>(),
            Words::Mapped(_) => 0,
        }
    }
}

/// A new unlinked file of [`CHUNK_WORDS`] words in `dir`, its blocks reserved, mapped.
fn map_new_file(dir: &Path) -> io::Result<MmapMut> {
    let file = tempfile::tempfile_in(dir)?;
    reserve_chunk(&file, dir)?;
    // SAFETY: the file was created unlinked just now and never leaves this function but
    // through the mapping, so no other process or handle can truncate or change it while it is
    // mapped (the mapping keeps it alive after `file` is closed).
    unsafe { MmapMut::map_mut(&file) }
}

/// The chunk file at `path` (a new one of [`CHUNK_WORDS`] words when `create`), mapped.
fn map_named_file(path: &Path, create: bool) -> io::Result<MmapMut> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create)
        .open(path)?;
    if create {
        if let Err(error) = reserve_chunk(&file, path) {
            // No chunk file is left that a checkpoint could not name.
            let _ = std::fs::remove_file(path);
            return Err(error);
        }
    } else {
        check_chunk_length(&file)?;
    }
    // SAFETY: the file lives in the directory of the index whose writer owns this store, and
    // the index's writer lock keeps every other process from writing to that directory; this
    // process maps each chunk file once, and only its arena writes it (never the bytes a live
    // record holds).
    unsafe { MmapMut::map_mut(&file) }
}

/// Gives a new chunk file (at `place`, for the error) its length of [`CHUNK_WORDS`] words and
/// reserves its disk blocks, so that a full disk fails here, an ordinary error, and never a
/// later write through the mapping: on a sparse file that page fault raises SIGBUS, which
/// kills the process.
fn reserve_chunk(file: &std::fs::File, place: &Path) -> io::Result<()> {
    let bytes = (CHUNK_WORDS * std::mem::size_of::<u32>()) as u64;
    file.set_len(bytes)
        .and_then(|()| allocate(file, bytes))
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "reserving {} MiB for a sketch chunk in {}: {error}",
                    bytes >> 20,
                    place.display()
                ),
            )
        })
}

/// Allocates the first `bytes` of `file` on disk.
#[cfg(target_os = "linux")]
fn allocate(file: &std::fs::File, bytes: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let length = libc::off_t::try_from(bytes).map_err(io::Error::other)?;
    // SAFETY: the descriptor is `file`'s, open for writing for the whole call.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, length) } {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// Allocates the first `bytes` of `file` on disk, by writing zeros (no `posix_fallocate`).
#[cfg(not(target_os = "linux"))]
fn allocate(file: &std::fs::File, bytes: u64) -> io::Result<()> {
    use std::io::{Seek, Write};
    let zeros = vec![0u8; 1 << 20];
    let mut file = file;
    file.seek(io::SeekFrom::Start(0))?;
    for _ in 0..bytes.div_ceil(zeros.len() as u64) {
        file.write_all(&zeros)?;
    }
    file.sync_data()
}

/// The chunk file at `path`, mapped copy-on-write: writes to the mapping never reach the file.
fn map_file_privately(path: &Path) -> io::Result<MmapMut> {
    let file = std::fs::File::open(path)?;
    check_chunk_length(&file)?;
    // SAFETY: a private mapping; the index's writer lock, which `check` holds while it reads,
    // keeps every other process from changing the file meanwhile.
    unsafe { memmap2::MmapOptions::new().map_copy(&file) }
}

/// Fails unless `file` is a whole chunk long (a shorter file's mapping would fault past its
/// end).
fn check_chunk_length(file: &std::fs::File) -> io::Result<()> {
    let bytes = (CHUNK_WORDS * std::mem::size_of::<u32>()) as u64;
    let length = file.metadata()?.len();
    if length != bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{length} bytes long, not {bytes} (cut or extended)"),
        ));
    }
    Ok(())
}

/// A chunk in a named file, as a checkpoint records it.
struct SavedChunk {
    /// Its number in the arena.
    number: usize,
    /// Its file's number.
    id: u64,
    /// Words written to it (and covered by the checkpoint).
    used: usize,
    /// Words of its live records.
    live: usize,
    /// The checksum of its `used` words (none before version 3).
    recorded: Option<u64>,
}

/// Maps the chunk file a checkpoint names at `path` (copy-on-write when `read_only`) and
/// checks its first `used` words against `recorded`, the checksum the checkpoint holds (none
/// before version 3): the mapping and the hasher of those words ([`ChunkFile::written`]), or
/// what is wrong with the file.
fn map_saved_chunk(
    path: &Path,
    used: usize,
    recorded: Option<u64>,
    read_only: bool,
) -> Result<(MmapMut, Xxh3), String> {
    let map = match read_only {
        true => map_file_privately(path),
        false => map_named_file(path, false),
    }
    .map_err(|error| error.to_string())?;
    let covered = used * std::mem::size_of::<u32>();
    let mut written = Xxh3::new();
    written.update(&map[..covered]);
    if recorded.is_some_and(|recorded| recorded != written.digest()) {
        return Err(format!(
            "the {covered} bytes the checkpoint covers do not match the checksum it recorded: \
             the file was changed since (zeroed or overwritten)"
        ));
    }
    Ok((map, written))
}

/// Words a record of `hashes` hashes takes, padding included.
pub(super) fn record_words(hashes: usize) -> usize {
    (HEADER_WORDS + hashes).div_ceil(UNIT_WORDS) * UNIT_WORDS
}

/// Sketch records in chunks. Records are appended to the newest chunk (the *head*); a record
/// that is released leaves a hole, and a chunk that is no longer the head is freed once all
/// its records are released. When few of an older chunk's words are live, the chunk is
/// worth [evacuating](Self::evacuation_due): its live records are copied to the head and the
/// chunk freed, which keeps the arena's size within a small factor of its live records however
/// long some old nodes live.
///
/// Invariants: every chunk's `live` is the size of its records not yet released; an address
/// handed out stays valid until released or relocated.
pub(super) struct SketchArena {
    backing: Backing,
    /// By number; `None` for a freed number.
    chunks: Vec<Option<Chunk>>,
    /// Freed numbers, reused before new ones.
    free: Vec<usize>,
    /// The number of the chunk being filled.
    head: Option<usize>,
    /// The head before the current one, until [`take_sealed`](Self::take_sealed) looks at it.
    sealed: Option<usize>,
    /// The number the next chunk file gets ([`Backing::Files`]): file numbers are never
    /// reused, so a checkpoint's names always mean the chunks it saw.
    next_file: u64,
    /// Files of freed chunks that the last checkpoint still names: the next checkpoint saved
    /// deletes them once it is in place.
    retired: Vec<u64>,
    /// See [`damage`](Self::damage).
    damage: Vec<ChunkDamage>,
}

impl SketchArena {
    pub(super) fn new(backing: Backing) -> Self {
        SketchArena {
            backing,
            chunks: Vec::new(),
            free: Vec::new(),
            head: None,
            sealed: None,
            next_file: 0,
            retired: Vec::new(),
            damage: Vec::new(),
        }
    }

    /// An empty arena whose chunks are named files of `dir` ([`Backing::Files`]). Chunk files
    /// already there belong to a checkpoint: [`load`](Self::load) it, or they are deleted once
    /// this arena's first checkpoint is in place.
    pub(super) fn in_files(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let present = chunk_files(dir)?;
        let mut arena = SketchArena::new(Backing::Files(dir.to_path_buf()));
        arena.next_file = present.iter().max().map_or(0, |&id| id + 1);
        arena.retired = present;
        Ok(arena)
    }

    /// [`in_files`](Self::in_files) for a forest that loads no checkpoint: no checkpoint that
    /// can be used names the chunk files already in `dir`, so they are deleted now, before the
    /// forest's replay needs room for new ones (on a full disk it would find none).
    pub(super) fn in_cleared_files(dir: &Path) -> io::Result<Self> {
        let mut arena = SketchArena::in_files(dir)?;
        remove_chunk_files(dir, &[])?;
        arena.retired.clear();
        Ok(arena)
    }

    /// Appends a record of `node`'s sketch; where it is.
    pub(super) fn append(
        &mut self,
        node: Fingerprint,
        sketch: SketchView<'_>,
    ) -> io::Result<Address> {
        let (shift, hashes) = sketch.parts();
        if hashes.len() > MAX_HASHES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a sketch of {} hashes is too long to store", hashes.len()),
            ));
        }
        let size = record_words(hashes.len());
        let head = match self.head {
            Some(head) if self.chunk(head).used + size <= CHUNK_WORDS => head,
            _ => self.open_chunk()?,
        };
        let chunk = self.chunk_mut(head);
        let address = Address::new(head, chunk.used);
        chunk.write(node, shift, hashes);
        Ok(address)
    }

    /// Starts a new head chunk; its number.
    fn open_chunk(&mut self) -> io::Result<usize> {
        let chunk = Chunk::new(&self.backing, self.next_file)?;
        self.next_file += u64::from(chunk.file.is_some());
        let number = match self.free.pop() {
            Some(number) => number,
            None if self.chunks.len() < MAX_CHUNKS => {
                self.chunks.push(None);
                self.chunks.len() - 1
            }
            None => {
                return Err(io::Error::other(format!(
                    "the sketch store is full ({MAX_CHUNKS} chunks of {} MiB)",
                    (CHUNK_WORDS * 4) >> 20
                )));
            }
        };
        self.chunks[number] = Some(chunk);
        self.sealed = self.head.replace(number);
        Ok(number)
    }

    /// Chunk `number`, which must be in use (the head, or one a record was just read from).
    fn chunk(&self, number: usize) -> &Chunk {
        match &self.chunks[number] {
            Some(chunk) => chunk,
            None => panic!("sketch chunk {number} was freed while in use"),
        }
    }

    /// Chunk `number`, if it is in use (a number read from a record's address need not be).
    fn chunk_in_use(&self, number: usize) -> Option<&Chunk> {
        self.chunks.get(number).and_then(Option::as_ref)
    }

    fn chunk_mut(&mut self, number: usize) -> &mut Chunk {
        match &mut self.chunks[number] {
            Some(chunk) => chunk,
            None => panic!("sketch chunk {number} was freed while in use"),
        }
    }

    /// The record at `address`, if it can be read ([`Chunk::read`]): `None` for a damaged
    /// one, or an address of no chunk in use.
    pub(super) fn get(&self, address: Address) -> Option<(Fingerprint, SketchView<'_>)> {
        self.chunk_in_use(address.chunk())?.read(address.word())
    }

    /// Releases the record at `address`. A chunk other than the head is freed when its last
    /// record goes. A record that cannot be read is left counted as live, since its size is
    /// unknown: its chunk then stays until the store is loaded again (where the checkpoint's
    /// checksum refuses the damaged chunk). A damaged size that still reads can only make the
    /// count wrong: the chunk is then kept, or freed early, and its records read as missing.
    pub(super) fn release(&mut self, address: Address) {
        let number = address.chunk();
        let Some((_, sketch)) = self.get(address) else {
            return;
        };
        let size = record_words(sketch.hashes().len());
        let chunk = self.chunk_mut(number);
        chunk.live = chunk.live.saturating_sub(size);
        if chunk.live == 0 && self.head != Some(number) {
            self.free_chunk(number);
        }
    }

    /// Frees chunk `number`; its file, if any, goes now unless a checkpoint names it.
    fn free_chunk(&mut self, number: usize) {
        let chunk = self.chunks[number].take();
        self.free.push(number);
        if let (Some(file), Backing::Files(dir)) =
            (chunk.and_then(|chunk| chunk.file), &self.backing)
        {
            // Unmapped above (the chunk is dropped), so the file can go. A file that cannot be
            // deleted now is deleted when the store is next loaded or made.
            if file.saved || remove_if_present(&chunk_path(dir, file.id)).is_err() {
                self.retired.push(file.id);
            }
        }
    }

    /// Whether chunk `number` is worth evacuating: not the head, and fewer than a quarter of
    /// its words live. Evacuating ([`records`](Self::records), then [`append`](Self::append)
    /// and [`release`](Self::release) of each live one) frees it.
    fn due(&self, number: usize) -> bool {
        let chunk = self.chunks.get(number).and_then(Option::as_ref);
        chunk.is_some_and(|chunk| self.head != Some(number) && chunk.live * 4 < chunk.used)
    }

    /// `address`'s chunk, if it is [due](Self::due) (after a release from it).
    pub(super) fn evacuation_due(&self, address: Address) -> Option<usize> {
        Some(address.chunk()).filter(|&number| self.due(number))
    }

    /// The chunk that stopped being the head since the last call, if it is [due](Self::due)
    /// (its records were released while it was the head).
    pub(super) fn take_sealed(&mut self) -> Option<usize> {
        self.sealed.take().filter(|&number| self.due(number))
    }

    /// Every record written to chunk `number`, released or not, in order, up to the first
    /// that cannot be read (where the next one starts is unknown after it).
    pub(super) fn records(&self, number: usize) -> Vec<(Address, Fingerprint)> {
        let mut records = Vec::new();
        let Some(chunk) = self.chunk_in_use(number) else {
            return records;
        };
        let mut word = 0;
        while let Some((node, sketch)) = chunk.read(word) {
            records.push((Address::new(number, word), node));
            word += record_words(sketch.hashes().len());
        }
        records
    }

    /// Whether this arena reads a checkpoint's files without changing them
    /// ([`Backing::Snapshot`]).
    pub(super) fn is_snapshot(&self) -> bool {
        matches!(self.backing, Backing::Snapshot(_))
    }

    /// What loading a checkpoint read-only found wrong with its chunk files
    /// ([`Backing::Snapshot`]; always empty otherwise, where such a chunk is an error).
    pub(super) fn damage(&self) -> &[ChunkDamage] {
        &self.damage
    }

    /// Heap bytes of chunks kept in memory and of the arena's own tables.
    pub(super) fn heap_bytes(&self) -> usize {
        self.chunks
            .iter()
            .flatten()
            .map(Chunk::heap_bytes)
            .sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + self.free.capacity() * std::mem::size_of::<usize>()
    }

    /// Bytes of chunk files mapped into memory (what the page cache may hold of them).
    pub(super) fn mapped_bytes(&self) -> usize {
        self.chunks.iter().flatten().map(Chunk::mapped_bytes).sum()
    }

    /// Writes the arena to a checkpoint: chunks on the heap whole, chunks in named files by
    /// number, length and the checksum of their words up to that length, after flushing what
    /// was written to them since the last checkpoint. Sketches in unlinked files cannot be
    /// saved.
    pub(super) fn save(&mut self, out: &mut CheckpointWriter) -> io::Result<()> {
        let kind = match self.backing {
            Backing::Memory => 0,
            Backing::Files(_) => 1,
            Backing::Directory(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "sketches kept in unlinked files cannot be checkpointed",
                ));
            }
            Backing::Snapshot(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "sketches read from a checkpoint to check it cannot be checkpointed",
                ));
            }
        };
        out.put_u64(kind)?;
        out.put_u64(self.chunks.len() as u64)?;
        for chunk in &mut self.chunks {
            let Some(chunk) = chunk else {
                out.put_u64(0)?;
                continue;
            };
            out.put_u64(1)?;
            out.put_u64(chunk.used as u64)?;
            out.put_u64(chunk.live as u64)?;
            match (&chunk.words, &mut chunk.file, &self.backing) {
                (_, Some(file), Backing::Files(dir)) => {
                    if chunk.used > file.synced {
                        out.depends_on(chunk_path(dir, file.id));
                    }
                    file.synced = chunk.used;
                    file.saved = true;
                    out.put_u64(file.id)?;
                    if out.has_chunk_checksums() {
                        out.put_u64(file.written.digest())?;
                    }
                }
                // On the heap a chunk holds its records without the padding after the last.
                (words, _, _) => out.put_slice(words.as_slice())?,
            }
        }
        let slot = |number: Option<usize>| number.map_or(u64::MAX, |number| number as u64);
        let free: Vec<u64> = self.free.iter().map(|&number| number as u64).collect();
        out.put_slice(&free)?;
        out.put_u64(slot(self.head))?;
        out.put_u64(slot(self.sealed))?;
        out.put_u64(self.next_file)?;
        // Chunks freed since the last checkpoint are not in this one: their files go once it
        // is in place.
        if let Backing::Files(dir) = &self.backing {
            for id in self.retired.drain(..) {
                out.supersedes(chunk_path(dir, id));
            }
        }
        Ok(())
    }

    /// Reads what [`save`](Self::save) wrote into this new arena (with the backing of the
    /// saved one), mapping the named chunk files; then deletes the chunk files it does not
    /// name (written after the checkpoint, or left by a crash).
    ///
    /// A named file that is missing, not a chunk long, or whose covered words do not match
    /// the checksum the checkpoint recorded is an error naming it (the checkpoint cannot be
    /// used). Read-only ([`Backing::Snapshot`]) it is [`damage`](Self::damage) instead, and
    /// the load goes on: a file that cannot be mapped becomes an empty chunk, whose records
    /// read as missing. Checking costs a pass over the covered words, chunks in parallel: on
    /// a 2-core machine 5.5 to 7 GB/s from the page cache (3.7 on one core), the disk's rate
    /// (1.2 GB/s there) after a reboot.
    pub(super) fn load(&mut self, input: &mut CheckpointReader) -> io::Result<()> {
        if !self.chunks.is_empty() {
            return Err(input.invalid("loaded into sketches already in use"));
        }
        let kind = input.get_u64()?;
        let dir = match (&self.backing, kind) {
            (Backing::Memory, 0) => None,
            (Backing::Files(dir) | Backing::Snapshot(dir), 1) => Some(dir.clone()),
            _ => return Err(input.invalid("its sketches were kept elsewhere")),
        };
        let read_only = matches!(self.backing, Backing::Snapshot(_));
        let count = input.get_usize(MAX_CHUNKS)?;
        // Chunks in named files, mapped and checked once all are read from the checkpoint.
        let mut saved: Vec<SavedChunk> = Vec::new();
        for number in 0..count {
            self.chunks.push(None);
            if input.get_u64()? == 0 {
                continue;
            }
            let used = input.get_usize(CHUNK_WORDS)?;
            let live = input.get_usize(used)?;
            if dir.is_some() {
                let id = input.get_u64()?;
                let recorded = match input.has_chunk_checksums() {
                    true => Some(input.get_u64()?),
                    false => None,
                };
                saved.push(SavedChunk {
                    number,
                    id,
                    used,
                    live,
                    recorded,
                });
                continue;
            }
            let words: Vec<u32> = input.get_vec()?;
            if words.len() > used {
                return Err(input.invalid("a sketch chunk is cut off"));
            }
            self.chunks[number] = Some(Chunk {
                words: Words::Memory(words),
                used,
                live,
                file: None,
            });
        }
        let mut files = Vec::new();
        if let Some(dir) = &dir {
            // In parallel: checking reads every word a checkpoint covers, gigabytes at
            // millions of documents.
            let mapped: Vec<_> = saved
                .par_iter()
                .map(|chunk| {
                    map_saved_chunk(
                        &chunk_path(dir, chunk.id),
                        chunk.used,
                        chunk.recorded,
                        read_only,
                    )
                })
                .collect();
            for (saved, mapped) in saved.into_iter().zip(mapped) {
                let SavedChunk {
                    number,
                    id,
                    used,
                    live,
                    ..
                } = saved;
                let path = chunk_path(dir, id);
                let (words, file) = match mapped {
                    Ok((map, _)) if read_only => (Words::Mapped(map), None),
                    Ok((map, written)) => {
                        files.push(id);
                        let file = ChunkFile {
                            id,
                            synced: used,
                            saved: true,
                            written,
                        };
                        (Words::Mapped(map), Some(file))
                    }
                    Err(problem) if !read_only => {
                        return Err(
                            input.invalid(format!("sketch chunk {}: {problem}", path.display()))
                        );
                    }
                    Err(problem) => {
                        // Read on, for what `check` compares: a changed file as it is, one
                        // that cannot be mapped as an empty chunk (its records read as
                        // missing).
                        let words = map_file_privately(&path)
                            .map_or(Words::Memory(Vec::new()), Words::Mapped);
                        self.damage.push(ChunkDamage { path, problem });
                        (words, None)
                    }
                };
                self.chunks[number] = Some(Chunk {
                    words,
                    used,
                    live,
                    file,
                });
            }
        }
        let free: Vec<u64> = input.get_vec()?;
        let (head, sealed) = (input.get_u64()?, input.get_u64()?);
        self.next_file = input.get_u64()?;
        let in_use = |number: u64| {
            self.chunks
                .get(number as usize)
                .is_some_and(Option::is_some)
        };
        if free
            .iter()
            .any(|&number| in_use(number) || number as usize >= count)
        {
            return Err(input.invalid("a free sketch chunk number is in use"));
        }
        if [head, sealed]
            .iter()
            .any(|&number| number != u64::MAX && !in_use(number))
        {
            return Err(input.invalid("the head sketch chunk is not there"));
        }
        let slot = |number: u64| (number != u64::MAX).then_some(number as usize);
        (self.head, self.sealed) = (slot(head), slot(sealed));
        self.free = free.into_iter().map(|number| number as usize).collect();
        if let Some(dir) = dir.filter(|_| !read_only) {
            remove_chunk_files(&dir, &files)?;
            self.retired.clear();
        }
        Ok(())
    }

    /// Chunks in use.
    #[cfg(test)]
    pub(super) fn chunk_count(&self) -> usize {
        self.chunks.iter().flatten().count()
    }

    /// Words of live records over all chunks, and words written (for tests and diagnostics).
    pub(super) fn usage(&self) -> (usize, usize) {
        self.chunks
            .iter()
            .flatten()
            .fold((0, 0), |(live, used), chunk| {
                (live + chunk.live, used + chunk.used)
            })
    }
}
