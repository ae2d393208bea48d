//! The Gateway API on the real binary in file mode with the built-in proxy: cases modelled on
//! the upstream conformance suite's HTTPRoute core tests (same-namespace route, hostname
//! intersection, path and header matching, weights, cross-namespace references, missing
//! backends), another controller's objects left alone, and route changes under keep-alive
//! traffic. Gateways without an address are served on the default listeners.

use crate::conformance::Provider;
use crate::{backends, expect_routes, support::*};
use serde_json::Value;
use std::collections::BTreeMap;

pub(crate) const OURS: &str = "portico.dev/gateway-controller";

pub(crate) fn class(name: &str, controller: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {name}}}\nspec: {{controllerName: {controller}}}\n"
    )
}

pub(crate) fn gateway(ns: &str, name: &str, class: &str, listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  gatewayClassName: {class}\n  listeners: {listeners}\n"
    )
}

pub(crate) fn route(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

pub(crate) const HTTP: &str = "[{name: http, port: 80, protocol: HTTP}]";

/// The object `ns/name` of the admin API's list at `path`.
pub(crate) async fn object(p: &Portico, path: &str, ns: &str, name: &str) -> Value {
    let all = p.admin_json(path).await;
    let found = all.as_array().into_iter().flatten().find(|o| {
        o["metadata"]["name"] == name && o["metadata"]["namespace"].as_str().unwrap_or("") == ns
    });
    found.cloned().unwrap_or(Value::Null)
}

/// `type=status/reason` of each condition of the route's parent entries of ours.
pub(crate) async fn route_conditions(p: &Portico, ns: &str, name: &str) -> Vec<String> {
    let route = object(p, "/api/v1/httproutes", ns, name).await;
    let parents = route["status"]["parents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = parents.iter().filter(|e| e["controllerName"] == OURS);
    let conditions = ours.flat_map(|e| e["conditions"].as_array().cloned().unwrap_or_default());
    conditions
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// Polls the route's conditions until they are `want` (the file watch takes a moment).
pub(crate) async fn wait_conditions(p: &Portico, ns: &str, name: &str, want: &[&str]) {
    let start = std::time::Instant::now();
    loop {
        let got = route_conditions(p, ns, name).await;
        if got == want {
            return;
        }
        assert!(
            start.elapsed().as_secs() < 5,
            "{ns}/{name}: wanted {want:?}, got {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_route_in_the_gateways_namespace_is_served_and_gets_its_status() {
    let m = backends("gw-simple", &[("infra-v1", 1)]).await;
    let spec = "{parentRefs: [{name: same-namespace}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-simple", "same-namespace", "portico", HTTP)
            + &route("gw-simple", "gateway-conformance-infra-test", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("any.test", "/", 200, "infra-v1"),
            ("x", "/deep/path", 200, "infra-v1"),
        ],
    )
    .await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    assert_eq!(
        route_conditions(&p, "gw-simple", "gateway-conformance-infra-test").await,
        accepted
    );
    let gw = object(&p, "/api/v1/gateways", "gw-simple", "same-namespace").await;
    let conditions: Vec<String> = (gw["status"]["conditions"].as_array().unwrap().iter())
        .map(|c| format!("{}={}", s(&c["type"]), s(&c["status"])))
        .collect();
    assert_eq!(conditions, ["Accepted=True", "Programmed=True"]);
    assert_eq!(gw["status"]["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(
        gw["status"]["listeners"][0]["supportedKinds"][0]["kind"],
        "HTTPRoute"
    );
    assert!(
        !gw["status"]["addresses"].as_array().unwrap().is_empty(),
        "{gw}"
    );
    // The load balancer shows the Gateway as origin and the route as its policies' source.
    let lbs = p.admin_json("/api/v1/loadbalancers").await;
    let lb = lbs
        .as_array()
        .unwrap()
        .iter()
        .find(|lb| lb["name"] == "gateway/gw-simple/same-namespace")
        .unwrap();
    assert_eq!(lb["origin"]["kind"], "Gateway");
    assert_eq!(
        lb["listeners"][0]["policies"][0]["source"]["kind"],
        "HTTPRoute"
    );

    // `portico get` prints the objects with that status; `-o json` is a v1 List.
    let list: Value =
        serde_json::from_str(&crate::get::get(&p, &["httproutes", "-o", "json"])).unwrap();
    assert_eq!(
        (list["apiVersion"].as_str(), list["kind"].as_str()),
        (Some("v1"), Some("List"))
    );
    let parent = &list["items"][0]["status"]["parents"][0];
    assert_eq!(
        (
            parent["controllerName"].as_str(),
            parent["parentRef"]["name"].as_str()
        ),
        (Some(OURS), Some("same-namespace"))
    );
    let table = crate::get::get(&p, &["gateways", "-o", "wide"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("same-namespace") && l.contains("http(1)")),
        "{table}"
    );
}

async fn routes_attach_where_hostnames_intersect_and_wildcards_match_several_labels(
    provider: Provider,
) {
    let m = backends(
        "gw-hosts",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let listeners = "[{name: listener-1, port: 80, protocol: HTTP, hostname: very.specific.com}, {name: listener-2, port: 80, protocol: HTTP, hostname: '*.wildcard.io'}, {name: listener-3, port: 80, protocol: HTTP, hostname: '*.anotherwildcard.io'}]";
    let rule = |path: &str, service: &str| {
        format!(
            "rules: [{{matches: [{{path: {{type: PathPrefix, value: {path}}}}}], backendRefs: [{{name: {service}, port: 80}}]}}]"
        )
    };
    let routes = [
        (
            "specific-specific",
            "[very.specific.com]",
            rule("/s1", "infra-v1"),
        ),
        (
            "specific-wildcard",
            "[foo.wildcard.io, bar.wildcard.io, foo.bar.wildcard.io]",
            rule("/s2", "infra-v2"),
        ),
        (
            "wildcard-specific",
            "['*.specific.com']",
            rule("/s3", "infra-v3"),
        ),
        (
            "wildcard-wildcard",
            "['*.anotherwildcard.io']",
            rule("/s4", "infra-v1"),
        ),
        (
            "no-intersection",
            "[specific.but.wrong.com, wildcard.io]",
            rule("/s5", "infra-v2"),
        ),
    ];
    let mut y = class("portico", OURS) + &gateway("gw-hosts", "gw", "portico", listeners);
    for (name, hosts, rules) in &routes {
        y.push_str(&route(
            "gw-hosts",
            name,
            &format!("{{parentRefs: [{{name: gw}}], hostnames: {hosts}, {rules}}}"),
        ));
    }
    m.write("gw.yaml", &y);
    let p = provider.start(m.path()).await;
    expect_routes(
        &p,
        &[
            ("very.specific.com", "/s1", 200, "infra-v1"),
            ("very.specific.com:1234", "/s1", 200, "infra-v1"),
            ("non.matching.com", "/s1", 404, ""),
            ("foo.wildcard.io", "/s1", 404, ""),
            ("very.specific.com", "/non-matching-prefix", 404, ""),
            ("foo.wildcard.io", "/s2", 200, "infra-v2"),
            ("foo.bar.wildcard.io", "/s2", 200, "infra-v2"),
            ("wildcard.io", "/s2", 404, ""),
            ("very.specific.com", "/s2", 404, ""),
            ("very.specific.com", "/s3", 200, "infra-v3"),
            ("foo.specific.com", "/s3", 404, ""),
            ("foo.anotherwildcard.io", "/s4", 200, "infra-v1"),
            ("foo.bar.anotherwildcard.io", "/s4", 200, "infra-v1"),
            ("anotherwildcard.io", "/s4", 404, ""),
            ("specific.but.wrong.com", "/s5", 404, ""),
            ("wildcard.io", "/s5", 404, ""),
        ],
    )
    .await;
    let refused = route_conditions(&p, "gw-hosts", "no-intersection").await;
    assert_eq!(refused[0], "Accepted=False/NoMatchingListenerHostname");
    let gw = object(&p, "/api/v1/gateways", "gw-hosts", "gw").await;
    let attached: Vec<i64> = (gw["status"]["listeners"].as_array().unwrap().iter())
        .map(|l| l["attachedRoutes"].as_i64().unwrap())
        .collect();
    assert_eq!(attached, [2, 1, 1], "only accepted routes count");
}

#[tokio::test]
async fn paths_match_exactly_or_by_prefix_element_wise() {
    let m = backends(
        "gw-paths",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {type: Exact, value: /one}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {type: PathPrefix, value: /two}}], backendRefs: [{name: infra-v2, port: 80}]},
        {matches: [{path: {type: PathPrefix, value: /}}], backendRefs: [{name: infra-v3, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-paths", "gw", "portico", HTTP)
            + &route("gw-paths", "paths", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("p.test", "/one", 200, "infra-v1"),
            ("p.test", "/one/", 200, "infra-v3"),
            ("p.test", "/one/example", 200, "infra-v3"),
            ("p.test", "/two", 200, "infra-v2"),
            ("p.test", "/two/", 200, "infra-v2"),
            ("p.test", "/two/example", 200, "infra-v2"),
            ("p.test", "/twoexample", 200, "infra-v3"),
            ("p.test", "/", 200, "infra-v3"),
        ],
    )
    .await;
}

proxy_and_haproxy!(
    routes_attach_where_hostnames_intersect_and_wildcards_match_several_labels,
    headers_match_exactly_and_more_matching_headers_win,
    a_rule_whose_headers_do_not_hold_leaves_the_request_to_shorter_paths_then_other_hosts,
    weights_share_requests_and_weight_zero_gets_none,
);

async fn headers_match_exactly_and_more_matching_headers_win(provider: Provider) {
    let m = backends(
        "gw-headers",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{headers: [{name: version, value: one}]}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{headers: [{name: version, value: two}]}], backendRefs: [{name: infra-v2, port: 80}]},
        {matches: [{headers: [{name: version, value: two}, {name: Color, value: orange}]}], backendRefs: [{name: infra-v3, port: 80}]}]}";
    // Another route's rule with as many header matches goes after (the API's route order),
    // one with more goes first.
    let other = "{parentRefs: [{name: gw}], rules: [
        {matches: [{headers: [{name: version, value: two}, {name: color, value: orange}]}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{headers: [{name: version, value: one}, {name: color, value: red}, {name: x, value: 'a, b'}]}], backendRefs: [{name: infra-v2, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-headers", "gw", "portico", HTTP)
            + &route("gw-headers", "headers", spec)
            + &route("gw-headers", "later", other)),
    );
    let p = provider.start(m.path()).await;
    wait_conditions(
        &p,
        "gw-headers",
        "later",
        &["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"],
    )
    .await;
    type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);
    let cases: [Case<'_>; 9] = [
        (&[("version", "one")], 200, "infra-v1"),
        (&[("Version", "two")], 200, "infra-v2"),
        (&[("version", "two"), ("color", "orange")], 200, "infra-v3"),
        (&[("version", "one"), ("color", "orange")], 200, "infra-v1"),
        (
            &[("version", "one"), ("color", "red"), ("x", "a, b")],
            200,
            "infra-v2",
        ),
        // A header's whole value, not one of its comma-separated elements.
        (
            &[("version", "one"), ("color", "red"), ("x", "a")],
            200,
            "infra-v1",
        ),
        (&[("version", "x"), ("version", "one")], 200, "infra-v1"),
        (&[("version", "TWO")], 404, ""),
        (&[("color", "orange")], 404, ""),
    ];
    for (headers, status, service) in cases {
        let r = p
            .request(p.http, "GET", "h.test", "/", headers, "")
            .await
            .unwrap();
        assert_eq!(
            (r.status, r.service().as_str()),
            (status, service),
            "{headers:?}"
        );
    }
}

async fn a_rule_whose_headers_do_not_hold_leaves_the_request_to_shorter_paths_then_other_hosts(
    provider: Provider,
) {
    let m = backends(
        "gw-fallback",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let h = "{parentRefs: [{name: gw}], hostnames: [h.test], rules: [
        {matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: x-a, value: '1'}]}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {type: Exact, value: /e}, headers: [{name: x-a, value: '1'}]}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {type: PathPrefix, value: /e}, headers: [{name: x-b, value: '1'}]}], backendRefs: [{name: infra-v2, port: 80}]},
        {backendRefs: [{name: infra-v3, port: 80}]}]}";
    let g = "{parentRefs: [{name: gw}], hostnames: [g.test], rules: [
        {matches: [{path: {type: PathPrefix, value: /a}, headers: [{name: x-a, value: '1'}]}], backendRefs: [{name: infra-v3, port: 80}]}]}";
    let any = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {type: PathPrefix, value: /a/b}}], backendRefs: [{name: infra-v2, port: 80}]},
        {backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-fallback", "gw", "portico", HTTP)
            + &route("gw-fallback", "h", h)
            + &route("gw-fallback", "g", g)
            + &route("gw-fallback", "any", any)),
    );
    let p = provider.start(m.path()).await;
    for name in ["h", "g", "any"] {
        let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
        wait_conditions(&p, "gw-fallback", name, &accepted).await;
    }
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 11] = [
        ("h.test", "/a/x", &[("x-a", "1")], "infra-v1"),
        // The rule does not hold: a shorter path of the same host.
        ("h.test", "/a/x", &[("x-a", "2")], "infra-v3"),
        ("h.test", "/a/b", &[], "infra-v3"),
        ("h.test", "/e", &[("x-a", "1"), ("x-b", "1")], "infra-v1"),
        // The Exact rule does not hold: the Prefix one of the same path, then the root.
        ("h.test", "/e", &[("x-b", "1")], "infra-v2"),
        ("h.test", "/e", &[], "infra-v3"),
        ("h.test", "/e/f", &[("x-a", "1"), ("x-b", "1")], "infra-v2"),
        ("h.test", "/e/f", &[("x-a", "1")], "infra-v3"),
        ("g.test", "/a/b", &[("x-a", "1")], "infra-v3"),
        // No rule of the host holds: the host-less route's.
        ("g.test", "/a/b", &[], "infra-v2"),
        ("g.test", "/a/x", &[], "infra-v1"),
    ];
    let mut failures = Vec::new();
    for (host, path, headers, service) in cases {
        let r = p
            .request(p.http, "GET", host, path, headers, "")
            .await
            .unwrap();
        if (r.status, r.service().as_str()) != (200, service) {
            failures.push(format!(
                "{host}{path} {headers:?}: {} {}, not {service}",
                r.status,
                r.service()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn weights_share_requests_and_weight_zero_gets_none(provider: Provider) {
    let m = backends(
        "gw-weight",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let spec = "{parentRefs: [{name: gw}], rules: [
        {backendRefs: [{name: infra-v1, port: 80, weight: 70}, {name: infra-v2, port: 80, weight: 30}, {name: infra-v3, port: 80, weight: 0}]},
        {matches: [{path: {value: /half}}], backendRefs: [{name: infra-v1, port: 80}, {name: does-not-exist, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-weight", "gw", "portico", HTTP)
            + &route("gw-weight", "weights", spec)),
    );
    let p = provider.start(m.path()).await;
    let start = std::time::Instant::now();
    while p.get("w.test", "/").await.status != 200 {
        assert!(start.elapsed().as_secs() < 10, "never served");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..400 {
        let r = p.get("w.test", "/").await;
        assert_eq!(r.status, 200);
        *counts.entry(r.service()).or_default() += 1;
    }
    assert_eq!(counts.get("infra-v3"), None, "weight 0: {counts:?}");
    if matches!(provider, Provider::Proxy) {
        // Interleaved: exactly the weights over any run of their sum.
        let expected = [("infra-v1".to_owned(), 280), ("infra-v2".to_owned(), 120)];
        assert_eq!(counts, expected.into_iter().collect(), "70/30/0");
    } else {
        // Drawn at random: 280 expected, a standard deviation about 9.
        let v1 = counts.get("infra-v1").copied().unwrap_or(0);
        assert!((230..=330).contains(&v1), "70/30/0 over 400: {counts:?}");
    }
    // An unresolved backendRef's share answers 500.
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for _ in 0..200 {
        *statuses
            .entry(p.get("w.test", "/half").await.status)
            .or_default() += 1;
    }
    let failed = statuses.get(&500).copied().unwrap_or(0);
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        [200, 500],
        "{statuses:?}"
    );
    assert!((60..=140).contains(&failed), "half of 200: {statuses:?}");
}

#[tokio::test]
async fn a_backend_in_another_namespace_needs_a_reference_grant() {
    let m = backends("gw-backends", &[("web-backend", 1)]).await;
    let local = echo_pods("local", 1).await;
    m.write("local.yaml", &service("gw-cross", "local", &ready(&local)));
    let spec = "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: web-backend, namespace: gw-backends, port: 80, weight: 1}, {name: local, port: 80, weight: 1}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-cross", "gw", "portico", HTTP)
            + &route("gw-cross", "cross", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    wait_conditions(
        &p,
        "gw-cross",
        "cross",
        &[
            "Accepted=True/Accepted",
            "ResolvedRefs=False/RefNotPermitted",
        ],
    )
    .await;
    // The refused backend's share answers 500; the other is served.
    let mut statuses: BTreeMap<(u16, String), usize> = BTreeMap::new();
    for _ in 0..10 {
        let r = p.get("c.test", "/").await;
        *statuses.entry((r.status, r.service())).or_default() += 1;
    }
    let expected = [((200, "local".to_owned()), 5), ((500, String::new()), 5)];
    assert_eq!(statuses, expected.into_iter().collect());

    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: from-gw-cross, namespace: gw-backends}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: gw-cross}]\n  to: [{group: '', kind: Service, name: web-backend}]\n";
    m.write("grant.yaml", grant);
    wait_conditions(
        &p,
        "gw-cross",
        "cross",
        &["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"],
    )
    .await;
    let mut services = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let r = p.get("c.test", "/").await;
        assert_eq!(r.status, 200);
        services.insert(r.service());
    }
    assert_eq!(services.len(), 2, "both backends serve: {services:?}");
}

#[tokio::test]
async fn a_missing_or_unknown_backend_is_refused_and_answers_500_while_the_rest_is_served() {
    let m = backends("gw-missing", &[("infra-v1", 1)]).await;
    let missing = "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /missing}}], backendRefs: [{name: does-not-exist, port: 80}]}]}";
    let unknown = "{parentRefs: [{name: gw}], rules: [{matches: [{path: {value: /unknown}}], backendRefs: [{group: unknown.example.com, kind: Unknown, name: x}]}]}";
    let good = "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-missing", "gw", "portico", HTTP)
            + &route("gw-missing", "missing", missing)
            + &route("gw-missing", "unknown", unknown)
            + &route("gw-missing", "good", good)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("m.test", "/missing", 500, ""),
            ("m.test", "/unknown/x", 500, ""),
            ("m.test", "/", 200, "infra-v1"),
        ],
    )
    .await;
    assert_eq!(
        route_conditions(&p, "gw-missing", "missing").await[1],
        "ResolvedRefs=False/BackendNotFound"
    );
    assert_eq!(
        route_conditions(&p, "gw-missing", "unknown").await[1],
        "ResolvedRefs=False/InvalidKind"
    );
    assert_eq!(
        route_conditions(&p, "gw-missing", "good").await[1],
        "ResolvedRefs=True/ResolvedRefs"
    );
}

