//! The README's first command: `portico demo` serves the three seed examples, and a Gateway
//! with an HTTPRoute beside them.

use crate::support::*;

#[tokio::test]
async fn demo_serves_the_three_seed_examples() {
    let p = Portico::spawn(&demo_args()).await;
    crate::expect_routes(
        &p,
        &[
            ("demo.test", "/", 200, "webservice-1"),
            ("demo.test", "/dev/build", 200, "webservice-dev"),
            ("demo.test", "/qa", 200, "webservice-qa"),
            ("maps.example.com", "/", 200, "webservice-maps"),
            ("images.example.com", "/", 200, "webservice-images"),
            ("other.example.com", "/x", 200, "webservice-1"),
            ("store.example.com", "/cart", 200, "webservice-dev"),
        ],
    )
    .await;
    // The HTTPRoute: its header match, and its filter on the other rule's answers.
    let qa = p
        .request(
            p.http,
            "GET",
            "store.example.com",
            "/",
            &[("x-env", "qa")],
            "",
        )
        .await
        .unwrap();
    assert_eq!((qa.status, qa.service()), (200, "webservice-qa".to_owned()));
    assert!(qa.headers.get("x-routed-by").is_none());
    let dev = p.get("store.example.com", "/").await;
    assert_eq!(dev.headers["x-routed-by"], "httproute-store");
    let routes = p.admin_json("/api/v1/httproutes").await;
    let conditions = &routes[0]["status"]["parents"][0]["conditions"];
    let status = |kind: &str| {
        let all = conditions.as_array().into_iter().flatten();
        all.filter(|c| c["type"] == kind)
            .map(|c| c["status"].clone())
            .next()
    };
    assert_eq!(status("Accepted"), Some("True".into()), "{routes}");
    assert_eq!(status("ResolvedRefs"), Some("True".into()), "{routes}");
    let ingresses = p.admin_json("/api/v1/ingresses").await;
    assert_eq!(ingresses.as_array().map(Vec::len), Some(3));
    for i in ingresses.as_array().unwrap() {
        assert_eq!(
            i["diagnostics"],
            serde_json::json!([]),
            "demo Ingresses are clean: {i}"
        );
        assert_eq!(i["status"]["loadBalancer"]["ingress"][0]["ip"], "127.0.0.1");
    }
}
