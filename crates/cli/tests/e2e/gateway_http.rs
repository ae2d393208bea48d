//! The HTTPRoute's extended matches and filters on the real binary in file mode with the
//! built-in proxy, in cases modelled on the upstream conformance suite's (method, query
//! parameter and regular expression matches; header changes, redirects, rewrites, mirrors,
//! timeouts; backend protocols; named rules).

use crate::conformance::Provider;
use crate::gateway_api::{HTTP, OURS, class, gateway, route, wait_conditions};
use crate::{backends, support::*};

/// A Gateway `gw` in `ns` and the routes `(name, spec)`, with `services` behind them, served
/// by `provider`.
async fn serve_on(
    provider: Provider,
    ns: &str,
    services: &[(&str, usize)],
    routes: &[(&str, &str)],
) -> (Manifests, Portico) {
    let m = backends(ns, services).await;
    let mut y = class("portico", OURS) + &gateway(ns, "gw", "portico", HTTP);
    for (name, spec) in routes {
        y.push_str(&route(ns, name, spec));
    }
    m.write("gw.yaml", &y);
    let p = provider.start(m.path()).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    for (name, _) in routes {
        wait_conditions(&p, ns, name, &accepted).await;
    }
    (m, p)
}

/// One request case: method, path (with query), headers → status and service ("" for none).
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u16, &'a str);

