//! Services of type LoadBalancer → load balancers of provider `l4` (or `haproxy`, chosen by
//! the Service's `portico.dev/provider`, which then skips UDP ports with a warning): one TCP
//! or UDP listener per Service port, each with a pool of the port's endpoints (from
//! EndpointSlices, so a `targetPort` by name is already resolved to each endpoint's number).
//!
//! A Service is Portico's when its `spec.loadBalancerClass` is [`L4_CLASS`], or, with
//! [`Config::l4_all_services`], when it names no class. Honoured: ports with names and
//! protocols (TCP, UDP), `sessionAffinity: ClientIP` with `timeoutSeconds`,
//! `loadBalancerSourceRanges`, and `loadBalancerIP` (a fixed VIP, in `crate::address`); the
//! annotation [`PROXY_PROTOCOL_ANNOTATION`] on TCP ports. SCTP ports and fields Portico does not implement are warnings
//! naming the field (docs/l4.md lists them).

use crate::KeptService;
use crate::backend::{PoolKey, PortRef};
use crate::config::L4_CLASS;
use crate::memo::Pools;
use crate::pool::pool_id;
use crate::{Config, ObjectKey, Objects, annotations::Upstream};
use portico_model::{
    Algorithm, Cidr, Diagnostic, HashKey, Listener, ListenerId, LoadBalancer, LoadBalancerId,
    ObjectRef, Protocol, ProxyProtocol,
};
use std::sync::Arc;

/// The provider type of Services' load balancers, unless [`crate::config::PROVIDER_ANNOTATION`]
/// on the Service names another that serves Services ([`SERVICE_PROVIDERS`]).
pub const L4_PROVIDER: &str = "l4";
/// The providers a Service may choose with `portico.dev/provider`: `l4` (TCP and UDP) and
/// `haproxy` (TCP only: haproxy 2.6 has no UDP proxying, so its UDP ports are skipped with a
/// warning).
pub const SERVICE_PROVIDERS: [&str; 2] = [L4_PROVIDER, "haproxy"];
/// Service annotation: `v2` sends each TCP port's members a PROXY protocol v2 header;
/// `none` (or no annotation) sends none.
pub const PROXY_PROTOCOL_ANNOTATION: &str = "portico.dev/proxy-protocol";
/// `sessionAffinityConfig.clientIP.timeoutSeconds` when unset (Kubernetes' default, 3 hours).
const DEFAULT_AFFINITY_TIMEOUT_S: u64 = 10_800;

/// Whether Portico serves this Service as an `l4` load balancer.
pub(crate) fn is_l4(service: &KeptService, config: &Config) -> bool {
    // Kept only for a Service of type LoadBalancer.
    let Some(spec) = service.load_balancer() else {
        return false;
    };
    match spec.load_balancer_class.as_deref() {
        Some(class) => class == L4_CLASS,
        None => config.l4_all_services,
    }
}

