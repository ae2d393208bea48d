//! The table of resource types the fake serves: plural, kind, group/version, scope and whether a
//! `/status` subresource exists. Everything else about a type is derived from this table.

/// One resource type of the table.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group (`/api/v1`).
    pub group: &'static str,
    pub version: &'static str,
    /// The collection's path segment, e.g. `ingresses`.
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (writes to the main resource then keep the stored status).
    pub status: bool,
}

/// Index of a type in [`TABLE`]; cheap to copy, compare and store.
pub type TypeId = usize;

const fn ty(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced,
        status,
    }
}

/// Every type served. Both Event types are kept apart (the real server projects one storage).
pub static TABLE: &[ResourceType] = &[
    ty(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        true,
        true,
    ),
    ty(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
        false,
    ),
    ty("", "v1", "services", "Service", true, true),
    ty("", "v1", "secrets", "Secret", true, false),
    ty("", "v1", "endpoints", "Endpoints", true, false),
    ty("", "v1", "events", "Event", true, false),
    ty("", "v1", "namespaces", "Namespace", false, false),
    ty("", "v1", "configmaps", "ConfigMap", true, false),
    ty(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        false,
    ),
    ty("events.k8s.io", "v1", "events", "Event", true, false),
    ty("coordination.k8s.io", "v1", "leases", "Lease", true, false),
    // The Gateway API's CRDs (standard channel): each version a store of its own, unlike the
    // real server, which converts one storage between the versions it serves.
    ty(GATEWAY, "v1", "gatewayclasses", "GatewayClass", false, true),
    ty(GATEWAY, "v1", "gateways", "Gateway", true, true),
    ty(GATEWAY, "v1", "httproutes", "HTTPRoute", true, true),
    ty(
        GATEWAY,
        "v1",
        "referencegrants",
        "ReferenceGrant",
        true,
        false,
    ),
    ty(
        GATEWAY,
        "v1beta1",
        "gatewayclasses",
        "GatewayClass",
        false,
        true,
    ),
    ty(GATEWAY, "v1beta1", "gateways", "Gateway", true, true),
    ty(GATEWAY, "v1beta1", "httproutes", "HTTPRoute", true, true),
    ty(
        GATEWAY,
        "v1beta1",
        "referencegrants",
        "ReferenceGrant",
        true,
        false,
    ),
    // TCPRoute and UDPRoute in the experimental channel's v1alpha2 only: what most clusters
    // still serve (the reader falls back to it from v1).
    ty(GATEWAY, "v1alpha2", "tcproutes", "TCPRoute", true, true),
    ty(GATEWAY, "v1alpha2", "udproutes", "UDPRoute", true, true),
    // TLSRoute in v1alpha3, the experimental channel's last version before v1.
    ty(GATEWAY, "v1alpha3", "tlsroutes", "TLSRoute", true, true),
    // GRPCRoute in v1 (standard since Gateway API v1.1).
    ty(GATEWAY, "v1", "grpcroutes", "GRPCRoute", true, true),
    // ListenerSet in v1 (standard since Gateway API v1.5).
    ty(GATEWAY, "v1", "listenersets", "ListenerSet", true, true),
];

/// The Gateway API's group.
pub const GATEWAY: &str = "gateway.networking.k8s.io";

impl ResourceType {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The type served at `group/version/plural` (group empty for the core group).
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<TypeId> {
    TABLE
        .iter()
        .position(|t| t.group == group && t.version == version && t.plural == plural)
}

/// The type of an object, from its `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<TypeId> {
    let (group, version) = split_api_version(api_version);
    TABLE
        .iter()
        .position(|t| t.group == group && t.version == version && t.kind == kind)
}

/// `networking.k8s.io/v1` → (`networking.k8s.io`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Whether `hidden` (API groups, or `group/version`s) leaves out `group`'s `version`.
pub fn hidden(hidden: &[String], group: &str, version: &str) -> bool {
    (hidden.iter()).any(|h| *h == group || h.split_once('/') == Some((group, version)))
}

/// Shorthand for `&TABLE[id]`.
pub fn get(id: TypeId) -> &'static ResourceType {
    &TABLE[id]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_grouped_types_are_found_by_kind_and_path() {
        let ingress = by_kind("networking.k8s.io/v1", "Ingress");
        assert_eq!(ingress, by_path("networking.k8s.io", "v1", "ingresses"));
        assert_eq!(
            get(by_kind("v1", "Service").unwrap_or(0)).plural,
            "services"
        );
        assert_ne!(by_kind("v1", "Event"), by_kind("events.k8s.io/v1", "Event"));
        assert_eq!(by_kind("v2", "Service"), None);
        let v1 = by_kind("gateway.networking.k8s.io/v1", "HTTPRoute");
        let beta = by_kind("gateway.networking.k8s.io/v1beta1", "HTTPRoute");
        assert_eq!(v1, by_path(GATEWAY, "v1", "httproutes"));
        assert!(v1.is_some() && beta.is_some() && v1 != beta);
    }
}
