//! Routes: one per (Ingress, rule host, path, pathType), before merging and ordering.

use crate::Objects;
use crate::backend::{PoolKey, resolve};
use crate::source::Source;
use k8s_openapi::api::networking::v1::{HTTPIngressPath, IngressBackend};
use portico_model::{CompareType, Diagnostic};
use std::fmt;

/// What a route matches on the Host header.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum HostMatch {
    /// Lower-cased host.
    Exact(String),
    /// The suffix after `*.`.
    Wildcard(String),
    /// No host: every host.
    Any,
}

impl HostMatch {
    fn of(host: Option<&str>) -> Self {
        match host.filter(|h| !h.is_empty()).map(str::to_ascii_lowercase) {
            None => HostMatch::Any,
            Some(h) => match h.strip_prefix("*.") {
                Some(suffix) => HostMatch::Wildcard(suffix.to_owned()),
                None => HostMatch::Exact(h),
            },
        }
    }

    /// Precedence group: exact hosts first, then wildcards, then host-less rules.
    pub(crate) fn group(&self) -> u8 {
        match self {
            HostMatch::Exact(_) => 0,
            HostMatch::Wildcard(_) => 1,
            HostMatch::Any => 2,
        }
    }
}

impl fmt::Display for HostMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostMatch::Exact(h) => write!(f, "host \"{h}\""),
            HostMatch::Wildcard(s) => write!(f, "host \"*.{s}\""),
            HostMatch::Any => f.write_str("every host"),
        }
    }
}

/// What a route matches on the path, as the data plane compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PathMatch {
    pub compare: CompareType,
    pub value: String,
}

impl PathMatch {
    /// Exact keeps the path as written; Prefix and ImplementationSpecific (treated as Prefix)
    /// drop trailing slashes, the root staying `/`; an empty path is the root.
    pub(crate) fn of(path_type: &str, path: &str) -> Self {
        if path_type == "Exact" {
            return PathMatch {
                compare: CompareType::EqualTo,
                value: path.to_owned(),
            };
        }
        let trimmed = path.trim_end_matches('/');
        let value = if trimmed.is_empty() { "/" } else { trimmed };
        PathMatch {
            compare: CompareType::PathPrefix,
            value: value.to_owned(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Route<'a> {
    pub source: &'a Source<'a>,
    pub host: HostMatch,
    pub path: PathMatch,
    /// Host and path as written, and the pathType: what the policy id derives from.
    pub written: String,
    /// `spec.rules[i].http.paths[j]`.
    pub field: String,
    pub backend: PoolKey,
}

/// The routes of one served Ingress in YAML order, with the warnings its backends raise.
pub(crate) fn routes<'a>(
    source: &'a Source<'a>,
    objects: &Objects,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Route<'a>> {
    let mut out = Vec::new();
    let rules = source
        .ingress
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_deref());
    for (i, rule) in rules.unwrap_or_default().iter().enumerate() {
        let host = rule.host.as_deref().unwrap_or_default();
        for (j, path) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
            let field = format!("spec.rules[{i}].http.paths[{j}]");
            if let Some(route) = route(source, objects, host, path, field, diagnostics) {
                out.push(route);
            }
        }
    }
    out
}

fn route<'a>(
    source: &'a Source<'a>,
    objects: &Objects,
    host: &str,
    path: &HTTPIngressPath,
    field: String,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Route<'a>> {
    let backend_field = format!("{field}.backend");
    let backend = backend_key(source, objects, &path.backend, &backend_field, diagnostics)?;
    let value = path.path.as_deref().unwrap_or_default();
    let key = source.key;
    Some(Route {
        source,
        host: HostMatch::of(Some(host)),
        path: PathMatch::of(&path.path_type, value),
        written: format!(
            "{}/{}/{host}/{}/{value}",
            key.namespace, key.name, path.path_type
        ),
        field,
        backend,
    })
}

/// The pool key of a backend, warning when it is a resource backend (skipped) or names a
/// Service port that does not exist (kept: its pool has no members and answers 503).
pub(crate) fn backend_key(
    source: &Source<'_>,
    objects: &Objects,
    backend: &IngressBackend,
    field: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<PoolKey> {
    let Some(service) = &backend.service else {
        let message = "resource backends are not supported";
        let field = format!("{field}.resource");
        diagnostics.push(Diagnostic::warning(source.object.clone(), field, message));
        return None;
    };
    let key = PoolKey::of(&source.key.namespace, service)?;
    if let Err(err) = resolve(objects, &key) {
        diagnostics.push(err.diagnostic(&source.object, field));
    }
    Some(key)
}