async fn expect(p: &Portico, host: &str, cases: &[Case<'_>]) {
    let mut failures = Vec::new();
    for (method, path, headers, status, service) in cases {
        let r = p
            .request(p.http, method, host, path, headers, "")
            .await
            .unwrap();
        if (r.status, r.service().as_str()) != (*status, *service) {
            failures.push(format!(
                "{method} {path} {headers:?}: wanted {status} {service:?}, got {} {:?}",
                r.status,
                r.service()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proxy_and_haproxy!(
    methods_query_parameters_and_regular_expressions_match_in_the_apis_precedence,
    request_and_response_header_modifiers_on_rules,
    redirects_take_scheme_host_port_path_and_status_with_the_apis_port_rules,
    url_rewrites_change_the_host_and_the_path_with_the_apis_slash_rules,
    header_modifiers_of_a_backend_follow_those_of_its_rule,
    a_request_reaches_only_the_routes_of_the_most_specific_listener_for_its_host,
    the_cors_filter_answers_preflights_and_marks_answers_for_allowed_origins,
    request_and_backend_timeouts_answer_504_when_they_run_out,
);

async fn methods_query_parameters_and_regular_expressions_match_in_the_apis_precedence(
    provider: Provider,
) {
    // On haproxy every policy of the host becomes a line (no map entry): the regex path
    // beside prefixes with method, query and header conditions, in the API's precedence.
    // A share of weight 0 gets none: the split is drawn, yet always the same.
    let path_regex = "{matches: [{path: {type: RegularExpression, value: '/v[0-9]+/items'}}], backendRefs: [{name: infra-v2, port: 80, weight: 1}, {name: infra-v3, port: 80, weight: 0}]},";
    let spec = format!("{{parentRefs: [{{name: gw}}], rules: [
        {{matches: [{{method: POST}}], backendRefs: [{{name: infra-v1, port: 80}}]}},
        {{matches: [{{path: {{value: /q}}, queryParams: [{{name: animal, value: whale}}]}}], backendRefs: [{{name: infra-v2, port: 80}}]}},
        {{matches: [{{path: {{value: /q}}, queryParams: [{{name: animal, value: whale}}, {{name: color, value: blue}}]}}], backendRefs: [{{name: infra-v3, port: 80}}]}},
        {{matches: [{{path: {{value: /q}}, queryParams: [{{type: RegularExpression, name: id, value: '[0-9]+'}}]}}], backendRefs: [{{name: infra-v1, port: 80}}]}},
        {path_regex}
        {{matches: [{{path: {{value: /h}}, headers: [{{type: RegularExpression, name: X-Id, value: 'ab+'}}]}}], backendRefs: [{{name: infra-v3, port: 80}}]}},
        {{matches: [{{path: {{value: /m}}, method: GET, headers: [{{name: x, value: '1'}}]}}], backendRefs: [{{name: infra-v3, port: 80}}]}},
        {{matches: [{{path: {{value: /m}}, headers: [{{name: x, value: '1'}}, {{name: z, value: '1'}}]}}], backendRefs: [{{name: infra-v2, port: 80}}]}}]}}");
    let services = [("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)];
    let (_m, p) = serve_on(provider, "gw-match", &services, &[("matches", &spec)]).await;
    let mut cases: Vec<Case<'_>> = vec![
        ("POST", "/", &[], 200, "infra-v1"),
        ("GET", "/", &[], 404, ""),
        ("PUT", "/x", &[], 404, ""),
        ("GET", "/q?animal=whale", &[], 200, "infra-v2"),
        ("GET", "/q?animal=whale&color=blue", &[], 200, "infra-v3"),
        ("GET", "/q?color=blue&animal=whale", &[], 200, "infra-v3"),
        ("GET", "/q?animal=dolphin", &[], 404, ""),
        // The first parameter of a name counts.
        ("GET", "/q?animal=dolphin&animal=whale", &[], 404, ""),
        ("GET", "/q?Animal=whale", &[], 404, ""),
        ("GET", "/q?id=42", &[], 200, "infra-v1"),
        ("GET", "/q?id=42x", &[], 404, ""),
        ("GET", "/h", &[("x-id", "abbb")], 200, "infra-v3"),
        ("GET", "/h", &[("x-id", "abc")], 404, ""),
        ("GET", "/h", &[("x-id", "Abb")], 404, ""),
        // A method match goes before more header matches.
        ("GET", "/m", &[("x", "1"), ("z", "1")], 200, "infra-v3"),
        ("DELETE", "/m", &[("x", "1"), ("z", "1")], 200, "infra-v2"),
        // A POST to a path of another rule: the longer path wins over the method.
        ("POST", "/q?animal=whale", &[], 200, "infra-v2"),
    ];
    cases.extend([
        ("GET", "/v2/items", &[][..], 200, "infra-v2"),
        ("GET", "/v2/items/x", &[], 404, ""),
        ("GET", "/V2/items", &[], 404, ""),
    ]);
    expect(&p, "m.test", &cases).await;
}

/// The value of header `name` the echo backend received ("" when it got none).
fn received(r: &Reply, name: &str) -> String {
    r.json()["headers"][name]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A backendRef's own RequestHeaderModifier, after its rule's (the rules' own modifiers, on both
/// providers: `request_and_response_header_modifiers_on_rules`).
async fn header_modifiers_of_a_backend_follow_those_of_its_rule(provider: Provider) {
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /backend}}], filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Rule, value: rule}]}}],
         backendRefs: [
           {name: infra-v1, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: X-Backend, value: v1}]}}]},
           {name: infra-v2, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: X-Backend, value: v2}]}}]}]}]}";
    let services = [("infra-v1", 1), ("infra-v2", 1)];
    let (_m, p) = serve_on(
        provider,
        "gw-headers-mod",
        &services,
        &[("modifiers", spec)],
    )
    .await;
    let mut seen = std::collections::BTreeSet::new();
    // haproxy draws each share at random: enough requests to see both.
    for _ in 0..24 {
        let r = p.get("h.test", "/backend").await;
        assert_eq!(received(&r, "x-rule"), "rule");
        seen.insert((r.service(), received(&r, "x-backend")));
    }
    let want = [("infra-v1", "v1"), ("infra-v2", "v2")].map(|(s, v)| (s.to_owned(), v.to_owned()));
    assert_eq!(seen, want.into_iter().collect());
}

