//! Routes: one per (Ingress, rule host, path, pathType), before merging and ordering.

use crate::annotations::Upstream;
use crate::backend::{PoolKey, resolve};
use crate::pool::pool_id;
use crate::source::{ClassIds, Source};
use crate::{KeptBackend, KeptIngress, ObjectKey, Objects};
use portico_model::{CompareType, Diagnostic, L7PolicyId, L7RuleId, ListenerId, ObjectRef, PoolId};
use std::fmt;
use std::sync::Arc;

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
    pub(crate) fn of(host: Option<&str>) -> Self {
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

/// One route of a prepared Ingress, with every id it needs already derived.
#[derive(Debug)]
pub(crate) struct RouteSpec {
    pub host: HostMatch,
    pub path: PathMatch,
    /// `(i, j)` of `spec.rules[i].http.paths[j]`.
    pub position: (usize, usize),
    pub backend: Backend,
    /// The ids of its policy on the HTTP listener.
    pub http: PolicyIds,
    /// The ids of its policy on the TERMINATED_HTTPS listener.
    pub https: PolicyIds,
}

/// The ids of one route's policy on one listener and of the policy's rules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PolicyIds {
    pub policy: L7PolicyId,
    pub host_rule: Option<L7RuleId>,
    pub path_rule: L7RuleId,
}

impl PolicyIds {
    /// The HTTP listener's: derived from the route as written.
    fn http(listener: ListenerId, written: &str, has_host: bool) -> Self {
        let policy = L7PolicyId::derive(&format!("{listener}/policy/{written}"));
        PolicyIds {
            host_rule: has_host.then(|| L7RuleId::derive(&format!("{policy}/host"))),
            path_rule: L7RuleId::derive(&format!("{policy}/path")),
            policy,
        }
    }

    /// The same route's on the TERMINATED_HTTPS listener: derived from the HTTP ones.
    fn https(listener: ListenerId, http: &PolicyIds) -> Self {
        let policy = L7PolicyId::derive(&format!("{listener}/policy/{}", http.policy));
        let rule = |r: L7RuleId| L7RuleId::derive(&format!("{policy}/rule/{r}"));
        PolicyIds {
            host_rule: http.host_rule.map(rule),
            path_rule: rule(http.path_rule),
            policy,
        }
    }
}

impl RouteSpec {
    /// `spec.rules[i].http.paths[j]`: only needed for diagnostics, so made on demand.
    pub(crate) fn field(&self) -> String {
        let (i, j) = self.position;
        format!("spec.rules[{i}].http.paths[{j}]")
    }
}

/// A route being merged and ordered: a route of a prepared Ingress, and the route of the
/// canary Ingress for the same host and path, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route<'a> {
    pub source: &'a Source,
    pub spec: &'a RouteSpec,
    pub canary: Option<Canaried<'a>>,
}

/// The route of a canary Ingress (`canary: "true"`) attached to a main route.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Canaried<'a> {
    pub source: &'a Source,
    pub spec: &'a RouteSpec,
}

/// A backend: the Service port it names and the pool that serves it on this load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backend {
    pub key: PoolKey,
    pub pool: PoolId,
}

impl Backend {
    pub(crate) fn new(ids: &ClassIds, key: PoolKey) -> Self {
        let pool = pool_id(ids.load_balancer, &key);
        Backend { key, pool }
    }
}

/// Everything a backend lookup leaves behind: the Services named (what the prepared Ingress
/// depends on) and the warnings.
#[derive(Debug, Default)]
pub(crate) struct Lookups {
    pub services: Vec<ObjectKey>,
    pub diagnostics: Vec<Diagnostic>,
    /// The Ingress's upstream annotations, which every pool it names gets.
    pub upstream: Arc<Upstream>,
}

/// The routes of one served Ingress in YAML order.
pub(crate) fn routes(
    key: &ObjectKey,
    object: &ObjectRef,
    ingress: &KeptIngress,
    ids: &ClassIds,
    objects: &Objects,
    lookups: &mut Lookups,
) -> Vec<RouteSpec> {
    let mut out = Vec::new();
    for (i, (rule, paths)) in ingress.paths().enumerate() {
        let host = rule.host.as_deref().unwrap_or_default();
        for (j, path) in paths.iter().enumerate() {
            let field = || format!("spec.rules[{i}].http.paths[{j}].backend");
            let Some(backend) = backend_key(key, object, objects, &path.backend, field, lookups)
            else {
                continue;
            };
            let value = path.path.as_deref().unwrap_or_default();
            let written = format!(
                "{}/{}/{host}/{}/{value}",
                key.namespace,
                key.name,
                path.path_type.as_str()
            );
            let host = HostMatch::of(Some(host));
            let http = PolicyIds::http(ids.listener, &written, host != HostMatch::Any);
            out.push(RouteSpec {
                host,
                path: PathMatch::of(path.path_type.as_str(), value),
                position: (i, j),
                backend: Backend::new(ids, backend),
                https: PolicyIds::https(ids.https_listener, &http),
                http,
            });
        }
    }
    // Kept for as long as the Ingress is unchanged: no spare capacity.
    out.shrink_to_fit();
    out
}

/// The pool key of a backend, warning when it is a resource backend (skipped) or names a
/// Service port that does not exist (kept: its pool has no members and answers 503).
/// `field` names the backend, e.g. `spec.defaultBackend`.
pub(crate) fn backend_key(
    key: &ObjectKey,
    object: &ObjectRef,
    objects: &Objects,
    backend: &KeptBackend,
    field: impl FnOnce() -> String,
    lookups: &mut Lookups,
) -> Option<PoolKey> {
    let Some(service) = &backend.service else {
        let message = "resource backends are not supported";
        let field = format!("{}.resource", field());
        let warning = Diagnostic::warning(object.clone(), field, message);
        lookups.diagnostics.push(warning);
        return None;
    };
    let pool_key = PoolKey::of(&key.namespace, service, &lookups.upstream)?;
    if let Err(err) = resolve(objects, &pool_key) {
        lookups.diagnostics.push(err.diagnostic(object, &field()));
    }
    lookups.services.push(pool_key.service.clone());
    Some(pool_key)
}
