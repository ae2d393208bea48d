//! Host rules: exact, case-insensitive, port ignored, wildcard = exactly one label,
//! exact beats wildcard, host-less rules apply to every host.

use crate::{backends, expect_routes, support::*};

#[tokio::test]
async fn host_rules_follow_ingress_v1_semantics() {
    let m = backends(
        "hosts",
        &[("exact", 1), ("wild", 1), ("hostless", 1), ("only-api", 1)],
    )
    .await;
    let ing = ingress(
        "hosts",
        "hosts",
        "2026-01-01T00:00:00Z",
        &[
            ("*.foo.com", "/", "Prefix", "wild", "80"),
            ("bar.foo.com", "/", "Prefix", "exact", "80"),
            ("api.example.com", "/api", "Prefix", "only-api", "80"),
            ("", "/", "Prefix", "hostless", "80"),
        ],
    );
    m.write("ing.yaml", &ing);
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("bar.foo.com", "/", 200, "exact"),
            ("BAR.Foo.COM", "/", 200, "exact"),
            ("bar.foo.com:8080", "/", 200, "exact"),
            ("baz.foo.com", "/x", 200, "wild"),
            ("baz.foo.com:80", "/x", 200, "wild"),
            ("baz.bar.foo.com", "/", 200, "hostless"),
            ("foo.com", "/", 200, "hostless"),
            ("API.Example.COM", "/api/v1", 200, "only-api"),
            // An exact host with no matching path falls through to the host-less rules.
            ("api.example.com", "/other", 200, "hostless"),
            ("unknown.test", "/", 200, "hostless"),
            ("127.0.0.1", "/", 200, "hostless"),
        ],
    )
    .await;
}

#[tokio::test]
async fn unmatched_host_without_default_backend_is_404() {
    let m = backends("hosts2", &[("exact", 1)]).await;
    m.write(
        "ing.yaml",
        &ingress(
            "hosts2",
            "h",
            "2026-01-01T00:00:00Z",
            &[("foo.bar.com", "/", "Prefix", "exact", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("foo.bar.com", "/", 200, "exact"),
            ("subdomain.bar.com", "/", 404, ""),
            ("bar.com", "/", 404, ""),
        ],
    )
    .await;
    let r = p.get("subdomain.bar.com", "/").await;
    assert!(String::from_utf8_lossy(&r.body).contains("404"));
}
