//! TLSRoute → SNI passthrough on the Gateway's TERMINATED_HTTPS listener, beside its HTTPS
//! hosts on the same port, and the routes' and listeners' verdicts.
#![allow(clippy::unwrap_used)]

mod support;

use portico_model::{LoadBalancer, Protocol};
use portico_translate::gateway::Condition;
use portico_translate::{ObjectKey, Translation};

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hap, annotations: {portico.dev/provider: haproxy}}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: v1
kind: Secret
metadata: {name: cert, namespace: shop}
type: kubernetes.io/tls
data: {tls.crt: eA==, tls.key: eA==}
---
apiVersion: v1
kind: Service
metadata: {name: tls-backend, namespace: shop}
spec: {ports: [{port: 8443}]}
---
apiVersion: v1
kind: Service
metadata: {name: other, namespace: shop}
spec: {ports: [{port: 8443}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: backends}
spec: {ports: [{port: 8443}]}
"#;

/// An HTTPS listener for `web.example.com` and a TLS passthrough listener for
/// `*.example.com`, both on 443.
const SHARED: &str = "[{name: https, port: 443, protocol: HTTPS, hostname: web.example.com, tls: {certificateRefs: [{name: cert}]}}, {name: tls, port: 443, protocol: TLS, hostname: '*.example.com', tls: {mode: Passthrough}}]";

fn gateway(class: &str, listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  gatewayClassName: {class}\n  listeners: {listeners}\n"
    )
}

fn route(name: &str, created: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\nmetadata: {{name: {name}, namespace: shop, creationTimestamp: '{created}'}}\nspec: {spec}\n"
    )
}

fn translate_docs(docs: &[String]) -> Translation {
    support::translate_yaml(&format!("{BASE}{}", docs.concat()))
}

fn own(t: &Translation) -> &LoadBalancer {
    let found = (t.model.load_balancers.iter()).find(|lb| lb.name == "gateway/shop/edge");
    found.expect("the Gateway's load balancer")
}

/// The passthrough entries of the HTTPS listener as `host -> service (route)`.
fn passthrough(t: &Translation) -> Vec<String> {
    let lb = own(t);
    let https = (lb.listeners.iter()).find(|l| l.protocol == Protocol::TerminatedHttps);
    let tls = https.unwrap().tls.as_ref().unwrap();
    (tls.passthrough.iter())
        .map(|p| {
            let pool = lb.pool(p.pool).unwrap();
            format!("{} -> {} ({})", p.host, pool.service.name, p.source.name)
        })
        .collect()
}

fn conditions(c: &[Condition]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

fn route_conditions(t: &Translation, name: &str) -> Vec<String> {
    conditions(&t.gateways.tls_routes[&ObjectKey::new("shop", name)][0].conditions)
}

const SERVED: [&str; 2] = ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"];

#[test]
fn a_tls_route_passes_its_hosts_through_beside_the_terminated_https_host_on_one_port() {
    let t = translate_docs(&[
        gateway("portico", SHARED),
        route(
            "db",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: tls}], hostnames: [db.example.com, '*.db.example.com'], rules: [{backendRefs: [{name: tls-backend, port: 8443}]}]}",
        ),
    ]);
    assert_eq!(
        passthrough(&t),
        [
            "*.db.example.com -> tls-backend (db)",
            "db.example.com -> tls-backend (db)"
        ]
    );
    let lb = own(&t);
    assert_eq!(
        lb.listeners.len(),
        1,
        "one TERMINATED_HTTPS listener on 443"
    );
    let tls = lb.listeners[0].tls.as_ref().unwrap();
    assert_eq!(lb.listeners[0].port, 443);
    assert_eq!(tls.sni[0].host, "web.example.com");
    assert_eq!(route_conditions(&t, "db"), SERVED);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let listeners: Vec<_> = (g.listeners.iter())
        .map(|l| {
            let kinds: Vec<&str> = l.supported_kinds.iter().map(|k| k.1.as_str()).collect();
            (
                l.name.as_str(),
                l.attached_routes,
                kinds,
                conditions(&l.conditions),
            )
        })
        .collect();
    let fine = [
        "Accepted=true/Accepted",
        "Programmed=true/Programmed",
        "ResolvedRefs=true/ResolvedRefs",
        "Conflicted=false/NoConflicts",
    ];
    assert_eq!(
        listeners,
        [
            (
                "https",
                0,
                vec!["HTTPRoute", "GRPCRoute"],
                fine.map(String::from).to_vec()
            ),
            ("tls", 1, vec!["TLSRoute"], fine.map(String::from).to_vec()),
        ]
    );
}