#[tokio::test]
async fn another_controllers_class_gateways_and_routes_are_left_alone() {
    let m = backends("gw-other", &[("infra-v1", 1)]).await;
    let spec =
        "{parentRefs: [{name: theirs}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("other", "example.com/gateway-controller")
            + &gateway("gw-other", "theirs", "other", HTTP)
            + &route("gw-other", "theirs", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("o.test", "/", 404, "")]).await;
    let class = object(&p, "/api/v1/gatewayclasses", "", "other").await;
    assert_eq!(
        class["spec"]["controllerName"],
        "example.com/gateway-controller"
    );
    assert_eq!(
        class["status"],
        Value::Null,
        "no status on another controller's class"
    );
    assert_eq!(
        object(&p, "/api/v1/gateways", "gw-other", "theirs").await["status"],
        Value::Null
    );
    assert_eq!(
        object(&p, "/api/v1/httproutes", "gw-other", "theirs").await["status"],
        Value::Null
    );
    let lbs = p.admin_json("/api/v1/loadbalancers").await;
    assert!(
        lbs.as_array()
            .unwrap()
            .iter()
            .all(|lb| lb["origin"]["kind"] != "Gateway"),
        "{lbs}"
    );

    // The same objects under our own controller name are ours.
    let p = Portico::start(
        m.path(),
        &["--gateway-controller-name=example.com/gateway-controller"],
    )
    .await;
    expect_routes(&p, &[("o.test", "/", 200, "infra-v1")]).await;
}

