//! The sketches of the forest's nodes and the key postings that find candidates by them.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use super::arena::{Address, Backing, ChunkDamage, SketchArena};
use super::postings::KeyPostings;
use super::{Candidates, Sketch, SketchView};
use crate::Fingerprint;
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter};
use crate::simhash::FingerprintHasher;

/// Each node's record, by fingerprint.
type Records = HashMap<u64, Address, std::hash::BuildHasherDefault<FingerprintHasher>>;

/// Each node's sketch, and for each candidate key the nodes whose sketches hold it.
///
/// Sketches are records of an arena, on the heap ([`SketchStore::default`]) or in memory-mapped
/// files ([`SketchStore::in_directory`]); the heap keeps, per node, where its record is (a hash
/// map entry, about 28 bytes at 10M nodes) and its keys' postings (8 bytes a key, in a table
/// between a half and three quarters full).
///
/// Invariants: every node in a posting list has a sketch here whose [`Sketch::keys`] contain
/// that key; a posting list holds a node at most once and at most
/// [`POSTING_CAPACITY`](super::POSTING_CAPACITY) nodes, in the order they were added (a record
/// moved to another chunk keeps its place). A record whose mapped file was damaged under the
/// store (one that cannot be read, or names another node) breaks them: its node reads as
/// having no sketch, it is skipped where it is posted, and nothing panics; loading the
/// checkpoint again refuses the damaged chunk.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::verify::{Sketch, SketchStore};
///
/// let dir = tempfile::tempdir()?;
/// let mut store = SketchStore::in_directory(dir.path())?;
/// let story = "国务院常务会议今天召开。会议部署推进新型城镇化建设工作。";
/// store.insert(Fingerprint(1), &Sketch::of(&[story], 200))?;
/// let mut found = Vec::new();
/// store.for_each_candidate(Sketch::of(&[story], 200).view(), |node| found.push(node));
/// assert!(found.iter().all(|&node| node == Fingerprint(1)) && !found.is_empty());
/// assert_eq!(store.get(Fingerprint(1)).map(|view| view.to_sketch()), Some(Sketch::of(&[story], 200)));
/// store.remove(Fingerprint(1));
/// assert!(store.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct SketchStore {
    arena: SketchArena,
    /// Each node's record.
    records: Records,
    postings: KeyPostings,
}

impl Default for SketchStore {
    /// A store that keeps its sketches on the heap.
    fn default() -> Self {
        SketchStore::with_backing(Backing::Memory)
    }
}

impl std::fmt::Debug for SketchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SketchStore")
            .field("nodes", &self.records.len())
            .field("postings", &self.postings.len())
            .finish_non_exhaustive()
    }
}

impl SketchStore {
    /// A store that keeps its sketches in files of `dir`, mapped into memory: they cost the
    /// heap nothing, and the files are unlinked as soon as they are made (nothing is left in
    /// `dir`, whatever way the process ends). Fails when `dir` cannot hold a new file.
    pub fn in_directory(dir: &Path) -> io::Result<Self> {
        // Try once now, so that a directory that cannot be written fails here, not at the
        // first insert.
        tempfile::tempfile_in(dir)?;
        Ok(SketchStore::with_backing(Backing::Directory(
            dir.to_path_buf(),
        )))
    }

    /// A store that keeps its sketches in named files of `dir` (created if missing), mapped
    /// into memory like [`in_directory`](Self::in_directory)'s, but kept: a forest checkpoint
    /// names them instead of copying them ([`Forest::save`](crate::Forest::save)). Chunk files
    /// already in `dir` are a checkpoint's: [`Forest::load`](crate::Forest::load) maps them,
    /// and otherwise they are deleted once this store's first checkpoint is in place. One
    /// store at a time may use a directory.
    pub fn in_checkpoint_directory(dir: &Path) -> io::Result<Self> {
        Ok(SketchStore::with_arena(SketchArena::in_files(dir)?))
    }

