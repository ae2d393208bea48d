//! `/version` and the legacy discovery documents (`/api`, `/apis`, `/api/v1`,
//! `/apis/{group}/{version}`), generated from the resource table. Aggregated discovery is not
//! served.

use crate::paths::Route;
use crate::resources::{self, ResourceType, TABLE};
use crate::status::ApiError;
use http::Method;
use serde_json::{Value, json};

/// The Kubernetes version the fake claims to be.
pub const MINOR: &str = "34";

/// The discovery document at `route`; groups in `hidden` are not listed (their paths are not
/// served: `api::dispatch` answers 404 before asking here).
pub fn answer(route: &Route, method: &Method, hidden: &[String]) -> Result<Value, ApiError> {
    if method != Method::GET {
        return Err(ApiError::new(405, "discovery is read-only"));
    }
    Ok(match route {
        Route::Version => version(),
        Route::CoreVersions => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [],
        }),
        Route::Groups => groups(hidden),
        Route::GroupVersion { group, version } => resources(group, version),
        Route::Object(_) => return Err(ApiError::new(404, "not a discovery path")),
    })
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": MINOR,
        "gitVersion": format!("v1.{MINOR}.0-portico-fake"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Every named group not hidden, with its versions in the table's order; the first (`v1`) is
/// the preferred one.
fn groups(hidden: &[String]) -> Value {
    let mut names: Vec<&str> = Vec::new();
    let named = TABLE
        .iter()
        .filter(|t| !resources::hidden(hidden, t.group, t.version));
    for group in named.map(|t| t.group).filter(|g| !g.is_empty()) {
        if !names.contains(&group) {
            names.push(group);
        }
    }
    let groups: Vec<Value> = names
        .iter()
        .map(|name| {
            let mut versions: Vec<&str> = Vec::new();
            let served = TABLE
                .iter()
                .filter(|t| !resources::hidden(hidden, t.group, t.version));
            for t in served.filter(|t| t.group == *name) {
                if !versions.contains(&t.version) {
                    versions.push(t.version);
                }
            }
            let versions: Vec<Value> = (versions.iter())
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            let preferred = versions[0].clone();
            json!({"name": name, "versions": versions, "preferredVersion": preferred})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resources(group: &str, version: &str) -> Value {
    let types = TABLE
        .iter()
        .filter(|t| t.group == group && t.version == version);
    let mut list = Vec::new();
    for t in types {
        list.push(resource(
            t,
            t.plural,
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
        ));
        if t.status {
            list.push(resource(
                t,
                &format!("{}/status", t.plural),
                &["get", "patch", "update"],
            ));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list})
}

fn resource(t: &ResourceType, name: &str, verbs: &[&str]) -> Value {
    json!({
        "name": name,
        "singularName": t.kind.to_lowercase(),
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": verbs,
    })
}
