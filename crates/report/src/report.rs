//! The pure half: what should be reported, computed from the objects a source reported and the
//! snapshot the app built from them. No I/O; the writer compares it with what it already wrote.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::networking::v1::IngressStatus;
use portico_model::{Diagnostic, ObjectRef};
use portico_status::{LoadBalancerAddress, Snapshot};
use portico_translate::{ObjectKey, Objects};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Everything the leader should make true in the API: the status of every Ingress the source
/// reported and of every Service Portico serves as a load balancer, and one Event per
/// diagnostic about a Kubernetes object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// One entry per Ingress in the source's objects, ordered by key.
    pub ingresses: Vec<StatusReport>,
    /// One entry per Service of type LoadBalancer that is Portico's (provider `l4`), ordered
    /// by key.
    pub services: Vec<StatusReport>,
    /// Diagnostics about Kubernetes objects (not files), sorted and without duplicates.
    pub diagnostics: Vec<DiagnosticReport>,
    /// The addresses this controller publishes; a status equal to them is known to be ours.
    pub publish: Vec<LoadBalancerAddress>,
    /// Our GatewayClasses, Gateways and HTTPRoutes whose status differs from what it should be.
    pub gateway_api: Vec<crate::GatewayStatusReport>,
}

/// Which kind of object a [`StatusReport`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusKind {
    Ingress,
    Service,
}

/// One Ingress or Service: the status it should have and the status it had when the source
/// last saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReport {
    pub kind: StatusKind,
    pub key: ObjectKey,
    pub uid: Option<String>,
    /// The resourceVersion the source saw; it tells a watch that lags behind a write we made
    /// from a status someone wrote since.
    pub resource_version: Option<String>,
    /// Whether this controller owns the object (its class is ours).
    pub owned: bool,
    /// The addresses if the object is owned and served, else empty: the publish addresses
    /// (and the load balancer's VIP and floating IP) for an Ingress, the VIP and floating IP
    /// for a Service. Shared by the entries with the same (at scale, nearly all).
    pub desired: Arc<[LoadBalancerAddress]>,
    /// `status.loadBalancer.ingress` as observed (ports are not compared, so not kept); the
    /// entry's `desired` list itself when equal to it.
    pub observed: Arc<[LoadBalancerAddress]>,
}

/// One diagnostic and the object it becomes an Event about.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosticReport {
    pub diagnostic: Diagnostic,
    /// apiVersion, kind, namespace (none for cluster-scoped kinds), name, and the uid when the
    /// object is among the source's objects.
    pub regarding: ObjectReference,
}

/// Computes the report. Ingresses only the snapshot knows (the source could not decode them)
/// have no observable status and are left out; diagnostics about non-Kubernetes objects
/// (manifest files) have nothing to attach an Event to and are left out too. `gateway_controller`
/// is ours (`--gateway-controller-name`): only its Gateway API objects are reported.
pub fn report(
    objects: &Objects,
    snapshot: &Snapshot,
    publish: &[LoadBalancerAddress],
    gateway_controller: &str,
) -> Report {
    let mut lists = Lists::default();
    let views: BTreeMap<(&str, &str), _> = snapshot
        .ingresses
        .iter()
        .map(|v| ((v.namespace.as_str(), v.name.as_str()), v))
        .collect();
    let ingresses = objects
        .ingresses
        .iter()
        .map(|(key, ingress)| {
            let view = views.get(&(key.namespace.as_str(), key.name.as_str()));
            let owned = view.is_some_and(|v| v.owned);
            let desired = match view {
                Some(v) if v.owned => lists.shared(&v.status.load_balancer.ingress),
                _ => lists.shared(&[]),
            };
            let (resource_version, status) = objects.ingress_status(key, ingress);
            let observed = lists.observed(&desired, observed(status));
            StatusReport {
                kind: StatusKind::Ingress,
                key: key.clone(),
                uid: ingress.metadata.uid.clone(),
                resource_version: resource_version.cloned(),
                owned,
                desired,
                observed,
            }
        })
        .collect();
    let served: BTreeMap<(&str, &str), _> = (snapshot.services.iter())
        .map(|v| ((v.namespace.as_str(), v.name.as_str()), v))
        .collect();
    let services = (objects.services.iter())
        .filter_map(|(key, service)| {
            let view = served.get(&(key.namespace.as_str(), key.name.as_str()))?;
            let (resource_version, status) = objects.service_status(key, service);
            let observed =
                (status.and_then(|s| s.load_balancer.as_ref())).and_then(|lb| lb.ingress.as_ref());
            let observed = addresses(observed.into_iter().flatten().map(|e| (&e.ip, &e.hostname)));
            let desired = lists.shared(&view.status.load_balancer.ingress);
            let observed = lists.observed(&desired, observed);
            Some(StatusReport {
                kind: StatusKind::Service,
                key: key.clone(),
                uid: service.metadata.uid.clone(),
                resource_version: resource_version.cloned(),
                owned: true,
                desired,
                observed,
            })
        })
        .collect();
    let all: BTreeSet<&Diagnostic> = snapshot
        .ingresses
        .iter()
        .flat_map(|v| &v.diagnostics)
        .chain(&snapshot.diagnostics)
        .collect();
    let diagnostics = all
        .into_iter()
        .filter_map(|d| {
            let regarding = reference(objects, &d.object)?;
            Some(DiagnosticReport {
                diagnostic: d.clone(),
                regarding,
            })
        })
        .collect();
    Report {
        ingresses,
        services,
        diagnostics,
        publish: publish.to_vec(),
        gateway_api: crate::gateway_reports(objects, &snapshot.gateway_api, gateway_controller),
    }
}

