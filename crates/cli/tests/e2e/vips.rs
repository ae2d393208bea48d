//! Listeners belong to load balancers: a load balancer with a VIP (`portico.dev/vip` on its
//! IngressClass) is served on the VIP and its ports by the built-in proxy, load balancers on
//! the same address are served together (merged by host), the others stay on the default
//! listeners, and a VIP that cannot be bound is reported without blocking the rest.

use crate::support::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// An IngressClass of Portico's controller with a VIP and ports.
fn class_with_vip(name: &str, vip: &str, http: u16, https: u16) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {name}\n  annotations:\n    portico.dev/vip: \"{vip}\"\n    portico.dev/http-port: \"{http}\"\n    portico.dev/https-port: \"{https}\"\nspec:\n  controller: portico.dev/ingress-controller\n"
    )
}

/// One Ingress of `class` routing `host` to `service`.
fn ingress_of(class: &str, name: &str, host: &str, service: &str) -> String {
    ingress(
        "default",
        name,
        "2024-01-01T00:00:00Z",
        &[(host, "/", "Prefix", service, "80")],
    )
    .replace(
        "ingressClassName: portico",
        &format!("ingressClassName: {class}"),
    )
}

/// The service answering `host` on `addr`, or the status when no backend answered.
async fn answer(p: &Portico, addr: SocketAddr, host: &str) -> String {
    match p.request(addr, "GET", host, "/", &[], "").await {
        Ok(r) if r.status == 200 => r.service(),
        Ok(r) => r.status.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// Polls until `host` on `addr` answers `want`.
async fn wait_answer(p: &Portico, addr: SocketAddr, host: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = answer(p, addr, host).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{host} on {addr}: wanted {want}, got {got}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `portico run` with the built-in proxy, or with haproxy serving the default listeners.
async fn start(dir: &std::path::Path, haproxy: bool) -> Portico {
    if haproxy {
        Portico::start_haproxy(dir, &[]).await
    } else {
        Portico::start(dir, &[]).await
    }
}

proxy_and_haproxy!(
    load_balancers_are_served_on_their_vip_and_share_an_address_merged_by_host,
    two_classes_without_a_vip_share_the_default_listeners,
);

async fn load_balancers_are_served_on_their_vip_and_share_an_address_merged_by_host(
    provider: crate::conformance::Provider,
) {
    let haproxy = matches!(provider, crate::conformance::Provider::Haproxy);
    let m = crate::backends("default", &[("web", 1), ("api", 1)]).await;
    let (http, https) = (free_port(), free_port());
    m.write(
        "a.yaml",
        &(class_with_vip("a", "127.0.0.7", http, https) + &ingress_of("a", "a", "a.test", "web")),
    );
    m.write(
        "b.yaml",
        &(class_with_vip("b", "127.0.0.7", http, https) + &ingress_of("b", "b", "b.test", "api")),
    );
    m.write("c.yaml", &ingress_of("portico", "c", "c.test", "web"));
    let p = start(m.path(), haproxy).await;
    let vip: SocketAddr = format!("127.0.0.7:{http}").parse().unwrap();

    // Two classes on one VIP and port: one listener, routes merged by host.
    wait_answer(&p, vip, "a.test", "web").await;
    wait_answer(&p, vip, "b.test", "api").await;
    assert_eq!(
        answer(&p, vip, "c.test").await,
        "404",
        "c's class has no VIP"
    );
    // The default listeners serve the class without a VIP, and only it.
    wait_answer(&p, p.http, "c.test", "web").await;
    assert_eq!(answer(&p, p.http, "a.test").await, "404");

    // b moves to another VIP: served there, gone from the first; a stays.
    m.write(
        "b.yaml",
        &(class_with_vip("b", "127.0.0.8", http, https) + &ingress_of("b", "b", "b.test", "api")),
    );
    let moved: SocketAddr = format!("127.0.0.8:{http}").parse().unwrap();
    wait_answer(&p, moved, "b.test", "api").await;
    wait_answer(&p, vip, "b.test", "404").await;
    assert_eq!(answer(&p, vip, "a.test").await, "web");
}

#[tokio::test]
async fn a_vip_that_cannot_be_bound_is_an_error_on_its_class_and_the_rest_is_served() {
    let m = crate::backends("default", &[("web", 1)]).await;
    let taken = std::net::TcpListener::bind("127.0.0.9:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    m.write(
        "a.yaml",
        &(class_with_vip("a", "127.0.0.9", port, free_port())
            + &ingress_of("a", "a", "a.test", "web")),
    );
    m.write("c.yaml", &ingress_of("portico", "c", "c.test", "web"));
    let p = Portico::start(m.path(), &[]).await;
    wait_answer(&p, p.http, "c.test", "web").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let diagnostics = p.admin_json("/api/v1/diagnostics").await.to_string();
        if diagnostics.contains("cannot listen on 127.0.0.9") {
            assert!(diagnostics.contains("IngressClass"), "{diagnostics}");
            break;
        }
        assert!(Instant::now() < deadline, "no diagnostic: {diagnostics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(taken);
}

async fn two_classes_without_a_vip_share_the_default_listeners(
    provider: crate::conformance::Provider,
) {
    let haproxy = matches!(provider, crate::conformance::Provider::Haproxy);
    let m = crate::backends("default", &[("web", 1), ("api", 1)]).await;
    let other = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: other\nspec:\n  controller: portico.dev/ingress-controller\n";
    m.write("a.yaml", &ingress_of("portico", "a", "a.test", "web"));
    m.write(
        "b.yaml",
        &(other.to_owned() + &ingress_of("other", "b", "b.test", "api")),
    );
    let p = start(m.path(), haproxy).await;
    wait_answer(&p, p.http, "a.test", "web").await;
    wait_answer(&p, p.http, "b.test", "api").await;
}
