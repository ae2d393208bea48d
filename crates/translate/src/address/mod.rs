//! The addresses of load balancers beyond `portico.dev/vip` ([`crate::assign_vips`]): the VIP
//! from a pool, and the floating IP from a pool or pinned.
//!
//! - VIP: the IngressClass's `portico.dev/vip` wins (a fixed address); else the class's
//!   `portico.dev/vip-pool`, else `--vip-pool`. A Service's `spec.loadBalancerIP` is a fixed
//!   address too (Services may share one on different ports; see [`crate::l4_collisions`]).
//! - A Gateway's VIP: the first `IPAddress` of its `spec.addresses`, else its GatewayClass's
//!   `portico.dev/vip-pool`, else `--vip-pool`; its floating IP: pinned by its own
//!   `portico.dev/external-ip`, else the class's `portico.dev/fip-pool`, else `--fip-pool`.
//! - Floating IP: pinned by `portico.dev/external-ip`, on the Ingress for a dedicated class (on
//!   the IngressClass for a shared one, whose one load balancer carries every Ingress; there the
//!   Ingress annotation is ignored with a warning); else the class's `portico.dev/fip-pool`,
//!   else `--fip-pool`.
//!
//! A pass over a translated model, after `assign_vips`; the allocation itself is the pure
//! [`allocate`], fed with the previous allocations (the store keeps them in the load balancers'
//! headers), so that a restarted controller or a new leader hands out the same addresses.

mod alloc;
mod cidr;

pub use alloc::{AddressRequest, Addresses, Allocations, Want, allocate};
pub use cidr::Cidr;

use crate::class::{class_of, ingress_class, owned_classes};
use crate::{Config, ObjectKey, Objects, VIP_ANNOTATION};
use portico_model::{Diagnostic, LoadBalancer, Model, ObjectRef};
use std::collections::{BTreeMap, BTreeSet};

/// IngressClass annotation: the pool of its load balancers' VIPs (overrides `--vip-pool`).
pub const VIP_POOL_ANNOTATION: &str = "portico.dev/vip-pool";
/// IngressClass annotation: the pool of its load balancers' floating IPs (overrides
/// `--fip-pool`).
pub const FIP_POOL_ANNOTATION: &str = "portico.dev/fip-pool";
/// Ingress annotation (dedicated topology) or IngressClass annotation (shared topology): the
/// floating IP of the load balancer, pinned.
pub const EXTERNAL_IP_ANNOTATION: &str = "portico.dev/external-ip";

/// Sets every load balancer's VIP (unless `portico.dev/vip` fixed it) and floating IP, keeping
/// `previous` allocations where they still fit. Returns the allocations and the problems.
pub fn assign_addresses(
    model: &mut Model,
    objects: &Objects,
    config: &Config,
    previous: &Allocations,
) -> (Allocations, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    // A Gateway's `l4` load balancer asks for nothing: it takes its Gateway's addresses.
    let requests: Vec<AddressRequest> = (model.load_balancers.iter())
        .filter(|lb| crate::gateway::anchor(lb).is_none())
        .map(|lb| request(lb, objects, config, &mut diagnostics))
        .collect();
    let (allocations, problems) = allocate(previous, &requests);
    diagnostics.extend(problems);
    for lb in &mut model.load_balancers {
        let id = crate::gateway::anchor(lb).unwrap_or(lb.id);
        let a = allocations.get(&id).copied().unwrap_or_default();
        lb.vip = a.vip;
        lb.floating_ip = a.floating_ip;
    }
    ignored_pins(model, objects, config, &mut diagnostics);
    diagnostics.sort();
    diagnostics.dedup();
    (allocations, diagnostics)
}

