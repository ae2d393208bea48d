//! ingress-nginx's location annotations on the real binary with the built-in proxy: requests
//! and answers as ingress-nginx's documentation and e2e tests describe them (rewrite-target
//! with use-regex and capture groups, regex paths for the whole host, x-forwarded-prefix,
//! upstream-vhost, app-root, permanent and temporal redirects, force-ssl-redirect, CORS with
//! its preflight), and the haproxy provider's warnings for what it does not serve.

use crate::conformance::Provider;
use crate::support::*;
use serde_json::Value;

const NGINX: &str = "nginx.ingress.kubernetes.io";
const CREATED: &str = "2026-01-01T00:00:00Z";
const BIN: &str = env!("CARGO_BIN_EXE_portico");

/// An Ingress with one rule per (host, path, pathType) to service `web`, annotated with
/// ingress-nginx's keys (`key` without the prefix).
fn nginx(name: &str, paths: &[(&str, &str, &str)], annotations: &[(&str, &str)]) -> String {
    let rules: Vec<(&str, &str, &str, &str, &str)> = paths
        .iter()
        .map(|(host, path, kind)| (*host, *path, *kind, "web", "80"))
        .collect();
    nginx_annotated(&ingress("mig", name, CREATED, &rules), annotations)
}

/// What the echo backend received: path, query, and a header.
fn upstream(reply: &Reply, header: &str) -> (u16, String, Value, Value) {
    let json = reply.json();
    (
        reply.status,
        json["path"].as_str().unwrap_or("").to_owned(),
        json["query"].clone(),
        json["headers"][header].clone(),
    )
}

fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply.headers.get(name).map(|v| v.to_str().unwrap())
}

async fn rewrite_manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("mig", "web", &ready(&web)));
    let rewritten = [("rw.test", "/something(/|$)(.*)", "ImplementationSpecific")];
    let rewrite = [
        ("rewrite-target", "/$2"),
        ("x-forwarded-prefix", "/something"),
    ];
    m.write("rw.yaml", &nginx("rw", &rewritten, &rewrite));
    // ingress-nginx's documented caveat: on a regex host the longer expression takes a path
    // an Exact path names, and an Exact path matches as an expression from the start.
    let other = echo_pods("other", 1).await;
    m.write("other.yaml", &service("mig", "other", &ready(&other)));
    let order = [
        ("order.test", "/foo/bar/bar", "Exact", "other", "80"),
        (
            "order.test",
            "/foo/bar/[A-Z0-9]{3}",
            "ImplementationSpecific",
            "web",
            "80",
        ),
        ("order.test", "/foo", "Prefix", "other", "80"),
    ];
    let keys = [("nginx.ingress.kubernetes.io/use-regex", "true")];
    m.write(
        "order.yaml",
        &annotated(&ingress("mig", "order", CREATED, &order), &keys),
    );
    // Another Ingress on the same host, without annotations: its path is a regex too.
    let acme = [("rw.test", "/.well-known/acme", "Prefix")];
    m.write("acme.yaml", &nginx("acme", &acme, &[]));
    let groups = [(
        "groups.test",
        "/api/(v[0-9]+)/(.*)",
        "ImplementationSpecific",
    )];
    m.write(
        "groups.yaml",
        &nginx("groups", &groups, &[("rewrite-target", "/$2/$1")]),
    );
    let optional = [("opt.test", "/a(/b)?(/.*)", "ImplementationSpecific")];
    m.write(
        "opt.yaml",
        &nginx("opt", &optional, &[("rewrite-target", "/x$1$2")]),
    );
    // A named group: the regex crate reads it, the syntax haproxy is given keeps out of it.
    let named = [("uni.test", "/(?P<name>[a-z]+)", "ImplementationSpecific")];
    m.write("uni.yaml", &nginx("uni", &named, &[("use-regex", "true")]));
    let plain = [("plain.test", "/foo", "Prefix")];
    m.write(
        "plain.yaml",
        &nginx("plain", &plain, &[("rewrite-target", "/")]),
    );
    let regex = [
        ("re.test", "/ok[0-9]+", "ImplementationSpecific"),
        ("re.test", "/bad(", "ImplementationSpecific"),
    ];
    m.write("re.yaml", &nginx("re", &regex, &[("use-regex", "true")]));
    m
}

