//! The three Ingress types of the seeds: single service, simple fanout, name-based virtual hosting.

use crate::{backends, expect_routes, support::*};

#[tokio::test]
async fn single_service_sends_everything_to_one_service() {
    let m = backends("seed", &[("nginx", 2)]).await;
    m.write(
        "ing.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: single-service\n  namespace: seed\nspec:\n  ingressClassName: portico\n  defaultBackend:\n    service:\n      name: nginx\n      port:\n        number: 80\n",
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("any.host", "/", 200, "nginx"),
            ("x", "/a/b?c=d", 200, "nginx"),
            ("", "/qa.html", 200, "nginx"),
        ],
    )
    .await;
}

#[tokio::test]
async fn simple_fanout_routes_by_path() {
    let m = backends("seed", &[("qa-webserver", 1), ("dev-webserver", 1)]).await;
    let ing = ingress(
        "seed",
        "simple-fanout",
        "2026-01-01T00:00:00Z",
        &[
            ("", "/qa", "Prefix", "qa-webserver", "80"),
            ("", "/dev", "Prefix", "dev-webserver", "http"),
        ],
    );
    m.write("ing.yaml", &ing);
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("a.example", "/qa", 200, "qa-webserver"),
            ("a.example", "/qa/index.html", 200, "qa-webserver"),
            ("b.example", "/dev", 200, "dev-webserver"),
            ("b.example", "/prod", 404, ""),
        ],
    )
    .await;
}

#[tokio::test]
async fn name_based_virtual_hosting_with_default_backend() {
    let m = backends("seed", &[("maps", 1), ("images", 1), ("webservice", 1)]).await;
    m.write(
        "ing.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: virtual-host\n  namespace: seed\nspec:\n  ingressClassName: portico\n  defaultBackend:\n    service:\n      name: webservice\n      port:\n        number: 80\n  rules:\n  - host: maps.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: maps\n            port:\n              number: 80\n  - host: images.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: images\n            port:\n              number: 80\n",
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("maps.example.com", "/", 200, "maps"),
            ("images.example.com", "/x", 200, "images"),
            ("unknown.example.com", "/", 200, "webservice"),
            ("maps.example.com.evil", "/", 200, "webservice"),
        ],
    )
    .await;
    let st = p.ingress("seed", "virtual-host").await;
    assert_eq!(
        st["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.1"
    );
}
