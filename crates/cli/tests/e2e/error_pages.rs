//! ingress-nginx's default backend on the real binary with the built-in proxy: the
//! `default-backend` annotation's Service answering for a backend without ready endpoints
//! (`X-Code: 503` and the other headers, as ingress-nginx's
//! `test/e2e/annotations/default_backend.go` checks), `custom-http-errors` pages per code
//! from it with the original status, the controller-wide `--default-backend-service` for
//! requests no rule matches and for the pages of an Ingress without the annotation, and bad
//! values reported on the Ingress and annotation while the rest is served.

use crate::conformance::Provider;
use crate::support::*;
use portico_echo::Behaviour;
use std::sync::Arc;
use std::sync::atomic::Ordering;

proxy_and_haproxy!(
    the_controller_default_backend_answers_unmatched_requests,
    the_default_backend_answers_for_a_backend_without_endpoints,
);

const NGINX: &str = "nginx.ingress.kubernetes.io";
const CREATED: &str = "2026-01-01T00:00:00Z";
const NS: &str = "errs";

/// An echo backend for `service` whose every answer has `status`.
async fn answering(service: &str, status: u16) -> std::net::SocketAddr {
    let behaviour = Arc::new(Behaviour::default());
    behaviour.status.store(status, Ordering::Relaxed);
    let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    portico_echo::spawn_with(any, service, &format!("{service}-0"), behaviour)
        .await
        .unwrap()
}

fn with(name: &str, rules: &[(&str, &str, &str, &str, &str)], keys: &[(&str, &str)]) -> String {
    nginx_annotated(&ingress(NS, name, CREATED, rules), keys)
}

async fn manifests() -> Manifests {
    let m = Manifests::new();
    m.write(
        "ok.yaml",
        &service(NS, "ok", &ready(&echo_pods("ok", 1).await)),
    );
    let gone = [answering("gone", 404).await];
    m.write("gone.yaml", &service(NS, "gone", &ready(&gone)));
    let down = [answering("down", 503).await];
    m.write("down.yaml", &service(NS, "down", &ready(&down)));
    let teapot = [answering("teapot", 418).await];
    m.write("teapot.yaml", &service(NS, "teapot", &ready(&teapot)));
    let pages = echo_pods("pages", 1).await;
    m.write(
        "pages.yaml",
        &service_on_port(NS, "pages", 8080, &ready(&pages)),
    );
    let global = echo_pods("global", 1).await;
    m.write(
        "global.yaml",
        &service("ingress-nginx", "global", &ready(&global)),
    );
    // ingress-nginx's e2e: the Ingress's own Service does not exist.
    let rules = [("a.test", "/", "Prefix", "invalid", "80")];
    m.write(
        "a.yaml",
        &with("a", &rules, &[("default-backend", "pages")]),
    );
    let rules = [
        ("c.test", "/gone", "Prefix", "gone", "80"),
        ("c.test", "/down", "Prefix", "down", "80"),
        ("c.test", "/teapot", "Prefix", "teapot", "80"),
        ("c.test", "/fine", "Prefix", "ok", "80"),
    ];
    let keys = [
        ("default-backend", "pages"),
        ("custom-http-errors", "503, 404"),
    ];
    m.write("c.yaml", &with("c", &rules, &keys));
    let rules = [("g.test", "/", "Prefix", "gone", "80")];
    m.write(
        "g.yaml",
        &with("g", &rules, &[("custom-http-errors", "404")]),
    );
    let rules = [("bad.test", "/", "Prefix", "ok", "80")];
    let keys = [
        ("default-backend", "no-such"),
        ("custom-http-errors", "404,600"),
    ];
    m.write("bad.yaml", &with("bad", &rules, &keys));
    m
}

async fn get(p: &Portico, host: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    (p.request(p.http, "GET", host, path, headers, "").await).unwrap()
}