proxy_and_haproxy!(
    rewrite_target_with_use_regex_rewrites_by_capture_groups,
    redirects_app_root_upstream_vhost_and_force_ssl_redirect,
    cors_answers_preflights_and_marks_allowed_origins,
);

async fn rewrite_target_with_use_regex_rewrites_by_capture_groups(provider: Provider) {
    let m = rewrite_manifests().await;
    let p = provider.start(m.path()).await;
    p.wait_route("groups.test", "/api/v2/users", 200, "web")
        .await;
    let cases = [
        ("rw.test", "/something", "/", Value::Null),
        ("rw.test", "/something/", "/", Value::Null),
        ("rw.test", "/something/new", "/new", Value::Null),
        (
            "rw.test",
            "/SomeThing/new/?x=1",
            "/new/",
            Value::from("x=1"),
        ),
        ("groups.test", "/api/v2/users", "/users/v2", Value::Null),
        // Without groups the whole path becomes the target (ingress-nginx since 0.22), and
        // the path is a regex: `/foo` matches `/foobar` too.
        ("plain.test", "/foo/bar", "/", Value::Null),
        ("plain.test", "/foobar", "/", Value::Null),
        // An empty group is empty in the new path, and so is one that took no part.
        ("groups.test", "/api/v3/", "//v3", Value::Null),
        ("opt.test", "/a/c", "/x/c", Value::Null),
        ("opt.test", "/A/b/c", "/x/b/c", Value::Null),
    ];
    for (host, path, want, query) in cases {
        let got = upstream(&p.get(host, path).await, "x-forwarded-prefix");
        let prefix = if host == "rw.test" {
            Value::from("/something")
        } else {
            Value::Null
        };
        assert_eq!(got, (200, want.to_owned(), query, prefix), "{host}{path}");
    }
    for (path, service) in [
        ("/foo/bar/bar", "web"),
        ("/FOO/BAR/B4Z", "web"),
        ("/foo/bar/ba", "other"),
        ("/foobar", "other"),
    ] {
        assert_eq!(p.get("order.test", path).await.service(), service, "{path}");
    }
    assert_eq!(p.get("order.test", "/fo").await.status, 404);
    // The other Ingress of the host: a regex path of its own, not rewritten.
    let acme = p.get("rw.test", "/.well-known/acme/challenge").await;
    assert_eq!(
        upstream(&acme, "x-forwarded-prefix"),
        (
            200,
            "/.well-known/acme/challenge".to_owned(),
            Value::Null,
            Value::Null
        )
    );
    assert_eq!(p.get("rw.test", "/other").await.status, 404);
    // A path that is no regular expression is not served; the rest of the Ingress is.
    assert_eq!(p.get("re.test", "/ok12").await.status, 200);
    assert_eq!(p.get("re.test", "/okx").await.status, 404);
    let ingress = p.ingress("mig", "re").await;
    let text = ingress["diagnostics"].to_string();
    assert!(
        text.contains("metadata.annotations[nginx.ingress.kubernetes.io/use-regex]"),
        "{text}"
    );
    assert!(
        text.contains("\\\"/bad(\\\" is not a valid regular expression"),
        "{text}"
    );
    // The proxy serves the named group; haproxy leaves the path out with an error naming it
    // (`validate --provider haproxy` prints the render's diagnostics).
    let uni = p.get("uni.test", "/abc").await.status;
    match provider {
        Provider::Haproxy => {
            assert_eq!(uni, 404);
            let out = std::process::Command::new(BIN)
                .args(["validate", "--provider", "haproxy", "-f"])
                .arg(m.path())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().find(|l| l.contains("Ingress mig/uni"));
            let line = line.unwrap_or_else(|| panic!("{text}"));
            assert!(line.contains("path on a use-regex host"), "{line}");
            assert!(line.contains("not served by haproxy"), "{line}");
        }
        _ => assert_eq!(uni, 200),
    }
}

