//! One class's load balancer in the shared-router topology: one HTTP listener carrying the
//! policies of every served Ingress of the class, and the pools they name.

use crate::backend::PoolKey;
use crate::members::SliceIndex;
use crate::merge::{default_backend, merge};
use crate::policy::{build_policy, order};
use crate::pool::build_pool;
use crate::route::routes;
use crate::source::Source;
use crate::{Config, Objects, class};
use portico_model::{
    Diagnostic, Listener, ListenerId, LoadBalancer, LoadBalancerId, PoolId, Protocol,
};
use std::collections::{BTreeMap, BTreeSet};

/// `sources` are the served Ingresses of `class`, oldest first.
pub(crate) fn build_load_balancer(
    class: &str,
    sources: &[Source<'_>],
    objects: &Objects,
    slices: &SliceIndex<'_>,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) -> LoadBalancer {
    let id = LoadBalancerId::derive(&format!("loadbalancer/{class}"));
    let port = config.http_port;
    let listener_id = ListenerId::derive(&format!("{id}/listener/HTTP/{port}"));
    let all = sources
        .iter()
        .flat_map(|s| routes(s, objects, diagnostics))
        .collect();
    let mut winners = merge(all, diagnostics);
    order(&mut winners);
    let default = default_backend(sources, objects, diagnostics);

    let mut keys: BTreeSet<&PoolKey> = winners.iter().map(|r| &r.backend).collect();
    keys.extend(default.as_ref().map(|(key, _)| key));
    let mut pools: Vec<_> = keys
        .iter()
        .map(|k| build_pool(id, k, objects, slices))
        .collect();
    // Pool ids are derived once per pool (keys and pools are in the same order), not per route.
    let ids: BTreeMap<&PoolKey, PoolId> =
        keys.into_iter().zip(pools.iter().map(|p| p.id)).collect();
    pools.sort_by_key(|p| p.id);

    let policies = winners
        .iter()
        .enumerate()
        .map(|(i, route)| build_policy(listener_id, i, route, ids[&route.backend]))
        .collect();
    let listener = Listener {
        id: listener_id,
        name: format!("HTTP:{port}"),
        protocol: Protocol::Http,
        port,
        policies,
        default_pool: default.as_ref().map(|(key, _)| ids[key]),
        default_source: default.map(|(_, i)| sources[i].object.clone()),
        tls: None,
    };
    LoadBalancer {
        id,
        name: format!("ingressclass/{class}"),
        ingress_class: class.to_owned(),
        provider: class::provider(objects, class, config),
        vip: None,
        listeners: crate::tls::listeners(id, listener, sources, config, diagnostics),
        pools,
    }
}
