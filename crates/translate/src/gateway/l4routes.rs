//! TCPRoutes and UDPRoutes → the `l4` load balancer of a Gateway.
//!
//! A Gateway's TCP and UDP listeners are served by provider `l4` (Maglev over the ready
//! members, as for Services of type LoadBalancer), its HTTP and HTTPS listeners by the class's
//! provider. One load balancer has one provider, so a Gateway becomes two: its own
//! (`gateway/<namespace>/<name>`, whenever it is accepted, even with TCP or UDP listeners only)
//! and, when a TCP or UDP listener has a route, `gateway/<namespace>/<name>/l4` of provider
//! `l4`. The second takes the first's VIP and floating IP ([`anchor`]; the allocator gives
//! addresses to the first only) and is not placed on agents, as no `l4` load balancer is: the
//! first one is placed and fails over, and with it the address both listen on. So placement
//! and failover act on one thing per Gateway.
//!
//! Attachment: a route's parentRef selects listeners by `sectionName` and `port`; those that
//! admit its namespace and kind take it. A TCP or UDP listener has no way to tell one route's
//! flows from another's, so it serves one route: the oldest (creation timestamp, then
//! namespace/name); a younger one is not attached there (`NotAllowedByListeners` when no
//! listener it selects is left). backendRefs are weighted shares of the flows; a share whose
//! backendRef does not resolve refuses its flows (connections closed, datagrams dropped), as
//! the API asks, and so does a share whose Service has no ready endpoint.

use super::attach::{admitting, parent_verdicts, resolved_refs};
use super::listeners::{ListenerState, Prepared};
use super::status::Refusal;
use super::{ParentVerdict, backends};
use crate::backend::PoolKey;
use crate::memo::Pools;
use crate::pool::pool_id;
use crate::{ObjectKey, Objects};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use portico_gateway::{L4RouteSpec, ParentReference};
use portico_model::{
    Diagnostic, L7Policy, L7PolicyId, Listener, ListenerId, LoadBalancer, LoadBalancerId,
    ObjectRef, PolicyAction, PoolId, Protocol, WeightedPool,
};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) const TCP_ROUTE: &str = "TCPRoute";
pub(crate) const UDP_ROUTE: &str = "UDPRoute";
/// The provider of a Gateway's TCP and UDP listeners.
const PROVIDER: &str = crate::service::L4_PROVIDER;

/// The route kinds a listener of `protocol` takes, for TCP and UDP.
pub(crate) fn kinds_for(protocol: &str) -> Option<&'static [&'static str]> {
    match protocol {
        "TCP" => Some(&[TCP_ROUTE]),
        "UDP" => Some(&[UDP_ROUTE]),
        _ => None,
    }
}

/// A TCPRoute or UDPRoute as the translation reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct L4Route<'a> {
    pub kind: &'static str,
    pub key: &'a ObjectKey,
    pub meta: &'a ObjectMeta,
    pub spec: &'a L4RouteSpec,
}

/// A route attached to one listener of one Gateway (by index in the prepared Gateways).
#[derive(Debug, Clone)]
pub(crate) struct L4Attachment<'a> {
    pub gateway: usize,
    pub listener: usize,
    pub route: L4Route<'a>,
}

/// The verdicts of every TCPRoute and UDPRoute with a parentRef to one of our Gateways.
#[derive(Debug, Default)]
pub(crate) struct Attached<'a> {
    pub attachments: Vec<L4Attachment<'a>>,
    pub tcp: BTreeMap<ObjectKey, Vec<ParentVerdict>>,
    pub udp: BTreeMap<ObjectKey, Vec<ParentVerdict>>,
}