async fn request_and_response_header_modifiers_on_rules(provider: Provider) {
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /set}}], filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Header-Set, value: set-overwrites-values}], add: [{name: X-Header-Add, value: add-appends-values}], remove: [X-Header-Remove]}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /response}}], filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: X-Answer, value: set}], add: [{name: Server, value: added}], remove: [Content-Type]}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /plain}}], backendRefs: [{name: infra-v1, port: 80}]}]}";
    let services = [("infra-v1", 1)];
    let (_m, p) = serve_on(provider, "gw-hdr-both", &services, &[("modifiers", spec)]).await;
    let sent = [
        ("x-header-set", "some-other-value"),
        ("x-header-add", "add-value"),
        ("x-header-remove", "gone"),
    ];
    let r = p
        .request(p.http, "GET", "h.test", "/set", &sent, "")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(received(&r, "x-header-set"), "set-overwrites-values");
    assert_eq!(
        received(&r, "x-header-add"),
        "add-value, add-appends-values"
    );
    assert_eq!(received(&r, "x-header-remove"), "");

    let r = p.get("h.test", "/response").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-answer"], "set");
    let servers: Vec<&str> = (r.headers.get_all("server").iter())
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(servers, ["portico-echo", "added"]);
    assert!(r.headers.get("content-type").is_none(), "{:?}", r.headers);
    // Another rule of the route: none of it.
    let r = p
        .request(p.http, "GET", "h.test", "/plain", &sent, "")
        .await
        .unwrap();
    assert_eq!(received(&r, "x-header-set"), "some-other-value");
    assert!(r.headers.get("x-answer").is_none());
}

/// A rule matching `path` whose RequestRedirect filter has `fields` (flow YAML).
fn redirect(path: &str, fields: &str) -> String {
    format!(
        "{{matches: [{{path: {{value: {path}}}}}], filters: [{{type: RequestRedirect, requestRedirect: {{{fields}}}}}]}}"
    )
}

