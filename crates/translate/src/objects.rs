use crate::compat::ListField;
use crate::members::SLICE_SERVICE_LABEL;
use crate::{KeptIngress, KeptService};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Secret, ServiceStatus};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{IngressClass, IngressStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use portico_gateway::{BackendTlsPolicy, ListenerSet, TcpRoute, TlsRoute, UdpRoute};
use portico_gateway::{Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// Namespace and name of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The key of the object with metadata `meta` (an unset namespace or name is empty).
    pub fn of(meta: &ObjectMeta) -> Self {
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        ObjectKey::new(namespace, meta.name.as_deref().unwrap_or_default())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The facts a source reports: every object of the kinds Portico reads, keyed by identity.
/// IngressClasses are cluster-scoped and keyed by name.
///
/// Objects are shared (`Arc`), and so is each kind's map: a source keeps them between changes
/// and hands out a new `Objects` per change without copying the objects, or the maps of the
/// kinds, that did not change (`Arc::make_mut` copies a map that a previous `Objects` still
/// shares). A map shared with the previous `Objects` is unchanged: later stages compare maps by
/// pointer first.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// Kept compact ([`KeptIngress`]).
    pub ingresses: Arc<BTreeMap<ObjectKey, Arc<KeptIngress>>>,
    pub ingress_classes: Arc<BTreeMap<String, Arc<IngressClass>>>,
    /// Kept compact ([`KeptService`]).
    pub services: Arc<BTreeMap<ObjectKey, Arc<KeptService>>>,
    /// Kept compact ([`CompactSlice`]): the one kind that is converted when read.
    pub endpoint_slices: Arc<BTreeMap<ObjectKey, Arc<CompactSlice>>>,
    pub endpoints: Arc<BTreeMap<ObjectKey, Arc<Endpoints>>>,
    pub secrets: Arc<BTreeMap<ObjectKey, Arc<Secret>>>,
    /// Gateway API kinds (cluster-scoped GatewayClasses keyed by name).
    pub gateway_classes: Arc<BTreeMap<String, Arc<GatewayClass>>>,
    pub gateways: Arc<BTreeMap<ObjectKey, Arc<Gateway>>>,
    pub http_routes: Arc<BTreeMap<ObjectKey, Arc<HttpRoute>>>,
    pub grpc_routes: Arc<BTreeMap<ObjectKey, Arc<GrpcRoute>>>,
    pub reference_grants: Arc<BTreeMap<ObjectKey, Arc<ReferenceGrant>>>,
    /// The latest status-only update of a kept Ingress ([`StatusSeen`]), where it came after
    /// the object.
    pub ingress_seen: Arc<BTreeMap<ObjectKey, Arc<StatusSeen<IngressStatus>>>>,
    /// The same for Services.
    pub service_seen: Arc<BTreeMap<ObjectKey, Arc<StatusSeen<ServiceStatus>>>>,
    /// TCPRoutes and UDPRoutes (Gateway API kinds served by provider `l4`).
    pub tcp_routes: Arc<BTreeMap<ObjectKey, Arc<TcpRoute>>>,
    pub udp_routes: Arc<BTreeMap<ObjectKey, Arc<UdpRoute>>>,
    /// TLSRoutes (SNI passthrough on a Gateway's TLS listeners).
    pub tls_routes: Arc<BTreeMap<ObjectKey, Arc<TlsRoute>>>,
    /// ListenerSets (more listeners for a Gateway that allows them).
    pub listener_sets: Arc<BTreeMap<ObjectKey, Arc<ListenerSet>>>,
    /// BackendTLSPolicies (TLS towards the Services they target).
    pub backend_tls_policies: Arc<BTreeMap<ObjectKey, Arc<BackendTlsPolicy>>>,
    /// The ConfigMaps BackendTLSPolicies name for their CA certificates (only those: a source
    /// reads no other ConfigMap).
    pub config_maps: Arc<BTreeMap<ObjectKey, Arc<ConfigMap>>>,
    /// Namespaces (cluster-scoped, keyed by name), for their labels: listeners'
    /// `allowedRoutes.namespaces` selectors match them.
    pub namespaces: Arc<BTreeMap<String, Arc<Namespace>>>,
}

/// What an update of a kept object changed when it changed nothing that is served: its
/// resourceVersion and its status.
///
/// Such an update (at scale, mostly Portico's own status writes coming back through the watch)
/// leaves the kept object as it was, shared with the snapshot already published, and is noted
/// here for the status report, the one reader of these two fields. Replacing the object
/// instead held every Ingress twice, the published one and the new one, until the next
/// change: 14 MB at 10,000 Ingresses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusSeen<S> {
    pub resource_version: Option<String>,
    pub status: Option<S>,
}

impl Objects {
    /// The resourceVersion and status of the kept Ingress `key` as last seen: those of its
    /// latest status-only update, else the object's own.
    pub fn ingress_status<'a>(
        &'a self,
        key: &ObjectKey,
        ingress: &'a KeptIngress,
    ) -> (Option<&'a String>, Option<&'a IngressStatus>) {
        let own = (&ingress.metadata.resource_version, &ingress.status);
        last_seen(self.ingress_seen.get(key), own)
    }

    /// The same for the kept Service `key`.
    pub fn service_status<'a>(
        &'a self,
        key: &ObjectKey,
        service: &'a KeptService,
    ) -> (Option<&'a String>, Option<&'a ServiceStatus>) {
        let own = (&service.metadata.resource_version, &service.status);
        last_seen(self.service_seen.get(key), own)
    }
}

