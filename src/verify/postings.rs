//! The key postings of a [`SketchStore`](super::SketchStore): for each candidate key, the
//! records of the sketches that hold it, in one flat table of 8-byte entries.

use std::io;

use super::arena::Address;
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter};

/// Records a key's posting list holds at most; the oldest leaves first. A key that many texts
/// share is boilerplate (a site's footer, an agency's byline), and the most recent texts that
/// carry it are the likeliest copies of a new one, so lookups stay bounded without a list of
/// stop shingles.
pub const POSTING_CAPACITY: usize = 16;

/// One posting: a key and a record that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
struct Entry {
    key: u32,
    record: Address,
}

// SAFETY: two 4-byte fields for which every bit pattern is valid, `repr(C)`, no padding.
unsafe impl bytemuck::Zeroable for Entry {}
// SAFETY: as above; `Copy`, no pointers.
unsafe impl bytemuck::Pod for Entry {}

const EMPTY: Entry = Entry {
    key: 0,
    record: Address::NONE,
};

/// Entries over slots at most, before the table grows by half (so between a half and three
/// quarters full).
const MAX_LOAD: (usize, usize) = (3, 4);

/// A multimap from keys to records: open addressing with linear probing, where a key's entries
/// lie in the run of occupied slots that starts at its home slot.
///
/// Invariants: between a key's home slot and each of its entries no slot is empty; a key has at
/// most [`POSTING_CAPACITY`] entries, in the order they were added (inserting fills the first
/// empty slot after all of them; removing shifts later entries back without reordering any two
/// of one home; growing re-inserts in probe order).
#[derive(Debug, Default)]
pub(super) struct KeyPostings {
    slots: Vec<Entry>,
    len: usize,
}

impl KeyPostings {
    /// The home slot of a key: the key mixed (keys are the smallest hashes of their texts, so
    /// crowded at the bottom of their range), then mapped onto the table by multiplication.
    fn home(&self, key: u32) -> usize {
        let mixed = (u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
        ((u64::from(mixed) * self.slots.len() as u64) >> 32) as usize
    }

    fn next(&self, slot: usize) -> usize {
        if slot + 1 == self.slots.len() {
            0
        } else {
            slot + 1
        }
    }

    /// The slots of `key`'s run, from its home to the first empty slot.
    fn run(&self, key: u32) -> impl Iterator<Item = usize> + '_ {
        let start = if self.slots.is_empty() {
            None
        } else {
            Some(self.home(key))
        };
        std::iter::successors(start, move |&slot| Some(self.next(slot)))
            .take_while(move |&slot| self.slots[slot] != EMPTY)
    }

    /// Calls `visit` with each record posted under `key`, oldest first.
    pub(super) fn for_each(&self, key: u32, mut visit: impl FnMut(Address)) {
        for slot in self.run(key) {
            if self.slots[slot].key == key {
                visit(self.slots[slot].record);
            }
        }
    }

