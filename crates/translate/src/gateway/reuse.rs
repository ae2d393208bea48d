//! A memo per HTTPRoute and GRPCRoute: what translating one route gave (its verdicts, its
//! diagnostics, its attachments and the policies each became), kept for the next translation
//! while what it was made from is unchanged, so that changing one route of thousands redoes
//! that route, then the sort of its listeners' policies and the pools.
//!
//! A route's translation reads the route's `spec` and `kind` (not its status or metadata; its
//! age only as its rank, which is applied when the policies are taken), the Gateways its
//! parentRefs name as prepared ([`Context`]: listeners, their verdicts, the namespaces they
//! select, the provider), the Service objects its backendRefs and mirrors name, the
//! ReferenceGrants when one of those is in another namespace, and the BackendTLSPolicies. A
//! memo is reused only while all of those are the same; the caller drops every memo when the
//! BackendTLSPolicies changed.

use super::listeners::Prepared;
use crate::backend::PoolKey;
use crate::memo::{for_each_change, same};
use crate::{ObjectKey, Objects};
use foldhash::{HashMap, HashSet, HashSetExt};
use k8s_openapi::api::core::v1::Namespace;
use portico_gateway::{GrpcRoute, HttpRoute, Listener};
use portico_model::{Diagnostic, L7Policy, PoolId, Protocol};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The route objects a translation reads, as the objects hold them.
#[derive(Debug, Clone)]
pub(crate) enum Object {
    Http(Arc<HttpRoute>),
    Grpc(Arc<GrpcRoute>),
}

impl Object {
    /// Whether the two translate alike: the same object, or the same `kind` and `spec`.
    fn translates_as(&self, other: &Object) -> bool {
        match (self, other) {
            (Object::Http(a), Object::Http(b)) => {
                Arc::ptr_eq(a, b) || (a.kind == b.kind && a.spec == b.spec)
            }
            (Object::Grpc(a), Object::Grpc(b)) => Arc::ptr_eq(a, b) || a.spec == b.spec,
            _ => false,
        }
    }
}

/// One route attached to one listener of a Gateway, and the policies it became there.
#[derive(Debug)]
pub(crate) struct Attached {
    pub gateway: ObjectKey,
    /// The listener's index in the Gateway's `spec.listeners`.
    pub listener: usize,
    /// The hostnames requests must have (the intersection of the route's and the
    /// listener's); `None` is any host.
    pub hosts: Vec<Option<String>>,
    /// Made when the load balancer is built, if the listener is served.
    pub built: OnceLock<Built>,
}

/// The policies of one attachment, their precedence without the route's rank (added when
/// taken: the rank changes when an older route comes or goes), and the pools they name.
#[derive(Debug)]
pub(crate) struct Built {
    pub policies: Vec<L7Policy>,
    /// The policies with the precedence of the rank they were last taken at: the model's
    /// listeners share them while the route's rank is unchanged.
    pub ranked: std::sync::Mutex<(usize, Vec<Arc<L7Policy>>)>,
    /// Each policy's [`portico_model::order::key`] as built (its precedence without the
    /// rank), kept so that sorting a listener's policies again computes none of them.
    pub keys: Vec<portico_model::order::Key>,
    pub pools: Vec<(PoolId, PoolKey)>,
}

impl Built {
    /// The policies with the precedence `rank` gives them (`ranked(unranked)`), shared with
    /// the last listener that took them at that rank.
    pub(crate) fn ranked(&self, rank: usize, ranked: impl Fn(u32) -> u32) -> Vec<Arc<L7Policy>> {
        let mut kept = self.ranked.lock().unwrap_or_else(|e| e.into_inner());
        if kept.0 != rank || kept.1.len() != self.policies.len() {
            let policies = (self.policies.iter())
                .map(|p| {
                    Arc::new(L7Policy {
                        precedence: ranked(p.precedence),
                        ..p.clone()
                    })
                })
                .collect();
            *kept = (rank, policies);
        }
        kept.1.clone()
    }
}

/// What translating one route gave.
#[derive(Debug)]
pub(crate) struct RouteMemo {
    object: Object,
    /// Every Service its backendRefs and mirrors name, resolved or not.
    pub services: Vec<ObjectKey>,
    /// Whether one of those is in another namespace (a ReferenceGrant decides).
    cross_namespace: bool,
    pub verdicts: Arc<Vec<super::ParentVerdict>>,
    pub diagnostics: Vec<Diagnostic>,
    /// In the order the translation attached them.
    pub attachments: Vec<Arc<Attached>>,
}

impl RouteMemo {
    pub(crate) fn new(
        object: Object,
        key: &ObjectKey,
        route: &HttpRoute,
        verdicts: Vec<super::ParentVerdict>,
        diagnostics: Vec<Diagnostic>,
        attachments: Vec<Arc<Attached>>,
    ) -> Self {
        let mut services = Vec::new();
        super::named_services(&key.namespace, route, |s| services.push(s));
        services.sort();
        services.dedup();
        let cross_namespace = services.iter().any(|s| s.namespace != key.namespace);
        RouteMemo {
            object,
            services,
            cross_namespace,
            verdicts: Arc::new(verdicts),
            diagnostics,
            attachments,
        }
    }
}

