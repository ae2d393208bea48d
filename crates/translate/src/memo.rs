//! What one translation keeps for the next, so that a change costs in proportion to what it
//! touches rather than to the size of the cluster.
//!
//! A prepared Ingress (admission, routes, ids: [`Source`]) is reused while the Ingress, its
//! class's ids and the Services its backends name are unchanged; a pool of the previous model
//! is reused while its Service, EndpointSlices and Endpoints are unchanged. Everything else
//! (ownership, merging, precedence, the default backend) is redone on every translation, and
//! the result equals a full translation (the tests compare the two).
//!
//! The Ingress side's share ([`IngressMemo`]: the Ingress classes', dedicated Ingresses' and
//! Services' load balancers, their diagnostics, the Ingress states) is reused whole while
//! none of the kinds it reads changed: a change to Gateway API objects alone costs nothing on
//! the Ingress side.
//!
//! The Gateway API's share of a translation (its load balancers, verdicts and diagnostics:
//! [`GatewayMemo`]) is reused whole while none of its inputs changed: the Gateway API's kinds,
//! the Secrets our Gateways name, and the Services their routes name. A change to an Ingress
//! then costs nothing on the Gateway side, however many routes there are. When it cannot be
//! reused, each HTTPRoute's and GRPCRoute's share is, while that route and what it reads are
//! unchanged (`gateway::reuse`): a change to one route redoes that route, the order of its
//! listeners' policies and the pools.

use crate::backend::PoolKey;
use crate::members::SliceIndex;
use crate::pool::build_pool;
use crate::source::Source;
use crate::{ObjectKey, Objects};
use foldhash::{HashMap, HashSet, HashSetExt};
use portico_model::{Diagnostic, LoadBalancer, Model, Pool, PoolId};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The prepared Ingresses of the last translation, in key order (a translation walks them in
/// step with the Ingresses, which come in key order too: no key is hashed or copied). Only
/// valid together with the objects and the model of that translation (see [`Previous`]).
#[derive(Debug, Default, Clone)]
pub struct Memo {
    pub(crate) sources: Vec<Arc<Source>>,
    /// Each shared load balancer's merged route order, by load balancer name.
    pub(crate) orders: HashMap<String, Vec<crate::merge::Entry>>,
    /// Each shared load balancer's policies by route, by load balancer name.
    pub(crate) built: HashMap<String, crate::loadbalancer::BuiltRoutes>,
    /// How many of them the last translation took over from the one before.
    pub(crate) reused: usize,
    /// The Ingress side's share of the last translation.
    pub(crate) ingress: Option<Arc<IngressMemo>>,
    /// Whether the last translation reused it.
    pub(crate) ingress_reused: bool,
    /// The Gateway API's share of the last translation.
    pub(crate) gateway: Option<Arc<GatewayMemo>>,
    /// Whether the last translation reused it.
    pub(crate) gateway_reused: bool,
    /// How many HTTPRoutes and GRPCRoutes the last translation took from their memos.
    pub(crate) routes_reused: usize,
    /// Which Ingresses' policies the last translation may have changed, per load balancer.
    pub(crate) rebuilt: portico_model::Rebuilt,
}

/// What the Ingress side of a translation gave: the load balancers of the Ingress classes, of
/// dedicated Ingresses and of Services of type LoadBalancer, their diagnostics and the verdict
/// on every Ingress. It reads none of the Gateway API's kinds, so a change to those alone
/// (an HTTPRoute moved) reuses it whole.
#[derive(Debug)]
pub(crate) struct IngressMemo {
    /// As translated: before addresses are assigned. Their pools are taken from the model
    /// served now when reused (endpoint changes patch those in place).
    pub(crate) load_balancers: Vec<LoadBalancer>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) ingresses: Vec<crate::IngressState>,
}

impl IngressMemo {
    /// Whether a translation of `new` would give what this memo holds, `old` being the
    /// objects it was made from: every kind the Ingress side reads is unchanged. Every kind
    /// of [`Objects`] is named here, so that a kind added later must be placed on one side
    /// or the other.
    pub(crate) fn still_holds(old: &Objects, new: &Objects) -> bool {
        let Objects {
            ingresses,
            ingress_classes,
            // Portico's own status writes: not translated.
            ingress_seen: _,
            service_seen: _,
            services,
            endpoint_slices,
            endpoints,
            secrets,
            config_maps,
            namespaces,
            // Not read by the Ingress side.
            gateway_classes: _,
            gateways: _,
            http_routes: _,
            grpc_routes: _,
            reference_grants: _,
            tcp_routes: _,
            udp_routes: _,
            tls_routes: _,
            listener_sets: _,
            backend_tls_policies: _,
        } = new;
        same(&old.ingresses, ingresses)
            && same(&old.ingress_classes, ingress_classes)
            && same(&old.services, services)
            && same(&old.endpoint_slices, endpoint_slices)
            && same(&old.endpoints, endpoints)
            && same(&old.secrets, secrets)
            && same(&old.config_maps, config_maps)
            && same(&old.namespaces, namespaces)
    }
}

