//! `translate(objects, config)`: the whole pipeline step from Kubernetes objects to the model.

use crate::class::{Topology, ingress_class, load_balancer_classes, owned_classes, topology};
use crate::gateway::Reuse;
use crate::loadbalancer::{Identity, build_load_balancer};
use crate::memo::{GatewayMemo, IngressMemo, Memo, Pools, Previous, Reusable, changed_services};
use crate::rebuilt::Changed;
use crate::source::{ClassIds, Source, by_age};
use crate::{Config, ObjectKey, Objects};
use foldhash::{HashMap, HashMapExt, HashSet};
use portico_model::{Diagnostic, LoadBalancer, Model, Rebuilt};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The model, every diagnostic, and the verdict on every Ingress.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Translation {
    pub model: Model,
    /// Sorted and deduplicated, for all objects.
    pub diagnostics: Vec<Diagnostic>,
    /// One per Ingress in the input, ordered by key.
    pub ingresses: Vec<IngressState>,
    /// What the status of each of our Gateway API objects says. Shared with the memo of the
    /// translation that made it: a translation after a change copies none of it.
    pub gateways: Arc<crate::gateway::Verdicts>,
}

/// What this controller makes of one Ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressState {
    pub key: ObjectKey,
    /// `spec.ingressClassName`, else the legacy annotation.
    pub class: Option<String>,
    /// The class is one of ours.
    pub owned: bool,
    /// Owned and admitted (no Error diagnostic): its routes are served and it gets a status.
    pub served: bool,
}

/// Translates `objects` into the model: one load balancer per owned class (shared topology)
/// or per served Ingress of the class (dedicated topology).
/// Ingresses of other classes are ignored without diagnostics; an owned Ingress the API server
/// would reject is not served at all and only yields its Error diagnostics.
pub fn translate(objects: &Objects, config: &Config) -> Translation {
    translate_incremental(objects, config, None, &mut Memo::default())
}

/// [`translate`], reusing what the previous translation prepared where its inputs did not
/// change. `memo` must come from the translation of `previous.objects` with the same `config`
/// (or be empty); it is updated for the next call. The result equals [`translate`]'s.
pub fn translate_incremental(
    objects: &Objects,
    config: &Config,
    previous: Option<Previous<'_>>,
    memo: &mut Memo,
) -> Translation {
    let started = std::time::Instant::now();
    let changed_services = previous
        .map(|p| changed_services(p.objects, objects))
        .unwrap_or_default();
    let mut pools = Pools::new(objects, previous.map(|p| p.model), &changed_services);
    memo.rebuilt = Rebuilt::default();
    let held = memo.ingress.take();
    let whole = previous
        .zip(held.as_ref())
        .is_some_and(|(p, _)| IngressMemo::still_holds(p.objects, objects));
    memo.ingress_reused = whole;
    let share = match held {
        Some(held) if whole => {
            memo.reused = memo.sources.len();
            held
        }
        _ => Arc::new(ingress_share(
            objects,
            config,
            previous,
            memo,
            &changed_services,
            &mut pools,
        )),
    };
    let mut diagnostics = share.diagnostics.clone();
    let lbs = share.load_balancers.iter();
    let mut load_balancers: Vec<_> = lbs
        .map(|lb| match whole {
            true => with_current_pools(lb, &pools),
            false => lb.clone(),
        })
        .collect();
    let ingresses = share.ingresses.clone();
    memo.ingress = Some(share);
    if whole {
        unchanged_hints(previous, objects, memo, &load_balancers);
    }
    let ingresses_done = started.elapsed();
    let held = memo.gateway.take();
    let whole = previous.zip(held.as_ref());
    memo.gateway_reused =
        whole.is_some_and(|(p, g)| g.still_holds(p.objects, objects, &changed_services, config));
    let gateway = match held {
        Some(held) if memo.gateway_reused => held,
        held => {
            let routes = previous.zip(held.as_deref());
            let reuse = routes.and_then(|(p, g)| Reuse::new(&g.routes, p.objects, objects));
            let start = diagnostics.len();
            let (load_balancers, verdicts, routes) = crate::gateway::translate(
                objects,
                config,
                &mut pools,
                &mut diagnostics,
                reuse.as_ref(),
            );
            Arc::new(GatewayMemo {
                load_balancers,
                verdicts: Arc::new(verdicts),
                diagnostics: diagnostics.split_off(start),
                services: crate::gateway::backend_services(objects, &routes),
                routes,
            })
        }
    };
    memo.routes_reused = match memo.gateway_reused {
        true => gateway.routes.http.len() + gateway.routes.grpc.len(),
        false => gateway.routes.reused,
    };
    let verdicts = gateway.verdicts.clone();
    diagnostics.extend(gateway.diagnostics.iter().cloned());
    // A reused load balancer takes its pools as served now (patched by endpoint changes).
    let reused = memo.gateway_reused;
    load_balancers.extend(gateway.load_balancers.iter().map(|lb| match reused {
        true => with_current_pools(lb, &pools),
        false => lb.clone(),
    }));
    memo.gateway = Some(gateway);
    let gateway_done = started.elapsed();
    load_balancers.sort_by_key(|lb| lb.id);
    diagnostics.sort();
    diagnostics.dedup();
    portico_model::cap_per_object(&mut diagnostics);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(
        ingresses_ms = ms(ingresses_done),
        gateway_ms = ms(gateway_done - ingresses_done),
        rest_ms = ms(started.elapsed() - gateway_done),
        sources_reused = memo.reused,
        ingress_reused = memo.ingress_reused,
        gateway_reused = memo.gateway_reused,
        routes_reused = memo.routes_reused,
        "translation steps"
    );
    Translation {
        model: Model { load_balancers },
        diagnostics,
        ingresses,
        gateways: verdicts,
    }
}

