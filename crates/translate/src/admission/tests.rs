//! Table tests: each invalid Ingress yields an Error naming the exact field; valid ones none.

use super::*;
use crate::KeptIngress;
use crate::{ObjectKey, Objects};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use portico_model::Severity;
use serde_json::{Value, json};

fn base() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"rules": [{"host": "foo.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}}
        ]}}]}
    })
}

const PATH0: &str = "/spec/rules/0/http/paths/0";

/// The base Ingress with the JSON value at `pointer` replaced (or removed, for `Null`).
fn with(pointer: &str, value: Value) -> Value {
    let mut doc = base();
    let (parent, leaf) = pointer.rsplit_once('/').expect("pointer has a parent");
    let parent = doc.pointer_mut(parent).expect("parent exists");
    match (parent, value) {
        (Value::Object(map), Value::Null) => {
            map.remove(leaf);
        }
        (Value::Object(map), value) => {
            map.insert(leaf.to_owned(), value);
        }
        (Value::Array(items), value) => items[leaf.parse::<usize>().expect("index")] = value,
        _ => panic!("bad pointer {pointer}"),
    }
    doc
}

fn errors(doc: Value) -> Vec<String> {
    let ingress: Ingress = serde_json::from_value(doc).expect("decodes");
    let name = ingress.metadata.name.as_deref().unwrap_or_default();
    let key = ObjectKey::new("default", name);
    let found = validate_ingress(&key, &ingress.into());
    assert!(found.iter().all(|d| d.severity == Severity::Error));
    found.into_iter().map(|d| d.field).collect()
}

fn path_with(path: &str, path_type: &str) -> Value {
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    with(
        PATH0,
        json!({"path": path, "pathType": path_type, "backend": backend}),
    )
}

fn backend_with(backend: Value) -> Value {
    with(&format!("{PATH0}/backend"), backend)
}

