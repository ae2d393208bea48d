//! `--take-over`: a Portico started beside a running one (a DaemonSet's new pod with
//! `maxSurge`), not by it, takes its sockets (and haproxy masters) through the hand-over
//! socket in the shared state directory, as a SIGUSR2 successor does; the old one drains and
//! exits (one started with `--take-over` itself, as in a DaemonSet, waits for SIGTERM
//! instead, holding nothing: its container is not restarted). Without the flag, the second
//! start is refused and names the PID.

use crate::hot_upgrade::{
    HOST, NewConnections, haproxy_processes, keep_alive_to, manifests, until_gone,
};
use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The arguments `pid` was started with (after the program), with `--take-over`.
fn arguments_of(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let mut args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    args.remove(0);
    if !args.iter().any(|a| a == "--take-over") {
        args.push("--take-over".to_owned());
    }
    args
}

/// Whether `pid` has the state directory's lock file open.
fn holds_the_lock(pid: u32) -> bool {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| target.ends_with("portico.lock"))
}

/// `old`, taken over: with `--take-over` it stays, holding neither the lock nor a socket of
/// the state directory, until SIGTERM; without, it exits.
async fn taken_over(old: u32, lingers: bool) {
    if !lingers {
        return until_gone(old, "the process taken over").await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while holds_the_lock(old) {
        assert!(std::time::Instant::now() < deadline, "{old} keeps the lock");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!gone(old), "a --take-over process waits for SIGTERM");
    let term = std::process::Command::new("kill")
        .args(["-TERM", &old.to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    until_gone(old, "the process taken over, after SIGTERM").await;
}

/// Under keep-alive and new-connection load, a second `portico run` with `old`'s arguments
/// (its state directory `state` among them) and `--take-over` takes over: nothing fails or is
/// refused, the new process serves on the same addresses, and `old` exits (see
/// [`taken_over`]). Returns the new process.
async fn take_over_under_load(old: &Portico, state: &std::path::Path) -> Portico {
    let stop = Arc::new(AtomicBool::new(false));
    let kept = keep_alive_to(old.http, HOST, stop.clone());
    let fresh = NewConnections::start(old.http, HOST);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old_pid = old.pid().unwrap();
    let raw = std::fs::read(format!("/proc/{old_pid}/cmdline")).unwrap();
    let lingers = raw.split(|b| *b == 0).any(|a| a == b"--take-over");
    let new = Portico::spawn(&arguments_of(old_pid)).await;
    assert_ne!(new.pid(), Some(old_pid));
    assert_eq!(
        (new.http, new.https),
        (old.http, old.https),
        "the same sockets"
    );
    taken_over(old_pid, lingers).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = fresh.finish().await;
    let kept = kept.await.unwrap();
    eprintln!(
        "take-over: {} new-connection and {} keep-alive requests answered",
        seen.ok, kept.0
    );
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    assert!(kept.1.is_empty(), "keep-alive failures: {:?}", kept.1);
    assert!(seen.ok > 0 && kept.0 > 0);
    assert_eq!(new.get(HOST, "/").await.status, 200);
    let status = std::fs::read_to_string(state.join("upgrade.status")).unwrap();
    let new_pid = new.pid().unwrap();
    assert_eq!(status, format!("{old_pid} ready {new_pid}\n"));
    new
}

/// `portico run` with the arguments of `holder` but without `--take-over`: refused, naming
/// the holder's PID.
async fn refused_without_take_over(holder: &Portico) {
    let pid = holder.pid().unwrap();
    let mut args = arguments_of(pid);
    args.retain(|a| a != "--take-over");
    let out = tokio::process::Command::new(BIN)
        .args(&args)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second Portico started: {stderr}");
    assert!(
        stderr.contains(&format!("in use by another Portico (PID {pid})")),
        "{stderr}"
    );
    assert!(!gone(pid));
}

/// A second Portico with `--take-over` takes the sockets from a running one under load, and
/// the old one exits; without the flag a start is refused. A third takes over from the
/// second, which (started with `--take-over`) then waits for SIGTERM holding nothing.
#[tokio::test]
async fn a_second_portico_takes_the_sockets_over_under_load_and_the_first_exits() {
    let m = manifests(0).await;
    let flags = ["--access-log=off", "--shutdown-grace=1s"];
    let first = Portico::start_with_state(m.path(), &flags).await;
    first.wait_route(HOST, "/", 200, "web").await;
    let state = first.state_dir();
    refused_without_take_over(&first).await;
    let second = take_over_under_load(&first, &state).await;
    refused_without_take_over(&second).await;
    let _third = take_over_under_load(&second, &state).await;
}

/// With the state directory free, `--take-over` simply starts.
#[tokio::test]
async fn take_over_with_the_state_directory_free_simply_starts() {
    let m = manifests(0).await;
    let p = Portico::start_with_state(m.path(), &["--access-log=off", "--take-over"]).await;
    p.wait_route(HOST, "/", 200, "web").await;
}

/// With `--provider haproxy` the new process adopts the haproxy master and its workers: the
/// same PIDs before and after, and nothing fails meanwhile.
#[tokio::test]
async fn a_take_over_keeps_haproxy_running_and_fails_no_request() {
    let m = manifests(0).await;
    let first = Portico::start_haproxy(m.path(), &["--access-log=off"]).await;
    first.wait_route(HOST, "/", 200, "web").await;
    let state = first.state_dir();
    let before = haproxy_processes(&state);
    assert!(
        before.len() == 1 && !before[0].1.is_empty(),
        "one master with its workers: {before:?}"
    );
    let _second = take_over_under_load(&first, &state).await;
    assert_eq!(haproxy_processes(&state), before, "the same haproxy");
}