async fn redirects_take_scheme_host_port_path_and_status_with_the_apis_port_rules(
    provider: Provider,
) {
    let rules = [
        redirect("/scheme", "scheme: https"),
        redirect("/host", "hostname: example.org, statusCode: 301"),
        redirect("/port", "port: 8083"),
        redirect(
            "/full",
            "path: {type: ReplaceFullPath, replaceFullPath: /one}, statusCode: 303",
        ),
        redirect(
            "/prefix",
            "path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 307",
        ),
        redirect("/s308", "scheme: https, port: 8443, statusCode: 308"),
        redirect("/http", "scheme: http, hostname: example.org"),
    ];
    let spec = format!(
        "{{parentRefs: [{{name: gw}}], rules: [{}]}}",
        rules.join(", ")
    );
    let services = [("infra-v1", 1)];
    let (_m, p) = serve_on(provider, "gw-redirect", &services, &[("redirects", &spec)]).await;
    let cases = [
        ("/scheme", 302, "https://r.test/scheme"),
        ("/scheme/x?a=1", 302, "https://r.test/scheme/x?a=1"),
        ("/host", 301, "http://example.org/host"),
        ("/port", 302, "http://r.test:8083/port"),
        ("/full/x?q=1", 303, "http://r.test/one?q=1"),
        ("/prefix/a/b", 307, "http://r.test/new/a/b"),
        ("/prefix", 307, "http://r.test/new"),
        ("/s308", 308, "https://r.test:8443/s308"),
        ("/http", 302, "http://example.org/http"),
    ];
    let mut failures = Vec::new();
    for (path, status, location) in cases {
        let r = p.get("r.test:8080", path).await;
        let got = r
            .headers
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned());
        if (r.status, got.as_deref()) != (status, Some(location)) {
            failures.push(format!(
                "{path}: wanted {status} {location}, got {} {got:?}",
                r.status
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn url_rewrites_change_the_host_and_the_path_with_the_apis_slash_rules(provider: Provider) {
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /prefix/one}}], filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one}}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /strip}}], filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /full}}], filters: [{type: URLRewrite, urlRewrite: {hostname: rewritten.example, path: {type: ReplaceFullPath, replaceFullPath: /one}}}], backendRefs: [{name: infra-v1, port: 80}]}]}";
    let services = [("infra-v1", 1)];
    let (_m, p) = serve_on(provider, "gw-rewrite", &services, &[("rewrites", spec)]).await;
    let cases = [
        ("/prefix/one/two", "/one/two", None, "u.test"),
        ("/prefix/one", "/one", None, "u.test"),
        ("/prefix/one/", "/one/", None, "u.test"),
        ("/strip/three", "/three", None, "u.test"),
        ("/strip", "/", None, "u.test"),
        (
            "/full/path/original?a=1",
            "/one",
            Some("a=1"),
            "rewritten.example",
        ),
    ];
    let mut failures = Vec::new();
    for (asked, path, query, host) in cases {
        let r = p.get("u.test", asked).await;
        let echo = r.json();
        let got = (
            r.status,
            echo["path"].as_str().unwrap_or_default(),
            echo["query"].as_str(),
            echo["host"].as_str().unwrap_or_default(),
        );
        if got != (200, path, query, host) {
            failures.push(format!(
                "{asked}: wanted {path} {query:?} {host}, got {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let r = p.get("u.test", "/full/x").await;
    assert_eq!(
        received(&r, "x-forwarded-host"),
        "u.test",
        "the client's host is forwarded"
    );
}

/// An echo backend for Service `name` in `ns` whose behaviour the test sees (requests
/// counted, delays): its manifests and its behaviour.
async fn watched(ns: &str, name: &str) -> (String, std::sync::Arc<portico_echo::Behaviour>) {
    let behaviour = std::sync::Arc::new(portico_echo::Behaviour::default());
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let addr = portico_echo::spawn_with(any, name, &format!("{name}-0"), behaviour.clone())
        .await
        .unwrap();
    (service(ns, name, &ready(&[addr])), behaviour)
}

/// Waits until `behaviour` has answered `n` requests (mirrors are sent beside the answer).
async fn answered(behaviour: &portico_echo::Behaviour, n: u64) -> u64 {
    use std::sync::atomic::Ordering;
    let start = std::time::Instant::now();
    while behaviour.requests.load(Ordering::Relaxed) < n && start.elapsed().as_secs() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // A little longer, to see any copy too many.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    behaviour.requests.load(Ordering::Relaxed)
}

#[tokio::test]
async fn mirrors_get_copies_of_their_share_of_requests_and_their_answers_are_dropped() {
    let ns = "gw-mirror";
    let (a, mirror_a) = watched(ns, "mirror-a").await;
    let (b, mirror_b) = watched(ns, "mirror-b").await;
    let (c, mirror_c) = watched(ns, "mirror-c").await;
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /all}}], filters: [
           {type: RequestMirror, requestMirror: {backendRef: {name: mirror-a, port: 80}}},
           {type: RequestMirror, requestMirror: {backendRef: {name: mirror-b, port: 80}, percent: 50}},
           {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Mirrored, value: 'yes'}]}}],
         backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /fraction}}], filters: [
           {type: RequestMirror, requestMirror: {backendRef: {name: mirror-c, port: 80}, fraction: {numerator: 1, denominator: 4}}}],
         backendRefs: [{name: infra-v1, port: 80}]}]}";
    let m = backends(ns, &[("infra-v1", 1)]).await;
    m.write("mirrors.yaml", &(a + &b + &c));
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway(ns, "gw", "portico", HTTP)
            + &route(ns, "mirrors", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_conditions(&p, ns, "mirrors", &accepted).await;
    p.wait_route("x.test", "/all", 200, "infra-v1").await;
    for _ in 0..9 {
        let r = p.get("x.test", "/all").await;
        assert_eq!((r.status, r.service().as_str()), (200, "infra-v1"));
        assert_eq!(received(&r, "x-mirrored"), "yes");
    }
    for _ in 0..8 {
        assert_eq!(p.get("x.test", "/fraction").await.service(), "infra-v1");
    }
    assert_eq!(answered(&mirror_a, 10).await, 10, "every request");
    assert_eq!(answered(&mirror_b, 5).await, 5, "every second request");
    assert_eq!(answered(&mirror_c, 2).await, 2, "one request in four");
}

async fn request_and_backend_timeouts_answer_504_when_they_run_out(provider: Provider) {
    let ns = "gw-timeout";
    let (slow, behaviour) = watched(ns, "slow").await;
    behaviour
        .delay_ms
        .store(600, std::sync::atomic::Ordering::Relaxed);
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /request}}], timeouts: {request: 200ms}, backendRefs: [{name: slow, port: 80}]},
        {matches: [{path: {value: /backend}}], timeouts: {backendRequest: 200ms}, backendRefs: [{name: slow, port: 80}]},
        {matches: [{path: {value: /enough}}], timeouts: {request: 2s, backendRequest: 1s}, backendRefs: [{name: slow, port: 80}]},
        {matches: [{path: {value: /off}}], timeouts: {request: 0s}, backendRefs: [{name: slow, port: 80}]}]}";
    let m = Manifests::new();
    m.write(
        "gw.yaml",
        &(slow
            + &class("portico", OURS)
            + &gateway(ns, "gw", "portico", HTTP)
            + &route(ns, "timeouts", spec)),
    );
    let p = provider.start(m.path()).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_conditions(&p, ns, "timeouts", &accepted).await;
    p.wait_route("t.test", "/enough", 200, "slow").await;
    for (path, status) in [
        ("/request", 504),
        ("/backend", 504),
        ("/enough", 200),
        ("/off", 200),
    ] {
        let started = std::time::Instant::now();
        let r = p.get("t.test", path).await;
        let took = started.elapsed();
        assert_eq!(r.status, status, "{path}");
        if status == 504 {
            assert!(
                took < std::time::Duration::from_millis(550),
                "{path}: {took:?}"
            );
        }
    }
}