/// What the Gateway API's translation gave, with the inputs it depends on besides the Gateway
/// API's own kinds (which must be unchanged for any reuse).
#[derive(Debug)]
pub(crate) struct GatewayMemo {
    /// As translated: before addresses are assigned. Their pools are taken from the model
    /// served now when reused (endpoint changes patch those in place).
    pub(crate) load_balancers: Vec<LoadBalancer>,
    pub(crate) verdicts: Arc<crate::gateway::Verdicts>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Every Service a route's backendRef or mirror names, resolved or not.
    pub(crate) services: HashSet<ObjectKey>,
    /// Each HTTPRoute's and GRPCRoute's share, for a translation that cannot reuse the whole.
    pub(crate) routes: crate::gateway::RouteMemos,
}

impl GatewayMemo {
    /// Whether a translation of `new` would give what this memo holds, `old` being the
    /// objects it was made from. Every kind of [`Objects`] is named here, so that a kind
    /// added later must be placed on one side or the other.
    pub(crate) fn still_holds(
        &self,
        old: &Objects,
        new: &Objects,
        changed_services: &HashSet<ObjectKey>,
        config: &crate::Config,
    ) -> bool {
        let Objects {
            // Not read by the Gateway API's translation.
            ingresses: _,
            ingress_classes: _,
            ingress_seen: _,
            service_seen: _,
            // Read through the pools and backendRefs: `changed_services`.
            services: _,
            endpoint_slices: _,
            endpoints: _,
            secrets,
            gateway_classes,
            gateways,
            http_routes,
            grpc_routes,
            reference_grants,
            tcp_routes,
            udp_routes,
            tls_routes,
            listener_sets,
            backend_tls_policies,
            config_maps,
            namespaces,
        } = new;
        same(&old.gateway_classes, gateway_classes)
            && same(&old.gateways, gateways)
            && same(&old.http_routes, http_routes)
            && same(&old.grpc_routes, grpc_routes)
            && same(&old.reference_grants, reference_grants)
            && same(&old.tcp_routes, tcp_routes)
            && same(&old.udp_routes, udp_routes)
            && same(&old.tls_routes, tls_routes)
            && same(&old.listener_sets, listener_sets)
            && same(&old.backend_tls_policies, backend_tls_policies)
            && same(&old.config_maps, config_maps)
            && same(&old.namespaces, namespaces)
            && !changed_services.iter().any(|s| self.services.contains(s))
            && crate::gateway::referenced_secrets(new, config)
                .iter()
                .all(|key| match (old.secrets.get(key), secrets.get(key)) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                    (a, b) => a.is_none() && b.is_none(),
                })
    }
}

/// Whether two maps of one kind hold the same objects: by pointer first (a kind's map that did
/// not change is shared), by value when the pointers differ.
pub(crate) fn same<K: Ord, V: PartialEq>(a: &BTreeMap<K, Arc<V>>, b: &BTreeMap<K, Arc<V>>) -> bool {
    std::ptr::eq(a, b)
        || a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|((ka, va), (kb, vb))| ka == kb && (Arc::ptr_eq(va, vb) || va == vb))
}

impl Memo {
    /// How many prepared Ingresses the last translation reused rather than prepared again.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// Whether the last translation reused the Ingress side's share of the one before (only
    /// Gateway API objects changed).
    pub fn ingress_reused(&self) -> bool {
        self.ingress_reused
    }

    /// Whether the last translation reused the Gateway API's share of the one before.
    pub fn gateway_reused(&self) -> bool {
        self.gateway_reused
    }

    /// Per load balancer of the last translation, the sources whose policies and SNI entries
    /// may differ from the previous model's (see [`portico_model::Rebuilt`]); empty after a
    /// change to anything but Ingresses.
    pub fn rebuilt(&self) -> &portico_model::Rebuilt {
        &self.rebuilt
    }

    /// How many HTTPRoutes and GRPCRoutes the last translation took from the one before
    /// rather than translated again (all of them when it reused the Gateway API's share).
    pub fn routes_reused(&self) -> usize {
        self.routes_reused
    }
}

/// The previous translation's prepared Ingresses, looked up in ascending key order.
pub(crate) struct Reusable {
    sources: std::vec::IntoIter<Arc<Source>>,
    next: Option<Arc<Source>>,
}

