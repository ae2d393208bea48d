//! The Gateway API → the model and the verdicts on each object.
#![allow(clippy::unwrap_used)]

mod support;

use portico_model::{CompareType, LoadBalancer, PolicyAction, RuleType, Severity};
use portico_translate::gateway::{Condition, Verdicts};
use portico_translate::{ObjectKey, Translation};
use support::translate_yaml;

const CLASSES: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
ports: [{port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec: {ports: [{port: 9090}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: backends}
spec: {ports: [{port: 5432}]}
"#;

fn gateway(name: &str, class: &str, listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  gatewayClassName: {class}\n  listeners: {listeners}\n"
    )
}

fn route(name: &str, namespace: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n"
    )
}

fn translate(docs: &[String]) -> Translation {
    translate_yaml(&format!("{CLASSES}{}", docs.concat()))
}

fn lb<'a>(t: &'a Translation, name: &str) -> &'a LoadBalancer {
    let found = t.model.load_balancers.iter().find(|lb| lb.name == name);
    found.unwrap_or_else(|| panic!("no load balancer {name}"))
}

/// `type=status/reason` of each condition.
fn conditions(conditions: &[Condition]) -> Vec<String> {
    let each = conditions.iter();
    each.map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

fn route_conditions(v: &Verdicts, namespace: &str, name: &str) -> Vec<Vec<String>> {
    let parents = &v.routes[&ObjectKey::new(namespace, name)];
    parents.iter().map(|p| conditions(&p.conditions)).collect()
}

/// Each policy of the first listener as `host path headers -> action`.
fn policies(lb: &LoadBalancer) -> Vec<String> {
    let pool_name = |id| lb.pool(id).map(|p| p.name.clone()).unwrap_or_default();
    lb.listeners[0]
        .policies
        .iter()
        .map(|p| {
            let mut parts = Vec::new();
            for r in &p.rules {
                parts.push(match (r.rule_type, r.compare_type) {
                    (RuleType::HostName, CompareType::WildcardSuffix) => format!("*.{}", r.value),
                    (RuleType::Path, CompareType::EqualTo) => format!("={}", r.value),
                    (RuleType::Header, _) => format!("{}:{}", r.key.as_deref().unwrap(), r.value),
                    (RuleType::Query, _) => format!("?{}={}", r.key.as_deref().unwrap(), r.value),
                    (RuleType::Method, _) => format!("{}!", r.value),
                    _ => r.value.clone(),
                });
            }
            let action = match &p.action {
                PolicyAction::RedirectToPool { pool } => pool_name(*pool),
                PolicyAction::Reject { status } => status.to_string(),
                PolicyAction::RedirectToPools { pools } => pools
                    .iter()
                    .map(|w| {
                        format!(
                            "{}*{}",
                            w.pool.map(pool_name).unwrap_or("500".into()),
                            w.weight
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("+"),
                other => format!("{other:?}"),
            };
            format!("{} -> {action}", parts.join(" "))
        })
        .collect()
}

const HTTP: &str = "[{name: http, port: 80, protocol: HTTP}]";

#[test]
fn a_gateway_of_our_class_becomes_a_load_balancer_with_its_routes_as_policies() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "web",
            "shop",
            "{parentRefs: [{name: gw}], hostnames: [shop.example.com], rules: [{matches: [{path: {type: Exact, value: /cart}}, {path: {value: /static}}], backendRefs: [{name: web, port: 8080}]}]}",
        ),
    ]);
    let lb = lb(&t, "gateway/shop/gw");
    assert_eq!(lb.origin.kind, "Gateway");
    assert_eq!(lb.provider, "proxy");
    assert_eq!(lb.listeners.len(), 1);
    assert_eq!(
        (lb.listeners[0].protocol, lb.listeners[0].port),
        (portico_model::Protocol::Http, 80)
    );
    // Longer paths first (these two never match the same request).
    assert_eq!(
        policies(lb),
        [
            "shop.example.com /static -> shop_web_8080",
            "shop.example.com =/cart -> shop_web_8080"
        ]
    );
    assert_eq!(lb.pools[0].members.len(), 1);
    let v = &t.gateways;
    assert_eq!(
        conditions(&v.classes["portico"]),
        ["Accepted=true/Accepted"]
    );
    let gw = &v.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(
        conditions(&gw.conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    assert_eq!(gw.listeners[0].attached_routes, 1);
    assert_eq!(
        conditions(&gw.listeners[0].conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs",
            "Conflicted=false/NoConflicts"
        ]
    );
    assert_eq!(
        route_conditions(v, "shop", "web"),
        [["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]]
    );
}

#[test]
fn another_controllers_class_gateways_and_routes_get_nothing() {
    let t = translate(&[
        gateway("theirs", "other", HTTP),
        route(
            "r",
            "shop",
            "{parentRefs: [{name: theirs}], rules: [{backendRefs: [{name: web, port: 8080}]}]}",
        ),
    ]);
    assert!(t.model.load_balancers.is_empty());
    let v = &t.gateways;
    assert!(!v.classes.contains_key("other"));
    assert!(v.gateways.is_empty() && v.routes.is_empty());
    assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics);
}

#[test]
fn hostnames_intersect_and_a_route_matching_no_listener_hostname_is_refused() {
    let listeners = "[{name: specific, port: 80, protocol: HTTP, hostname: very.specific.com}, {name: wild, port: 80, protocol: HTTP, hostname: '*.wildcard.io'}]";
    let t = translate(&[
        gateway("gw", "portico", listeners),
        route(
            "a",
            "shop",
            "{parentRefs: [{name: gw}], hostnames: ['*.specific.com', 'foo.wildcard.io', '*.bar.wildcard.io'], rules: [{backendRefs: [{name: web, port: 8080}]}]}",
        ),
        route(
            "none",
            "shop",
            "{parentRefs: [{name: gw}], hostnames: [specific.but.wrong.com, wildcard.io], rules: [{backendRefs: [{name: web, port: 8080}]}]}",
        ),
    ]);
    let lb = lb(&t, "gateway/shop/gw");
    assert_eq!(
        policies(lb),
        [
            "foo.wildcard.io / -> shop_web_8080",
            "very.specific.com / -> shop_web_8080",
            "*.bar.wildcard.io / -> shop_web_8080"
        ]
    );
    let v = &t.gateways;
    assert_eq!(
        route_conditions(v, "shop", "none")[0][0],
        "Accepted=false/NoMatchingListenerHostname"
    );
    let gw = &v.gateways[&ObjectKey::new("shop", "gw")];
    let attached: Vec<i32> = gw.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(attached, [1, 1], "only accepted routes count");
    let warning = t
        .diagnostics
        .iter()
        .find(|d| d.object.name == "none")
        .unwrap();
    assert_eq!(
        (warning.severity, warning.field.as_str()),
        (Severity::Warning, "spec.parentRefs[0]")
    );
}

#[test]
fn precedence_is_the_gateway_apis_across_routes() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "b-old",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /a}}], backendRefs: [{name: web, port: 8080}]}]}",
        ),
        route(
            "a-new",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /a}}], backendRefs: [{name: api, port: 9090}]}, {matches: [{path: {value: /a}, headers: [{name: X-Env, value: canary}]}], backendRefs: [{name: api, port: 9090}]}, {matches: [{path: {value: /a/b}}], backendRefs: [{name: api, port: 9090}]}]}",
        ),
        route(
            "c",
            "shop",
            "{parentRefs: [{name: gw}], hostnames: [x.example.com], rules: [{backendRefs: [{name: api, port: 9090}]}]}",
        ),
    ]);
    // Ties between whole routes: no creation timestamps, so by namespace/name ("a-new" first).
    assert_eq!(
        policies(lb(&t, "gateway/shop/gw")),
        [
            "x.example.com / -> shop_api_9090",
            "/a/b -> shop_api_9090",
            "/a x-env:canary -> shop_api_9090",
            "/a -> shop_api_9090",
            "/a -> shop_web_8080",
        ]
    );
    let older = "{name: b-old, namespace: shop, creationTimestamp: '2020-01-01T00:00:00Z'}";
    let newer = "{name: a-new, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}";
    let dated = |meta: &str, service: &str, port: u16| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {meta}\nspec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: {service}, port: {port}}}]}}]}}\n"
        )
    };
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        dated(newer, "api", 9090),
        dated(older, "web", 8080),
    ]);
    assert_eq!(
        policies(lb(&t, "gateway/shop/gw")),
        ["/ -> shop_web_8080", "/ -> shop_api_9090"],
        "the older route first"
    );
}