/// Service `name` in `ns` on `addr` whose port has `appProtocol: protocol`.
fn with_app_protocol(ns: &str, name: &str, addr: std::net::SocketAddr, protocol: &str) -> String {
    service(ns, name, &ready(&[addr])).replace(
        "  - name: http\n",
        &format!("  - name: http\n    appProtocol: {protocol}\n"),
    )
}

#[tokio::test]
async fn h2c_backends_named_rules_and_websockets_through_twenty_route_changes() {
    let ns = "gw-protocols";
    let m = Manifests::new();
    let h2c = echo_pods("h2c", 1).await[0];
    let ws = crate::websocket::echo_backend().await;
    m.write(
        "backends.yaml",
        &(with_app_protocol(ns, "h2c", h2c, "kubernetes.io/h2c")
            + &with_app_protocol(ns, "ws", ws, "kubernetes.io/ws")),
    );
    let spec = |i: usize| {
        format!(
            "{{parentRefs: [{{name: gw}}], rules: [
               {{name: h2c-rule, matches: [{{path: {{value: /h2c}}}}], backendRefs: [{{name: h2c, port: 80}}]}},
               {{name: ws-rule, matches: [{{path: {{value: /ws}}}}], backendRefs: [{{name: ws, port: 80}}]}},
               {{name: moving, matches: [{{path: {{type: Exact, value: /change-{i}}}}}], backendRefs: [{{name: h2c, port: 80}}]}}]}}"
        )
    };
    m.write(
        "gw.yaml",
        &(class("portico", OURS) + &gateway(ns, "gw", "portico", HTTP)),
    );
    m.write("route.yaml", &route(ns, "protocols", &spec(0)));
    let p = Portico::start(m.path(), &[]).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_conditions(&p, ns, "protocols", &accepted).await;
    p.wait_route("p.test", "/h2c", 200, "h2c").await;
    // An HTTP/1.1 client; the hop to the h2c backend is HTTP/2 with prior knowledge.
    let r = p.get("p.test", "/h2c/x").await;
    assert_eq!(
        (r.status, r.json()["proto"].as_str()),
        (200, Some("HTTP/2.0"))
    );

    let mut stream = tokio::net::TcpStream::connect(p.http).await.unwrap();
    crate::websocket::handshake(&mut stream, "p.test", "/ws")
        .await
        .unwrap();
    for i in 1..=20 {
        m.write("route.yaml", &route(ns, "protocols", &spec(i)));
        p.wait_route("p.test", &format!("/change-{i}"), 200, "h2c")
            .await;
        let said = format!("after change {i}");
        let back = crate::websocket::round_trip(&mut stream, &said).await;
        assert_eq!(
            back,
            Some(format!("echo: {said}")),
            "the WebSocket after change {i}"
        );
    }
}