fn request(
    lb: &LoadBalancer,
    objects: &Objects,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) -> AddressRequest {
    let gateway = crate::gateway::of(lb, objects);
    let (class_kind, class) = match gateway {
        Some(gateway) => ("GatewayClass", gateway.spec.gateway_class_name.as_str()),
        None => ("IngressClass", class_of(lb, objects).unwrap_or_default()),
    };
    let annotations = match gateway {
        Some(_) => {
            (objects.gateway_classes.get(class)).and_then(|c| c.metadata.annotations.as_ref())
        }
        None => (objects.ingress_classes.get(class)).and_then(|c| c.metadata.annotations.as_ref()),
    };
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    let class_ref = ObjectRef::new(class_kind, "", class);
    let mut pool = |key: &str, flag: &str, default: Option<Cidr>| match get(key) {
        Some(v) => match v.parse::<Cidr>() {
            Ok(pool) => Want::Pool {
                pool,
                field: field(key),
            },
            Err(message) => {
                diagnostics.push(Diagnostic::error(class_ref.clone(), field(key), message));
                Want::None
            }
        },
        None => default.map_or(Want::None, |pool| Want::Pool {
            pool,
            field: flag.to_owned(),
        }),
    };
    // Both pools are read even when not used, so that a bad value is always reported.
    let vip_pool = pool(VIP_POOL_ANNOTATION, "--vip-pool", config.vip_pool);
    let fip_pool = pool(FIP_POOL_ANNOTATION, "--fip-pool", config.fip_pool);
    let requested = gateway.and_then(crate::gateway::requested_address);
    let vip = match (get(VIP_ANNOTATION).is_some(), lb.vip) {
        _ if gateway.is_some() => requested.map_or(vip_pool, Want::Fixed),
        (true, Some(ip)) => Want::Fixed(ip),
        // A bad `portico.dev/vip` was reported by `assign_vips`: no VIP rather than a guess.
        (true, None) => Want::None,
        (false, _) => service_ip(lb, objects, diagnostics).map_or(vip_pool, Want::Fixed),
    };
    let pin = match lb.origin.kind.as_str() {
        "Ingress" => ingress_annotation(objects, &lb.origin, EXTERNAL_IP_ANNOTATION),
        "Gateway" => gateway
            .and_then(|g| g.metadata.annotations.as_ref())
            .and_then(|a| a.get(EXTERNAL_IP_ANNOTATION))
            .cloned(),
        _ => get(EXTERNAL_IP_ANNOTATION).cloned(),
    };
    let floating_ip = match pin {
        Some(v) => match v.trim().parse() {
            Ok(ip) => Want::Pinned {
                ip,
                field: field(EXTERNAL_IP_ANNOTATION),
            },
            Err(_) => {
                let message = format!("{v:?} is not an IP address");
                let f = field(EXTERNAL_IP_ANNOTATION);
                diagnostics.push(Diagnostic::error(lb.origin.clone(), f, message));
                Want::None
            }
        },
        None => fip_pool,
    };
    AddressRequest {
        id: lb.id,
        object: lb.origin.clone(),
        vip,
        floating_ip,
    }
}

/// A Service's `spec.loadBalancerIP`: a fixed VIP, which other Services may share (on other
/// ports). A value that is not an IP address is a warning; the VIP then comes from the pool.
fn service_ip(
    lb: &LoadBalancer,
    objects: &Objects,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<std::net::IpAddr> {
    if lb.origin.kind != "Service" {
        return None;
    }
    let key = ObjectKey::new(&lb.origin.namespace, &lb.origin.name);
    let spec = objects.services.get(&key)?.load_balancer()?;
    let value = spec.load_balancer_ip.as_deref()?.trim();
    if value.is_empty() {
        return None;
    }
    match value.parse() {
        Ok(ip) => Some(ip),
        Err(_) => {
            let message = format!("{value:?} is not an IP address; the VIP comes from the pool");
            let field = "spec.loadBalancerIP";
            diagnostics.push(Diagnostic::warning(lb.origin.clone(), field, message));
            None
        }
    }
}

fn field(annotation: &str) -> String {
    format!("metadata.annotations[{annotation}]")
}

fn ingress_annotation(objects: &Objects, ingress: &ObjectRef, key: &str) -> Option<String> {
    let key_of = ObjectKey::new(&ingress.namespace, &ingress.name);
    let ingress = objects.ingresses.get(&key_of)?;
    let annotations = ingress.metadata.annotations.as_ref()?;
    annotations.get(key).cloned()
}

/// A warning on each owned Ingress that pins a floating IP without a load balancer of its own
/// (its class is shared, or it is not served).
fn ignored_pins(
    model: &Model,
    objects: &Objects,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let own: BTreeSet<(&str, &str)> = (model.load_balancers.iter())
        .filter(|lb| lb.origin.kind == "Ingress")
        .map(|lb| (lb.origin.namespace.as_str(), lb.origin.name.as_str()))
        .collect();
    let owned = owned_classes(objects, config);
    let pinning: BTreeMap<&ObjectKey, _> = (objects.ingresses.iter())
        .filter(|(_, i)| {
            let annotations = i.metadata.annotations.as_ref();
            annotations.is_some_and(|a| a.contains_key(EXTERNAL_IP_ANNOTATION))
        })
        .collect();
    for (key, ingress) in pinning {
        let ours = ingress_class(ingress).is_some_and(|c| owned.contains(c));
        if !ours || own.contains(&(key.namespace.as_str(), key.name.as_str())) {
            continue;
        }
        let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
        let message = "ignored: only an Ingress of a class with portico.dev/topology: dedicated \
                       (and served) has a floating IP of its own; a shared class takes it on the \
                       IngressClass";
        let f = field(EXTERNAL_IP_ANNOTATION);
        diagnostics.push(Diagnostic::warning(object, f, message));
    }
}