async fn redirects_app_root_upstream_vhost_and_force_ssl_redirect(provider: Provider) {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("mig", "web", &ready(&web)));
    let at = |host| [(host, "/", "Prefix")];
    m.write(
        "pr.yaml",
        &nginx(
            "pr",
            &at("pr.test"),
            &[("permanent-redirect", "https://example.com/new")],
        ),
    );
    m.write(
        "pr308.yaml",
        &nginx(
            "pr308",
            &at("pr308.test"),
            &[
                ("permanent-redirect", "https://example.com/"),
                ("permanent-redirect-code", "308"),
            ],
        ),
    );
    m.write(
        "tr.yaml",
        &nginx(
            "tr",
            &at("tr.test"),
            &[
                ("temporal-redirect", "https://example.com/tmp"),
                ("permanent-redirect", "https://x.test/"),
            ],
        ),
    );
    m.write(
        "ar.yaml",
        &nginx("ar", &at("ar.test"), &[("app-root", "/app1")]),
    );
    m.write(
        "vh.yaml",
        &nginx("vh", &at("vh.test"), &[("upstream-vhost", "internal.svc")]),
    );
    m.write(
        "fs.yaml",
        &nginx("fs", &at("fs.test"), &[("force-ssl-redirect", "true")]),
    );
    let p = provider.start(m.path()).await;
    p.wait_route("vh.test", "/", 200, "web").await;
    let redirect = |r: &Reply| (r.status, header(r, "location").unwrap_or("").to_owned());
    let pr = p.get("pr.test", "/any/path?q=1").await;
    assert_eq!(redirect(&pr), (301, "https://example.com/new".to_owned()));
    assert_eq!(
        redirect(&p.get("pr308.test", "/").await),
        (308, "https://example.com/".to_owned())
    );
    // temporal-redirect wins over permanent-redirect, as ingress-nginx reads them.
    assert_eq!(
        redirect(&p.get("tr.test", "/").await),
        (302, "https://example.com/tmp".to_owned())
    );
    assert_eq!(
        redirect(&p.get("ar.test", "/").await),
        (302, "http://ar.test/app1".to_owned())
    );
    assert_eq!(p.get("ar.test", "/app1").await.service(), "web");
    let vh = p.get("vh.test", "/x").await;
    assert_eq!(vh.json()["host"], "internal.svc", "{}", vh.json());
    assert_eq!(vh.json()["headers"]["x-forwarded-host"], "vh.test");
    let fs = p.get("fs.test", "/p?q=1").await;
    let https = format!("https://fs.test:{}/p?q=1", p.https.port());
    assert_eq!(redirect(&fs), (308, https));
}

