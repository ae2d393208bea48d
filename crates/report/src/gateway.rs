//! The pure half of the Gateway API status writer: which GatewayClasses, Gateways and
//! HTTPRoutes need a status write, and the write.
//!
//! The status each object should have is the one the admin API shows
//! (`Snapshot::gateway_api`, computed by the translator as in file mode). Rules:
//! - only our objects are written: a GatewayClass whose `controllerName` is ours, a Gateway of
//!   such a class, and a route's `status.parents[]` entries whose `controllerName` is ours.
//!   Another controller's classes and Gateways are never written, and its parent entries of a
//!   route are written back as the source last saw them, under the route's resourceVersion as
//!   precondition (a write racing another controller's gets 409 and is planned again);
//! - nothing is written where the observed status already says the same; a condition whose
//!   status is unchanged keeps the transition time the object shows;
//! - after a write, the same object is not written again while the source still reports the
//!   resourceVersion it had before the write (the watch lags behind).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use portico_gateway::{GatewayStatus, ListenerSetStatus, RouteParentStatus, RouteStatus, Statuses};
use portico_translate::{ObjectKey, Objects};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Which Gateway API kind a [`GatewayStatusReport`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GatewayKind {
    GatewayClass,
    Gateway,
    HttpRoute,
    TcpRoute,
    UdpRoute,
    TlsRoute,
    GrpcRoute,
    ListenerSet,
}

impl GatewayKind {
    /// The kind's name and its resource's plural.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            GatewayKind::GatewayClass => ("GatewayClass", "gatewayclasses"),
            GatewayKind::Gateway => ("Gateway", "gateways"),
            GatewayKind::HttpRoute => ("HTTPRoute", "httproutes"),
            GatewayKind::TcpRoute => ("TCPRoute", "tcproutes"),
            GatewayKind::UdpRoute => ("UDPRoute", "udproutes"),
            GatewayKind::TlsRoute => ("TLSRoute", "tlsroutes"),
            GatewayKind::GrpcRoute => ("GRPCRoute", "grpcroutes"),
            GatewayKind::ListenerSet => ("ListenerSet", "listenersets"),
        }
    }
}

/// One object of ours whose status differs from what it should be.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayStatusReport {
    pub kind: GatewayKind,
    /// The namespace is empty for a GatewayClass.
    pub key: ObjectKey,
    /// The version the object was read in, and is written in.
    pub api_version: String,
    pub uid: Option<String>,
    /// The resourceVersion the source saw: the write's precondition.
    pub resource_version: Option<String>,
    /// The merge patch's `status`: the whole stanza, with `null` for a field to remove.
    pub status: Value,
}

/// The writes that make our Gateway API objects' status what `desired` says, `controller`
/// being ours (`--gateway-controller-name`). `objects` are the source's: what is observed.
pub fn gateway_reports(
    objects: &Objects,
    desired: &Statuses,
    controller: &str,
) -> Vec<GatewayStatusReport> {
    let ours = |class: &str| {
        let class = objects.gateway_classes.get(class);
        class.is_some_and(|c| c.spec.controller_name == controller)
    };
    let mut out = Vec::new();
    for class in &desired.classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        let Some(seen) = objects.gateway_classes.get(&name) else {
            continue;
        };
        if seen.spec.controller_name != controller {
            continue;
        }
        let mut want = class.status.clone().unwrap_or_default();
        let observed = seen.status.clone().unwrap_or_default();
        restamp(&mut want.conditions, &observed.conditions);
        if want != observed {
            let meta = &seen.metadata;
            out.push(entry(
                GatewayKind::GatewayClass,
                ObjectKey::new("", &name),
                &seen.api_version,
                meta,
                &want,
                &observed,
            ));
        }
    }
    for gateway in &desired.gateways {
        let key = ObjectKey::of(&gateway.metadata);
        let Some(seen) = objects.gateways.get(&key) else {
            continue;
        };
        if !ours(&seen.spec.gateway_class_name) {
            continue;
        }
        let mut want = gateway.status.clone().unwrap_or_default();
        let observed = seen.status.clone().unwrap_or_default();
        restamp_gateway(&mut want, &observed);
        if want != observed {
            out.push(entry(
                GatewayKind::Gateway,
                key,
                &seen.api_version,
                &seen.metadata,
                &want,
                &observed,
            ));
        }
    }
    route_entries(
        GatewayKind::HttpRoute,
        &desired.routes,
        &objects.http_routes,
        controller,
        &mut out,
        |r| (&r.metadata, &r.status, &r.api_version),
    );
    route_entries(
        GatewayKind::GrpcRoute,
        &desired.grpc_routes,
        &objects.grpc_routes,
        controller,
        &mut out,
        |r| (&r.metadata, &r.status, &r.api_version),
    );
    route_entries(
        GatewayKind::TcpRoute,
        &desired.tcp_routes,
        &objects.tcp_routes,
        controller,
        &mut out,
        |r| (&r.metadata, &r.status, &r.api_version),
    );
    route_entries(
        GatewayKind::UdpRoute,
        &desired.udp_routes,
        &objects.udp_routes,
        controller,
        &mut out,
        |r| (&r.metadata, &r.status, &r.api_version),
    );
    route_entries(
        GatewayKind::TlsRoute,
        &desired.tls_routes,
        &objects.tls_routes,
        controller,
        &mut out,
        |r| (&r.metadata, &r.status, &r.api_version),
    );
    listener_set_entries(objects, desired, &ours, &mut out);
    out
}

