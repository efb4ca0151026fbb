//! The pigeonhole index against a brute-force linear scan.
//!
//! docs/algorithm.md ("The pigeonhole index"): a lookup returns exactly what a brute-force
//! linear scan returns, for every layout, at distance exactly k and k+1 too. Part (a) checks
//! that at scale for the layouts of 4, 10, 16 and
//! 20 tables of k = 3 (over 100,000 random fingerprints plus neighbours planted at every
//! distance 0..=k+2, some with all their differing bits in one block, some spread over several,
//! crowds sharing a table's key); part (b) checks every layout of other radii the same way at
//! a smaller scale, and part (c) small random insert/remove sequences for every layout of every
//! k in 0..=6 against a `HashMap` model.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tantivy_dedup::Fingerprint;
use tantivy_dedup::index::{BlockLayout, PigeonholeIndex};

/// Every stored fingerprint within `k` of `query`, sorted like `PigeonholeIndex::within`:
/// by (distance, fingerprint).
fn brute_force(stored: &[u64], query: u64, k: u32) -> Vec<(Fingerprint, u32)> {
    let mut found = Vec::new();
    for &y in stored {
        let distance = (query ^ y).count_ones();
        if distance <= k {
            found.push((Fingerprint(y), distance));
        }
    }
    found.sort_unstable_by_key(|&(fingerprint, distance)| (distance, fingerprint));
    found
}

/// `distance` distinct bit positions spread round-robin over the four 16-bit blocks, starting at
/// a random block, so that up to four differing bits land in four different blocks.
fn bits_across_blocks(rng: &mut SmallRng, distance: u32) -> u64 {
    let start = rng.random_range(0..4u32);
    let mut mask = 0u64;
    let mut placed = 0;
    while placed < distance {
        let block = (start + placed) % 4;
        let bit = block * 16 + rng.random_range(0..16u32);
        if mask & (1 << bit) == 0 {
            mask |= 1 << bit;
            placed += 1;
        }
    }
    mask
}

/// `distance` distinct bit positions anywhere in the 64 bits.
fn bits_anywhere(rng: &mut SmallRng, distance: u32) -> u64 {
    bits_among(rng, u64::MAX, distance)
}

/// `distance` distinct random bits among the set bits of `among` when it has that many, else
/// anywhere.
fn bits_among(rng: &mut SmallRng, among: u64, distance: u32) -> u64 {
    let mut positions: Vec<u32> = (0..64).filter(|&bit| among >> bit & 1 == 1).collect();
    if positions.len() < distance as usize {
        positions = (0..64).collect();
    }
    positions.shuffle(rng);
    positions[..distance as usize]
        .iter()
        .fold(0u64, |mask, &bit| mask | (1 << bit))
}

