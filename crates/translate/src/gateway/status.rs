//! Conditions as the translation decides them ([`Condition`]: type, status, reason, message)
//! and the status stanzas they become, stamped with the observed generation and a transition
//! time: a condition whose status did not change keeps the time the object already shows; a
//! changed one gets `now`, which the caller passes in (this module reads no clock).
//!
//! Reasons are the Gateway API's (v1), as its conformance suite checks them.

use super::{GatewayVerdict, ListenerSetVerdict, ListenerVerdict, Verdicts};
use crate::{ObjectKey, Objects};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as ApiCondition, Time};
use portico_gateway::{
    BackendTlsPolicy, ListenerSet, ListenerSetStatus, ParentReference, PolicyAncestorStatus,
    PolicyStatus, TcpRoute, TlsRoute, UdpRoute,
};
use portico_gateway::{
    Gateway, GatewayClass, GatewayClassStatus, GatewayStatus, GatewayStatusAddress, GrpcRoute,
    HttpRoute, ListenerStatus, RouteGroupKind, RouteParentStatus, RouteStatus, Statuses,
};
use std::collections::BTreeMap;

/// One condition as decided, before it is stamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &'static str, status: bool, reason: &'static str, message: &str) -> Self {
        Condition {
            type_,
            status,
            reason,
            message: message.to_owned(),
        }
    }

    /// `type_` true with the reason of the same name (`Accepted`/`Accepted`, …).
    pub fn holds(type_: &'static str) -> Self {
        Condition::new(type_, true, type_, "")
    }
}

pub(crate) fn class_accepted() -> Condition {
    Condition::new("Accepted", true, "Accepted", "served by Portico")
}

/// A refusal: the reason (one of the Gateway API's) and a message.
pub(crate) type Refusal = (&'static str, String);

/// A condition that holds (its reason named after it) or is refused.
pub(crate) fn verdict(type_: &'static str, result: &Result<(), Refusal>) -> Condition {
    match result {
        Ok(()) => Condition::holds(type_),
        Err((reason, message)) => Condition::new(type_, false, reason, message),
    }
}

/// Where a Gateway is reachable and whether an agent serves its load balancer: what its
/// status shows besides the translation's verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    pub addresses: Vec<String>,
    pub served: bool,
}

/// Every GatewayClass, Gateway and HTTPRoute with the status Portico would write: ours get
/// their verdicts, stamped; another controller's keep the status they have (a route keeps the
/// parent entries of other controllers and gets ours beside them). `reach` gives each of our
/// Gateways its addresses and whether it is served, `controller` is ours
/// (`--gateway-controller-name`).
pub fn statuses(
    objects: &Objects,
    verdicts: &Verdicts,
    reach: &BTreeMap<ObjectKey, Reach>,
    controller: &str,
    now: &Time,
) -> Statuses {
    let classes = objects.gateway_classes.iter().map(|(name, class)| {
        let mut class = GatewayClass::clone(class);
        if let Some(conditions) = verdicts.classes.get(name) {
            let status = class.status.get_or_insert_with(GatewayClassStatus::default);
            let generation = class.metadata.generation;
            status.conditions = stamp(conditions, &status.conditions, generation, now);
        }
        class
    });
    let gateways = objects.gateways.iter().map(|(key, gateway)| {
        let mut gateway = Gateway::clone(gateway);
        if let Some(verdict) = verdicts.gateways.get(key) {
            let reach = reach.get(key).cloned().unwrap_or_default();
            gateway.status = Some(gateway_status(&gateway, verdict, &reach, now));
        }
        gateway
    });
    let routes = objects.http_routes.iter().map(|(key, route)| {
        let mut route = HttpRoute::clone(route);
        let at = route.metadata.generation;
        let parents = verdicts
            .routes
            .get(key)
            .map(|p| (&route.spec.parent_refs[..], &p[..]));
        route.status = stamped(route.status.take(), at, parents, controller, now);
        route
    });
    let grpc_routes = objects.grpc_routes.iter().map(|(key, route)| {
        let mut route = GrpcRoute::clone(route);
        let at = route.metadata.generation;
        let parents =
            (verdicts.grpc_routes.get(key)).map(|p| (&route.spec.parent_refs[..], &p[..]));
        route.status = stamped(route.status.take(), at, parents, controller, now);
        route
    });
    let tcp_routes = objects.tcp_routes.iter().map(|(key, route)| {
        let mut route = TcpRoute::clone(route);
        let parents = (verdicts.tcp_routes.get(key)).map(|p| (&route.spec.parent_refs[..], &p[..]));
        let at = route.metadata.generation;
        route.status = stamped(route.status.take(), at, parents, controller, now);
        route
    });
    let udp_routes = objects.udp_routes.iter().map(|(key, route)| {
        let mut route = UdpRoute::clone(route);
        let parents = (verdicts.udp_routes.get(key)).map(|p| (&route.spec.parent_refs[..], &p[..]));
        let at = route.metadata.generation;
        route.status = stamped(route.status.take(), at, parents, controller, now);
        route
    });
    let tls_routes = objects.tls_routes.iter().map(|(key, route)| {
        let mut route = TlsRoute::clone(route);
        let parents = (verdicts.tls_routes.get(key)).map(|p| (&route.spec.parent_refs[..], &p[..]));
        let at = route.metadata.generation;
        route.status = stamped(route.status.take(), at, parents, controller, now);
        route
    });
    let listener_sets = objects.listener_sets.iter().map(|(key, set)| {
        let mut set = ListenerSet::clone(set);
        if let Some(verdict) = verdicts.listener_sets.get(key) {
            let served = reach.get(&verdict.gateway).is_some_and(|r| r.served);
            set.status = Some(listener_set_status(&set, verdict, served, now));
        }
        set
    });
    Statuses {
        listener_sets: listener_sets.collect(),
        classes: classes.collect(),
        gateways: gateways.collect(),
        routes: routes.collect(),
        grpc_routes: grpc_routes.collect(),
        tcp_routes: tcp_routes.collect(),
        udp_routes: udp_routes.collect(),
        tls_routes: tls_routes.collect(),
        backend_tls_policies: (objects.backend_tls_policies.iter())
            .map(|(key, policy)| {
                let entries = verdicts.backend_tls_policies.get(key);
                policy_status(
                    policy,
                    entries.map_or(&[][..], Vec::as_slice),
                    controller,
                    now,
                )
            })
            .collect(),
    }
}

