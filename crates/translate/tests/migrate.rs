//! `portico migrate`'s report: each annotation's outcome as the table says, corrected by the
//! translation's warnings, per provider.

mod support;

use portico_translate::migrate::report;
use portico_translate::{Config, translate};
use serde_json::json;
use std::collections::BTreeMap;
use support::{ingress, load_values, rule};

fn annotated(name: &str, class: &str, annotations: serde_json::Value) -> serde_json::Value {
    let mut doc = ingress(
        "shop",
        name,
        None,
        json!({"ingressClassName": class, "rules": [rule("a.test", &[("/", "Prefix", "web")])]}),
    );
    doc["metadata"]["annotations"] = annotations;
    doc
}

fn outcomes(r: &portico_translate::migrate::IngressReport) -> Vec<(&str, &str)> {
    r.annotations
        .iter()
        .map(|k| (k.key.as_str(), k.outcome))
        .collect()
}

#[test]
fn each_annotation_gets_the_outcome_of_the_provider_that_serves_it() {
    let annotations = json!({
        "nginx.ingress.kubernetes.io/proxy-body-size": "8m",
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "soon",
        "nginx.ingress.kubernetes.io/proxy-send-timeout": "30",
        "nginx.ingress.kubernetes.io/load-balance": "ewma",
        "nginx.ingress.kubernetes.io/mirror-target": "http://m",
        "nginx.ingress.kubernetes.io/no-such-key": "x",
        "nginx.ingress.kubernetes.io/configuration-snippet": "return 200;",
        "example.com/other-tool": "x",
    });
    let objects = load_values(vec![
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
               "metadata": {"name": "h", "annotations": {"portico.dev/provider": "haproxy"}},
               "spec": {"controller": "portico.dev/ingress-controller"}}),
        annotated("p", "portico", annotations.clone()),
        annotated("h", "h", annotations),
        annotated(
            "other",
            "nginx",
            json!({"nginx.ingress.kubernetes.io/proxy-body-size": "1m"}),
        ),
    ]);
    let config = Config::default();
    let translation = translate(&objects, &config);
    let configmap = BTreeMap::from([
        ("proxy-body-size".to_owned(), "8m".to_owned()),
        ("ssl-protocols".to_owned(), "TLSv1.2".to_owned()),
        ("http-snippet".to_owned(), "x".to_owned()),
    ]);
    let r = report(&objects, &translation, "proxy", Some(&configmap));
    let by_name = |n: &str| r.ingresses.iter().find(|i| i.name == n).unwrap();
    let proxy = by_name("p");
    assert_eq!(proxy.provider, "proxy");
    assert_eq!(
        outcomes(proxy),
        [
            (
                "nginx.ingress.kubernetes.io/configuration-snippet",
                "refused"
            ),
            (
                "nginx.ingress.kubernetes.io/load-balance",
                "served-differently"
            ),
            ("nginx.ingress.kubernetes.io/mirror-target", "ignored"),
            ("nginx.ingress.kubernetes.io/no-such-key", "ignored"),
            ("nginx.ingress.kubernetes.io/proxy-body-size", "served"),
            // A bad value: the default applies, so the key is not served as written.
            ("nginx.ingress.kubernetes.io/proxy-read-timeout", "ignored"),
            ("nginx.ingress.kubernetes.io/proxy-send-timeout", "served"),
        ]
    );
    let bad = &proxy.annotations[5];
    assert!(bad.detail.contains("invalid value"), "{bad:?}");
    // haproxy does not render proxy-send-timeout: the same key, another outcome, and the
    // translation warns about it naming the provider.
    let haproxy = by_name("h");
    assert_eq!(haproxy.provider, "haproxy");
    assert_eq!(outcomes(haproxy)[6].1, "ignored");
    assert!(translation.diagnostics.iter().any(|d| d.object.name == "h"
        && d.field == "metadata.annotations[nginx.ingress.kubernetes.io/proxy-send-timeout]"
        && d.message.contains("haproxy provider")));
    assert!(by_name("other").not_served.is_some());
    let configmap: Vec<(&str, &str)> = r
        .configmap
        .as_ref()
        .unwrap()
        .iter()
        .map(|k| (k.key.as_str(), k.outcome))
        .collect();
    assert_eq!(
        configmap,
        [
            ("http-snippet", "refused"),
            ("proxy-body-size", "served"),
            ("ssl-protocols", "ignored")
        ]
    );
    assert_eq!(r.summary.ingresses, 3);
    assert_eq!(r.summary.not_served, 1);
    assert!(!r.summary.all_served());
}

#[test]
fn an_ingress_with_served_annotations_only_is_all_served() {
    let objects = load_values(vec![annotated(
        "p",
        "portico",
        json!({"nginx.ingress.kubernetes.io/proxy-body-size": "8m",
               "portico.dev/retry-budget": "10"}),
    )]);
    let translation = translate(&objects, &Config::default());
    let r = report(&objects, &translation, "proxy", None);
    assert_eq!(r.summary.served, 2);
    assert!(r.summary.all_served(), "{r:?}");
}
