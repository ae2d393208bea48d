//! Providers `l4` and `haproxy`: two Services on one `spec.loadBalancerIP` asking for the same port and
//! protocol. The older keeps it, the newer is told so in the admin API and keeps its other
//! ports.

use crate::l4::{
    Provider, connect_from, l4_service, served_by, start_for, tcp_endpoint, tcp_pod, vip_by,
    wait_connect,
};
use crate::support::{Manifests, free_port};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SHARED_IP: &str = "127.0.55.10";
const SHARED_IP_HAPROXY: &str = "127.0.67.10";

/// `l4_service` with `loadBalancerIP` and a creation time.
fn on_shared_ip(
    shared_ip: &str,
    name: &str,
    created: &str,
    ports: &str,
    pod: SocketAddr,
    names: &[&'static str],
) -> String {
    let spec = format!("  loadBalancerIP: {shared_ip}\n");
    l4_service(name, &spec, ports, &[tcp_endpoint(names, pod, true)]).replacen(
        &format!("metadata: {{name: {name}, namespace: apps}}"),
        &format!("metadata: {{name: {name}, namespace: apps, creationTimestamp: \"{created}\"}}"),
        1,
    )
}

#[tokio::test]
async fn the_older_service_keeps_a_shared_address_and_port_and_the_newer_is_told() {
    shared_address(Provider::L4, SHARED_IP, "--vip-pool=127.0.56.0/24").await;
}

#[tokio::test]
async fn the_older_service_keeps_a_shared_address_and_port_and_the_newer_is_told_haproxy() {
    shared_address(
        Provider::Haproxy,
        SHARED_IP_HAPROXY,
        "--vip-pool=127.0.68.0/24",
    )
    .await;
}

async fn shared_address(provider: Provider, shared_ip: &str, pool: &str) {
    let (older, newer) = (tcp_pod("older").await, tcp_pod("newer").await);
    let (shared, own) = (free_port(), free_port());
    let m = Manifests::new();
    // `a-newer` sorts first by name; its creation time makes it the second to ask.
    let newer_ports =
        format!("  - {{name: web, port: {shared}}}\n  - {{name: own, port: {own}}}\n");
    let yaml = on_shared_ip(
        shared_ip,
        "a-newer",
        "2026-02-01T00:00:00Z",
        &newer_ports,
        newer,
        &["web", "own"],
    ) + &on_shared_ip(
        shared_ip,
        "z-older",
        "2026-01-01T00:00:00Z",
        &format!("  - {{name: web, port: {shared}}}\n"),
        older,
        &["web"],
    );
    m.write("svc.yaml", &served_by(&yaml, provider));
    let p = start_for(provider, &m, &[pool]).await;
    let vip = shared_ip.parse().unwrap();
    assert_eq!(vip_by(&p, "z-older", provider).await, vip);

    // The newer Service's other port is served.
    let mut c = wait_connect(SocketAddr::new(vip, own)).await;
    assert_eq!(c.pod, "newer");
    c.echo("own port").await.unwrap();
    // The shared port goes to the older Service, every time.
    for i in 0..10 {
        let mut c = connect_from(None, SocketAddr::new(vip, shared))
            .await
            .unwrap();
        assert_eq!(c.pod, "older", "connection {i}");
        c.echo("shared port").await.unwrap();
    }
    // The diagnostic names both Services and the port fields.
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = format!(
        "TCP {shared_ip}:{shared} is already served for Service apps/z-older (spec.ports[0]); this port is not served"
    );
    loop {
        let all = p.admin_json("/api/v1/diagnostics").await;
        let found = (all.as_array().into_iter().flatten()).find(|d| d["message"] == want.as_str());
        if let Some(d) = found {
            assert_eq!(d["object"]["name"], "a-newer", "{d}");
            assert_eq!(d["field"], "spec.ports[0]", "{d}");
            break;
        }
        assert!(Instant::now() < deadline, "no diagnostic {want:?} in {all}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