/// The writes of ListenerSets whose Gateway is ours (`ours`: of a class of ours): the whole
/// status, as for a Gateway.
fn listener_set_entries(
    objects: &Objects,
    desired: &Statuses,
    ours: &dyn Fn(&str) -> bool,
    out: &mut Vec<GatewayStatusReport>,
) {
    for set in &desired.listener_sets {
        let key = ObjectKey::of(&set.metadata);
        let Some(seen) = objects.listener_sets.get(&key) else {
            continue;
        };
        let parent = &seen.spec.parent_ref;
        let gateway = ObjectKey::new(parent.namespace_or(&key.namespace), &parent.name);
        let gateway = objects.gateways.get(&gateway);
        if !gateway.is_some_and(|g| ours(&g.spec.gateway_class_name)) {
            continue;
        }
        let mut want = set.status.clone().unwrap_or_default();
        let observed = seen.status.clone().unwrap_or_default();
        restamp_listener_set(&mut want, &observed);
        if want != observed {
            let kind = GatewayKind::ListenerSet;
            out.push(entry(
                kind,
                key,
                &seen.api_version,
                &seen.metadata,
                &want,
                &observed,
            ));
        }
    }
}

/// A route's metadata, status and the version it was read in.
type RouteParts<'a> = (&'a ObjectMeta, &'a Option<RouteStatus>, &'a String);

/// The writes of one route kind's parent entries of ours: each route of `desired` against the
/// same route as the source saw it (`seen`), by [`route_entry`].
fn route_entries<R>(
    kind: GatewayKind,
    desired: &[R],
    seen: &BTreeMap<ObjectKey, Arc<R>>,
    controller: &str,
    out: &mut Vec<GatewayStatusReport>,
    parts: impl for<'a> Fn(&'a R) -> RouteParts<'a>,
) {
    for route in desired {
        let (meta, status, _) = parts(route);
        let key = ObjectKey::of(meta);
        let Some(observed) = seen.get(&key) else {
            continue;
        };
        let (meta, observed_status, api_version) = parts(observed);
        let observed = (observed_status, api_version.as_str(), meta);
        out.extend(route_entry(
            (kind, key),
            status.as_ref(),
            observed,
            controller,
        ));
    }
}

/// The write of a route's parent entries of ours, when they differ from those `seen` shows
/// (its status, the version it was read in, its metadata); others' entries are kept.
fn route_entry(
    (kind, key): (GatewayKind, ObjectKey),
    desired: Option<&RouteStatus>,
    (status, api_version, meta): (&Option<RouteStatus>, &str, &ObjectMeta),
    controller: &str,
) -> Option<GatewayStatusReport> {
    // Borrowed, not copied: at 10,000 routes most already say what they should, every pass.
    let observed_parents = status.as_ref().map_or(&[][..], |s| &s.parents[..]);
    let mine = |p: &&RouteParentStatus| p.controller_name == controller;
    let desired_parents = desired.iter().flat_map(|s| s.parents.iter()).filter(mine);
    let had: Vec<&RouteParentStatus> = observed_parents.iter().filter(mine).collect();
    let conditions_before = |parent: &RouteParentStatus| {
        let before = had.iter().find(|p| p.parent_ref == parent.parent_ref);
        before.map_or(&[][..], |p| &p.conditions[..])
    };
    // The same as `had` once restamped: compared without a copy of each parent.
    let same = desired_parents.clone().count() == had.len()
        && desired_parents.clone().zip(&had).all(|(w, h)| {
            w.parent_ref == h.parent_ref
                && w.controller_name == h.controller_name
                && w.conditions.len() == h.conditions.len()
                && (w.conditions.iter().zip(&h.conditions))
                    .all(|(c, o)| same_restamped(c, conditions_before(w), o))
        });
    if same {
        return None;
    }
    let mut want: Vec<RouteParentStatus> = desired_parents.cloned().collect();
    for parent in &mut want {
        let before = conditions_before(parent);
        restamp(&mut parent.conditions, before);
    }
    let mut parents: Vec<RouteParentStatus> = (observed_parents.iter())
        .filter(|p| p.controller_name != controller)
        .cloned()
        .collect();
    parents.extend(want);
    let written = RouteStatus { parents };
    let observed = status.clone().unwrap_or_default();
    Some(entry(kind, key, api_version, meta, &written, &observed))
}