/// A prepared Gateway as its routes' translation sees it.
#[derive(Debug)]
pub(crate) struct Context {
    listeners: Vec<ListenerContext>,
    accepted: bool,
    /// Which listeners are served depends on it (some providers refuse TLS listeners).
    provider: String,
    /// The Namespaces, when a listener admits routes by a namespace selector.
    namespaces: Option<Arc<BTreeMap<String, Arc<Namespace>>>>,
}

#[derive(Debug, PartialEq)]
struct ListenerContext {
    /// The ListenerSet it came from (none: the Gateway's own).
    owner: Option<ObjectKey>,
    spec: Listener,
    protocol: Option<Protocol>,
    served: bool,
    kinds: Vec<&'static str>,
    passthrough: bool,
    terminate: bool,
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        let namespaces = match (&self.namespaces, &other.namespaces) {
            (Some(a), Some(b)) => same(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        namespaces
            && self.listeners == other.listeners
            && self.accepted == other.accepted
            && self.provider == other.provider
    }
}

/// The context of each prepared Gateway (before any route is attached), by key.
pub(crate) fn contexts(
    prepared: &[Prepared<'_>],
    provider: impl Fn(&Prepared<'_>) -> String,
) -> BTreeMap<ObjectKey, Context> {
    let context = |gateway: &Prepared<'_>| {
        let listeners: Vec<ListenerContext> = (gateway.listeners.iter())
            .map(|l| ListenerContext {
                owner: l.owner.map(|s| gateway.sets[s].key.clone()),
                spec: l.spec.clone(),
                protocol: l.protocol,
                served: l.served(),
                kinds: l.kinds.clone(),
                passthrough: l.passthrough,
                terminate: l.terminate,
            })
            .collect();
        let selects = (listeners.iter()).any(|l| l.spec.routes_from() == "Selector");
        Context {
            listeners,
            accepted: gateway.accepted(),
            provider: provider(gateway),
            namespaces: selects.then(|| gateway.namespaces.clone()),
        }
    };
    (prepared.iter())
        .map(|g| (g.key.clone(), context(g)))
        .collect()
}

/// The route memos of one translation, and the contexts of the Gateways they were made with.
#[derive(Debug, Default)]
pub(crate) struct RouteMemos {
    pub http: HashMap<ObjectKey, Arc<RouteMemo>>,
    pub grpc: HashMap<ObjectKey, Arc<RouteMemo>>,
    pub contexts: BTreeMap<ObjectKey, Context>,
    /// How many of the routes were taken from the last translation's memos.
    pub reused: usize,
}

impl RouteMemos {
    /// The memos of routes of `kind` (as [`super::kind`] says).
    pub(crate) fn of(&mut self, kind: &str) -> &mut HashMap<ObjectKey, Arc<RouteMemo>> {
        match kind {
            super::GRPC_ROUTE => &mut self.grpc,
            _ => &mut self.http,
        }
    }
}

/// The last translation's route memos with what changed since: which of them still hold.
pub(crate) struct Reuse<'a> {
    previous: &'a RouteMemos,
    /// Service objects added, removed or changed (their endpoints do not matter here).
    services: HashSet<ObjectKey>,
    grants_changed: bool,
}

impl<'a> Reuse<'a> {
    /// None when no memo can hold: the BackendTLSPolicies changed.
    pub(crate) fn new(previous: &'a RouteMemos, old: &Objects, new: &Objects) -> Option<Self> {
        if !same(&old.backend_tls_policies, &new.backend_tls_policies) {
            return None;
        }
        let mut services = HashSet::new();
        for_each_change(&old.services, &new.services, |key, _| {
            services.insert(key.clone());
        });
        Some(Reuse {
            previous,
            services,
            grants_changed: !same(&old.reference_grants, &new.reference_grants),
        })
    }

    /// The memo of route `key` (of `kind`, as `object`, with `spec`), if it still holds
    /// with the Gateways prepared as `contexts` say.
    pub(crate) fn route(
        &self,
        (kind, key): (&'static str, &ObjectKey),
        (object, spec): (&Object, &HttpRoute),
        contexts: &BTreeMap<ObjectKey, Context>,
        gateways_same: bool,
    ) -> Option<&'a Arc<RouteMemo>> {
        let memos = match kind {
            super::GRPC_ROUTE => &self.previous.grpc,
            _ => &self.previous.http,
        };
        let memo = memos.get(key)?;
        let holds = memo.object.translates_as(object)
            && !(self.grants_changed && memo.cross_namespace)
            && !memo.services.iter().any(|s| self.services.contains(s))
            && (gateways_same || self.parents_same(key, spec, contexts));
        holds.then_some(memo)
    }

    /// Whether every Gateway the route's parentRefs name is prepared as before (or is not
    /// ours, now as before). A parentRef of another kind (a ListenerSet, whose listeners are
    /// merged into its Gateway's context) holds only while every Gateway is prepared as
    /// before, which the caller has found false.
    fn parents_same(
        &self,
        key: &ObjectKey,
        route: &HttpRoute,
        contexts: &BTreeMap<ObjectKey, Context>,
    ) -> bool {
        route.spec.parent_refs.iter().all(|p| {
            let gateway = ObjectKey::new(p.namespace_or(&key.namespace), &p.name);
            p.is_gateway() && contexts.get(&gateway) == self.previous.contexts.get(&gateway)
        })
    }

    /// Whether every Gateway is prepared as before: no route needs its parents checked.
    pub(crate) fn gateways_same(&self, contexts: &BTreeMap<ObjectKey, Context>) -> bool {
        *contexts == self.previous.contexts
    }
}