#[test]
fn hostnames_intersect_with_the_listeners_and_a_route_outside_it_is_not_attached() {
    let t = translate_docs(&[
        gateway("portico", SHARED),
        route(
            "wide",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: ['*.com'], rules: [{backendRefs: [{name: tls-backend, port: 8443}]}]}",
        ),
        route(
            "elsewhere",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [db.example.net], rules: [{backendRefs: [{name: tls-backend, port: 8443}]}]}",
        ),
    ]);
    // `*.com` meets `*.example.com`: the listener's, the narrower, is passed through.
    assert_eq!(passthrough(&t), ["*.example.com -> tls-backend (wide)"]);
    assert_eq!(
        route_conditions(&t, "elsewhere"),
        [
            "Accepted=false/NoMatchingListenerHostname",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
}

#[test]
fn on_a_host_two_routes_name_the_older_route_is_served() {
    let spec = |backend: &str| {
        format!(
            "{{parentRefs: [{{name: edge}}], hostnames: [db.example.com], rules: [{{backendRefs: [{{name: {backend}, port: 8443}}]}}]}}"
        )
    };
    let t = translate_docs(&[
        gateway("portico", SHARED),
        // Named so that name order is the other way round.
        route("a-young", "2026-02-01T00:00:00Z", &spec("other")),
        route("z-old", "2026-01-01T00:00:00Z", &spec("tls-backend")),
    ]);
    assert_eq!(passthrough(&t), ["db.example.com -> tls-backend (z-old)"]);
}

#[test]
fn a_missing_service_and_a_forbidden_namespace_are_unresolved_and_pass_nothing_through() {
    let t = translate_docs(&[
        gateway("portico", SHARED),
        route(
            "missing",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [a.example.com], rules: [{backendRefs: [{name: nowhere, port: 8443}]}]}",
        ),
        route(
            "forbidden",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [b.example.com], rules: [{backendRefs: [{name: db, namespace: backends, port: 8443}]}]}",
        ),
    ]);
    assert_eq!(passthrough(&t), Vec::<String>::new());
    assert_eq!(
        route_conditions(&t, "missing"),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
    assert_eq!(
        route_conditions(&t, "forbidden"),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/RefNotPermitted"
        ]
    );
    // A ReferenceGrant from TLSRoutes of `shop` lets it through.
    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: backends}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: TLSRoute, namespace: shop}]\n  to: [{group: '', kind: Service}]\n";
    let t = translate_docs(&[
        gateway("portico", SHARED),
        grant.to_owned(),
        route(
            "forbidden",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [b.example.com], rules: [{backendRefs: [{name: db, namespace: backends, port: 8443}]}]}",
        ),
    ]);
    assert_eq!(passthrough(&t), ["b.example.com -> db (forbidden)"]);
    assert_eq!(route_conditions(&t, "forbidden"), SERVED);
}

#[test]
fn several_weighted_backends_are_refused_rather_than_served_as_one() {
    let t = translate_docs(&[
        gateway("portico", SHARED),
        route(
            "split",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [db.example.com], rules: [{backendRefs: [{name: tls-backend, port: 8443, weight: 3}, {name: other, port: 8443}]}]}",
        ),
        route(
            "zero",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [z.example.com], rules: [{backendRefs: [{name: tls-backend, port: 8443, weight: 0}, {name: other, port: 8443}]}]}",
        ),
    ]);
    assert_eq!(passthrough(&t), ["z.example.com -> other (zero)"]);
    assert_eq!(
        route_conditions(&t, "split"),
        [
            "Accepted=false/UnsupportedValue",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
}

#[test]
fn tls_listeners_take_only_tls_routes_and_terminate_mode_is_refused() {
    let listeners = "[{name: tls, port: 443, protocol: TLS, hostname: a.example.com, tls: {mode: Passthrough}}, {name: term, port: 8443, protocol: TLS, hostname: b.example.com, tls: {mode: Terminate, certificateRefs: [{name: cert}]}}]";
    let http_route = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: h, namespace: shop}\nspec: {parentRefs: [{name: edge, sectionName: tls}]}\n";
    let t = translate_docs(&[gateway("portico", listeners), http_route.to_owned()]);
    let h = &t.gateways.routes[&ObjectKey::new("shop", "h")][0];
    assert_eq!(
        conditions(&h.conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(
        conditions(&g.listeners[1].conditions)[0],
        "Accepted=false/UnsupportedValue"
    );
    // A TLS-only Gateway still gets its TERMINATED_HTTPS listener (without certificates).
    assert_eq!(own(&t).listeners[0].protocol, Protocol::TerminatedHttps);
}

#[test]
fn a_gateway_served_by_haproxy_passes_tls_through_as_the_proxy_does() {
    let t = translate_docs(&[
        gateway("hap", SHARED),
        route(
            "db",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: tls}], hostnames: [db.example.com], rules: [{backendRefs: [{name: tls-backend, port: 8443}]}]}",
        ),
    ]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(
        conditions(&g.listeners[1].conditions)[0],
        "Accepted=true/Accepted"
    );
    assert_eq!(route_conditions(&t, "db")[0], "Accepted=true/Accepted");
    assert_eq!(passthrough(&t).len(), 1, "{:?}", passthrough(&t));
    let refused =
        (t.diagnostics.iter()).any(|d| d.message.contains("does not serve TLS passthrough"));
    assert!(!refused, "{:?}", t.diagnostics);
}

#[test]
fn https_and_tls_listeners_share_a_port_but_not_a_hostname_nor_another_port() {
    let listeners = "[{name: https, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: cert}]}}, {name: tls, port: 443, protocol: TLS, hostname: a.example.com, tls: {mode: Passthrough}}, {name: other, port: 8443, protocol: TLS, hostname: b.example.com, tls: {mode: Passthrough}}]";
    let t = translate_docs(&[gateway("portico", listeners)]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let verdict = |i: usize| conditions(&g.listeners[i].conditions);
    assert_eq!(verdict(0)[3], "Conflicted=true/HostnameConflict");
    assert_eq!(verdict(1)[3], "Conflicted=true/HostnameConflict");
    assert_eq!(verdict(2)[0], "Accepted=false/PortUnavailable");
}
