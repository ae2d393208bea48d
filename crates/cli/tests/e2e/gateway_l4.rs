//! TCPRoute and UDPRoute on the real binary in file mode: a Gateway's TCP and UDP listeners
//! served by provider `l4` on the Gateway's address, against TCP and UDP echo backends that
//! say which pod they are. Cases modelled on the upstream conformance suite's TCPRoute and
//! UDPRoute tests (a simple route of each kind, parentRef by sectionName and by port, weighted
//! backends with a weight 0, a backendRef that does not resolve) and `portico get`.

use crate::gateway_api::{OURS, class};
use crate::get::get;
use crate::l4::{connect_from, tcp_pod, udp_ask, udp_pod, wait_connect};
use crate::support::{Manifests, Portico, free_port};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A Service `apps/<name>` (not a load balancer) with a TCP port 7000 and a UDP port 7001, and
/// its one endpoint on 127.0.0.1 at the pods' `tcp` and `udp` ports.
fn service(name: &str, tcp: Option<SocketAddr>, udp: Option<SocketAddr>) -> String {
    let mut ports = Vec::new();
    if let Some(a) = tcp {
        ports.push(format!("{{name: tcp, port: {}, protocol: TCP}}", a.port()));
    }
    if let Some(a) = udp {
        ports.push(format!("{{name: udp, port: {}, protocol: UDP}}", a.port()));
    }
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: apps}}\nspec:\n  ports: [{{name: tcp, port: 7000}}, {{name: udp, port: 7001, protocol: UDP}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}-1, namespace: apps, labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\nports: [{}]\nendpoints: [{{addresses: [127.0.0.1]}}]\n",
        ports.join(", ")
    )
}

fn gateway(listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: apps}}\nspec:\n  gatewayClassName: portico\n  addresses: [{{value: 127.0.0.1}}]\n  listeners: {listeners}\n"
    )
}

/// A TCPRoute or UDPRoute `apps/<name>` in `version` (`v1` or `v1alpha2`).
fn route(kind: &str, version: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/{version}\nkind: {kind}\nmetadata: {{name: {name}, namespace: apps}}\nspec: {spec}\n"
    )
}

/// `type=status/reason` of our parent entries' conditions of route `apps/<name>` at `path`.
async fn conditions(p: &Portico, path: &str, name: &str) -> Vec<String> {
    let all = p.admin_json(path).await;
    let route = (all.as_array().into_iter().flatten()).find(|r| r["metadata"]["name"] == name);
    our_conditions(route.unwrap_or(&Value::Null))
}