#[tokio::test]
async fn a_route_changed_under_keep_alive_traffic_fails_no_request() {
    let m = backends("gw-live", &[("steady", 1), ("moving", 1)]).await;
    let spec = |i: usize| {
        format!(
            "{{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: steady, port: 80}}]}}, {{matches: [{{path: {{type: Exact, value: /change-{i}}}}}], backendRefs: [{{name: moving, port: 80}}]}}]}}"
        )
    };
    m.write(
        "gw.yaml",
        &(class("portico", OURS) + &gateway("gw-live", "gw", "portico", HTTP)),
    );
    m.write("route.yaml", &route("gw-live", "live", &spec(0)));
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("l.test", "/change-0", 200, "moving").await;

    let load = KeepAliveLoad::start(p.http, "l.test").await;
    for i in 1..=20 {
        m.write("route.yaml", &route("gw-live", "live", &spec(i)));
        p.wait_route("l.test", &format!("/change-{i}"), 200, "moving")
            .await;
    }
    let (ok, failed) = load.finish().await;
    assert_eq!(failed, 0, "failed requests on the keep-alive connection");
    assert!(ok >= 20, "{} requests", ok);
    // Removed: its paths are gone, the Gateway stays.
    m.remove("route.yaml");
    p.wait_route("l.test", "/", 404, "").await;
}

