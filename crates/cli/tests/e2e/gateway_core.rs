//! The upstream conformance suite's core tests (GATEWAY-HTTP and GATEWAY-GRPC profiles) that
//! the older Gateway API files did not model, on the real binary in file mode with the built-in
//! proxy. docs/gateway-api.md maps every core test to the case of ours that checks it.

use crate::gateway_api::{HTTP, OURS, class, gateway, object, route, route_conditions};
use crate::{backends, expect_routes, support::*};
use serde_json::Value;

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// `type=status/reason` of each of the conditions in `v`.
fn conditions(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

/// Polls the Gateway until `check` holds of it (the file watch takes a moment).
async fn wait_gateway(p: &Portico, ns: &str, name: &str, check: impl Fn(&Value) -> bool) -> Value {
    let start = std::time::Instant::now();
    loop {
        let gw = object(p, "/api/v1/gateways", ns, name).await;
        if check(&gw) {
            return gw;
        }
        assert!(start.elapsed().as_secs() < 5, "{ns}/{name}: {gw:#}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

// Upstream: HTTPRouteOmittedBackendRefs.
#[tokio::test]
async fn rules_without_backend_refs_answer_500_and_the_route_resolves() {
    let m = backends("gw-omitted", &[("infra-v1", 1)]).await;
    let spec = "{parentRefs: [{name: gw}], rules: [\
        {matches: [{path: {type: Exact, value: /omitted}}]},\
        {matches: [{path: {type: Exact, value: /empty}}], backendRefs: []},\
        {matches: [{path: {type: PathPrefix, value: /}}], backendRefs: [{name: infra-v1, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-omitted", "gw", "portico", HTTP)
            + &route("gw-omitted", "omitted", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("a.test", "/forward", 200, "infra-v1"),
            ("a.test", "/omitted", 500, ""),
            ("a.test", "/empty", 500, ""),
        ],
    )
    .await;
    assert_eq!(
        route_conditions(&p, "gw-omitted", "omitted").await,
        ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"]
    );
}

// Upstream: GatewayInvalidRouteKind.
#[tokio::test]
async fn a_listener_naming_a_route_kind_not_served_says_invalid_route_kinds() {
    let m = backends("gw-kinds", &[("infra-v1", 1)]).await;
    let only = "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}, kinds: [{kind: InvalidRoute}]}}]";
    let both = "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}, kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]}}]";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-kinds", "only-invalid", "portico", only)
            + &gateway("gw-kinds", "supported-and-invalid", "portico", both)),
    );
    let p = Portico::start(m.path(), &[]).await;
    for (name, kinds) in [
        ("only-invalid", vec![]),
        ("supported-and-invalid", vec!["HTTPRoute"]),
    ] {
        let gw = wait_gateway(&p, "gw-kinds", name, |gw| {
            !gw["status"]["listeners"].is_null()
        })
        .await;
        let listener = &gw["status"]["listeners"][0];
        assert_eq!(listener["name"], "http", "{gw:#}");
        let got: Vec<String> = (listener["supportedKinds"].as_array().into_iter().flatten())
            .map(|k| format!("{}/{}", s(&k["group"]), s(&k["kind"])))
            .collect();
        let want: Vec<String> = kinds
            .iter()
            .map(|k| format!("gateway.networking.k8s.io/{k}"))
            .collect();
        assert_eq!(got, want, "{name}");
        assert!(
            conditions(&listener["conditions"])
                .contains(&"ResolvedRefs=False/InvalidRouteKinds".to_owned()),
            "{name}: {listener:#}"
        );
        assert_eq!(listener["attachedRoutes"], 0, "{name}");
    }
}

// Upstream: GatewayWithNameMaximumLength (a name of 253 characters).
#[tokio::test]
async fn a_gateway_named_with_253_characters_is_accepted_and_serves_its_route() {
    let m = backends("gw-long", &[("infra-v1", 1)]).await;
    let name = "g".repeat(253);
    let spec = format!(
        "{{parentRefs: [{{name: {name}}}], rules: [{{backendRefs: [{{name: infra-v1, port: 80}}]}}]}}"
    );
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-long", &name, "portico", HTTP)
            + &route("gw-long", "r", &spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("a.test", "/", 200, "infra-v1")]).await;
    let gw = object(&p, "/api/v1/gateways", "gw-long", &name).await;
    assert_eq!(
        conditions(&gw["status"]["conditions"]),
        ["Accepted=True/Accepted", "Programmed=True/Programmed"]
    );
}

