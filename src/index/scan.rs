//! The inner loops of lookups and of the linear scan they are measured against.
//!
//! Matches are rare (a bucket of hundreds usually holds none), so a loop first counts the
//! matches of a chunk in a form the compiler vectorises, and only a chunk with a match is read
//! again one by one.

/// Values compared per vectorised step.
const CHUNK: usize = 64;

/// How many of `fingerprints` are within `max_distance` bits of `query`: the linear popcount
/// scan.
#[inline]
pub fn count_within(fingerprints: &[u64], query: u64, max_distance: u32) -> usize {
    fingerprints
        .iter()
        .map(|&y| usize::from((query ^ y).count_ones() <= max_distance))
        .sum()
}

/// Calls `visit(position, distance)` for each of `sketches` within `max_distance` bits of
/// `query`, in slice order.
#[inline]
pub fn for_each_within(
    sketches: &[u32],
    query: u32,
    max_distance: u32,
    mut visit: impl FnMut(usize, u32),
) {
    for (chunk_number, chunk) in sketches.chunks(CHUNK).enumerate() {
        let matches: u32 = chunk
            .iter()
            .map(|&y| u32::from((query ^ y).count_ones() <= max_distance))
            .sum();
        if matches == 0 {
            continue;
        }
        for (offset, &y) in chunk.iter().enumerate() {
            let distance = (query ^ y).count_ones();
            if distance <= max_distance {
                visit(chunk_number * CHUNK + offset, distance);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_exactly_the_close_ones_in_order() {
        let stored: Vec<u32> = (0..300u32).map(|i| i * 0x0101).collect();
        let mut seen = Vec::new();
        for_each_within(&stored, 0, 4, |position, distance| {
            seen.push((position, distance))
        });
        let expected: Vec<_> = stored
            .iter()
            .enumerate()
            .map(|(position, &y)| (position, y.count_ones()))
            .filter(|&(_, distance)| distance <= 4)
            .collect();
        assert_eq!(seen, expected);
        let wide: Vec<u64> = stored.iter().map(|&y| u64::from(y)).collect();
        assert_eq!(count_within(&wide, 0, 4), expected.len());
    }
}
