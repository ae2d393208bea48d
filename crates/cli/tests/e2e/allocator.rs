//! The allocator settings: Portico runs itself again with mimalloc's options in its
//! environment, keeps those the user set, and serves as usual.

use crate::support::*;

#[tokio::test]
async fn the_process_runs_with_the_allocator_options_set() {
    let m = Manifests::new();
    let p = Portico::spawn(&Portico::run_args(m.path(), &[])).await;
    let env = p.environment();
    for expected in ["MIMALLOC_ARENA_EAGER_COMMIT=0", "MIMALLOC_PURGE_DELAY=0"] {
        assert!(env.iter().any(|v| v == expected), "{expected} in {env:?}");
    }
    let reply = p.get("nothing.test", "/").await;
    assert_eq!(reply.status, 404, "serves after running itself again");
}

#[tokio::test]
async fn options_the_user_set_are_kept() {
    let m = Manifests::new();
    let env = [("MIMALLOC_PURGE_DELAY", "250")];
    let p = Portico::spawn_with_env(&Portico::run_args(m.path(), &[]), &env).await;
    let env = p.environment();
    assert!(
        env.iter().any(|v| v == "MIMALLOC_PURGE_DELAY=250"),
        "{env:?}"
    );
    assert!(
        env.iter().any(|v| v == "MIMALLOC_ARENA_EAGER_COMMIT=0"),
        "{env:?}"
    );
}

/// The names of the process's threads, from /proc.
fn thread_names(p: &Portico) -> Vec<String> {
    let pid = p.pid().expect("portico is running");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let comm = |task: std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm")).ok();
    let names = tasks.flatten().filter_map(comm);
    names.map(|name| name.trim().to_string()).collect()
}

/// A purge delay makes freed pages wait before they go back to the OS; the purge thread hands
/// them back once due, whether or not any thread allocates. With the default delay of 0
/// there is nothing to wait for and no thread.
#[tokio::test]
async fn a_purge_delay_starts_the_purge_thread_and_the_default_does_not() {
    let m = Manifests::new();
    let p = Portico::spawn(&Portico::run_args(m.path(), &[])).await;
    let names = thread_names(&p);
    assert!(!names.iter().any(|n| n == "portico-purge"), "{names:?}");

    let env = [("MIMALLOC_PURGE_DELAY", "10")];
    let p = Portico::spawn_with_env(&Portico::run_args(m.path(), &[]), &env).await;
    let names = thread_names(&p);
    assert!(names.iter().any(|n| n == "portico-purge"), "{names:?}");
}
