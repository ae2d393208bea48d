//! Pure parsing of request paths into what they address; no I/O.
//!
//! Accepted: `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/status]]`,
//! `/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/status]]`, discovery (`/api`,
//! `/apis`, `/api/v1`, `/apis/{group}/{version}`) and `/version`.

use crate::resources::{self, TypeId};

/// What a request path addresses.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: the named groups.
    Groups,
    /// `/api/v1` or `/apis/{group}/{version}`: the resources of one group version.
    GroupVersion {
        group: String,
        version: String,
    },
    Object(Target),
}

/// A collection (no name) or one object, in one namespace or all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub ty: TypeId,
    /// `Some` when the path names a namespace; `None` is all namespaces or a cluster-scoped type.
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The `/status` subresource.
    pub status: bool,
}

/// The route of `path`, or `None` when nothing is served there (a 404).
pub fn parse(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    if segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    match segments.as_slice() {
        ["version"] => Some(Route::Version),
        ["api"] => Some(Route::CoreVersions),
        ["apis"] => Some(Route::Groups),
        ["api", version, rest @ ..] => group_route("", version, rest),
        ["apis", group, version, rest @ ..] => group_route(group, version, rest),
        _ => None,
    }
}

/// The API group and version a route addresses, if it addresses one group version's objects
/// or discovery.
pub fn group_version(route: &Route) -> Option<(&str, &str)> {
    match route {
        Route::GroupVersion { group, version } => Some((group, version)),
        Route::Object(target) => {
            let ty = resources::get(target.ty);
            Some((ty.group, ty.version))
        }
        _ => None,
    }
}

fn group_route(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    if rest.is_empty() {
        let known = resources::TABLE
            .iter()
            .any(|t| t.group == group && t.version == version);
        return known.then(|| Route::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        });
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (plural, name, status) = match rest {
        [plural] => (*plural, None, false),
        [plural, name] => (*plural, Some(*name), false),
        [plural, name, "status"] => (*plural, Some(*name), true),
        _ => return None,
    };
    let ty = resources::by_path(group, version, plural)?;
    let def = resources::get(ty);
    if (namespace.is_some() && !def.namespaced) || (status && !def.status) {
        return None;
    }
    Some(Route::Object(Target {
        ty,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Option<Target> {
        match parse(path) {
            Some(Route::Object(t)) => Some(t),
            _ => None,
        }
    }

    #[test]
    fn namespaced_status_path_names_everything() {
        let t = target("/apis/networking.k8s.io/v1/namespaces/web/ingresses/site/status");
        let t = t.expect("a target");
        assert_eq!(resources::get(t.ty).kind, "Ingress");
        assert_eq!(t.namespace.as_deref(), Some("web"));
        assert_eq!(t.name.as_deref(), Some("site"));
        assert!(t.status);
    }

    #[test]
    fn namespaces_collection_and_one_namespace_are_objects() {
        let all = target("/api/v1/namespaces").expect("collection");
        assert_eq!((all.namespace, all.name), (None, None));
        let one = target("/api/v1/namespaces/web").expect("object");
        assert_eq!(one.name.as_deref(), Some("web"));
    }

    #[test]
    fn unknown_or_misscoped_paths_are_not_found() {
        assert_eq!(target("/api/v1/pods"), None);
        assert_eq!(
            target("/apis/networking.k8s.io/v1/namespaces/a/ingressclasses"),
            None
        );
        assert_eq!(target("/api/v1/namespaces/a/secrets/s/status"), None);
        assert_eq!(target("/api/v1/namespaces/a/secrets/s/extra/more"), None);
        assert_eq!(parse("/api//v1"), None);
        assert_eq!(parse("/apis/example.com/v1"), None);
    }

    #[test]
    fn discovery_paths_route() {
        assert_eq!(parse("/version"), Some(Route::Version));
        assert_eq!(parse("/api"), Some(Route::CoreVersions));
        assert!(matches!(
            parse("/apis/coordination.k8s.io/v1"),
            Some(Route::GroupVersion { .. })
        ));
    }
}
