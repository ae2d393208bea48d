//! Pools: one per (namespace, service, port as written) on a load balancer.

use crate::Objects;
use crate::backend::{PoolKey, resolve};
use crate::members::{SliceIndex, endpoints};
use portico_model::{
    Algorithm, LoadBalancerId, Member, MemberId, ObjectRef, Pool, PoolId, PoolProtocol,
};

pub(crate) fn pool_id(lb: LoadBalancerId, key: &PoolKey) -> PoolId {
    let PoolKey { service, port } = key;
    PoolId::derive(&format!(
        "{lb}/pool/{}/{}/{port}",
        service.namespace, service.name
    ))
}

/// The pool `id` of `key` with its members, weight 1 each, ordered by (address, port).
pub(crate) fn build_pool(
    id: PoolId,
    key: &PoolKey,
    objects: &Objects,
    slices: &SliceIndex<'_>,
) -> Pool {
    let members = endpoints(objects, slices, key)
        .into_iter()
        .map(|((address, port), ready)| Member {
            id: MemberId::derive(&format!("{id}/member/{address}:{port}")),
            address,
            port,
            weight: 1,
            ready,
        })
        .collect();
    let PoolKey { service, port } = key;
    Pool {
        id,
        name: format!("{}_{}_{port}", service.namespace, service.name),
        service: ObjectRef::new("Service", &service.namespace, &service.name),
        service_port: port.to_string(),
        algorithm: Algorithm::RoundRobin,
        protocol: protocol(objects, key),
        members,
    }
}

/// HTTP/2 with prior knowledge when the Service port's `appProtocol` says h2c, else HTTP/1.1.
fn protocol(objects: &Objects, key: &PoolKey) -> PoolProtocol {
    let port = resolve(objects, key).ok().map(|(_, port)| port);
    match port.and_then(|p| p.app_protocol.as_deref()) {
        Some("kubernetes.io/h2c" | "h2c") => PoolProtocol::H2c,
        _ => PoolProtocol::Http,
    }
}
