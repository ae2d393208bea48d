//! Light admission checks for the objects that feed backends: names present, ports in range,
//! addresses that parse. Enough that translation never meets a value it cannot use.

use super::report::{Report, check_name};
use crate::ObjectKey;
use crate::compat::ListField;
use crate::names;
use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use portico_model::{Diagnostic, ObjectRef};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const CONTROLLER_MAX: usize = 250;

pub fn validate_service(key: &ObjectKey, service: &Service) -> Vec<Diagnostic> {
    let mut report = Report::new(ObjectRef::new("Service", &key.namespace, &key.name));
    check_name(
        &mut report,
        service.metadata.name.as_deref(),
        names::dns1035_label,
    );
    let ports = service.spec.as_ref().and_then(|s| s.ports.as_deref());
    let ports = ports.unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        check_service_port(&mut report, port, &field, ports.len() > 1);
        let name = port.name.as_deref().unwrap_or_default();
        if !name.is_empty() && !seen.insert(name) {
            report.error(
                &format!("{field}.name"),
                format!("duplicate value \"{name}\""),
            );
        }
    }
    report.finish()
}

fn check_service_port(report: &mut Report, port: &ServicePort, field: &str, several: bool) {
    match port.name.as_deref().filter(|n| !n.is_empty()) {
        None if several => report.required(&format!("{field}.name"), ""),
        None => {}
        Some(name) => report.invalid(&format!("{field}.name"), name, names::dns1123_label(name)),
    }
    report.invalid(
        &format!("{field}.port"),
        port.port,
        names::port_number(port.port),
    );
    let target_field = format!("{field}.targetPort");
    match &port.target_port {
        None => {}
        Some(IntOrString::Int(n)) => report.invalid(&target_field, n, names::port_number(*n)),
        Some(IntOrString::String(s)) => report.invalid(&target_field, s, names::port_name(s)),
    }
}

pub fn validate_endpoint_slice(key: &ObjectKey, slice: &EndpointSlice) -> Vec<Diagnostic> {
    let mut report = Report::new(ObjectRef::new("EndpointSlice", &key.namespace, &key.name));
    check_name(
        &mut report,
        slice.metadata.name.as_deref(),
        names::dns1123_subdomain,
    );
    let parse: fn(&str) -> bool = match slice.address_type.as_str() {
        "IPv4" => |a| a.parse::<Ipv4Addr>().is_ok(),
        "IPv6" => |a| a.parse::<Ipv6Addr>().is_ok(),
        "FQDN" => |_| true,
        other => {
            let message = format!(
                "unsupported value \"{other}\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
            );
            report.error("addressType", message);
            |_| true
        }
    };
    for (i, endpoint) in slice.endpoints.items().iter().enumerate() {
        for (j, address) in endpoint.addresses.iter().enumerate() {
            if !parse(address) {
                let reason = format!("must be a valid {} address", slice.address_type);
                report.invalid(
                    &format!("endpoints[{i}].addresses[{j}]"),
                    address,
                    vec![reason],
                );
            }
        }
    }
    for (i, port) in slice.ports.iter().flatten().enumerate() {
        if let Some(number) = port.port {
            report.invalid(
                &format!("ports[{i}].port"),
                number,
                names::port_number(number),
            );
        }
    }
    report.finish()
}

pub fn validate_endpoints(key: &ObjectKey, endpoints: &Endpoints) -> Vec<Diagnostic> {
    let mut report = Report::new(ObjectRef::new("Endpoints", &key.namespace, &key.name));
    check_name(
        &mut report,
        endpoints.metadata.name.as_deref(),
        names::dns1123_subdomain,
    );
    for (i, subset) in endpoints.subsets.iter().flatten().enumerate() {
        let field = format!("subsets[{i}]");
        check_addresses(
            &mut report,
            subset.addresses.as_deref(),
            &format!("{field}.addresses"),
        );
        let not_ready = subset.not_ready_addresses.as_deref();
        check_addresses(
            &mut report,
            not_ready,
            &format!("{field}.notReadyAddresses"),
        );
        for (k, port) in subset.ports.iter().flatten().enumerate() {
            let reasons = names::port_number(port.port);
            report.invalid(&format!("{field}.ports[{k}].port"), port.port, reasons);
        }
    }
    report.finish()
}

