//! ReferenceGrant: which objects of other namespaces may refer to objects of its own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A ReferenceGrant (namespaced): objects of the kinds in `from` (in their namespaces) may
/// refer to objects of the kinds in `to` in the grant's own namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrant {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ReferenceGrantSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantSpec {
    pub from: Vec<ReferenceGrantFrom>,
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceGrantFrom {
    /// The empty string is the core group.
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceGrantTo {
    /// The empty string is the core group.
    pub group: String,
    pub kind: String,
    /// Unset: every object of the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ReferenceGrant {
    /// Whether a `from_kind` of `from_group` in `from_namespace` may refer to the object
    /// `to_name` of `to_kind` (`to_group`) in the grant's namespace.
    pub fn permits(
        &self,
        (from_group, from_kind, from_namespace): (&str, &str, &str),
        (to_group, to_kind, to_name): (&str, &str, &str),
    ) -> bool {
        let from =
            self.spec.from.iter().any(|f| {
                f.group == from_group && f.kind == from_kind && f.namespace == from_namespace
            });
        let to = self.spec.to.iter().any(|t| {
            t.group == to_group
                && t.kind == to_kind
                && t.name.as_deref().is_none_or(|n| n == to_name)
        });
        from && to
    }
}