async fn cors_answers_preflights_and_marks_allowed_origins(provider: Provider) {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("mig", "web", &ready(&web)));
    let at = |host| [(host, "/", "Prefix")];
    m.write(
        "cors.yaml",
        &nginx(
            "cors",
            &at("cors.test"),
            &[
                ("enable-cors", "true"),
                (
                    "cors-allow-origin",
                    "https://app.example.com, https://*.example.org",
                ),
                ("cors-max-age", "600"),
                ("cors-expose-headers", "X-Total"),
            ],
        ),
    );
    m.write(
        "star.yaml",
        &nginx(
            "star",
            &at("star.test"),
            &[("enable-cors", "true"), ("cors-allow-credentials", "false")],
        ),
    );
    let p = provider.start(m.path()).await;
    p.wait_route("cors.test", "/", 200, "web").await;
    let send =
        |method: &'static str, host: &'static str, headers: Vec<(&'static str, &'static str)>| {
            let p = &p;
            async move {
                p.request(p.http, method, host, "/api", &headers, "")
                    .await
                    .unwrap()
            }
        };
    // A preflight with credentials from an allowed origin: answered here, 204.
    let pre = send(
        "OPTIONS",
        "cors.test",
        vec![
            ("origin", "https://app.example.com"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "authorization"),
        ],
    )
    .await;
    assert_eq!(pre.status, 204);
    assert!(pre.body.is_empty(), "the backend answered");
    assert_eq!(
        header(&pre, "access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(
        header(&pre, "access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(
        header(&pre, "access-control-allow-methods"),
        Some("GET, PUT, POST, DELETE, PATCH, OPTIONS")
    );
    assert!(
        header(&pre, "access-control-allow-headers")
            .unwrap()
            .contains("Authorization")
    );
    assert_eq!(header(&pre, "access-control-max-age"), Some("600"));
    // An origin not allowed: no CORS fields, and the backend answers the OPTIONS itself.
    let evil = send(
        "OPTIONS",
        "cors.test",
        vec![
            ("origin", "https://evil.example.com"),
            ("access-control-request-method", "PUT"),
        ],
    )
    .await;
    assert_eq!((evil.status, evil.service()), (200, "web".to_owned()));
    assert_eq!(header(&evil, "access-control-allow-origin"), None);
    // A simple request from an origin of the wildcard: the backend's answer with the fields.
    let get = send(
        "GET",
        "cors.test",
        vec![("origin", "https://shop.example.org")],
    )
    .await;
    assert_eq!(get.service(), "web");
    assert_eq!(
        header(&get, "access-control-allow-origin"),
        Some("https://shop.example.org")
    );
    assert_eq!(
        header(&get, "access-control-expose-headers"),
        Some("X-Total")
    );
    let deeper = send(
        "GET",
        "cors.test",
        vec![("origin", "https://a.b.example.org")],
    )
    .await;
    assert_eq!(header(&deeper, "access-control-allow-origin"), None);
    let none = send("GET", "cors.test", vec![]).await;
    assert_eq!(header(&none, "access-control-allow-origin"), None);
    // The default origin is `*`: every request gets the fields, credentials as configured.
    let star = send("GET", "star.test", vec![]).await;
    assert_eq!(header(&star, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&star, "access-control-allow-credentials"), None);
    assert_eq!(send("OPTIONS", "star.test", vec![]).await.status, 204);
}

/// What the haproxy provider does not serve is a warning naming the annotation and the
/// provider (never silence).
#[tokio::test]
async fn the_haproxy_provider_names_each_annotation_it_does_not_serve() {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("mig", "web", &ready(&web)));
    let keys = [("auth-url", "http://auth.test/verify")];
    let served = [
        ("force-ssl-redirect", "true"),
        ("from-to-www-redirect", "true"),
        ("rewrite-target", "/$1"),
        ("use-regex", "true"),
        ("x-forwarded-prefix", "/p"),
        ("upstream-vhost", "x.svc"),
        ("app-root", "/a"),
        ("permanent-redirect", "https://x.test/"),
        ("enable-cors", "true"),
    ];
    let all: Vec<(&str, &str)> = keys.iter().chain(&served).copied().collect();
    m.write(
        "h.yaml",
        &nginx("h", &[("h.test", "/(.*)", "ImplementationSpecific")], &all),
    );
    let out = std::process::Command::new(BIN)
        .args(["validate", "--provider", "haproxy", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for (key, _) in keys {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("[{NGINX}/{key}]")));
        let line = line.unwrap_or_else(|| panic!("no warning about {key}: {text}"));
        assert!(line.contains("ignored by the haproxy provider"), "{line}");
    }
    // Served by haproxy since: no warning.
    for (key, _) in served {
        assert!(!text.contains(&format!("[{NGINX}/{key}]")), "{key}: {text}");
    }
    // The built-in proxy serves them: no such warning.
    let out = std::process::Command::new(BIN)
        .args(["validate", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("metadata.annotations"), "{text}");
}

/// `server-alias` is translation alone: both providers serve it.
async fn server_alias(haproxy: bool) {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("mig", "web", &ready(&web)));
    let alias = [("server-alias", "www.alias.test, *.alias.example")];
    let paths = [("alias.test", "/app", "Prefix")];
    m.write("alias.yaml", &nginx("alias", &paths, &alias));
    let p = if haproxy {
        Portico::start_haproxy(m.path(), &[]).await
    } else {
        Portico::start(m.path(), &[]).await
    };
    p.wait_route("alias.test", "/app", 200, "web").await;
    p.wait_route("www.alias.test", "/app", 200, "web").await;
    for host in ["www.alias.test", "a.alias.example", "WWW.ALIAS.TEST:8080"] {
        let reply = p.get(host, "/app/x").await;
        assert_eq!(
            (reply.status, reply.service()),
            (200, "web".to_owned()),
            "{host}"
        );
    }
    assert_eq!(p.get("www.alias.test", "/other").await.status, 404);
    assert_eq!(p.get("a.b.alias.example", "/app").await.status, 404);
}

#[tokio::test]
async fn server_alias_serves_the_hosts_paths_under_its_names() {
    server_alias(false).await;
}

#[tokio::test]
async fn server_alias_on_haproxy() {
    server_alias(true).await;
}
