//! ListenerSets: accepted by their Gateway's `allowedListeners`, their listeners served on
//! the Gateway's load balancer, conflicts resolved by precedence, routes attached by a
//! parentRef of kind ListenerSet, and the verdicts.
#![allow(clippy::unwrap_used)]

mod support;

use portico_model::Protocol;
use portico_translate::gateway::Condition;
use portico_translate::{ObjectKey, Translation};

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: team}
spec: {ports: [{port: 80}]}
"#;

/// Gateway `shop/edge` with an HTTP listener `web` for `gw.example.com` on 80 and
/// `allowedListeners.namespaces.from: <from>` (none: the field left out).
fn gateway(from: Option<&str>) -> String {
    let allowed = from.map_or(String::new(), |f| {
        format!("  allowedListeners: {{namespaces: {{from: {f}}}}}\n")
    });
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  gatewayClassName: portico\n{allowed}  listeners: [{{name: web, port: 80, protocol: HTTP, hostname: gw.example.com}}]\n"
    )
}

/// ListenerSet `namespace/name` of Gateway `shop/edge`, created at `created`.
fn set(namespace: &str, name: &str, created: &str, listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: {name}, namespace: {namespace}, creationTimestamp: '{created}'}}\nspec:\n  parentRef: {{name: edge, namespace: shop}}\n  listeners: {listeners}\n"
    )
}

/// HTTPRoute `namespace/name` to Service `app` with `parentRefs`.
fn route(namespace: &str, name: &str, parents: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{parentRefs: {parents}, rules: [{{backendRefs: [{{name: app, port: 80}}]}}]}}\n"
    )
}

const SET_HTTP: &str = "[{name: extra, port: 80, protocol: HTTP, hostname: set.example.com}]";

fn translate_docs(docs: &[String]) -> Translation {
    support::translate_yaml(&format!("{BASE}{}", docs.concat()))
}

