//! TCPRoute and UDPRoute → the Gateway's `l4` load balancer, and their verdicts.
#![allow(clippy::unwrap_used)]

mod support;

use portico_model::{LoadBalancer, PolicyAction, Protocol};
use portico_translate::gateway::Condition;
use portico_translate::{Allocations, Config, ObjectKey, Translation, assign_addresses, translate};

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec: {ports: [{port: 7000}, {port: 7001, protocol: UDP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
ports: [{port: 7000}, {port: 7001, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: canary, namespace: shop}
spec: {ports: [{port: 7000}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: backends}
spec: {ports: [{port: 5432}]}
"#;

/// A Gateway `edge` in `shop` with these listeners.
fn gateway(listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  gatewayClassName: portico\n  addresses: [{{value: 127.0.0.9}}]\n  listeners: {listeners}\n"
    )
}

fn route(kind: &str, name: &str, created: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: {kind}\nmetadata: {{name: {name}, namespace: shop, creationTimestamp: '{created}'}}\nspec: {spec}\n"
    )
}

fn translate_docs(docs: &[String]) -> Translation {
    support::translate_yaml(&format!("{BASE}{}", docs.concat()))
}

fn lb<'a>(t: &'a Translation, name: &str) -> &'a LoadBalancer {
    let found = t.model.load_balancers.iter().find(|lb| lb.name == name);
    found.unwrap_or_else(|| panic!("no load balancer {name}"))
}

fn conditions(c: &[Condition]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

/// Each listener of the `l4` load balancer as `TCP:port -> pool*weight+…`.
fn l4_listeners(t: &Translation) -> Vec<String> {
    let lb = lb(t, "gateway/shop/edge/l4");
    let pool = |id| lb.pool(id).map(|p| p.service.name.clone()).unwrap();
    (lb.listeners.iter())
        .map(|l| {
            let action = match (l.default_pool, l.policies.first().map(|p| &p.action)) {
                (Some(id), _) => pool(id),
                (None, Some(PolicyAction::RedirectToPools { pools })) => (pools.iter())
                    .map(|s| format!("{}*{}", s.pool.map_or("refused".into(), pool), s.weight))
                    .collect::<Vec<_>>()
                    .join("+"),
                (None, None) => "refused".into(),
                other => format!("{other:?}"),
            };
            format!("{} -> {action}", l.name)
        })
        .collect()
}

const MIXED: &str = "[{name: http, port: 80, protocol: HTTP}, {name: tcp, port: 7000, protocol: TCP}, {name: udp, port: 7001, protocol: UDP}]";

#[test]
fn tcp_and_udp_routes_become_listeners_of_the_gateways_l4_load_balancer() {
    let t = translate_docs(&[
        gateway(MIXED),
        route(
            "TCPRoute",
            "t",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: tcp}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}",
        ),
        route(
            "UDPRoute",
            "u",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], rules: [{backendRefs: [{name: echo, port: 7001}]}]}",
        ),
    ]);
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> echo", "UDP:7001 -> echo"]);
    let l4 = lb(&t, "gateway/shop/edge/l4");
    assert_eq!(l4.provider, "l4");
    assert_eq!(l4.listeners[1].protocol, Protocol::Udp);
    let pool = l4.pool(l4.listeners[0].default_pool.unwrap()).unwrap();
    assert_eq!(pool.members[0].address.to_string(), "10.0.0.1");
    // The Gateway's own load balancer keeps the HTTP listener, and the class's provider.
    let own = lb(&t, "gateway/shop/edge");
    assert_eq!(own.provider, "proxy");
    assert_eq!(own.listeners.len(), 1);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let listeners: Vec<_> = (g.listeners.iter())
        .map(|l| {
            (
                l.name.as_str(),
                l.attached_routes,
                l.supported_kinds[0].1.as_str(),
            )
        })
        .collect();
    assert_eq!(
        listeners,
        [
            ("http", 0, "HTTPRoute"),
            ("tcp", 1, "TCPRoute"),
            ("udp", 1, "UDPRoute")
        ]
    );
    assert_eq!(
        conditions(&g.conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    for (kind, verdicts) in [
        ("tcp", &t.gateways.tcp_routes),
        ("udp", &t.gateways.udp_routes),
    ] {
        let name = &kind[..1];
        let v = &verdicts[&ObjectKey::new("shop", name)];
        assert_eq!(
            conditions(&v[0].conditions),
            ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
        );
    }
}

#[test]
fn the_l4_load_balancer_takes_the_gateways_addresses_from_the_pool() {
    let yaml = format!(
        "{BASE}{}{}",
        gateway(MIXED).replace("  addresses: [{value: 127.0.0.9}]\n", ""),
        route(
            "TCPRoute",
            "t",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}"
        ),
    );
    let objects = support::load(&yaml);
    let config = Config {
        vip_pool: Some("10.9.0.0/24".parse().unwrap()),
        fip_pool: Some("192.0.2.0/28".parse().unwrap()),
        ..Config::default()
    };
    let mut model = translate(&objects, &config).model;
    let (allocations, problems) =
        assign_addresses(&mut model, &objects, &config, &Allocations::new());
    assert!(problems.is_empty(), "{problems:?}");
    let by_name = |name: &str| {
        model
            .load_balancers
            .iter()
            .find(|lb| lb.name == name)
            .unwrap()
    };
    let (own, l4) = (
        by_name("gateway/shop/edge"),
        by_name("gateway/shop/edge/l4"),
    );
    assert!(own.vip.is_some() && own.floating_ip.is_some());
    assert_eq!((l4.vip, l4.floating_ip), (own.vip, own.floating_ip));
    // One allocation: the Gateway's.
    assert_eq!(allocations.len(), 1);
}

