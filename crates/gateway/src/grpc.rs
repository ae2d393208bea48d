//! GRPCRoute: rules that match gRPC calls by service and method (and headers) and send them to
//! backends, attached to Gateways like HTTPRoutes. A gRPC call is an HTTP/2 POST to
//! `/<service>/<method>`, so a GRPCRoute is served as the HTTPRoute [`GrpcRoute::as_http_route`]
//! gives: each method match a path match, the rest (headers, filters, backendRefs) as written.

use crate::{BackendRef, HeaderMatch, HttpRoute, HttpRouteMatch, HttpRouteRule, HttpRouteSpec};
use crate::{ParentReference, PathMatch, RouteStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A GRPCRoute (namespaced).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRoute {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GrpcRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RouteStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<GrpcRouteRule>,
    /// Anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<GrpcRouteMatch>,
    /// Filters, as read (the shapes of HTTPRoute's header modifiers and mirror).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<BackendRef>,
    /// `sessionPersistence` and anything newer, as read.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// One match: its method and every header must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<GrpcMethodMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
}

/// A service and method (either may be unset; an unset one matches any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrpcMethodMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

impl GrpcMethodMatch {
    /// The path match that selects the calls it matches: `Exact /<service>/<method>`,
    /// `PathPrefix /<service>/` for a service alone, else a regular expression over the path
    /// (an unset part matches any one path segment). A type other than `Exact` and
    /// `RegularExpression` is kept, for the translator to refuse.
    pub fn path_match(&self) -> PathMatch {
        let exact = self.type_.as_deref().unwrap_or("Exact");
        let path = |type_: &str, value: String| PathMatch {
            type_: Some(type_.to_owned()),
            value: Some(value),
        };
        let any = "[^/]+".to_owned();
        match (exact, self.service.as_deref(), self.method.as_deref()) {
            ("Exact", Some(s), Some(m)) => path("Exact", format!("/{s}/{m}")),
            ("Exact", Some(s), None) => path("PathPrefix", format!("/{s}/")),
            ("Exact", None, Some(m)) => path("RegularExpression", format!("/{any}/{}", escape(m))),
            ("Exact", None, None) => path("PathPrefix", "/".to_owned()),
            ("RegularExpression", s, m) => {
                let part = |p: Option<&str>| p.map_or_else(|| any.clone(), |p| format!("(?:{p})"));
                path("RegularExpression", format!("/{}/{}", part(s), part(m)))
            }
            (other, s, m) => path(
                other,
                format!("/{}/{}", s.unwrap_or_default(), m.unwrap_or_default()),
            ),
        }
    }
}

/// `text` as a regular expression that matches it literally.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl GrpcRoute {
    /// The HTTPRoute that serves it: same metadata, parents, hostnames, filters and
    /// backendRefs; each method match a path match; `kind` stays `GRPCRoute`.
    pub fn as_http_route(&self) -> HttpRoute {
        let rule = |rule: &GrpcRouteRule| HttpRouteRule {
            name: rule.name.clone(),
            matches: (rule.matches.iter())
                .map(|m| HttpRouteMatch {
                    path: Some(m.method.clone().unwrap_or_default().path_match()),
                    headers: m.headers.clone(),
                    query_params: Vec::new(),
                    method: None,
                })
                .collect(),
            filters: rule.filters.clone(),
            backend_refs: rule.backend_refs.clone(),
            rest: BTreeMap::new(),
        };
        HttpRoute {
            api_version: self.api_version.clone(),
            kind: "GRPCRoute".to_owned(),
            metadata: self.metadata.clone(),
            spec: HttpRouteSpec {
                parent_refs: self.spec.parent_refs.clone(),
                hostnames: self.spec.hostnames.clone(),
                rules: self.spec.rules.iter().map(rule).collect(),
                rest: BTreeMap::new(),
            },
            status: self.status.clone(),
        }
    }
}