fn conditions(c: &[Condition]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

fn set_conditions(t: &Translation, namespace: &str, name: &str) -> Vec<String> {
    conditions(&t.gateways.listener_sets[&ObjectKey::new(namespace, name)].conditions)
}

fn route_conditions(t: &Translation, namespace: &str, name: &str) -> Vec<String> {
    conditions(&t.gateways.routes[&ObjectKey::new(namespace, name)][0].conditions)
}

/// The hosts of the policies of the Gateway's HTTP listener, in order.
fn http_hosts(t: &Translation) -> Vec<String> {
    let lb = (t.model.load_balancers.iter()).find(|lb| lb.name == "gateway/shop/edge");
    let http = (lb.unwrap().listeners.iter()).find(|l| l.protocol == Protocol::Http);
    let policies = &http.unwrap().policies;
    let hosts = policies.iter().flat_map(|p| &p.rules);
    let hosts = hosts.filter(|r| r.rule_type == portico_model::RuleType::HostName);
    let mut hosts: Vec<String> = hosts.map(|r| r.value.clone()).collect();
    hosts.dedup();
    hosts
}

fn attached_sets(t: &Translation) -> Option<i32> {
    t.gateways.gateways[&ObjectKey::new("shop", "edge")].attached_listener_sets
}

#[test]
fn a_gateway_takes_no_listener_set_unless_its_allowed_listeners_say_so() {
    let t = translate_docs(&[
        gateway(None),
        set("shop", "more", "2026-01-01T00:00:00Z", SET_HTTP),
    ]);
    assert_eq!(
        set_conditions(&t, "shop", "more"),
        ["Accepted=false/NotAllowed", "Programmed=false/NotAllowed"]
    );
    assert!(
        t.gateways.listener_sets[&ObjectKey::new("shop", "more")]
            .listeners
            .is_empty()
    );
    assert_eq!(attached_sets(&t), Some(0));
    let t = translate_docs(&[
        gateway(Some("None")),
        set("shop", "more", "2026-01-01T00:00:00Z", SET_HTTP),
    ]);
    assert_eq!(
        set_conditions(&t, "shop", "more")[0],
        "Accepted=false/NotAllowed"
    );
}

#[test]
fn same_takes_listener_sets_of_the_gateways_namespace_only_and_all_takes_any() {
    let docs = |from: &str| {
        vec![
            gateway(Some(from)),
            set("shop", "near", "2026-01-01T00:00:00Z", SET_HTTP),
            set(
                "team",
                "far",
                "2026-01-01T00:00:00Z",
                "[{name: far, port: 80, protocol: HTTP, hostname: far.example.com}]",
            ),
        ]
    };
    let t = translate_docs(&docs("Same"));
    assert_eq!(
        set_conditions(&t, "shop", "near"),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    assert_eq!(
        set_conditions(&t, "team", "far")[0],
        "Accepted=false/NotAllowed"
    );
    assert_eq!(attached_sets(&t), Some(1));
    let t = translate_docs(&docs("All"));
    assert_eq!(
        set_conditions(&t, "team", "far")[0],
        "Accepted=true/Accepted"
    );
    assert_eq!(attached_sets(&t), Some(2));
    // The Gateway's status lists its own listeners only.
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(g.listeners.len(), 1);
}

#[test]
fn a_route_attached_to_a_listener_sets_listener_is_served_on_the_gateways_port_for_its_hostname() {
    let t = translate_docs(&[
        gateway(Some("All")),
        set("team", "more", "2026-01-01T00:00:00Z", SET_HTTP),
        route(
            "team",
            "r",
            "[{group: gateway.networking.k8s.io, kind: ListenerSet, name: more, sectionName: extra}]",
        ),
    ]);
    assert_eq!(
        route_conditions(&t, "team", "r"),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    assert_eq!(http_hosts(&t), ["set.example.com"]);
    let set = &t.gateways.listener_sets[&ObjectKey::new("team", "more")];
    assert_eq!(set.listeners[0].name, "extra");
    assert_eq!(set.listeners[0].attached_routes, 1);
    let lb = (t.model.load_balancers.iter()).find(|lb| lb.name == "gateway/shop/edge");
    assert_eq!(lb.unwrap().listeners[0].port, 80);
}

#[test]
fn a_route_names_a_listener_set_listener_by_section_name_and_a_gateway_parent_ref_reaches_only_the_gateways_own()
 {
    let t = translate_docs(&[
        gateway(Some("All")),
        set("team", "more", "2026-01-01T00:00:00Z", SET_HTTP),
        route(
            "team",
            "wrong",
            "[{kind: ListenerSet, name: more, sectionName: web}]",
        ),
        route("shop", "gw", "[{name: edge}]"),
    ]);
    assert_eq!(
        route_conditions(&t, "team", "wrong")[0],
        "Accepted=false/NoMatchingParent"
    );
    assert_eq!(http_hosts(&t), ["gw.example.com"]);
    let set = &t.gateways.listener_sets[&ObjectKey::new("team", "more")];
    assert_eq!(set.listeners[0].attached_routes, 0);
}

#[test]
fn a_listener_sets_listener_admits_routes_of_its_own_namespace_by_default() {
    let t = translate_docs(&[
        gateway(Some("All")),
        set("team", "more", "2026-01-01T00:00:00Z", SET_HTTP),
        route(
            "shop",
            "r",
            "[{kind: ListenerSet, name: more, namespace: team}]",
        ),
    ]);
    assert_eq!(
        route_conditions(&t, "shop", "r")[0],
        "Accepted=false/NotAllowedByListeners"
    );
}

#[test]
fn conflicting_listeners_lose_to_the_gateways_then_to_the_older_listener_set() {
    let same_host = |name: &str| {
        format!("[{{name: {name}, port: 80, protocol: HTTP, hostname: gw.example.com}}]")
    };
    let twin = "[{name: twin, port: 80, protocol: HTTP, hostname: twin.example.com}]";
    let t = translate_docs(&[
        gateway(Some("All")),
        set("team", "clash", "2026-01-01T00:00:00Z", &same_host("clash")),
        set("team", "young", "2026-03-01T00:00:00Z", twin),
        set("team", "old", "2026-02-01T00:00:00Z", twin),
        set(
            "shop",
            "tcp",
            "2026-04-01T00:00:00Z",
            "[{name: raw, port: 80, protocol: TCP}]",
        ),
    ]);
    let listener = |ns: &str, name: &str| {
        let set = &t.gateways.listener_sets[&ObjectKey::new(ns, name)];
        conditions(&set.listeners[0].conditions)[3].clone()
    };
    assert_eq!(
        listener("team", "clash"),
        "Conflicted=true/HostnameConflict"
    );
    assert_eq!(listener("team", "old"), "Conflicted=false/NoConflicts");
    assert_eq!(
        listener("team", "young"),
        "Conflicted=true/HostnameConflict"
    );
    assert_eq!(listener("shop", "tcp"), "Conflicted=true/ProtocolConflict");
    let g = &t.gateways.gateways[&ObjectKey::new("shop", "edge")];
    assert_eq!(
        conditions(&g.listeners[0].conditions)[3],
        "Conflicted=false/NoConflicts"
    );
    assert_eq!(
        set_conditions(&t, "team", "clash"),
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
}

#[test]
fn a_listener_set_of_a_gateway_that_is_not_accepted_is_not_either() {
    let gateway = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: shop}\nspec:\n  gatewayClassName: portico\n  allowedListeners: {namespaces: {from: All}}\n  listeners: [{name: odd, port: 80, protocol: SCTP}]\n";
    let t = translate_docs(&[
        gateway.to_owned(),
        set("shop", "more", "2026-01-01T00:00:00Z", SET_HTTP),
    ]);
    assert_eq!(
        set_conditions(&t, "shop", "more")[0],
        "Accepted=false/ParentNotAccepted"
    );
}

#[test]
fn a_selector_takes_listener_sets_of_the_namespaces_whose_labels_it_matches() {
    let gateway = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: shop}\nspec:\n  gatewayClassName: portico\n  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {tier: edge}}}}\n  listeners: [{name: web, port: 80, protocol: HTTP, hostname: gw.example.com}]\n";
    let namespaces = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {tier: edge}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: lab, labels: {tier: test}}\n";
    let t = translate_docs(&[
        gateway.to_owned(),
        namespaces.to_owned(),
        set("team", "picked", "2026-01-01T00:00:00Z", SET_HTTP),
        set(
            "lab",
            "left",
            "2026-01-01T00:00:00Z",
            "[{name: l, port: 80, protocol: HTTP, hostname: lab.example.com}]",
        ),
    ]);
    assert_eq!(
        set_conditions(&t, "team", "picked")[0],
        "Accepted=true/Accepted"
    );
    assert_eq!(
        set_conditions(&t, "lab", "left")[0],
        "Accepted=false/NotAllowed"
    );
}