/// The lists of addresses of one report: an entry with the same list as the one before it
/// shares it. At 10,000 Ingresses, nearly every entry has the publish addresses, desired and
/// then observed; a list each was a megabyte or two per report.
#[derive(Default)]
struct Lists {
    last: Option<Arc<[LoadBalancerAddress]>>,
}

impl Lists {
    /// `addresses`, shared with the previous entry's when equal.
    fn shared(&mut self, addresses: &[LoadBalancerAddress]) -> Arc<[LoadBalancerAddress]> {
        match &self.last {
            Some(last) if **last == *addresses => last.clone(),
            _ => self.last.insert(Arc::from(addresses)).clone(),
        }
    }

    /// The observed list: `desired` itself when equal to it.
    fn observed(
        &mut self,
        desired: &Arc<[LoadBalancerAddress]>,
        observed: Vec<LoadBalancerAddress>,
    ) -> Arc<[LoadBalancerAddress]> {
        if **desired == *observed {
            desired.clone()
        } else {
            self.shared(&observed)
        }
    }
}

/// The addresses in an Ingress's `status.loadBalancer.ingress`, in order.
pub fn observed(status: Option<&IngressStatus>) -> Vec<LoadBalancerAddress> {
    let entries =
        (status.and_then(|s| s.load_balancer.as_ref())).and_then(|lb| lb.ingress.as_ref());
    addresses(entries.into_iter().flatten().map(|e| (&e.ip, &e.hostname)))
}

/// `(ip, hostname)` entries of a `status.loadBalancer.ingress` list, in order.
fn addresses<'a>(
    entries: impl Iterator<Item = (&'a Option<String>, &'a Option<String>)>,
) -> Vec<LoadBalancerAddress> {
    entries
        .map(|(ip, hostname)| LoadBalancerAddress {
            ip: ip.clone(),
            hostname: hostname.clone(),
        })
        .collect()
}

/// The Kubernetes reference of a diagnosed object, or `None` for kinds that are not
/// Kubernetes objects Portico reads.
pub fn reference(objects: &Objects, object: &ObjectRef) -> Option<ObjectReference> {
    let (api_version, namespaced) = api_version(&object.kind)?;
    let namespace = namespaced.then(|| object.namespace.clone());
    Some(ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(object.kind.clone()),
        namespace,
        name: Some(object.name.clone()),
        uid: uid(objects, object),
        ..ObjectReference::default()
    })
}

/// apiVersion and whether the kind is namespaced.
fn api_version(kind: &str) -> Option<(&'static str, bool)> {
    match kind {
        "Ingress" => Some(("networking.k8s.io/v1", true)),
        "IngressClass" => Some(("networking.k8s.io/v1", false)),
        "Service" | "Secret" | "Endpoints" => Some(("v1", true)),
        "EndpointSlice" => Some(("discovery.k8s.io/v1", true)),
        _ => None,
    }
}

fn uid(objects: &Objects, object: &ObjectRef) -> Option<String> {
    let key = ObjectKey::new(&object.namespace, &object.name);
    let meta = match object.kind.as_str() {
        "Ingress" => return objects.ingresses.get(&key)?.metadata.uid.clone(),
        "IngressClass" => &objects.ingress_classes.get(&object.name)?.metadata,
        "Service" => return objects.services.get(&key)?.metadata.uid.clone(),
        // Only the metadata of a Secret is read here, never its data.
        "Secret" => &objects.secrets.get(&key)?.metadata,
        "Endpoints" => &objects.endpoints.get(&key)?.metadata,
        "EndpointSlice" => return objects.endpoint_slices.get(&key)?.uid.clone(),
        _ => return None,
    };
    meta.uid.clone()
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
