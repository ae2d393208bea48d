//! The Gateway API kinds Portico reads (`gateway.networking.k8s.io`: GatewayClass, Gateway,
//! HTTPRoute, GRPCRoute, ReferenceGrant, TLSRoute, TCPRoute, UDPRoute, BackendTLSPolicy,
//! ListenerSet), as serde types written from the v1 API's schemas. The
//! `v1beta1` versions of these kinds have the same shape and decode into the same types.
//!
//! Why not kube-rs's `gateway-api` crate: its newest release depends on other major versions
//! of kube and k8s-openapi than Portico's (its types would implement another crate's
//! `Resource` trait) and carries an older API release. These types implement k8s-openapi's
//! `Resource`, `ListableResource` and `Metadata`, so kube's `Api<K>` takes them as it takes
//! k8s-openapi's own kinds.
//!
//! Only the fields Portico interprets are typed; every other field of a spec is kept as it was
//! read (`rest`, printed back by `portico get`), and unknown fields never make decoding fail.
//! Defaults the API server applies from the CRD schema (a rule's match `PathPrefix /`, a
//! backend's weight 1, a header match's type `Exact`, a listener's `allowedRoutes` from
//! `Same`) are applied by the accessors here, because objects read from files never went
//! through an API server.
//!
//! Types only: it depends on serde and k8s-openapi (no API version feature: the binary picks
//! it), never on the model, the translator or any I/O crate.

mod backend_tls;
mod class;
mod filter;
mod gateway;
mod grant;
mod grpc;
mod l4route;
mod listener_set;
mod resource;
mod route;
mod status;
mod tls_route;

pub use backend_tls::{
    BACKEND_TLS_POLICY_VERSIONS, BackendTlsPolicy, BackendTlsPolicySpec, BackendTlsValidation,
    LocalObjectReference, PolicyAncestorStatus, PolicyStatus, PolicyTargetReference,
    SubjectAltName, is_backend_tls_policy_version,
};
pub use class::{GatewayClass, GatewayClassSpec};
pub use filter::{
    CorsFilter, Fraction, HeaderModifier, HttpHeader, HttpRouteFilter, PathModifier, RequestMirror,
    RequestRedirect, UrlRewrite,
};
pub use gateway::{
    AllowedRoutes, Gateway, GatewayAddress, GatewaySpec, GatewayTls, Listener, RouteNamespaces,
};
pub use grant::{ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo};
pub use grpc::{GrpcMethodMatch, GrpcRoute, GrpcRouteMatch, GrpcRouteRule, GrpcRouteSpec};
pub use l4route::{
    L4_ROUTE_VERSIONS, L4RouteRule, L4RouteSpec, TcpRoute, UdpRoute, is_l4_route_version,
};
pub use listener_set::{
    AllowedListeners, ListenerNamespaces, ListenerSet, ListenerSetSpec, ListenerSetStatus,
    ParentGatewayReference,
};
pub use route::{
    BackendRef, HeaderMatch, HttpRoute, HttpRouteMatch, HttpRouteRule, HttpRouteSpec,
    ParentReference, PathMatch, QueryParamMatch, SecretObjectReference,
};
pub use status::{
    GatewayClassStatus, GatewayStatus, GatewayStatusAddress, ListenerStatus, RouteGroupKind,
    RouteParentStatus, RouteStatus,
};
pub use tls_route::{TLS_ROUTE_VERSIONS, TlsRoute, TlsRouteSpec, is_tls_route_version};

/// Every GatewayClass, Gateway and HTTPRoute with the status Portico would write (what
/// `portico get` and the admin API show).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Statuses {
    pub classes: Vec<GatewayClass>,
    pub gateways: Vec<Gateway>,
    pub routes: Vec<HttpRoute>,
    pub grpc_routes: Vec<GrpcRoute>,
    pub tls_routes: Vec<TlsRoute>,
    pub tcp_routes: Vec<TcpRoute>,
    pub udp_routes: Vec<UdpRoute>,
    pub backend_tls_policies: Vec<BackendTlsPolicy>,
    pub listener_sets: Vec<ListenerSet>,
}

/// The API group of every kind here.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// The API versions read as the kinds here (the same shape in each).
pub const VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Whether `api_version` (`group/version`) is one Portico reads for the Gateway API kinds.
pub fn is_read_version(api_version: &str) -> bool {
    api_version
        .strip_prefix(GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .is_some_and(|v| VERSIONS.contains(&v))
}

#[cfg(test)]
mod tests;
