//! The global allocator: mimalloc, set to give freed memory back to the OS at once.
//!
//! mimalloc's per-thread free lists make the proxy's many short-lived allocations (headers,
//! buffers) cheaper than glibc malloc. By default it commits each arena it reserves up front
//! (on Linux, where memory is overcommitted) and keeps freed pages for a second. With
//! `arena_eager_commit` off and `purge_delay` at 0, pages are committed when used and go back
//! as soon as they are free: an idle Portico uses about 7 MiB instead of 15, a 10,000-Ingress
//! configuration stays under the benchmark's RSS budget, and memory returns when Ingresses are
//! deleted (docs/benchmarks.md has the numbers).
//!
//! mimalloc reads these options from the environment when the process starts, before `main`
//! and before the first arena exists, so setting them from `main` is too late for the arena.
//! [`configure`] therefore runs Portico again in place (`exec`: same PID, same arguments) with
//! the variables set, unless the environment already sets them. Setting them yourself, to any
//! value, skips the re-execution.
//!
//! Built with the `system-allocator` feature, the binary uses the system's malloc instead and
//! does not run itself again: heap profilers that wrap malloc (heaptrack, valgrind's massif)
//! then see every allocation. For measuring where memory goes, not for running.

use std::os::unix::process::CommandExt;
use std::process::Command;

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::Mimalloc = mimalloc::Mimalloc;

/// mimalloc, reached through its C entry points: the binary's only `unsafe` code.
#[cfg(not(feature = "system-allocator"))]
#[allow(unsafe_code)]
mod mimalloc {
    use libmimalloc_sys as mi;
    use std::alloc::{GlobalAlloc, Layout};

    /// mimalloc, reached through its plain entry points whenever the layout allows.
    ///
    /// The `mimalloc` crate's allocator passes every layout to `mi_malloc_aligned`, whose fast
    /// path covers only blocks up to 1 KiB that happen to be aligned already; anything larger
    /// (hyper's read buffers, request head maps) takes its generic over-allocating path, about
    /// ten times the instructions of `mi_malloc`.
    pub(super) struct Mimalloc;

    /// The alignment every mimalloc block of at least this size has (`MI_MAX_ALIGN_SIZE`).
    const MIN_ALIGN: usize = 16;

    /// Whether a block of `size` bytes aligned to `align` may come from the plain entry
    /// points: every block `mi_malloc` returns is aligned to 16 bytes, and to its size below
    /// that. This is the rule the standard library's own `System` allocator applies to
    /// `malloc`.
    pub(super) fn plain(align: usize, size: usize) -> bool {
        align <= MIN_ALIGN && align <= size
    }

    // SAFETY: every function hands the layout's size (and alignment, where `plain` does not
    // hold) to the matching mimalloc entry point, which returns a block of at least that size
    // and alignment or null; blocks from either family are freed by `mi_free`.
    unsafe impl GlobalAlloc for Mimalloc {
        #[inline]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: see the impl.
            unsafe {
                if plain(layout.align(), layout.size()) {
                    mi::mi_malloc(layout.size()).cast()
                } else {
                    mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
                }
            }
        }

        #[inline]
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: see the impl.
            unsafe {
                if plain(layout.align(), layout.size()) {
                    mi::mi_zalloc(layout.size()).cast()
                } else {
                    mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
                }
            }
        }

        #[inline]
        unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
            // SAFETY: `ptr` came from one of the functions above.
            unsafe { mi::mi_free(ptr.cast()) }
        }

        #[inline]
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: see the impl; `ptr` came from one of the functions above.
            unsafe {
                if plain(layout.align(), new_size) {
                    mi::mi_realloc(ptr.cast(), new_size).cast()
                } else {
                    mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
                }
            }
        }
    }

    /// Purges what is due: pages free for longer than the purge delay go back to the OS.
    pub(super) fn collect() {
        // SAFETY: `mi_collect` takes no pointer; any thread may call it at any time.
        unsafe { mi::mi_collect(false) }
    }

    /// Collects the calling thread's heap in full: blocks other threads freed into its pages,
    /// its full and retired pages; pages left empty go back to the arena (and, with a purge
    /// delay of 0, to the OS).
    pub(super) fn collect_thread() {
        // SAFETY: as `collect`.
        unsafe { mi::mi_collect(true) }
    }
}