#[test]
fn valid_ingresses_have_no_errors() {
    let resource =
        json!({"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}});
    let cases = [
        ("base", base()),
        (
            "wildcard host",
            with("/spec/rules/0/host", json!("*.example.com")),
        ),
        ("no host", with("/spec/rules/0/host", Value::Null)),
        (
            "implementation-specific without path",
            path_with("", "ImplementationSpecific"),
        ),
        (
            "implementation-specific regex",
            path_with("/([a-z]*)", "ImplementationSpecific"),
        ),
        ("exact with trailing slash", path_with("/foo/", "Exact")),
        (
            "named port",
            backend_with(json!({"service": {"name": "web", "port": {"name": "http"}}})),
        ),
        ("resource backend", backend_with(resource)),
        (
            "default backend only",
            with(
                "/spec",
                json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}),
            ),
        ),
        (
            "tls",
            with(
                "/spec/tls",
                json!([{"hosts": ["*.example.com", "a.example.com"], "secretName": "tls-cert"}]),
            ),
        ),
        ("class and matching annotation", {
            let mut doc = with("/spec/ingressClassName", json!("portico"));
            doc["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "portico"});
            doc
        }),
    ];
    for (name, doc) in cases {
        assert_eq!(errors(doc), Vec::<String>::new(), "{name}");
    }
}

#[test]
fn invalid_paths_name_the_path_field() {
    let field = "spec.rules[0].http.paths[0].path";
    let cases = [
        ("foo", "Prefix"),
        ("", "Exact"),
        ("/a//b", "Prefix"),
        ("/a/./b", "Exact"),
        ("/a/../b", "Prefix"),
        ("/a/..", "Prefix"),
        ("/a/.", "Exact"),
        ("/a%2fb", "Prefix"),
        ("/a%2Fb", "Exact"),
        ("foo", "ImplementationSpecific"),
    ];
    for (path, path_type) in cases {
        assert_eq!(
            errors(path_with(path, path_type)),
            vec![field],
            "{path} {path_type}"
        );
    }
}

#[test]
fn path_type_is_required_and_must_be_known() {
    let field = "spec.rules[0].http.paths[0].pathType";
    assert_eq!(errors(path_with("/", "")), vec![field]);
    assert_eq!(errors(path_with("/", "Regex")), vec![field]);
}

#[test]
fn invalid_hosts_name_the_host_field() {
    for host in [
        "Foo.example.com",
        "*",
        "*foo.com",
        "foo.*.com",
        "*.*.com",
        "a..b",
        "foo_bar.com",
    ] {
        let found = errors(with("/spec/rules/0/host", json!(host)));
        assert_eq!(found, vec!["spec.rules[0].host"], "{host}");
    }
}

#[test]
fn ip_addresses_are_not_hosts() {
    let found = errors(with("/spec/rules/0/host", json!("10.0.0.1")));
    assert_eq!(found, vec!["spec.rules[0].host"]);
    let found = errors(with("/spec/rules/0/host", json!("::1")));
    assert!(!found.is_empty() && found.iter().all(|f| f == "spec.rules[0].host"));
}

#[test]
fn backends_need_exactly_one_target_and_one_port() {
    let backend = "spec.rules[0].http.paths[0].backend";
    let svc = |port: Value| json!({"service": {"name": "web", "port": port}});
    let cases = [
        (json!({}), backend.to_owned()),
        (
            json!({"service": {"name": "web", "port": {"number": 80}}, "resource": {"kind": "B", "name": "b"}}),
            backend.to_owned(),
        ),
        (
            json!({"service": {"name": "", "port": {"number": 80}}}),
            format!("{backend}.service.name"),
        ),
        (
            json!({"service": {"name": "1web", "port": {"number": 80}}}),
            format!("{backend}.service.name"),
        ),
        (
            svc(json!({"number": 80, "name": "http"})),
            format!("{backend}.service.port"),
        ),
        (svc(json!({})), format!("{backend}.service.port")),
        (
            json!({"service": {"name": "web"}}),
            format!("{backend}.service.port"),
        ),
        (
            svc(json!({"number": 70000})),
            format!("{backend}.service.port.number"),
        ),
        (
            svc(json!({"number": -1})),
            format!("{backend}.service.port.number"),
        ),
        (
            svc(json!({"name": "HTTP"})),
            format!("{backend}.service.port.name"),
        ),
        (
            svc(json!({"name": "8080"})),
            format!("{backend}.service.port.name"),
        ),
        (
            json!({"resource": {"kind": "", "name": "b"}}),
            format!("{backend}.resource.kind"),
        ),
    ];
    for (value, field) in cases {
        let found = errors(backend_with(value.clone()));
        assert!(
            !found.is_empty() && found.iter().all(|f| *f == field),
            "{value}: {found:?}"
        );
    }
}

#[test]
fn spec_needs_rules_or_a_default_backend() {
    assert_eq!(errors(with("/spec", json!({}))), vec!["spec"]);
    assert_eq!(errors(with("/spec/rules", json!([]))), vec!["spec"]);
}

#[test]
fn http_rule_needs_paths() {
    let found = errors(with("/spec/rules/0/http/paths", json!([])));
    assert_eq!(found, vec!["spec.rules[0].http.paths"]);
}

#[test]
fn default_backend_is_validated_at_its_own_field() {
    let doc = with(
        "/spec/defaultBackend",
        json!({"service": {"name": "web", "port": {"number": 0}}}),
    );
    assert_eq!(errors(doc), vec!["spec.defaultBackend.service.port"]);
}

#[test]
fn tls_hosts_and_secret_names_are_validated() {
    let doc = with(
        "/spec/tls",
        json!([{"hosts": ["ok.example.com", "Bad_Host"], "secretName": "Not_A_Name"}]),
    );
    assert_eq!(
        errors(doc),
        vec!["spec.tls[0].hosts[1]", "spec.tls[0].secretName"]
    );
}

#[test]
fn metadata_name_must_be_present_and_a_subdomain() {
    assert_eq!(
        errors(with("/metadata/name", Value::Null)),
        vec!["metadata.name"]
    );
    assert_eq!(
        errors(with("/metadata/name", json!("Web_1"))),
        vec!["metadata.name"]
    );
}

#[test]
fn class_name_must_be_a_subdomain() {
    let found = errors(with("/spec/ingressClassName", json!("Not Valid")));
    assert_eq!(found, vec!["spec.ingressClassName"]);
}

#[test]
fn legacy_annotation_must_agree_with_class_name() {
    let mut doc = with("/spec/ingressClassName", json!("portico"));
    doc["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "nginx"});
    assert_eq!(
        errors(doc),
        vec!["metadata.annotations[kubernetes.io/ingress.class]"]
    );
}

#[test]
fn several_problems_are_all_reported() {
    let mut doc = path_with("nope", "Exact");
    doc["spec"]["rules"][0]["host"] = json!("10.1.1.1");
    assert_eq!(
        errors(doc),
        vec!["spec.rules[0].host", "spec.rules[0].http.paths[0].path"]
    );
}

fn class(name: &str, default: Option<&str>, created: Option<&str>) -> IngressClass {
    let mut doc = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": name}, "spec": {"controller": "example.com/c"}
    });
    if let Some(value) = default {
        doc["metadata"]["annotations"] =
            json!({"ingressclass.kubernetes.io/is-default-class": value});
    }
    if let Some(created) = created {
        doc["metadata"]["creationTimestamp"] = json!(created);
    }
    serde_json::from_value(doc).expect("decodes")
}