fn last_seen<'a, S>(
    noted: Option<&'a Arc<StatusSeen<S>>>,
    (version, status): (&'a Option<String>, &'a Option<S>),
) -> (Option<&'a String>, Option<&'a S>) {
    match noted {
        Some(seen) => (seen.resource_version.as_ref(), seen.status.as_ref()),
        None => (version.as_ref(), status.as_ref()),
    }
}

/// An EndpointSlice as Portico keeps it: only what translation and the status report read.
///
/// k8s-openapi's `Endpoint` takes about 350 bytes whatever it holds (a dozen optional fields,
/// a topology map, a whole object reference); at 50,000 endpoints the decoded slices were the
/// largest item of the heap. Sources decode the full object, so that a malformed field is
/// reported as before, then keep this.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactSlice {
    pub namespace: String,
    pub name: String,
    /// `metadata.uid`: Events about the slice name it.
    pub uid: Option<String>,
    /// The `kubernetes.io/service-name` label: the Service whose endpoints these are.
    pub service: Option<String>,
    /// Whether `addressType` is `IPv4` or `IPv6`. Slices of other types (`FQDN`) give no
    /// members, and their endpoints are not kept.
    pub ip: bool,
    pub ports: Vec<SlicePort>,
    pub endpoints: Vec<SliceEndpoint>,
}

/// A port of a [`CompactSlice`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlicePort {
    /// Empty for an unnamed port, as the API defaults it.
    pub name: String,
    pub port: Option<i32>,
}

/// An endpoint of a [`CompactSlice`]: its addresses that parse as IP addresses (no other
/// address can be a member) and whether it is ready (`conditions.ready`, true when unset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceEndpoint {
    pub addresses: Box<[IpAddr]>,
    pub ready: bool,
}

impl From<EndpointSlice> for CompactSlice {
    /// Takes the strings it keeps out of `slice` rather than copying them.
    fn from(slice: EndpointSlice) -> Self {
        let meta = slice.metadata;
        let ip = matches!(slice.address_type.as_str(), "IPv4" | "IPv6");
        let endpoints = if ip {
            let endpoints = slice.endpoints.items().iter();
            endpoints
                .map(|endpoint| SliceEndpoint {
                    addresses: (endpoint.addresses.iter())
                        .filter_map(|a| a.parse().ok())
                        .collect(),
                    ready: (endpoint.conditions.as_ref())
                        .and_then(|c| c.ready)
                        .unwrap_or(true),
                })
                .collect()
        } else {
            Vec::new()
        };
        CompactSlice {
            namespace: meta.namespace.unwrap_or_default(),
            name: meta.name.unwrap_or_default(),
            uid: meta.uid,
            service: meta.labels.and_then(|mut l| l.remove(SLICE_SERVICE_LABEL)),
            ip,
            ports: (slice.ports.into_iter().flatten())
                .map(|p| SlicePort {
                    name: p.name.unwrap_or_default(),
                    port: p.port,
                })
                .collect(),
            endpoints,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(address_type: &str) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"namespace": "shop", "name": "web-1", "uid": "u-1",
                         "labels": {"kubernetes.io/service-name": "web", "other": "x"}},
            "addressType": address_type,
            "ports": [{"port": 8080}, {"name": "admin", "port": 9090}],
            "endpoints": [
                {"addresses": ["10.0.0.1", "not an address"], "nodeName": "n1",
                 "targetRef": {"kind": "Pod", "name": "web-a"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            ],
        }))
        .unwrap()
    }

    #[test]
    fn a_compact_slice_keeps_what_members_and_events_read() {
        let compact = CompactSlice::from(slice("IPv4"));
        let ip = |a: &str| a.parse::<IpAddr>().unwrap();
        let expected = CompactSlice {
            namespace: "shop".into(),
            name: "web-1".into(),
            uid: Some("u-1".into()),
            service: Some("web".into()),
            ip: true,
            ports: vec![
                SlicePort {
                    name: String::new(),
                    port: Some(8080),
                },
                SlicePort {
                    name: "admin".into(),
                    port: Some(9090),
                },
            ],
            endpoints: vec![
                SliceEndpoint {
                    addresses: Box::new([ip("10.0.0.1")]),
                    ready: true,
                },
                SliceEndpoint {
                    addresses: Box::new([ip("10.0.0.2")]),
                    ready: false,
                },
            ],
        };
        assert_eq!(compact, expected);
    }

    #[test]
    fn a_compact_slice_of_host_names_keeps_no_endpoints() {
        let compact = CompactSlice::from(slice("FQDN"));
        assert!(!compact.ip);
        assert!(compact.endpoints.is_empty());
        assert_eq!(compact.service.as_deref(), Some("web"));
    }
}
