//! `portico migrate --to gateway-api`, differentially: a corpus of Ingresses written for
//! ingress-nginx (hosts, path types, a named port, TLS, a default backend, a regex rewrite, a
//! full-path rewrite, a permanent redirect, app-root, a canary by header and by cookie,
//! upstream-vhost) is served by one Portico; its conversion, by a second Portico reading only
//! the Gateway API objects and the same Services. A fixed list of requests gets the same
//! status, backend, upstream path and Host, and `Location`, from both.

use crate::backends;
use crate::support::{Manifests, Portico, Reply, annotated, ingress};
use crate::tls_support::{H1, connect, issued_secret, leaf_of};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_portico");
const NS: &str = "mg";
const CREATED: &str = "2026-01-01T00:00:00Z";

fn nginx(key: &str) -> String {
    format!("nginx.ingress.kubernetes.io/{key}")
}

/// The Ingresses; `secret` is the TLS Secret of `secure.test`.
fn corpus(secret: &str) -> String {
    let plain = ingress(
        NS,
        "shop",
        CREATED,
        &[
            ("a.test", "/", "Prefix", "web", "http"),
            ("a.test", "/api", "ImplementationSpecific", "api", "80"),
            ("a.test", "/exact", "Exact", "api", "80"),
        ],
    );
    let secure = ingress(
        NS,
        "secure",
        CREATED,
        &[("secure.test", "/", "Prefix", "web", "80")],
    )
    .replace(
        "spec:\n",
        "spec:\n  tls:\n  - hosts: [secure.test]\n    secretName: secure-tls\n",
    );
    let tapi = ingress(
        NS,
        "tapi",
        CREATED,
        &[("tapi.test", "/api", "Prefix", "api", "80")],
    )
    .replace(
        "spec:\n",
        "spec:\n  tls:\n  - hosts: [tapi.test]\n    secretName: secure-tls\n",
    );
    let regex = annotated(
        &ingress(
            NS,
            "regex",
            CREATED,
            &[(
                "r.test",
                "/something(/|$)(.*)",
                "ImplementationSpecific",
                "api",
                "80",
            )],
        ),
        &[
            (&nginx("use-regex"), "true"),
            (&nginx("rewrite-target"), "/$2"),
        ],
    );
    let full = annotated(
        &ingress(
            NS,
            "full",
            CREATED,
            &[("f.test", "/old", "Prefix", "api", "80")],
        ),
        &[(&nginx("rewrite-target"), "/fixed")],
    );
    let moved = annotated(
        &ingress(
            NS,
            "moved",
            CREATED,
            &[("moved.test", "/", "Prefix", "web", "80")],
        ),
        &[(
            &nginx("permanent-redirect"),
            "https://elsewhere.test/landing",
        )],
    );
    let root = annotated(
        &ingress(
            NS,
            "root",
            CREATED,
            &[("root.test", "/", "Prefix", "web", "80")],
        ),
        &[(&nginx("app-root"), "/app")],
    );
    let main = ingress(
        NS,
        "main",
        CREATED,
        &[("c.test", "/", "Prefix", "web", "80")],
    );
    let canary = annotated(
        &ingress(
            NS,
            "beta",
            "2026-01-02T00:00:00Z",
            &[("c.test", "/", "Prefix", "canary", "80")],
        ),
        &[
            (&nginx("canary"), "true"),
            (&nginx("canary-by-header"), "X-Canary"),
            (&nginx("canary-by-cookie"), "beta"),
        ],
    );
    let vhost = annotated(
        &ingress(
            NS,
            "vhost",
            CREATED,
            &[("vhost.test", "/", "Prefix", "web", "80")],
        ),
        &[(&nginx("upstream-vhost"), "internal.test")],
    );
    let fallback = format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: fallback, \
         namespace: {NS}, creationTimestamp: \"{CREATED}\"}}\nspec:\n  ingressClassName: \
         portico\n  defaultBackend: {{service: {{name: fallback, port: {{number: 80}}}}}}\n"
    );
    [
        plain, secure, tapi, regex, full, moved, root, main, canary, vhost, fallback,
    ]
    .join("\n")
        + "\n---\n"
        + secret
}

/// A request compared: host, path, request headers.
type Request = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const REQUESTS: &[Request] = &[
    ("a.test", "/", &[]),
    ("a.test", "/api", &[]),
    ("a.test", "/api/orders", &[]),
    ("a.test", "/exact", &[]),
    ("a.test", "/exact/more", &[]),
    ("secure.test", "/", &[]),
    ("secure.test", "/deep/page?q=1", &[]),
    ("r.test", "/something/new/x", &[]),
    ("r.test", "/something", &[]),
    ("r.test", "/elsewhere", &[]),
    ("f.test", "/old/deep", &[]),
    ("f.test", "/old", &[]),
    ("moved.test", "/anything", &[]),
    ("root.test", "/", &[]),
    ("root.test", "/page", &[]),
    ("c.test", "/", &[]),
    ("c.test", "/", &[("x-canary", "always")]),
    ("c.test", "/", &[("x-canary", "never")]),
    ("c.test", "/", &[("x-canary", "maybe")]),
    ("c.test", "/", &[("cookie", "beta=always")]),
    ("c.test", "/", &[("cookie", "session=1; beta=always")]),
    ("c.test", "/", &[("cookie", "beta=never")]),
    (
        "c.test",
        "/",
        &[("x-canary", "never"), ("cookie", "beta=always")],
    ),
    ("vhost.test", "/", &[]),
    ("nowhere.test", "/", &[]),
];