#[test]
fn backends_that_do_not_resolve_are_refused_and_answer_500_for_their_share() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "missing",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /m}}], backendRefs: [{name: nope, port: 80}]}]}",
        ),
        route(
            "kind",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /k}}], backendRefs: [{name: web, port: 8080, kind: ConfigMap}]}]}",
        ),
        route(
            "cross",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /c}}], backendRefs: [{name: web, port: 8080, weight: 3}, {name: db, namespace: backends, port: 5432}]}]}",
        ),
        route(
            "empty",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /e}}]}]}",
        ),
    ]);
    let v = &t.gateways;
    let resolved = |name| route_conditions(v, "shop", name)[0][1].clone();
    assert_eq!(resolved("missing"), "ResolvedRefs=false/BackendNotFound");
    assert_eq!(resolved("kind"), "ResolvedRefs=false/InvalidKind");
    assert_eq!(resolved("cross"), "ResolvedRefs=false/RefNotPermitted");
    assert_eq!(
        route_conditions(v, "shop", "missing")[0][0],
        "Accepted=true/Accepted",
        "the route is served"
    );
    assert_eq!(
        policies(lb(&t, "gateway/shop/gw")),
        [
            "/c -> shop_web_8080*3+500*1",
            "/e -> 500",
            "/k -> 500",
            "/m -> 500"
        ]
    );
    let warning = t
        .diagnostics
        .iter()
        .find(|d| d.object.name == "cross")
        .unwrap();
    assert_eq!(warning.field, "spec.rules[0].backendRefs[1]");
}