#[test]
fn a_listener_sets_certificates_are_of_its_namespace_unless_a_grant_from_listener_sets_says_so() {
    let secrets = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: team}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==, tls.key: eA==}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: gw-cert, namespace: shop}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==, tls.key: eA==}\n";
    let https = "[{name: own, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: cert}]}}, {name: theirs, port: 443, protocol: HTTPS, hostname: b.example.com, tls: {certificateRefs: [{name: gw-cert, namespace: shop}]}}]";
    let docs = |grant: &str| {
        vec![
            gateway(Some("All")),
            secrets.to_owned(),
            set("team", "tls", "2026-01-01T00:00:00Z", https),
            grant.to_owned(),
        ]
    };
    let resolved = |t: &Translation| -> Vec<String> {
        let set = &t.gateways.listener_sets[&ObjectKey::new("team", "tls")];
        (set.listeners.iter())
            .map(|l| conditions(&l.conditions)[2].clone())
            .collect()
    };
    let t = translate_docs(&docs(""));
    assert_eq!(
        resolved(&t),
        [
            "ResolvedRefs=true/ResolvedRefs",
            "ResolvedRefs=false/RefNotPermitted"
        ]
    );
    let gateway_grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: shop}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: team}]\n  to: [{group: '', kind: Secret}]\n";
    let t = translate_docs(&docs(gateway_grant));
    assert_eq!(resolved(&t)[1], "ResolvedRefs=false/RefNotPermitted");
    let set_grant = gateway_grant.replace("kind: Gateway,", "kind: ListenerSet,");
    let t = translate_docs(&docs(&set_grant));
    assert_eq!(resolved(&t)[1], "ResolvedRefs=true/ResolvedRefs");
}