async fn the_cors_filter_answers_preflights_and_marks_answers_for_allowed_origins(
    provider: Provider,
) {
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{path: {value: /cors-1}}], filters: [{type: CORS, cors: {allowOrigins: ['https://www.foo.com', 'https://*.bar.com'], allowMethods: [GET, OPTIONS], allowHeaders: [x-header-1, x-header-2], exposeHeaders: [x-header-3, x-header-4], allowCredentials: true, maxAge: 3600}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /cors-2}}], filters: [{type: CORS, cors: {allowOrigins: ['https://www.foo.com'], allowMethods: ['*']}}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /cors-any}}], filters: [{type: CORS, cors: {allowOrigins: ['*'], allowMethods: ['*'], allowHeaders: ['*'], allowCredentials: true}}], backendRefs: [{name: infra-v1, port: 80}]}]}";
    let (_m, p) = serve_on(provider, "gw-cors", &[("infra-v1", 1)], &[("cors", spec)]).await;
    let ask =
        |path: &'static str, method: &'static str, origin: &'static str, asked: &'static str| {
            let p = &p;
            async move {
                let mut headers = vec![("origin", origin)];
                if method == "OPTIONS" {
                    headers.push(("access-control-request-method", asked));
                    headers.push(("access-control-request-headers", "x-header-1, x-header-2"));
                }
                p.request(p.http, method, "c.test", path, &headers, "")
                    .await
                    .unwrap()
            }
        };
    let field = |r: &Reply, name: &str| {
        r.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    for origin in [
        "https://www.foo.com",
        "https://www.bar.com",
        "https://xpto.www.bar.com",
    ] {
        let r = ask("/cors-1", "OPTIONS", origin, "GET").await;
        assert_eq!(r.status, 200, "{origin}");
        assert_eq!(r.service(), "", "a preflight is answered by the proxy");
        assert_eq!(field(&r, "access-control-allow-origin"), origin);
        assert_eq!(field(&r, "access-control-allow-methods"), "GET, OPTIONS");
        assert_eq!(
            field(&r, "access-control-allow-headers"),
            "x-header-1, x-header-2"
        );
        assert_eq!(
            field(&r, "access-control-expose-headers"),
            "x-header-3, x-header-4"
        );
        assert_eq!(field(&r, "access-control-max-age"), "3600");
        assert_eq!(field(&r, "access-control-allow-credentials"), "true");
        let simple = ask("/cors-1", "GET", origin, "").await;
        assert_eq!(
            (simple.status, simple.service().as_str()),
            (200, "infra-v1")
        );
        assert_eq!(field(&simple, "access-control-allow-origin"), origin);
    }
    let refused = ask("/cors-1", "OPTIONS", "https://foobar.com", "GET").await;
    assert_eq!(
        field(&refused, "access-control-allow-origin"),
        "",
        "not an allowed origin"
    );
    let refused = ask("/cors-1", "GET", "https://foobar.com", "").await;
    assert_eq!(
        (
            refused.status,
            field(&refused, "access-control-allow-origin")
        ),
        (200, String::new())
    );

    let r = ask("/cors-2", "OPTIONS", "https://www.foo.com", "POST").await;
    assert_eq!(field(&r, "access-control-allow-methods"), "POST");
    assert_eq!(
        field(&r, "access-control-allow-credentials"),
        "",
        "not allowed"
    );
    let r = ask("/cors-any", "OPTIONS", "https://other.foo.com", "PUT").await;
    assert_eq!(
        field(&r, "access-control-allow-origin"),
        "https://other.foo.com"
    );
    assert_eq!(field(&r, "access-control-allow-methods"), "PUT");
    assert_eq!(
        field(&r, "access-control-allow-headers"),
        "x-header-1, x-header-2"
    );
}