/// The `l4` load balancers of every served Service.
pub(crate) fn load_balancers(
    objects: &Objects,
    config: &Config,
    pools: &mut Pools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<LoadBalancer> {
    (objects.services.iter())
        .filter(|(_, s)| is_l4(s, config))
        .map(|(key, service)| build(key, service, pools, diagnostics))
        .collect()
}

fn build(
    key: &ObjectKey,
    service: &KeptService,
    pools: &mut Pools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> LoadBalancer {
    let name = format!("service/{}/{}", key.namespace, key.name);
    let id = LoadBalancerId::derive(&format!("loadbalancer/{name}"));
    let origin = ObjectRef::new("Service", &key.namespace, &key.name);
    let mut warn = |field: String, message: String| {
        diagnostics.push(Diagnostic::warning(origin.clone(), field, message));
    };
    let spec = service.load_balancer().cloned().unwrap_or_default();

    let mut settings = portico_model::PoolSettings::default();
    let mut algorithm = Algorithm::default();
    match spec.session_affinity.as_deref() {
        None | Some("None") => {}
        Some("ClientIP") => {
            algorithm = Algorithm::Hash(HashKey::ClientAddress);
            let timeout = (spec.session_affinity_config.as_ref())
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds);
            let timeout = match timeout {
                None => DEFAULT_AFFINITY_TIMEOUT_S,
                Some(t) if (1..=86_400).contains(&t) => t as u64,
                Some(t) => {
                    warn(
                        "spec.sessionAffinityConfig.clientIP.timeoutSeconds".into(),
                        format!("{t} is not within 1-86400; using {DEFAULT_AFFINITY_TIMEOUT_S}"),
                    );
                    DEFAULT_AFFINITY_TIMEOUT_S
                }
            };
            settings.client_affinity_timeout_s = Some(timeout);
        }
        Some(other) => warn(
            "spec.sessionAffinity".into(),
            format!("{other:?} is not supported (None or ClientIP); ignored"),
        ),
    }
    for (i, range) in (spec.load_balancer_source_ranges.iter().flatten()).enumerate() {
        match range.trim().parse::<Cidr>() {
            Ok(cidr) => settings.allow_sources.push(cidr),
            Err(e) => warn(
                format!("spec.loadBalancerSourceRanges[{i}]"),
                format!("{e}; ignored"),
            ),
        }
    }
    let ranges_given = spec.load_balancer_source_ranges.as_ref();
    if settings.allow_sources.is_empty() && ranges_given.is_some_and(|r| !r.is_empty()) {
        // Every range was bad: refusing everyone is safer than allowing everyone. The
        // unspecified addresses are never a client's.
        let nobody = ["0.0.0.0/32", "::/128"].map(|c| c.parse::<Cidr>());
        settings.allow_sources.extend(nobody.into_iter().flatten());
    }
    ignored_fields(service, &mut warn);
    let proxy_protocol = proxy_protocol(service, &mut warn);
    let provider = provider(service, &mut warn);

    let mut listeners = Vec::new();
    let mut lb_pools = Vec::new();
    for (i, port) in (spec.ports.iter().flatten()).enumerate() {
        let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => Protocol::Tcp,
            "UDP" => Protocol::Udp,
            other => {
                warn(
                    format!("spec.ports[{i}].protocol"),
                    format!(
                        "{other} is not supported by provider l4 (TCP and UDP are); port skipped"
                    ),
                );
                continue;
            }
        };
        if protocol == Protocol::Udp && provider != L4_PROVIDER {
            warn(
                format!("spec.ports[{i}].protocol"),
                format!(
                    "UDP is not served by provider {provider} (haproxy 2.6 has no UDP proxying; \
                     provider l4 serves UDP); port {} skipped",
                    port.port
                ),
            );
            continue;
        }
        let Some(number) = u16::try_from(port.port).ok().filter(|p| *p != 0) else {
            warn(
                format!("spec.ports[{i}].port"),
                format!("{} is not a port (1-65535); port skipped", port.port),
            );
            continue;
        };
        let port_ref = match port.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => PortRef::Name(name.to_owned()),
            None => PortRef::Number(port.port),
        };
        let pool_key = PoolKey {
            service: key.clone(),
            port: port_ref,
            upstream: Upstream::default_arc(),
        };
        let mut pool = pools.pool(pool_id(id, &pool_key), &pool_key);
        let mut pool_settings = settings.clone();
        match protocol {
            Protocol::Tcp => pool_settings.proxy_protocol = proxy_protocol,
            _ if proxy_protocol.is_some() => warn(
                format!("spec.ports[{i}]"),
                "no PROXY protocol header on UDP ports (TCP ports only)".into(),
            ),
            _ => {}
        }
        // A pool reused from the previous model is shared: copied only if its settings change.
        if pool.algorithm != algorithm || *pool.settings != pool_settings {
            let settable = std::sync::Arc::make_mut(&mut pool);
            settable.algorithm = algorithm.clone();
            settable.settings = std::sync::Arc::new(pool_settings);
        }
        let tag = match protocol {
            Protocol::Udp => "UDP",
            _ => "TCP",
        };
        listeners.push(Listener {
            id: ListenerId::derive(&format!("{id}/listener/{tag}/{number}")),
            name: format!("{tag}:{number}"),
            protocol,
            port: number,
            policies: Vec::new(),
            default_pool: Some(pool.id),
            default_source: Some(origin.clone()),
            tls: None,
        });
        lb_pools.push(pool);
    }
    lb_pools.sort_by_key(|p| p.id);
    lb_pools.dedup_by_key(|p| p.id);
    LoadBalancer {
        id,
        name,
        origin,
        provider: provider.to_owned(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools: lb_pools,
    }
}

/// The Service's `portico.dev/proxy-protocol`; a value other than `v2` or `none` is a warning
/// and sends no header.
fn proxy_protocol(
    service: &KeptService,
    warn: &mut impl FnMut(String, String),
) -> Option<ProxyProtocol> {
    let annotations = service.metadata.annotations.as_ref()?;
    let value = annotations.get(PROXY_PROTOCOL_ANNOTATION)?;
    match value.trim() {
        "v2" => Some(ProxyProtocol::V2),
        "none" | "" => None,
        other => {
            warn(
                format!("metadata.annotations[{PROXY_PROTOCOL_ANNOTATION}]"),
                format!("{other:?} is not a PROXY protocol version (v2 or none); none is sent"),
            );
            None
        }
    }
}

/// The Service's `portico.dev/provider`: one of [`SERVICE_PROVIDERS`]; another value is a
/// warning naming the annotation, and the Service is served by `l4`.
fn provider(service: &KeptService, warn: &mut impl FnMut(String, String)) -> &'static str {
    let annotation = crate::config::PROVIDER_ANNOTATION;
    let Some(value) = (service.metadata.annotations.as_ref()).and_then(|a| a.get(annotation))
    else {
        return L4_PROVIDER;
    };
    let value = value.trim();
    if let Some(known) = SERVICE_PROVIDERS.iter().find(|p| **p == value) {
        return known;
    }
    warn(
        format!("metadata.annotations[{annotation}]"),
        format!("{value:?} is not a provider of Services (l4 or haproxy); served by {L4_PROVIDER}"),
    );
    L4_PROVIDER
}

/// Warnings for the fields of a served Service that Portico does not implement.
fn ignored_fields(service: &KeptService, warn: &mut impl FnMut(String, String)) {
    let Some(spec) = service.load_balancer() else {
        return;
    };
    if spec.external_traffic_policy.as_deref() == Some("Local") {
        warn(
            "spec.externalTrafficPolicy".into(),
            "Local is ignored: every ready endpoint is used and the client address is not \
             preserved"
                .into(),
        );
    }
    if spec.health_check_node_port.is_some_and(|p| p != 0) {
        warn(
            "spec.healthCheckNodePort".into(),
            "ignored: provider l4 does not use node ports".into(),
        );
    }
}
