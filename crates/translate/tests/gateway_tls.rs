//! TLSRoute → SNI passthrough (and, on TLS listeners of mode Terminate, SNI-routed termination)
//! on the Gateway's TERMINATED_HTTPS listener, beside its HTTPS hosts on the same port, and the
//! routes' and listeners' verdicts.
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
kind: Secret
metadata: {name: term-cert, namespace: shop}
type: kubernetes.io/tls
data: {tls.crt: eA==, tls.key: eA==}
---
apiVersion: v1
kind: Secret
metadata: {name: far-cert, namespace: backends}
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
    entries(t, false)
}

/// The entries of the HTTPS listener that terminate TLS (TLS listeners of mode Terminate) as
/// `host -> service (route)`.
fn terminated(t: &Translation) -> Vec<String> {
    entries(t, true)
}

fn entries(t: &Translation, terminate: bool) -> Vec<String> {
    let lb = own(t);
    let https = (lb.listeners.iter()).find(|l| l.protocol == Protocol::TerminatedHttps);
    let tls = https.unwrap().tls.as_ref().unwrap();
    (tls.passthrough.iter())
        .filter(|p| p.terminate == terminate)
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
fn tls_listeners_take_only_tls_routes_in_either_mode() {
    let listeners = "[{name: tls, port: 443, protocol: TLS, hostname: a.example.com, tls: {mode: Passthrough}}, {name: term, port: 443, protocol: TLS, hostname: b.example.com, tls: {mode: Terminate, certificateRefs: [{name: cert}]}}]";
    let http_route = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: h, namespace: shop}\nspec: {parentRefs: [{name: edge, sectionName: tls}]}\n";
    let t = translate_docs(&[gateway("portico", listeners), http_route.to_owned()]);
    let h = &t.gateways.routes[&ObjectKey::new("shop", "h")][0];
    assert_eq!(
        conditions(&h.conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(
        conditions(&g.listeners[1].conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs",
            "Conflicted=false/NoConflicts"
        ]
    );
    let kinds: Vec<&str> = (g.listeners[1].supported_kinds.iter())
        .map(|k| k.1.as_str())
        .collect();
    assert_eq!(kinds, ["TLSRoute"]);
    // A TLS-only Gateway still gets its TERMINATED_HTTPS listener, with the Terminate
    // listener's certificate for its hostname.
    let https = &own(&t).listeners[0];
    assert_eq!(https.protocol, Protocol::TerminatedHttps);
    let sni = &https.tls.as_ref().unwrap().sni;
    assert_eq!(sni.len(), 1);
    assert_eq!(sni[0].host, "b.example.com");
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

/// An HTTPS listener, a Passthrough and a Terminate TLS listener on one port.
const THREE: &str = "[{name: https, port: 443, protocol: HTTPS, hostname: web.example.com, tls: {certificateRefs: [{name: cert}]}}, {name: pass, port: 443, protocol: TLS, hostname: '*.pass.example.com', tls: {mode: Passthrough}}, {name: term, port: 443, protocol: TLS, hostname: '*.term.example.com', tls: {mode: Terminate, certificateRefs: [{name: term-cert}]}}]";

#[test]
fn a_terminate_listener_terminates_its_routes_hosts_beside_https_and_passthrough_on_one_port() {
    let t = translate_docs(&[
        gateway("portico", THREE),
        route(
            "pass",
            "2026-01-01T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: pass}], hostnames: [db.pass.example.com], rules: [{backendRefs: [{name: tls-backend, port: 8443}]}]}",
        ),
        route(
            "term",
            "2026-01-02T00:00:00Z",
            "{parentRefs: [{name: edge}], hostnames: [a.term.example.com, '*.x.term.example.com', other.example.org], rules: [{backendRefs: [{name: other, port: 8443}]}]}",
        ),
        route(
            "far",
            "2026-01-03T00:00:00Z",
            "{parentRefs: [{name: edge, sectionName: term}], hostnames: [b.term.example.com], rules: [{backendRefs: [{name: db, namespace: backends, port: 8443}]}]}",
        ),
    ]);
    assert_eq!(
        passthrough(&t),
        ["db.pass.example.com -> tls-backend (pass)"]
    );
    // The route's hostnames meet the listener's; one outside it is not served.
    assert_eq!(
        terminated(&t),
        [
            "*.x.term.example.com -> other (term)",
            "a.term.example.com -> other (term)"
        ]
    );
    assert_eq!(route_conditions(&t, "term"), SERVED);
    assert_eq!(
        route_conditions(&t, "far"),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/RefNotPermitted"
        ]
    );
    // One TERMINATED_HTTPS listener: the HTTPS host's certificate and the Terminate
    // listener's; no isolation policy for the TLS hosts (their streams are not HTTP).
    let lb = own(&t);
    assert_eq!(lb.listeners.len(), 1);
    let https = &lb.listeners[0];
    let sni: Vec<(&str, &str)> = (https.tls.as_ref().unwrap().sni.iter())
        .map(|s| (s.host.as_str(), s.certificate.name.as_str()))
        .collect();
    assert_eq!(
        sni,
        [
            ("*.term.example.com", "term-cert"),
            ("web.example.com", "cert")
        ]
    );
    // The Terminate listener's other names are refused, not served as HTTPS.
    assert_eq!(https.tls.as_ref().unwrap().refused, ["*.term.example.com"]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let listeners: Vec<_> = (g.listeners.iter())
        .map(|l| {
            (
                l.name.as_str(),
                l.attached_routes,
                conditions(&l.conditions)[0].clone(),
            )
        })
        .collect();
    assert_eq!(
        listeners,
        [
            ("https", 0, "Accepted=true/Accepted".to_owned()),
            ("pass", 1, "Accepted=true/Accepted".to_owned()),
            ("term", 2, "Accepted=true/Accepted".to_owned()),
        ]
    );
    assert_eq!(conditions(&g.conditions)[0], "Accepted=true/Accepted");
}

#[test]
fn a_terminate_listener_needs_certificates_it_may_use() {
    let listeners = |refs: &str| {
        format!(
            "[{{name: term, port: 443, protocol: TLS, hostname: a.example.com, tls: {{mode: Terminate, certificateRefs: [{refs}]}}}}]"
        )
    };
    let resolved = |t: &Translation| {
        let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
        conditions(&g.listeners[0].conditions)[2].clone()
    };
    let none = translate_docs(&[gateway("portico", &listeners(""))]);
    assert_eq!(resolved(&none), "ResolvedRefs=false/InvalidCertificateRef");
    let message = |t: &Translation| {
        (t.diagnostics.iter())
            .any(|d| d.field == "spec.listeners[0]" && d.message.contains("certificateRefs"))
    };
    assert!(message(&none), "{:?}", none.diagnostics);
    let far = "{name: far-cert, namespace: backends}";
    let t = translate_docs(&[gateway("portico", &listeners(far))]);
    assert_eq!(resolved(&t), "ResolvedRefs=false/RefNotPermitted");
    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: backends}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: shop}]\n  to: [{group: '', kind: Secret}]\n";
    let t = translate_docs(&[gateway("portico", &listeners(far)), grant.to_owned()]);
    assert_eq!(resolved(&t), "ResolvedRefs=true/ResolvedRefs");
    let sni = &own(&t).listeners[0].tls.as_ref().unwrap().sni;
    assert_eq!(sni[0].certificate.namespace, "backends");
}

