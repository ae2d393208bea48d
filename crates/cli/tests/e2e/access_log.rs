//! The access log through the real binary, once per provider: one JSON line per request with
//! what was asked and where it went, `X-Request-Id` generated (or the client's kept) and
//! passed upstream, values from the client escaped, nothing with `--access-log off`, stdout
//! by default (after the banner).

use crate::backends;
use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

#[derive(Clone, Copy, Debug)]
enum Provider {
    Proxy,
    Haproxy,
}

async fn start(provider: Provider, dir: &Path, flags: &[&str]) -> Portico {
    let p = match provider {
        Provider::Proxy => Portico::start(dir, flags).await,
        Provider::Haproxy => Portico::start_haproxy(dir, flags).await,
    };
    p.wait_route("web.test", "/ready", 200, "web").await;
    p
}

/// A manifest directory with Service `web` (one echo pod) behind `web.test/`; the pod's
/// address.
async fn web() -> (Manifests, std::net::SocketAddr) {
    let m = backends("al", &[]).await;
    let pod = echo_pods("web", 1).await[0];
    m.write("backends.yaml", &service("al", "web", &ready(&[pod])));
    let rules = [("web.test", "/", "Prefix", "web", "80")];
    m.write(
        "ing.yaml",
        &ingress("al", "web", "2026-01-01T00:00:00Z", &rules),
    );
    (m, pod)
}

/// The JSON lines of `text` whose path is `path`, waiting up to 5 s for at least one.
async fn lines_for(read: impl Fn() -> String, path: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = read();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .filter(|v: &Value| v["path"] == path)
            .collect();
        if !lines.is_empty() || Instant::now() > deadline {
            // Another moment, so that a second line for the same request would show.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let text = read();
            let again = text.lines().filter_map(|l| serde_json::from_str(l).ok());
            return again.filter(|v: &Value| v["path"] == path).collect();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn file_reader(path: &Path) -> impl Fn() -> String + '_ {
    move || std::fs::read_to_string(path).unwrap_or_default()
}

async fn one_line_per_request_with_what_was_asked_and_where_it_went(provider: Provider) {
    let (m, pod) = web().await;
    let log = m.path().join("access.log");
    let flag = format!("--access-log={}", log.display());
    let p = start(provider, m.path(), &[&flag]).await;
    let reply = p
        .request(
            p.http,
            "POST",
            "web.test",
            "/one?token=secret",
            &[("authorization", "Bearer sesame"), ("cookie", "c=1")],
            "12345",
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    let sent_id = reply.json()["headers"]["x-request-id"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        sent_id.len() >= 16,
        "a request id went upstream: {:?}",
        reply.json()
    );
    let lines = lines_for(file_reader(&log), "/one").await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["method"], "POST", "{line}");
    assert_eq!(line["host"], "web.test", "{line}");
    assert_eq!(line["request_id"], sent_id.as_str(), "{line}");
    assert_eq!(line["upstream_addr"], pod.to_string(), "{line}");
    assert_eq!(line["pool"], "al_web_80", "{line}");
    assert_eq!(line["load_balancer"], "ingressclass/portico", "{line}");
    assert_eq!(line["client"], "127.0.0.1", "{line}");
    assert!(line["bytes_in"].as_u64().unwrap() >= 5, "{line}");
    assert!(
        line["bytes_out"].as_u64().unwrap() >= reply.body.len() as u64,
        "{line}"
    );
    assert!(line["request_time_ms"].as_f64().unwrap() >= 0.0, "{line}");
    assert!(line["upstream_time_ms"].as_f64().unwrap() >= 0.0, "{line}");
    assert!(line["time"].as_str().unwrap().starts_with("20"), "{line}");
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in ["sesame", "c=1", "token=secret"] {
        assert!(!text.contains(secret), "{secret} logged: {text}");
    }
}

async fn a_client_request_id_is_kept_and_values_are_escaped(provider: Provider) {
    let (m, _) = web().await;
    let log = m.path().join("access.log");
    let flag = format!("--access-log={}", log.display());
    let p = start(provider, m.path(), &[&flag]).await;
    let id = "client \"id\"\\\t1";
    let reply = p
        .request(
            p.http,
            "GET",
            "web.test",
            "/kept",
            &[("x-request-id", id)],
            "",
        )
        .await
        .unwrap();
    assert_eq!(
        reply.json()["headers"]["x-request-id"],
        id,
        "{:?}",
        reply.json()
    );
    let lines = lines_for(file_reader(&log), "/kept").await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["request_id"], id);
    // A path with a quote, a backslash and an encoded line break, sent as it is.
    let path = "/q\"uo\\te%0A";
    let mut stream = tokio::net::TcpStream::connect(p.http).await.unwrap();
    let raw = format!("GET {path} HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n");
    stream.write_all(raw.as_bytes()).await.unwrap();
    let status = crate::raw_client::read_response(&mut stream).await;
    assert!(status.is_some(), "answered");
    let lines = lines_for(file_reader(&log), path).await;
    assert_eq!(lines.len(), 1, "{}", std::fs::read_to_string(&log).unwrap());
}

async fn off_logs_nothing_and_stdout_is_the_default(provider: Provider) {
    let (m, _) = web().await;
    let p = start(provider, m.path(), &[]).await;
    p.get("web.test", "/default").await;
    let printed = p.stdout.clone();
    let stdout = move || printed.lock().unwrap().join("\n");
    let lines = lines_for(&stdout, "/default").await;
    assert_eq!(lines.len(), 1, "{}", stdout());
    drop(p);
    let p = start(provider, m.path(), &["--access-log=off"]).await;
    p.get("web.test", "/off").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let printed = p.stdout.lock().unwrap().join("\n");
    assert!(printed.is_empty(), "{printed}");
}

mod proxy {
    use super::*;

    #[tokio::test]
    async fn one_line_per_request_with_what_was_asked_and_where_it_went() {
        super::one_line_per_request_with_what_was_asked_and_where_it_went(Provider::Proxy).await;
    }

    #[tokio::test]
    async fn a_client_request_id_is_kept_and_values_are_escaped() {
        super::a_client_request_id_is_kept_and_values_are_escaped(Provider::Proxy).await;
    }

    #[tokio::test]
    async fn off_logs_nothing_and_stdout_is_the_default() {
        super::off_logs_nothing_and_stdout_is_the_default(Provider::Proxy).await;
    }
}

mod haproxy {
    use super::*;

    #[tokio::test]
    async fn one_line_per_request_with_what_was_asked_and_where_it_went() {
        super::one_line_per_request_with_what_was_asked_and_where_it_went(Provider::Haproxy).await;
    }

    #[tokio::test]
    async fn a_client_request_id_is_kept_and_values_are_escaped() {
        super::a_client_request_id_is_kept_and_values_are_escaped(Provider::Haproxy).await;
    }

    #[tokio::test]
    async fn off_logs_nothing_and_stdout_is_the_default() {
        super::off_logs_nothing_and_stdout_is_the_default(Provider::Haproxy).await;
    }
}
