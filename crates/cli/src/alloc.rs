//! The global allocator: mimalloc, set to give freed memory back to the OS at once.
//!
//! mimalloc's per-thread free lists make the proxy's many short-lived allocations (headers,
//! buffers) cheaper than glibc malloc. By default it keeps freed pages for a second before
//! decommitting them; with `purge_delay` at 0 they go back as soon as they are free, which
//! keeps the RSS of a large configuration under the benchmark's budget and lets memory return
//! when Ingresses are deleted (docs/benchmarks.md has the numbers).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (include/mimalloc.h); the Rust binding
/// has no constant for it.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator options, unless the environment already chose them (mimalloc reads
/// `MIMALLOC_PURGE_DELAY` itself). Call first thing in `main`.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table. It takes no
    // pointers, is safe to call from any thread at any time, and mimalloc reads the option on
    // its next purge. This is the workspace's only unsafe code.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
    }
}

/// The purge delay in force, in milliseconds.
#[cfg(test)]
fn purge_delay() -> i64 {
    // SAFETY: as for `mi_option_set`: reads an integer from the option table.
    #[allow(unsafe_code)]
    let value = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
    // `c_long` is i64 here but i32 on other targets (Windows): the conversion is for them.
    #[allow(clippy::useless_conversion)]
    i64::from(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_is_purged_at_once() {
        configure();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(purge_delay(), 0);
        }
    }

    #[test]
    fn the_option_index_is_purge_delay() {
        // mimalloc's default purge delay is 1000 ms in v3 and 10 ms in v2; the neighbouring
        // options (eager_commit_delay, use_numa_nodes) default to 1 and 0. Reading a value
        // that only purge_delay has checks the index before anything sets it.
        let value = purge_delay();
        assert!(
            value == 0 || value == 1000,
            "option 15 is {value}, not purge_delay"
        );
    }
}
