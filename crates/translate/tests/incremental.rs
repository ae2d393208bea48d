//! Endpoint-only changes: detected exactly, and patched into the model exactly as a full
//! translation would have it.

mod support;

use portico_translate::{Config, ObjectKey, endpoint_only_change, refresh_members, translate};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::{ingress, load_values, rule, service, slice};

fn cluster(a_ip: &str, extra_path: Option<&str>) -> Vec<Value> {
    let mut paths = vec![("/a", "Prefix", "a"), ("/b", "Prefix", "b")];
    if let Some(p) = extra_path {
        paths.push((p, "Exact", "a"));
    }
    let mut docs = vec![ingress(
        "default",
        "web",
        None,
        json!({"rules": [rule("h.test", &paths)]}),
    )];
    docs.extend(service("default", "a", a_ip));
    docs.extend(service("default", "b", "10.0.0.2"));
    docs
}

fn services(names: &[&str]) -> BTreeSet<ObjectKey> {
    names.iter().map(|n| ObjectKey::new("default", n)).collect()
}

#[test]
fn a_changed_slice_names_its_service_and_nothing_else_changed() {
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.9", None));
    assert_eq!(endpoint_only_change(&old, &new), Some(services(&["a"])));
    assert_eq!(endpoint_only_change(&old, &old), Some(services(&[])));
}

#[test]
fn an_added_slice_of_a_service_is_an_endpoint_change() {
    let old = load_values(cluster("10.0.0.1", None));
    let mut docs = cluster("10.0.0.1", None);
    let endpoints = json!([{"addresses": ["10.0.0.3"]}]);
    docs.push(slice(
        "default",
        "b-2",
        "b",
        "IPv4",
        json!([{"name": "http", "port": 8080}]),
        endpoints,
    ));
    assert_eq!(
        endpoint_only_change(&old, &load_values(docs)),
        Some(services(&["b"]))
    );
}

#[test]
fn an_ingress_change_needs_a_full_translation() {
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.1", Some("/new")));
    assert_eq!(endpoint_only_change(&old, &new), None);
}

#[test]
fn refreshed_members_equal_a_full_translation() {
    let config = Config::default();
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.9", None));
    let mut model = translate(&old, &config).model;
    let changed = refresh_members(&mut model, &new, &services(&["a"]));
    assert_eq!(model, translate(&new, &config).model);
    assert_eq!(changed.len(), 1, "only pool default_a_80 changed");
    // Refreshing a service whose endpoints did not change changes nothing.
    assert!(refresh_members(&mut model, &new, &services(&["b"])).is_empty());
}
