//! `portico migrate --to gateway-api`'s conversion as a pure function: the rewrite forms it
//! expresses and those it refuses, redirects, TLS listeners and ReferenceGrants, canaries,
//! the HTTP → HTTPS redirect, the rule limit per HTTPRoute, and a note for every annotation
//! the objects do not carry. (The e2e test `migrate_gateway` serves the result.)

mod support;

use portico_translate::migrate::{Converted, GatewayOptions, to_gateway_api};
use portico_translate::{Config, translate};
use serde_json::{Value, json};
use support::{ingress, load_values, rule};

fn options() -> GatewayOptions {
    GatewayOptions {
        controller_name: "portico.dev/gateway-controller".into(),
        class_name: "portico".into(),
        namespace: "infra".into(),
        http_port: 80,
        https_port: 443,
    }
}

fn convert(docs: Vec<Value>) -> Converted {
    let objects = load_values(docs);
    let translation = translate(&objects, &Config::default());
    to_gateway_api(&objects, &translation, &options())
}

fn annotated(name: &str, host: &str, path: (&str, &str), annotations: Value) -> Value {
    let mut doc = ingress(
        "shop",
        name,
        None,
        json!({"rules": [rule(host, &[(path.0, path.1, "web")])]}),
    );
    doc["metadata"]["annotations"] = annotations;
    doc
}

fn kind<'a>(c: &'a Converted, kind: &str) -> Vec<&'a Value> {
    c.objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn route<'a>(c: &'a Converted, name: &str) -> &'a Value {
    let found = c.objects.iter().find(|o| o["metadata"]["name"] == name);
    found.unwrap_or_else(|| panic!("no {name} in {:#?}", c.objects))
}

fn notes(c: &Converted) -> Vec<String> {
    c.notes
        .iter()
        .map(|n| format!("{}: {}", n.name, n.message))
        .collect()
}

/// (path, rewrite-target, the prefix matched and the URLRewrite path written; None: left out).
type RewriteCase = (&'static str, &'static str, Option<(&'static str, Value)>);

#[test]
fn rewrites_are_written_when_no_regular_expression_is_needed_and_refused_otherwise() {
    let cases: &[RewriteCase] = &[
        (
            "/something(/|$)(.*)",
            "/$2",
            Some((
                "/something",
                json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}),
            )),
        ),
        (
            "/app(/|$)(.*)",
            "/v2/$2",
            Some((
                "/app",
                json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}),
            )),
        ),
        (
            "/old/",
            "/fixed",
            Some((
                "/old",
                json!({"type": "ReplaceFullPath", "replaceFullPath": "/fixed"}),
            )),
        ),
        ("/(api|web)/(.*)", "/$2", None),
        ("/x(/|$)(.*)", "/$1/$2", None),
        ("/x/(.*)", "/$1", None),
    ];
    for (path, target, want) in cases {
        let doc = annotated(
            "r",
            "r.test",
            (path, "ImplementationSpecific"),
            json!({"nginx.ingress.kubernetes.io/rewrite-target": target}),
        );
        let c = convert(vec![doc]);
        let routes = kind(&c, "HTTPRoute");
        match want {
            Some((prefix, rewrite)) => {
                let rule = &routes[0]["spec"]["rules"][0];
                assert_eq!(
                    rule["matches"][0]["path"],
                    json!({"type": "PathPrefix", "value": prefix}),
                    "{path}"
                );
                assert_eq!(rule["filters"][0]["urlRewrite"]["path"], *rewrite, "{path}");
            }
            None => {
                assert!(routes.is_empty(), "{path} → {target}: {routes:#?}");
                assert!(
                    notes(&c).iter().any(|n| n.contains("left out")),
                    "{path}: {:?}",
                    notes(&c)
                );
            }
        }
    }
}

#[test]
fn redirects_become_request_redirects_and_what_they_cannot_say_is_noted() {
    let doc = |name: &str, url: &str, code: &str| {
        annotated(
            name,
            &format!("{name}.test"),
            ("/", "Prefix"),
            json!({"nginx.ingress.kubernetes.io/permanent-redirect": url,
                   "nginx.ingress.kubernetes.io/permanent-redirect-code": code}),
        )
    };
    let c = convert(vec![
        doc("a", "https://elsewhere.test:8443/landing", "308"),
        doc("b", "http://plain.test", "301"),
        doc("c", "https://q.test/x?y=1", "301"),
        doc("d", "https://ok.test/", "300"),
    ]);
    let filter = |name: &str| route(&c, name)["spec"]["rules"][0]["filters"][0].clone();
    assert_eq!(
        filter("a")["requestRedirect"],
        json!({"scheme": "https", "hostname": "elsewhere.test", "port": 8443,
               "path": {"type": "ReplaceFullPath", "replaceFullPath": "/landing"},
               "statusCode": 308})
    );
    assert_eq!(
        filter("b")["requestRedirect"],
        json!({"scheme": "http", "hostname": "plain.test",
               "path": {"type": "ReplaceFullPath", "replaceFullPath": "/"}, "statusCode": 301})
    );
    let n = notes(&c);
    assert!(
        n.iter()
            .any(|n| n.starts_with("c: ") && n.contains("query")),
        "{n:?}"
    );
    assert!(
        n.iter()
            .any(|n| n.starts_with("d: ") && n.contains("status 300")),
        "{n:?}"
    );
}