    /// [`in_checkpoint_directory`](Self::in_checkpoint_directory) for a forest that loads no
    /// checkpoint (there is none, or it cannot be used): the chunk files already in `dir`,
    /// which no usable checkpoint names, are deleted first, freeing their room on disk.
    pub fn in_cleared_checkpoint_directory(dir: &Path) -> io::Result<Self> {
        Ok(SketchStore::with_arena(SketchArena::in_cleared_files(dir)?))
    }

    /// A store to [load](crate::Forest::load) the checkpoint of `dir` into without changing
    /// anything there: its chunk files are mapped copy-on-write, new sketches stay on the
    /// heap, and no file is made or deleted. It cannot be saved.
    pub(crate) fn snapshot_of_checkpoint_directory(dir: &Path) -> Self {
        SketchStore::with_backing(Backing::Snapshot(dir.to_path_buf()))
    }

    fn with_backing(backing: Backing) -> Self {
        SketchStore::with_arena(SketchArena::new(backing))
    }

    fn with_arena(arena: SketchArena) -> Self {
        SketchStore {
            arena,
            records: HashMap::default(),
            postings: KeyPostings::default(),
        }
    }

    /// Writes the store to a checkpoint (see [`SketchArena::save`]).
    pub(crate) fn save(&mut self, out: &mut CheckpointWriter) -> io::Result<()> {
        self.arena.save(out)?;
        let (nodes, records): (Vec<u64>, Vec<Address>) = self.records.iter().unzip();
        out.put_slice(&nodes)?;
        out.put_slice(&records)?;
        self.postings.save(out)
    }

    /// Reads what [`save`](Self::save) wrote into this empty store, which keeps its
    /// sketches where the saved one did (on the heap, or in the same checkpoint directory).
    pub(crate) fn load(&mut self, input: &mut CheckpointReader) -> io::Result<()> {
        if !self.is_empty() {
            return Err(input.invalid("loaded into a sketch store in use"));
        }
        self.arena.load(input)?;
        let nodes: Vec<u64> = input.get_vec()?;
        let records: Vec<Address> = input.get_vec()?;
        if nodes.len() != records.len() {
            return Err(input.invalid("sketch records and nodes differ in number"));
        }
        self.records.reserve(nodes.len());
        self.records.extend(nodes.into_iter().zip(records));
        // Without the chunks' checksums (a version 2 checkpoint), each record is checked
        // instead; read-only, `check` compares them with the index's sketches.
        if !input.has_chunk_checksums()
            && !self.arena.is_snapshot()
            && let Some((&node, _)) = self
                .records
                .iter()
                .find(|&(&node, _)| self.record(Fingerprint(node)).is_none())
        {
            return Err(input.invalid(format!(
                "the sketch record of {} cannot be read or names another node",
                Fingerprint(node)
            )));
        }
        self.postings = KeyPostings::load(input)?;
        Ok(())
    }

    /// What loading a checkpoint read-only found wrong with its chunk files (see
    /// [`snapshot_of_checkpoint_directory`](Self::snapshot_of_checkpoint_directory)).
    pub(crate) fn chunk_damage(&self) -> &[ChunkDamage] {
        self.arena.damage()
    }

