//! The Gateway API as a second source language into the same model: each Gateway of one of our
//! GatewayClasses (`spec.controllerName` = [`Config::gateway_controller`]) becomes a
//! LoadBalancer (`gateway/<namespace>/<name>`, its origin the Gateway), each of its accepted
//! listeners a model listener (one HTTP and one TERMINATED_HTTPS per load balancer: the first
//! port of each protocol), and each HTTPRoute attached to those listeners L7 policies on them.
//! Another controller's classes, their Gateways and the routes attached only to those get
//! nothing: no load balancer, no verdict, no status.
//!
//! Besides the model, a translation gives a [`Verdicts`]: what the status of every GatewayClass,
//! Gateway and HTTPRoute of ours says (conditions without times), computed here, purely, and
//! stamped with times and observed generations at the edge ([`status`]).
//!
//! # Precedence
//! The policies of a listener are put in [`portico_model::order`]'s order, which is the
//! Gateway API's: exact hostnames before wildcards (the longer wildcard first) before none;
//! then Exact paths, longer prefixes first; then more header matches; then, for what still
//! ties, the older route (creation timestamp, then namespace/name), its rule, its match (the
//! policies' `precedence`). A request whose host matches an exact hostname but none of its
//! paths falls through to the wildcard and host-less policies.

mod attach;
mod backend_tls;
mod backends;
mod filters;
mod l4routes;
mod listener_sets;
mod listeners;
mod reuse;
mod rules;
mod selector;
pub mod status;
mod tlsroutes;

use crate::memo::Pools;
use crate::{Config, ObjectKey, Objects};
use portico_gateway::{Gateway, GrpcRoute, HttpRoute};
use portico_model::{Diagnostic, LoadBalancer};
use reuse::{Object, RouteMemo};
pub(crate) use reuse::{Reuse, RouteMemos};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use listener_sets::ListenerSetVerdict;
pub use portico_gateway::Statuses;
pub use status::{Condition, Reach, statuses};

/// What the status of each of our Gateway API objects says, by object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdicts {
    /// Our GatewayClasses by name.
    pub classes: BTreeMap<String, Vec<Condition>>,
    /// Our Gateways.
    pub gateways: BTreeMap<ObjectKey, GatewayVerdict>,
    /// HTTPRoutes with at least one parentRef to one of our Gateways: one entry per such
    /// parentRef (by its index in `spec.parentRefs`). Shared with the route's memo: a
    /// translation that reuses the memo copies none of it.
    pub routes: BTreeMap<ObjectKey, Arc<Vec<ParentVerdict>>>,
    /// The same for GRPCRoutes.
    pub grpc_routes: BTreeMap<ObjectKey, Arc<Vec<ParentVerdict>>>,
    /// The same for TCPRoutes and UDPRoutes.
    pub tcp_routes: BTreeMap<ObjectKey, Vec<ParentVerdict>>,
    pub udp_routes: BTreeMap<ObjectKey, Vec<ParentVerdict>>,
    /// The same for TLSRoutes.
    pub tls_routes: BTreeMap<ObjectKey, Vec<ParentVerdict>>,
    /// BackendTLSPolicies that govern (or lose) a Service port our Gateways send to: by
    /// policy, the conditions for each such Gateway.
    pub backend_tls_policies: backend_tls::PolicyVerdicts,
    /// ListenerSets naming one of our Gateways.
    pub listener_sets: BTreeMap<ObjectKey, ListenerSetVerdict>,
}