#[test]
fn a_reference_grant_lets_a_route_use_a_service_of_another_namespace() {
    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: g, namespace: backends}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]\n  to: [{group: '', kind: Service, name: db}]\n".to_owned();
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        grant,
        route(
            "cross",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: db, namespace: backends, port: 5432}]}]}",
        ),
    ]);
    assert_eq!(
        route_conditions(&t.gateways, "shop", "cross")[0][1],
        "ResolvedRefs=true/ResolvedRefs"
    );
    assert_eq!(
        policies(lb(&t, "gateway/shop/gw")),
        ["/ -> backends_db_5432"]
    );
}

#[test]
fn parents_are_selected_by_section_name_and_port_and_listeners_admit_by_namespace() {
    let listeners = "[{name: http, port: 80, protocol: HTTP}, {name: all, port: 80, protocol: HTTP, hostname: all.example.com, allowedRoutes: {namespaces: {from: All}}}]";
    let t = translate(&[
        gateway("gw", "portico", listeners),
        route(
            "section",
            "shop",
            "{parentRefs: [{name: gw, sectionName: nope}, {name: gw, port: 8080}], rules: [{}]}",
        ),
        route(
            "elsewhere",
            "other",
            "{parentRefs: [{name: gw, namespace: shop, sectionName: http}, {name: gw, namespace: shop}], rules: [{}]}",
        ),
    ]);
    let v = &t.gateways;
    let accepted = |ns, name| -> Vec<String> {
        route_conditions(v, ns, name)
            .into_iter()
            .map(|c| c[0].clone())
            .collect()
    };
    assert_eq!(
        accepted("shop", "section"),
        [
            "Accepted=false/NoMatchingParent",
            "Accepted=false/NoMatchingParent"
        ]
    );
    assert_eq!(
        accepted("other", "elsewhere"),
        [
            "Accepted=false/NotAllowedByListeners",
            "Accepted=true/Accepted"
        ]
    );
    let gw = &v.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(gw.listeners[1].attached_routes, 1);
}

/// HTTPRouteDestinationPortMatching (the suite's HTTPRouteInvalidParentRefNotMatchingListenerPort):
/// a parentRef whose `port` no listener of the Gateway has is `NoMatchingParent` while its
/// backends still resolve, and attaches nowhere; one naming a listener's port attaches there.
#[test]
fn a_parent_ref_port_no_listener_has_matches_no_parent() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "off-port",
            "shop",
            "{parentRefs: [{name: gw, port: 81}], rules: [{}]}",
        ),
        route(
            "on-port",
            "shop",
            "{parentRefs: [{name: gw, port: 80}], rules: [{}]}",
        ),
    ]);
    let v = &t.gateways;
    assert_eq!(
        route_conditions(v, "shop", "off-port"),
        [[
            "Accepted=false/NoMatchingParent",
            "ResolvedRefs=true/ResolvedRefs"
        ]]
    );
    assert_eq!(
        route_conditions(v, "shop", "on-port")[0][0],
        "Accepted=true/Accepted"
    );
    let gw = &v.gateways[&ObjectKey::new("shop", "gw")];
    let attached: Vec<_> = gw.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(attached, [1], "on-port only");
}

fn namespace(name: &str, labels: &str) -> String {
    format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {labels}}}\n")
}

#[test]
fn a_listener_with_a_namespace_selector_admits_routes_of_the_namespaces_it_selects() {
    let listeners = "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: shop}, matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}}}}]";
    let parent = "{parentRefs: [{name: gw, namespace: shop}], rules: [{}]}";
    let t = translate(&[
        gateway("gw", "portico", listeners),
        namespace("shop", "{team: shop}"),
        namespace("front", "{team: shop, env: prod}"),
        namespace("dev", "{team: shop, env: dev}"),
        namespace("other", "{team: other}"),
        route("own", "shop", parent),
        route("selected", "front", parent),
        route("excluded", "dev", parent),
        route("unlabelled", "other", parent),
        // No Namespace object: no labels, not selected.
        route("unknown", "nowhere", parent),
    ]);
    let v = &t.gateways;
    let accepted = |ns, name| route_conditions(v, ns, name)[0][0].clone();
    assert_eq!(accepted("shop", "own"), "Accepted=true/Accepted");
    assert_eq!(accepted("front", "selected"), "Accepted=true/Accepted");
    for (ns, name) in [
        ("dev", "excluded"),
        ("other", "unlabelled"),
        ("nowhere", "unknown"),
    ] {
        assert_eq!(
            accepted(ns, name),
            "Accepted=false/NotAllowedByListeners",
            "{ns}/{name}"
        );
    }
    let listener = &v.gateways[&ObjectKey::new("shop", "gw")].listeners[0];
    assert_eq!(listener.attached_routes, 2);
}

