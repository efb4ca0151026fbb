//! Where a [`SketchStore`](super::SketchStore) keeps its sketches: records packed into chunks,
//! in memory or in memory-mapped files.
//!
//! A sketch of a long text is 200 hashes (800 bytes), sixteen times what the rest of a node
//! costs; kept in mapped files, sketches cost the heap nothing, and the operating system keeps
//! the recently read ones in its page cache (a lookup reads only its candidates' sketches).

use std::io;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use super::SketchView;
use crate::Fingerprint;

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

/// The longest sketch a record holds (a 24-bit count; sketches keep at most 100,000).
const MAX_HASHES: usize = (1 << 24) - 1;

/// Where a record is: its chunk's number (high bits) and its offset in units (low bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Address(pub(super) u32);

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
}

impl Chunk {
    fn new(backing: &Backing) -> io::Result<Chunk> {
        let words = match backing {
            Backing::Memory => Words::Memory(Vec::new()),
            Backing::Directory(dir) => Words::Mapped(map_new_file(dir)?),
        };
        Ok(Chunk {
            words,
            used: 0,
            live: 0,
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
            }
        }
        let size = record_words(hashes.len());
        self.used += size;
        self.live += size;
    }

    /// The record at `word`: its node and sketch.
    fn read(&self, word: usize) -> (Fingerprint, SketchView<'_>) {
        let words = self.words.as_slice();
        let header = &words[word..word + HEADER_WORDS];
        let node = Fingerprint(u64::from(header[0]) | (u64::from(header[1]) << 32));
        let (shift, len) = ((header[2] >> 24) as u8, (header[2] & 0xff_ffff) as usize);
        let start = word + HEADER_WORDS;
        (
            node,
            SketchView::from_parts(shift, &words[start..start + len]),
        )
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

/// A new unlinked file of [`CHUNK_WORDS`] words in `dir`, mapped.
fn map_new_file(dir: &Path) -> io::Result<MmapMut> {
    let file = tempfile::tempfile_in(dir)?;
    file.set_len((CHUNK_WORDS * std::mem::size_of::<u32>()) as u64)?;
    // SAFETY: the file was created unlinked just now and never leaves this function but
    // through the mapping, so no other process or handle can truncate or change it while it is
    // mapped (the mapping keeps it alive after `file` is closed).
    unsafe { MmapMut::map_mut(&file) }
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
}

impl SketchArena {
    pub(super) fn new(backing: Backing) -> Self {
        SketchArena {
            backing,
            chunks: Vec::new(),
            free: Vec::new(),
            head: None,
            sealed: None,
        }
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
        let chunk = Chunk::new(&self.backing)?;
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

    fn chunk(&self, number: usize) -> &Chunk {
        match &self.chunks[number] {
            Some(chunk) => chunk,
            None => panic!("sketch chunk {number} was freed while in use"),
        }
    }

    fn chunk_mut(&mut self, number: usize) -> &mut Chunk {
        match &mut self.chunks[number] {
            Some(chunk) => chunk,
            None => panic!("sketch chunk {number} was freed while in use"),
        }
    }

    /// The record at `address`.
    pub(super) fn get(&self, address: Address) -> (Fingerprint, SketchView<'_>) {
        self.chunk(address.chunk()).read(address.word())
    }

    /// Releases the record at `address`. A chunk other than the head is freed when its last
    /// record goes.
    pub(super) fn release(&mut self, address: Address) {
        let number = address.chunk();
        let (_, sketch) = self.get(address);
        let size = record_words(sketch.hashes().len());
        let chunk = self.chunk_mut(number);
        chunk.live -= size;
        if chunk.live == 0 && self.head != Some(number) {
            self.chunks[number] = None;
            self.free.push(number);
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

    /// Every record written to chunk `number`, released or not, in order.
    pub(super) fn records(&self, number: usize) -> Vec<(Address, Fingerprint)> {
        let chunk = self.chunk(number);
        let mut records = Vec::new();
        let mut word = 0;
        while word < chunk.used {
            let (node, sketch) = chunk.read(word);
            records.push((Address::new(number, word), node));
            word += record_words(sketch.hashes().len());
        }
        records
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
