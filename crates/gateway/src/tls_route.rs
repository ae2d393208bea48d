//! TLSRoute: TLS connections of a Gateway's TLS listeners routed by the ClientHello's server
//! name (SNI) to weighted backends. `v1`, `v1alpha3` and `v1alpha2` decode into the same type
//! (`v1alpha3` is `v1`'s shape; `v1alpha2` has the same fields, `hostnames` optional).

use crate::{L4RouteRule, ParentReference, RouteStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The API versions read as TLSRoute, most preferred first (`v1alpha3` and `v1alpha2`: what
/// clusters of the experimental channel still serve).
pub const TLS_ROUTE_VERSIONS: [&str; 3] = ["v1", "v1alpha3", "v1alpha2"];

/// Whether `api_version` (`group/version`) is one Portico reads for TLSRoute.
pub fn is_tls_route_version(api_version: &str) -> bool {
    api_version
        .strip_prefix(crate::GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .is_some_and(|v| TLS_ROUTE_VERSIONS.contains(&v))
}

/// A TLSRoute (namespaced).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRoute {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: TlsRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RouteStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    /// The server names it takes (`*.suffix` wildcards allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    /// One rule (the API allows no more): backendRefs with weights, as a TCPRoute's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<L4RouteRule>,
    /// `useDefaultGateways` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
