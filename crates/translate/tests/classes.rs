//! Class ownership, load balancers per class, and which Ingresses are served.

mod support;

use portico_model::{LoadBalancerId, Severity};
use portico_translate::{Config, ObjectKey, translate};
use serde_json::{Value, json};
use support::{ingress, load_values, rule, service, translate_values};

fn class(name: &str, controller: &str, provider: Option<&str>) -> Value {
    let mut doc = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                         "metadata": {"name": name}, "spec": {"controller": controller}});
    if let Some(provider) = provider {
        doc["metadata"]["annotations"] = json!({"portico.dev/provider": provider});
    }
    doc
}

fn routed(class_name: Option<&str>, name: &str) -> Value {
    let spec = json!({"rules": [rule("", &[("/", "Prefix", "web")])]});
    let mut doc = ingress("default", name, None, spec);
    doc["spec"]["ingressClassName"] = class_name.map_or(Value::Null, |c| json!(c));
    doc
}

#[test]
fn a_foreign_class_ingress_is_ignored_without_diagnostics() {
    let mut bad = routed(Some("nginx"), "theirs");
    bad["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("relative//path");
    let docs = vec![class("nginx", "k8s.io/ingress-nginx", None), bad];
    let t = translate_values(docs);
    assert!(t.diagnostics.is_empty());
    assert!(t.model.load_balancers.is_empty());
    let state = &t.ingresses[0];
    assert_eq!(
        (state.class.as_deref(), state.owned, state.served),
        (Some("nginx"), false, false)
    );
}

#[test]
fn an_ingress_without_class_is_not_ours() {
    let t = translate_values(vec![routed(None, "plain")]);
    assert!(t.model.load_balancers.is_empty());
    assert_eq!(
        (t.ingresses[0].class.clone(), t.ingresses[0].owned),
        (None, false)
    );
}

#[test]
fn the_legacy_class_annotation_is_honoured() {
    let mut doc = routed(None, "legacy");
    doc["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "portico"});
    let mut docs = vec![doc];
    docs.extend(service("default", "web", "10.0.0.1"));
    let t = translate_values(docs);
    assert_eq!(t.ingresses[0].class.as_deref(), Some("portico"));
    assert!(t.ingresses[0].served);
    assert_eq!(t.model.load_balancers[0].listeners[0].policies.len(), 1);
}

#[test]
fn every_class_of_our_controller_gets_its_own_load_balancer() {
    let docs = vec![
        class(
            "internal",
            "portico.dev/ingress-controller",
            Some("haproxy"),
        ),
        class("other", "example.com/other", None),
        routed(Some("internal"), "a"),
        routed(Some("portico"), "b"),
        routed(Some("other"), "c"),
    ];
    let t = translate_values(docs);
    let mut lbs: Vec<_> = t
        .model
        .load_balancers
        .iter()
        .map(|lb| (lb.name.as_str(), lb.provider.as_str()))
        .collect();
    lbs.sort();
    assert_eq!(
        lbs,
        [
            ("ingressclass/internal", "haproxy"),
            ("ingressclass/portico", "proxy")
        ]
    );
    let ids: Vec<_> = t.model.load_balancers.iter().map(|lb| lb.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted by id");
    assert!(ids.contains(&LoadBalancerId::derive("loadbalancer/internal")));
    let owned: Vec<_> = t
        .ingresses
        .iter()
        .map(|i| (i.key.name.as_str(), i.owned))
        .collect();
    assert_eq!(owned, [("a", true), ("b", true), ("c", false)]);
}

#[test]
fn our_ingress_class_gets_a_load_balancer_even_without_ingresses() {
    let t = translate_values(vec![class("edge", "portico.dev/ingress-controller", None)]);
    assert_eq!(t.model.load_balancers.len(), 1);
    let lb = &t.model.load_balancers[0];
    assert_eq!(
        (lb.origin.name.as_str(), lb.listeners[0].policies.len()),
        ("edge", 0)
    );
}

#[test]
fn nothing_owned_means_no_load_balancer() {
    assert!(translate_values(vec![]).model.load_balancers.is_empty());
}

#[test]
fn config_chooses_the_class_port_and_provider() {
    let config = Config {
        ingress_class: "edge".into(),
        default_provider: "haproxy".into(),
        http_port: 8080,
        ..Config::default()
    };
    let t = translate(
        &load_values(vec![
            routed(Some("edge"), "a"),
            routed(Some("portico"), "b"),
        ]),
        &config,
    );
    assert_eq!(t.model.load_balancers.len(), 1);
    let lb = &t.model.load_balancers[0];
    assert_eq!(
        (lb.name.as_str(), lb.provider.as_str()),
        ("ingressclass/edge", "haproxy")
    );
    assert_eq!(lb.listeners[0].port, 8080);
    assert!(!t.ingresses[1].owned);
}

#[test]
fn an_invalid_owned_ingress_is_not_served_and_reports_errors() {
    let mut bad = routed(Some("portico"), "bad");
    bad["spec"]["rules"][0]["host"] = json!("10.0.0.1");
    let good = routed(Some("portico"), "good");
    let mut docs = vec![bad, good];
    docs.extend(service("default", "web", "10.0.0.1"));
    let t = translate_values(docs);
    let served: Vec<_> = t
        .ingresses
        .iter()
        .map(|i| (i.key.clone(), i.owned, i.served))
        .collect();
    assert_eq!(
        served,
        [
            (ObjectKey::new("default", "bad"), true, false),
            (ObjectKey::new("default", "good"), true, true)
        ]
    );
    assert!(
        t.diagnostics
            .iter()
            .all(|d| d.severity == Severity::Error && d.object.name == "bad")
    );
    assert_eq!(t.diagnostics[0].field, "spec.rules[0].host");
    let policies = &t.model.load_balancers[0].listeners[0].policies;
    assert!(policies.iter().all(|p| p.source.name == "good"));
}

#[test]
fn diagnostics_are_sorted_and_deduplicated() {
    let spec = json!({"rules": [rule("", &[("/b", "Prefix", "gone"), ("/a", "Prefix", "gone")])]});
    let t = translate_values(vec![
        ingress("default", "z", None, spec.clone()),
        ingress("default", "a", None, spec),
    ]);
    let mut sorted = t.diagnostics.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(t.diagnostics, sorted);
    assert_eq!(
        t.diagnostics.len(),
        6,
        "two missing-service warnings per Ingress, two conflicts"
    );
}
