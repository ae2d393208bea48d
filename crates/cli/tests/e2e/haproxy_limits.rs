//! ingress-nginx's rate limits on the real binary with provider haproxy (stick tables):
//! `limit-rps` with its burst (`limit-burst-multiplier`) shared by every path of the Ingress,
//! refused requests not counted, haproxy's sliding window (the difference from nginx's bucket
//! that docs/migrating-from-ingress-nginx.md states), `limit-whitelist` for a second client
//! address (127.0.0.2), `limit-connections` with a slow backend, the default status 503 and
//! `--limit-status-code`.

use crate::rate_limits::{backends, limited};
use crate::support::*;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn manifests() -> Manifests {
    let m = backends().await;
    let rps = [
        ("rps.test", "/a", "Prefix", "web", "80"),
        ("rps.test", "/b", "Prefix", "web", "80"),
    ];
    let keys = [("limit-rps", "1"), ("limit-burst-multiplier", "2")];
    m.write("rps.yaml", &limited("rps", &rps, &keys));
    let allowed = [("allowed.test", "/", "Prefix", "web", "80")];
    let keys = [
        ("limit-rps", "1"),
        ("limit-burst-multiplier", "1"),
        ("limit-whitelist", "10.0.0.0/8, 127.0.0.2/32"),
    ];
    m.write("allowed.yaml", &limited("allowed", &allowed, &keys));
    let conn = [("conn.test", "/", "Prefix", "slow", "80")];
    m.write(
        "conn.yaml",
        &limited("conn", &conn, &[("limit-connections", "1")]),
    );
    let rpm = [("rpm.test", "/", "Prefix", "web", "80")];
    let keys = [("limit-rpm", "1"), ("limit-burst-multiplier", "2")];
    m.write("rpm.yaml", &limited("rpm", &rpm, &keys));
    let plain = [("plain.test", "/", "Prefix", "web", "80")];
    m.write("plain.yaml", &limited("plain", &plain, &[]));
    m
}

async fn statuses(p: &Portico, host: &str, paths: &[&str]) -> Vec<u16> {
    let mut out = Vec::new();
    for path in paths {
        out.push(p.get(host, path).await.status);
    }
    out
}

/// The status of `GET /` for `host` sent to `to` from the client address `from`.
async fn status_from(from: [u8; 4], to: SocketAddr, host: &str) -> u16 {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    let mut stream = socket.connect(to).await.unwrap();
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).unwrap_or_default();
    status
        .parse()
        .unwrap_or_else(|_| panic!("no status in {text:?}"))
}

#[tokio::test]
async fn limit_rps_on_haproxy_admits_its_burst_per_ingress_then_refuses_until_the_window_slides() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    // One a second with a burst of 2: three at once, over both paths of the Ingress.
    let first = Instant::now();
    let got = statuses(&p, "rps.test", &["/a", "/b", "/a", "/b", "/a"]).await;
    assert_eq!(got, [200, 200, 200, 503, 503]);
    // Other Ingresses are not counted with it.
    assert_eq!(statuses(&p, "plain.test", &["/"; 5]).await, [200; 5]);
    // limit-rpm the same way: one a minute with a burst of 2.
    let got = statuses(&p, "rpm.test", &["/"; 4]).await;
    assert_eq!(got, [200, 200, 200, 503]);
    // Where nginx would admit one after a second, haproxy's window (3 s) has not slid yet.
    tokio::time::sleep(Duration::from_millis(1200).saturating_sub(first.elapsed())).await;
    assert_eq!(statuses(&p, "rps.test", &["/b"]).await, [503]);
    // Once it slid, requests pass again at the rate: one (more when this test runs late, the
    // window having slid further), then a refusal.
    tokio::time::sleep(Duration::from_millis(3500).saturating_sub(first.elapsed())).await;
    let got = statuses(&p, "rps.test", &["/b", "/a", "/b", "/a"]).await;
    assert!(got[0] == 200 && got.contains(&503), "{got:?}");
}

#[tokio::test]
async fn limit_whitelist_on_haproxy_exempts_its_client_addresses_only() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    // 127.0.0.2 is in the allowlist: never limited.
    for _ in 0..6 {
        assert_eq!(
            status_from([127, 0, 0, 2], p.http, "allowed.test").await,
            200
        );
    }
    // 127.0.0.1 is not: one a second with a burst of 1, two at once.
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(status_from([127, 0, 0, 1], p.http, "allowed.test").await);
    }
    assert_eq!(got, [200, 200, 503, 503]);
    assert_eq!(
        status_from([127, 0, 0, 2], p.http, "allowed.test").await,
        200
    );
}

#[tokio::test]
async fn limit_connections_on_haproxy_refuses_a_second_request_in_progress_with_the_status() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &["--limit-status-code", "429"]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    let p = Arc::new(p);
    let first = {
        let p = p.clone();
        tokio::spawn(async move { p.get("conn.test", "/").await.status })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = p.get("conn.test", "/").await;
    assert_eq!(refused.status, 429);
    assert_eq!(&refused.body[..], b"429 Too Many Requests\n");
    assert_eq!(first.await.unwrap(), 200);
    // The first one done, its count is gone.
    assert_eq!(p.get("conn.test", "/").await.status, 200);
    // The same status for a rate limit.
    let got = statuses(&p, "rps.test", &["/a", "/a", "/a", "/a"]).await;
    assert_eq!(got, [200, 200, 200, 429]);
}
