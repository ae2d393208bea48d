//! The HTTPRoute's extended matches and filters on the real binary in file mode with the
//! built-in proxy, in cases modelled on the upstream conformance suite's (method, query
//! parameter and regular expression matches; header changes, redirects, rewrites, mirrors,
//! timeouts; backend protocols; named rules).

use crate::gateway_api::{HTTP, OURS, class, gateway, route, wait_conditions};
use crate::{backends, support::*};

/// A Gateway `gw` in `ns` and the routes `(name, spec)`, with `services` behind them.
async fn serve(
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
    let p = Portico::start(m.path(), &[]).await;
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

#[tokio::test]
async fn methods_query_parameters_and_regular_expressions_match_in_the_apis_precedence() {
    let spec = "{parentRefs: [{name: gw}], rules: [
        {matches: [{method: POST}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {value: /q}, queryParams: [{name: animal, value: whale}]}], backendRefs: [{name: infra-v2, port: 80}]},
        {matches: [{path: {value: /q}, queryParams: [{name: animal, value: whale}, {name: color, value: blue}]}], backendRefs: [{name: infra-v3, port: 80}]},
        {matches: [{path: {value: /q}, queryParams: [{type: RegularExpression, name: id, value: '[0-9]+'}]}], backendRefs: [{name: infra-v1, port: 80}]},
        {matches: [{path: {type: RegularExpression, value: '/v[0-9]+/items'}}], backendRefs: [{name: infra-v2, port: 80}]},
        {matches: [{path: {value: /h}, headers: [{type: RegularExpression, name: X-Id, value: 'ab+'}]}], backendRefs: [{name: infra-v3, port: 80}]},
        {matches: [{path: {value: /m}, method: GET, headers: [{name: x, value: '1'}]}], backendRefs: [{name: infra-v3, port: 80}]},
        {matches: [{path: {value: /m}, headers: [{name: x, value: '1'}, {name: z, value: '1'}]}], backendRefs: [{name: infra-v2, port: 80}]}]}";
    let services = [("infra-v1", 1), ("infra-v2", 1), ("infra-v3", 1)];
    let (_m, p) = serve("gw-match", &services, &[("matches", spec)]).await;
    expect(
        &p,
        "m.test",
        &[
            ("POST", "/", &[], 200, "infra-v1"),
            ("GET", "/", &[], 404, ""),
            ("PUT", "/x", &[], 404, ""),
            ("GET", "/q?animal=whale", &[], 200, "infra-v2"),
            ("GET", "/q?animal=whale&color=blue", &[], 200, "infra-v3"),
            ("GET", "/q?color=blue&animal=whale", &[], 200, "infra-v3"),
            ("GET", "/q?animal=dolphin", &[], 404, ""),
            ("GET", "/q?Animal=whale", &[], 404, ""),
            ("GET", "/q?id=42", &[], 200, "infra-v1"),
            ("GET", "/q?id=42x", &[], 404, ""),
            ("GET", "/v2/items", &[], 200, "infra-v2"),
            ("GET", "/v2/items/x", &[], 404, ""),
            ("GET", "/V2/items", &[], 404, ""),
            ("GET", "/h", &[("x-id", "abbb")], 200, "infra-v3"),
            ("GET", "/h", &[("x-id", "abc")], 404, ""),
            ("GET", "/h", &[("x-id", "Abb")], 404, ""),
            // A method match goes before more header matches.
            ("GET", "/m", &[("x", "1"), ("z", "1")], 200, "infra-v3"),
            ("DELETE", "/m", &[("x", "1"), ("z", "1")], 200, "infra-v2"),
            // A POST to a path of another rule: the longer path wins over the method.
            ("POST", "/q?animal=whale", &[], 200, "infra-v2"),
        ],
    )
    .await;
}
