//! The real client address. `--proxy-protocol`: every connection to the HTTP and HTTPS
//! listeners starts with a PROXY protocol header (v1 or v2), and the client it names is the one
//! allowlists, rate limits, `X-Forwarded-For` and the access log see; a connection without one
//! is closed unanswered. `--trusted-proxies`: a trusted peer's `X-Forwarded-For` names the
//! client; an untrusted peer's changes nothing.

use crate::conformance::Provider;
use crate::support::*;
use crate::tls_support::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

proxy_and_haproxy!(the_header_names_the_client);

const NS: &str = "proxy-protocol";

fn v1(client: &str) -> Vec<u8> {
    format!("PROXY TCP4 {client} 127.0.0.1 40000 80\r\n").into_bytes()
}

/// A v2 header (PROXY command, TCP over IPv4) naming `client`.
fn v2(client: [u8; 4]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    h.extend_from_slice(&client);
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&41000u16.to_be_bytes());
    h.extend_from_slice(&80u16.to_be_bytes());
    h
}

/// Sends `header` then a GET for `host` `path` on one new connection: the status (0 when the
/// connection closed unanswered) and the echo's JSON.
async fn ask(to: SocketAddr, header: &[u8], host: &str, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(to).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let mut out = header.to_vec();
    out.extend_from_slice(request.as_bytes());
    if stream.write_all(&out).await.is_err() {
        return (0, Value::Null);
    }
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The access log's line for `path`, once written.
async fn logged(log: &std::path::Path, path: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let quoted = format!("\"{path}\"");
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(&quoted)) {
            return serde_json::from_str(line).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no line for {path}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn forwarded_for(echo: &Value) -> &str {
    echo["headers"]["x-forwarded-for"].as_str().unwrap_or("")
}

async fn manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service(NS, "web", &ready(&web)));
    let open = [("open.test", "/", "Prefix", "web", "80")];
    m.write(
        "open.yaml",
        &ingress(NS, "open", "2026-01-01T00:00:00Z", &open),
    );
    let only = [("only.test", "/", "Prefix", "web", "80")];
    let only = ingress(NS, "only", "2026-01-01T00:00:00Z", &only);
    let allow = [(
        "nginx.ingress.kubernetes.io/allowlist-source-range",
        "192.0.2.0/24",
    )];
    m.write("only.yaml", &annotated(&only, &allow));
    m
}

async fn the_header_names_the_client(provider: Provider) {
    let m = manifests().await;
    let p = provider.start_with(m.path(), &["--proxy-protocol"]).await;
    // Ready: a request with a header is answered (wait_route's own requests have none).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ask(p.http, &v1("192.0.2.7"), "open.test", "/").await.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, echo) = ask(p.http, &v1("192.0.2.7"), "open.test", "/").await;
    assert_eq!((status, forwarded_for(&echo)), (200, "192.0.2.7"));
    let (status, echo) = ask(p.http, &v2([198, 51, 100, 4]), "open.test", "/").await;
    assert_eq!((status, forwarded_for(&echo)), (200, "198.51.100.4"));
    // The allowlist sees the named client, not the loopback peer.
    assert_eq!(ask(p.http, &v1("192.0.2.7"), "only.test", "/").await.0, 200);
    assert_eq!(
        ask(p.http, &v1("203.0.113.5"), "only.test", "/").await.0,
        403
    );
    // No header: closed unanswered.
    assert_eq!(ask(p.http, b"", "open.test", "/").await.0, 0);
}

#[tokio::test]
async fn https_rate_limits_and_the_access_log_see_the_named_client() {
    let m = manifests().await;
    let limited = [("limited.test", "/", "Prefix", "web", "80")];
    let limited = ingress(NS, "limited", "2026-01-01T00:00:00Z", &limited);
    let limits = [
        ("nginx.ingress.kubernetes.io/limit-rpm", "1"),
        ("nginx.ingress.kubernetes.io/limit-burst-multiplier", "1"),
    ];
    m.write("limited.yaml", &annotated(&limited, &limits));
    let log = m.path().join("access.log");
    let flag = format!("--access-log={}", log.display());
    let p = Portico::start(m.path(), &["--proxy-protocol", &flag]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ask(p.http, &v1("192.0.2.7"), "open.test", "/").await.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // One request a minute with a burst of one (nginx's `burst=1 nodelay`): the third from
    // one client is refused, and a second client is not limited by the first.
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(ask(p.http, &v1("192.0.2.10"), "limited.test", "/").await.0);
    }
    assert_eq!(first, [200, 200, 503]);
    let other = ask(p.http, &v1("192.0.2.11"), "limited.test", "/").await;
    assert_eq!(other.0, 200);
    // HTTPS: the header comes before the TLS handshake.
    let mut tcp = TcpStream::connect(p.https).await.unwrap();
    tcp.write_all(&v1("192.0.2.12")).await.unwrap();
    let conn = handshake(tcp, Some("open.test"), &[], Trust::Any)
        .await
        .unwrap();
    let answer = H1::over(conn).await.get("open.test", "/https").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["headers"]["x-forwarded-for"], "192.0.2.12");
    // The access log names the client of each line.
    assert_eq!(logged(&log, "/https").await["client"], "192.0.2.12");
}

#[tokio::test]
async fn a_trusted_proxys_forwarded_for_names_the_client_and_an_untrusted_one_does_not() {
    let m = manifests().await;
    let log = m.path().join("access.log");
    let flag = format!("--access-log={}", log.display());
    let p = Portico::start(
        m.path(),
        &["--trusted-proxies", "127.0.0.0/8,10.0.0.0/8", &flag],
    )
    .await;
    p.wait_route("open.test", "/", 200, "web").await;
    let only = async |forwarded: &str, path: &str| {
        let headers = [("x-forwarded-for", forwarded)];
        let reply = p
            .request(p.http, "GET", "only.test", path, &headers, "")
            .await;
        reply.unwrap().status
    };
    // The rightmost address that is not a trusted proxy: forged entries left of it are not.
    assert_eq!(
        only("203.0.113.5, 192.0.2.7, 10.0.0.9", "/named").await,
        200
    );
    assert_eq!(only("192.0.2.7, 203.0.113.5", "/").await, 403);
    assert_eq!(logged(&log, "/named").await["client"], "192.0.2.7");
    drop(p);

    // Without --trusted-proxies the peer is the client, whatever the header says.
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("open.test", "/", 200, "web").await;
    let headers = [("x-forwarded-for", "192.0.2.7")];
    let reply = p
        .request(p.http, "GET", "only.test", "/", &headers, "")
        .await;
    assert_eq!(reply.unwrap().status, 403);
}