    /// Posts `record` under `key`; the key's oldest record leaves if it has
    /// [`POSTING_CAPACITY`] already.
    pub(super) fn insert(&mut self, key: u32, record: Address) {
        let mine: Vec<usize> = self
            .run(key)
            .filter(|&slot| self.slots[slot].key == key)
            .collect();
        if mine.len() >= POSTING_CAPACITY {
            self.remove_at(mine[0]);
        }
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow();
        }
        self.place(Entry { key, record });
    }

    /// Puts an entry in the first empty slot of its run (the table has one).
    fn place(&mut self, entry: Entry) {
        let mut slot = self.home(entry.key);
        while self.slots[slot] != EMPTY {
            slot = self.next(slot);
        }
        self.slots[slot] = entry;
        self.len += 1;
    }

    /// The slot of `record`'s entry under `key`.
    fn find(&self, key: u32, record: Address) -> Option<usize> {
        let wanted = Entry { key, record };
        self.run(key).find(|&slot| self.slots[slot] == wanted)
    }

    /// Takes `record` off `key`'s posting list, if it is there.
    pub(super) fn remove(&mut self, key: u32, record: Address) {
        if let Some(slot) = self.find(key, record) {
            self.remove_at(slot);
        }
    }

    /// Posts `to` where `key` posted `from` (a record moved), keeping its place in the order.
    pub(super) fn replace(&mut self, key: u32, from: Address, to: Address) {
        if let Some(slot) = self.find(key, from) {
            self.slots[slot].record = to;
        }
    }

    /// Empties a slot and shifts back the entries after it that may sit earlier in their run
    /// (backward-shift deletion: no tombstones, and no two entries of one home swap places).
    fn remove_at(&mut self, mut hole: usize) {
        let mut slot = hole;
        loop {
            slot = self.next(slot);
            let entry = self.slots[slot];
            if entry == EMPTY {
                break;
            }
            let home = self.home(entry.key);
            // The entry may move back to the hole unless its home lies after the hole (up to
            // the entry itself), cyclically.
            let home_after_hole = if hole <= slot {
                hole < home && home <= slot
            } else {
                hole < home || home <= slot
            };
            if !home_after_hole {
                self.slots[hole] = entry;
                hole = slot;
            }
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
    }

    /// Makes the table half as large again, re-inserting entries in probe order.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![EMPTY; (old.len() + old.len() / 2).max(16)];
        self.len = 0;
        // Starting after an empty slot, no run wraps around the end of the old table, so each
        // key's entries are met in their order.
        let start = old.iter().position(|&entry| entry == EMPTY).unwrap_or(0);
        for &entry in old[start..].iter().chain(&old[..start]) {
            if entry != EMPTY {
                self.place(entry);
            }
        }
    }

    /// Entries posted.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Every key with its records, oldest first (for invariant checks).
    pub(super) fn lists(&self) -> std::collections::BTreeMap<u32, Vec<Address>> {
        let mut lists = std::collections::BTreeMap::<u32, Vec<Address>>::new();
        let start = self
            .slots
            .iter()
            .position(|&entry| entry == EMPTY)
            .unwrap_or(0);
        for &entry in self.slots[start..].iter().chain(&self.slots[..start]) {
            if entry != EMPTY {
                lists.entry(entry.key).or_default().push(entry.record);
            }
        }
        lists
    }

    /// Checks that every entry is reachable from its key's home, and the caps.
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        for (slot, entry) in self.slots.iter().enumerate() {
            if *entry != EMPTY && !self.run(entry.key).any(|found| found == slot) {
                return Err(format!(
                    "posting of key {:#x} is cut off from its home",
                    entry.key
                ));
            }
        }
        let counted = self.slots.iter().filter(|&&entry| entry != EMPTY).count();
        if counted != self.len {
            return Err(format!("{counted} postings, {} counted", self.len));
        }
        match self
            .lists()
            .into_iter()
            .find(|(_, list)| list.len() > POSTING_CAPACITY)
        {
            Some((key, list)) => Err(format!("key {key:#x} holds {} records", list.len())),
            None => Ok(()),
        }
    }

    /// Writes the table to a checkpoint as it is (slots and all).
    pub(super) fn save(&self, out: &mut CheckpointWriter) -> io::Result<()> {
        out.put_slice(&self.slots)
    }

    /// Reads what [`save`](Self::save) wrote.
    pub(super) fn load(input: &mut CheckpointReader) -> io::Result<Self> {
        let slots: Vec<Entry> = input.get_vec()?;
        let len = slots.iter().filter(|&&entry| entry != EMPTY).count();
        if len * MAX_LOAD.1 > slots.len() * MAX_LOAD.0 {
            return Err(input.invalid("the key postings are fuller than they can be"));
        }
        Ok(KeyPostings { slots, len })
    }

    /// Heap bytes of the table.
    pub(super) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Entry>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a model of ordered, capped lists: inserts, removals and replacements on few
        /// keys (so that runs collide and wrap), with the table growing from empty.
        #[test]
        fn behaves_as_capped_ordered_lists(operations in proptest::collection::vec((0u8..3, 0u32..12, 0u32..40), 1..600)) {
            let mut table = KeyPostings::default();
            let mut model = BTreeMap::<u32, Vec<Address>>::new();
            for (operation, key, record) in operations {
                let record = Address(record);
                let list = model.entry(key).or_default();
                match operation {
                    0 => {
                        if list.len() == POSTING_CAPACITY {
                            list.remove(0);
                        }
                        list.push(record);
                        table.insert(key, record);
                    }
                    1 => {
                        if let Some(at) = list.iter().position(|&posted| posted == record) {
                            list.remove(at);
                        }
                        table.remove(key, record);
                    }
                    _ => {
                        let moved = Address(record.0 + 1000);
                        if let Some(at) = list.iter().position(|&posted| posted == record) {
                            list[at] = moved;
                        }
                        table.replace(key, record, moved);
                    }
                }
                model.retain(|_, list| !list.is_empty());
                prop_assert_eq!(table.lists(), model.clone());
                table.check_invariants().map_err(TestCaseError::fail)?;
                for (&key, list) in &model {
                    let mut found = Vec::new();
                    table.for_each(key, |record| found.push(record));
                    prop_assert_eq!(&found, list);
                }
            }
        }
    }
}