/// `type=status/reason` of the conditions of our parent entries in `route`.
pub(crate) fn our_conditions(route: &Value) -> Vec<String> {
    let parents = route["status"]["parents"].as_array().cloned();
    let parents = parents.unwrap_or_default();
    let entries = parents.iter().filter(|e| e["controllerName"] == OURS);
    let conditions = entries.flat_map(|e| e["conditions"].as_array().cloned().unwrap_or_default());
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    conditions
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

/// Polls the admin API's list at `path` until route `name` has our conditions `want`.
pub(crate) async fn wait_conditions(p: &Portico, path: &str, name: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = conditions(p, path, name).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: wanted {want:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) const SERVED: [&str; 2] = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];

#[tokio::test]
async fn tcp_and_udp_routes_reach_their_echo_backends_and_a_missing_service_is_refused_alone() {
    let (tcp, udp) = (tcp_pod("tcp-a").await, udp_pod("udp-a").await);
    let (pt, pg, pu) = (free_port(), free_port(), free_port());
    let m = Manifests::new();
    m.write(
        "gw.yaml",
        &[
            class("portico", OURS),
            service("echo", Some(tcp), Some(udp)),
            gateway(&format!(
                "[{{name: tcp, port: {pt}, protocol: TCP}}, {{name: gone, port: {pg}, protocol: TCP}}, {{name: udp, port: {pu}, protocol: UDP}}]"
            )),
            route("TCPRoute", "v1alpha2", "t", "{parentRefs: [{name: edge, sectionName: tcp}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}"),
            route("TCPRoute", "v1", "broken", &format!("{{parentRefs: [{{name: edge, port: {pg}}}], rules: [{{backendRefs: [{{name: missing, port: 7000}}]}}]}}")),
            route("UDPRoute", "v1alpha2", "u", "{parentRefs: [{name: edge, sectionName: udp}], rules: [{backendRefs: [{name: echo, port: 7001}]}]}"),
        ]
        .concat(),
    );
    let p = Portico::start(m.path(), &[]).await;
    let mut conn = wait_connect(SocketAddr::from(([127, 0, 0, 1], pt))).await;
    assert_eq!(conn.pod, "tcp-a");
    conn.echo("through the gateway").await.unwrap();
    let answer = udp_ask(SocketAddr::from(([127, 0, 0, 1], pu)), "ping").await;
    assert_eq!(answer.as_deref(), Some("udp-a:ping"));
    // The listener of the route whose Service is missing refuses its connections.
    let refused = connect_from(None, SocketAddr::from(([127, 0, 0, 1], pg))).await;
    assert!(
        refused.is_err(),
        "a connection to the missing Service's listener"
    );

    wait_conditions(&p, "/api/v1/tcproutes", "t", &SERVED).await;
    wait_conditions(&p, "/api/v1/udproutes", "u", &SERVED).await;
    let broken = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    wait_conditions(&p, "/api/v1/tcproutes", "broken", &broken).await;
    let gw = p.admin_json("/api/v1/gateways").await;
    let listeners = &gw[0]["status"]["listeners"];
    let attached: Vec<_> = (listeners.as_array().into_iter().flatten())
        .map(|l| {
            (
                l["name"].as_str().unwrap(),
                l["attachedRoutes"].as_i64().unwrap(),
                l["supportedKinds"][0]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        attached,
        [
            ("tcp", 1, "TCPRoute"),
            ("gone", 1, "TCPRoute"),
            ("udp", 1, "UDPRoute")
        ]
    );

    let table = get(&p, &["tcproutes"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("apps") && l.contains("broken")),
        "{table}"
    );
    let list: Value = serde_json::from_str(&get(&p, &["udproutes", "-o", "json"])).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["kind"], "UDPRoute");
    let lbs = get(&p, &["lb"]);
    assert!(
        lbs.lines()
            .any(|l| l.starts_with("gateway/apps/edge/l4") && l.contains("l4")),
        "{lbs}"
    );
}

#[tokio::test]
async fn a_tcp_routes_weights_share_the_connections_and_weight_zero_gets_none() {
    let (a, b, z) = (tcp_pod("a").await, tcp_pod("b").await, tcp_pod("z").await);
    let port = free_port();
    let m = Manifests::new();
    m.write(
        "gw.yaml",
        &[
            class("portico", OURS),
            service("a", Some(a), None),
            service("b", Some(b), None),
            service("z", Some(z), None),
            gateway(&format!("[{{name: tcp, port: {port}, protocol: TCP}}]")),
            route("TCPRoute", "v1", "w", "{parentRefs: [{name: edge}], rules: [{backendRefs: [{name: a, port: 7000, weight: 3}, {name: b, port: 7000, weight: 1}, {name: z, port: 7000, weight: 0}]}]}"),
        ]
        .concat(),
    );
    let _p = Portico::start(m.path(), &[]).await;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_connect(addr).await;
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..400 {
        let conn = connect_from(None, addr).await.unwrap();
        *seen.entry(conn.pod).or_default() += 1;
    }
    assert_eq!(seen.get("z"), None, "{seen:?}");
    let share = f64::from(seen.get("a").copied().unwrap_or(0)) / 400.0;
    assert!(
        (0.65..=0.85).contains(&share),
        "a's share {share}: {seen:?}"
    );
}

#[tokio::test]
async fn in_kubernetes_mode_v1alpha2_tcp_routes_are_served_and_get_their_status() {
    use crate::kube_support::Cluster;
    let tcp = tcp_pod("kube-a").await;
    let (port, other) = (free_port(), free_port());
    let cluster = Cluster::new().await;
    cluster.apply(
        &[
            class("portico", OURS),
            service("echo", Some(tcp), None),
            gateway(&format!(
                "[{{name: tcp, port: {port}, protocol: TCP}}, {{name: other, port: {other}, protocol: TCP}}]"
            )),
            route("TCPRoute", "v1alpha2", "t", "{parentRefs: [{name: edge, sectionName: tcp}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}"),
            route("TCPRoute", "v1alpha2", "gone", "{parentRefs: [{name: edge, sectionName: other}], rules: [{backendRefs: [{name: missing, port: 7000}]}]}"),
        ]
        .concat(),
    );
    let _p = Portico::start_kube(&cluster, &[]).await;
    let conn = wait_connect(SocketAddr::from(([127, 0, 0, 1], port))).await;
    assert_eq!(conn.pod, "kube-a");
    let alpha = "gateway.networking.k8s.io/v1alpha2";
    let ours = |name: &str| {
        let route = cluster.api.get(alpha, "TCPRoute", Some("apps"), name);
        let parents = route
            .map(|r| r["status"]["parents"].clone())
            .unwrap_or(Value::Null);
        let ours = (parents.as_array().into_iter().flatten()).find(|p| p["controllerName"] == OURS);
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let conditions = ours
            .and_then(|p| p["conditions"].as_array().cloned())
            .unwrap_or_default();
        (conditions.iter())
            .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while ours("t") != SERVED {
        assert!(Instant::now() < deadline, "t: {:?}", ours("t"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        ours("gone"),
        [
            "Accepted=True/Accepted",
            "ResolvedRefs=False/BackendNotFound"
        ]
    );
}
