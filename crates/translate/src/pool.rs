//! Pools: one per (namespace, service, port as written) on a load balancer.

use crate::Objects;
use crate::backend::PoolKey;
use crate::members::{SliceIndex, endpoints};
use portico_model::{Algorithm, LoadBalancerId, Member, MemberId, ObjectRef, Pool, PoolId};

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
        members,
    }
}
