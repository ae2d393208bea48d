//! The fake's HTTP on the wire, read with a bare socket: chunked watch bodies, abrupt cuts
//! versus clean ends, error bodies, and the server stopping when dropped.

use portico_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn connect(server: &FakeApiServer) -> TcpStream {
    let addr = server.url().trim_start_matches("http://").to_string();
    TcpStream::connect(addr).await.expect("connect")
}

async fn send(stream: &mut TcpStream, method: &str, target: &str, content_type: &str, body: &str) {
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: fake\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
}

/// Reads until the peer closes, or at most `limit`.
async fn read_all(stream: &mut TcpStream, limit: Duration) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(limit, stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads until `needle` has arrived.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&out).contains(needle) {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            other => panic!("connection ended before {needle:?}: {other:?}"),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One whole request and its response, on a connection closed after it.
async fn exchange(
    server: &FakeApiServer,
    method: &str,
    target: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let mut stream = connect(server).await;
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: fake\r\nconnection: close\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let text = read_all(&mut stream, Duration::from_secs(5)).await;
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

const WATCH: &str = "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0";

#[tokio::test]
async fn cut_drops_the_connection_without_ending_the_chunked_body() {
    let server = FakeApiServer::start().await;
    server.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
    let mut stream = connect(&server).await;
    send(&mut stream, "GET", WATCH, "application/json", "").await;
    let head = read_until(&mut stream, "\"ADDED\"").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    server.cut_watches();
    let rest = read_all(&mut stream, Duration::from_secs(5)).await;
    assert!(
        !rest.contains("0\r\n\r\n"),
        "a cut must not end the body cleanly: {rest:?}"
    );
}

#[tokio::test]
async fn timeout_ends_the_chunked_body_cleanly() {
    let server = FakeApiServer::start().await;
    let mut stream = connect(&server).await;
    send(
        &mut stream,
        "GET",
        &format!("{WATCH}&timeoutSeconds=1"),
        "application/json",
        "",
    )
    .await;
    let text = read_until(&mut stream, "0\r\n\r\n").await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[tokio::test]
async fn bad_input_is_answered_with_a_status_not_a_crash() {
    let server = FakeApiServer::start().await;
    server.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}));
    let object = "/api/v1/namespaces/default/services/s";
    let cases = [
        ("PUT", object, "application/json", "[1, 2]", 400),
        ("PUT", object, "application/json", "{", 400),
        (
            "PUT",
            object,
            "application/json",
            r#"{"kind": "Secret", "metadata": {"name": "s"}}"#,
            400,
        ),
        (
            "PUT",
            object,
            "application/json",
            r#"{"metadata": {"name": "t"}}"#,
            400,
        ),
        (
            "PATCH",
            object,
            "application/merge-patch+json",
            "not json",
            400,
        ),
        (
            "PATCH",
            object,
            "application/json-patch+json",
            r#"[{"op": "jump"}]"#,
            400,
        ),
        (
            "PATCH",
            object,
            "application/json-patch+json",
            r#"[{"op": "remove", "path": "/nope"}]"#,
            422,
        ),
        ("PATCH", object, "text/plain", "{}", 415),
        (
            "POST",
            "/api/v1/namespaces/default/services",
            "application/json",
            "{}",
            422,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/services",
            "application/json",
            r#"{"metadata": {"name": "x", "namespace": "other"}}"#,
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/services?labelSelector=a%20in%20b",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/services?limit=-1",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/services?watch=1&resourceVersion=x",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/services?resourceVersion=99&resourceVersionMatch=Exact",
            "",
            "",
            504,
        ),
        ("DELETE", object, "application/json", "{", 400),
        ("POST", object, "application/json", "{}", 405),
        ("GET", "/api/v1/pods", "", "", 404),
    ];
    for (method, target, content_type, body, want) in cases {
        let (code, status) = exchange(&server, method, target, content_type, body).await;
        assert_eq!(code, want, "{method} {target} {body}: {status}");
        assert_eq!(
            (status["kind"].as_str(), status["code"].as_u64()),
            (Some("Status"), Some(u64::from(want)))
        );
    }
    // Still serving, and the object unharmed.
    let (code, service) = exchange(&server, "GET", object, "", "").await;
    assert_eq!(
        (code, service["metadata"]["resourceVersion"].as_str()),
        (200, Some("2"))
    );
}

#[tokio::test]
async fn dropping_the_last_handle_stops_the_server() {
    let server = FakeApiServer::start().await;
    let url = server.url();
    let clone = server.clone();
    drop(server);
    let (code, _) = exchange(&clone, "GET", "/version", "", "").await;
    assert_eq!(code, 200);
    let mut watch = connect(&clone).await;
    send(&mut watch, "GET", WATCH, "application/json", "").await;
    read_until(&mut watch, "200").await;
    drop(clone);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let addr = url.trim_start_matches("http://").to_string();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "nothing listens after the drop"
    );
    let rest = read_all(&mut watch, Duration::from_secs(5)).await;
    assert!(
        !rest.contains("0\r\n\r\n"),
        "open watches are dropped: {rest:?}"
    );
}
