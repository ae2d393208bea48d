//! k8s-openapi's `Resource`, `ListableResource` and `Metadata` for the kinds here.

use crate::{
    BackendTlsPolicy, Gateway, GatewayClass, GrpcRoute, HttpRoute, ListenerSet, ReferenceGrant,
    TcpRoute, TlsRoute, UdpRoute,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{
    ClusterResourceScope, ListableResource, Metadata, NamespaceResourceScope, Resource,
};

macro_rules! resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl Resource for $ty {
            const API_VERSION: &'static str = "gateway.networking.k8s.io/v1";
            const GROUP: &'static str = crate::GROUP;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = "v1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl ListableResource for $ty {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }

        impl Metadata for $ty {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(
    GatewayClass,
    "GatewayClass",
    "gatewayclasses",
    ClusterResourceScope
);
resource!(Gateway, "Gateway", "gateways", NamespaceResourceScope);
resource!(HttpRoute, "HTTPRoute", "httproutes", NamespaceResourceScope);
resource!(GrpcRoute, "GRPCRoute", "grpcroutes", NamespaceResourceScope);
resource!(
    ReferenceGrant,
    "ReferenceGrant",
    "referencegrants",
    NamespaceResourceScope
);
resource!(TcpRoute, "TCPRoute", "tcproutes", NamespaceResourceScope);
resource!(UdpRoute, "UDPRoute", "udproutes", NamespaceResourceScope);
resource!(TlsRoute, "TLSRoute", "tlsroutes", NamespaceResourceScope);
resource!(
    BackendTlsPolicy,
    "BackendTLSPolicy",
    "backendtlspolicies",
    NamespaceResourceScope
);
resource!(
    ListenerSet,
    "ListenerSet",
    "listenersets",
    NamespaceResourceScope
);
