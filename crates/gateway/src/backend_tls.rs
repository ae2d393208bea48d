//! BackendTLSPolicy: TLS from the gateway to a Service's port, with the CA certificates and
//! the hostname the backend's certificate is verified against. `v1` and `v1alpha3` decode into
//! the same type (`v1alpha3` is `v1`'s shape).

use crate::ParentReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The API versions read as BackendTLSPolicy, most preferred first (`v1alpha3`: what clusters
/// of the experimental channel still serve).
pub const BACKEND_TLS_POLICY_VERSIONS: [&str; 2] = ["v1", "v1alpha3"];

/// Whether `api_version` (`group/version`) is one Portico reads for BackendTLSPolicy.
pub fn is_backend_tls_policy_version(api_version: &str) -> bool {
    api_version
        .strip_prefix(crate::GROUP)
        .and_then(|v| v.strip_prefix('/'))
        .is_some_and(|v| BACKEND_TLS_POLICY_VERSIONS.contains(&v))
}

/// A BackendTLSPolicy (namespaced; it targets Services of its own namespace).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: BackendTlsPolicySpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PolicyStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicySpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub validation: BackendTlsValidation,
    /// `options` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// A Service (the core group, kind `Service`) of the policy's namespace, or one of its ports
/// by name (`sectionName`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetReference {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsValidation {
    /// ConfigMaps (or Secrets) of the policy's namespace holding the CA certificates under
    /// `ca.crt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_certificate_refs: Vec<LocalObjectReference>,
    /// `System`: the system's trusted roots instead of `caCertificateRefs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub well_known_ca_certificates: Option<String>,
    /// Sent as SNI and verified against the backend's certificate (unless `subjectAltNames`
    /// are given).
    #[serde(default)]
    pub hostname: String,
    /// Names the backend's certificate must carry one of, instead of `hostname`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
    /// Anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One subject alternative name: `type` `Hostname` with `hostname`, or `URI` with `uri`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubjectAltName {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// An object of the referring object's namespace, by group, kind and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LocalObjectReference {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// The status of a policy: one entry per ancestor (a Gateway), each written by that
/// ancestor's controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    #[serde(default)]
    pub ancestors: Vec<PolicyAncestorStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    pub ancestor_ref: ParentReference,
    pub controller_name: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
