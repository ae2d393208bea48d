//! Canary Ingresses on the real binary with the built-in proxy: a second Ingress with
//! `canary: "true"` for the same host and path takes the requests its header, cookie and
//! weight send it, in ingress-nginx's precedence (header, then cookie, then weight), as its
//! e2e tests (`test/e2e/annotations/canary.go`) describe.

use crate::conformance::Provider;
use crate::support::*;

const OLD: &str = "2026-01-01T00:00:00Z";
const NEW: &str = "2026-02-01T00:00:00Z";

/// Ingress `name` for `host` `/` to `svc`, created at `created`, with ingress-nginx keys.
fn at(name: &str, host: &str, svc: &str, created: &str, keys: &[(&str, &str)]) -> String {
    nginx_annotated(
        &ingress("can", name, created, &[(host, "/", "Prefix", svc, "80")]),
        keys,
    )
}

async fn manifests() -> Manifests {
    let m = Manifests::new();
    for svc in ["main", "canary"] {
        let pods = echo_pods(svc, 1).await;
        m.write(&format!("{svc}.yaml"), &service("can", svc, &ready(&pods)));
    }
    let sets: [(&str, &[(&str, &str)]); 4] = [
        (
            "c.test",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Canary"),
                ("canary-by-cookie", "canary"),
                ("canary-weight", "30"),
            ],
        ),
        (
            "v.test",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Version"),
                ("canary-by-header-value", "v2"),
            ],
        ),
        (
            "p.test",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Version"),
                ("canary-by-header-pattern", "^beta-[0-9]+$"),
                ("canary-weight", "100"),
            ],
        ),
        (
            "q.test",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Version"),
                ("canary-by-header-pattern", "^beta-[0-9]+$"),
            ],
        ),
    ];
    // On a use-regex host (the main Ingress's): every path an expression, the canary's too.
    m.write(
        "r-main.yaml",
        &at("r-main", "r.test", "main", OLD, &[("use-regex", "true")]),
    );
    let keys = [
        ("canary", "true"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-cookie", "canary"),
        ("canary-weight", "100"),
    ];
    m.write(
        "r-canary.yaml",
        &at("r-canary", "r.test", "canary", NEW, &keys),
    );
    for (host, keys) in sets {
        let (main, canary) = (format!("{host}-main"), format!("{host}-canary"));
        m.write(&format!("{main}.yaml"), &at(&main, host, "main", OLD, &[]));
        m.write(
            &format!("{canary}.yaml"),
            &at(&canary, host, "canary", NEW, keys),
        );
    }
    m
}

/// (host, request headers, the Service that should answer).
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

async fn served_by(p: &Portico, host: &str, headers: &[(&str, &str)]) -> String {
    let reply = p
        .request(p.http, "GET", host, "/", headers, "")
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{host} {headers:?}");
    reply.service()
}

proxy_and_haproxy!(canary_by_header_then_cookie_then_weight);

async fn canary_by_header_then_cookie_then_weight(provider: Provider) {
    let m = manifests().await;
    let p = provider.start(m.path()).await;
    p.wait_route("v.test", "/", 200, "main").await;
    let cases: &[Case] = &[
        ("c.test", &[("x-canary", "always")], "canary"),
        ("c.test", &[("X-Canary", "never")], "main"),
        // The header decides before the cookie.
        (
            "c.test",
            &[("x-canary", "never"), ("cookie", "canary=always")],
            "main",
        ),
        (
            "c.test",
            &[("x-canary", "always"), ("cookie", "canary=never")],
            "canary",
        ),
        // A header value other than always / never leaves it to the cookie.
        (
            "c.test",
            &[("x-canary", "maybe"), ("cookie", "a=1; canary=always")],
            "canary",
        ),
        ("c.test", &[("cookie", "canary=never")], "main"),
        // With a header value, only that value sends to the canary; "always" is no value.
        ("v.test", &[("x-version", "v2")], "canary"),
        ("v.test", &[("x-version", "always")], "main"),
        ("v.test", &[("x-version", "v1")], "main"),
        ("v.test", &[], "main"),
        // A pattern is searched in the value; a request it does not match falls to the weight.
        ("p.test", &[("x-version", "beta-12")], "canary"),
        ("p.test", &[("x-version", "gamma")], "canary"),
        ("q.test", &[("x-version", "beta-12")], "canary"),
        ("q.test", &[("x-version", "gamma")], "main"),
        ("q.test", &[("x-version", "xbeta-1")], "main"),
        ("q.test", &[("x-version", "Beta-1")], "main"),
        // A use-regex host: header, then cookie, then the weight (all of it).
        ("r.test", &[("x-canary", "never")], "main"),
        ("r.test", &[("x-canary", "always")], "canary"),
        ("r.test", &[("cookie", "canary=never")], "main"),
        ("r.test", &[], "canary"),
    ];
    for (host, headers, want) in cases {
        assert_eq!(
            served_by(&p, host, headers).await,
            *want,
            "{host} {headers:?}"
        );
    }
    // canary-weight 30 of 100: the proxy sends exactly 30 of any 100 requests the header and
    // cookie leave; haproxy draws at random (120 of 400 expected, a deviation about 9).
    let mut canary = 0;
    for _ in 0..400 {
        if served_by(&p, "c.test", &[("x-canary", "maybe")]).await == "canary" {
            canary += 1;
        }
    }
    match provider {
        Provider::Proxy => assert_eq!(canary, 120),
        _ => assert!((80..=160).contains(&canary), "{canary} of 400"),
    }
}