/// The Ingress side of a translation (the classes' load balancers, the dedicated ones, the
/// Services' of type LoadBalancer), each prepared Ingress reused where it still holds; `memo`'s
/// prepared Ingresses, merged orders, built routes and hints are updated.
fn ingress_share(
    objects: &Objects,
    config: &Config,
    previous: Option<Previous<'_>>,
    memo: &mut Memo,
    changed_services: &HashSet<ObjectKey>,
    pools: &mut Pools<'_>,
) -> IngressMemo {
    let mut reusable = std::mem::take(&mut memo.sources);
    let mut changed = previous.and_then(|p| Changed::of(p.objects, objects, &reusable));
    let mut orders = std::mem::take(&mut memo.orders);
    let mut built = std::mem::take(&mut memo.built);
    if previous.is_none() {
        reusable.clear();
        orders.clear();
        built.clear();
    }
    let mut reusable = Reusable::new(reusable);
    memo.reused = 0;

    let owned = owned_classes(objects, config);
    let mut diagnostics = Vec::new();
    let topologies = topologies(objects, &owned, &mut diagnostics);
    let mut ids_of: HashMap<&str, ClassIds> = HashMap::new();
    let mut by_class: BTreeMap<&str, Vec<Arc<Source>>> = BTreeMap::new();
    let mut dedicated: Vec<(&str, Arc<Source>)> = Vec::new();
    let ingresses = objects
        .ingresses
        .iter()
        .map(|(key, ingress)| {
            let written_class = ingress_class(ingress);
            let class = written_class.filter(|c| owned.contains(*c));
            let served = class.is_some_and(|class| {
                let topology = topologies.get(class).copied().unwrap_or_default();
                let ids = match topology {
                    Topology::Shared => *ids_of
                        .entry(class)
                        .or_insert_with(|| ClassIds::new(class, config)),
                    Topology::Dedicated => ClassIds::dedicated(key, config),
                };
                let source = match reusable.take(key) {
                    Some(s) if s.still_holds(ingress, ids, changed_services) => {
                        memo.reused += 1;
                        s
                    }
                    _ => Arc::new(Source::prepare(key, ingress, ids, objects)),
                };
                diagnostics.extend(source.diagnostics.iter().cloned());
                memo.sources.push(source.clone());
                let served = source.served;
                match topology {
                    // The class gets its load balancer even when this Ingress is not admitted.
                    Topology::Shared => {
                        let sources = by_class.entry(class).or_default();
                        if served {
                            sources.push(source);
                        }
                    }
                    Topology::Dedicated if served => dedicated.push((class, source)),
                    Topology::Dedicated => {}
                }
                served
            });
            IngressState {
                key: key.clone(),
                class: written_class.map(str::to_owned),
                owned: class.is_some(),
                served,
            }
        })
        .collect();
    drop(reusable);
    if let Some(changed) = &mut changed {
        changed.with_new(&memo.sources);
    }
    let hint = |lb: &LoadBalancer, sources: &[Arc<Source>], rebuilt: &mut Rebuilt| {
        if let (Some(changed), Some(previous)) = (&changed, previous) {
            changed.hint(lb, sources, previous.model, rebuilt);
        }
    };

    let classes = load_balancer_classes(objects, config, by_class.keys().copied());
    let shared = classes
        .iter()
        .filter(|c| topologies.get(c.as_str()).copied().unwrap_or_default() == Topology::Shared);
    let mut load_balancers: Vec<_> = shared
        .map(|class| {
            let mut sources = by_class.remove(class.as_str()).unwrap_or_default();
            by_age(&mut sources);
            let ids = (ids_of.get(class.as_str()).copied())
                .unwrap_or_else(|| ClassIds::new(class, config));
            let identity = Identity::shared(class, ids);
            let mut order = orders.remove(&identity.name);
            let mut routes = built.remove(&identity.name).unwrap_or_default();
            let name = identity.name.clone();
            let (sources, pools) = (&sources[..], &mut *pools);
            let lb = build_load_balancer(
                identity,
                sources,
                objects,
                pools,
                config,
                &mut diagnostics,
                (&mut order, &mut routes),
            );
            memo.built.insert(name.clone(), routes);
            memo.orders.extend(order.map(|order| (name, order)));
            hint(&lb, sources, &mut memo.rebuilt);
            lb
        })
        .collect();
    for (class, source) in dedicated {
        let identity = Identity::dedicated(class, &source);
        let sources = std::slice::from_ref(&source);
        let lb = build_load_balancer(
            identity,
            sources,
            objects,
            pools,
            config,
            &mut diagnostics,
            (&mut None, &mut Default::default()),
        );
        hint(&lb, sources, &mut memo.rebuilt);
        load_balancers.push(lb);
    }
    load_balancers.extend(crate::service::load_balancers(
        objects,
        config,
        pools,
        &mut diagnostics,
    ));
    IngressMemo {
        load_balancers,
        diagnostics,
        ingresses,
    }
}

