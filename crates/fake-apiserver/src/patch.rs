//! PATCH bodies: RFC 7386 merge patch, RFC 6902 JSON patch, and strategic merge patch treated as
//! a merge patch.
//!
//! Differs from the real server: a strategic merge patch replaces lists instead of merging them
//! by their patch keys, and `$patch`/`$retainKeys` directives are not understood; server-side
//! apply (`application/apply-patch+yaml`) is answered 415 Unsupported Media Type.

use crate::status::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    StrategicMerge,
}

impl PatchKind {
    /// The patch kind of a `Content-Type`; 415 for apply patches and anything unknown.
    pub fn from_content_type(content_type: Option<&str>) -> Result<Self, ApiError> {
        let media = content_type.unwrap_or_default();
        let media = media.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::StrategicMerge),
            _ => Err(ApiError::new(
                415,
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {media:?})"
                ),
            )),
        }
    }
}

/// `target` patched by `body`: 400 for a body that is not a patch of this kind, 422 when a JSON
/// patch operation fails (a failed `test`, a missing path).
pub fn apply(kind: PatchKind, target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut out = target.clone();
    match kind {
        PatchKind::Merge | PatchKind::StrategicMerge => {
            let patch: Value = parse(body)?;
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut out, &patch);
        }
        PatchKind::Json => {
            let patch: json_patch::Patch = parse(body)?;
            json_patch::patch(&mut out, &patch).map_err(|e| {
                ApiError::invalid(format!("the JSON patch could not be applied: {e}"))
            })?;
        }
    }
    Ok(out)
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid patch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> Value {
        json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"ports": [1, 2]}})
    }

    #[test]
    fn merge_patch_sets_removes_and_replaces_lists() {
        let body = br#"{"metadata": {"labels": {"x": null, "z": "3"}}, "spec": {"ports": [3]}}"#;
        let out = apply(PatchKind::StrategicMerge, &target(), body).expect("patched");
        assert_eq!(out["metadata"]["labels"], json!({"y": "2", "z": "3"}));
        assert_eq!(out["spec"]["ports"], json!([3]));
    }

    #[test]
    fn json_patch_runs_operations_and_fails_a_false_test() {
        let body = br#"[{"op": "test", "path": "/metadata/name", "value": "a"},
                        {"op": "add", "path": "/spec/ports/-", "value": 9},
                        {"op": "remove", "path": "/metadata/labels/x"},
                        {"op": "replace", "path": "/metadata/labels/y", "value": "4"}]"#;
        let out = apply(PatchKind::Json, &target(), body).expect("patched");
        assert_eq!(out["spec"]["ports"], json!([1, 2, 9]));
        assert_eq!(out["metadata"]["labels"], json!({"y": "4"}));
        let failing = br#"[{"op": "test", "path": "/metadata/name", "value": "b"}]"#;
        assert_eq!(
            apply(PatchKind::Json, &target(), failing)
                .err()
                .map(|e| e.code),
            Some(422)
        );
    }

    #[test]
    fn bad_bodies_and_media_types_are_refused() {
        assert_eq!(
            apply(PatchKind::Merge, &target(), b"{")
                .err()
                .map(|e| e.code),
            Some(400)
        );
        assert_eq!(
            apply(PatchKind::Merge, &target(), b"[]")
                .err()
                .map(|e| e.code),
            Some(400)
        );
        let apply_patch = PatchKind::from_content_type(Some("application/apply-patch+yaml"));
        assert_eq!(apply_patch.err().map(|e| e.code), Some(415));
        let merge =
            PatchKind::from_content_type(Some("application/merge-patch+json; charset=utf-8"));
        assert_eq!(merge.ok(), Some(PatchKind::Merge));
    }
}
