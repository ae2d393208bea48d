//! The shared conformance kit: the scenarios of the Kubernetes Ingress conformance suite
//! (kubernetes-sigs/ingress-controller-conformance, features/*.feature), replayed on manifest
//! files — the same Ingresses, requests and expectations, written as tables — plus the 404 /
//! 503 / 502 answers. Every scenario runs once per provider: `proxy` (the built-in proxy) and
//! `haproxy` (a real haproxy, installed by scripts/test.sh), with the same expectations; and
//! once more with the built-in proxy reading the same objects from the Kubernetes API
//! (`kubernetes`: a fake API server speaking the real protocol), where the Ingress status must
//! also reach the API server.

use crate::kube_support::Cluster;
use crate::tls_support::{H1, Trust, issued_secret, try_connect};
use crate::{expect_routes, support::*};
use portico_tls::generate::Authority;

/// The providers every scenario runs against.
#[derive(Debug, Clone, Copy)]
pub enum Provider {
    Proxy,
    Haproxy,
    /// The built-in proxy, objects from a fake API server (`--kubernetes`).
    Kubernetes,
    /// A controller and two agents as separate processes over a real etcd; the kit talks to
    /// the second agent.
    Distributed,
    /// The same over a TLS-only etcd with client certificates; the kit talks to the first agent.
    DistributedTls,
}

impl Provider {
    /// `portico run` on `dir` with this provider serving the run's listeners.
    pub async fn start(self, dir: &std::path::Path) -> Portico {
        match self {
            Provider::Proxy => Portico::start(dir, &[]).await,
            Provider::Haproxy => Portico::start_haproxy(dir, &[]).await,
            Provider::Kubernetes => {
                let cluster = Cluster::new().await;
                cluster.apply_dir(dir);
                let mut p = Portico::start_kube(&cluster, &[]).await;
                p.cluster = Some(cluster);
                p
            }
            Provider::Distributed => crate::distributed::start(dir, false, 1).await,
            Provider::DistributedTls => crate::distributed::start(dir, true, 0).await,
        }
    }

    /// `portico run` on `dir` with `extra` flags: the built-in proxy or haproxy.
    pub async fn start_with(self, dir: &std::path::Path, extra: &[&str]) -> Portico {
        match self {
            Provider::Haproxy => Portico::start_haproxy(dir, extra).await,
            Provider::Proxy => Portico::start(dir, extra).await,
            other => panic!("start_with runs the proxy or haproxy, not {other:?}"),
        }
    }
}

/// One test per (scenario, provider): `conformance::proxy::path_rules`,
/// `conformance::haproxy::path_rules`, …
macro_rules! per_provider {
    ($($scenario:ident),* $(,)?) => {
        mod proxy {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario(super::Provider::Proxy).await
            })*
        }
        mod haproxy {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario(super::Provider::Haproxy).await
            })*
        }
        mod kubernetes {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario(super::Provider::Kubernetes).await
            })*
        }
        mod distributed {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario(super::Provider::Distributed).await
            })*
        }
        mod distributed_tls {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario(super::Provider::DistributedTls).await
            })*
        }
    };
}

per_provider!(
    default_backend,
    host_rules,
    path_rules,
    ingress_class,
    load_balancing,
    no_ready_member_is_503_and_upstream_failure_is_502,
);

/// Echo Services on port 8080 (named `http`), `pods` replicas each, in namespace `ns`.
async fn services(m: &Manifests, ns: &str, names: &[(&str, usize)]) {
    let mut y = String::new();
    for (name, pods) in names {
        y.push_str(&service_on_port(
            ns,
            name,
            8080,
            &ready(&echo_pods(name, *pods).await),
        ));
    }
    m.write("services.yaml", &y);
}

fn default_backend_ingress(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  ingressClassName: portico\n  defaultBackend:\n    service:\n      name: echo-service\n      port:\n        number: 8080\n"
    )
}

/// The admin API shows the publish address as the Ingress's status; through the Kubernetes
/// API, the status is also written to the Ingress.
async fn assert_status_published(p: &Portico, ns: &str, name: &str) {
    let ingress = p.ingress(ns, name).await;
    assert_eq!(
        ingress["status"]["loadBalancer"]["ingress"][0]["ip"], "127.0.0.1",
        "{ingress}"
    );
    if let Some(cluster) = &p.cluster {
        let want = serde_json::json!([{"ip": "127.0.0.1"}]);
        cluster.wait_status(ns, name, want).await;
    }
}