#[test]
fn tls_hosts_get_listeners_grants_and_the_http_redirect() {
    let secure = |name: &str, ns: &str, host: &str, annotations: Value| {
        let mut doc = ingress(
            ns,
            name,
            None,
            json!({"rules": [rule(host, &[("/", "Prefix", "web")])],
                   "tls": [{"hosts": [host], "secretName": format!("{name}-tls")}]}),
        );
        doc["metadata"]["annotations"] = annotations;
        doc
    };
    let c = convert(vec![
        secure("a", "shop", "a.test", json!({})),
        secure("b", "infra", "b.test", json!({})),
        secure(
            "opt",
            "shop",
            "opt.test",
            json!({"nginx.ingress.kubernetes.io/ssl-redirect": "false"}),
        ),
    ]);
    let gateway = kind(&c, "Gateway")[0];
    assert_eq!(
        gateway["metadata"],
        json!({"name": "portico", "namespace": "infra"})
    );
    let listeners: Vec<(String, Value)> = (gateway["spec"]["listeners"].as_array().unwrap())
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_owned(),
                l["tls"]["certificateRefs"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listeners,
        [
            ("http".to_owned(), Value::Null),
            (
                "https-a.test".to_owned(),
                json!([{"name": "a-tls", "namespace": "shop"}])
            ),
            ("https-b.test".to_owned(), json!([{"name": "b-tls"}])),
            (
                "https-opt.test".to_owned(),
                json!([{"name": "opt-tls", "namespace": "shop"}])
            ),
        ]
    );
    // A grant only where the Secret is in another namespace than the Gateway.
    let grants = kind(&c, "ReferenceGrant");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["metadata"]["namespace"], "shop");
    // A redirected host: HTTPS serves, HTTP redirects; an opted-out one: both serve.
    let sections = |name: &str| -> Vec<Value> {
        let parents = route(&c, name)["spec"]["parentRefs"]
            .as_array()
            .unwrap()
            .clone();
        parents.iter().map(|p| p["sectionName"].clone()).collect()
    };
    assert_eq!(sections("a"), [json!("https-a.test")]);
    assert_eq!(sections("a-ssl-redirect"), [json!("http")]);
    let redirect = &route(&c, "a-ssl-redirect")["spec"]["rules"][0]["filters"][0];
    assert_eq!(
        redirect["requestRedirect"],
        json!({"scheme": "https", "statusCode": 308})
    );
    assert_eq!(sections("opt"), [json!("http"), json!("https-opt.test")]);
    assert!(
        c.objects
            .iter()
            .all(|o| o["metadata"]["name"] != "opt-ssl-redirect")
    );
    assert_eq!(notes(&c), Vec::<String>::new());
}

#[test]
fn a_canary_becomes_weights_and_header_rules_on_the_main_route() {
    let main = ingress(
        "shop",
        "main",
        Some("2026-01-01T00:00:00Z"),
        json!({"rules": [rule("c.test", &[("/", "Prefix", "web")])]}),
    );
    let mut canary = ingress(
        "shop",
        "canary",
        Some("2026-01-02T00:00:00Z"),
        json!({"rules": [rule("c.test", &[("/", "Prefix", "beta")])]}),
    );
    canary["metadata"]["annotations"] = json!({
        "nginx.ingress.kubernetes.io/canary": "true",
        "nginx.ingress.kubernetes.io/canary-by-header": "X-Canary",
        "nginx.ingress.kubernetes.io/canary-by-header-value": "yes",
        "nginx.ingress.kubernetes.io/canary-weight": "20",
    });
    let c = convert(vec![main, canary]);
    assert!(c.objects.iter().all(|o| o["metadata"]["name"] != "canary"));
    let rules = route(&c, "main")["spec"]["rules"]
        .as_array()
        .unwrap()
        .clone();
    let summary: Vec<(Value, Value)> = rules
        .iter()
        .map(|r| (r["matches"][0]["headers"].clone(), r["backendRefs"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                json!([{"type": "Exact", "name": "x-canary", "value": "yes"}]),
                json!([{"name": "beta", "port": 80}])
            ),
            (
                Value::Null,
                json!([{"name": "web", "port": 80, "weight": 80},
                       {"name": "beta", "port": 80, "weight": 20}])
            ),
        ]
    );
}

#[test]
fn more_paths_than_one_route_holds_are_split_and_unexpressed_annotations_are_noted() {
    let paths: Vec<(String, &str, &str)> = (0..20)
        .map(|i| (format!("/p{i}"), "Prefix", "web"))
        .collect();
    let paths: Vec<(&str, &str, &str)> =
        paths.iter().map(|(p, t, s)| (p.as_str(), *t, *s)).collect();
    let mut doc = ingress(
        "shop",
        "many",
        None,
        json!({"rules": [rule("m.test", &paths)]}),
    );
    doc["metadata"]["annotations"] = json!({
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "30",
        "nginx.ingress.kubernetes.io/use-regex": "false",
    });
    let c = convert(vec![doc]);
    let counts: Vec<usize> = ["many", "many-1"]
        .iter()
        .map(|n| route(&c, n)["spec"]["rules"].as_array().unwrap().len())
        .collect();
    assert_eq!(counts, [16, 4]);
    assert_eq!(
        notes(&c),
        [
            "many: annotation nginx.ingress.kubernetes.io/proxy-read-timeout: the Gateway API \
          objects have no field for it (Portico serves it on the Ingress)"
        ]
    );
}