/// A BackendTLSPolicy with our ancestor entries (one per Gateway of ours it reaches, from
/// `entries`) beside the other controllers' (kept as they are).
fn policy_status(
    policy: &BackendTlsPolicy,
    entries: &[(ObjectKey, Vec<Condition>)],
    controller: &str,
    now: &Time,
) -> BackendTlsPolicy {
    let mut policy = policy.clone();
    let generation = policy.metadata.generation;
    let old = policy.status.take().unwrap_or_default();
    let mut ancestors: Vec<PolicyAncestorStatus> = (old.ancestors.iter())
        .filter(|a| a.controller_name != controller)
        .cloned()
        .collect();
    for (gateway, conditions) in entries {
        let ancestor_ref = ParentReference {
            group: Some(portico_gateway::GROUP.to_owned()),
            kind: Some("Gateway".to_owned()),
            namespace: Some(gateway.namespace.clone()),
            name: gateway.name.clone(),
            ..ParentReference::default()
        };
        let previous = (old.ancestors.iter())
            .find(|a| a.controller_name == controller && a.ancestor_ref == ancestor_ref);
        let previous = previous.map_or(&[][..], |a| &a.conditions[..]);
        ancestors.push(PolicyAncestorStatus {
            ancestor_ref,
            controller_name: controller.to_owned(),
            conditions: stamp(conditions, previous, generation, now),
        });
    }
    if !ancestors.is_empty() || !old.ancestors.is_empty() {
        policy.status = Some(PolicyStatus { ancestors });
    }
    policy
}

fn gateway_status(
    gateway: &Gateway,
    verdict: &GatewayVerdict,
    reach: &Reach,
    now: &Time,
) -> GatewayStatus {
    let old = gateway.status.clone().unwrap_or_default();
    let generation = gateway.metadata.generation;
    let conditions = served(&verdict.conditions, reach.served);
    let at = (generation, now);
    let listeners = listener_statuses(&verdict.listeners, &old.listeners, reach.served, at);
    let addresses = reach.addresses.iter().map(|a| GatewayStatusAddress {
        type_: Some(address_type(a).to_owned()),
        value: a.clone(),
    });
    GatewayStatus {
        addresses: addresses.collect(),
        conditions: stamp(&conditions, &old.conditions, generation, now),
        listeners,
        attached_listener_sets: verdict.attached_listener_sets,
    }
}

