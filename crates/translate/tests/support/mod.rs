//! Test-only manifest loader: multi-document Kubernetes YAML → `Objects`.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Endpoints, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use portico_model::{Diagnostic, Severity};
use portico_translate::{
    CompactSlice, Config, KeptIngress, KeptService, ObjectKey, Objects, Translation, translate,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;

/// Parses every document of `yaml` into its typed object; panics on kinds it does not know.
pub fn load(yaml: &str) -> Objects {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("valid YAML");
    load_values(docs)
}

/// Like [`load`], from documents already parsed.
pub fn load_values(docs: Vec<Value>) -> Objects {
    let mut objects = Objects::default();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        add(&mut objects, doc);
    }
    objects
}

/// Translates documents with `Config::default()`.
pub fn translate_values(docs: Vec<Value>) -> Translation {
    translate(&load_values(docs), &Config::default())
}

/// An Ingress of class `portico` in `namespace` with the given spec (class added unless set).
pub fn ingress(namespace: &str, name: &str, created: Option<&str>, mut spec: Value) -> Value {
    if spec.get("ingressClassName").is_none() {
        spec["ingressClassName"] = json!("portico");
    }
    let mut doc = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec
    });
    if let Some(created) = created {
        doc["metadata"]["creationTimestamp"] = json!(created);
    }
    doc
}

/// A rule: `host` (empty for none) with `(path, pathType, service)` paths to port 80.
pub fn rule(host: &str, paths: &[(&str, &str, &str)]) -> Value {
    let paths: Vec<Value> = paths
        .iter()
        .map(|(path, path_type, service)| {
            json!({"path": path, "pathType": path_type,
                   "backend": {"service": {"name": service, "port": {"number": 80}}}})
        })
        .collect();
    let mut rule = json!({"http": {"paths": paths}});
    if !host.is_empty() {
        rule["host"] = json!(host);
    }
    rule
}

/// A Service with port 80 (`http`) → 8080, and an EndpointSlice with one ready `ip`.
pub fn service(namespace: &str, name: &str, ip: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"selector": {"app": name},
                        "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        slice(
            namespace,
            &format!("{name}-1"),
            name,
            "IPv4",
            json!([{"name": "http", "port": 8080}]),
            json!([{"addresses": [ip]}]),
        ),
    ]
}

pub fn slice(
    namespace: &str,
    name: &str,
    service: &str,
    address_type: &str,
    ports: Value,
    endpoints: Value,
) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": namespace,
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": address_type, "ports": ports, "endpoints": endpoints})
}

fn add(objects: &mut Objects, doc: Value) {
    let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
    let key = key_of(&doc);
    match kind.as_str() {
        "Ingress" => std::sync::Arc::make_mut(&mut objects.ingresses)
            .insert(
                key,
                Arc::new(KeptIngress::from(Arc::unwrap_or_clone(typed::<Ingress>(
                    doc,
                )))),
            )
            .map(drop),
        "IngressClass" => std::sync::Arc::make_mut(&mut objects.ingress_classes)
            .insert(key.name, typed::<IngressClass>(doc))
            .map(drop),
        "Service" => std::sync::Arc::make_mut(&mut objects.services)
            .insert(
                key,
                Arc::new(KeptService::from(Arc::unwrap_or_clone(typed::<Service>(
                    doc,
                )))),
            )
            .map(drop),
        "EndpointSlice" => std::sync::Arc::make_mut(&mut objects.endpoint_slices)
            .insert(
                key,
                Arc::new(CompactSlice::from(Arc::unwrap_or_clone(typed::<
                    EndpointSlice,
                >(
                    doc
                )))),
            )
            .map(drop),
        "Endpoints" => std::sync::Arc::make_mut(&mut objects.endpoints)
            .insert(key, typed::<Endpoints>(doc))
            .map(drop),
        "Secret" => std::sync::Arc::make_mut(&mut objects.secrets)
            .insert(key, typed::<Secret>(doc))
            .map(drop),
        "GatewayClass" => std::sync::Arc::make_mut(&mut objects.gateway_classes)
            .insert(key.name, typed(doc))
            .map(drop),
        "Gateway" => std::sync::Arc::make_mut(&mut objects.gateways)
            .insert(key, typed(doc))
            .map(drop),
        "HTTPRoute" => std::sync::Arc::make_mut(&mut objects.http_routes)
            .insert(key, typed(doc))
            .map(drop),
        "GRPCRoute" => std::sync::Arc::make_mut(&mut objects.grpc_routes)
            .insert(key, typed(doc))
            .map(drop),
        "ReferenceGrant" => std::sync::Arc::make_mut(&mut objects.reference_grants)
            .insert(key, typed(doc))
            .map(drop),
        "TCPRoute" => std::sync::Arc::make_mut(&mut objects.tcp_routes)
            .insert(key, typed(doc))
            .map(drop),
        "UDPRoute" => std::sync::Arc::make_mut(&mut objects.udp_routes)
            .insert(key, typed(doc))
            .map(drop),
        "TLSRoute" => std::sync::Arc::make_mut(&mut objects.tls_routes)
            .insert(key, typed(doc))
            .map(drop),
        "ListenerSet" => std::sync::Arc::make_mut(&mut objects.listener_sets)
            .insert(key, typed(doc))
            .map(drop),
        "BackendTLSPolicy" => std::sync::Arc::make_mut(&mut objects.backend_tls_policies)
            .insert(key, typed(doc))
            .map(drop),
        "ConfigMap" => std::sync::Arc::make_mut(&mut objects.config_maps)
            .insert(key, typed(doc))
            .map(drop),
        "Namespace" => std::sync::Arc::make_mut(&mut objects.namespaces)
            .insert(key.name, typed(doc))
            .map(drop),
        other => panic!("test loader does not know kind {other:?}"),
    };
}

fn key_of(doc: &Value) -> ObjectKey {
    let namespace = doc["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    ObjectKey::new(namespace, name)
}

fn typed<T: DeserializeOwned>(doc: Value) -> std::sync::Arc<T> {
    let text = doc.to_string();
    std::sync::Arc::new(serde_json::from_value(doc).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// Loads `yaml` and translates it with `Config::default()`.
pub fn translate_yaml(yaml: &str) -> Translation {
    translate(&load(yaml), &Config::default())
}

/// `(object name, field, severity)` of every diagnostic, for compact assertions.
pub fn findings(diagnostics: &[Diagnostic]) -> Vec<(String, String, Severity)> {
    diagnostics
        .iter()
        .map(|d| (d.object.name.clone(), d.field.clone(), d.severity))
        .collect()
}

/// The (host rule value, path rule value, pool name) of each policy of the only listener, in
/// evaluation order; the host is empty for host-less policies.
pub fn routes(translation: &Translation) -> Vec<(String, String, String)> {
    let lb = &translation.model.load_balancers[0];
    lb.listeners[0]
        .policies
        .iter()
        .map(|p| {
            let value = |t| {
                p.rules
                    .iter()
                    .find(|r| r.rule_type == t)
                    .map(|r| r.value.clone())
                    .unwrap_or_default()
            };
            let portico_model::PolicyAction::RedirectToPool { pool } = &p.action else {
                panic!("unexpected action")
            };
            let pool = lb.pool(*pool).expect("pool exists").name.clone();
            (
                value(portico_model::RuleType::HostName),
                value(portico_model::RuleType::Path),
                pool,
            )
        })
        .collect()
}
