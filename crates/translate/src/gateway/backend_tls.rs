//! BackendTLSPolicy → the upstream TLS of the pools its Service ports become: the pool speaks
//! TLS to its members (`Https`, or `H2` where the backend speaks HTTP/2), verifies their
//! certificates against the policy's CA bundle (a ConfigMap's or Secret's `ca.crt`) and sends
//! and checks the policy's hostname (or, when it names `subjectAltNames`, requires one of them
//! in the certificate instead; the hostname is still sent as SNI). The same [`UpstreamTls`] the Ingress's `proxy-ssl-*`
//! annotations give, so the proxy and haproxy serve both alike.
//!
//! A Service port is governed by the most specific policy targeting it (one naming the port
//! by `sectionName` over one naming the whole Service), the oldest of equals (creation
//! timestamp, then name); the others are `Conflicted`. A policy whose CA reference cannot be
//! used still governs its ports: verification fails closed (502), never plaintext.

use super::status::{Condition, Refusal};
use crate::annotations::Upstream;
use crate::{ObjectKey, Objects};
use k8s_openapi::api::core::v1::ServicePort;
use portico_gateway::{BackendTlsPolicy, LocalObjectReference, SubjectAltName as GatewaySan};
use portico_model::{
    LoadBalancer, ObjectRef, PoolProtocol, PoolSettings, SubjectAltName, UpstreamTls, stable_uuid,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The kinds a policy's `caCertificateRefs` may name: ConfigMap (the API's core) and Secret
/// (implementation-specific, as Ingress's `proxy-ssl-secret` names them).
const CA_KINDS: [&str; 2] = ["ConfigMap", "Secret"];

/// The policy that governs port `port` of Service `service`, if any.
pub(crate) fn governing<'a>(
    objects: &'a Objects,
    service: &ObjectKey,
    port: &ServicePort,
) -> Option<(&'a ObjectKey, &'a BackendTlsPolicy)> {
    let mut candidates: Vec<_> = (objects.backend_tls_policies.iter())
        .filter(|(key, _)| key.namespace == service.namespace)
        .filter_map(|(key, p)| Some((specificity(p, &service.name, port)?, key, &**p)))
        .collect();
    candidates.sort_by(|(a_rank, a_key, a), (b_rank, b_key, b)| {
        let created = |p: &BackendTlsPolicy| p.metadata.creation_timestamp.clone();
        (b_rank, created(a), a_key).cmp(&(a_rank, created(b), b_key))
    });
    candidates.first().map(|(_, key, p)| (*key, *p))
}

/// How specifically `policy` targets port `port` of Service `service`: 1 by the port's name,
/// 0 the whole Service, none not at all.
fn specificity(policy: &BackendTlsPolicy, service: &str, port: &ServicePort) -> Option<u8> {
    let targets = policy.spec.target_refs.iter();
    let targets =
        targets.filter(|t| t.group.is_empty() && t.kind == "Service" && t.name == service);
    targets
        .filter_map(|t| match &t.section_name {
            None => Some(0),
            Some(name) if port.name.as_deref() == Some(name.as_str()) => Some(1),
            Some(_) => None,
        })
        .max()
}

/// The upstream settings of the pools `policy` (in `namespace`) governs; `h2` when the backend
/// speaks HTTP/2 (a GRPCRoute's, or a port whose `appProtocol` says h2c).
pub(crate) fn upstream(namespace: &str, policy: &BackendTlsPolicy, h2: bool) -> Arc<Upstream> {
    let validation = &policy.spec.validation;
    let tls = UpstreamTls {
        verify: true,
        ca: validation
            .ca_certificate_refs
            .first()
            .map(|r| ca_ref(namespace, r)),
        server_name: Some(validation.hostname.clone()),
        sni: true,
        subject_alt_names: validation.subject_alt_names.iter().map(san).collect(),
    };
    let settings = PoolSettings {
        upstream_tls: Some(tls),
        ..PoolSettings::default()
    };
    let protocol = if h2 {
        PoolProtocol::H2
    } else {
        PoolProtocol::Https
    };
    let canonical = serde_json::json!(["BackendTLSPolicy", protocol, settings]).to_string();
    Arc::new(Upstream {
        protocol: Some(protocol),
        settings: Arc::new(settings),
        digest: Some(stable_uuid(&canonical).simple().to_string()),
        ..Upstream::default()
    })
}