/// Attaches every TCPRoute and UDPRoute, oldest first, to the listeners of `gateways` it may
/// use; counts them on those listeners.
pub(crate) fn attach<'a>(
    objects: &'a Objects,
    gateways: &mut [Prepared<'_>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Attached<'a> {
    let tcp = (objects.tcp_routes.iter()).map(|(key, r)| L4Route {
        kind: TCP_ROUTE,
        key,
        meta: &r.metadata,
        spec: &r.spec,
    });
    let udp = (objects.udp_routes.iter()).map(|(key, r)| L4Route {
        kind: UDP_ROUTE,
        key,
        meta: &r.metadata,
        spec: &r.spec,
    });
    let mut routes: Vec<L4Route<'a>> = tcp.chain(udp).collect();
    // No timestamp (a manifest file) counts as the oldest.
    routes.sort_by_cached_key(|r| (r.meta.creation_timestamp.clone(), r.key.clone(), r.kind));
    let mut attached = Attached::default();
    for route in routes {
        let parents = attach_one(
            route,
            objects,
            gateways,
            &mut attached.attachments,
            diagnostics,
        );
        if parents.is_empty() {
            continue;
        }
        let verdicts = match route.kind {
            TCP_ROUTE => &mut attached.tcp,
            _ => &mut attached.udp,
        };
        verdicts.insert(route.key.clone(), parents);
    }
    attached
}

fn attach_one<'a>(
    route: L4Route<'a>,
    objects: &Objects,
    gateways: &mut [Prepared<'_>],
    out: &mut Vec<L4Attachment<'a>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ParentVerdict> {
    let object = ObjectRef::new(route.kind, &route.key.namespace, &route.key.name);
    let parents = &route.spec.parent_refs;
    let check = |diagnostics: &mut Vec<Diagnostic>| {
        let supported = match route.spec.rules.len() {
            0 | 1 => Ok(()),
            n => Err((
                "UnsupportedValue",
                format!("spec.rules: {n} rules; a {} has one", route.kind),
            )),
        };
        let resolved = resolved_refs(&object, unresolved(route, objects), diagnostics);
        (supported, resolved)
    };
    let listen = |(): &(), parent: &ParentReference, g: usize, gateways: &mut [Prepared<'_>]| {
        listen(route, parent, (g, &mut gateways[g]), out)
    };
    let namespace = &route.key.namespace;
    parent_verdicts(
        &object,
        (parents, namespace),
        gateways,
        diagnostics,
        check,
        listen,
    )
}

/// Attaches `route` to the listeners of Gateway `g` that `parent` selects, that take it and
/// that no older route holds.
fn listen<'a>(
    route: L4Route<'a>,
    parent: &ParentReference,
    (g, gateway): (usize, &mut Prepared<'_>),
    out: &mut Vec<L4Attachment<'a>>,
) -> Result<(), Refusal> {
    let takes = |l: &ListenerState<'_>| l.kinds.contains(&route.kind);
    let allowed = admitting(gateway, parent, &route.key.namespace, route.kind, takes)?;
    let mut held = None;
    let mut attached = false;
    for i in allowed {
        let holder = out.iter().find(|a| a.gateway == g && a.listener == i);
        if let Some(holder) = holder {
            held.get_or_insert((holder.route.kind, holder.route.key.clone()));
            continue;
        }
        gateway.listeners[i].attached += 1;
        out.push(L4Attachment {
            gateway: g,
            listener: i,
            route,
        });
        attached = true;
    }
    match held {
        Some((kind, key)) if !attached => Err((
            "NotAllowedByListeners",
            format!("the listeners it selects serve the older {kind} {key}"),
        )),
        _ => Ok(()),
    }
}

/// The first backendRef of the route that does not resolve: the field naming it, why.
fn unresolved(route: L4Route<'_>, objects: &Objects) -> Option<(String, Refusal)> {
    let from = (route.kind, route.key.namespace.as_str());
    let rules = route.spec.rules.iter().enumerate();
    rules
        .flat_map(|(r, rule)| {
            (rule.backend_refs.iter().enumerate()).map(move |(b, backend)| (r, b, backend))
        })
        .find_map(|(r, b, backend)| {
            let field = format!("spec.rules[{r}].backendRefs[{b}]");
            backends::resolve(backend, from, objects)
                .err()
                .map(|e| (field, e))
        })
}

/// The load balancer id of a Gateway's own load balancer (`gateway/<namespace>/<name>`).
fn gateway_lb(key: &ObjectKey) -> LoadBalancerId {
    LoadBalancerId::derive(&format!(
        "loadbalancer/gateway/{}/{}",
        key.namespace, key.name
    ))
}

/// For the `l4` load balancer of a Gateway: the Gateway's own load balancer, whose addresses
/// it takes.
pub fn anchor(lb: &LoadBalancer) -> Option<LoadBalancerId> {
    (lb.origin.kind == "Gateway" && lb.provider == PROVIDER && lb.name.ends_with("/l4"))
        .then(|| gateway_lb(&ObjectKey::new(&lb.origin.namespace, &lb.origin.name)))
}

/// A Gateway's own load balancer without HTTP or HTTPS listeners (a Gateway of TCP and UDP
/// listeners only) goes to provider `l4`, which serves it as nothing: it still holds the
/// addresses, and no L7 provider runs a process without listeners (haproxy refuses to start
/// with none).
pub(crate) fn without_listeners(mut lb: LoadBalancer) -> LoadBalancer {
    if lb.listeners.is_empty() {
        lb.provider = PROVIDER.to_owned();
    }
    lb
}

/// The `l4` load balancer of prepared Gateway `g`: a listener per served TCP or UDP listener
/// with a route; none when it has none (or the Gateway is not accepted).
pub(crate) fn load_balancer(
    (g, gateway): (usize, &Prepared<'_>),
    attachments: &[L4Attachment<'_>],
    objects: &Objects,
    pools: &mut Pools<'_>,
) -> Option<LoadBalancer> {
    if !gateway.accepted() {
        return None;
    }
    let key = gateway.key;
    let name = format!("gateway/{}/{}/l4", key.namespace, key.name);
    let id = LoadBalancerId::derive(&format!("loadbalancer/{name}"));
    let mut used: BTreeMap<PoolId, PoolKey> = BTreeMap::new();
    let mut listeners = Vec::new();
    for attachment in attachments.iter().filter(|a| a.gateway == g) {
        let state = &gateway.listeners[attachment.listener];
        let (Some(protocol @ (Protocol::Tcp | Protocol::Udp)), Ok(port)) =
            (state.protocol, u16::try_from(state.spec.port))
        else {
            continue;
        };
        let tag = if protocol == Protocol::Udp {
            "UDP"
        } else {
            "TCP"
        };
        let listener = ListenerId::derive(&format!("{id}/listener/{tag}/{port}"));
        let route = attachment.route;
        let source = ObjectRef::new(route.kind, &route.key.namespace, &route.key.name);
        let shares = shares(route, objects, id, &mut used);
        let (default_pool, policies) = match &shares[..] {
            [
                WeightedPool {
                    pool: Some(pool),
                    weight: 1..,
                    ..
                },
            ] => (Some(*pool), Vec::new()),
            _ if shares.iter().all(|s| s.weight == 0) => (None, Vec::new()),
            _ => {
                let policy = L7PolicyId::derive(&format!("{listener}/route/{}", route.key));
                let policy = L7Policy {
                    id: policy,
                    action: PolicyAction::RedirectToPools { pools: shares },
                    rules: Vec::new(),
                    source: Arc::new(source.clone()),
                    precedence: 0,
                    options: None,
                };
                (None, vec![Arc::new(policy)])
            }
        };
        listeners.push(Listener {
            id: listener,
            name: format!("{tag}:{port}"),
            protocol,
            port,
            policies,
            default_pool,
            default_source: Some(source),
            tls: None,
        });
    }
    if listeners.is_empty() {
        return None;
    }
    listeners.sort_by_key(|l| (l.port, l.name.clone()));
    let pools = (used.into_iter())
        .map(|(id, key)| pools.pool(id, &key))
        .collect();
    Some(LoadBalancer {
        id,
        name,
        origin: ObjectRef::new("Gateway", &key.namespace, &key.name),
        provider: PROVIDER.to_owned(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools,
    })
}

/// The route's backendRefs as weighted pools (a share that does not resolve has no pool:
/// its flows are refused).
fn shares(
    route: L4Route<'_>,
    objects: &Objects,
    lb: LoadBalancerId,
    used: &mut BTreeMap<PoolId, PoolKey>,
) -> Vec<WeightedPool> {
    let from = (route.kind, route.key.namespace.as_str());
    let backends = route
        .spec
        .rules
        .first()
        .map_or(&[][..], |r| &r.backend_refs[..]);
    (backends.iter())
        .map(|backend| WeightedPool {
            pool: backends::resolve(backend, from, objects).ok().map(|key| {
                let id = pool_id(lb, &key);
                used.entry(id).or_insert(key);
                id
            }),
            weight: u32::try_from(backend.effective_weight()).unwrap_or(0),
            options: None,
        })
        .collect()
}