// Upstream: GatewayInvalidParametersRef.
#[tokio::test]
async fn a_gateway_whose_infrastructure_parameters_do_not_resolve_is_not_accepted() {
    let m = backends("gw-params", &[]).await;
    let listeners = format!(
        "{HTTP}\n  infrastructure: {{parametersRef: {{group: invalid.io, kind: InvalidParameters, name: invalid}}}}"
    );
    m.write(
        "gw.yaml",
        &(class("portico", OURS) + &gateway("gw-params", "gw", "portico", &listeners)),
    );
    let p = Portico::start(m.path(), &[]).await;
    let gw = wait_gateway(&p, "gw-params", "gw", |gw| {
        !gw["status"]["conditions"].is_null()
    })
    .await;
    let got = conditions(&gw["status"]["conditions"]);
    assert!(
        got.contains(&"Accepted=False/InvalidParameters".to_owned()),
        "{got:?}"
    );
}

// Upstream: HTTPRouteServiceTypes (a Service without a selector and its own EndpointSlices,
// a headless Service, and a headless one with its own EndpointSlices).
#[tokio::test]
async fn backends_of_headless_and_selectorless_services_are_served() {
    let m = Manifests::new();
    let mut y = String::new();
    let selector = |name: &str| format!("  selector:\n    app: {name}\n");
    for name in ["manual", "headless", "headless-manual"] {
        let mut svc = service("gw-types", name, &ready(&echo_pods(name, 1).await));
        let replacement = match name {
            "manual" => String::new(),
            "headless" => format!("  clusterIP: None\n{}", selector(name)),
            _ => "  clusterIP: None\n".to_owned(),
        };
        svc = svc.replacen(&selector(name), &replacement, 1);
        y.push_str(&svc);
    }
    m.write("backends.yaml", &y);
    let rules: Vec<String> = ["manual", "headless", "headless-manual"]
        .iter()
        .map(|n| format!("{{matches: [{{path: {{type: PathPrefix, value: /{n}}}}}], backendRefs: [{{name: {n}, port: 80}}]}}"))
        .collect();
    let spec = format!(
        "{{parentRefs: [{{name: gw}}], rules: [{}]}}",
        rules.join(", ")
    );
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway("gw-types", "gw", "portico", HTTP)
            + &route("gw-types", "types", &spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("a.test", "/manual", 200, "manual"),
            ("a.test", "/headless", 200, "headless"),
            ("a.test", "/headless-manual", 200, "headless-manual"),
        ],
    )
    .await;
}

// Upstream: GatewayModifyListeners.
#[tokio::test]
async fn listeners_added_and_removed_are_served_and_in_the_status() {
    let m = backends("gw-modify", &[("infra-v1", 1)]).await;
    let one = "{name: one, port: 80, protocol: HTTP, hostname: one.test}";
    let two = "{name: two, port: 80, protocol: HTTP, hostname: two.test}";
    let spec = "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    let write = |listeners: &str| {
        m.write(
            "gw.yaml",
            &(class("portico", OURS)
                + &gateway("gw-modify", "gw", "portico", listeners)
                + &route("gw-modify", "r", spec)),
        )
    };
    write(&format!("[{one}]"));
    let p = Portico::start(m.path(), &[]).await;
    let names = |gw: &Value| -> Vec<String> {
        (gw["status"]["listeners"].as_array().into_iter().flatten())
            .map(|l| format!("{}:{}", s(&l["name"]), l["attachedRoutes"]))
            .collect()
    };
    wait_gateway(&p, "gw-modify", "gw", |gw| names(gw) == ["one:1"]).await;
    expect_routes(
        &p,
        &[
            ("one.test", "/", 200, "infra-v1"),
            ("two.test", "/", 404, ""),
        ],
    )
    .await;

    write(&format!("[{one}, {two}]"));
    let gw = wait_gateway(&p, "gw-modify", "gw", |gw| names(gw) == ["one:1", "two:1"]).await;
    assert_eq!(
        conditions(&gw["status"]["conditions"]),
        ["Accepted=True/Accepted", "Programmed=True/Programmed"]
    );
    expect_routes(
        &p,
        &[
            ("one.test", "/", 200, "infra-v1"),
            ("two.test", "/", 200, "infra-v1"),
        ],
    )
    .await;

    write(&format!("[{two}]"));
    wait_gateway(&p, "gw-modify", "gw", |gw| names(gw) == ["two:1"]).await;
    expect_routes(
        &p,
        &[
            ("one.test", "/", 404, ""),
            ("two.test", "/", 200, "infra-v1"),
        ],
    )
    .await;
}