/// Each condition of `want` keeps the transition time of the observed condition of its type
/// when their status is the same.
fn restamp(want: &mut [Condition], observed: &[Condition]) {
    for c in want {
        let same = observed
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status);
        if let Some(o) = same {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Whether `want`, restamped from `before` as [`restamp`] does, equals `observed`.
fn same_restamped(want: &Condition, before: &[Condition], observed: &Condition) -> bool {
    let Condition {
        last_transition_time,
        message,
        observed_generation,
        reason,
        status,
        type_,
    } = want;
    let same_as = |o: &&Condition| o.type_ == *type_ && o.status == *status;
    let time = before
        .iter()
        .find(same_as)
        .map_or(last_transition_time, |o| &o.last_transition_time);
    *type_ == observed.type_
        && *status == observed.status
        && *reason == observed.reason
        && *message == observed.message
        && *observed_generation == observed.observed_generation
        && *time == observed.last_transition_time
}

fn restamp_gateway(want: &mut GatewayStatus, observed: &GatewayStatus) {
    restamp(&mut want.conditions, &observed.conditions);
    for l in &mut want.listeners {
        if let Some(o) = observed.listeners.iter().find(|o| o.name == l.name) {
            restamp(&mut l.conditions, &o.conditions);
        }
    }
}

fn restamp_listener_set(want: &mut ListenerSetStatus, observed: &ListenerSetStatus) {
    restamp(&mut want.conditions, &observed.conditions);
    for l in &mut want.listeners {
        if let Some(o) = observed.listeners.iter().find(|o| o.name == l.name) {
            restamp(&mut l.conditions, &o.conditions);
        }
    }
}

fn entry<S: Serialize>(
    kind: GatewayKind,
    key: ObjectKey,
    api_version: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    want: &S,
    observed: &S,
) -> GatewayStatusReport {
    GatewayStatusReport {
        kind,
        key,
        api_version: api_version.to_owned(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        status: merge_status(want, observed),
    }
}

/// `want` as a merge patch over `observed`: a field `observed` has and `want` leaves out
/// (an empty list, not serialized) becomes `null`, which removes it (RFC 7386).
fn merge_status<S: Serialize>(want: &S, observed: &S) -> Value {
    let mut want = serde_json::to_value(want).unwrap_or(Value::Null);
    let observed = serde_json::to_value(observed).unwrap_or(Value::Null);
    if let (Some(want), Some(observed)) = (want.as_object_mut(), observed.as_object()) {
        for field in observed.keys() {
            want.entry(field.clone()).or_insert(Value::Null);
        }
    }
    want
}

/// The JSON merge patch for the status subresource: the status, and the uid and
/// resourceVersion the write was planned for as preconditions. Serialized straight from the
/// report, once per write.
pub fn gateway_patch_body(report: &GatewayStatusReport) -> GatewayPatch<'_> {
    GatewayPatch {
        metadata: PatchMeta {
            uid: report.uid.as_deref(),
            resource_version: report.resource_version.as_deref(),
        },
        status: &report.status,
    }
}

/// A Gateway API object's status patch ([`gateway_patch_body`]).
#[derive(Debug, Serialize)]
pub struct GatewayPatch<'a> {
    metadata: PatchMeta<'a>,
    status: &'a Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PatchMeta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
}

/// What this process wrote, per object, while leader: the status and the resourceVersion the
/// source had reported.
#[derive(Debug, Default)]
pub struct GatewayLedger {
    written: HashMap<GatewayKind, HashMap<ObjectKey, (Option<String>, Value)>>,
}

impl GatewayLedger {
    /// The reports to write now (their indices in `reports`): those not written already while
    /// the source lags behind.
    pub fn plan(&mut self, reports: &[GatewayStatusReport]) -> Vec<usize> {
        if self.written.values().any(|w| !w.is_empty()) {
            let present: HashSet<(GatewayKind, &ObjectKey)> =
                reports.iter().map(|r| (r.kind, &r.key)).collect();
            for (kind, written) in &mut self.written {
                written.retain(|key, _| present.contains(&(*kind, key)));
            }
        }
        let lagging = |r: &GatewayStatusReport| {
            let written = self.written.get(&r.kind).and_then(|w| w.get(&r.key));
            written.is_some_and(|(seen, status)| *seen == r.resource_version && *status == r.status)
        };
        (reports.iter().enumerate())
            .filter(|(_, r)| !lagging(r))
            .map(|(i, _)| i)
            .collect()
    }

    /// Records a write the API server accepted.
    pub fn written(&mut self, report: &GatewayStatusReport) {
        let value = (report.resource_version.clone(), report.status.clone());
        let written = self.written.entry(report.kind).or_default();
        written.insert(report.key.clone(), value);
    }
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
