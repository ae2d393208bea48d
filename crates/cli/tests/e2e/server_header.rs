//! `Server` on every response that has none, as nginx and Envoy add theirs: the backend's own
//! is kept; `--server-header NAME` renames it, `off` adds none. Both providers, and on the
//! built-in proxy both request paths (a GET takes the own HTTP/1.1 path, a POST with
//! `Expect: 100-continue` hyper's).

use crate::conformance::Provider;

/// A request with `Expect` takes hyper's path on the built-in proxy.
const EXPECTING: [(&str, &str); 1] = [("expect", "100-continue")];
use crate::support::*;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

proxy_and_haproxy!(responses_without_a_server_field_get_one);

/// A backend that answers every request `200 ok` without a `Server` field, keep-alive.
async fn serverless_backend() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    seen.extend_from_slice(&buf[..n]);
                    // Requests here are small: a head, and a body of a few bytes at most.
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                        let body = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                        if seen.len() < end + 4 + body {
                            break;
                        }
                        seen.drain(..end + 4 + body);
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if stream.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

fn server(reply: &Reply) -> Option<&str> {
    reply.headers.get("server").map(|v| v.to_str().unwrap())
}

async fn responses_without_a_server_field_get_one(provider: Provider) {
    let m = Manifests::new();
    let plain = serverless_backend().await;
    let echo = echo_pods("web", 1).await;
    m.write("plain.yaml", &service("srv", "plain", &ready(&[plain])));
    m.write("web.yaml", &service("srv", "web", &ready(&echo)));
    let rules = [
        ("plain.test", "/", "Prefix", "plain", "80"),
        ("echo.test", "/", "Prefix", "web", "80"),
    ];
    m.write(
        "ing.yaml",
        &ingress("srv", "ing", "2026-01-01T00:00:00Z", &rules),
    );

    let p = provider.start_with(m.path(), &[]).await;
    p.wait_route("echo.test", "/", 200, "web").await;
    let got = p.get("plain.test", "/").await;
    assert_eq!((got.status, server(&got)), (200, Some("portico")));
    let posted = p
        .request(p.http, "POST", "plain.test", "/", &EXPECTING, "body")
        .await
        .unwrap();
    assert_eq!((posted.status, server(&posted)), (200, Some("portico")));
    // The backend's own is kept.
    let echoed = p.get("echo.test", "/").await;
    assert_eq!(server(&echoed), Some("portico-echo"));
    // Portico's own answers too.
    let missing = p.get("nowhere.test", "/").await;
    assert_eq!((missing.status, server(&missing)), (404, Some("portico")));
    drop(p);

    let p = provider
        .start_with(m.path(), &["--server-header", "edge/1.0"])
        .await;
    p.wait_route("echo.test", "/", 200, "web").await;
    assert_eq!(server(&p.get("plain.test", "/").await), Some("edge/1.0"));
    assert_eq!(server(&p.get("nowhere.test", "/").await), Some("edge/1.0"));
    drop(p);

    let p = provider
        .start_with(m.path(), &["--server-header", "off"])
        .await;
    p.wait_route("echo.test", "/", 200, "web").await;
    assert_eq!(server(&p.get("plain.test", "/").await), None);
    assert_eq!(server(&p.get("nowhere.test", "/").await), None);
    assert_eq!(server(&p.get("echo.test", "/").await), Some("portico-echo"));
}