#[test]
fn haproxy_serves_a_terminate_listener_and_another_provider_refuses_it_and_keeps_the_others() {
    let term = route(
        "term",
        "2026-01-02T00:00:00Z",
        "{parentRefs: [{name: edge, sectionName: term}], hostnames: [a.term.example.com], rules: [{backendRefs: [{name: other, port: 8443}]}]}",
    );
    let t = translate_docs(&[gateway("hap", THREE), term.clone()]);
    assert_eq!(terminated(&t), ["a.term.example.com -> other (term)"]);
    assert_eq!(route_conditions(&t, "term"), SERVED);

    let class = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: elsewhere, annotations: {portico.dev/provider: nginx}}\nspec: {controllerName: portico.dev/gateway-controller}\n";
    let t = translate_docs(&[class.to_owned(), gateway("elsewhere", THREE), term]);
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    let accepted: Vec<String> = (g.listeners.iter())
        .map(|l| conditions(&l.conditions)[0].clone())
        .collect();
    assert_eq!(
        accepted,
        [
            "Accepted=true/Accepted",
            "Accepted=false/UnsupportedProtocol",
            "Accepted=false/UnsupportedProtocol"
        ]
    );
    assert_eq!(
        route_conditions(&t, "term")[0],
        "Accepted=false/NotAllowedByListeners"
    );
    let named = t.diagnostics.iter().find(|d| {
        d.object.kind == "Gateway"
            && d.object.name == "edge"
            && d.field == "spec.listeners[2]"
            && d.message.contains("tls.mode Terminate")
    });
    assert!(named.is_some(), "{:?}", t.diagnostics);
}
