//! Ingress validation as the API server does it on create (networking.k8s.io/v1).

use super::report::{Report, check_name};
use crate::names;
use crate::{KeptBackend, KeptIngress, KeptIngressSpec, KeptPath, KeptRule, KeptServiceBackend};
use crate::{LEGACY_CLASS_ANNOTATION, ObjectKey};
use k8s_openapi::api::networking::v1::IngressTLS;
use portico_model::{Diagnostic, ObjectRef};
use std::net::IpAddr;

const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];
const PATH_TYPES: &str = "\"Exact\", \"ImplementationSpecific\", \"Prefix\"";

/// The errors the API server would reject `ingress` with; empty when it would be admitted.
/// Fields are named precisely, e.g. `spec.rules[0].http.paths[1].path`.
pub fn validate_ingress(key: &ObjectKey, ingress: &KeptIngress) -> Vec<Diagnostic> {
    let mut report = Report::new(ObjectRef::new("Ingress", &key.namespace, &key.name));
    let name = Some(key.name.as_str()).filter(|n| !n.is_empty());
    check_name(&mut report, name, names::dns1123_subdomain);
    check_spec(&mut report, &ingress.spec);
    check_class_agreement(&mut report, ingress);
    report.finish()
}

fn check_spec(report: &mut Report, spec: &KeptIngressSpec) {
    let rules = &spec.rules;
    if rules.is_empty() && spec.default_backend.is_none() {
        report.error(
            "spec",
            "either `defaultBackend` or `rules` must be specified",
        );
    }
    if let Some(backend) = &spec.default_backend {
        check_backend(report, backend, "spec.defaultBackend");
    }
    for (i, rule) in rules.iter().enumerate() {
        check_rule(report, rule, &format!("spec.rules[{i}]"));
    }
    for (i, tls) in spec.tls.iter().enumerate() {
        check_tls(report, tls, &format!("spec.tls[{i}]"));
    }
    if let Some(class) = &spec.ingress_class_name {
        report.invalid(
            "spec.ingressClassName",
            class,
            names::dns1123_subdomain(class),
        );
    }
}

fn check_class_agreement(report: &mut Report, ingress: &KeptIngress) {
    let annotation = ingress.metadata.annotations.as_ref();
    let annotation = annotation.and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
    let field = ingress.spec.ingress_class_name.as_ref();
    if let (Some(annotation), Some(field)) = (annotation, field)
        && annotation != field
    {
        let reason = "must match `ingressClassName` when both are specified".to_owned();
        let path = format!("metadata.annotations[{LEGACY_CLASS_ANNOTATION}]");
        report.invalid(&path, annotation, vec![reason]);
    }
}

fn check_rule(report: &mut Report, rule: &KeptRule, field: &str) {
    if let Some(host) = rule.host.as_deref().filter(|h| !h.is_empty()) {
        let host_field = format!("{field}.host");
        if host.parse::<IpAddr>().is_ok() {
            let reason = "must be a DNS name, not an IP address".to_owned();
            report.invalid(&host_field, host, vec![reason]);
        }
        report.invalid(&host_field, host, host_reasons(host));
    }
    let Some(paths) = &rule.http else { return };
    if paths.is_empty() {
        report.required(&format!("{field}.http.paths"), "");
    }
    for (i, path) in paths.iter().enumerate() {
        check_path(report, path, &format!("{field}.http.paths[{i}]"));
    }
}

/// Host syntax: a DNS-1123 subdomain, or `*.` and one when the host holds a `*`.
pub(crate) fn host_reasons(host: &str) -> Vec<String> {
    if host.contains('*') {
        names::wildcard_dns1123_subdomain(host)
    } else {
        names::dns1123_subdomain(host)
    }
}

fn check_tls(report: &mut Report, tls: &IngressTLS, field: &str) {
    for (i, host) in tls.hosts.iter().flatten().enumerate() {
        report.invalid(&format!("{field}.hosts[{i}]"), host, host_reasons(host));
    }
    if let Some(secret) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) {
        let reasons = names::dns1123_subdomain(secret);
        report.invalid(&format!("{field}.secretName"), secret, reasons);
    }
}

fn check_path(report: &mut Report, path: &KeptPath, field: &str) {
    let value = path.path.as_deref().unwrap_or_default();
    let path_field = format!("{field}.path");
    match path.path_type.as_str() {
        "" => return report.required(&format!("{field}.pathType"), "pathType must be specified"),
        "Exact" | "Prefix" => report.invalid(&path_field, value, strict_path_reasons(value)),
        "ImplementationSpecific" if !value.is_empty() && !value.starts_with('/') => {
            report.invalid(
                &path_field,
                value,
                vec!["must be an absolute path".to_owned()],
            );
        }
        "ImplementationSpecific" => {}
        other => report.error(
            &format!("{field}.pathType"),
            format!("unsupported value \"{other}\": supported values: {PATH_TYPES}"),
        ),
    }
    check_backend(report, &path.backend, &format!("{field}.backend"));
}

/// Exact and Prefix paths: absolute, and free of sequences that normalise differently.
fn strict_path_reasons(path: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if !path.starts_with('/') {
        reasons.push("must be an absolute path".to_owned());
    }
    for seq in INVALID_PATH_SEQUENCES.iter().filter(|s| path.contains(*s)) {
        reasons.push(format!("must not contain '{seq}'"));
    }
    for suffix in INVALID_PATH_SUFFIXES.iter().filter(|s| path.ends_with(*s)) {
        reasons.push(format!("cannot end with '{suffix}'"));
    }
    reasons
}

fn check_backend(report: &mut Report, backend: &KeptBackend, field: &str) {
    match (&backend.service, &backend.resource) {
        (Some(_), Some(_)) => report.error(field, "cannot set both resource and service backends"),
        (None, None) => report.error(field, "resource or service backend is required"),
        (Some(service), None) => check_service_backend(report, service, field),
        (None, Some(resource)) => {
            let field = format!("{field}.resource");
            if resource.kind.is_empty() {
                report.required(&format!("{field}.kind"), "kind is required");
            }
            if resource.name.is_empty() {
                report.required(&format!("{field}.name"), "name is required");
            }
        }
    }
}

fn check_service_backend(report: &mut Report, service: &KeptServiceBackend, field: &str) {
    let name_field = format!("{field}.service.name");
    if service.name.is_empty() {
        report.required(&name_field, "");
    } else {
        report.invalid(
            &name_field,
            &service.name,
            names::dns1035_label(&service.name),
        );
    }
    let port = service.port.as_ref();
    let name = port
        .and_then(|p| p.name.as_deref())
        .filter(|n| !n.is_empty());
    let number = port.and_then(|p| p.number).filter(|n| *n != 0);
    let port_field = format!("{field}.service.port");
    match (name, number) {
        (Some(_), Some(_)) => report.error(&port_field, "cannot set both port name & port number"),
        (Some(name), None) => {
            report.invalid(&format!("{port_field}.name"), name, names::port_name(name));
        }
        (None, Some(number)) => {
            report.invalid(
                &format!("{port_field}.number"),
                number,
                names::port_number(number),
            );
        }
        (None, None) => report.required(&port_field, "port name or number is required"),
    }
}
