//! HTTPRoute: rules that match HTTP requests and send them to backends, attached to Gateways
//! (or their listeners) through `parentRefs`.

use crate::RouteStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// An HTTPRoute (namespaced).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HttpRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RouteStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    /// Unset: one rule that matches every request and has no backend (404 by the API's
    /// default; Portico serves it as such).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<HttpRouteRule>,
    /// Anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// A route's parent: a Gateway (by default), or one of its listeners by `sectionName` or
/// `port`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// Whether a reference's group and kind name a Gateway, with the API's defaults (the Gateway
/// API's group, kind `Gateway`).
pub(crate) fn names_gateway(group: Option<&str>, kind: Option<&str>) -> bool {
    group.unwrap_or(crate::GROUP) == crate::GROUP && kind.unwrap_or("Gateway") == "Gateway"
}

impl ParentReference {
    /// Whether it names a Gateway (group and kind with the API's defaults).
    pub fn is_gateway(&self) -> bool {
        names_gateway(self.group.as_deref(), self.kind.as_deref())
    }

    /// The parent's namespace: its own, else the route's.
    pub fn namespace_or<'a>(&'a self, route_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(route_namespace)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<HttpRouteMatch>,
    /// Filters, as read; each is refused in status until Portico serves its type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<BackendRef>,
    /// `timeouts`, `retry`, `sessionPersistence` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl HttpRouteRule {
    /// The matches with the API's default: none written is one `PathPrefix /` match, which
    /// matches every request.
    pub fn effective_matches(&self) -> Cow<'_, [HttpRouteMatch]> {
        if self.matches.is_empty() {
            Cow::Owned(vec![HttpRouteMatch::default()])
        } else {
            Cow::Borrowed(&self.matches)
        }
    }
}

/// One match: all its conditions must hold (logical AND); a rule matches when any of its
/// matches does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
    /// The first parameter of a name counts; names compare case-sensitively.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<QueryParamMatch>,
    /// `GET`, `POST`, … (case-sensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

impl HttpRouteMatch {
    /// The path match with the API's defaults: `PathPrefix` and `/`.
    pub fn path_match(&self) -> (&str, &str) {
        let path = self.path.as_ref();
        (
            path.and_then(|p| p.type_.as_deref())
                .unwrap_or("PathPrefix"),
            path.and_then(|p| p.value.as_deref()).unwrap_or("/"),
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Compared case-insensitively (a header's) or case-sensitively (a query parameter's).
    pub name: String,
    pub value: String,
}

impl HeaderMatch {
    pub fn match_type(&self) -> &str {
        self.type_.as_deref().unwrap_or("Exact")
    }
}

/// A query parameter match: the shape of a header match, its name case-sensitive.
pub type QueryParamMatch = HeaderMatch;

/// Where a rule's requests go: a Service port by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    /// Unset or empty: the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Unset: `Service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Unset: 1. A share of the rule's requests in proportion to the sum of weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// As read (not served yet: refused in status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
}

impl BackendRef {
    /// Group and kind with the API's defaults (the core group, `Service`).
    pub fn group_kind(&self) -> (&str, &str) {
        (
            self.group.as_deref().unwrap_or_default(),
            self.kind.as_deref().unwrap_or("Service"),
        )
    }

    /// The weight with the API's default (1).
    pub fn effective_weight(&self) -> i32 {
        self.weight.unwrap_or(1)
    }
}

/// A reference to a Secret (by default) holding a certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl SecretObjectReference {
    /// Group and kind with the API's defaults (the core group, `Secret`).
    pub fn group_kind(&self) -> (&str, &str) {
        (
            self.group.as_deref().unwrap_or_default(),
            self.kind.as_deref().unwrap_or("Secret"),
        )
    }
}