fn check_addresses(report: &mut Report, addresses: Option<&[EndpointAddress]>, field: &str) {
    for (j, address) in addresses.unwrap_or_default().iter().enumerate() {
        if address.ip.parse::<IpAddr>().is_err() {
            let reason = "must be a valid IP address".to_owned();
            report.invalid(&format!("{field}[{j}].ip"), &address.ip, vec![reason]);
        }
    }
}

/// `name` is the key the class is stored under (IngressClasses are cluster-scoped).
pub fn validate_ingress_class(name: &str, class: &IngressClass) -> Vec<Diagnostic> {
    let mut report = Report::new(ObjectRef::new("IngressClass", "", name));
    check_name(
        &mut report,
        class.metadata.name.as_deref(),
        names::dns1123_subdomain,
    );
    let controller = class.spec.as_ref().and_then(|s| s.controller.as_deref());
    match controller.unwrap_or_default() {
        "" => report.required("spec.controller", ""),
        c if c.len() > CONTROLLER_MAX => {
            report.error(
                "spec.controller",
                format!("must have at most {CONTROLLER_MAX} bytes"),
            );
        }
        c => report.invalid("spec.controller", c, domain_prefixed_path(c)),
    }
    report.finish()
}

/// `example.com/some/path`: a DNS subdomain, then a non-empty path.
fn domain_prefixed_path(value: &str) -> Vec<String> {
    match value.split_once('/') {
        Some((domain, path)) if !path.is_empty() => names::dns1123_subdomain(domain),
        _ => vec!["must be a domain-prefixed path (such as \"acme.io/foo\")".to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(found: Vec<Diagnostic>) -> Vec<String> {
        found.into_iter().map(|d| d.field).collect()
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("default", name)
    }

    #[test]
    fn service_ports_must_be_in_range_and_named_when_several() {
        let service: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": [
                {"name": "http", "port": 80, "targetPort": 0},
                {"port": 70000, "targetPort": "Bad_Name"},
                {"name": "http", "port": 81}
            ]}
        }))
        .expect("decodes");
        let found = fields(validate_service(&key("web"), &service));
        let expected = [
            "spec.ports[0].targetPort",
            "spec.ports[1].name",
            "spec.ports[1].port",
            "spec.ports[1].targetPort",
            "spec.ports[2].name",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn valid_service_has_no_findings() {
        let service: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80, "targetPort": "http"}]}
        }))
        .expect("decodes");
        assert!(validate_service(&key("web"), &service).is_empty());
    }

    #[test]
    fn endpoint_slice_addresses_must_match_the_address_type() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1"}, "addressType": "IPv4",
            "ports": [{"port": 0}],
            "endpoints": [{"addresses": ["10.0.0.1", "fd00::1", "web.local"]}]
        }))
        .expect("decodes");
        let found = fields(validate_endpoint_slice(&key("web-1"), &slice));
        let expected = [
            "endpoints[0].addresses[1]",
            "endpoints[0].addresses[2]",
            "ports[0].port",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn endpoint_slice_address_type_must_be_known() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1"}, "addressType": "IPX", "endpoints": []
        }))
        .expect("decodes");
        assert_eq!(
            fields(validate_endpoint_slice(&key("web-1"), &slice)),
            ["addressType"]
        );
    }

    #[test]
    fn legacy_endpoint_addresses_must_be_ips() {
        let endpoints: Endpoints = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "nope"}],
                         "ports": [{"port": 8080}]}]
        }))
        .expect("decodes");
        let found = fields(validate_endpoints(&key("web"), &endpoints));
        assert_eq!(found, ["subsets[0].notReadyAddresses[0].ip"]);
    }

    #[test]
    fn ingress_class_needs_a_domain_prefixed_controller() {
        let class = |controller: serde_json::Value| -> IngressClass {
            serde_json::from_value(json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                "metadata": {"name": "portico"}, "spec": {"controller": controller}
            }))
            .expect("decodes")
        };
        let ok = class(json!("portico.dev/ingress-controller"));
        assert!(validate_ingress_class("portico", &ok).is_empty());
        for bad in [
            json!(null),
            json!(""),
            json!("no-slash"),
            json!("Bad_Domain/x"),
        ] {
            let found = fields(validate_ingress_class("portico", &class(bad.clone())));
            assert_eq!(found, ["spec.controller"], "{bad}");
        }
    }
}
