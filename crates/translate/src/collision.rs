//! Services' TCP and UDP listeners (providers `l4` and `haproxy`) that ask for the same VIP,
//! port and protocol (two Services with one `spec.loadBalancerIP`, or one Service listing a
//! port twice): the oldest Service keeps it
//! (creation time, then namespace and name, then the order of its ports), the others lose that
//! listener with a warning naming both Services and ports. Their other listeners are served.
//!
//! A pass over a model whose addresses are assigned (after [`crate::assign_addresses`]).

use crate::{ObjectKey, Objects};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use portico_model::{Diagnostic, Listener, LoadBalancer, Model, ObjectRef, Protocol};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// A listener's claim: where it binds, and who asks (for messages).
type Key = (Protocol, SocketAddr);

/// Removes the colliding `l4` listeners but the oldest one's; a warning for each removed.
pub fn l4_collisions(model: &mut Model, objects: &Objects) -> Vec<Diagnostic> {
    let mut order: Vec<usize> = (0..model.load_balancers.len())
        .filter(|i| is_bound(&model.load_balancers[*i]))
        .collect();
    order.sort_by_cached_key(|i| age(&model.load_balancers[*i], objects));
    let mut owner: HashMap<Key, (ObjectRef, String)> = HashMap::new();
    let mut diagnostics = Vec::new();
    for i in order {
        let lb = &mut model.load_balancers[i];
        let Some(vip) = lb.vip else { continue };
        let mut lost = Vec::new();
        for (n, listener) in lb.listeners.iter().enumerate() {
            let Some(key) = key(vip, listener) else {
                continue;
            };
            let twin = |l: &&Listener| (l.protocol, l.port) == (listener.protocol, listener.port);
            let earlier = lb.listeners[..n].iter().filter(twin).count();
            let field = port_field(objects, &lb.origin, listener, earlier);
            match owner.get(&key) {
                None => {
                    owner.insert(key, (lb.origin.clone(), field));
                }
                Some((first, first_field)) => {
                    let message = format!(
                        "{} {} is already served for {first} ({first_field}); this port is not \
                         served",
                        listener.name.split(':').next().unwrap_or_default(),
                        key.1
                    );
                    diagnostics.push(Diagnostic::warning(lb.origin.clone(), field, message));
                    lost.push(n);
                }
            }
        }
        if !lost.is_empty() {
            let listeners = Arc::make_mut(&mut lb.listeners);
            for n in lost.into_iter().rev() {
                listeners.remove(n);
            }
        }
    }
    diagnostics
}

/// A Service's load balancer with its VIP, whichever provider serves it (`l4` or `haproxy`:
/// both bind the VIP's ports).
fn is_bound(lb: &LoadBalancer) -> bool {
    lb.origin.kind == "Service" && lb.vip.is_some()
}

fn key(vip: IpAddr, listener: &Listener) -> Option<Key> {
    matches!(listener.protocol, Protocol::Tcp | Protocol::Udp)
        .then_some((listener.protocol, SocketAddr::new(vip, listener.port)))
}

/// Oldest first: the origin's creation time (none sorts first, as in files without one), then
/// its namespace and name.
fn age(lb: &LoadBalancer, objects: &Objects) -> (Option<Time>, String, String) {
    let created = service(objects, &lb.origin).and_then(|s| s.metadata.creation_timestamp.clone());
    let origin = &lb.origin;
    (created, origin.namespace.clone(), origin.name.clone())
}

fn service<'a>(objects: &'a Objects, origin: &ObjectRef) -> Option<&'a crate::KeptService> {
    if origin.kind != "Service" {
        return None;
    }
    let key = ObjectKey::new(&origin.namespace, &origin.name);
    objects.services.get(&key).map(|s| s.as_ref())
}

/// `spec.ports[i]` of the Service port a listener serves (the `earlier`+1-th with its number
/// and protocol), else the listener's name.
fn port_field(
    objects: &Objects,
    origin: &ObjectRef,
    listener: &Listener,
    earlier: usize,
) -> String {
    let ports = service(objects, origin).map_or(&[][..], |s| &s.spec.ports);
    let protocol = |p: Option<&str>| match p.unwrap_or("TCP") {
        "UDP" => Some(Protocol::Udp),
        "TCP" => Some(Protocol::Tcp),
        _ => None,
    };
    let mut same = (ports.iter().enumerate()).filter(|(_, p)| {
        i64::from(p.port) == i64::from(listener.port)
            && protocol(p.protocol.as_deref()) == Some(listener.protocol)
    });
    match same.nth(earlier) {
        Some((i, _)) => format!("spec.ports[{i}]"),
        None => format!("listener {}", listener.name),
    }
}