/// What is compared of an answer: status, backend, upstream path and Host, and `Location`
/// made absolute against the request (a relative and an absolute one are the same answer).
fn seen(reply: &Reply, host: &str, https_port: u16) -> String {
    let echo = reply.json();
    let location = reply.headers.get("location").map(|l| {
        let l = l.to_str().unwrap_or_default();
        if l.starts_with('/') {
            format!("http://{host}{l}")
        } else if let Some(rest) = l.strip_prefix(&format!("https://{host}:{https_port}")) {
            // Portico names the port of its HTTPS listener (--https-listen) in the HTTP →
            // HTTPS redirect; the Gateway's HTTPS listener is port 443, which Portico binds
            // on --https-listen, so its redirect names none. On port 443 both are the same.
            format!("https://{host}{rest}")
        } else {
            l.to_owned()
        }
    });
    format!(
        "{} service={:?} path={:?} host={:?} location={location:?}",
        reply.status,
        reply.service(),
        echo["path"].as_str().unwrap_or_default(),
        echo["host"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn the_gateway_api_objects_migrate_writes_route_as_the_ingresses_do() {
    let services = backends(
        NS,
        &[("web", 1), ("api", 1), ("canary", 1), ("fallback", 1)],
    )
    .await;
    let authority = portico_tls::generate::Authority::new("migrate test").unwrap();
    let cert = authority.issue(&["secure.test", "tapi.test"]).unwrap();
    let secret = issued_secret(NS, "secure-tls", &cert);
    services.write("ingresses.yaml", &corpus(&secret));

    let out = std::process::Command::new(BIN)
        .args(["migrate", "--to", "gateway-api", "-f"])
        .arg(services.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The hosts whose paths ingress-nginx reads as regular expressions (use-regex, and any
    // rewrite-target) are expressed with a difference, which is said; nothing else is.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let noted: Vec<&str> = (stderr.lines())
        .filter_map(|l| l.strip_prefix("Ingress "))
        .filter_map(|l| l.split_once(": host ").map(|(ingress, _)| ingress))
        .collect();
    assert_eq!(noted, ["mg/full", "mg/regex"], "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("Ingress ")).count(),
        2,
        "{stderr}"
    );

    // The second Portico reads the Services, the Secret and the Gateway API objects only.
    let converted = Manifests::new();
    let backends_yaml = std::fs::read_to_string(services.file("backends.yaml")).unwrap();
    converted.write("backends.yaml", &backends_yaml);
    converted.write("secret.json", &secret);
    converted.write("gateway.yaml", &stdout);
    let kinds: Vec<String> = serde_saphyr::from_multiple::<Value>(&stdout)
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        kinds.starts_with(&["GatewayClass".into(), "Gateway".into()]),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "Ingress"), "{kinds:?}");

    let ingresses = Portico::start(services.path(), &[]).await;
    let gateway = Portico::start(converted.path(), &[]).await;
    let mut differences = Vec::new();
    for (host, path, headers) in REQUESTS {
        let a = ingresses.request(ingresses.http, "GET", host, path, headers, "");
        let b = gateway.request(gateway.http, "GET", host, path, headers, "");
        let a = seen(&a.await.unwrap(), host, ingresses.https.port());
        let b = seen(&b.await.unwrap(), host, gateway.https.port());
        if a != b {
            differences.push(format!(
                "{host}{path} {headers:?}:\n  Ingresses: {a}\n  Gateway:   {b}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));

    // HTTPS with the Ingresses' certificate, on both; a TLS host's unmatched path reaches the
    // default backend there too.
    let https = [
        ("secure.test", "/", "web"),
        ("tapi.test", "/api/x", "api"),
        ("tapi.test", "/other", "fallback"),
    ];
    for (which, p) in [("Ingresses", &ingresses), ("Gateway", &gateway)] {
        for (host, path, service) in https {
            let conn = connect(p.https, Some(host), &[b"http/1.1"]).await;
            assert_eq!(conn.leaf, leaf_of(&cert.chain_pem));
            let answer = H1::over(conn).await.get(host, path).await;
            let got = (answer.status, answer.service());
            assert_eq!(
                got,
                (200, service.to_owned()),
                "{which} {host}{path}: {}",
                answer.body
            );
        }
    }
}