#[test]
fn lookups_equal_a_linear_scan_at_scale() {
    const K: u32 = 3;
    const RANDOM: usize = 100_000;
    const PLANTED_QUERIES: usize = 1_500;
    const RANDOM_QUERIES: usize = 500;
    const STORED_QUERIES: usize = 500;
    let layouts: Vec<BlockLayout> = [4, 10, 16, 20]
        .into_iter()
        .map(|tables| BlockLayout::with_tables(K, tables).unwrap())
        .collect();

    let mut rng = SmallRng::seed_from_u64(0x5eed_0001);
    let mut stored: Vec<u64> = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |stored: &mut Vec<u64>, value: u64| {
        let new = seen.insert(value);
        if new {
            stored.push(value);
        }
        new
    };
    for _ in 0..RANDOM {
        let value = rng.random::<u64>();
        push(&mut stored, value);
    }

    // Queries with neighbours planted at every distance 0..=k+2, in three shapes each.
    let mut planted_queries = Vec::new();
    let mut planted_at = [0usize; K as usize + 3];
    for q in 0..PLANTED_QUERIES {
        let query = rng.random::<u64>();
        planted_queries.push(query);
        for distance in 0..=K + 2 {
            let block = rng.random_range(0..4u32);
            let masks = [
                bits_among(&mut rng, 0xffff << (block * 16), distance),
                bits_across_blocks(&mut rng, distance),
                bits_anywhere(&mut rng, distance),
            ];
            for mask in masks {
                debug_assert_eq!(mask.count_ones(), distance);
                if push(&mut stored, query ^ mask) {
                    planted_at[distance as usize] += 1;
                }
            }
        }
        // Every fifth query also gets a crowd of neighbours sharing one table's key with it in
        // each layout, so that its buckets hold many entries, most of them farther than k.
        if q % 5 == 0 {
            for layout in &layouts {
                for _ in 0..10 {
                    let tables = layout.tables();
                    let keep = tables[rng.random_range(0..tables.len())].key_mask();
                    let noise = rng.random::<u64>() & !keep;
                    push(&mut stored, query ^ noise);
                }
            }
        }
    }
    assert!(stored.len() >= RANDOM + PLANTED_QUERIES * 13);

    let mut queries = planted_queries.clone();
    for _ in 0..RANDOM_QUERIES {
        queries.push(rng.random());
    }
    for _ in 0..STORED_QUERIES {
        queries.push(stored[rng.random_range(0..stored.len())]);
    }
    let expected: Vec<_> = queries
        .iter()
        .map(|&query| brute_force(&stored, query, K))
        .collect();
    // Remove a third (including many planted neighbours), then lookups still equal a scan.
    let removed: HashSet<u64> = stored.iter().skip(1).step_by(3).copied().collect();
    let remaining: Vec<u64> = stored
        .iter()
        .copied()
        .filter(|value| !removed.contains(value))
        .collect();
    let expected_after: Vec<_> = queries
        .iter()
        .step_by(3)
        .map(|&query| brute_force(&remaining, query, K))
        .collect();

    for layout in layouts {
        let name = layout.to_string();
        let mut index = PigeonholeIndex::with_layout(layout);
        for (position, &value) in stored.iter().enumerate() {
            assert_eq!(index.insert(Fingerprint(value), position), None);
        }
        assert_eq!(index.len(), stored.len());

        let mut found_at = [0usize; K as usize + 3];
        for (&query, expected) in queries.iter().zip(&expected) {
            let actual = index.within(Fingerprint(query));
            assert_eq!(&actual, expected, "{name}: query {query:016x}");
            for &(_, distance) in &actual {
                found_at[distance as usize] += 1;
            }
            // for_each_within visits the same set, each once, with the right distances.
            let mut visited = Vec::new();
            index.for_each_within(Fingerprint(query), |fingerprint, distance| {
                assert_eq!(fingerprint.distance(Fingerprint(query)), distance);
                visited.push((fingerprint, distance));
            });
            visited.sort_unstable_by_key(|&(fingerprint, distance)| (distance, fingerprint));
            assert_eq!(
                &visited, expected,
                "{name}: for_each_within, query {query:016x}"
            );
        }
        // The planted neighbours within k were all found, including those at exactly k; those
        // at k+1 and k+2 exist in the data but are (rightly) never returned.
        for distance in 0..=K as usize {
            assert!(
                found_at[distance] >= planted_at[distance],
                "{name}: distance {distance}: found {} of {} planted",
                found_at[distance],
                planted_at[distance]
            );
        }
        assert!(planted_at[K as usize + 1] > 0 && planted_at[K as usize + 2] > 0);
        assert_eq!(found_at[K as usize + 1], 0, "{name}");
        assert_eq!(found_at[K as usize + 2], 0, "{name}");

        // Values: each stored fingerprint maps to the position it was inserted with.
        for _ in 0..2_000 {
            let position = rng.random_range(0..stored.len());
            assert_eq!(index.get(Fingerprint(stored[position])), Some(&position));
        }

        for (position, &value) in stored.iter().enumerate() {
            if removed.contains(&value) {
                assert_eq!(index.remove(Fingerprint(value)), Some(position), "{name}");
            }
        }
        assert_eq!(
            index.remove(Fingerprint(stored[1])),
            None,
            "{name}: removed twice"
        );
        assert_eq!(index.len(), remaining.len());
        for (&query, expected) in queries.iter().step_by(3).zip(&expected_after) {
            assert_eq!(
                &index.within(Fingerprint(query)),
                expected,
                "{name}: after removals, query {query:016x}"
            );
        }
        for &value in stored.iter().step_by(97) {
            assert_eq!(
                index.contains(Fingerprint(value)),
                !removed.contains(&value)
            );
        }
        for (position, &value) in stored.iter().enumerate().step_by(89) {
            let expected = (!removed.contains(&value)).then_some(&position);
            assert_eq!(index.get(Fingerprint(value)), expected, "{name}");
        }
    }
}