    /// Nodes with a sketch.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no node has a sketch.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The sketch of a node; `None` also when its record is damaged (see [`SketchStore`]).
    pub fn get(&self, node: Fingerprint) -> Option<SketchView<'_>> {
        self.record(node).map(|(_, sketch)| sketch)
    }

    /// Where a node's record is and its sketch ([`record_of`]).
    fn record(&self, node: Fingerprint) -> Option<(Address, SketchView<'_>)> {
        record_of(&self.records, &self.arena, node)
    }

    /// Records a new node's sketch and posts it under its keys (replacing any earlier sketch of
    /// the same node). Fails only when a store in a directory cannot grow its files; the store
    /// is then as it was, without the node.
    pub fn insert(&mut self, node: Fingerprint, sketch: &Sketch) -> io::Result<()> {
        self.remove(node);
        let address = self.arena.append(node, sketch.view())?;
        for &key in sketch.keys() {
            self.postings.insert(key, address);
        }
        self.records.insert(node.0, address);
        if let Some(chunk) = self.arena.take_sealed() {
            self.evacuate(chunk);
        }
        Ok(())
    }

    /// Forgets a node (when it expires). A damaged record's keys are unknown: its postings
    /// stay, skipped by lookups, and its words stay counted in its chunk.
    pub fn remove(&mut self, node: Fingerprint) {
        let Some((address, sketch)) = record_of(&self.records, &self.arena, node) else {
            self.records.remove(&node.0);
            return;
        };
        for &key in sketch.keys() {
            self.postings.remove(key, address);
        }
        self.records.remove(&node.0);
        self.arena.release(address);
        if let Some(chunk) = self.arena.evacuation_due(address) {
            self.evacuate(chunk);
        }
    }

    /// Moves the live records of an arena chunk to its head, which frees the chunk. A record
    /// that cannot be moved (no room for a new chunk) stays, and so does the chunk.
    fn evacuate(&mut self, chunk: usize) {
        for (from, node) in self.arena.records(chunk) {
            let Some((_, sketch)) = self.record(node).filter(|&(at, _)| at == from) else {
                continue;
            };
            let sketch = sketch.to_sketch();
            let Ok(to) = self.arena.append(node, sketch.view()) else {
                return;
            };
            for &key in sketch.keys() {
                self.postings.replace(key, from, to);
            }
            self.records.insert(node.0, to);
            self.arena.release(from);
        }
    }

    /// Calls `visit` with every node posted under one of `sketch`'s keys (a node that shares
    /// several keys is visited once for each).
    pub fn for_each_candidate(&self, sketch: SketchView<'_>, mut visit: impl FnMut(Fingerprint)) {
        for &key in sketch.keys() {
            self.for_each_posted(key, &mut visit);
        }
    }

    /// Adds the nodes posted under each of `sketch`'s keys to `candidates`, key by key.
    pub fn push_posted(&self, sketch: SketchView<'_>, candidates: &mut Candidates) {
        for &key in sketch.keys() {
            self.for_each_posted(key, |node| candidates.push_posted(node));
            candidates.end_key();
        }
    }

    /// Calls `visit` with each node posted under `key` whose record can be read.
    fn for_each_posted(&self, key: u32, mut visit: impl FnMut(Fingerprint)) {
        self.postings.for_each(key, |address| {
            if let Some((node, _)) = self.arena.get(address) {
                visit(node);
            }
        });
    }

    /// Calls `visit` with every other node that shares a posting list with `node` (the nodes a
    /// lookup by `node`'s keys finds, as long as `node` itself is still posted there).
    pub fn for_each_co_posted(&self, node: Fingerprint, mut visit: impl FnMut(Fingerprint)) {
        let Some((address, sketch)) = self.record(node) else {
            return;
        };
        for &key in sketch.keys() {
            let mut posted = Vec::new();
            self.postings.for_each(key, |other| posted.push(other));
            if posted.contains(&address) {
                posted
                    .into_iter()
                    .filter(|&other| other != address)
                    .filter_map(|other| self.arena.get(other))
                    .for_each(|(other, _)| visit(other));
            }
        }
    }

    /// Checks the store's invariants; the first violation found is the error.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.postings.check_invariants()?;
        for (key, posted) in self.postings.lists() {
            for (i, address) in posted.iter().enumerate() {
                let (node, sketch) = self
                    .arena
                    .get(*address)
                    .ok_or_else(|| unreadable(*address))?;
                if posted[..i].contains(address) {
                    return Err(format!("{node} is posted twice under {key:#x}"));
                }
                if self.records.get(&node.0) != Some(address) {
                    return Err(format!(
                        "{node} is posted under {key:#x} from a stale record"
                    ));
                }
                if !sketch.keys().contains(&key) {
                    return Err(format!("{node} is posted under {key:#x}, not its key"));
                }
            }
        }
        let mut expected = 0;
        for (&node, &address) in &self.records {
            let (stored, sketch) = self.arena.get(address).ok_or_else(|| unreadable(address))?;
            if stored != Fingerprint(node) {
                return Err(format!(
                    "the record of {} is another node's",
                    Fingerprint(node)
                ));
            }
            expected += super::arena::record_words(sketch.hashes().len());
        }
        let (live, _) = self.arena.usage();
        if live != expected {
            return Err(format!(
                "{live} words live in the arena, {expected} in records"
            ));
        }
        Ok(())
    }

    /// Heap bytes of the records' locations, the postings and any sketches kept on the heap
    /// (capacity, with an estimate of the hash map's own slots).
    pub fn heap_bytes(&self) -> usize {
        const SLOT: usize = 1; // a hash map's control byte per slot
        self.records.capacity() * (std::mem::size_of::<(u64, Address)>() + SLOT)
            + self.postings.heap_bytes()
            + self.arena.heap_bytes()
    }

    /// Bytes of sketch files mapped into memory (none for a store on the heap): disk space,
    /// and what the operating system's page cache may keep of them.
    pub fn mapped_bytes(&self) -> usize {
        self.arena.mapped_bytes()
    }
}

