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
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The variables Portico sets, and their values.
pub const OPTIONS: [(&str, &str); 2] = [
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    ("MIMALLOC_PURGE_DELAY", "0"),
];

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
