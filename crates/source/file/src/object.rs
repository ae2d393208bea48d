use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use portico_gateway::{BackendTlsPolicy, ListenerSet, TcpRoute, TlsRoute, UdpRoute};
use portico_gateway::{Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant};
use portico_model::ObjectRef;
use portico_translate::{CompactSlice, KeptIngress, KeptService, ObjectKey};
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;

/// One object of a kind Portico reads, as found in a manifest. Shared: the file's cache and
/// every `Objects` assembled from it hold the same allocation.
#[derive(Clone, PartialEq)]
pub enum Object {
    /// Kept compact ([`KeptIngress`]), which has no name: the key is beside it.
    Ingress(Box<ObjectKey>, Arc<KeptIngress>),
    IngressClass(Arc<IngressClass>),
    /// Kept compact ([`KeptService`]), the key beside it.
    Service(Box<ObjectKey>, Arc<KeptService>),
    /// Kept compact: see [`CompactSlice`].
    EndpointSlice(Arc<CompactSlice>),
    Endpoints(Arc<Endpoints>),
    Secret(Arc<Secret>),
    GatewayClass(Arc<GatewayClass>),
    Gateway(Arc<Gateway>),
    HttpRoute(Arc<HttpRoute>),
    GrpcRoute(Arc<GrpcRoute>),
    ReferenceGrant(Arc<ReferenceGrant>),
    TcpRoute(Arc<TcpRoute>),
    UdpRoute(Arc<UdpRoute>),
    TlsRoute(Arc<TlsRoute>),
    ListenerSet(Arc<ListenerSet>),
    BackendTlsPolicy(Arc<BackendTlsPolicy>),
    /// Read for the CA certificates BackendTLSPolicies name; never printed.
    ConfigMap(Arc<ConfigMap>),
    /// Read for its labels, which listeners' `allowedRoutes` selectors match.
    Namespace(Arc<Namespace>),
}

impl Object {
    /// The Kubernetes kind, e.g. `Ingress`.
    pub fn kind(&self) -> &'static str {
        self.known_kind().name()
    }

    /// Kind, namespace (empty for IngressClass) and name.
    pub fn object_ref(&self) -> ObjectRef {
        let (namespace, name) = self.names();
        ObjectRef::new(self.kind(), namespace, name)
    }

    /// Namespace (empty when unset) and name.
    pub fn names(&self) -> (&str, &str) {
        fn meta(meta: &ObjectMeta) -> (&str, &str) {
            let namespace = meta.namespace.as_deref().unwrap_or_default();
            (namespace, meta.name.as_deref().unwrap_or_default())
        }
        match self {
            Object::Ingress(key, _) => (&key.namespace, &key.name),
            Object::IngressClass(o) => meta(&o.metadata),
            Object::Service(key, _) => (&key.namespace, &key.name),
            Object::EndpointSlice(o) => (&o.namespace, &o.name),
            Object::Endpoints(o) => meta(&o.metadata),
            Object::Secret(o) => meta(&o.metadata),
            Object::GatewayClass(o) => meta(&o.metadata),
            Object::Gateway(o) => meta(&o.metadata),
            Object::HttpRoute(o) => meta(&o.metadata),
            Object::GrpcRoute(o) => meta(&o.metadata),
            Object::ReferenceGrant(o) => meta(&o.metadata),
            Object::TcpRoute(o) => meta(&o.metadata),
            Object::UdpRoute(o) => meta(&o.metadata),
            Object::TlsRoute(o) => meta(&o.metadata),
            Object::ListenerSet(o) => meta(&o.metadata),
            Object::BackendTlsPolicy(o) => meta(&o.metadata),
            Object::ConfigMap(o) => meta(&o.metadata),
            Object::Namespace(o) => meta(&o.metadata),
        }
    }

    /// The same object: the same allocation, or an equal value of the same kind.
    pub(crate) fn same(&self, other: &Object) -> bool {
        fn same<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
            Arc::ptr_eq(a, b) || a == b
        }
        match (self, other) {
            (Object::Ingress(a_key, a), Object::Ingress(b_key, b)) => a_key == b_key && same(a, b),
            (Object::IngressClass(a), Object::IngressClass(b)) => same(a, b),
            (Object::Service(a_key, a), Object::Service(b_key, b)) => a_key == b_key && same(a, b),
            (Object::EndpointSlice(a), Object::EndpointSlice(b)) => same(a, b),
            (Object::Endpoints(a), Object::Endpoints(b)) => same(a, b),
            (Object::Secret(a), Object::Secret(b)) => same(a, b),
            (Object::GatewayClass(a), Object::GatewayClass(b)) => same(a, b),
            (Object::Gateway(a), Object::Gateway(b)) => same(a, b),
            (Object::HttpRoute(a), Object::HttpRoute(b)) => same(a, b),
            (Object::GrpcRoute(a), Object::GrpcRoute(b)) => same(a, b),
            (Object::ReferenceGrant(a), Object::ReferenceGrant(b)) => same(a, b),
            (Object::TcpRoute(a), Object::TcpRoute(b)) => same(a, b),
            (Object::UdpRoute(a), Object::UdpRoute(b)) => same(a, b),
            (Object::TlsRoute(a), Object::TlsRoute(b)) => same(a, b),
            (Object::ListenerSet(a), Object::ListenerSet(b)) => same(a, b),
            (Object::BackendTlsPolicy(a), Object::BackendTlsPolicy(b)) => same(a, b),
            (Object::ConfigMap(a), Object::ConfigMap(b)) => same(a, b),
            (Object::Namespace(a), Object::Namespace(b)) => same(a, b),
            _ => false,
        }
    }

    pub(crate) fn known_kind(&self) -> Kind {
        match self {
            Object::Ingress(..) => Kind::Ingress,
            Object::IngressClass(_) => Kind::IngressClass,
            Object::Service(..) => Kind::Service,
            Object::EndpointSlice(_) => Kind::EndpointSlice,
            Object::Endpoints(_) => Kind::Endpoints,
            Object::Secret(_) => Kind::Secret,
            Object::GatewayClass(_) => Kind::GatewayClass,
            Object::Gateway(_) => Kind::Gateway,
            Object::HttpRoute(_) => Kind::HttpRoute,
            Object::GrpcRoute(_) => Kind::GrpcRoute,
            Object::ReferenceGrant(_) => Kind::ReferenceGrant,
            Object::TcpRoute(_) => Kind::TcpRoute,
            Object::UdpRoute(_) => Kind::UdpRoute,
            Object::TlsRoute(_) => Kind::TlsRoute,
            Object::ListenerSet(_) => Kind::ListenerSet,
            Object::BackendTlsPolicy(_) => Kind::BackendTlsPolicy,
            Object::ConfigMap(_) => Kind::ConfigMap,
            Object::Namespace(_) => Kind::Namespace,
        }
    }
}

