//! ingress-nginx's `from-to-www-redirect` on the real binary with both providers: the
//! other name of an Ingress's host (`www.` added or taken off) answers 308 to the host with
//! the path and query kept, on the request's own scheme and port (HTTPS stays HTTPS); a name
//! another Ingress routes is left to it, with a warning naming the Ingress and annotation.

use crate::support::*;
use crate::tls_support::*;
use portico_tls::generate::Authority;

const NGINX: &str = "nginx.ingress.kubernetes.io";
const CREATED: &str = "2026-01-01T00:00:00Z";
const NS: &str = "www";
const KEY: (&str, &str) = ("nginx.ingress.kubernetes.io/from-to-www-redirect", "true");

async fn manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service(NS, "web", &ready(&web)));
    let other = echo_pods("other", 1).await;
    m.write("other.yaml", &service(NS, "other", &ready(&other)));
    let ca = Authority::new("www").unwrap();
    let cert = ca.issue(&["example.test", "www.example.test"]).unwrap();
    m.write("secret.json", &issued_secret(NS, "www-tls", &cert));
    let rules = [("example.test", "/", "Prefix", "web", "80")];
    let tls = "spec:\n  tls:\n  - hosts: [example.test]\n    secretName: www-tls\n";
    let y = ingress(NS, "bare", CREATED, &rules).replacen("spec:\n", tls, 1);
    m.write("bare.yaml", &annotated(&y, &[KEY]));
    let rules = [("www.second.test", "/", "Prefix", "web", "80")];
    m.write(
        "second.yaml",
        &annotated(&ingress(NS, "second", CREATED, &rules), &[KEY]),
    );
    let rules = [("taken.test", "/", "Prefix", "web", "80")];
    m.write(
        "taken.yaml",
        &annotated(&ingress(NS, "taken", CREATED, &rules), &[KEY]),
    );
    let rules = [("www.taken.test", "/", "Prefix", "other", "80")];
    m.write("holder.yaml", &ingress(NS, "holder", CREATED, &rules));
    m
}

fn location(reply: &Reply) -> &str {
    reply.headers["location"].to_str().unwrap()
}

proxy_and_haproxy!(the_other_name_redirects_to_the_host_keeping_scheme_port_path_and_query);

async fn the_other_name_redirects_to_the_host_keeping_scheme_port_path_and_query(
    provider: crate::conformance::Provider,
) {
    let m = manifests().await;
    let p = provider.start(m.path()).await;
    p.wait_route("www.taken.test", "/", 200, "other").await;

    let to_bare = p.get("www.example.test", "/a/b/?x=1&y=2").await;
    assert_eq!(to_bare.status, 308, "{to_bare:?}");
    assert_eq!(location(&to_bare), "http://example.test/a/b/?x=1&y=2");
    let with_port = p.get("www.example.test:8080", "/").await;
    assert_eq!(location(&with_port), "http://example.test:8080/");
    let to_www = p.get("second.test", "/c").await;
    assert_eq!(to_www.status, 308, "{to_www:?}");
    assert_eq!(location(&to_www), "http://www.second.test/c");
    // The hosts themselves are served.
    assert_eq!(
        p.get("example.test", "/").await.status,
        308,
        "ssl-redirect of a TLS host"
    );
    assert_eq!(p.get("www.second.test", "/").await.service(), "web");

    // Over HTTPS the redirect stays on HTTPS.
    let conn = connect(p.https, Some("www.example.test"), &[]).await;
    let answer = H1::over(conn).await.get("www.example.test", "/s?q=1").await;
    assert_eq!(answer.status, 308);
    assert_eq!(answer.headers["location"], "https://example.test/s?q=1");
}

#[tokio::test]
async fn a_name_another_ingress_routes_is_not_redirected_and_is_reported() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("www.taken.test", "/", 200, "other").await;
    assert_eq!(p.get("taken.test", "/").await.service(), "web");
    let ingress = p.ingress(NS, "taken").await;
    let field = format!("metadata.annotations[{NGINX}/from-to-www-redirect]");
    let diagnostics = ingress["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let found: Vec<_> = diagnostics.iter().filter(|d| d["field"] == field).collect();
    assert_eq!(found.len(), 1, "{ingress:#}");
    let message = found[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("www.taken.test is routed already"),
        "{message}"
    );
}
