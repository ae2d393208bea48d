//! Bad input is reported with object and field, and blocks nothing else.

use crate::{backends, expect_routes, support::*};

fn bad_path_ingress() -> String {
    ingress(
        "bad",
        "bad-path",
        "2026-01-01T00:00:00Z",
        &[("badpath.test", "relative/path", "Prefix", "web", "80")],
    )
}

fn missing_service_ingress() -> String {
    ingress(
        "bad",
        "missing-svc",
        "2026-01-01T00:00:00Z",
        &[("missing.test", "/", "Prefix", "nope", "80")],
    )
}

async fn bad_manifests() -> Manifests {
    let m = backends("bad", &[("web", 1)]).await;
    m.write(
        "good.yaml",
        &ingress(
            "bad",
            "good",
            "2026-01-01T00:00:00Z",
            &[("good.test", "/", "Prefix", "web", "80")],
        ),
    );
    m.write(
        "broken.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: [unclosed\n  name: x\n",
    );
    m.write("bad-path.yaml", &bad_path_ingress());
    m.write("missing.yaml", &missing_service_ingress());
    m
}

#[tokio::test]
async fn bad_input_is_reported_by_the_admin_api_and_the_rest_is_served() {
    let m = bad_manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("good.test", "/", 200, "web"),
            ("badpath.test", "/", 404, ""),
            ("missing.test", "/", 503, ""),
        ],
    )
    .await;

    let bad = p.ingress("bad", "bad-path").await;
    let d = &bad["diagnostics"][0];
    assert_eq!(d["field"], "spec.rules[0].http.paths[0].path", "{bad}");
    assert_eq!(d["severity"], "error");
    assert_eq!(
        bad["status"]["loadBalancer"]["ingress"],
        serde_json::json!([])
    );

    let missing = p.ingress("bad", "missing-svc").await;
    let d = &missing["diagnostics"][0];
    assert_eq!(
        d["field"], "spec.rules[0].http.paths[0].backend.service.name",
        "{missing}"
    );
    assert!(d["message"].as_str().unwrap().contains("nope"));

    let others = p.admin_json("/api/v1/diagnostics").await.to_string();
    assert!(
        others.contains("broken.yaml"),
        "the invalid YAML file is named: {others}"
    );

    let good = p.ingress("bad", "good").await;
    assert_eq!(good["diagnostics"], serde_json::json!([]));
    assert_eq!(
        good["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.1"
    );
}

#[tokio::test]
async fn validate_reports_every_bad_object_and_exits_1() {
    let m = bad_manifests().await;
    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("broken.yaml"), "{text}");
    assert!(
        text.contains("Ingress bad/bad-path: spec.rules[0].http.paths[0].path"),
        "{text}"
    );
    assert!(
        text.contains("Ingress bad/missing-svc: spec.rules[0].http.paths[0].backend.service.name"),
        "{text}"
    );
    assert!(!text.contains("bad/good"), "{text}");
}

#[tokio::test]
async fn validate_accepts_good_manifests() {
    let m = backends("ok", &[("web", 1)]).await;
    m.write(
        "good.yaml",
        &ingress(
            "ok",
            "good",
            "2026-01-01T00:00:00Z",
            &[("good.test", "/", "Prefix", "web", "80")],
        ),
    );
    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Like the API server rejecting a bad update, a file that stops parsing keeps its last good
/// objects; the error is reported until the file is fixed.
#[tokio::test]
async fn a_file_turning_bad_keeps_its_last_good_objects() {
    let m = backends("turn", &[("web", 1)]).await;
    m.write(
        "good.yaml",
        &ingress(
            "turn",
            "good",
            "2026-01-01T00:00:00Z",
            &[("good.test", "/", "Prefix", "web", "80")],
        ),
    );
    m.write(
        "other.yaml",
        &ingress(
            "turn",
            "other",
            "2026-01-01T00:00:00Z",
            &[("other.test", "/", "Prefix", "web", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("other.test", "/", 200, "web")]).await;
    m.write("other.yaml", "kind: Ingress\n\tbroken: [");
    let start = std::time::Instant::now();
    while !p
        .admin_json("/api/v1/diagnostics")
        .await
        .to_string()
        .contains("other.yaml")
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "the bad file is reported"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    expect_routes(
        &p,
        &[
            ("good.test", "/", 200, "web"),
            ("other.test", "/", 200, "web"),
        ],
    )
    .await;
    m.remove("other.yaml");
    p.wait_route("other.test", "/", 404, "").await;
}

/// A busy port: the cause is said once, with the flag and what to do.
#[test]
fn a_busy_port_is_named_once_with_its_flag_and_what_to_do() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .env("XDG_RUNTIME_DIR", dir.path())
        .args(["run", "-f"])
        .arg(dir.path())
        .args([
            &format!("--http-listen=127.0.0.1:{port}"),
            "--https-listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("Address already in use").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("--http-listen") && stderr.contains("stop it"),
        "{stderr}"
    );
}
