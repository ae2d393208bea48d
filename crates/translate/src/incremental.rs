//! Endpoint changes without a full translation. Endpoints are what changes most often in a
//! cluster (every rollout, every scale); when nothing else changed, only the members of the
//! pools of the touched Services need recomputing, and the rest of the model stands.

use crate::annotations::Upstream;
use crate::backend::{PoolKey, PortRef};
use crate::members::SliceIndex;
use crate::memo::{for_each_change, same};
use crate::pool::build_pool;
use crate::{ObjectKey, Objects};
use portico_model::{Model, PoolId};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The Services whose EndpointSlices or Endpoints differ between `old` and `new`, or `None`
/// when anything else differs too (then a full translation is needed). Objects are compared by
/// pointer first, by value when the pointers differ (a re-read file yields new allocations).
pub fn endpoint_only_change(old: &Objects, new: &Objects) -> Option<BTreeSet<ObjectKey>> {
    let unchanged = same(&old.ingresses, &new.ingresses)
        && same(&old.ingress_classes, &new.ingress_classes)
        && same(&old.services, &new.services)
        && same(&old.secrets, &new.secrets)
        && same(&old.gateway_classes, &new.gateway_classes)
        && same(&old.gateways, &new.gateways)
        && same(&old.http_routes, &new.http_routes)
        && same(&old.grpc_routes, &new.grpc_routes)
        && same(&old.reference_grants, &new.reference_grants)
        && same(&old.tcp_routes, &new.tcp_routes)
        && same(&old.udp_routes, &new.udp_routes)
        && same(&old.tls_routes, &new.tls_routes)
        && same(&old.listener_sets, &new.listener_sets)
        && same(&old.backend_tls_policies, &new.backend_tls_policies)
        && same(&old.config_maps, &new.config_maps)
        && same(&old.namespaces, &new.namespaces);
    if !unchanged {
        return None;
    }
    let mut services = BTreeSet::new();
    for_each_change(&old.endpoint_slices, &new.endpoint_slices, |key, slice| {
        if let Some(service) = &slice.service {
            services.insert(ObjectKey::new(&key.namespace, service));
        }
    });
    for_each_change(&old.endpoints, &new.endpoints, |key, _| {
        services.insert(key.clone());
    });
    Some(services)
}

/// Recomputes, in `model`, the members of every pool of one of `services`; returns the ids of
/// the pools whose members changed.
pub fn refresh_members(
    model: &mut Model,
    objects: &Objects,
    services: &BTreeSet<ObjectKey>,
) -> Vec<PoolId> {
    let slices = SliceIndex::of_services(objects, services);
    let mut changed = Vec::new();
    for lb in &mut model.load_balancers {
        for pool in &mut lb.pools {
            let service = ObjectKey::new(&pool.service.namespace, &pool.service.name);
            if !services.contains(&service) {
                continue;
            }
            let port = match pool.service_port.parse::<i32>() {
                Ok(number) => PortRef::Number(number),
                Err(_) => PortRef::Name(pool.service_port.clone()),
            };
            let key = PoolKey {
                service,
                port,
                upstream: Upstream::default_arc(),
            };
            let fresh = build_pool(pool.id, &key, objects, &slices);
            if fresh.members != pool.members {
                Arc::make_mut(pool).members = fresh.members;
                changed.push(pool.id);
            }
        }
    }
    changed
}