/// A Gateway's conditions and its listeners'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayVerdict {
    pub conditions: Vec<Condition>,
    /// In `spec.listeners` order.
    pub listeners: Vec<ListenerVerdict>,
    /// The address taken from `spec.addresses`, if any.
    pub requested: Option<std::net::IpAddr>,
    /// How many ListenerSets are attached (`None`: it takes none and none names it).
    pub attached_listener_sets: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListenerVerdict {
    pub name: String,
    /// (group, kind) of the route kinds it takes.
    pub supported_kinds: Vec<(String, String)>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

/// A route's verdict for one of its parentRefs.
#[derive(Debug, Clone, PartialEq)]
pub struct ParentVerdict {
    /// The index of the parentRef in `spec.parentRefs`.
    pub index: usize,
    pub conditions: Vec<Condition>,
}

/// The load balancers of our Gateways and the verdicts on every object of ours; the memos of
/// the HTTPRoutes and GRPCRoutes, for the next translation. `reuse` is the last
/// translation's memos that may still hold (none: every route is translated).
pub(crate) fn translate(
    objects: &Objects,
    config: &Config,
    pools: &mut Pools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
    reuse: Option<&Reuse<'_>>,
) -> (Vec<LoadBalancer>, Verdicts, RouteMemos) {
    let mut verdicts = Verdicts::default();
    let classes: BTreeSet<&str> = (objects.gateway_classes.iter())
        .filter(|(_, c)| c.spec.controller_name == config.gateway_controller)
        .map(|(name, _)| name.as_str())
        .collect();
    for class in &classes {
        verdicts
            .classes
            .insert((*class).to_owned(), vec![status::class_accepted()]);
    }
    let gateways: Vec<(&ObjectKey, &Gateway)> = (objects.gateways.iter())
        .filter(|(_, g)| classes.contains(g.spec.gateway_class_name.as_str()))
        .map(|(k, g)| (k, &**g))
        .collect();
    let mut prepared: Vec<listeners::Prepared<'_>> = gateways
        .iter()
        .map(|(key, gateway)| listeners::prepare(key, gateway, objects, diagnostics))
        .collect();
    // GRPCRoutes are served as the HTTPRoutes they amount to (`kind` stays `GRPCRoute`).
    let grpc: Vec<(&ObjectKey, &Arc<GrpcRoute>, HttpRoute)> = (objects.grpc_routes.iter())
        .map(|(k, r)| (k, r, r.as_http_route()))
        .collect();
    let routes = by_age(objects, &grpc);
    let memos = attach_routes(&routes, &mut prepared, objects, config, reuse, diagnostics);
    let ours = |memos: &foldhash::HashMap<ObjectKey, Arc<RouteMemo>>| {
        let ours = memos.iter().filter(|(_, m)| !m.verdicts.is_empty());
        ours.map(|(k, m)| (k.clone(), m.verdicts.clone())).collect()
    };
    verdicts.routes = ours(&memos.http);
    verdicts.grpc_routes = ours(&memos.grpc);
    for gateway in &mut prepared {
        let provider = rules::provider(objects, &gateway.gateway.spec.gateway_class_name, config);
        tlsroutes::refuse_unserved(gateway, &provider, diagnostics);
    }
    verdicts.tls_routes = tlsroutes::attach(objects, &mut prepared, diagnostics);
    let l4 = l4routes::attach(objects, &mut prepared, diagnostics);
    verdicts.tcp_routes = l4.tcp;
    verdicts.udp_routes = l4.udp;
    let mut load_balancers = Vec::new();
    for (g, gateway) in prepared.into_iter().enumerate() {
        let own = rules::load_balancer(&gateway, objects, config, pools);
        load_balancers.extend(own.map(l4routes::without_listeners));
        let at = (g, &gateway);
        load_balancers.extend(l4routes::load_balancer(at, &l4.attachments, objects, pools));
        for (s, set) in gateway.sets.iter().enumerate() {
            let verdict = listener_sets::verdict(&gateway, s);
            verdicts.listener_sets.insert(set.key.clone(), verdict);
        }
        verdicts
            .gateways
            .insert(gateway.key.clone(), gateway.verdict());
    }
    verdicts.backend_tls_policies = backend_tls::verdicts(objects, &load_balancers);
    (load_balancers, verdicts, memos)
}

/// An HTTPRoute or a GRPCRoute (as its HTTPRoute), with the object it was read as.
struct Route<'a> {
    key: &'a ObjectKey,
    spec: &'a HttpRoute,
    object: Object,
}

