//! Vectors that grow by an eighth rather than doubling, and give memory back as they shrink:
//! the buckets of the tables and of the forest's expiry queue.

/// Makes room for one more element, growing by an eighth rather than doubling.
///
/// Buckets are many and small, so doubling would leave a third of the memory unused on average;
/// growing by an eighth keeps the slack near 6% at the cost of a few more (amortised O(1))
/// reallocations.
#[inline]
fn reserve_compact<T>(vec: &mut Vec<T>) {
    if vec.len() == vec.capacity() {
        vec.reserve_exact((vec.len() / 8).max(4));
    }
}

/// Appends to a vector that grows by an eighth (see [`insert_compact`]).
#[inline]
pub(crate) fn push_compact<T>(vec: &mut Vec<T>, value: T) {
    reserve_compact(vec);
    vec.push(value);
}

/// Inserts into a vector that grows by an eighth rather than doubling.
#[inline]
pub(crate) fn insert_compact<T>(vec: &mut Vec<T>, position: usize, value: T) {
    reserve_compact(vec);
    vec.insert(position, value);
}

/// Removes the element at `position`, keeping the order of the others or moving the last one
/// into its place, then gives back memory as [`shrink_compact`] does.
#[inline]
pub(crate) fn remove_compact<T>(vec: &mut Vec<T>, position: usize, keep_order: bool) -> T {
    let value = if keep_order {
        vec.remove(position)
    } else {
        vec.swap_remove(position)
    };
    shrink_compact(vec);
    value
}

/// Gives back memory a bucket no longer needs after removals: once a quarter of its room is
/// unused, it shrinks to an eighth above its length (the same slack growth leaves, so a bucket
/// that shrinks and grows again does not reallocate on every change).
#[inline]
fn shrink_compact<T>(vec: &mut Vec<T>) {
    let len = vec.len();
    if vec.capacity() > len + len / 4 + 4 {
        vec.shrink_to(len + len / 8);
    }
}
