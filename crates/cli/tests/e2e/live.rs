//! Live changes: each served within a second; one keep-alive connection sees no failure.

use crate::{expect_routes, support::*};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn changes_are_served_within_a_second() {
    let m = Manifests::new();
    let a = echo_pods("a", 2).await;
    let b = echo_pods("b", 1).await;
    m.write("a.yaml", &service("live", "a", &ready(&a[..1])));
    m.write("b.yaml", &service("live", "b", &ready(&b)));
    m.write(
        "ing.yaml",
        &ingress(
            "live",
            "web",
            "2026-01-01T00:00:00Z",
            &[("live.test", "/", "Prefix", "a", "80")],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("live.test", "/", 200, "a"),
            ("live.test", "/new", 200, "a"),
        ],
    )
    .await;

    // Adding a path.
    let two = [
        ("live.test", "/", "Prefix", "a", "80"),
        ("live.test", "/new", "Prefix", "b", "80"),
    ];
    m.write(
        "ing.yaml",
        &ingress("live", "web", "2026-01-01T00:00:00Z", &two),
    );
    assert!(p.wait_route("live.test", "/new", 200, "b").await < SECOND);

    // Changing a backend.
    let changed = [
        ("live.test", "/", "Prefix", "b", "80"),
        ("live.test", "/new", "Prefix", "b", "80"),
    ];
    m.write(
        "ing.yaml",
        &ingress("live", "web", "2026-01-01T00:00:00Z", &changed),
    );
    assert!(p.wait_route("live.test", "/", 200, "b").await < SECOND);

    // Scaling endpoints up: the second pod of `a` starts getting traffic.
    m.write(
        "ing.yaml",
        &ingress("live", "web", "2026-01-01T00:00:00Z", &two),
    );
    p.wait_route("live.test", "/", 200, "a").await;
    m.write("a.yaml", &service("live", "a", &ready(&a)));
    let start = std::time::Instant::now();
    loop {
        if p.get("live.test", "/").await.json()["pod"] == "a-1" {
            break;
        }
        assert!(
            start.elapsed() < SECOND,
            "scaled-up pod not served within a second"
        );
    }

    // Scaling to zero: 503.
    m.write("a.yaml", &service("live", "a", &[]));
    assert!(p.wait_route("live.test", "/", 503, "").await < SECOND);

    // Deleting the Ingress: 404, and the Ingress is gone from the admin API.
    m.remove("ing.yaml");
    assert!(p.wait_route("live.test", "/new", 404, "").await < SECOND);
    assert_eq!(p.ingress("live", "web").await, serde_json::Value::Null);
}

#[tokio::test]
async fn keep_alive_client_sees_no_failure_through_100_changes() {
    let m = Manifests::new();
    let a = echo_pods("steady", 2).await;
    let b = echo_pods("moving", 1).await;
    m.write(
        "svc.yaml",
        &(service("ka", "steady", &ready(&a)) + &service("ka", "moving", &ready(&b))),
    );
    let rules = |i: usize| {
        let path = format!("/change-{i}");
        ingress(
            "ka",
            "ka",
            "2026-01-01T00:00:00Z",
            &[
                ("ka.test", "/", "Prefix", "steady", "80"),
                ("ka.test", path.as_str(), "Exact", "moving", "80"),
            ],
        )
    };
    m.write("ing.yaml", &rules(0));
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("ka.test", "/change-0", 200, "moving").await;

    // One connection, kept busy by a client that sends request after request.
    let load = KeepAliveLoad::start(p.http, "ka.test").await;
    for i in 1..=100 {
        m.write("ing.yaml", &rules(i));
        p.wait_route("ka.test", &format!("/change-{i}"), 200, "moving")
            .await;
    }
    let (ok, failed) = load.finish().await;
    assert_eq!(failed, 0, "failed requests on the keep-alive connection");
    assert!(ok >= 100, "the connection stayed busy: {} requests", ok);
}
