//! GatewayClass: which controller serves the Gateways that name it.

use crate::GatewayClassStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A GatewayClass (cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClass {
    /// As read (`gateway.networking.k8s.io/v1` or `v1beta1`).
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: GatewayClassSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<GatewayClassStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    /// The controller that manages Gateways of this class, e.g. `portico.dev/gateway-controller`.
    pub controller_name: String,
    /// `parametersRef`, `description` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}
