//! Backend resolution: Service ports by number and name, EndpointSlices, legacy Endpoints.

mod support;

use portico_model::{Pool, Severity};
use portico_translate::Translation;
use serde_json::{Value, json};
use support::{findings, ingress, rule, service, slice, translate_values};

fn svc_doc(namespace: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec})
}

/// An Ingress with a default backend on `port` of Service `web`.
fn to_web(port: Value) -> Value {
    ingress(
        "default",
        "i",
        None,
        json!({"defaultBackend": {"service": {"name": "web", "port": port}}}),
    )
}

fn two_port_web() -> Value {
    svc_doc(
        "default",
        "web",
        json!({"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": "web"},
            {"name": "metrics", "port": 9100, "targetPort": 9100}
        ]}),
    )
}

fn only_pool(t: &Translation) -> &Pool {
    let lb = &t.model.load_balancers[0];
    assert_eq!(lb.pools.len(), 1);
    &lb.pools[0]
}

fn members(pool: &Pool) -> Vec<(String, u16, bool)> {
    pool.members
        .iter()
        .map(|m| (m.address.to_string(), m.port, m.ready))
        .collect()
}

fn web_slice(name: &str, endpoints: Value) -> Value {
    let ports = json!([{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]);
    slice("default", name, "web", "IPv4", ports, endpoints)
}

#[test]
fn a_port_by_number_and_by_name_reach_the_same_endpoints() {
    let endpoints = json!([{"addresses": ["10.0.0.1"]}]);
    for port in [json!({"number": 80}), json!({"name": "http"})] {
        let t = translate_values(vec![
            to_web(port.clone()),
            two_port_web(),
            web_slice("s", endpoints.clone()),
        ]);
        assert_eq!(
            members(only_pool(&t)),
            [("10.0.0.1".to_owned(), 8080, true)],
            "{port}"
        );
        assert!(t.diagnostics.is_empty());
    }
}

#[test]
fn the_slice_port_with_the_service_port_name_gives_the_member_port() {
    let endpoints = json!([{"addresses": ["10.0.0.1"]}]);
    let t = translate_values(vec![
        to_web(json!({"number": 9100})),
        two_port_web(),
        web_slice("s", endpoints),
    ]);
    let pool = only_pool(&t);
    assert_eq!(
        (pool.name.as_str(), pool.service_port.as_str()),
        ("default_web_9100", "9100")
    );
    assert_eq!(members(pool), [("10.0.0.1".to_owned(), 9100, true)]);
}

#[test]
fn readiness_comes_from_the_ready_condition_absent_meaning_ready() {
    let endpoints = json!([
        {"addresses": ["10.0.0.3"], "conditions": {"ready": false}},
        {"addresses": ["10.0.0.2"], "conditions": {"serving": true}},
        {"addresses": ["10.0.0.1"], "conditions": {"ready": true}}
    ]);
    let t = translate_values(vec![
        to_web(json!({"number": 80})),
        two_port_web(),
        web_slice("s", endpoints),
    ]);
    let expected = [("10.0.0.1", true), ("10.0.0.2", true), ("10.0.0.3", false)];
    let expected: Vec<_> = expected
        .iter()
        .map(|(a, r)| (a.to_string(), 8080, *r))
        .collect();
    assert_eq!(members(only_pool(&t)), expected);
}

#[test]
fn members_are_deduplicated_across_slices_and_ready_wins() {
    let a = web_slice(
        "a",
        json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}]),
    );
    let b = web_slice(
        "b",
        json!([{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.0"], "conditions": {"ready": false}}]),
    );
    let t = translate_values(vec![to_web(json!({"number": 80})), two_port_web(), a, b]);
    let expected = vec![
        ("10.0.0.0".to_owned(), 8080, false),
        ("10.0.0.1".to_owned(), 8080, true),
    ];
    assert_eq!(members(only_pool(&t)), expected);
    assert!(only_pool(&t).members.iter().all(|m| m.weight == 1));
}

#[test]
fn fqdn_slices_and_slices_of_other_services_are_ignored() {
    let ports = json!([{"name": "http", "port": 8080}]);
    let addresses = |a: &str| json!([{"addresses": [a]}]);
    let fqdn = slice(
        "default",
        "f",
        "web",
        "FQDN",
        ports.clone(),
        addresses("web.example.com"),
    );
    let other_service = slice(
        "default",
        "o",
        "api",
        "IPv4",
        ports.clone(),
        addresses("10.9.9.9"),
    );
    let other_namespace = slice(
        "prod",
        "p",
        "web",
        "IPv4",
        ports.clone(),
        addresses("10.8.8.8"),
    );
    let v6 = slice("default", "v6", "web", "IPv6", ports, addresses("fd00::2"));
    let docs = vec![
        to_web(json!({"number": 80})),
        two_port_web(),
        fqdn,
        other_service,
        other_namespace,
        v6,
    ];
    let t = translate_values(docs);
    assert_eq!(members(only_pool(&t)), [("fd00::2".to_owned(), 8080, true)]);
}

#[test]
fn legacy_endpoints_are_used_when_no_slice_exists() {
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "web", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "10.0.0.2"}], "notReadyAddresses": [{"ip": "10.0.0.1"}],
                     "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]}]});
    let t = translate_values(vec![
        to_web(json!({"name": "http"})),
        two_port_web(),
        endpoints.clone(),
    ]);
    let expected = vec![
        ("10.0.0.1".to_owned(), 8080, false),
        ("10.0.0.2".to_owned(), 8080, true),
    ];
    assert_eq!(members(only_pool(&t)), expected);

    let slices_win = web_slice("s", json!([{"addresses": ["10.0.0.7"]}]));
    let t = translate_values(vec![
        to_web(json!({"name": "http"})),
        two_port_web(),
        endpoints,
        slices_win,
    ]);
    assert_eq!(
        members(only_pool(&t)),
        [("10.0.0.7".to_owned(), 8080, true)]
    );
}

