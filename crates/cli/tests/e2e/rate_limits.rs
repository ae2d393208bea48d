//! ingress-nginx's rate limits on the real binary with the built-in proxy: `limit-rps` with
//! its burst (`limit-burst-multiplier`) shared by every path of the Ingress, `limit-whitelist`,
//! `limit-connections`, the default status 503 and `--limit-status-code`.

use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const CREATED: &str = "2026-01-01T00:00:00Z";

/// An Ingress `name` of the namespace of [`backends`] with ingress-nginx's annotations `keys`.
pub(crate) fn limited(
    name: &str,
    rules: &[(&str, &str, &str, &str, &str)],
    keys: &[(&str, &str)],
) -> String {
    nginx_annotated(&ingress("rl", name, CREATED, rules), keys)
}

/// Manifests with the Services `web` (one echo pod) and `slow` (one that answers after 800 ms).
pub(crate) async fn backends() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("rl", "web", &ready(&web)));
    let slow = Arc::new(portico_echo::Behaviour::default());
    slow.delay_ms.store(800, Ordering::Relaxed);
    let any = ([127, 0, 0, 1], 0).into();
    let addr = portico_echo::spawn_with(any, "slow", "slow-0", slow)
        .await
        .unwrap();
    m.write("slow.yaml", &service("rl", "slow", &ready(&[addr])));
    m
}

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
        ("limit-whitelist", "10.0.0.0/8, 127.0.0.0/8"),
    ];
    m.write("allowed.yaml", &limited("allowed", &allowed, &keys));
    let conn = [("conn.test", "/", "Prefix", "slow", "80")];
    m.write(
        "conn.yaml",
        &limited("conn", &conn, &[("limit-connections", "1")]),
    );
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

#[tokio::test]
async fn limit_rps_admits_its_burst_per_ingress_then_refuses_until_the_rate_refills() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    // One a second with a burst of 2: three at once, over both paths of the Ingress.
    let got = statuses(&p, "rps.test", &["/a", "/b", "/a", "/b", "/a"]).await;
    assert_eq!(got, [200, 200, 200, 503, 503]);
    // Other Ingresses are not counted with it.
    assert_eq!(statuses(&p, "plain.test", &["/"; 5]).await, [200; 5]);
    // A client in limit-whitelist is never limited.
    assert_eq!(statuses(&p, "allowed.test", &["/"; 8]).await, [200; 8]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(statuses(&p, "rps.test", &["/b", "/a"]).await, [200, 503]);
}

#[tokio::test]
async fn limit_connections_refuses_a_second_request_in_progress_with_the_configured_status() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &["--limit-status-code", "429"]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    let p = Arc::new(p);
    let first = {
        let p = p.clone();
        tokio::spawn(async move { p.get("conn.test", "/").await.status })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(p.get("conn.test", "/").await.status, 429);
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(p.get("conn.test", "/").await.status, 200);
    // The same status for a rate limit.
    let got = statuses(&p, "rps.test", &["/a", "/a", "/a", "/a"]).await;
    assert_eq!(got, [200, 200, 200, 429]);
}