/// Secrets and ConfigMaps print as their identity only: their data must never reach a log.
impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::Ingress(key, o) => f.debug_tuple("Ingress").field(key).field(o).finish(),
            Object::IngressClass(o) => f.debug_tuple("IngressClass").field(o).finish(),
            Object::Service(key, o) => f.debug_tuple("Service").field(key).field(o).finish(),
            Object::EndpointSlice(o) => f.debug_tuple("EndpointSlice").field(o).finish(),
            Object::Endpoints(o) => f.debug_tuple("Endpoints").field(o).finish(),
            Object::Secret(_) => write!(f, "Secret({}, data redacted)", self.object_ref()),
            Object::GatewayClass(o) => f.debug_tuple("GatewayClass").field(o).finish(),
            Object::Gateway(o) => f.debug_tuple("Gateway").field(o).finish(),
            Object::HttpRoute(o) => f.debug_tuple("HTTPRoute").field(o).finish(),
            Object::GrpcRoute(o) => f.debug_tuple("GRPCRoute").field(o).finish(),
            Object::ReferenceGrant(o) => f.debug_tuple("ReferenceGrant").field(o).finish(),
            Object::TcpRoute(o) => f.debug_tuple("TCPRoute").field(o).finish(),
            Object::UdpRoute(o) => f.debug_tuple("UDPRoute").field(o).finish(),
            Object::TlsRoute(o) => f.debug_tuple("TLSRoute").field(o).finish(),
            Object::ListenerSet(o) => f.debug_tuple("ListenerSet").field(o).finish(),
            Object::BackendTlsPolicy(o) => f.debug_tuple("BackendTLSPolicy").field(o).finish(),
            Object::ConfigMap(_) => write!(f, "ConfigMap({}, data redacted)", self.object_ref()),
            Object::Namespace(o) => f.debug_tuple("Namespace").field(o).finish(),
        }
    }
}

/// The (apiVersion, kind) pairs Portico reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ingress,
    IngressClass,
    Service,
    EndpointSlice,
    Endpoints,
    Secret,
    GatewayClass,
    Gateway,
    HttpRoute,
    GrpcRoute,
    ReferenceGrant,
    TcpRoute,
    UdpRoute,
    TlsRoute,
    ListenerSet,
    BackendTlsPolicy,
    ConfigMap,
    Namespace,
}

pub(crate) type DecodeError = serde_path_to_error::Error<serde_json::Error>;

impl Kind {
    pub const ALL: [Kind; 18] = [
        Kind::Ingress,
        Kind::IngressClass,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Endpoints,
        Kind::Secret,
        Kind::GatewayClass,
        Kind::Gateway,
        Kind::HttpRoute,
        Kind::GrpcRoute,
        Kind::ReferenceGrant,
        Kind::TcpRoute,
        Kind::UdpRoute,
        Kind::TlsRoute,
        Kind::ListenerSet,
        Kind::BackendTlsPolicy,
        Kind::ConfigMap,
        Kind::Namespace,
    ];