#[tokio::test]
async fn validate_reports_what_status_refuses_and_what_haproxy_cannot_serve() {
    let m = backends("gw-validate", &[("web", 1)]).await;
    let timeouts = "{parentRefs: [{name: gw}], rules: [{timeouts: {request: 5s}, backendRefs: [{name: web, port: 80}]}]}";
    let mirror = "{parentRefs: [{name: gw}], rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}], backendRefs: [{name: web, port: 80}]}]}";
    let regex =
        "{parentRefs: [{name: gw}], rules: [{matches: [{path: {type: Glob, value: '/a*'}}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-validate", "gw", "portico", HTTP)
            + &route("gw-validate", "timeouts", timeouts)
            + &route("gw-validate", "mirror", mirror)
            + &route("gw-validate", "regex", regex)),
    );
    let validate = |extra: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(["validate", "-f", &m.path().display().to_string()])
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, out) = validate(&[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("HTTPRoute gw-validate/regex: spec.parentRefs[0]")
            && out.contains("UnsupportedValue"),
        "{out}"
    );
    assert!(
        !out.contains("gw-validate/timeouts"),
        "the proxy serves timeouts: {out}"
    );
    let (_, out) = validate(&["--provider=haproxy"]);
    assert!(
        out.contains("HTTPRoute gw-validate/mirror") && out.contains("RequestMirror"),
        "{out}"
    );
    assert!(
        !out.contains("gw-validate/timeouts"),
        "haproxy serves timeouts: {out}"
    );
}

