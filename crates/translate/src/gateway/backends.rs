//! backendRefs → pools (Service ports), with the Gateway API's refusals: another kind than a
//! Service (`InvalidKind`), another namespace without a ReferenceGrant (`RefNotPermitted`), a
//! Service or port that does not exist (`BackendNotFound`). A refused backend keeps its share
//! of the rule's weight and answers 500 for it.

use super::status::Refusal;
use crate::annotations::Upstream;
use crate::backend::{PoolKey, PortRef};
use crate::pool::pool_id;
use crate::{ObjectKey, Objects};
use portico_gateway::{BackendRef, GROUP, HttpRouteRule};
use portico_model::{LoadBalancerId, PolicyAction, PolicyOptions, PoolId, WeightedPool};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether a ReferenceGrant in `to`'s namespace lets objects of kind `from.0` (of the Gateway
/// API's group) in namespace `from.1` refer to `to`, an object of the core group.
pub(crate) fn granted(objects: &Objects, from: (&str, &str), to: (&str, &ObjectKey)) -> bool {
    let (kind, key) = to;
    (objects.reference_grants.iter())
        .filter(|(grant, _)| grant.namespace == key.namespace)
        .any(|(_, g)| g.permits((GROUP, from.0, from.1), ("", kind, &key.name)))
}

/// The Service port a backendRef of a route of kind `kind` in `namespace` names, or why it
/// does not resolve. A GRPCRoute's backends speak h2c (as if the port's `appProtocol` said so).
pub(crate) fn resolve(
    backend: &BackendRef,
    (kind, namespace): (&str, &str),
    objects: &Objects,
) -> Result<PoolKey, Refusal> {
    let route_kind = kind;
    let (group, kind) = backend.group_kind();
    if (group, kind) != ("", "Service") {
        let message = format!("backendRef to {kind} of group {group:?}: only Services are served");
        return Err(("InvalidKind", message));
    }
    let target = backend.namespace.as_deref().unwrap_or(namespace);
    let service = ObjectKey::new(target, &backend.name);
    if target != namespace && !granted(objects, (route_kind, namespace), ("Service", &service)) {
        let message = format!(
            "no ReferenceGrant in {target:?} lets {route_kind}s of {namespace:?} use Service {service}"
        );
        return Err(("RefNotPermitted", message));
    }
    let not_found = |message: String| Err(("BackendNotFound", message));
    let Some(found) = objects.services.get(&service) else {
        return not_found(format!("Service {service} not found"));
    };
    let Some(port) = backend.port else {
        return not_found(format!("backendRef to Service {service} names no port"));
    };
    let Some(service_port) = found.spec.ports.iter().find(|p| p.port == port) else {
        return not_found(format!("Service {service} has no port {port}"));
    };
    let upstream = match super::backend_tls::governing(objects, &service, service_port) {
        Some((key, policy)) => {
            let h2c = matches!(
                service_port.app_protocol.as_deref(),
                Some("kubernetes.io/h2c" | "h2c")
            );
            let h2 = route_kind == super::GRPC_ROUTE || h2c;
            super::backend_tls::upstream(&key.namespace, policy, h2)
        }
        None if route_kind == super::GRPC_ROUTE => grpc_upstream(),
        None => Upstream::default_arc(),
    };
    Ok(PoolKey {
        service,
        port: PortRef::Number(port),
        upstream,
    })
}

/// The upstream settings of a GRPCRoute's backends: the defaults over h2c (its own pool, told
/// apart from an HTTPRoute's of the same Service port by its digest).
fn grpc_upstream() -> Arc<Upstream> {
    static GRPC: std::sync::LazyLock<Arc<Upstream>> = std::sync::LazyLock::new(|| {
        Arc::new(Upstream {
            protocol: Some(portico_model::PoolProtocol::H2c),
            digest: Some("grpc-h2c".to_owned()),
            ..Upstream::default()
        })
    });
    GRPC.clone()
}

/// The first backendRef of `rules` that does not resolve (a mirror's included): the field
/// that names it, why.
pub(crate) fn unresolved(
    rules: &[HttpRouteRule],
    namespace: (&str, &str),
    objects: &Objects,
) -> Option<(String, Refusal)> {
    rules.iter().enumerate().find_map(|(r, rule)| {
        let backends = (rule.backend_refs.iter().enumerate())
            .map(|(b, backend)| (format!("spec.rules[{r}].backendRefs[{b}]"), backend.clone()));
        let mirrors = (rule.filters.iter().enumerate()).filter_map(|(f, filter)| {
            let decoded = super::filters::decode(std::slice::from_ref(filter));
            let mirror = decoded.into_iter().next()?.request_mirror?;
            let field = format!("spec.rules[{r}].filters[{f}].requestMirror.backendRef");
            Some((field, mirror.backend_ref))
        });
        backends.chain(mirrors).find_map(|(field, backend)| {
            resolve(&backend, namespace, objects)
                .err()
                .map(|e| (field, e))
        })
    })
}

/// The pool of `backend` (of a route of kind and namespace `namespace`) on load balancer
/// `lb`, added to `pools`; none when it does not resolve.
pub(crate) fn pool(
    backend: &BackendRef,
    namespace: (&str, &str),
    objects: &Objects,
    lb: LoadBalancerId,
    pools: &mut BTreeMap<PoolId, PoolKey>,
) -> Option<PoolId> {
    resolve(backend, namespace, objects).ok().map(|key| {
        let id = pool_id(lb, &key);
        pools.entry(id).or_insert(key);
        id
    })
}

/// What a rule does on load balancer `lb`: its backends as weighted pools (a refused one
/// answers 500 for its share), each with its own options where `shares` (by backendRef)
/// gives some; every pool it names is added to `pools`.
pub(crate) fn action(
    rule: &HttpRouteRule,
    (namespace, objects): ((&str, &str), &Objects),
    lb: LoadBalancerId,
    pools: &mut BTreeMap<PoolId, PoolKey>,
    shares: Vec<Option<Arc<PolicyOptions>>>,
) -> PolicyAction {
    let own = shares.iter().any(Option::is_some);
    let shares: Vec<WeightedPool> = (rule.backend_refs.iter().zip(shares))
        .map(|(backend, options)| WeightedPool {
            pool: pool(backend, namespace, objects, lb, pools),
            weight: u32::try_from(backend.effective_weight()).unwrap_or(0),
            options,
        })
        .collect();
    // No backend, or no weight: nothing to forward to, which the API answers with 500.
    if shares.iter().all(|s| s.weight == 0) {
        return PolicyAction::Reject { status: 500 };
    }
    if own {
        return PolicyAction::RedirectToPools { pools: shares };
    }
    match shares[..] {
        [
            WeightedPool {
                pool: Some(pool), ..
            },
        ] => PolicyAction::RedirectToPool { pool },
        [WeightedPool { pool: None, .. }] => PolicyAction::Reject { status: 500 },
        _ => PolicyAction::RedirectToPools { pools: shares },
    }
}
