//! TCPRoute and UDPRoute: a listener's every connection (TCP) or datagram flow (UDP) to
//! weighted backends, attached to a Gateway's TCP or UDP listeners through `parentRefs`. The
//! two kinds have one shape ([`L4RouteSpec`]); `v1` and `v1alpha2` decode into the same types.

use crate::{BackendRef, ParentReference, RouteStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The API versions read as TCPRoute and UDPRoute (`v1alpha2`: what clusters of the
/// experimental channel still serve).
pub const L4_ROUTE_VERSIONS: [&str; 2] = ["v1", "v1alpha2"];

/// Whether `api_version` (`group/version`) is one Portico reads for TCPRoute and UDPRoute.
pub fn is_l4_route_version(api_version: &str) -> bool {
    api_version
        .strip_prefix(crate::GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .is_some_and(|v| L4_ROUTE_VERSIONS.contains(&v))
}

macro_rules! l4_route {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $ty {
            #[serde(default)]
            pub api_version: String,
            #[serde(default)]
            pub kind: String,
            #[serde(default)]
            pub metadata: ObjectMeta,
            #[serde(default)]
            pub spec: L4RouteSpec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<RouteStatus>,
        }
    };
}

l4_route!(
    /// A TCPRoute (namespaced): TCP connections of a TCP listener to its backends.
    TcpRoute
);
l4_route!(
    /// A UDPRoute (namespaced): UDP flows of a UDP listener to its backends.
    UdpRoute
);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L4RouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    /// One rule in `v1alpha2` and `v1` (the API allows no more).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<L4RouteRule>,
    /// `useDefaultGateways` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L4RouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Each gets a share of the flows in proportion to its `weight`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<BackendRef>,
    /// Anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