impl Reusable {
    pub(crate) fn new(sources: Vec<Arc<Source>>) -> Self {
        let mut sources = sources.into_iter();
        let next = sources.next();
        Reusable { sources, next }
    }

    /// The prepared Ingress of `key`, if the last translation had one. Keys must be asked for
    /// in ascending order; the ones skipped are dropped.
    pub(crate) fn take(&mut self, key: &ObjectKey) -> Option<Arc<Source>> {
        while let Some(source) = self.next.take() {
            match source.key.cmp(key) {
                Ordering::Less => self.next = self.sources.next(),
                Ordering::Equal => {
                    self.next = self.sources.next();
                    return Some(source);
                }
                Ordering::Greater => {
                    self.next = Some(source);
                    return None;
                }
            }
        }
        None
    }
}

/// The last translation's input and model, and what it left in its [`Memo`].
#[derive(Debug, Clone, Copy)]
pub struct Previous<'a> {
    pub objects: &'a Objects,
    /// The model served now; it may have been patched by [`crate::refresh_members`] since.
    pub model: &'a Model,
}

/// The Services whose object, EndpointSlices or Endpoints differ between `old` and `new`:
/// what a reused Ingress or pool must not depend on.
pub(crate) fn changed_services(old: &Objects, new: &Objects) -> HashSet<ObjectKey> {
    let mut changed = HashSet::new();
    for_each_change(&old.services, &new.services, |key, _| {
        changed.insert(key.clone());
    });
    for_each_change(&old.endpoints, &new.endpoints, |key, _| {
        changed.insert(key.clone());
    });
    for_each_change(&old.endpoint_slices, &new.endpoint_slices, |key, slice| {
        if let Some(service) = &slice.service {
            changed.insert(ObjectKey::new(&key.namespace, service));
        }
    });
    changed
}

/// Calls `f` with each side of every entry added, removed or changed between `old` and `new`,
/// in one merge pass over the two sorted maps. Objects are compared by pointer first, by value
/// when the pointers differ (a re-read file yields new allocations).
pub(crate) fn for_each_change<'a, K: Ord, V: PartialEq>(
    old: &'a BTreeMap<K, Arc<V>>,
    new: &'a BTreeMap<K, Arc<V>>,
    mut f: impl FnMut(&'a K, &'a V),
) {
    // One map shared by both loads (`Objects` shares a kind's map that did not change).
    if std::ptr::eq(old, new) {
        return;
    }
    let (mut a, mut b) = (old.iter().peekable(), new.iter().peekable());
    loop {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
        };
        match order {
            Ordering::Less => a.next().into_iter().for_each(|(k, v)| f(k, v)),
            Ordering::Greater => b.next().into_iter().for_each(|(k, v)| f(k, v)),
            Ordering::Equal => {
                if let (Some((ka, va)), Some((kb, vb))) = (a.next(), b.next())
                    && !(Arc::ptr_eq(va, vb) || va == vb)
                {
                    f(ka, va);
                    f(kb, vb);
                }
            }
        }
    }
}

/// Pools for the load balancers being built: the previous model's where still valid, else
/// built from the objects (the EndpointSlice index is made on first need).
pub(crate) struct Pools<'a> {
    objects: &'a Objects,
    slices: Option<SliceIndex<'a>>,
    previous: HashMap<PoolId, &'a Arc<Pool>>,
    changed_services: &'a HashSet<ObjectKey>,
}

impl<'a> Pools<'a> {
    /// `previous` is `None` for a full translation.
    pub(crate) fn new(
        objects: &'a Objects,
        previous: Option<&'a Model>,
        changed_services: &'a HashSet<ObjectKey>,
    ) -> Self {
        let previous = previous.iter().flat_map(|m| &m.load_balancers);
        let previous = previous.flat_map(|lb| &lb.pools).map(|p| (p.id, p));
        Pools {
            objects,
            slices: None,
            previous: previous.collect(),
            changed_services,
        }
    }

    /// `pool` as the model served now has it (its members patched by endpoint changes since
    /// it was translated), else as it is.
    pub(crate) fn current(&self, pool: &Arc<Pool>) -> Arc<Pool> {
        Arc::clone(self.previous.get(&pool.id).copied().unwrap_or(pool))
    }

    pub(crate) fn pool(&mut self, id: PoolId, key: &PoolKey) -> Arc<Pool> {
        if let Some(pool) = self.previous.get(&id)
            && !self.changed_services.contains(&key.service)
        {
            return Arc::clone(pool);
        }
        let objects = self.objects;
        let slices = self.slices.get_or_insert_with(|| SliceIndex::new(objects));
        Arc::new(build_pool(id, key, objects, slices))
    }
}
