//! Manifest paths as users type them, relative to the working directory Portico starts in:
//! `-f ./manifests`, `-f ../x/manifests`, a symlink to the directory. `portico run` serves
//! edits in place and atomic replaces; `portico validate` reports what it reports for the
//! absolute path, naming files as they were given.

use crate::support::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `portico run -f <given>` started in `cwd` (the shared `Portico` always starts in the test's
/// own directory); killed when dropped.
struct Run {
    _child: Child,
    /// Holds its default state directory (each process locks its own).
    _runtime: tempfile::TempDir,
    http: SocketAddr,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Run {
    async fn start(cwd: &Path, given: &str) -> Run {
        let runtime = tempfile::tempdir().unwrap();
        let mut child = Command::new(BIN)
            .args(Portico::run_args(Path::new(given), &[]))
            .current_dir(cwd)
            .env("PORTICO_LOG", "warn")
            .env("XDG_RUNTIME_DIR", runtime.path())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let banner = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("portico printed its addresses in time")
            .unwrap()
            .expect("portico printed a line");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Run {
            _child: child,
            _runtime: runtime,
            http: http_address(&banner),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The Service whose echo backend answers `host/`, or "" when none does (yet).
    async fn service(&self, host: &str) -> String {
        let req = http::Request::get(format!("http://{}/", self.http))
            .header("host", host)
            .body(Empty::new())
            .unwrap();
        let Ok(resp) = self.client.request(req).await else {
            return String::new();
        };
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        json["service"].as_str().unwrap_or("").to_owned()
    }

    /// Polls (5 s at most) until `host/` is answered by `service`; `what` names the change.
    async fn wait_served_by(&self, host: &str, service: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = self.service(host).await;
            if got == service {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: wanted {service:?}, still served by {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// "portico: serving HTTP on A, HTTPS on B and the admin API on C" → A.
fn http_address(banner: &str) -> SocketAddr {
    let words: Vec<&str> = banner.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "HTTP").expect(banner);
    words[at + 2].trim_end_matches(',').parse().expect(banner)
}

fn web_ingress(service: &str) -> String {
    ingress(
        "paths",
        "web",
        "2026-01-01T00:00:00Z",
        &[("paths.test", "/", "Prefix", service, "80")],
    )
}

/// Serves `manifests` through `portico run -f <given>` started in `cwd`: the Ingress is
/// edited in place, then replaced atomically, and each version is served.
async fn edits_and_replaces_are_served(cwd: &Path, given: &str, manifests: &Path) {
    let one = echo_pods("one", 1).await;
    let two = echo_pods("two", 1).await;
    let services = service("paths", "one", &ready(&one)) + &service("paths", "two", &ready(&two));
    std::fs::write(manifests.join("backends.yaml"), services).unwrap();
    let ing = manifests.join("ing.yaml");
    std::fs::write(&ing, web_ingress("one")).unwrap();
    let run = Run::start(cwd, given).await;
    run.wait_served_by("paths.test", "one", "the initial load")
        .await;

    std::fs::write(&ing, web_ingress("two")).unwrap();
    run.wait_served_by("paths.test", "two", "an edit in place")
        .await;

    let tmp = manifests.join(".ing.yaml.tmp");
    std::fs::write(&tmp, web_ingress("one")).unwrap();
    std::fs::rename(&tmp, &ing).unwrap();
    run.wait_served_by("paths.test", "one", "an atomic replace")
        .await;
}

#[tokio::test]
async fn run_with_a_relative_path_serves_edits_and_atomic_replaces() {
    let root = tempfile::tempdir().unwrap();
    let manifests = root.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    edits_and_replaces_are_served(root.path(), "./manifests", &manifests).await;
}

#[tokio::test]
async fn run_with_a_path_through_dot_dot_serves_edits_and_atomic_replaces() {
    let root = tempfile::tempdir().unwrap();
    let manifests = root.path().join("x/manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let cwd = root.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    edits_and_replaces_are_served(&cwd, "../x/manifests", &manifests).await;
}

#[tokio::test]
async fn run_with_a_symlink_to_the_directory_serves_edits_and_atomic_replaces() {
    let root = tempfile::tempdir().unwrap();
    let manifests = root.path().join("real/manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::os::unix::fs::symlink("real/manifests", root.path().join("link")).unwrap();
    edits_and_replaces_are_served(root.path(), "./link", &manifests).await;
}

/// `portico validate -f <given>` in `cwd`: exit code and output.
fn validate(cwd: &Path, given: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(given)
        .current_dir(cwd)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), text)
}

#[tokio::test]
async fn validate_with_relative_paths_reports_what_the_absolute_path_reports() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("relative");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("ing.yaml"), web_ingress("missing")).unwrap();
    std::fs::write(dir.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    let cwd = root.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let (code, absolute) = validate(&cwd, &dir);
    assert_eq!(code, Some(1), "{absolute}");
    assert!(absolute.contains("broken.yaml"), "{absolute}");
    assert!(absolute.contains("paths/web"), "{absolute}");
    let absolute_dir = dir.display().to_string();

    for (cwd, given) in [(root.path(), "./relative"), (&cwd, "../relative")] {
        let (rel_code, relative) = validate(cwd, Path::new(given));
        assert_eq!(rel_code, code, "{given}: {relative}");
        assert_eq!(relative, absolute.replace(&absolute_dir, given), "{given}");
    }
}