#[test]
fn a_namespace_selector_that_cannot_be_evaluated_refuses_its_listener() {
    let listeners = "[{name: bad, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector, selector: {matchExpressions: [{key: env, operator: Equals, values: [x]}]}}}}, {name: none, port: 81, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector}}}]";
    let t = translate(&[gateway("gw", "portico", listeners)]);
    let gateway = &t.gateways.gateways[&ObjectKey::new("shop", "gw")];
    for listener in &gateway.listeners {
        assert_eq!(
            conditions(&listener.conditions)[0],
            "Accepted=false/UnsupportedValue",
            "{}",
            listener.name
        );
    }
    let messages: Vec<&str> = (t.diagnostics.iter()).map(|d| d.message.as_str()).collect();
    assert!(
        (messages.iter())
            .any(|m| m.contains("allowedRoutes.namespaces.selector.matchExpressions[0].operator")),
        "{messages:?}"
    );
    assert!(
        (messages.iter()).any(|m| m.contains("from Selector needs a selector")),
        "{messages:?}"
    );
}

#[test]
fn what_is_not_served_yet_is_refused_in_status_and_as_an_error() {
    let t = translate(&[
        gateway(
            "gw",
            "portico",
            "[{name: http, port: 80, protocol: HTTP}, {name: raw, port: 9000, protocol: example.com/RAW}]",
        ),
        route(
            "regex",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{path: {type: Glob, value: '/a*'}}]}]}",
        ),
        route(
            "broken",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{matches: [{queryParams: [{name: a, value: x}, {type: RegularExpression, name: b, value: '(?=x)'}]}]}]}",
        ),
    ]);
    let broken = t.diagnostics.iter().find(|d| d.object.name == "broken");
    assert!(
        broken.is_some_and(|d| d
            .message
            .contains("spec.rules[0].matches[0].queryParams[1].value")
            && d.message.contains("does not compile")),
        "{broken:?}"
    );
    let v = &t.gateways;
    assert_eq!(
        route_conditions(v, "shop", "regex")[0][0],
        "Accepted=false/UnsupportedValue"
    );
    let error = t
        .diagnostics
        .iter()
        .find(|d| d.object.name == "regex")
        .unwrap();
    assert_eq!(error.severity, Severity::Error);
    assert!(
        error.message.contains("spec.rules[0].matches[0].path.type"),
        "{error}"
    );
    let gw = &v.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(
        conditions(&gw.conditions)[0],
        "Accepted=true/ListenersNotValid"
    );
    assert_eq!(
        conditions(&gw.listeners[1].conditions)[0],
        "Accepted=false/UnsupportedProtocol"
    );
    assert!(policies(lb(&t, "gateway/shop/gw")).is_empty());
}

#[test]
fn listeners_on_one_port_conflict_by_protocol_or_hostname() {
    let listeners = "[{name: a, port: 80, protocol: HTTP}, {name: b, port: 80, protocol: HTTP}, {name: c, port: 8443, protocol: HTTP, hostname: x.com}, {name: d, port: 8443, protocol: HTTPS, hostname: y.com, tls: {certificateRefs: [{name: cert}]}}]";
    let t = translate(&[gateway("gw", "portico", listeners)]);
    let gw = &t.gateways.gateways[&ObjectKey::new("shop", "gw")];
    let conflicted: Vec<String> = gw
        .listeners
        .iter()
        .map(|l| conditions(&l.conditions)[3].clone())
        .collect();
    assert_eq!(
        conflicted,
        [
            "Conflicted=true/HostnameConflict",
            "Conflicted=true/HostnameConflict",
            "Conflicted=true/ProtocolConflict",
            "Conflicted=true/ProtocolConflict"
        ]
    );
    assert_eq!(
        conditions(&gw.conditions)[0],
        "Accepted=true/ListenersNotValid"
    );
}