#[test]
fn a_selectorless_service_without_endpoints_has_an_empty_pool() {
    let service = svc_doc("default", "web", json!({"ports": [{"port": 80}]}));
    let t = translate_values(vec![to_web(json!({"number": 80})), service]);
    assert!(only_pool(&t).members.is_empty());
    assert!(t.diagnostics.is_empty());
}

#[test]
fn a_missing_service_warns_and_keeps_a_pool_without_members() {
    let spec = json!({"rules": [rule("", &[("/", "Prefix", "web")])]});
    let t = translate_values(vec![ingress("default", "i", None, spec)]);
    let pool = only_pool(&t);
    assert!(pool.members.is_empty());
    assert_eq!(t.model.load_balancers[0].listeners[0].policies.len(), 1);
    let field = "spec.rules[0].http.paths[0].backend.service.name".to_owned();
    assert_eq!(
        findings(&t.diagnostics),
        vec![("i".to_owned(), field, Severity::Warning)]
    );
    assert_eq!(
        t.diagnostics[0].message,
        "service \"default/web\" not found"
    );
    assert!(t.ingresses[0].served);
}

#[test]
fn a_missing_port_warns_at_the_port_field() {
    for (port, field) in [
        (json!({"number": 81}), "number"),
        (json!({"name": "grpc"}), "name"),
    ] {
        let t = translate_values(vec![to_web(port), two_port_web()]);
        assert!(only_pool(&t).members.is_empty());
        let field = format!("spec.defaultBackend.service.port.{field}");
        assert_eq!(
            findings(&t.diagnostics),
            vec![("i".to_owned(), field, Severity::Warning)]
        );
    }
}

#[test]
fn an_external_name_service_warns_and_has_no_members() {
    let service = svc_doc(
        "default",
        "web",
        json!({"type": "ExternalName", "externalName": "example.com", "ports": [{"port": 80}]}),
    );
    let t = translate_values(vec![to_web(json!({"number": 80})), service]);
    assert!(only_pool(&t).members.is_empty());
    assert_eq!(t.diagnostics[0].field, "spec.defaultBackend.service.name");
    assert!(t.diagnostics[0].message.contains("ExternalName"));
}

#[test]
fn resource_backends_are_skipped_with_a_warning() {
    let spec = json!({"rules": [{"http": {"paths": [
        {"path": "/r", "pathType": "Prefix", "backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}}},
        {"path": "/s", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}
    ]}}]});
    let mut docs = vec![ingress("default", "i", None, spec)];
    docs.extend(service("default", "web", "10.0.0.1"));
    let t = translate_values(docs);
    let policies = &t.model.load_balancers[0].listeners[0].policies;
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0].rules[0].value, "/s");
    let field = "spec.rules[0].http.paths[0].backend.resource".to_owned();
    assert_eq!(
        findings(&t.diagnostics),
        vec![("i".to_owned(), field, Severity::Warning)]
    );
}

#[test]
fn member_ids_are_derived_from_pool_address_and_port() {
    let endpoints = json!([{"addresses": ["10.0.0.1", "10.0.0.2"]}]);
    let docs = vec![
        to_web(json!({"number": 80})),
        two_port_web(),
        web_slice("s", endpoints),
    ];
    let (a, b) = (translate_values(docs.clone()), translate_values(docs));
    assert_eq!(only_pool(&a), only_pool(&b));
    let ids: Vec<_> = only_pool(&a).members.iter().map(|m| m.id).collect();
    assert_ne!(ids[0], ids[1]);
}