#[test]
fn a_gateway_with_tcp_listeners_only_still_has_its_own_load_balancer_for_the_address() {
    let t = translate_docs(&[
        gateway("[{name: tcp, port: 7000, protocol: TCP}]"),
        route(
            "TCPRoute",
            "t",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}",
        ),
    ]);
    let own = lb(&t, "gateway/shop/edge");
    assert!(own.listeners.is_empty());
    // No L7 provider runs a process for it (haproxy would not start without a listener).
    assert_eq!(own.provider, "l4");
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> echo"]);
}

#[test]
fn a_missing_service_is_backend_not_found_and_refuses_its_share_only() {
    let t = translate_docs(&[
        gateway(MIXED),
        route(
            "TCPRoute",
            "t",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, port: 7000}], rules: [{backendRefs: [{name: echo, port: 7000, weight: 3}, {name: gone, port: 7000}, {name: canary, port: 7000, weight: 0}]}]}",
        ),
    ]);
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> echo*3+refused*1+canary*0"]);
    let v = &t.gateways.tcp_routes[&ObjectKey::new("shop", "t")];
    assert_eq!(
        conditions(&v[0].conditions),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
    let d = t
        .diagnostics
        .iter()
        .find(|d| d.object.kind == "TCPRoute")
        .unwrap();
    assert_eq!(d.field, "spec.rules[0].backendRefs[1]");
}

#[test]
fn another_namespace_without_a_reference_grant_is_ref_not_permitted() {
    let spec = "{parentRefs: [{name: edge}], rules: [{backendRefs: [{name: db, namespace: backends, port: 5432}]}]}";
    let t = translate_docs(&[
        gateway(MIXED),
        route("TCPRoute", "t", "2026-01-01T00:00:00Z", spec),
    ]);
    let v = &t.gateways.tcp_routes[&ObjectKey::new("shop", "t")];
    assert_eq!(
        conditions(&v[0].conditions)[1],
        "ResolvedRefs=false/RefNotPermitted"
    );
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> refused*1"]);
    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: backends}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: TCPRoute, namespace: shop}]\n  to: [{group: '', kind: Service}]\n";
    let t = translate_docs(&[
        gateway(MIXED),
        route("TCPRoute", "t", "2026-01-01T00:00:00Z", spec),
        grant.to_owned(),
    ]);
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> db"]);
}

