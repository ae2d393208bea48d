//! One class's load balancer in the shared-router topology: one HTTP listener carrying the
//! policies of every served Ingress of the class, and the pools they name.

use crate::backend::PoolKey;
use crate::memo::Pools;
use crate::merge::{default_backend, merge};
use crate::policy::{build_policy, order};
use crate::route::Route;
use crate::source::{ClassIds, Source};
use crate::{Config, Objects, class};
use portico_model::{Diagnostic, Listener, LoadBalancer, PoolId, Protocol};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `sources` are the served Ingresses of `class`, oldest first.
pub(crate) fn build_load_balancer(
    class: &str,
    ids: ClassIds,
    sources: &[Arc<Source>],
    objects: &Objects,
    pools: &mut Pools<'_>,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) -> LoadBalancer {
    let port = config.http_port;
    let all = sources.iter().flat_map(|source| {
        let source = &**source;
        source.routes.iter().map(move |spec| Route { source, spec })
    });
    let mut winners = merge(all, diagnostics);
    order(&mut winners);
    let default = default_backend(sources, diagnostics);

    let mut used: BTreeMap<PoolId, &PoolKey> = winners
        .iter()
        .map(|r| (r.spec.backend.pool, &r.spec.backend.key))
        .collect();
    if let Some((backend, _)) = default {
        used.insert(backend.pool, &backend.key);
    }
    let pools = used
        .into_iter()
        .map(|(id, key)| pools.pool(id, key))
        .collect();
    let policies = winners.iter().enumerate();
    let policies = policies.map(|(i, route)| build_policy(i, route, &route.spec.http));
    let https_policies = winners.iter().enumerate();
    let https_policies = https_policies.map(|(i, route)| build_policy(i, route, &route.spec.https));
    let listener = Listener {
        id: ids.listener,
        name: format!("HTTP:{port}"),
        protocol: Protocol::Http,
        port,
        policies: policies.collect(),
        default_pool: default.map(|(backend, _)| backend.pool),
        default_source: default.map(|(_, source)| source.object.clone()),
        tls: None,
    };
    LoadBalancer {
        id: ids.load_balancer,
        name: format!("ingressclass/{class}"),
        origin: portico_model::ObjectRef::new("IngressClass", "", class),
        provider: class::provider(objects, class, config),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(crate::tls::listeners(
            ids.https_listener,
            listener,
            https_policies.collect(),
            sources,
            config,
            diagnostics,
        )),
        pools,
    }
}