fn ingress(name: &str, class: Option<&str>, legacy: Option<&str>) -> KeptIngress {
    let mut doc = with("/metadata/name", json!(name));
    if let Some(class) = class {
        doc["spec"]["ingressClassName"] = json!(class);
    }
    if let Some(legacy) = legacy {
        doc["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": legacy});
    }
    let ingress: Ingress = serde_json::from_value(doc).expect("decodes");
    ingress.into()
}

fn objects(classes: Vec<IngressClass>) -> Objects {
    let mut objects = Objects::default();
    for c in classes {
        let name = c.metadata.name.clone().unwrap_or_default();
        std::sync::Arc::make_mut(&mut objects.ingress_classes).insert(name, std::sync::Arc::new(c));
    }
    for (name, class, legacy) in [
        ("plain", None, None),
        ("named", Some("other"), None),
        ("legacy", None, Some("old")),
    ] {
        std::sync::Arc::make_mut(&mut objects.ingresses).insert(
            ObjectKey::new("default", name),
            std::sync::Arc::new(ingress(name, class, legacy)),
        );
    }
    objects
}

fn class_of(objects: &Objects, name: &str) -> Option<String> {
    let ingress = &objects.ingresses[&ObjectKey::new("default", name)];
    ingress.spec.ingress_class_name.clone()
}

#[test]
fn default_class_goes_only_to_ingresses_naming_no_class() {
    let mut objects = objects(vec![
        class("portico", Some("true"), None),
        class("x", None, None),
    ]);
    let before = objects.clone();
    assert!(assign_default_class(&mut objects).is_empty());
    assert_eq!(class_of(&objects, "plain").as_deref(), Some("portico"));
    assert_eq!(class_of(&objects, "named").as_deref(), Some("other"));
    assert_eq!(class_of(&objects, "legacy"), None);
    // The Ingresses left alone stay the shared objects (compared by pointer downstream).
    let shared = |name| {
        let key = ObjectKey::new("default", name);
        std::sync::Arc::ptr_eq(&before.ingresses[&key], &objects.ingresses[&key])
    };
    assert!(shared("named") && shared("legacy") && !shared("plain"));
}

#[test]
fn no_default_class_leaves_ingresses_alone() {
    let mut objects = objects(vec![
        class("portico", Some("false"), None),
        class("x", Some("True"), None),
    ]);
    assert!(assign_default_class(&mut objects).is_empty());
    assert_eq!(class_of(&objects, "plain"), None);
}

#[test]
fn newest_of_several_default_classes_wins_with_a_warning() {
    let mut objects = objects(vec![
        class("a-old", Some("true"), Some("2023-01-01T00:00:00Z")),
        class("z-new", Some("true"), Some("2024-01-01T00:00:00Z")),
        class("m-undated", Some("true"), None),
    ]);
    let found = assign_default_class(&mut objects);
    assert_eq!(class_of(&objects, "plain").as_deref(), Some("z-new"));
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].severity, found[0].object.name.as_str()),
        (Severity::Warning, "z-new")
    );
}

#[test]
fn equally_old_default_classes_are_chosen_by_name() {
    let mut objects = objects(vec![
        class("b", Some("true"), None),
        class("a", Some("true"), None),
    ]);
    assign_default_class(&mut objects);
    assert_eq!(class_of(&objects, "plain").as_deref(), Some("a"));
}