/// GETs `host/path` at `at`, retrying while nothing listens there yet.
async fn get_at(p: &Portico, at: std::net::SocketAddr, path: &str) -> (u16, String) {
    let start = std::time::Instant::now();
    loop {
        match p.request(at, "GET", "a.test", path, &[], "").await {
            Ok(r) => return (r.status, r.service()),
            Err(e) => assert!(start.elapsed().as_secs() < 5, "{at}: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

// Upstream: HTTPRouteMultipleGateways.
#[tokio::test]
async fn a_route_of_two_gateways_is_served_by_each_and_a_dedicated_route_by_its_own() {
    let m = backends(
        "gw-multi",
        &[("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)],
    )
    .await;
    let port = free_port();
    let listeners = format!("[{{name: http, port: {port}, protocol: HTTP}}]");
    let with_address = |name: &str, address: &str| {
        gateway("gw-multi", name, "portico", &listeners).replace(
            "spec:\n",
            &format!("spec:\n  addresses: [{{type: IPAddress, value: {address}}}]\n"),
        )
    };
    let rule = |path: &str, svc: &str| {
        format!(
            "{{matches: [{{path: {{type: PathPrefix, value: {path}}}}}], backendRefs: [{{name: {svc}, port: 80}}]}}"
        )
    };
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &with_address("first", "127.0.0.78")
            + &with_address("second", "127.0.0.79")
            + &route(
                "gw-multi",
                "shared",
                &format!(
                    "{{parentRefs: [{{name: first}}, {{name: second}}], rules: [{}]}}",
                    rule("/", "infra-v1")
                ),
            )
            + &route(
                "gw-multi",
                "first-only",
                &format!(
                    "{{parentRefs: [{{name: first}}], rules: [{}]}}",
                    rule("/first", "infra-v2")
                ),
            )
            + &route(
                "gw-multi",
                "second-only",
                &format!(
                    "{{parentRefs: [{{name: second}}], rules: [{}]}}",
                    rule("/second", "infra-v3")
                ),
            )),
    );
    let p = Portico::start(m.path(), &[]).await;
    let first: std::net::SocketAddr = format!("127.0.0.78:{port}").parse().unwrap();
    let second: std::net::SocketAddr = format!("127.0.0.79:{port}").parse().unwrap();
    for (at, path, want) in [
        (first, "/", "infra-v1"),
        (first, "/first", "infra-v2"),
        (first, "/second", "infra-v1"),
        (second, "/", "infra-v1"),
        (second, "/second", "infra-v3"),
        (second, "/first", "infra-v1"),
    ] {
        assert_eq!(
            get_at(&p, at, path).await,
            (200, want.to_owned()),
            "{at}{path}"
        );
    }
    let parents = object(&p, "/api/v1/httproutes", "gw-multi", "shared").await;
    assert_eq!(
        parents["status"]["parents"].as_array().map(Vec::len),
        Some(2),
        "{parents:#}"
    );
    for name in ["shared", "first-only", "second-only"] {
        let got = route_conditions(&p, "gw-multi", name).await;
        assert!(got.iter().all(|c| c.contains("=True/")), "{name}: {got:?}");
    }
}

/// A GRPCRoute `name` in `ns`.
fn grpc_route(ns: &str, name: &str, spec: &str) -> String {
    route(ns, name, spec).replace("kind: HTTPRoute", "kind: GRPCRoute")
}

/// gRPC backends `names` (each answering with its name) and their Services in `ns`.
async fn grpc_backends(ns: &str, names: &[&'static str]) -> Manifests {
    let m = Manifests::new();
    let mut y = String::new();
    for name in names {
        let addr = portico_testkit::grpc_backend(name).await;
        y.push_str(&service(ns, name, &ready(&[addr])));
    }
    m.write("backends.yaml", &y);
    m
}

/// Calls `/helloworld.Greeter/SayHello` at `host` (HTTP/1.1 in, h2c to the backend): the status
/// and the backend that answered.
async fn call(p: &Portico, host: &str) -> (u16, String) {
    let path = "/helloworld.Greeter/SayHello";
    let r = p
        .request(p.http, "POST", host, path, &[], "")
        .await
        .unwrap();
    (r.status, r.service())
}

/// Waits until calls to `host` are answered 200 (the file watch takes a moment).
async fn wait_served(p: &Portico, host: &str) {
    let start = std::time::Instant::now();
    while call(p, host).await.0 != 200 {
        assert!(start.elapsed().as_secs() < 5, "{host} is not served");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

// Upstream: GRPCRouteListenerHostnameMatching.
#[tokio::test]
async fn a_grpc_route_gets_the_calls_for_its_listeners_hostname() {
    let ns = "gw-grpc-hosts";
    let m = grpc_backends(ns, &["grpc-v1", "grpc-v2", "grpc-v3"]).await;
    let listeners = "[{name: exact, port: 80, protocol: HTTP, hostname: bar.com},\
        {name: deeper, port: 80, protocol: HTTP, hostname: foo.bar.com},\
        {name: wild, port: 80, protocol: HTTP, hostname: '*.bar.com'}]";
    let routed = |name: &str, listener: &str, svc: &str| {
        grpc_route(
            ns,
            name,
            &format!(
                "{{parentRefs: [{{name: gw, sectionName: {listener}}}], rules: [{{backendRefs: [{{name: {svc}, port: 80}}]}}]}}"
            ),
        )
    };
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway(ns, "gw", "portico", listeners)
            + &routed("r1", "exact", "grpc-v1")
            + &routed("r2", "deeper", "grpc-v2")
            + &routed("r3", "wild", "grpc-v3")),
    );
    let p = Portico::start(m.path(), &[]).await;
    wait_served(&p, "bar.com").await;
    let mut failures = Vec::new();
    for (host, want) in [
        ("bar.com", (200, "grpc-v1")),
        ("foo.bar.com", (200, "grpc-v2")),
        ("baz.bar.com", (200, "grpc-v3")),
        ("boo.bar.com", (200, "grpc-v3")),
        ("multiple.prefixes.bar.com", (200, "grpc-v3")),
        ("foo.com", (404, "")),
    ] {
        let got = call(&p, host).await;
        if got != (want.0, want.1.to_owned()) {
            failures.push(format!("{host}: wanted {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Upstream: GRPCRouteWeight.
#[tokio::test]
async fn a_grpc_routes_weights_share_its_calls() {
    let ns = "gw-grpc-weight";
    let m = grpc_backends(ns, &["grpc-v1", "grpc-v2", "grpc-v3"]).await;
    let spec = "{parentRefs: [{name: gw}], rules: [{backendRefs: [\
        {name: grpc-v1, port: 80, weight: 70}, {name: grpc-v2, port: 80, weight: 30}, {name: grpc-v3, port: 80, weight: 0}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway(ns, "gw", "portico", HTTP)
            + &grpc_route(ns, "weighted", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    wait_served(&p, "a.test").await;
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..200 {
        let (status, svc) = call(&p, "a.test").await;
        assert_eq!(status, 200, "{svc}");
        *counts.entry(svc).or_default() += 1;
    }
    let n = |s: &str| counts.get(s).copied().unwrap_or(0);
    assert!((120..=160).contains(&n("grpc-v1")), "{counts:?}");
    assert!((40..=80).contains(&n("grpc-v2")), "{counts:?}");
    assert_eq!(n("grpc-v3"), 0, "{counts:?}");
}