/// Where `node`'s record is in `arena` and its sketch, if the record can be read and names
/// the node (a damaged one may not: see [`SketchStore`]). A function of the two fields, so
/// that the postings can change while the sketch is borrowed.
fn record_of<'a>(
    records: &Records,
    arena: &'a SketchArena,
    node: Fingerprint,
) -> Option<(Address, SketchView<'a>)> {
    let &address = records.get(&node.0)?;
    match arena.get(address)? {
        (stored, sketch) if stored == node => Some((address, sketch)),
        _ => None,
    }
}

/// The invariant violation of a record that cannot be read.
fn unreadable(address: Address) -> String {
    format!("the sketch record at {:#x} cannot be read", address.0)
}

#[cfg(test)]
mod tests {
    use super::super::arena::CHUNK_WORDS;
    use super::super::sketch::{TITLE_FLOOR, TITLES_END};
    use super::*;
    use proptest::prelude::*;

    /// A sketch of exactly these hashes (shift 0).
    /// The sketch of `hashes` (each below 5,000): those from 4,000 on are moved to the titles'
    /// range, and end the sketch's titles when it holds 4,999 (else they are the shingle
    /// hashes of a sketch stored before titles were kept), so that keys leave titles out.
    fn sketch(hashes: &std::collections::BTreeSet<u32>) -> Sketch {
        let high = |hash: u32| {
            if hash >= 4_000 {
                TITLE_FLOOR + hash
            } else {
                hash
            }
        };
        let values = hashes.iter().map(|&hash| u64::from(high(hash)));
        let titled = hashes.contains(&4_999) && hashes.len() > 1;
        let end = titled.then_some(u64::from(TITLES_END));
        Sketch::from_values(std::iter::once(0).chain(values).chain(end)).unwrap_or_default()
    }

    /// One step of churn: node `node` is removed if its number is even and it is there (so
    /// that sizes churn), else given the sketch of `hashes`; `model` follows.
    fn churn(
        store: &mut SketchStore,
        model: &mut HashMap<Fingerprint, Sketch>,
        node: u64,
        hashes: &std::collections::BTreeSet<u32>,
    ) {
        let node = Fingerprint(node);
        if node.0.is_multiple_of(2) && model.remove(&node).is_some() {
            store.remove(node);
        } else {
            let sketch = sketch(hashes);
            store.insert(node, &sketch).unwrap();
            model.insert(node, sketch);
        }
    }

    /// Every node of `model` reads back its sketch from `store`.
    fn reads_back(
        store: &SketchStore,
        model: &HashMap<Fingerprint, Sketch>,
    ) -> Result<(), TestCaseError> {
        for (&node, sketch) in model {
            let stored = store.get(node).map(SketchView::to_sketch);
            prop_assert_eq!(stored.as_ref(), Some(sketch));
        }
        Ok(())
    }

