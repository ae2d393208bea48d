//! Pools: one per (namespace, service, port as written) on a load balancer.

use crate::Objects;
use crate::backend::{PoolKey, resolve};
use crate::members::{SliceIndex, endpoints};
use portico_model::{LoadBalancerId, Member, MemberId, ObjectRef, Pool, PoolId, PoolProtocol};

pub(crate) fn pool_id(lb: LoadBalancerId, key: &PoolKey) -> PoolId {
    let PoolKey {
        service,
        port,
        upstream,
    } = key;
    let mut id = format!("{lb}/pool/{}/{}/{port}", service.namespace, service.name);
    if let Some(digest) = &upstream.digest {
        id.push('/');
        id.push_str(digest);
    }
    PoolId::derive(&id)
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
    let PoolKey {
        service,
        port,
        upstream,
    } = key;
    let mut name = format!("{}_{}_{port}", service.namespace, service.name);
    if let Some(digest) = &upstream.digest {
        // Pools of one Service port with different settings: told apart in metrics and logs.
        name.push('_');
        name.push_str(&digest[..8]);
    }
    Pool {
        id,
        name,
        service: ObjectRef::new("Service", &service.namespace, &service.name),
        service_port: port.to_string(),
        algorithm: upstream.algorithm.clone(),
        settings: upstream.settings.clone(),
        protocol: upstream.protocol.unwrap_or_else(|| protocol(objects, key)),
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