async fn default_backend(provider: Provider) {
    let m = Manifests::new();
    services(&m, "conformance-db", &[("echo-service", 1)]).await;
    m.write(
        "ingress.yaml",
        &default_backend_ingress("conformance-db", "default-backend"),
    );
    let p = provider.start(m.path()).await;
    assert_status_published(&p, "conformance-db", "default-backend").await;
    let cases = [
        ("GET", "my-host", ""),
        ("GET", "my-host", "sub-path"),
        ("POST", "some-host", ""),
        ("PUT", "", "resource"),
        ("DELETE", "some-host", "resource"),
        ("PATCH", "my-host", "resource"),
    ];
    for (method, host, path) in cases {
        let host = if host.is_empty() {
            p.http.to_string()
        } else {
            host.to_owned()
        };
        let path = format!("/{path}");
        let ua = [("user-agent", "Go-http-client/1.1")];
        let r = p
            .request(p.http, method, &host, &path, &ua, "")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{method} {host}{path}");
        assert_eq!(r.service(), "echo-service");
        for h in ["content-length", "content-type", "date", "server"] {
            assert!(r.headers.contains_key(h), "response header {h} missing");
        }
        let e = r.json();
        assert_eq!(e["method"], method);
        assert_eq!(e["path"], path);
        assert_eq!(e["proto"], "HTTP/1.1");
        assert_eq!(e["headers"]["user-agent"], "Go-http-client/1.1");
    }
}

async fn host_rules(provider: Provider) {
    let m = Manifests::new();
    let ns = "conformance-host";
    services(&m, ns, &[("wildcard-foo-com", 1), ("foo-bar-com", 1)]).await;
    let mut y = ingress(
        ns,
        "host-rules",
        "2026-01-01T00:00:00Z",
        &[
            ("*.foo.com", "/", "Prefix", "wildcard-foo-com", "8080"),
            ("foo.bar.com", "/", "Prefix", "foo-bar-com", "http"),
        ],
    );
    y = y.replace(
        "spec:\n",
        "spec:\n  tls:\n  - hosts:\n    - foo.bar.com\n    secretName: conformance-tls\n",
    );
    m.write("ingress.yaml", &y);
    let ca = Authority::new("conformance").unwrap();
    let cert = ca.issue(&["foo.bar.com"]).unwrap();
    m.write("secret.json", &issued_secret(ns, "conformance-tls", &cert));
    let p = provider.start(m.path()).await;
    assert_status_published(&p, ns, "host-rules").await;
    // GET https://foo.bar.com: the secure connection verifies the hostname foo.bar.com.
    let conn = try_connect(p.https, Some("foo.bar.com"), &[], Trust::Authority(&ca)).await;
    let tls = H1::over(conn.expect("hostname foo.bar.com verified"))
        .await
        .get("foo.bar.com", "/")
        .await;
    assert_eq!((tls.status, tls.service()), (200, "foo-bar-com".to_owned()));
    assert_eq!(
        tls.json()["host"],
        "foo.bar.com",
        "the request host reaches the backend"
    );
    // Over plain HTTP a TLS host is redirected (as ingress-nginx does by default).
    let plain = p.get("foo.bar.com", "/").await;
    assert_eq!(plain.status, 308);
    let location = format!("https://foo.bar.com:{}/", p.https.port());
    assert_eq!(plain.headers["location"], location.as_str());
    expect_routes(
        &p,
        &[
            ("subdomain.bar.com", "/", 404, ""),
            ("bar.foo.com", "/", 200, "wildcard-foo-com"),
            ("baz.bar.foo.com", "/", 404, ""),
            ("foo.com", "/", 404, ""),
        ],
    )
    .await;
    assert_eq!(
        p.get("bar.foo.com", "/").await.json()["host"],
        "bar.foo.com",
        "the request host reaches the backend"
    );
}

async fn path_rules(provider: Provider) {
    let m = Manifests::new();
    let ns = "conformance-path";
    let svcs = [
        "foo-exact",
        "foo-prefix",
        "aaa-slash-bbb-prefix",
        "aaa-prefix",
        "aaa-slash-bbb-slash-prefix",
        "foo-slash-exact",
    ];
    services(&m, ns, &svcs.map(|s| (s, 1))).await;
    m.write(
        "ingress.yaml",
        &ingress(
            ns,
            "path-rules",
            "2026-01-01T00:00:00Z",
            &[
                ("exact-path-rules", "/foo", "Exact", "foo-exact", "8080"),
                ("prefix-path-rules", "/foo", "Prefix", "foo-prefix", "8080"),
                (
                    "prefix-path-rules",
                    "/aaa/bbb",
                    "Prefix",
                    "aaa-slash-bbb-prefix",
                    "8080",
                ),
                ("prefix-path-rules", "/aaa", "Prefix", "aaa-prefix", "8080"),
                ("mixed-path-rules", "/foo", "Prefix", "foo-prefix", "8080"),
                ("mixed-path-rules", "/foo", "Exact", "foo-exact", "8080"),
                (
                    "trailing-slash-path-rules",
                    "/aaa/bbb/",
                    "Prefix",
                    "aaa-slash-bbb-slash-prefix",
                    "8080",
                ),
                (
                    "trailing-slash-path-rules",
                    "/foo/",
                    "Exact",
                    "foo-slash-exact",
                    "8080",
                ),
            ],
        ),
    );
    let p = provider.start(m.path()).await;
    assert_status_published(&p, ns, "path-rules").await;
    let cases = [
        ("exact-path-rules", "/foo", 200, "foo-exact"),
        ("exact-path-rules", "/foo/", 404, ""),
        ("exact-path-rules", "/FOO", 404, ""),
        ("exact-path-rules", "/bar", 404, ""),
        ("prefix-path-rules", "/foo", 200, "foo-prefix"),
        ("prefix-path-rules", "/foo/", 200, "foo-prefix"),
        ("prefix-path-rules", "/FOO", 404, ""),
        ("prefix-path-rules", "/aaa/bbb", 200, "aaa-slash-bbb-prefix"),
        (
            "prefix-path-rules",
            "/aaa/bbb/ccc",
            200,
            "aaa-slash-bbb-prefix",
        ),
        ("prefix-path-rules", "/aaa/ccc", 200, "aaa-prefix"),
        ("prefix-path-rules", "/aaaccc", 404, ""),
        ("mixed-path-rules", "/foo", 200, "foo-exact"),
        (
            "trailing-slash-path-rules",
            "/aaa/bbb",
            200,
            "aaa-slash-bbb-slash-prefix",
        ),
        (
            "trailing-slash-path-rules",
            "/aaa/bbb/",
            200,
            "aaa-slash-bbb-slash-prefix",
        ),
        ("trailing-slash-path-rules", "/foo", 404, ""),
    ];
    expect_routes(&p, &cases).await;
    for (host, path, status, _) in cases {
        if status == 200 {
            assert_eq!(
                p.get(host, path).await.json()["path"],
                path,
                "the request path reaches the backend"
            );
        }
    }
}