/// The variables Portico sets, and their values.
pub const OPTIONS: [(&str, &str); 2] = [
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    ("MIMALLOC_PURGE_DELAY", "0"),
];

/// With a purge delay other than 0 (set in the environment by the user), starts a thread that
/// hands freed memory back to the OS every 100 ms.
///
/// With the default delay of 0, every page freed goes back at once, and the proxy pays for it
/// on the next request that needs the page: page faults, 0.25 to 0.5 per request
/// (docs/benchmarks.md). With a delay, a page freed and used again within it stays; but
/// mimalloc purges what is due only when some thread allocates, and threads that went idle
/// after a configuration change would keep their freed memory for good. This thread asks for
/// the due purges (of the whole process: mimalloc's arenas are shared) whether or not anyone
/// allocates, so that a delay trades a few MiB for the page faults, not the memory targets.
pub fn start_purging() {
    #[cfg(not(feature = "system-allocator"))]
    {
        const PURGE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
        let delay = std::env::var("MIMALLOC_PURGE_DELAY");
        if delay.as_deref().map_or(true, |d| d.trim() == "0") {
            return;
        }
        let purging = std::thread::Builder::new().name("portico-purge".into());
        let started = purging.spawn(|| {
            loop {
                std::thread::sleep(PURGE_EVERY);
                mimalloc::collect();
            }
        });
        if let Err(error) = started {
            eprintln!("portico: cannot start the memory purge thread ({error})");
        }
    }
}

/// Collects the calling thread's freed memory in full (`mi_collect(true)`); registered with
/// `portico_model::trim` so that library threads (the manifests' reloader) can give back the
/// pages of deleted objects after a change.
pub fn collect_thread() {
    #[cfg(not(feature = "system-allocator"))]
    mimalloc::collect_thread();
}

/// The most time a busy runtime worker goes without collecting its heap when it parks.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    /// This thread's last collection on parking: when, and the trim generation it saw.
    static LAST_COLLECT: std::cell::Cell<Option<(std::time::Instant, u64)>> =
        const { std::cell::Cell::new(None) };
}

/// The runtime's `on_thread_park` hook: a worker about to sleep collects its heap when a
/// large change happened since its last collection (`portico_model::trim`), or when it last
/// collected a second ago or more. Without it, pages a worker owns whose blocks were all
/// freed (by itself or by another thread) stay resident for as long as it sleeps: after
/// every object is deleted, for good. Under load it costs one collection per worker per
/// second; between the collections, a clock read.
pub fn on_park() {
    if !collects_on_park(LAST_COLLECT.get(), std::time::Instant::now()) {
        return;
    }
    let seen = portico_app::trim::generation();
    collect_thread();
    LAST_COLLECT.set(Some((std::time::Instant::now(), seen)));
}

/// Whether a worker whose last collection was `last` (when, and the generation it saw)
/// collects on parking at `now`.
fn collects_on_park(last: Option<(std::time::Instant, u64)>, now: std::time::Instant) -> bool {
    match last {
        None => true,
        Some((at, seen)) => {
            portico_app::trim::owed(seen) || now.saturating_duration_since(at) >= COLLECT_EVERY
        }
    }
}

/// Call first thing in `main`. Returns only when the options are in force, or when Portico
/// cannot run itself again (then it goes on with mimalloc's defaults, after a warning).
pub fn configure() {
    if cfg!(feature = "system-allocator") {
        return;
    }
    let missing: Vec<_> = OPTIONS
        .iter()
        .filter(|(variable, _)| std::env::var_os(variable).is_none())
        .collect();
    if missing.is_empty() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut command = Command::new(exe);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    command.args(args);
    for (variable, value) in missing {
        command.env(variable, value);
    }
    // `exec` returns only if it failed.
    let err = command.exec();
    eprintln!("portico: cannot apply the allocator settings ({err}); using mimalloc's defaults");
}