/// The model's name of a `subjectAltNames` entry. One that is not valid ([`invalid`] says
/// why) becomes an empty hostname, which no certificate carries: the policy fails closed.
fn san(name: &GatewaySan) -> SubjectAltName {
    match (name.kind.as_str(), &name.hostname, &name.uri) {
        ("Hostname", Some(host), None) if !host.is_empty() => {
            SubjectAltName::Hostname(host.clone())
        }
        ("URI", None, Some(uri)) if !uri.is_empty() => SubjectAltName::Uri(uri.clone()),
        _ => SubjectAltName::Hostname(String::new()),
    }
}

/// What is wrong with `subjectAltNames[i]`, if anything.
fn invalid_san(i: usize, name: &GatewaySan) -> Option<String> {
    let field = format!("spec.validation.subjectAltNames[{i}]");
    let empty = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    match name.kind.as_str() {
        "Hostname" if empty(&name.hostname) => {
            Some(format!("{field}.hostname: type Hostname needs one"))
        }
        "URI" if empty(&name.uri) => Some(format!("{field}.uri: type URI needs one")),
        "Hostname" if name.uri.is_some() => Some(format!("{field}.uri: type Hostname takes none")),
        "URI" if name.hostname.is_some() => Some(format!("{field}.hostname: type URI takes none")),
        "Hostname" | "URI" => None,
        other => Some(format!(
            "{field}.type: {other:?} is neither Hostname nor URI"
        )),
    }
}

/// The model's reference to a CA certificate reference of a policy in `namespace` (its kind
/// tells the CA loading where to look).
fn ca_ref(namespace: &str, r: &LocalObjectReference) -> ObjectRef {
    ObjectRef::new(&r.kind, namespace, &r.name)
}

/// Every policy's first CA certificate reference of a kind Portico loads, with the policy, as
/// the model names it: what the CA loading reads (only these ConfigMaps are ever read).
pub(crate) fn ca_refs(objects: &Objects) -> Vec<(&ObjectKey, ObjectRef)> {
    let policies = objects.backend_tls_policies.iter();
    let refs =
        policies.filter_map(|(key, p)| Some((key, p.spec.validation.ca_certificate_refs.first()?)));
    refs.filter(|(_, r)| r.group.is_empty() && CA_KINDS.contains(&r.kind.as_str()))
        .map(|(key, r)| (key, ca_ref(&key.namespace, r)))
        .collect()
}

/// What is wrong with `policy`'s validation settings as written, whatever the CA's content:
/// `wellKnownCACertificates` (the proxy loads no system roots), no CA reference, more than one,
/// or one of a kind Portico does not read.
pub(crate) fn invalid(policy: &BackendTlsPolicy) -> Option<Refusal> {
    let validation = &policy.spec.validation;
    if let Some(known) = &validation.well_known_ca_certificates {
        let message = format!(
            "spec.validation.wellKnownCACertificates {known:?}: Portico verifies backends only \
             against caCertificateRefs"
        );
        return Some(("Invalid", message));
    }
    let sans = validation.subject_alt_names.iter().enumerate();
    if let Some(message) = sans.filter_map(|(i, name)| invalid_san(i, name)).next() {
        return Some(("Invalid", message));
    }
    match &validation.ca_certificate_refs[..] {
        [] => Some((
            "Invalid",
            "spec.validation.caCertificateRefs is empty".to_owned(),
        )),
        [one] if !one.group.is_empty() || !CA_KINDS.contains(&one.kind.as_str()) => Some((
            "InvalidKind",
            format!(
                "spec.validation.caCertificateRefs[0]: {} of group {:?}: only ConfigMaps and \
                 Secrets are read",
                one.kind, one.group
            ),
        )),
        [_] => None,
        _ => Some((
            "Invalid",
            "spec.validation.caCertificateRefs names more than one: Portico reads one".to_owned(),
        )),
    }
}

/// The conditions of a policy for one of our Gateways: Accepted (false: `Conflicted` when
/// another policy governs the ports it targets there, `Invalid` settings), ResolvedRefs (false:
/// `InvalidKind`, or `InvalidCACertificateRef` when `ca_error` says the CA cannot be used).
pub(crate) fn conditions(
    policy: &BackendTlsPolicy,
    conflicted_by: Option<&ObjectKey>,
    ca_error: Option<&str>,
) -> Vec<Condition> {
    let invalid = invalid(policy);
    let accepted = match (&invalid, conflicted_by) {
        (_, Some(winner)) => Condition::new(
            "Accepted",
            false,
            "Conflicted",
            &format!("BackendTLSPolicy {winner} governs the same Service port"),
        ),
        (Some(("Invalid", message)), None) => Condition::new("Accepted", false, "Invalid", message),
        _ => Condition::holds("Accepted"),
    };
    let resolved = match (&invalid, ca_error) {
        (Some(("InvalidKind", message)), _) => {
            Condition::new("ResolvedRefs", false, "InvalidKind", message)
        }
        (_, Some(message)) => {
            Condition::new("ResolvedRefs", false, "InvalidCACertificateRef", message)
        }
        _ => Condition::holds("ResolvedRefs"),
    };
    vec![accepted, resolved]
}