async fn a_request_reaches_only_the_routes_of_the_most_specific_listener_for_its_host(
    provider: Provider,
) {
    let ns = "gw-isolation";
    let m = backends(
        ns,
        &[
            ("infra-v1", 1),
            ("infra-v2", 1),
            ("infra-v3", 1),
            ("infra-v4", 1),
        ],
    )
    .await;
    let listeners = "[{name: empty, port: 80, protocol: HTTP},
        {name: wildcard-example-com, port: 80, protocol: HTTP, hostname: '*.example.com'},
        {name: wildcard-foo-example-com, port: 80, protocol: HTTP, hostname: '*.foo.example.com'},
        {name: abc-foo-example-com, port: 80, protocol: HTTP, hostname: abc.foo.example.com}]";
    let mut y = class("portico", OURS) + &gateway(ns, "gw", "portico", listeners);
    let routes = [
        ("empty", "infra-v1"),
        ("wildcard-example-com", "infra-v2"),
        ("wildcard-foo-example-com", "infra-v3"),
        ("abc-foo-example-com", "infra-v4"),
    ];
    for (listener, service) in routes {
        let spec = format!(
            "{{parentRefs: [{{name: gw, sectionName: {listener}}}], rules: [{{matches: [{{path: {{value: /{listener}}}}}], backendRefs: [{{name: {service}, port: 80}}]}}]}}"
        );
        y.push_str(&route(ns, listener, &spec));
    }
    m.write("gw.yaml", &y);
    let p = provider.start(m.path()).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    for (name, _) in routes {
        wait_conditions(&p, ns, name, &accepted).await;
    }
    let mut cases = Vec::new();
    let hosts = [
        ("bar.com", "empty"),
        ("bar.example.com", "wildcard-example-com"),
        ("bar.foo.example.com", "wildcard-foo-example-com"),
        ("abc.foo.example.com", "abc-foo-example-com"),
    ];
    for (host, own) in hosts {
        for (listener, service) in routes {
            let (status, service) = if listener == own {
                (200, service)
            } else {
                (404, "")
            };
            cases.push((host, format!("/{listener}"), status, service));
        }
    }
    let cases: Vec<(&str, &str, u16, &str)> = cases
        .iter()
        .map(|(h, p, s, v)| (*h, p.as_str(), *s, *v))
        .collect();
    crate::expect_routes(&p, &cases).await;
}

#[tokio::test]
async fn haproxy_serves_redirects_of_scheme_host_port_and_status_and_names_the_rest() {
    let ns = "gw-haproxy";
    let rules = [
        redirect("/scheme", "scheme: https"),
        redirect("/host", "hostname: example.org, statusCode: 301"),
        redirect("/port", "port: 8083, statusCode: 307"),
        redirect("/s303", "hostname: example.org, statusCode: 303"),
        redirect("/s308", "scheme: https, port: 8443, statusCode: 308"),
        redirect(
            "/full",
            "path: {type: ReplaceFullPath, replaceFullPath: /one}",
        ),
        redirect(
            "/percent",
            "path: {type: ReplaceFullPath, replaceFullPath: /a%20b}",
        ),
    ];
    let spec = format!(
        "{{parentRefs: [{{name: gw}}], rules: [{}, {{backendRefs: [{{name: infra-v1, port: 80}}]}}]}}",
        rules.join(", ")
    );
    let m = backends(ns, &[("infra-v1", 1)]).await;
    m.write(
        "gw.yaml",
        &(class("portico", OURS) + &gateway(ns, "gw", "portico", HTTP) + &route(ns, "r", &spec)),
    );
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("r.test", "/", 200, "infra-v1").await;
    let cases = [
        ("/scheme/x?a=1", 302, Some("https://r.test/scheme/x?a=1")),
        ("/host", 301, Some("http://example.org/host")),
        ("/port", 307, Some("http://r.test:8083/port")),
        ("/s303", 303, Some("http://example.org/s303")),
        ("/s308", 308, Some("https://r.test:8443/s308")),
        ("/full/x?q=1", 302, Some("http://r.test/one?q=1")),
        // Not served by haproxy (a diagnostic says so): the next rule takes it.
        ("/percent", 200, None),
    ];
    for (path, status, location) in cases {
        let r = p.get("r.test", path).await;
        let got = r.headers.get("location").map(|l| l.to_str().unwrap());
        assert_eq!((r.status, got), (status, location), "{path}");
    }
    let out = std::process::Command::new(BIN)
        .args([
            "validate",
            "--provider=haproxy",
            "-f",
            &m.path().display().to_string(),
        ])
        .output()
        .unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.contains("HTTPRoute gw-haproxy/r")
            && out.contains("a RequestRedirect whose hostname or path haproxy cannot write"),
        "{out}"
    );
}

/// One gRPC call case: path, headers → status and service ("" for none).
type Call<'a> = (&'a str, &'a [(&'a str, &'a str)], u16, &'a str);

/// A GRPCRoute `name` in `ns`.
fn grpc_route(ns: &str, name: &str, spec: &str) -> String {
    route(ns, name, spec).replace("kind: HTTPRoute", "kind: GRPCRoute")
}

