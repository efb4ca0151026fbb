//! The binary's allocator, and how long it keeps freed memory.
//!
//! Articles are signed on every core at once, each with many small short-lived allocations;
//! glibc's malloc, shared by those threads, left `dedup` 15% slower on two cores
//! (BENCHMARKS.md, "The binary's allocator"). The library leaves the choice to its user.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its place in the `mi_option_e` enum of the mimalloc v3
/// sources that libmimalloc-sys builds (libmimalloc-sys names no constant for it). A test
/// reads its default, 1,000 ms, to catch a release that moves it.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes the allocator keep the memory the process frees for its next allocations instead of
/// handing it back to the kernel a second after it fell free. A batch command (`ingest`,
/// `dedup`, `eval`, `bench`) frees and allocates the same sizes a document after another and
/// exits when done; handing pages back made it fault them in again, zeroed, a second later:
/// 47,000 page faults (395 of them 2 MiB pages) in an `ingest` of xwlb-news, and `bench
/// --only ingest` about 15% slower (BENCHMARKS.md, "Freed memory kept by batch commands").
/// The server does not call this: its memory at rest goes back to the kernel.
pub fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's options, which it reads whenever it considers a purge;
    // no memory is touched.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
}

#[cfg(test)]
mod tests {
    use super::PURGE_DELAY;

    #[test]
    fn the_purge_delay_option_is_where_the_mimalloc_sources_put_it() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the environment set it; its default cannot be read
        }
        // SAFETY: reads an option.
        let delay = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        assert_eq!(
            delay, 1000,
            "mimalloc's purge_delay moved in its option enum"
        );
    }
}
