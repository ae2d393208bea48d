//! Every path rule of DESIGN.md, on one Ingress.

use crate::{backends, expect_routes, support::*};

#[tokio::test]
async fn path_rules_follow_ingress_v1_semantics() {
    let svcs = [
        ("root", 1),
        ("foo-exact", 1),
        ("foo-prefix", 1),
        ("foo-bar", 1),
        ("impl", 1),
        ("slash", 1),
        ("exact-slash", 1),
    ];
    let m = backends("paths", &svcs).await;
    let ing = ingress(
        "paths",
        "paths",
        "2026-01-01T00:00:00Z",
        &[
            ("p.test", "/", "Prefix", "root", "80"),
            // YAML order must not matter: the shorter prefix comes first here.
            ("p.test", "/foo", "Prefix", "foo-prefix", "80"),
            ("p.test", "/foo", "Exact", "foo-exact", "80"),
            ("p.test", "/foo/bar", "Prefix", "foo-bar", "80"),
            ("p.test", "/impl", "ImplementationSpecific", "impl", "80"),
            ("p.test", "/slash/", "Prefix", "slash", "80"),
            ("p.test", "/exact/", "Exact", "exact-slash", "80"),
        ],
    );
    m.write("ing.yaml", &ing);
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            // Exact beats Prefix at equal length; Exact is case-sensitive and whole-path.
            ("p.test", "/foo", 200, "foo-exact"),
            ("p.test", "/foo/", 200, "foo-prefix"),
            ("p.test", "/FOO", 200, "root"),
            // Element-wise prefix, not string prefix.
            ("p.test", "/foobar", 200, "root"),
            ("p.test", "/foo/baz", 200, "foo-prefix"),
            // Longest match wins.
            ("p.test", "/foo/bar", 200, "foo-bar"),
            ("p.test", "/foo/bar/", 200, "foo-bar"),
            ("p.test", "/foo/bar/baz", 200, "foo-bar"),
            ("p.test", "/foo/barn", 200, "foo-prefix"),
            // ImplementationSpecific is treated as Prefix.
            ("p.test", "/impl", 200, "impl"),
            ("p.test", "/impl/x", 200, "impl"),
            ("p.test", "/implx", 200, "root"),
            // A trailing slash in the rule is ignored for Prefix…
            ("p.test", "/slash", 200, "slash"),
            ("p.test", "/slash/a", 200, "slash"),
            // …but not for Exact.
            ("p.test", "/exact/", 200, "exact-slash"),
            ("p.test", "/exact", 200, "root"),
            // Queries are not part of the path.
            ("p.test", "/foo?x=/foo/bar", 200, "foo-exact"),
            // Fallback to `/`.
            ("p.test", "/anything/else", 200, "root"),
        ],
    )
    .await;
}

#[tokio::test]
async fn request_reaches_backend_unchanged_with_forwarding_headers() {
    let m = backends("fwd", &[("echo", 1)]).await;
    m.write(
        "ing.yaml",
        &ingress(
            "fwd",
            "fwd",
            "2026-01-01T00:00:00Z",
            &[("fwd.test", "/", "Prefix", "echo", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    let r = p
        .request(
            p.http,
            "POST",
            "fwd.test:8080",
            "/a/%7Eb/c?q=1&r=%2F",
            &[
                ("user-agent", "conformance/1.0"),
                ("x-forwarded-for", "10.1.2.3"),
            ],
            "hello",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let e = r.json();
    assert_eq!(e["service"], "echo");
    assert_eq!(e["method"], "POST");
    assert_eq!(e["path"], "/a/%7Eb/c");
    assert_eq!(e["query"], "q=1&r=%2F");
    assert_eq!(e["host"], "fwd.test:8080");
    assert_eq!(e["body_bytes"], 5);
    assert_eq!(e["headers"]["user-agent"], "conformance/1.0");
    assert_eq!(e["headers"]["x-forwarded-for"], "10.1.2.3, 127.0.0.1");
    assert_eq!(e["headers"]["x-forwarded-proto"], "http");
    assert_eq!(e["headers"]["x-forwarded-host"], "fwd.test:8080");
}