/// When nothing changed at all (the same objects again), the hints a translation of the
/// Ingresses gives: each Ingress load balancer's, naming no source.
fn unchanged_hints(
    previous: Option<Previous<'_>>,
    objects: &Objects,
    memo: &mut Memo,
    load_balancers: &[LoadBalancer],
) {
    let Some(previous) = previous else {
        return;
    };
    let Some(mut changed) = Changed::of(previous.objects, objects, &memo.sources) else {
        return;
    };
    changed.with_new(&memo.sources);
    let ingress_lbs = load_balancers
        .iter()
        .filter(|lb| lb.origin.kind != "Service");
    for lb in ingress_lbs {
        changed.hint(lb, &[], previous.model, &mut memo.rebuilt);
    }
}

/// `lb` with each pool as the model served now has it (endpoint changes patch pools in place).
fn with_current_pools(lb: &LoadBalancer, pools: &Pools<'_>) -> LoadBalancer {
    LoadBalancer {
        pools: lb.pools.iter().map(|p| pools.current(p)).collect(),
        ..lb.clone()
    }
}

/// The topology of every owned class; bad annotations become diagnostics.
fn topologies<'a>(
    objects: &Objects,
    owned: &'a BTreeSet<String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> HashMap<&'a str, Topology> {
    owned
        .iter()
        .map(|class| {
            let (topology, problem) = topology(objects, class);
            diagnostics.extend(problem);
            (class.as_str(), topology)
        })
        .collect()
}
