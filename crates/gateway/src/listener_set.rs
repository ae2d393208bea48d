//! ListenerSet: listeners of a Gateway written outside it (in another object, maybe another
//! namespace), served as if they were the Gateway's when the Gateway allows them.

use crate::{Listener, ListenerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A ListenerSet (namespaced, `gateway.networking.k8s.io/v1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ListenerSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ListenerSetStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSetSpec {
    pub parent_ref: ParentGatewayReference,
    /// Shaped as a Gateway's listeners (`ListenerEntry`; its port is required).
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// Anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The Gateway a ListenerSet adds its listeners to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentGatewayReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ParentGatewayReference {
    /// Whether it names a Gateway (the API's defaults: the Gateway API's group, kind `Gateway`).
    pub fn is_gateway(&self) -> bool {
        crate::route::names_gateway(self.group.as_deref(), self.kind.as_deref())
    }

    /// The Gateway's namespace: its own, else the ListenerSet's.
    pub fn namespace_or<'a>(&'a self, set_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(set_namespace)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// One per listener (`ListenerEntryStatus`, shaped as a Gateway listener's status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
}

/// A Gateway's `spec.allowedListeners`: which namespaces' ListenerSets it takes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllowedListeners {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<ListenerNamespaces>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenerNamespaces {
    /// `None` (the default), `Same`, `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// With `from: Selector`: the labels of the namespaces whose ListenerSets are taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}