#[test]
fn an_https_listener_without_its_secret_does_not_resolve_and_with_it_terminates_tls() {
    let listeners = "[{name: https, port: 443, protocol: HTTPS, hostname: shop.example.com, tls: {certificateRefs: [{name: cert}]}}]";
    let t = translate(&[gateway("gw", "portico", listeners)]);
    let gw = &t.gateways.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(
        conditions(&gw.listeners[0].conditions)[2],
        "ResolvedRefs=false/InvalidCertificateRef"
    );
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==, tls.key: eA==}\n".to_owned();
    let t = translate(&[gateway("gw", "portico", listeners), secret]);
    let lb = lb(&t, "gateway/shop/gw");
    let listener = &lb.listeners[0];
    assert_eq!(
        (listener.protocol, listener.port),
        (portico_model::Protocol::TerminatedHttps, 443)
    );
    let tls = listener.tls.as_ref().unwrap();
    assert_eq!(tls.sni[0].host, "shop.example.com");
    assert_eq!(tls.sni[0].certificate.name, "cert");
}

#[test]
fn status_keeps_transition_times_and_other_controllers_entries() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use portico_translate::gateway::{Reach, statuses};
    let route_status = r#"
status:
  parents:
  - parentRef: {name: theirs}
    controllerName: example.com/other
    conditions: [{type: Accepted, status: "True", reason: Accepted, message: "", lastTransitionTime: "2020-01-01T00:00:00Z"}]
  - parentRef: {name: gw}
    controllerName: portico.dev/gateway-controller
    conditions:
    - {type: Accepted, status: "True", reason: Accepted, message: "", lastTransitionTime: "2021-01-01T00:00:00Z"}
    - {type: ResolvedRefs, status: "True", reason: ResolvedRefs, message: "", lastTransitionTime: "2021-01-01T00:00:00Z"}
"#;
    let route = format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: shop, generation: 4}}\nspec:\n  parentRefs: [{{name: theirs}}, {{name: gw}}]\n  rules: [{{backendRefs: [{{name: nope, port: 80}}]}}]\n{route_status}"
    );
    let docs = format!(
        "{CLASSES}{}{}{route}",
        gateway("gw", "portico", HTTP),
        gateway("theirs", "other", HTTP)
    );
    let objects = support::load(&docs);
    let t = portico_translate::translate(&objects, &Default::default());
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let reach = [(
        ObjectKey::new("shop", "gw"),
        Reach {
            addresses: vec!["10.0.0.9".into()],
            served: true,
        },
    )];
    let out = statuses(
        &objects,
        &t.gateways,
        &reach.into_iter().collect(),
        "portico.dev/gateway-controller",
        &now,
    );
    let route = &out.routes[0];
    let parents = &route.status.as_ref().unwrap().parents;
    assert_eq!(parents.len(), 2, "{parents:#?}");
    assert_eq!(
        parents[0].controller_name, "example.com/other",
        "kept as it was"
    );
    let ours = &parents[1].conditions;
    let times: Vec<String> = ours
        .iter()
        .map(|c| format!("{}={} {}", c.type_, c.status, c.last_transition_time.0))
        .collect();
    assert_eq!(
        times,
        [
            "Accepted=True 2021-01-01T00:00:00Z",
            "ResolvedRefs=False 2026-01-01T00:00:00Z"
        ]
    );
    assert!(ours.iter().all(|c| c.observed_generation == Some(4)));
    let theirs = out
        .gateways
        .iter()
        .find(|g| g.metadata.name.as_deref() == Some("theirs"))
        .unwrap();
    assert_eq!(
        theirs.status, None,
        "another controller's Gateway gets no status"
    );
    let gw = out
        .gateways
        .iter()
        .find(|g| g.metadata.name.as_deref() == Some("gw"))
        .unwrap();
    let status = gw.status.as_ref().unwrap();
    assert_eq!(status.addresses[0].value, "10.0.0.9");
    assert_eq!(status.listeners[0].supported_kinds[0].kind, "HTTPRoute");
    let unserved = statuses(
        &objects,
        &t.gateways,
        &Default::default(),
        "portico.dev/gateway-controller",
        &now,
    );
    let gw = unserved
        .gateways
        .iter()
        .find(|g| g.metadata.name.as_deref() == Some("gw"))
        .unwrap();
    let programmed = &gw.status.as_ref().unwrap().conditions[1];
    assert_eq!(
        (programmed.status.as_str(), programmed.reason.as_str()),
        ("False", "Pending")
    );
    // Detached from our Gateway: our parent entry goes, the other controller's stays.
    let detached = docs.replace(
        "parentRefs: [{name: theirs}, {name: gw}]",
        "parentRefs: [{name: theirs}]",
    );
    let objects = support::load(&detached);
    let t = portico_translate::translate(&objects, &Default::default());
    let controller = "portico.dev/gateway-controller";
    let out = statuses(&objects, &t.gateways, &Default::default(), controller, &now);
    let parents = &out.routes[0].status.as_ref().unwrap().parents;
    let names: Vec<&str> = parents.iter().map(|p| p.controller_name.as_str()).collect();
    assert_eq!(names, ["example.com/other"]);
}