    pub fn recognise(api_version: &str, kind: &str) -> Option<Kind> {
        match (api_version, kind) {
            ("networking.k8s.io/v1", "Ingress") => Some(Kind::Ingress),
            ("networking.k8s.io/v1", "IngressClass") => Some(Kind::IngressClass),
            ("v1", "Service") => Some(Kind::Service),
            ("discovery.k8s.io/v1", "EndpointSlice") => Some(Kind::EndpointSlice),
            ("v1", "Endpoints") => Some(Kind::Endpoints),
            ("v1", "Secret") => Some(Kind::Secret),
            ("v1", "ConfigMap") => Some(Kind::ConfigMap),
            ("v1", "Namespace") => Some(Kind::Namespace),
            (version, "BackendTLSPolicy")
                if portico_gateway::is_backend_tls_policy_version(version) =>
            {
                Some(Kind::BackendTlsPolicy)
            }
            (version, "TCPRoute") if portico_gateway::is_l4_route_version(version) => {
                Some(Kind::TcpRoute)
            }
            (version, "UDPRoute") if portico_gateway::is_l4_route_version(version) => {
                Some(Kind::UdpRoute)
            }
            (version, "TLSRoute") if portico_gateway::is_tls_route_version(version) => {
                Some(Kind::TlsRoute)
            }
            (version, kind) if portico_gateway::is_read_version(version) => match kind {
                "GatewayClass" => Some(Kind::GatewayClass),
                "Gateway" => Some(Kind::Gateway),
                "HTTPRoute" => Some(Kind::HttpRoute),
                "GRPCRoute" => Some(Kind::GrpcRoute),
                "ReferenceGrant" => Some(Kind::ReferenceGrant),
                "ListenerSet" if version.ends_with("/v1") => Some(Kind::ListenerSet),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ingress => "Ingress",
            Kind::IngressClass => "IngressClass",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Endpoints => "Endpoints",
            Kind::Secret => "Secret",
            Kind::GatewayClass => "GatewayClass",
            Kind::Gateway => "Gateway",
            Kind::HttpRoute => "HTTPRoute",
            Kind::GrpcRoute => "GRPCRoute",
            Kind::ReferenceGrant => "ReferenceGrant",
            Kind::TcpRoute => "TCPRoute",
            Kind::UdpRoute => "UDPRoute",
            Kind::TlsRoute => "TLSRoute",
            Kind::ListenerSet => "ListenerSet",
            Kind::BackendTlsPolicy => "BackendTLSPolicy",
            Kind::ConfigMap => "ConfigMap",
            Kind::Namespace => "Namespace",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::IngressClass | Kind::GatewayClass | Kind::Namespace
        )
    }

    /// Deserializes the typed object, recording the path of the field that failed.
    pub fn decode(self, value: serde_json::Value) -> Result<Object, DecodeError> {
        Ok(match self {
            Kind::Ingress => {
                let ingress: Ingress = de(value)?;
                let key = key(&ingress.metadata);
                Object::Ingress(key, Arc::new(KeptIngress::from(ingress)))
            }
            Kind::IngressClass => Object::IngressClass(Arc::new(de(value)?)),
            Kind::Service => {
                let service: Service = de(value)?;
                let key = key(&service.metadata);
                Object::Service(key, Arc::new(KeptService::from(service)))
            }
            Kind::EndpointSlice => {
                let slice: EndpointSlice = de(value)?;
                Object::EndpointSlice(Arc::new(CompactSlice::from(slice)))
            }
            Kind::Endpoints => Object::Endpoints(Arc::new(de(value)?)),
            Kind::Secret => Object::Secret(Arc::new(de(value)?)),
            Kind::GatewayClass => Object::GatewayClass(Arc::new(de(value)?)),
            Kind::Gateway => Object::Gateway(Arc::new(de(value)?)),
            Kind::HttpRoute => Object::HttpRoute(Arc::new(de(value)?)),
            Kind::GrpcRoute => Object::GrpcRoute(Arc::new(de(value)?)),
            Kind::ReferenceGrant => Object::ReferenceGrant(Arc::new(de(value)?)),
            Kind::TcpRoute => Object::TcpRoute(Arc::new(de(value)?)),
            Kind::UdpRoute => Object::UdpRoute(Arc::new(de(value)?)),
            Kind::TlsRoute => Object::TlsRoute(Arc::new(de(value)?)),
            Kind::ListenerSet => Object::ListenerSet(Arc::new(de(value)?)),
            Kind::BackendTlsPolicy => Object::BackendTlsPolicy(Arc::new(de(value)?)),
            Kind::ConfigMap => Object::ConfigMap(Arc::new(de(value)?)),
            Kind::Namespace => Object::Namespace(Arc::new(de(value)?)),
        })
    }
}

/// The key of an object kept without its name.
fn key(meta: &ObjectMeta) -> Box<ObjectKey> {
    Box::new(ObjectKey::of(meta))
}

fn de<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value)
}
