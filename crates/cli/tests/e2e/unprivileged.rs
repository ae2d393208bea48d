//! Attacks by another local user, played by `nobody` through `setpriv` (CI runs as root):
//! a state directory that user owns or can write to is refused, and the demo's directory
//! cannot be taken over.

use crate::support::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// Runs `sh -c script` as `nobody`.
fn as_nobody(script: &str) {
    let status = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .status()
        .expect("setpriv (util-linux)");
    assert!(status.success(), "as nobody: {script}");
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// A world-writable, sticky directory like /tmp, and a file of root's in it.
fn shared_tmp_with_victim() -> (tempfile::TempDir, std::path::PathBuf) {
    assert!(
        is_root(),
        "this test plays two users: run it as root (CI does)"
    );
    let tmp = shared_tmp();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "root's file").unwrap();
    (tmp, victim)
}

/// A world-writable, sticky directory like /tmp, owned by root.
fn shared_tmp() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// `portico run` on `state`; killed (and the test failed) if it is still running after 20 s.
fn run_with_state_dir(state: &Path) -> std::process::Output {
    let manifests = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--provider=haproxy", "-f"])
        .arg(manifests.path())
        .arg(format!("--state-dir={}", state.display()))
        .args([
            "--http-listen=127.0.0.1:0",
            "--https-listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("portico kept running on {}", state.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_state_directory_another_user_owns_or_can_write_is_refused() {
    let (tmp, victim) = shared_tmp_with_victim();
    // nobody prepares a state directory with the temporary names Portico used to write keys
    // through, pointing at root's file.
    let state = tmp.path().join("state");
    as_nobody(&format!(
        "mkdir -m 0777 {s} && ln -s {v} {s}/key.pem.tmp && mkdir -p -m 0777 {s}/loadbalancer",
        s = state.display(),
        v = victim.display()
    ));
    let out = run_with_state_dir(&state);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("belongs to uid") && stderr.contains("--state-dir"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file");

    // root's own directory, but writable by everyone: refused too.
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_with_state_dir(&open);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("writable by other users"), "{stderr}");
}

#[tokio::test]
async fn the_demo_directory_cannot_be_hijacked() {
    let (tmp, victim) = shared_tmp_with_victim();
    // nobody plants the names the demo used to take (`portico-demo-<pid>`) for the next PIDs,
    // as directories it owns and as symlinks to root's file.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .map(|s| s.trim().parse().unwrap_or(1000))
        .unwrap_or(1000);
    let mut script = String::new();
    for pid in last..last + 200 {
        let name = tmp.path().join(format!("portico-demo-{pid}"));
        if pid % 2 == 0 {
            script.push_str(&format!("mkdir -m 0777 {} ; ", name.display()));
        } else {
            script.push_str(&format!("ln -s {} {} ; ", victim.display(), name.display()));
        }
    }
    script.push_str("true");
    as_nobody(&script);
    let args = demo_args();
    let tmpdir = tmp.path().display().to_string();
    let p = Portico::spawn_with_env(&args, &[("TMPDIR", &tmpdir)]).await;
    p.wait_route("demo.test", "/", 200, "webservice-1").await;
    let ours: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let meta = std::fs::symlink_metadata(p).unwrap();
            meta.uid() == 0 && meta.is_dir()
        })
        .collect();
    assert_eq!(ours.len(), 1, "one directory of root's: {ours:?}");
    let meta = std::fs::symlink_metadata(&ours[0]).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700, "private");
    assert!(ours[0].join("ingresses.yaml").exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file");
    // Nothing was written into nobody's directories.
    for entry in std::fs::read_dir(tmp.path()).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() && meta.uid() != 0 {
            assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0, "{path:?}");
        }
    }
}
