//! `Strict-Transport-Security` on HTTPS responses: the process's (`--hsts-max-age`,
//! `--hsts-include-subdomains`, `--hsts-preload`) on both providers, on Portico's own answers
//! too, never over plain HTTP; an Ingress's own (`portico.dev/hsts-max-age`, …) on its routes
//! with the built-in proxy, `0` turning it off there. HTTP/1.1 requests take the proxy's own
//! path, HTTP/2 hyper's.

use crate::conformance::Provider;
use crate::support::*;
use crate::tls_support::*;
use http::Request;
use portico_tls::generate::Authority;

proxy_and_haproxy!(https_responses_carry_the_process_hsts);

const NS: &str = "hsts";

fn tls_ingress(name: &str, host: &str, annotations: &[(&str, &str)]) -> String {
    let rules = [(host, "/", "Prefix", "web", "80")];
    let y = ingress(NS, name, "2026-01-01T00:00:00Z", &rules);
    let tls = format!("spec:\n  tls:\n  - hosts: [{host}]\n    secretName: hsts-tls\n");
    annotated(&y.replacen("spec:\n", &tls, 1), annotations)
}

/// Manifests for `a.test` (no annotation), `b.test` (its own HSTS) and `c.test` (none), all
/// with TLS, and `plain.test` without.
async fn manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service(NS, "web", &ready(&web)));
    let ca = Authority::new("hsts").unwrap();
    let cert = ca.issue(&["a.test", "b.test", "c.test"]).unwrap();
    m.write("secret.json", &issued_secret(NS, "hsts-tls", &cert));
    m.write("a.yaml", &tls_ingress("a", "a.test", &[]));
    let own = [
        ("portico.dev/hsts-max-age", "60"),
        ("portico.dev/hsts-preload", "true"),
    ];
    m.write("b.yaml", &tls_ingress("b", "b.test", &own));
    let none = [("portico.dev/hsts-max-age", "0")];
    m.write("c.yaml", &tls_ingress("c", "c.test", &none));
    let plain = [("plain.test", "/", "Prefix", "web", "80")];
    m.write(
        "plain.yaml",
        &ingress(NS, "plain", "2026-01-01T00:00:00Z", &plain),
    );
    m
}

/// The HSTS field of an HTTPS answer for `host` over HTTP/1.1, and its status.
async fn over_h1(p: &Portico, host: &str) -> (u16, Option<String>) {
    let answer = H1::over(connect(p.https, Some(host), &[]).await)
        .await
        .get(host, "/")
        .await;
    (answer.status, hsts(&answer.headers))
}

/// The same over HTTP/2.
async fn over_h2(p: &Portico, host: &str) -> (u16, Option<String>) {
    let conn = connect(p.https, Some(host), &[b"h2"]).await;
    let uri = format!("https://{host}/");
    let req = Request::get(uri).body(Default::default()).unwrap();
    let answer = H2::over(conn).await.send(req).await;
    (answer.status, hsts(&answer.headers))
}

fn hsts(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get("strict-transport-security")?;
    Some(value.to_str().unwrap().to_owned())
}

async fn https_responses_carry_the_process_hsts(provider: Provider) {
    let m = manifests().await;
    let flags = ["--hsts-max-age", "31536000", "--hsts-include-subdomains"];
    let p = provider.start_with(m.path(), &flags).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    let process = Some("max-age=31536000; includeSubDomains".to_owned());
    assert_eq!(over_h1(&p, "a.test").await, (200, process.clone()));
    assert_eq!(over_h2(&p, "a.test").await, (200, process.clone()));
    // Portico's own answer (no route) over TLS.
    assert_eq!(over_h1(&p, "nowhere.test").await, (404, process.clone()));
    // Never over plain HTTP: neither a route's answer nor the redirect to HTTPS.
    let plain = p.get("plain.test", "/").await;
    assert_eq!((plain.status, hsts(&plain.headers)), (200, None));
    let redirect = p.get("a.test", "/").await;
    assert_eq!((redirect.status, hsts(&redirect.headers)), (308, None));
    if matches!(provider, Provider::Proxy) {
        // An Ingress's own replaces the process's on its routes; 0 turns it off.
        let own = Some("max-age=60; preload".to_owned());
        assert_eq!(over_h1(&p, "b.test").await, (200, own.clone()));
        assert_eq!(over_h2(&p, "b.test").await, (200, own));
        assert_eq!(over_h1(&p, "c.test").await, (200, None));
    }
    drop(p);

    // Off by default.
    let p = provider.start_with(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    assert_eq!(over_h1(&p, "a.test").await, (200, None));
    assert_eq!(over_h2(&p, "a.test").await, (200, None));
    if matches!(provider, Provider::Proxy) {
        let own = Some("max-age=60; preload".to_owned());
        assert_eq!(over_h1(&p, "b.test").await, (200, own));
    }
}

/// A companion without `hsts-max-age` means nothing: a warning names it.
#[tokio::test]
async fn an_hsts_companion_without_a_max_age_is_named_in_a_warning() {
    let m = manifests().await;
    let lone = [("portico.dev/hsts-include-subdomains", "true")];
    m.write("d.yaml", &tls_ingress("d", "d.test", &lone));
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    let ingress = p.ingress(NS, "d").await;
    let text = ingress["diagnostics"].to_string();
    assert!(
        text.contains("portico.dev/hsts-include-subdomains") && text.contains("hsts-max-age"),
        "{text}"
    );
}