#[test]
fn method_query_and_regular_expression_matches_become_rules_in_the_apis_precedence() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "matches",
            "shop",
            "{parentRefs: [{name: gw}], rules: [
              {matches: [{path: {value: /a}, queryParams: [{name: animal, value: whale}]}], backendRefs: [{name: web, port: 8080}]},
              {matches: [{path: {value: /a}, headers: [{name: X-V, value: '1'}]}], backendRefs: [{name: web, port: 8080}]},
              {matches: [{path: {value: /a}, method: POST}], backendRefs: [{name: api, port: 9090}]},
              {matches: [{path: {type: RegularExpression, value: '/v[0-9]+'}}], backendRefs: [{name: api, port: 9090}]},
              {matches: [{headers: [{type: RegularExpression, name: X-Id, value: '[a-z]+'}]}], backendRefs: [{name: api, port: 9090}]}]}",
        ),
    ]);
    let v = &t.gateways;
    assert_eq!(
        route_conditions(v, "shop", "matches")[0][0],
        "Accepted=true/Accepted"
    );
    // A method match before header matches before query matches; regular expressions are
    // matched whole and case-sensitively.
    assert_eq!(
        policies(lb(&t, "gateway/shop/gw")),
        [
            "(?-i:/v[0-9]+)$ -> shop_api_9090",
            "/a POST! -> shop_api_9090",
            "/a x-v:1 -> shop_web_8080",
            "/a ?animal=whale -> shop_web_8080",
            "/ x-id:(?-i:[a-z]+)$ -> shop_api_9090",
        ]
    );
}

#[test]
fn filters_not_served_or_not_valid_are_refused_naming_the_field() {
    let rule = |filters: &str| {
        format!(
            "{{parentRefs: [{{name: gw}}], rules: [{{filters: [{filters}], backendRefs: [{{name: web, port: 8080}}]}}]}}"
        )
    };
    let cases = [
        ("extension", rule("{type: ExtensionRef, extensionRef: {group: x.io, kind: K, name: n}}"), "spec.rules[0].filters[0].type"),
        ("unknown", rule("{type: Teleport}"), "spec.rules[0].filters[0].type"),
        ("ftp", rule("{type: RequestRedirect, requestRedirect: {scheme: ftp}}"), "spec.rules[0].filters[0]: scheme"),
        ("status", rule("{type: RequestRedirect, requestRedirect: {statusCode: 305}}"), "statusCode 305"),
        ("missing", rule("{type: URLRewrite}"), "URLRewrite without its field"),
        ("both", rule("{type: RequestRedirect, requestRedirect: {scheme: https}}, {type: URLRewrite, urlRewrite: {hostname: x}}"), "RequestRedirect and URLRewrite"),
        ("header", rule("{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: 'bad name', value: v}]}}"), "is not a token"),
        ("timeouts", "{parentRefs: [{name: gw}], rules: [{timeouts: {request: 1s, backendRequest: 2s}, backendRefs: [{name: web, port: 8080}]}]}".to_owned(), "spec.rules[0].timeouts"),
        ("on-backend", "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: web, port: 8080, filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]}]}]}".to_owned(), "spec.rules[0].backendRefs[0].filters[0]"),
    ];
    let mut docs = vec![gateway("gw", "portico", HTTP)];
    docs.extend(
        cases
            .iter()
            .map(|(name, spec, _)| route(name, "shop", spec)),
    );
    let t = translate(&docs);
    for (name, _, field) in cases {
        assert_eq!(
            route_conditions(&t.gateways, "shop", name)[0][0],
            "Accepted=false/UnsupportedValue",
            "{name}"
        );
        let error = t
            .diagnostics
            .iter()
            .find(|d| d.object.name == name)
            .unwrap();
        assert_eq!(error.severity, Severity::Error);
        assert!(error.message.contains(field), "{name}: {error}");
    }
    assert!(
        policies(lb(&t, "gateway/shop/gw")).is_empty(),
        "refused routes are not served"
    );
}

#[test]
fn a_redirect_takes_the_listeners_scheme_and_port_unless_it_names_them() {
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\ntype: kubernetes.io/tls\ndata: {tls.crt: '', tls.key: ''}\n";
    let t = translate(&[
        secret.to_owned(),
        gateway(
            "gw",
            "portico",
            "[{name: https, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}]",
        ),
        route(
            "r",
            "shop",
            "{parentRefs: [{name: gw}], rules: [
               {matches: [{path: {value: /same}}], filters: [{type: RequestRedirect, requestRedirect: {hostname: a.test}}]},
               {matches: [{path: {value: /plain}}], filters: [{type: RequestRedirect, requestRedirect: {scheme: http}}]}]}",
        ),
    ]);
    let lb = lb(&t, "gateway/shop/gw");
    let redirects: Vec<(String, u16)> = (lb.listeners[0].policies.iter())
        .filter_map(|p| match &p.action {
            PolicyAction::RequestRedirect(r) => Some((r.scheme.clone(), r.port)),
            _ => None,
        })
        .collect();
    // `/plain` first: the longer path.
    assert_eq!(
        redirects,
        [("http".to_owned(), 80), ("https".to_owned(), 8443)]
    );
}