#[cfg(test)]
mod park_tests {
    use super::{COLLECT_EVERY, collects_on_park};
    use std::time::{Duration, Instant};

    #[test]
    fn a_worker_collects_on_parking_after_a_change_or_a_second_and_not_in_between() {
        let now = Instant::now();
        let seen = portico_app::trim::generation();
        assert!(collects_on_park(None, now), "the first park collects");
        assert!(!collects_on_park(Some((now, seen)), now));
        let later = now + COLLECT_EVERY;
        assert!(collects_on_park(Some((now, seen)), later));
        assert!(!collects_on_park(
            Some((now, seen)),
            now + Duration::from_millis(10)
        ));
        portico_app::trim::trim_after_change();
        assert!(
            collects_on_park(Some((now, seen)), now),
            "a change since the last collection is owed at once"
        );
    }
}

#[cfg(all(test, not(feature = "system-allocator")))]
mod tests {
    use super::mimalloc::plain;

    #[test]
    fn the_plain_entry_points_serve_only_layouts_their_alignment_covers() {
        for (size, align) in [(8, 8), (1, 1), (24, 8), (4096, 16), (1 << 20, 16)] {
            assert!(plain(align, size), "{size} {align}");
        }
        for (size, align) in [(8, 16), (64, 32), (4096, 4096), (1, 2)] {
            assert!(!plain(align, size), "{size} {align}");
        }
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    #[repr(align(16))]
    struct Small(u32);

    #[derive(Clone, Copy, PartialEq, Debug)]
    #[repr(align(64))]
    struct Wide(u64);

    #[derive(Clone, Copy, PartialEq, Debug)]
    #[repr(align(4096))]
    struct Paged(u8);

    /// Grows a vector one element at a time (each growth is a `realloc`), checking the
    /// alignment of every block and that the contents moved with it; then shrinks it.
    fn grow_and_check<T: Copy + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> T) {
        let align = std::mem::align_of::<T>();
        let mut v = Vec::new();
        for i in 0..3000 {
            v.push(make(i));
            assert_eq!(v.as_ptr() as usize % align, 0, "{i} elements");
        }
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(v.as_ptr() as usize % align, 0);
        for (i, value) in v.iter().enumerate() {
            assert_eq!(*value, make(i));
        }
    }

    #[test]
    fn blocks_keep_their_alignment_and_contents_through_reallocation() {
        grow_and_check(|i| i as u8);
        grow_and_check(|i| i as u64);
        grow_and_check(|i| Small(i as u32));
        grow_and_check(|i| Wide(i as u64));
        grow_and_check(|i| Paged(i as u8));
    }

    /// Blocks of every count, not only the powers of two that growth by doubling makes
    /// (mimalloc happens to align those to their size anyway), and grown by odd amounts.
    fn exact_sizes_are_aligned<T: Copy>(value: T) {
        let align = std::mem::align_of::<T>();
        for count in 1..40 {
            let block: Vec<T> = Vec::with_capacity(count);
            assert_eq!(block.as_ptr() as usize % align, 0, "{count} elements");
        }
        let mut grown = vec![value];
        for count in [3, 5, 7, 11, 13, 17] {
            grown.reserve_exact(count);
            assert_eq!(grown.as_ptr() as usize % align, 0, "grown by {count}");
        }
    }

    #[test]
    fn blocks_of_any_size_have_their_types_alignment() {
        exact_sizes_are_aligned(Small(1));
        exact_sizes_are_aligned(Wide(1));
        exact_sizes_are_aligned(Paged(1));
    }

    #[test]
    fn zeroed_blocks_are_zero_at_every_size() {
        for size in [1, 7, 16, 1000, 1024, 1025, 8192, 70_000, 5 << 20] {
            let zeros = vec![0u8; size];
            assert!(zeros.iter().all(|b| *b == 0), "{size}");
            let wide = vec![0u128; size / 16 + 1];
            assert_eq!(wide.as_ptr() as usize % 16, 0);
            assert!(wide.iter().all(|w| *w == 0), "{size}");
        }
    }
}