/// The header `name` the echo backend that answered received.
fn seen(reply: &Reply, name: &str) -> String {
    reply.json()["headers"][name]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

async fn the_default_backend_answers_for_a_backend_without_endpoints(provider: Provider) {
    let m = manifests().await;
    let p = provider.start(m.path()).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;

    let reply = get(
        &p,
        "a.test",
        "/alma/armud?q=1",
        &[("x-request-id", "rid-7")],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), "pages");
    assert_eq!(reply.json()["path"], "/alma/armud");
    for (name, value) in [
        ("x-code", "503"),
        ("x-original-uri", "/alma/armud?q=1"),
        ("x-namespace", NS),
        ("x-ingress-name", "a"),
        ("x-service-name", "invalid"),
        ("x-service-port", "80"),
        ("x-request-id", "rid-7"),
    ] {
        assert_eq!(seen(&reply, name), value, "{name}: {reply:?}");
    }
}

#[tokio::test]
async fn custom_http_errors_take_each_codes_page_from_the_default_backend() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;

    let accept = [("accept", "application/json")];
    for (path, code, service) in [("/gone/x?y=2", 404, "gone"), ("/down", 503, "down")] {
        let reply = get(&p, "c.test", path, &accept).await;
        assert_eq!(reply.status, code, "{path}: {reply:?}");
        assert_eq!(reply.service(), "pages", "{path}");
        assert_eq!(reply.json()["path"], "/", "{path}");
        assert_eq!(reply.json()["method"], "GET", "{path}");
        assert_eq!(seen(&reply, "x-code"), code.to_string(), "{path}");
        assert_eq!(seen(&reply, "x-format"), "application/json", "{path}");
        assert_eq!(seen(&reply, "x-original-uri"), path, "{path}");
        assert_eq!(seen(&reply, "x-service-name"), service, "{path}");
        assert_eq!(seen(&reply, "x-ingress-name"), "c", "{path}");
        assert_eq!(seen(&reply, "host"), "c.test", "{path}");
        assert!(!seen(&reply, "x-request-id").is_empty(), "{path}");
    }
    // A code not listed passes as the backend answered it.
    let teapot = get(&p, "c.test", "/teapot", &[]).await;
    assert_eq!((teapot.status, teapot.service().as_str()), (418, "teapot"));
    let fine = get(&p, "c.test", "/fine", &[]).await;
    assert_eq!((fine.status, fine.service().as_str()), (200, "ok"));
    // Without a default backend anywhere, the backend's own answer is served.
    let own = get(&p, "g.test", "/", &[]).await;
    assert_eq!((own.status, own.service().as_str()), (404, "gone"));
    let unmatched = get(&p, "nomatch.test", "/", &[]).await;
    assert_eq!((unmatched.status, unmatched.service().as_str()), (404, ""));
}

#[tokio::test]
async fn the_controller_default_backend_serves_the_pages_of_ingresses_without_one() {
    let m = manifests().await;
    let flag = ["--default-backend-service", "ingress-nginx/global"];
    let p = Portico::start(m.path(), &flag).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;

    // An Ingress without default-backend takes its pages from the controller's.
    let page = get(&p, "g.test", "/", &[]).await;
    assert_eq!((page.status, page.service().as_str()), (404, "global"));
    assert_eq!(seen(&page, "x-code"), "404");
    assert_eq!(seen(&page, "x-ingress-name"), "g");
    // The annotation's default backend wins over the controller's.
    let own = get(&p, "c.test", "/gone", &[]).await;
    assert_eq!((own.status, own.service().as_str()), (404, "pages"));
}

