//! The README's first command: `portico demo` serves the three seed examples.

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
        ],
    )
    .await;
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