#[tokio::test]
async fn a_gateway_with_a_static_address_is_served_there_on_its_listeners_port() {
    let m = backends("gw-address", &[("infra-v1", 1)]).await;
    let port = free_port();
    let address = "127.0.0.77";
    let listeners = format!("[{{name: http, port: {port}, protocol: HTTP}}]");
    let gateway = gateway("gw-address", "gw", "portico", &listeners).replace(
        "spec:\n",
        &format!("spec:\n  addresses: [{{type: IPAddress, value: {address}}}]\n"),
    );
    let spec = "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS) + &gateway + &route("gw-address", "r", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    let at: std::net::SocketAddr = format!("{address}:{port}").parse().unwrap();
    let start = std::time::Instant::now();
    let r = loop {
        match p.request(at, "GET", "a.test", "/", &[], "").await {
            Ok(r) => break r,
            Err(e) => assert!(start.elapsed().as_secs() < 5, "{at}: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!((r.status, r.service().as_str()), (200, "infra-v1"));
    // Not on the default listeners: the load balancer has an address of its own.
    assert_eq!(p.get("a.test", "/").await.status, 404);
    let gw = object(&p, "/api/v1/gateways", "gw-address", "gw").await;
    assert_eq!(
        gw["status"]["addresses"][0],
        serde_json::json!({"type": "IPAddress", "value": address})
    );
}

/// A Namespace with labels, as a manifest.
fn namespace(name: &str, labels: &str) -> String {
    format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {labels}}}\n")
}

#[tokio::test]
async fn a_listener_with_a_namespace_selector_serves_only_the_namespaces_it_selects() {
    let m = Manifests::new();
    for ns in ["front", "other"] {
        let pods = echo_pods(ns, 1).await;
        m.write(
            &format!("{ns}.yaml"),
            &service(&format!("gw-sel-{ns}"), ns, &ready(&pods)),
        );
    }
    let listeners = "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {gateway-access: 'true'}}}}}]";
    let spec = |name: &str| {
        format!(
            "{{parentRefs: [{{name: gw, namespace: gw-sel}}], hostnames: [{name}.test], rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]}}"
        )
    };
    let objects = |other_labels: &str| {
        class("portico", OURS)
            + &gateway("gw-sel", "gw", "portico", listeners)
            + &namespace("gw-sel-front", "{gateway-access: 'true'}")
            + &namespace("gw-sel-other", other_labels)
            + &route("gw-sel-front", "front", &spec("front"))
            + &route("gw-sel-other", "other", &spec("other"))
    };
    m.write("gw.yaml", &objects("{gateway-access: 'false'}"));
    let p = Portico::start(m.path(), &[]).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_conditions(&p, "gw-sel-front", "front", &accepted).await;
    let refused = [
        "Accepted=False/NotAllowedByListeners",
        "ResolvedRefs=True/ResolvedRefs",
    ];
    wait_conditions(&p, "gw-sel-other", "other", &refused).await;
    let r = p.get("front.test", "/").await;
    assert_eq!((r.status, r.service()), (200, "front".to_owned()));
    assert_eq!(p.get("other.test", "/").await.status, 404);

    // Labelling the namespace admits its route, without a restart.
    m.write("gw.yaml", &objects("{gateway-access: 'true'}"));
    wait_conditions(&p, "gw-sel-other", "other", &accepted).await;
    let r = p.get("other.test", "/").await;
    assert_eq!((r.status, r.service()), (200, "other".to_owned()));
}