/// A ListenerSet's status: as a Gateway's, without addresses; `served`: an agent serves its
/// Gateway's load balancer.
fn listener_set_status(
    set: &ListenerSet,
    verdict: &ListenerSetVerdict,
    served_by: bool,
    now: &Time,
) -> ListenerSetStatus {
    let old = set.status.clone().unwrap_or_default();
    let generation = set.metadata.generation;
    let conditions = served(&verdict.conditions, served_by);
    let at = (generation, now);
    ListenerSetStatus {
        conditions: stamp(&conditions, &old.conditions, generation, now),
        listeners: listener_statuses(&verdict.listeners, &old.listeners, served_by, at),
    }
}

/// The listeners' statuses from their verdicts, each condition stamped against the same
/// listener's `old` one.
fn listener_statuses(
    verdicts: &[ListenerVerdict],
    old: &[ListenerStatus],
    served_by: bool,
    (generation, now): (Option<i64>, &Time),
) -> Vec<ListenerStatus> {
    let status = |l: &ListenerVerdict| {
        let previous = old.iter().find(|p| p.name == l.name);
        let previous = previous.map_or(&[][..], |p| &p.conditions[..]);
        let kinds = l
            .supported_kinds
            .iter()
            .map(|(group, kind)| RouteGroupKind {
                group: Some(group.clone()),
                kind: kind.clone(),
            });
        ListenerStatus {
            name: l.name.clone(),
            supported_kinds: kinds.collect(),
            attached_routes: l.attached_routes,
            conditions: stamp(&served(&l.conditions, served_by), previous, generation, now),
        }
    };
    verdicts.iter().map(status).collect()
}

/// `Programmed` stays true only while an agent serves the load balancer; until then it is
/// false with reason `Pending`.
fn served(conditions: &[Condition], served: bool) -> Vec<Condition> {
    let mut out = conditions.to_vec();
    for c in out
        .iter_mut()
        .filter(|c| c.type_ == "Programmed" && c.status)
    {
        if !served {
            *c = Condition::new("Programmed", false, "Pending", "no agent serves it yet");
        }
    }
    out
}

fn address_type(address: &str) -> &'static str {
    if address.parse::<std::net::IpAddr>().is_ok() {
        "IPAddress"
    } else {
        "Hostname"
    }
}

/// A route's status from its old one and generation (`at`), its parentRefs and our verdicts.
/// A route's status with our parent entries: from its verdicts (`parents`: its parentRefs and
/// what became of each of ours), or none when it is no longer attached to a Gateway of ours
/// (our entries go, the others' stay).
fn stamped(
    status: Option<RouteStatus>,
    generation: Option<i64>,
    parents: Option<(&[portico_gateway::ParentReference], &[super::ParentVerdict])>,
    controller: &str,
    now: &Time,
) -> Option<RouteStatus> {
    match parents {
        Some((refs, verdicts)) => Some(route_status(
            (status.as_ref(), generation),
            refs,
            verdicts,
            controller,
            now,
        )),
        None => status.map(|mut status| {
            status.parents.retain(|p| p.controller_name != controller);
            status
        }),
    }
}

fn route_status(
    (old, generation): (Option<&RouteStatus>, Option<i64>),
    parent_refs: &[portico_gateway::ParentReference],
    parents: &[super::ParentVerdict],
    controller: &str,
    now: &Time,
) -> RouteStatus {
    let old = old.cloned().unwrap_or_default();
    let mut entries: Vec<RouteParentStatus> = (old.parents.iter())
        .filter(|p| p.controller_name != controller)
        .cloned()
        .collect();
    for parent in parents {
        let Some(parent_ref) = parent_refs.get(parent.index) else {
            continue;
        };
        let previous = (old.parents.iter())
            .find(|p| p.controller_name == controller && p.parent_ref == *parent_ref);
        let previous = previous.map_or(&[][..], |p| &p.conditions[..]);
        entries.push(RouteParentStatus {
            parent_ref: parent_ref.clone(),
            controller_name: controller.to_owned(),
            conditions: stamp(&parent.conditions, previous, generation, now),
        });
    }
    RouteStatus { parents: entries }
}

/// The API's conditions of `conditions`: each keeps the transition time of the previous
/// condition of its type when its status is unchanged, else gets `now`.
pub fn stamp(
    conditions: &[Condition],
    previous: &[ApiCondition],
    generation: Option<i64>,
    now: &Time,
) -> Vec<ApiCondition> {
    conditions
        .iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let kept = (previous.iter())
                .find(|p| p.type_ == c.type_ && p.status == status)
                .map(|p| p.last_transition_time.clone());
            ApiCondition {
                type_: c.type_.to_owned(),
                status: status.to_owned(),
                reason: c.reason.to_owned(),
                message: c.message.clone(),
                observed_generation: generation,
                last_transition_time: kept.unwrap_or_else(|| now.clone()),
            }
        })
        .collect()
}