#[test]
fn a_mirror_to_a_missing_service_does_not_resolve_and_the_route_is_served_without_it() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        route(
            "mirrored",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: nowhere, port: 80}}}], backendRefs: [{name: web, port: 8080}]}]}",
        ),
    ]);
    assert_eq!(
        route_conditions(&t.gateways, "shop", "mirrored")[0],
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
    let lb = lb(&t, "gateway/shop/gw");
    assert_eq!(policies(lb), ["/ -> shop_web_8080"]);
    assert!(lb.listeners[0].policies[0].options.is_none(), "no mirror");
}

fn grpc_route(name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{name: {name}, namespace: shop}}\nspec: {spec}\n"
    )
}

#[test]
fn a_grpc_routes_methods_become_paths_its_backends_speak_h2c_and_it_gets_a_status() {
    let t = translate(&[
        gateway("gw", "portico", HTTP),
        grpc_route(
            "g",
            "{parentRefs: [{name: gw}], rules: [
              {matches: [{method: {service: pkg.Echo, method: Say}, headers: [{name: x-v, value: '2'}]}],
               backendRefs: [{name: api, port: 9090}]},
              {matches: [{method: {service: pkg.Echo}}], backendRefs: [{name: api, port: 9090}]},
              {matches: [{method: {type: RegularExpression, service: 'pkg\\..*', method: 'S.*'}}],
               backendRefs: [{name: api, port: 9090}]},
              {matches: [{method: {method: Ping}}], backendRefs: [{name: api, port: 9090}]}]}",
        ),
        route(
            "h",
            "shop",
            "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: api, port: 9090}]}]}",
        ),
        grpc_route(
            "missing",
            "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: nope, port: 1}]}]}",
        ),
    ]);
    let lb = lb(&t, "gateway/shop/gw");
    assert_eq!(
        policies(lb),
        [
            // Regular expressions first, as the model orders them for HTTPRoutes too.
            "(?-i:/(?:pkg\\..*)/(?:S.*))$ -> shop_api_9090_grpc-h2c",
            "(?-i:/[^/]+/Ping)$ -> shop_api_9090_grpc-h2c",
            "=/pkg.Echo/Say x-v:2 -> shop_api_9090_grpc-h2c",
            "/pkg.Echo/ -> shop_api_9090_grpc-h2c",
            "/ -> shop_api_9090",
            "/ -> 500",
        ]
    );
    let grpc = lb
        .pools
        .iter()
        .find(|p| p.name.ends_with("grpc-h2c"))
        .unwrap();
    assert_eq!(grpc.protocol, portico_model::PoolProtocol::H2c);
    let http = lb.pools.iter().find(|p| p.name == "shop_api_9090").unwrap();
    assert_eq!(http.protocol, portico_model::PoolProtocol::Http);
    let v = &t.gateways;
    let grpc_conditions = |name: &str| {
        let parents = &v.grpc_routes[&ObjectKey::new("shop", name)];
        parents
            .iter()
            .map(|p| conditions(&p.conditions))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        grpc_conditions("g"),
        [["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]]
    );
    assert_eq!(
        grpc_conditions("missing"),
        [[
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]]
    );
    assert!(!v.routes.contains_key(&ObjectKey::new("shop", "g")));
    let listener = &v.gateways[&ObjectKey::new("shop", "gw")].listeners[0];
    let kinds: Vec<&str> = listener
        .supported_kinds
        .iter()
        .map(|k| k.1.as_str())
        .collect();
    assert_eq!(kinds, ["HTTPRoute", "GRPCRoute"]);
    assert_eq!(listener.attached_routes, 3);
}

#[test]
fn a_listener_that_allows_only_httproutes_refuses_a_grpc_route() {
    let listeners =
        "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}]";
    let t = translate(&[
        gateway("gw", "portico", listeners),
        grpc_route(
            "g",
            "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: api, port: 9090}]}]}",
        ),
    ]);
    let parents = &t.gateways.grpc_routes[&ObjectKey::new("shop", "g")];
    assert_eq!(
        conditions(&parents[0].conditions),
        [
            "Accepted=false/NotAllowedByListeners",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
}

/// The suite's GatewaySecret{Missing,Invalid}ReferenceGrant and
/// GatewaySecretReferenceGrant{AllInNamespace,Specific}: a certificate in another namespace
/// resolves only with a ReferenceGrant there that names Gateways and that Secret (or no name).
#[test]
fn a_certificate_in_another_namespace_needs_a_reference_grant_for_it() {
    let listeners = "[{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: certificate, namespace: vault}]}}]";
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: certificate, namespace: vault}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==, tls.key: eA==}\n";
    let grant = |to: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: vault}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: shop}}]\n  to: [{to}]\n"
        )
    };
    for (case, grant, want) in [
        (
            "missing",
            String::new(),
            "ResolvedRefs=false/RefNotPermitted",
        ),
        (
            "another secret",
            grant("{group: '', kind: Secret, name: not-the-one}"),
            "ResolvedRefs=false/RefNotPermitted",
        ),
        (
            "all in namespace",
            grant("{group: '', kind: Secret}"),
            "ResolvedRefs=true/ResolvedRefs",
        ),
        (
            "specific",
            grant("{group: '', kind: Secret, name: certificate}"),
            "ResolvedRefs=true/ResolvedRefs",
        ),
    ] {
        let docs = [
            gateway("gw", "portico", listeners),
            secret.to_owned(),
            grant,
        ];
        let t = translate(&docs);
        let gw = &t.gateways.gateways[&ObjectKey::new("shop", "gw")];
        let listener = conditions(&gw.listeners[0].conditions);
        assert!(listener.contains(&want.to_owned()), "{case}: {listener:?}");
        let programmed = want.starts_with("ResolvedRefs=true");
        assert_eq!(
            listener.contains(&"Programmed=true/Programmed".to_owned()),
            programmed,
            "{case}: {listener:?}"
        );
    }
}