async fn ingress_class(provider: Provider) {
    let m = Manifests::new();
    let ns = "conformance-class";
    services(&m, ns, &[("ingress-class-prefix", 1)]).await;
    let y = ingress(
        ns,
        "test-ingress-class",
        "2026-01-01T00:00:00Z",
        &[(
            "ingress-class",
            "/",
            "Prefix",
            "ingress-class-prefix",
            "8080",
        )],
    );
    m.write(
        "ingress.yaml",
        &y.replace(
            "ingressClassName: portico",
            "ingressClassName: some-invalid-class-name",
        ),
    );
    let p = provider.start(m.path()).await;
    let st = p.ingress(ns, "test-ingress-class").await;
    assert_eq!(
        st["status"]["loadBalancer"]["ingress"],
        serde_json::json!([]),
        "{st}"
    );
    if let Some(cluster) = &p.cluster {
        // The leader writes status within a second of its first snapshot; give it two.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let stored = cluster.ingress(ns, "test-ingress-class");
        assert!(
            stored["status"]["loadBalancer"]["ingress"].is_null(),
            "{stored}"
        );
    }
    expect_routes(&p, &[("ingress-class", "/", 404, "")]).await;
}

async fn load_balancing(provider: Provider) {
    let m = Manifests::new();
    let ns = "conformance-lb";
    services(&m, ns, &[("echo-service", 10)]).await;
    m.write(
        "ingress.yaml",
        &default_backend_ingress(ns, "load-balancing"),
    );
    let p = provider.start(m.path()).await;
    assert_status_published(&p, ns, "load-balancing").await;
    let mut pods = std::collections::BTreeSet::new();
    for _ in 0..100 {
        let r = p.get("load-balancing", "/").await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        pods.insert(r.json()["pod"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(pods.len(), 10, "{pods:?}");
}

async fn no_ready_member_is_503_and_upstream_failure_is_502(provider: Provider) {
    let m = Manifests::new();
    let ns = "conformance-errors";
    let up = echo_pods("up", 1).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut y = service(ns, "up", &ready(&up));
    y += &service(
        ns,
        "down",
        &[Ep {
            addr: up[0],
            ready: false,
        }],
    );
    y += &service(
        ns,
        "gone",
        &[Ep {
            addr: closed,
            ready: true,
        }],
    );
    m.write("services.yaml", &y);
    let rules = [
        ("errors.test", "/up", "Prefix", "up", "80"),
        ("errors.test", "/down", "Prefix", "down", "80"),
        ("errors.test", "/gone", "Exact", "gone", "80"),
    ];
    m.write(
        "ingress.yaml",
        &ingress(ns, "errors", "2026-01-01T00:00:00Z", &rules),
    );
    let p = provider.start(m.path()).await;
    expect_routes(
        &p,
        &[
            ("errors.test", "/up", 200, "up"),
            ("errors.test", "/down", 503, ""),
            ("errors.test", "/gone", 502, ""),
            ("errors.test", "/other", 404, ""),
            ("other.test", "/up", 404, ""),
        ],
    )
    .await;
    for (path, body) in [
        ("/down", "503 Service Unavailable\n"),
        ("/gone", "502 Bad Gateway\n"),
        ("/other", "404 Not Found\n"),
    ] {
        let r = p.get("errors.test", path).await;
        assert_eq!(
            r.body,
            body.as_bytes(),
            "{path}: the same short body as the proxy"
        );
    }
}