#[tokio::test]
async fn a_grpc_route_matches_services_and_methods_and_calls_its_backends_over_h2c() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let ns = "gw-grpc";
    let m = Manifests::new();
    // The Services say nothing of h2c: a GRPCRoute's backends speak it all the same.
    let greeter = portico_testkit::grpc_backend("greeter").await;
    let other = portico_testkit::grpc_backend("other").await;
    m.write(
        "backends.yaml",
        &(service(ns, "greeter", &ready(&[greeter])) + &service(ns, "other", &ready(&[other]))),
    );
    let spec = "{parentRefs: [{name: gw}], hostnames: [grpc.test], rules: [
        {matches: [{method: {service: helloworld.Greeter, method: SayHello}}], backendRefs: [{name: greeter, port: 80}]},
        {matches: [{method: {service: helloworld.Greeter}, headers: [{name: x-v, value: '2'}]}], backendRefs: [{name: other, port: 80}]},
        {matches: [{method: {type: RegularExpression, service: 'pkg\\.v[0-9]+', method: 'Get.*'}}], backendRefs: [{name: other, port: 80}]}]}";
    m.write(
        "gw.yaml",
        &(class("portico", OURS)
            + &gateway(ns, "gw", "portico", HTTP)
            + &grpc_route(ns, "calls", spec)),
    );
    let p = Portico::start(m.path(), &[]).await;
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    let start = std::time::Instant::now();
    loop {
        let route = crate::gateway_api::object(&p, "/api/v1/grpcroutes", ns, "calls").await;
        let conditions: Vec<String> = (route["status"]["parents"][0]["conditions"].as_array())
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}={}/{}",
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap()
                )
            })
            .collect();
        if conditions == accepted {
            break;
        }
        assert!(start.elapsed().as_secs() < 5, "status: {conditions:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    p.wait_route("grpc.test", "/helloworld.Greeter/SayHello", 200, "greeter")
        .await;

    // HTTP/2 with prior knowledge (h2c) from the client too.
    let tcp = tokio::net::TcpStream::connect(p.http).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(tcp);
    let (mut client, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    tokio::spawn(conn);
    let cases: [Call<'_>; 7] = [
        ("/helloworld.Greeter/SayHello", &[], 200, "greeter"),
        ("/helloworld.Greeter/SayBye", &[("x-v", "2")], 200, "other"),
        ("/helloworld.Greeter/SayBye", &[], 404, ""),
        ("/helloworld.GreeterX/SayHello", &[("x-v", "2")], 404, ""),
        ("/pkg.v1/GetThing", &[], 200, "other"),
        ("/pkg.v1/PutThing", &[], 404, ""),
        ("/pkg.vx/GetThing", &[], 404, ""),
    ];
    let mut failures = Vec::new();
    for (path, headers, status, service) in cases {
        let mut req = http::Request::post(format!("http://grpc.test{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::from_static(b"\0\0\0\0\x00")))
            .unwrap();
        let reply = client.send_request(req).await.unwrap();
        let got_status = reply.status().as_u16();
        let body = reply.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let got = json["service"].as_str().unwrap_or_default();
        if (got_status, got) != (status, service) {
            failures.push(format!(
                "{path} {headers:?}: wanted {status} {service:?}, got {got_status} {got:?}"
            ));
        }
        if status == 200 {
            assert_eq!(json["proto"], "HTTP/2.0", "the upstream hop is h2c: {json}");
            assert_eq!(json["path"], path);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // And from an HTTP/1.1 client: the hop to the backend is still HTTP/2.
    let r = p
        .request(p.http, "POST", "grpc.test", "/pkg.v2/GetAll", &[], "")
        .await
        .unwrap();
    assert_eq!((r.status, r.service().as_str()), (200, "other"));
    assert_eq!(r.json()["proto"], "HTTP/2.0");

    // `portico get grpcroutes`: the GRPCRoute with its status, as a v1 List and as a table.
    let get = |args: &[&str]| crate::get::get(&p, &[&["grpcroutes"], args].concat());
    let list: serde_json::Value = serde_json::from_str(&get(&["-o", "json"])).unwrap();
    let item = &list["items"][0];
    assert_eq!(
        (item["kind"].as_str(), list["kind"].as_str()),
        (Some("GRPCRoute"), Some("List"))
    );
    assert_eq!(item["status"]["parents"][0]["controllerName"], OURS);
    let table = get(&[]);
    assert!(
        table.contains("calls") && table.contains("grpc.test"),
        "{table}"
    );
}