/// The suite's GatewayClassObservedGenerationBump, GatewayObservedGenerationBump and
/// HTTPRouteObservedGenerationBump: each condition written carries the generation it judged,
/// and a changed object's conditions follow its new generation.
#[test]
fn conditions_follow_the_generation_of_the_class_the_gateway_and_the_route() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use portico_translate::gateway::statuses;
    for generation in [1, 2] {
        let docs = format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: portico, generation: {generation}}}\nspec: {{controllerName: portico.dev/gateway-controller}}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: shop, generation: {generation}}}\nspec:\n  gatewayClassName: portico\n  listeners: {HTTP}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: shop, generation: {generation}}}\nspec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]}}\n"
        );
        let objects = support::load(&docs);
        let t = portico_translate::translate(&objects, &Default::default());
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let out = statuses(
            &objects,
            &t.gateways,
            &Default::default(),
            "portico.dev/gateway-controller",
            &now,
        );
        let class = out
            .classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("portico"));
        let class = class.unwrap().status.as_ref().unwrap();
        let gateway = out.gateways[0].status.as_ref().unwrap();
        let route = out.routes[0].status.as_ref().unwrap();
        let all = (class.conditions.iter())
            .chain(&gateway.conditions)
            .chain(gateway.listeners.iter().flat_map(|l| &l.conditions))
            .chain(route.parents.iter().flat_map(|p| &p.conditions));
        let generations: Vec<Option<i64>> = all.map(|c| c.observed_generation).collect();
        assert!(generations.len() >= 7, "{generations:?}");
        assert!(
            generations.iter().all(|g| *g == Some(generation)),
            "generation {generation}: {generations:?}"
        );
    }
}

/// The suite's GatewayInvalidTLSConfiguration: a certificateRef to a missing Secret, to another
/// group or kind, or to a Secret without a certificate and key is an `InvalidCertificateRef`
/// and the listener is not programmed.
#[test]
fn a_certificate_ref_that_is_missing_of_another_kind_or_malformed_is_invalid() {
    let malformed = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: malformed, namespace: shop}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==}\n";
    for (case, reference) in [
        ("missing", "{name: nonexistent}"),
        (
            "another group",
            "{group: wrong.group.company.io, kind: Secret, name: cert}",
        ),
        ("another kind", "{group: '', kind: WrongKind, name: cert}"),
        ("malformed", "{name: malformed}"),
    ] {
        let listeners = format!(
            "[{{name: https, port: 443, protocol: HTTPS, tls: {{certificateRefs: [{reference}]}}}}]"
        );
        let t = translate(&[gateway("gw", "portico", &listeners), malformed.to_owned()]);
        let gw = &t.gateways.gateways[&ObjectKey::new("shop", "gw")];
        let listener = conditions(&gw.listeners[0].conditions);
        for want in [
            "ResolvedRefs=false/InvalidCertificateRef",
            "Programmed=false/Invalid",
        ] {
            assert!(listener.contains(&want.to_owned()), "{case}: {listener:?}");
        }
    }
}
