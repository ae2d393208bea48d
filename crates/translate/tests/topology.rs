//! `portico.dev/topology` per IngressClass, and the addresses of load balancers (pools, pinned
//! floating IPs) as the pass over the model assigns them.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::{LoadBalancerId, ObjectRef, Severity};
use portico_translate::{Allocations, Config, assign_addresses, translate};
use serde_json::{Value, json};
use std::net::IpAddr;
use support::{ingress, load_values, rule, service};

fn class(annotations: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
           "metadata": {"name": "portico", "annotations": annotations},
           "spec": {"controller": "portico.dev/ingress-controller"}})
}

fn routed(name: &str, host: &str, annotations: Value) -> Value {
    let spec = json!({"ingressClassName": "portico",
                      "rules": [rule(host, &[("/", "Prefix", "web")])]});
    let mut doc = ingress("default", name, None, spec);
    doc["metadata"]["annotations"] = annotations;
    doc
}

fn docs(class_annotations: Value, ingresses: Vec<Value>) -> Vec<Value> {
    let mut docs = vec![class(class_annotations)];
    docs.extend(ingresses);
    docs.extend(service("default", "web", "10.0.0.1"));
    docs
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn dedicated_gives_each_served_ingress_its_own_load_balancer_reporting_to_it() {
    let objects = load_values(docs(
        json!({"portico.dev/topology": "dedicated"}),
        vec![
            routed("a", "a.test", json!({})),
            routed("b", "b.test", json!({})),
        ],
    ));
    let t = translate(&objects, &Config::default());
    let names: Vec<_> = t
        .model
        .load_balancers
        .iter()
        .map(|lb| lb.name.as_str())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["ingress/default/a", "ingress/default/b"]);
    for lb in &t.model.load_balancers {
        assert_eq!(lb.origin.kind, "Ingress");
        assert_eq!(lb.listeners[0].policies.len(), 1);
        let name = lb.name.rsplit('/').next().unwrap();
        assert_eq!(lb.origin, ObjectRef::new("Ingress", "default", name));
        let id = LoadBalancerId::derive(&format!("loadbalancer/ingress/default/{name}"));
        assert_eq!(lb.id, id);
    }
    assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics);
}

#[test]
fn shared_is_the_default_and_a_bad_topology_is_an_error_on_the_class() {
    let two = || {
        vec![
            routed("a", "a.test", json!({})),
            routed("b", "b.test", json!({})),
        ]
    };
    let shared = translate(&load_values(docs(json!({}), two())), &Config::default());
    let bad = translate(
        &load_values(docs(json!({"portico.dev/topology": "solo"}), two())),
        &Config::default(),
    );
    assert_eq!(shared.model.load_balancers.len(), 1);
    assert_eq!(shared.model, bad.model);
    let d = &bad.diagnostics[0];
    assert_eq!(
        (d.object.kind.as_str(), d.severity),
        ("IngressClass", Severity::Error)
    );
    assert_eq!(d.field, "metadata.annotations[portico.dev/topology]");
}

#[test]
fn pools_and_pins_give_addresses_and_problems_go_to_the_ingress() {
    let objects = load_values(docs(
        json!({"portico.dev/topology": "dedicated", "portico.dev/fip-pool": "198.19.0.0/30"}),
        vec![
            routed("a", "a.test", json!({})),
            routed(
                "b",
                "b.test",
                json!({"portico.dev/external-ip": "198.19.0.200"}),
            ),
            routed(
                "c",
                "c.test",
                json!({"portico.dev/external-ip": "198.19.0.200"}),
            ),
            routed("d", "d.test", json!({"portico.dev/external-ip": "nope"})),
            routed("e", "e.test", json!({})),
            routed("f", "f.test", json!({})),
        ],
    ));
    let config = Config {
        vip_pool: Some("198.18.0.0/24".parse().unwrap()),
        fip_pool: Some("10.0.0.0/8".parse().unwrap()),
        ..Config::default()
    };
    let mut model = translate(&objects, &config).model;
    let (allocations, diagnostics) =
        assign_addresses(&mut model, &objects, &config, &Allocations::new());
    let lb = |n: &str| {
        let lb = model.load_balancers.iter().find(|lb| lb.origin.name == n);
        lb.unwrap()
    };
    // VIPs from --vip-pool, floating IPs from the class's pool (which wins over --fip-pool).
    let vips: std::collections::BTreeSet<_> = model
        .load_balancers
        .iter()
        .filter_map(|lb| lb.vip)
        .collect();
    assert_eq!(vips.len(), 6);
    assert!(vips.iter().all(|v| v.to_string().starts_with("198.18.0.")));
    assert_eq!(lb("b").floating_ip, Some(ip("198.19.0.200")));
    // b and c pin the same address: one of them gets it, the other a diagnostic.
    assert!(lb("c").floating_ip.is_none() || lb("b").floating_ip.is_none());
    let pools: Vec<_> = ["a", "e", "f"].map(|n| lb(n).floating_ip).into();
    assert_eq!(pools.iter().filter(|p| p.is_some()).count(), 2, "{pools:?}");
    let problems: Vec<(&str, &str)> = diagnostics
        .iter()
        .map(|d| (d.object.name.as_str(), d.field.as_str()))
        .collect();
    assert!(problems.contains(&("c", "metadata.annotations[portico.dev/external-ip]")));
    assert!(problems.contains(&("d", "metadata.annotations[portico.dev/external-ip]")));
    assert!(
        problems.iter().any(|(n, f)| ["a", "e", "f"].contains(n)
            && *f == "metadata.annotations[portico.dev/fip-pool]"),
        "{problems:?}"
    );
    assert_eq!(diagnostics.len(), 3, "{diagnostics:?}");
    assert_eq!(allocations.len(), 6);
}

#[test]
fn the_class_vip_wins_over_the_pool_and_a_bad_pool_is_an_error_on_the_class() {
    let objects = load_values(docs(
        json!({"portico.dev/vip": "192.0.2.1", "portico.dev/fip-pool": "bad",
               "portico.dev/external-ip": "198.19.0.7"}),
        vec![routed(
            "a",
            "a.test",
            json!({"portico.dev/external-ip": "198.19.0.8"}),
        )],
    ));
    let config = Config {
        vip_pool: Some("198.18.0.0/24".parse().unwrap()),
        ..Config::default()
    };
    let mut model = translate(&objects, &config).model;
    let mut model_vips = portico_translate::assign_vips(&mut model, &objects, &config);
    let (_, diagnostics) = assign_addresses(&mut model, &objects, &config, &Allocations::new());
    model_vips.extend(diagnostics);
    let lb = &model.load_balancers[0];
    assert_eq!(lb.vip, Some(ip("192.0.2.1")));
    // Shared: the class pins the floating IP; the Ingress's pin is ignored with a warning.
    assert_eq!(lb.floating_ip, Some(ip("198.19.0.7")));
    let found: Vec<_> = model_vips
        .iter()
        .map(|d| (d.object.kind.as_str(), d.field.as_str(), d.severity))
        .collect();
    assert_eq!(
        found,
        [
            (
                "Ingress",
                "metadata.annotations[portico.dev/external-ip]",
                Severity::Warning
            ),
            (
                "IngressClass",
                "metadata.annotations[portico.dev/fip-pool]",
                Severity::Error
            ),
        ]
    );
}
