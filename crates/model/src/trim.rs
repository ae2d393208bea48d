//! Giving freed memory back to the OS after a change.
//!
//! The allocator (mimalloc, set in the binary) keeps a heap per thread; a page whose blocks
//! were all freed goes back only when the thread that owns it allocates again or collects,
//! and blocks freed by another thread wait on the owner. A thread that loaded 10,000
//! manifests and then sleeps, or a runtime worker that went idle after the last change,
//! would hold the pages of deleted objects for good. This crate has no allocator: the
//! binary registers its collection with [`set_trim`]; the library code calls
//! [`trim_after_change`] after a change, on the threads that drop the replaced state and then
//! wait (the controller loop once per burst of changes, 200 ms after its first; the manifests'
//! thread after it dropped a retired load), and the runtime's workers call [`owed`] when they
//! park. No threshold on the change's size: after a one-Ingress change at 10,000 Ingresses a
//! collection of the controller's thread costs about 0.1 ms, after every object is deleted up
//! to 160 ms (it hands the pages back; debug build, docs/benchmarks.md), and the controller's
//! comes 200 ms after a burst's first change, off the changes' path either way.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static TRIM: OnceLock<fn()> = OnceLock::new();
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Registers the function that collects the calling thread's freed memory. Only the first
/// registration counts; returns whether this one did.
pub fn set_trim(trim: fn()) -> bool {
    TRIM.set(trim).is_ok()
}

/// Collects the calling thread's freed memory (nothing when no function is registered).
pub fn trim_this_thread() {
    if let Some(trim) = TRIM.get() {
        trim();
    }
}

/// After a change: collects the calling thread's freed memory and asks every other
/// thread that calls [`owed`] to collect its own the next time it is idle.
pub fn trim_after_change() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    trim_this_thread();
}

/// The number of [`trim_after_change`] calls so far: a thread that saw another value at its
/// last collection owes one.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Whether a thread that last collected at generation `seen` owes a collection now.
pub fn owed(seen: u64) -> bool {
    generation() != seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn a_change_runs_the_registered_trim_and_makes_other_threads_owe_one() {
        let before = generation();
        assert!(!owed(before));
        assert!(set_trim(count));
        assert!(!set_trim(count), "only the first registration counts");
        let calls = CALLS.load(Ordering::Relaxed);
        trim_after_change();
        assert_eq!(CALLS.load(Ordering::Relaxed), calls + 1);
        assert!(
            owed(before),
            "a thread that saw the old generation owes a collection"
        );
        assert!(!owed(generation()));
    }
}