/// Attaches every route, oldest first, to `prepared`: from its memo where it still holds,
/// else translated again. The memos of this translation.
fn attach_routes<'a>(
    routes: &[Route<'a>],
    prepared: &mut [listeners::Prepared<'a>],
    objects: &Objects,
    config: &Config,
    reuse: Option<&Reuse<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> RouteMemos {
    let contexts = reuse::contexts(prepared, |g| {
        rules::provider(objects, &g.gateway.spec.gateway_class_name, config)
    });
    let gateways_same = reuse.is_some_and(|r| r.gateways_same(&contexts));
    let index: foldhash::HashMap<ObjectKey, usize> = (prepared.iter().enumerate())
        .map(|(i, g)| (g.key.clone(), i))
        .collect();
    let mut memos = RouteMemos::default();
    for (rank, route) in routes.iter().enumerate() {
        let kind = kind(route.spec);
        let held = reuse.and_then(|r| {
            let at = (kind, route.key);
            r.route(at, (&route.object, route.spec), &contexts, gateways_same)
        });
        let memo = match held {
            Some(memo) => {
                replay(memo, (route, rank), prepared, &index);
                diagnostics.extend(memo.diagnostics.iter().cloned());
                memos.reused += 1;
                memo.clone()
            }
            None => Arc::new(translate_route(
                (route, rank),
                prepared,
                objects,
                diagnostics,
            )),
        };
        memos.of(kind).insert(route.key.clone(), memo);
    }
    memos.contexts = contexts;
    memos
}

/// Attaches a route as its memo says.
fn replay<'a>(
    memo: &RouteMemo,
    (route, rank): (&Route<'a>, usize),
    prepared: &mut [listeners::Prepared<'a>],
    index: &foldhash::HashMap<ObjectKey, usize>,
) {
    for attached in &memo.attachments {
        // Always there: the memo holds only while its Gateways are prepared as before.
        if let Some(&g) = index.get(&attached.gateway) {
            prepared[g].add(listeners::Attachment {
                route: route.key,
                spec: route.spec,
                rank,
                attached: attached.clone(),
            });
        }
    }
}

/// Translates a route: its verdicts, diagnostics and attachments, as its memo.
fn translate_route<'a>(
    (route, rank): (&Route<'a>, usize),
    prepared: &mut [listeners::Prepared<'a>],
    objects: &Objects,
    diagnostics: &mut Vec<Diagnostic>,
) -> RouteMemo {
    let start = diagnostics.len();
    let mut attached = Vec::new();
    let at = (route.key, route.spec, rank);
    let parents = attach::attach(at, prepared, objects, diagnostics, &mut attached);
    let own = diagnostics[start..].to_vec();
    let object = route.object.clone();
    RouteMemo::new(object, route.key, route.spec, parents, own, attached)
}

/// The Secrets our Gateways' listeners name in `tls.certificateRefs` (in the Gateway's
/// namespace unless the ref names another; whether a ReferenceGrant permits that is decided by
/// the translation, which needs the Secret to say so either way), and those BackendTLSPolicies
/// name for their CA certificates (their status says whether each holds `ca.crt`).
pub(crate) fn referenced_secrets(objects: &Objects, config: &Config) -> Vec<ObjectKey> {
    let ours = |class: &str| {
        let class = objects.gateway_classes.get(class);
        class.is_some_and(|c| c.spec.controller_name == config.gateway_controller)
    };
    let gateways = objects.gateways.iter();
    let gateways = gateways.filter(|(_, g)| ours(&g.spec.gateway_class_name));
    let mut secrets = Vec::new();
    for (key, gateway) in gateways {
        let tls = gateway.spec.listeners.iter().filter_map(|l| l.tls.as_ref());
        let refs = tls.flat_map(|t| t.certificate_refs.iter());
        let refs = refs.filter(|r| r.group_kind() == ("", "Secret"));
        secrets.extend(
            refs.map(|r| ObjectKey::new(r.namespace.as_deref().unwrap_or(&key.namespace), &r.name)),
        );
    }
    for (key, set) in objects.listener_sets.iter() {
        let parent = &set.spec.parent_ref;
        let gateway = ObjectKey::new(parent.namespace_or(&key.namespace), &parent.name);
        let gateway = objects.gateways.get(&gateway);
        if !parent.is_gateway() || !gateway.is_some_and(|g| ours(&g.spec.gateway_class_name)) {
            continue;
        }
        let tls = set.spec.listeners.iter().filter_map(|l| l.tls.as_ref());
        let refs = tls.flat_map(|t| t.certificate_refs.iter());
        let refs = refs.filter(|r| r.group_kind() == ("", "Secret"));
        secrets.extend(
            refs.map(|r| ObjectKey::new(r.namespace.as_deref().unwrap_or(&key.namespace), &r.name)),
        );
    }
    let cas = backend_tls::ca_refs(objects).into_iter().map(|(_, r)| r);
    let cas = cas.filter(|r| r.kind == "Secret");
    secrets.extend(cas.map(|r| ObjectKey::new(&r.namespace, &r.name)));
    secrets
}

/// Every Service the HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes name in a
/// backendRef or a RequestMirror (of a rule or of a backendRef), resolved or not, attached or
/// not: what their translation may depend on besides the Gateway API's own kinds. Those of the
/// HTTPRoutes and GRPCRoutes as their memos (`routes`, of the same objects) hold them.
pub(crate) fn backend_services(
    objects: &Objects,
    routes: &RouteMemos,
) -> foldhash::HashSet<ObjectKey> {
    let mut services = foldhash::HashSet::default();
    for memo in routes.http.values().chain(routes.grpc.values()) {
        // Many routes name the same Services: a key is copied once.
        for service in &memo.services {
            if !services.contains(service) {
                services.insert(service.clone());
            }
        }
    }
    let tcp = (objects.tcp_routes.iter()).map(|(k, r)| (k, &r.spec.rules));
    let udp = (objects.udp_routes.iter()).map(|(k, r)| (k, &r.spec.rules));
    let tls = (objects.tls_routes.iter()).map(|(k, r)| (k, &r.spec.rules));
    for (key, rules) in tcp.chain(udp).chain(tls) {
        for b in rules.iter().flat_map(|r| &r.backend_refs) {
            let ns = b.namespace.as_deref().unwrap_or(&key.namespace);
            services.insert(ObjectKey::new(ns, &b.name));
        }
    }
    services
}

/// Calls `f` with every Service a route (in `namespace`) names in a backendRef or a
/// RequestMirror (of a rule or of a backendRef).
fn named_services(namespace: &str, route: &HttpRoute, mut f: impl FnMut(ObjectKey)) {
    for rule in &route.spec.rules {
        for b in &rule.backend_refs {
            let ns = b.namespace.as_deref().unwrap_or(namespace);
            f(ObjectKey::new(ns, &b.name));
        }
        let filters =
            (rule.filters.iter()).chain(rule.backend_refs.iter().flat_map(|b| &b.filters));
        for mirror in filters.filter_map(|f| f.get("requestMirror")?.get("backendRef")) {
            if let Some(name) = mirror.get("name").and_then(|n| n.as_str()) {
                let ns = mirror.get("namespace").and_then(|n| n.as_str());
                f(ObjectKey::new(ns.unwrap_or(namespace), name));
            }
        }
    }
}

pub(crate) use backend_tls::ca_refs as backend_tls_ca_refs;
pub use l4routes::anchor;

/// The Gateway a load balancer was made for, if any.
pub(crate) fn of<'a>(lb: &LoadBalancer, objects: &'a Objects) -> Option<&'a Gateway> {
    if lb.origin.kind != "Gateway" {
        return None;
    }
    let key = ObjectKey::new(&lb.origin.namespace, &lb.origin.name);
    objects.gateways.get(&key).map(|g| &**g)
}

/// The first `IPAddress` of a Gateway's `spec.addresses` that is one.
pub(crate) fn requested_address(gateway: &Gateway) -> Option<std::net::IpAddr> {
    (gateway.spec.addresses.iter())
        .filter(|a| a.address_type() == "IPAddress")
        .find_map(|a| a.value.as_deref()?.parse().ok())
}

/// The group and kind of a route's parentRef to a ListenerSet.
pub(crate) const GROUP_KIND_SET: (&str, &str) = (portico_gateway::GROUP, "ListenerSet");

/// The kind of GRPCRoutes, as their HTTPRoutes keep it.
pub(crate) const GRPC_ROUTE: &str = "GRPCRoute";

/// A route's kind: `GRPCRoute` for a GRPCRoute's HTTPRoute, else `HTTPRoute` (whatever an
/// object read from the API server says, which may be nothing).
pub(crate) fn kind(route: &HttpRoute) -> &'static str {
    if route.kind == GRPC_ROUTE {
        GRPC_ROUTE
    } else {
        "HTTPRoute"
    }
}

/// The HTTPRoutes and GRPCRoutes (as their HTTPRoutes), oldest first (creation timestamp,
/// then namespace/name, HTTPRoutes first): the order that breaks precedence ties between
/// routes.
fn by_age<'a>(
    objects: &'a Objects,
    grpc: &'a [(&'a ObjectKey, &'a Arc<GrpcRoute>, HttpRoute)],
) -> Vec<Route<'a>> {
    let http = (objects.http_routes.iter()).map(|(key, r)| Route {
        key,
        spec: r,
        object: Object::Http(r.clone()),
    });
    let grpc = grpc.iter().map(|(key, r, spec)| Route {
        key,
        spec,
        object: Object::Grpc((*r).clone()),
    });
    let mut routes: Vec<Route<'a>> = http.chain(grpc).collect();
    routes.sort_by(|a, b| {
        let created = |r: &Route<'_>| r.spec.metadata.creation_timestamp.clone();
        // No timestamp (a manifest file) counts as the oldest, as if created first.
        (created(a), a.key).cmp(&(created(b), b.key))
    });
    routes
}