#[test]
fn a_route_of_the_wrong_kind_or_listener_is_not_allowed() {
    let t = translate_docs(&[
        gateway(MIXED),
        // A TCPRoute naming only the UDP listener.
        route(
            "TCPRoute",
            "t",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: udp}], rules: [{backendRefs: [{name: echo, port: 7000}]}]}",
        ),
        route(
            "UDPRoute",
            "u",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, port: 9}], rules: [{backendRefs: [{name: echo, port: 7001}]}]}",
        ),
    ]);
    let v = &t.gateways.tcp_routes[&ObjectKey::new("shop", "t")];
    assert_eq!(
        conditions(&v[0].conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    let v = &t.gateways.udp_routes[&ObjectKey::new("shop", "u")];
    assert_eq!(
        conditions(&v[0].conditions)[0],
        "Accepted=false/NoMatchingParent"
    );
    assert!(
        !t.model
            .load_balancers
            .iter()
            .any(|lb| lb.name.ends_with("/l4"))
    );
}

#[test]
fn a_listener_whose_allowed_kinds_name_a_route_kind_of_another_protocol_has_invalid_route_kinds() {
    let t = translate_docs(&[gateway(
        "[{name: udp, port: 7001, protocol: UDP, allowedRoutes: {kinds: [{kind: TCPRoute}]}}]",
    )]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let resolved = &conditions(&g.listeners[0].conditions)[2];
    assert_eq!(resolved, "ResolvedRefs=false/InvalidRouteKinds");
    assert!(g.listeners[0].supported_kinds.is_empty());
}

#[test]
fn the_oldest_route_holds_a_tcp_listener_and_a_younger_one_is_not_allowed() {
    let spec = |backend: &str| {
        format!(
            "{{parentRefs: [{{name: edge, sectionName: tcp}}], rules: [{{backendRefs: [{{name: {backend}, port: 7000}}]}}]}}"
        )
    };
    let t = translate_docs(&[
        gateway(MIXED),
        route("TCPRoute", "young", "2026-02-01T00:00:00Z", &spec("canary")),
        route("TCPRoute", "old", "2026-01-01T00:00:00Z", &spec("echo")),
    ]);
    assert_eq!(l4_listeners(&t), ["TCP:7000 -> echo"]);
    let v = |name| conditions(&t.gateways.tcp_routes[&ObjectKey::new("shop", name)][0].conditions);
    assert_eq!(v("old")[0], "Accepted=true/Accepted");
    assert_eq!(v("young")[0], "Accepted=false/NotAllowedByListeners");
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(g.listeners[1].attached_routes, 1);
}

#[test]
fn tcp_and_udp_listeners_share_a_port_number_and_tcp_ones_conflict_with_http() {
    let t = translate_docs(&[gateway(
        "[{name: tcp, port: 53, protocol: TCP}, {name: udp, port: 53, protocol: UDP}, {name: http, port: 8080, protocol: HTTP}, {name: raw, port: 8080, protocol: TCP}, {name: tcp2, port: 54, protocol: TCP}]",
    )]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let conflicted: Vec<_> = (g.listeners.iter())
        .map(|l| conditions(&l.conditions)[3].clone())
        .collect();
    assert_eq!(
        conflicted,
        [
            "Conflicted=false/NoConflicts",
            "Conflicted=false/NoConflicts",
            "Conflicted=true/ProtocolConflict",
            "Conflicted=true/ProtocolConflict",
            "Conflicted=false/NoConflicts",
        ]
    );
    // Several TCP ports on one Gateway: each accepted.
    assert_eq!(
        conditions(&g.listeners[4].conditions)[0],
        "Accepted=true/Accepted"
    );
}
