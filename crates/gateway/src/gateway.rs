//! Gateway: a load balancer's addresses and listeners, of one GatewayClass.

use crate::{AllowedListeners, GatewayStatus, RouteGroupKind, SecretObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A Gateway (namespaced).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: GatewaySpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<GatewayStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayAddress>,
    /// Which ListenerSets may add listeners (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_listeners: Option<AllowedListeners>,
    /// `infrastructure`, `backendTLS` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// An address requested for the Gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayAddress {
    /// `IPAddress` (the default), `Hostname` or an implementation-specific type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Optional since v1.3: an address of the type, chosen by the implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl GatewaySpec {
    /// `allowedListeners.namespaces.from` with the API's default (`None`).
    pub fn listeners_from(&self) -> &str {
        let namespaces = (self.allowed_listeners.as_ref()).and_then(|a| a.namespaces.as_ref());
        namespaces.and_then(|n| n.from.as_deref()).unwrap_or("None")
    }

    /// `allowedListeners.namespaces.selector`, as read.
    pub fn listeners_selector(&self) -> Option<&LabelSelector> {
        let namespaces = self.allowed_listeners.as_ref()?.namespaces.as_ref()?;
        namespaces.selector.as_ref()
    }
}

impl GatewayAddress {
    /// The type with the API's default applied.
    pub fn address_type(&self) -> &str {
        self.type_.as_deref().unwrap_or("IPAddress")
    }
}

/// A logical endpoint of the Gateway: a port, a protocol, maybe a hostname.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed one.
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<GatewayTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

impl Listener {
    /// `allowedRoutes.namespaces.from` with the API's default (`Same`).
    pub fn routes_from(&self) -> &str {
        let namespaces = self
            .allowed_routes
            .as_ref()
            .and_then(|a| a.namespaces.as_ref());
        namespaces.and_then(|n| n.from.as_deref()).unwrap_or("Same")
    }

    /// `allowedRoutes.namespaces.selector`, as read.
    pub fn routes_selector(&self) -> Option<&LabelSelector> {
        let namespaces = self.allowed_routes.as_ref()?.namespaces.as_ref()?;
        namespaces.selector.as_ref()
    }

    /// The route kinds named in `allowedRoutes.kinds` (empty: the protocol's default kinds).
    pub fn allowed_kinds(&self) -> &[RouteGroupKind] {
        self.allowed_routes.as_ref().map_or(&[], |a| &a.kinds[..])
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    /// `Terminate` (the default) or `Passthrough`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_refs: Vec<SecretObjectReference>,
    /// `options` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl GatewayTls {
    /// The mode with the API's default applied.
    pub fn tls_mode(&self) -> &str {
        self.mode.as_deref().unwrap_or("Terminate")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// With `from: Selector`: the labels of the namespaces whose routes are admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}
