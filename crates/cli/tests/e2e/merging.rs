//! Several Ingresses of one class share a host: paths merge, the oldest wins a conflict.

use crate::{backends, expect_routes, support::*};

#[tokio::test]
async fn paths_of_one_host_merge_across_ingresses_and_oldest_wins_conflicts() {
    let m = backends("merge", &[("old", 1), ("new", 1), ("api", 1)]).await;
    let old = ingress(
        "merge",
        "b-old",
        "2026-01-01T00:00:00Z",
        &[("shop.test", "/", "Prefix", "old", "80")],
    );
    // Newer, and alphabetically first: age decides, not name or file order.
    let new = ingress(
        "merge",
        "a-new",
        "2026-02-01T00:00:00Z",
        &[
            ("shop.test", "/", "Prefix", "new", "80"),
            ("shop.test", "/api", "Prefix", "api", "80"),
        ],
    );
    m.write("a.yaml", &new);
    m.write("b.yaml", &old);
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("shop.test", "/", 200, "old"),
            ("shop.test", "/cart", 200, "old"),
            ("shop.test", "/api/x", 200, "api"),
        ],
    )
    .await;
    let loser = p.ingress("merge", "a-new").await;
    let diags = loser["diagnostics"].to_string();
    assert!(
        diags.contains("b-old"),
        "the conflict names the winner: {diags}"
    );
    assert!(
        diags.contains("spec.rules[0]"),
        "the conflict names the field: {diags}"
    );
    // Both Ingresses are still served, so both get status.
    assert_eq!(
        loser["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.1"
    );
}

#[tokio::test]
async fn default_backend_goes_to_the_oldest_ingress() {
    let m = backends("defb", &[("first", 1), ("second", 1)]).await;
    let db = |name: &str, created: &str, svc: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: defb\n  creationTimestamp: \"{created}\"\nspec:\n  ingressClassName: portico\n  defaultBackend:\n    service:\n      name: {svc}\n      port:\n        number: 80\n"
        )
    };
    m.write(
        "x.yaml",
        &(db("z-first", "2025-01-01T00:00:00Z", "first")
            + &db("a-second", "2025-06-01T00:00:00Z", "second")),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("any", "/", 200, "first")]).await;
    let loser = p.ingress("defb", "a-second").await;
    assert!(
        loser["diagnostics"]
            .to_string()
            .contains("spec.defaultBackend")
    );
}
