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