/// Every layout of other radii, whose blocks are not all the same width (k = 4: 13,13,13,13,12
/// bits) or are wider than 16 bits (sorted buckets): neighbours at k and k+1 with bits in one
/// block, spread out, and all outside one table's key (so that few tables share a key).
#[test]
fn lookups_equal_a_linear_scan_for_other_radii() {
    let mut rng = SmallRng::seed_from_u64(0x5eed_0002);
    for k in [0u32, 1, 2, 4, 5, 7, 15] {
        for layout in BlockLayout::choices(k).unwrap() {
            let name = format!("k={k}, {layout}");
            let mut stored = Vec::new();
            let mut seen = HashSet::new();
            let mut queries = Vec::new();
            for _ in 0..2_000 {
                let value = rng.random::<u64>();
                if seen.insert(value) {
                    stored.push(value);
                }
            }
            for _ in 0..150 {
                let query = rng.random::<u64>();
                queries.push(query);
                for distance in 0..=(k + 2).min(64) {
                    let blocks = layout.blocks();
                    let block = blocks[rng.random_range(0..blocks.len())];
                    let in_block =
                        bits_among(&mut rng, block.key(u64::MAX) << block.shift, distance);
                    let tables = layout.tables();
                    let key = tables[rng.random_range(0..tables.len())].key_mask();
                    let outside_key = bits_among(&mut rng, !key, distance);
                    for mask in [in_block, outside_key, bits_anywhere(&mut rng, distance)] {
                        if seen.insert(query ^ mask) {
                            stored.push(query ^ mask);
                        }
                    }
                }
            }
            let mut index = PigeonholeIndex::with_layout(layout);
            for &value in &stored {
                index.insert(Fingerprint(value), ());
            }
            for &query in &queries {
                assert_eq!(
                    index.within(Fingerprint(query)),
                    brute_force(&stored, query, k),
                    "{name}, query {query:016x}"
                );
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u32),
    /// Remove the n-th live key (modulo the count), or a random key when nothing is stored.
    RemoveExisting(usize),
    RemoveAbsent(u64),
}

/// Fingerprints clustered around a few bases, so that many pairs are within a few bits and
/// buckets are shared.
fn clustered_fingerprint() -> impl Strategy<Value = u64> {
    (
        prop::sample::select(vec![
            0u64,
            u64::MAX,
            0x0123_4567_89ab_cdef,
            0xdead_beef_0000_ffff,
        ]),
        prop::collection::vec(0u32..64, 0..9),
    )
        .prop_map(|(base, bits)| bits.iter().fold(base, |value, &bit| value ^ (1 << bit)))
}

fn fingerprint() -> impl Strategy<Value = u64> {
    prop_oneof![4 => clustered_fingerprint(), 1 => any::<u64>()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (fingerprint(), any::<u32>()).prop_map(|(f, v)| Op::Insert(f, v)),
        2 => any::<usize>().prop_map(Op::RemoveExisting),
        1 => fingerprint().prop_map(Op::RemoveAbsent),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn small_sets_agree_with_a_model(
        k in 0u32..=6,
        layout in any::<prop::sample::Index>(),
        ops in prop::collection::vec(op(), 1..60),
        probes in prop::collection::vec(fingerprint(), 1..12),
    ) {
        let layouts = BlockLayout::choices(k).unwrap();
        let layout = layout.get(&layouts).clone();
        let name = layout.to_string();
        let mut index = PigeonholeIndex::with_layout(layout);
        let mut model: HashMap<u64, u32> = HashMap::new();
        for op in &ops {
            match *op {
                Op::Insert(fingerprint, value) => {
                    prop_assert_eq!(
                        index.insert(Fingerprint(fingerprint), value),
                        model.insert(fingerprint, value)
                    );
                }
                Op::RemoveExisting(n) => {
                    let mut keys: Vec<u64> = model.keys().copied().collect();
                    keys.sort_unstable();
                    let key = if keys.is_empty() { n as u64 } else { keys[n % keys.len()] };
                    prop_assert_eq!(index.remove(Fingerprint(key)), model.remove(&key));
                }
                Op::RemoveAbsent(fingerprint) => {
                    prop_assert_eq!(
                        index.remove(Fingerprint(fingerprint)),
                        model.remove(&fingerprint)
                    );
                }
            }
            prop_assert_eq!(index.len(), model.len());
            prop_assert_eq!(index.is_empty(), model.is_empty());
            let stored: Vec<u64> = model.keys().copied().collect();
            let queries = stored.iter().chain(&probes);
            for &query in queries {
                prop_assert_eq!(
                    index.within(Fingerprint(query)),
                    brute_force(&stored, query, k),
                    "k={}, {}, query {:016x}", k, name, query
                );
            }
            for &probe in &probes {
                prop_assert_eq!(index.get(Fingerprint(probe)), model.get(&probe));
            }
            for (&key, value) in &model {
                prop_assert_eq!(index.get(Fingerprint(key)), Some(value));
            }
        }
        let mut listed: Vec<(u64, u32)> = index.iter().map(|(f, &v)| (f.0, v)).collect();
        listed.sort_unstable();
        let mut expected: Vec<(u64, u32)> = model.into_iter().collect();
        expected.sort_unstable();
        prop_assert_eq!(listed, expected);
    }
}