/// The policies targeting the Service ports `ports` (Service, port number): each that governs
/// one of them (none), and each that governs none of them, with a winner it lost to.
fn reached(
    objects: &Objects,
    ports: impl Iterator<Item = (ObjectKey, i32)>,
) -> BTreeMap<&ObjectKey, Option<&ObjectKey>> {
    let mut out: BTreeMap<&ObjectKey, Option<&ObjectKey>> = BTreeMap::new();
    for (service, number) in ports {
        let Some(found) = objects.services.get(&service) else {
            continue;
        };
        let Some(port) = found.spec.ports.iter().find(|p| p.port == number) else {
            continue;
        };
        let Some((winner, _)) = governing(objects, &service, port) else {
            continue;
        };
        out.insert(winner, None);
        for (key, p) in objects.backend_tls_policies.iter() {
            if key != winner
                && key.namespace == service.namespace
                && specificity(p, &service.name, port).is_some()
            {
                out.entry(key).or_insert(Some(winner));
            }
        }
    }
    out
}

/// Why the CA reference of `policy` (in `namespace`) cannot be used, if it cannot: the object
/// is missing or holds no `ca.crt` (its content is parsed by the CA loading, which warns).
fn ca_error(objects: &Objects, namespace: &str, policy: &BackendTlsPolicy) -> Option<String> {
    let r = policy.spec.validation.ca_certificate_refs.first()?;
    let key = ObjectKey::new(namespace, &r.name);
    let has_ca = match r.kind.as_str() {
        "ConfigMap" => objects.config_maps.get(&key).map(|c| {
            let data = c.data.as_ref().is_some_and(|d| d.contains_key(CA_KEY));
            data || c
                .binary_data
                .as_ref()
                .is_some_and(|d| d.contains_key(CA_KEY))
        }),
        "Secret" => objects.secrets.get(&key).map(|s| {
            let data = s.data.as_ref().is_some_and(|d| d.contains_key(CA_KEY));
            data || s
                .string_data
                .as_ref()
                .is_some_and(|d| d.contains_key(CA_KEY))
        }),
        _ => return None,
    };
    match has_ca {
        None => Some(format!("{} {key} not found", r.kind)),
        Some(false) => Some(format!("{} {key} has no {CA_KEY}", r.kind)),
        Some(true) => None,
    }
}

const CA_KEY: &str = "ca.crt";

/// The verdicts on the policies that govern, or lose, a Service port that one of our Gateways'
/// load balancers `lbs` sends to: by policy, one entry per such Gateway.
pub(crate) fn verdicts(objects: &Objects, lbs: &[LoadBalancer]) -> PolicyVerdicts {
    let mut out = PolicyVerdicts::new();
    if objects.backend_tls_policies.is_empty() {
        // Nothing to find: the pools of 10,000 routes are not looked through.
        return out;
    }
    for lb in lbs.iter().filter(|lb| lb.origin.kind == "Gateway") {
        let gateway = ObjectKey::new(&lb.origin.namespace, &lb.origin.name);
        let ports = lb.pools.iter().filter_map(|p| {
            let service = ObjectKey::new(&p.service.namespace, &p.service.name);
            Some((service, p.service_port.parse().ok()?))
        });
        for (key, winner) in reached(objects, ports) {
            let Some(policy) = objects.backend_tls_policies.get(key) else {
                continue;
            };
            let ca = ca_error(objects, &key.namespace, policy);
            let conditions = conditions(policy, winner, ca.as_deref());
            let entries = out.entry(key.clone()).or_default();
            entries.retain(|(g, _)| *g != gateway);
            entries.push((gateway.clone(), conditions));
        }
    }
    out
}

/// By policy, its conditions for each of our Gateways it reaches.
pub type PolicyVerdicts = BTreeMap<ObjectKey, Vec<(ObjectKey, Vec<Condition>)>>;