    #[test]
    fn a_version_2_checkpoint_loads_with_its_records_checked_instead_of_checksums() {
        // Version 2 recorded no chunk checksums: each node's record is checked instead, which
        // finds a zeroed one; a store loaded from it saves checksums in the next checkpoint.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let mut store = SketchStore::in_checkpoint_directory(dir.path()).unwrap();
        let mut model = HashMap::new();
        for node in 1..=20u64 {
            let hashes = (0..50).map(|hash| hash * 7 + node as u32).collect();
            churn(&mut store, &mut model, 2 * node + 1, &hashes);
        }
        let mut out = CheckpointWriter::create_version(&path, 2).unwrap();
        store.save(&mut out).unwrap();
        out.commit().unwrap();
        drop(store);
        let load = || -> io::Result<SketchStore> {
            let mut store = SketchStore::in_checkpoint_directory(dir.path())?;
            let mut input = CheckpointReader::open(&path)?.expect("saved");
            store.load(&mut input)?;
            input.finish()?;
            Ok(store)
        };
        let mut store = load().unwrap();
        reads_back(&store, &model).unwrap();
        let mut out = CheckpointWriter::create(&path).unwrap();
        store.save(&mut out).unwrap();
        out.commit().unwrap();
        drop(store);
        let store = load().unwrap();
        reads_back(&store, &model).unwrap();
        drop(store);

        let mut out = CheckpointWriter::create_version(&path, 2).unwrap();
        load().unwrap().save(&mut out).unwrap();
        out.commit().unwrap();
        let chunk = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|file| file != &path)
            .unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(chunk).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[0; 16], 0).unwrap();
        let refused = load()
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(refused.contains("names another node"), "{refused}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        /// Random inserts and removals of sketches of many sizes, in small chunks (unit tests'
        /// chunks are 16 KiB), so that chunks fill, empty and are evacuated: every node reads
        /// back its sketch, the invariants hold, and the arena never holds more than four times
        /// its live records plus the head.
        #[test]
        fn reads_back_what_it_keeps_while_chunks_come_and_go(
            mapped in any::<bool>(),
            operations in proptest::collection::vec(
                (0u64..48, proptest::collection::btree_set(0u32..5_000, 0..400)),
                1..300,
            ),
        ) {
            let dir = std::env::temp_dir();
            let mut store = match mapped {
                true => SketchStore::in_directory(&dir).unwrap(),
                false => SketchStore::default(),
            };
            let mut model = HashMap::new();
            for (node, hashes) in operations {
                churn(&mut store, &mut model, node, &hashes);
                store.check_invariants().map_err(TestCaseError::fail)?;
                prop_assert_eq!(store.len(), model.len());
                reads_back(&store, &model)?;
                let (live, used) = store.arena.usage();
                prop_assert!(used <= 4 * live + CHUNK_WORDS, "{used} words for {live} live");
            }
        }

        /// The same churn in a checkpoint directory, saved and loaded again every so often
        /// (the store in use dropped first, as after a restart): the loaded store reads back
        /// every sketch, and the directory holds exactly the chunk files the last checkpoint
        /// names plus those made since.
        #[test]
        fn a_checkpoint_directory_keeps_what_its_checkpoint_names(
            operations in proptest::collection::vec(
                (0u64..48, proptest::collection::btree_set(0u32..5_000, 0..400)),
                1..200,
            ),
            every in 5usize..40,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("checkpoint");
            let mut store = SketchStore::in_checkpoint_directory(dir.path()).unwrap();
            let mut model = HashMap::new();
            for (step, (node, hashes)) in operations.into_iter().enumerate() {
                churn(&mut store, &mut model, node, &hashes);
                if step % every == every - 1 {
                    let mut out = CheckpointWriter::create(&path).unwrap();
                    store.save(&mut out).unwrap();
                    out.commit().unwrap();
                    drop(store);
                    store = SketchStore::in_checkpoint_directory(dir.path()).unwrap();
                    let mut input = CheckpointReader::open(&path).unwrap().unwrap();
                    store.load(&mut input).unwrap();
                    input.finish().unwrap();
                    // The checkpoint itself, and one file a chunk.
                    let files = std::fs::read_dir(dir.path()).unwrap().count();
                    prop_assert_eq!(files, store.arena.chunk_count() + 1);
                }
                store.check_invariants().map_err(TestCaseError::fail)?;
                reads_back(&store, &model)?;
            }
        }

        /// A checkpoint taken, more records written after it (what a crashed writer leaves
        /// past the words it covers), then loaded, written over and saved again: it loads,
        /// since its checksums cover exactly what was written before each save. Then bytes of
        /// its chunk files are changed under the store using them: loading the checkpoint
        /// refuses them, and the store goes on answering every call without a panic,
        /// whatever it reads.
        #[test]
        fn changed_chunk_files_are_refused_and_never_panic_a_store(
            operations in proptest::collection::vec(
                (0u64..48, proptest::collection::btree_set(0u32..5_000, 0..400)),
                2..120,
            ),
            saved in 1usize..60,
            changes in proptest::collection::vec(
                (any::<proptest::sample::Index>(), any::<u32>(), 1u8..=255),
                1..16,
            ),
        ) {
            use std::os::unix::fs::FileExt;
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("checkpoint");
            let save = |store: &mut SketchStore| {
                let mut out = CheckpointWriter::create(&path).unwrap();
                store.save(&mut out).unwrap();
                out.commit().unwrap();
            };
            let load = || -> io::Result<SketchStore> {
                let mut store = SketchStore::in_checkpoint_directory(dir.path())?;
                let mut input = CheckpointReader::open(&path)?.expect("saved");
                store.load(&mut input)?;
                input.finish()?;
                Ok(store)
            };
            let (before, after) = operations.split_at(saved.min(operations.len() - 1));
            let mut store = SketchStore::in_checkpoint_directory(dir.path()).unwrap();
            let mut model = HashMap::new();
            for (node, hashes) in before {
                churn(&mut store, &mut model, *node, hashes);
            }
            save(&mut store);
            let mut lost = model.clone();
            for (node, hashes) in after {
                churn(&mut store, &mut lost, *node, hashes);
            }
            drop(store);
            let mut store = load().unwrap();
            reads_back(&store, &model)?;
            for (node, hashes) in after {
                churn(&mut store, &mut model, *node, hashes);
            }
            save(&mut store);
            drop(store);
            let mut store = load().unwrap();
            reads_back(&store, &model)?;

            // The first change is in the first byte of a file, which its checkpoint covers;
            // the others never undo it.
            let mut files: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .filter(|file| file != &path)
                .collect();
            files.sort();
            for (number, (file, at, xor)) in changes.iter().enumerate() {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(file.get(&files))
                    .unwrap();
                let bytes = 4 * CHUNK_WORDS as u64;
                let at = if number == 0 { 0 } else { 1 + u64::from(*at) % (bytes - 1) };
                let mut byte = [0];
                file.read_exact_at(&mut byte, at).unwrap();
                file.write_all_at(&[byte[0] ^ xor], at).unwrap();
            }
            let refused = load().err().map(|error| error.to_string()).unwrap_or_default();
            prop_assert!(refused.contains("checksum"), "{refused}");
            for (node, hashes) in &operations {
                let node = Fingerprint(*node);
                if let Some(sketch) = store.get(node).map(SketchView::to_sketch) {
                    store.for_each_candidate(sketch.view(), |_| {});
                }
                store.for_each_co_posted(node, |_| {});
                churn(&mut store, &mut model, node.0, hashes);
            }
            let _ = store.check_invariants();
            save(&mut store);
            drop(store);
            let _ = load();
        }
    }
}
