//! Ingress annotations through the real binary, per provider: a bad value or a refused snippet
//! is a warning naming the annotation, and the Ingress is served all the same.

use crate::conformance::Provider;
use crate::{backends, expect_routes, support::*};

proxy_and_haproxy!(bad_and_refused_annotations_are_named_and_the_ingress_is_still_served);

async fn bad_and_refused_annotations_are_named_and_the_ingress_is_still_served(provider: Provider) {
    let m = backends("ann", &[("web", 1), ("other", 1)]).await;
    let bad = ingress(
        "ann",
        "bad",
        "2026-01-01T00:00:00Z",
        &[("bad.test", "/", "Prefix", "web", "80")],
    );
    let snippet = "nginx.ingress.kubernetes.io/configuration-snippet";
    let timeout = "nginx.ingress.kubernetes.io/proxy-read-timeout";
    let typo = "portico.dev/proxy-read-timout";
    let bad = annotated(
        &bad,
        &[
            (snippet, "more_set_headers \"X-Evil: 1\";\nreturn 200;"),
            (timeout, "soon"),
            (typo, "5"),
        ],
    );
    m.write("bad.yaml", &bad);
    let good = ingress(
        "ann",
        "good",
        "2026-01-01T00:00:00Z",
        &[("good.test", "/", "Prefix", "other", "80")],
    );
    m.write("good.yaml", &good);
    let p = provider.start(m.path()).await;
    expect_routes(
        &p,
        &[
            ("bad.test", "/", 200, "web"),
            ("good.test", "/", 200, "other"),
        ],
    )
    .await;
    let r = p.get("bad.test", "/").await;
    assert!(
        !r.headers.contains_key("x-evil"),
        "the snippet is not applied"
    );

    let ingress = p.ingress("ann", "bad").await;
    let diagnostics = ingress["diagnostics"].as_array().unwrap();
    let by_field = |annotation: &str| {
        let field = format!("metadata.annotations[{annotation}]");
        diagnostics
            .iter()
            .find(|d| d["field"] == field.as_str())
            .unwrap_or_else(|| panic!("no diagnostic on {field}: {ingress}"))
            .clone()
    };
    let d = by_field(snippet);
    assert_eq!(d["severity"], "warning");
    assert!(d["message"].as_str().unwrap().contains("refused by design"));
    assert!(
        by_field(timeout)["message"]
            .as_str()
            .unwrap()
            .contains("invalid value")
    );
    assert!(
        by_field(typo)["message"]
            .as_str()
            .unwrap()
            .contains("unknown annotation")
    );
    assert_eq!(diagnostics.len(), 3, "{ingress}");
    let good = p.ingress("ann", "good").await;
    assert_eq!(good["diagnostics"], serde_json::json!([]), "{good}");
}