/// `--custom-http-errors` (ingress-nginx's ConfigMap key): the controller's default backend
/// serves those codes' pages for every Ingress without a `custom-http-errors` of its own; an
/// Ingress's annotation replaces the flag's codes; the flag needs `--default-backend-service`.
#[tokio::test]
async fn the_controller_wide_codes_apply_to_ingresses_without_their_own() {
    let m = manifests().await;
    let rules = [
        ("plain.test", "/down", "Prefix", "down", "80"),
        ("plain.test", "/teapot", "Prefix", "teapot", "80"),
    ];
    m.write("plain.yaml", &with("plain", &rules, &[]));
    let flags = [
        "--default-backend-service",
        "ingress-nginx/global",
        "--custom-http-errors",
        "418,503",
    ];
    let p = Portico::start(m.path(), &flags).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;
    // No annotation: the flag's codes, pages from the controller's default backend.
    for (path, code) in [("/down", 503), ("/teapot", 418)] {
        let page = get(&p, "plain.test", path, &[]).await;
        assert_eq!(
            (page.status, page.service().as_str()),
            (code, "global"),
            "{path}"
        );
        assert_eq!(seen(&page, "x-code"), code.to_string(), "{path}");
        assert_eq!(seen(&page, "x-ingress-name"), "plain", "{path}");
    }
    // Its own custom-http-errors (404) replaces the flag's: its 503 and 418 pass as answered.
    let own = get(&p, "c.test", "/teapot", &[]).await;
    assert_eq!((own.status, own.service().as_str()), (418, "teapot"));
    let page = get(&p, "g.test", "/", &[]).await;
    assert_eq!((page.status, page.service().as_str()), (404, "global"));

    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(m.path())
        .args(["--custom-http-errors", "404"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--default-backend-service"),
        "{stderr}"
    );
    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(m.path())
        .args(["--default-backend-service", "ingress-nginx/global"])
        .args(["--custom-http-errors", "404,700"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("\"700\""),
        "{stderr}"
    );
}

#[tokio::test]
async fn bad_default_backend_values_are_reported_and_the_rest_is_served() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("bad.test", "/", 200, "ok").await;
    let ingress = p.ingress(NS, "bad").await;
    let diagnostics = ingress["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let about = |key: &str| -> String {
        let field = format!("metadata.annotations[{NGINX}/{key}]");
        let found: Vec<_> = diagnostics.iter().filter(|d| d["field"] == field).collect();
        assert_eq!(found.len(), 1, "{key}: {ingress:#}");
        found[0]["message"].as_str().unwrap_or_default().to_owned()
    };
    let codes = about("custom-http-errors");
    assert!(
        codes.contains("\"600\"") && codes.contains("400 to 599"),
        "{codes}"
    );
    let service = about("default-backend");
    assert!(
        service.contains("errs/no-such") && service.contains("not found"),
        "{service}"
    );
}

async fn the_controller_default_backend_answers_unmatched_requests(provider: Provider) {
    let m = manifests().await;
    let flag = ["--default-backend-service", "ingress-nginx/global"];
    let p = provider.start_with(m.path(), &flag).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;
    let unmatched = get(&p, "nomatch.test", "/some/where", &[]).await;
    assert_eq!(unmatched.status, 200, "{unmatched:?}");
    assert_eq!(unmatched.service(), "global");
    assert_eq!(unmatched.json()["path"], "/some/where");
}

#[tokio::test]
async fn the_haproxy_provider_warns_about_custom_http_errors_and_serves_the_backends_answers() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("c.test", "/fine", 200, "ok").await;
    let own = get(&p, "c.test", "/gone", &[]).await;
    assert_eq!((own.status, own.service().as_str()), (404, "gone"));
    let ingress = p.ingress(NS, "c").await;
    let diagnostics = ingress["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (key, warned_about) in [("default-backend", false), ("custom-http-errors", true)] {
        let field = format!("metadata.annotations[{NGINX}/{key}]");
        let warned = diagnostics.iter().any(|d| {
            let message = d["message"].as_str().unwrap_or_default();
            d["field"] == field && message.starts_with("ignored by the haproxy provider")
        });
        assert_eq!(warned, warned_about, "{key}: {ingress:#}");
    }
}
