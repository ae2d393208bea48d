//! Backends: Service ports by number and by name, endpoint readiness, 503 and 502.

use crate::{expect_routes, support::*};

#[tokio::test]
async fn service_ports_by_number_and_by_name_and_readiness() {
    let m = Manifests::new();
    let up = echo_pods("mixed", 2).await;
    let eps = [
        Ep {
            addr: up[0],
            ready: true,
        },
        Ep {
            addr: up[1],
            ready: false,
        },
    ];
    let down = echo_pods("down", 1).await;
    let mut y = service("be", "mixed", &eps);
    y += &service(
        "be",
        "down",
        &[Ep {
            addr: down[0],
            ready: false,
        }],
    );
    y += &service("be", "by-name", &ready(&echo_pods("by-name", 1).await));
    m.write("svc.yaml", &y);
    let ing = ingress(
        "be",
        "be",
        "2026-01-01T00:00:00Z",
        &[
            ("be.test", "/mixed", "Prefix", "mixed", "80"),
            ("be.test", "/down", "Prefix", "down", "80"),
            ("be.test", "/named", "Prefix", "by-name", "http"),
        ],
    );
    m.write("ing.yaml", &ing);
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("be.test", "/named", 200, "by-name"),
            ("be.test", "/down", 503, ""),
        ],
    )
    .await;
    // Only the ready member of `mixed` gets traffic.
    for _ in 0..6 {
        let r = p.get("be.test", "/mixed").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["pod"], "mixed-0");
    }
}

#[tokio::test]
async fn round_robin_spreads_requests_over_ready_members() {
    let m = Manifests::new();
    m.write(
        "svc.yaml",
        &service("rr", "web", &ready(&echo_pods("web", 3).await)),
    );
    m.write(
        "ing.yaml",
        &ingress(
            "rr",
            "rr",
            "2026-01-01T00:00:00Z",
            &[("", "/", "Prefix", "web", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    let mut pods = std::collections::BTreeMap::new();
    for _ in 0..30 {
        let r = p.get("rr.test", "/").await;
        *pods
            .entry(r.json()["pod"].as_str().unwrap_or("").to_owned())
            .or_insert(0) += 1;
    }
    assert_eq!(pods.len(), 3, "{pods:?}");
    assert!(
        pods.values().all(|&n| n == 10),
        "round robin is even: {pods:?}"
    );
}

#[tokio::test]
async fn upstream_failure_is_502() {
    let m = Manifests::new();
    // A port that nothing listens on: bind, note the address, close.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    m.write(
        "svc.yaml",
        &service(
            "bad",
            "gone",
            &[Ep {
                addr: closed,
                ready: true,
            }],
        ),
    );
    m.write(
        "ing.yaml",
        &ingress(
            "bad",
            "bad",
            "2026-01-01T00:00:00Z",
            &[("", "/", "Prefix", "gone", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("x", "/", 502, "")]).await;
}

#[tokio::test]
async fn a_single_worker_thread_serves_and_reloads_like_the_default() {
    let m = crate::backends("one", &[("web", 2)]).await;
    let rules = |path: &str| {
        ingress(
            "one",
            "one",
            "2026-01-01T00:00:00Z",
            &[("one.test", path, "Prefix", "web", "80")],
        )
    };
    m.write("ing.yaml", &rules("/a"));
    let p = Portico::start(m.path(), &["--workers", "1"]).await;
    expect_routes(
        &p,
        &[("one.test", "/a", 200, "web"), ("one.test", "/b", 404, "")],
    )
    .await;
    m.write("ing.yaml", &rules("/b"));
    p.wait_route("one.test", "/b", 200, "web").await;
}
