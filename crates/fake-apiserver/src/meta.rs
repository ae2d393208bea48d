//! Reading and stamping object metadata as the real server does on every write: `uid`,
//! `resourceVersion`, `creationTimestamp`, `generation`, `apiVersion` and `kind`.

use crate::resources::ResourceType;
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// A string field of `metadata`; `None` when missing, empty or not a string.
pub fn field<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"][key].as_str().filter(|s| !s.is_empty())
}

pub fn name(object: &Value) -> Option<&str> {
    field(object, "name")
}

pub fn namespace(object: &Value) -> Option<&str> {
    field(object, "namespace")
}

/// Sets `metadata.<key>`, creating `metadata` if needed; a no-op on a non-object (callers
/// reject those before).
pub fn set(object: &mut Value, key: &str, value: impl Into<Value>) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(key.to_string(), value.into());
    }
}

/// Removes `metadata.<key>`.
pub fn remove(object: &mut Value, key: &str) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove(key);
    }
}

/// Stamps a newly created object: type, uid, resourceVersion, creationTimestamp (if missing),
/// generation 1.
pub fn stamp_created(object: &mut Value, ty: &ResourceType, rv: u64) {
    stamp_type(object, ty);
    set(object, "uid", new_uid());
    set(object, "resourceVersion", rv.to_string());
    set(object, "generation", 1);
    if field(object, "creationTimestamp").is_none() {
        set(object, "creationTimestamp", now());
    }
}

/// Stamps a replacement of `old`: keeps uid and creationTimestamp, bumps generation when anything
/// but metadata and status changed.
pub fn stamp_updated(object: &mut Value, old: &Value, ty: &ResourceType, rv: u64) {
    stamp_type(object, ty);
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
    let generation = if spec_changed(old, object) {
        generation + 1
    } else {
        generation
    };
    for key in ["uid", "creationTimestamp"] {
        set(object, key, old["metadata"][key].clone());
    }
    set(object, "generation", generation);
    set(object, "resourceVersion", rv.to_string());
}

fn stamp_type(object: &mut Value, ty: &ResourceType) {
    if let Some(root) = object.as_object_mut() {
        root.insert("apiVersion".into(), ty.api_version().into());
        root.insert("kind".into(), ty.kind.into());
    }
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| match v {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Map<_, _>>(),
        _ => Map::new(),
    };
    strip(old) != strip(new)
}

/// A UUID-shaped id, unique within the process (not random: tests need no more).
fn new_uid() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("fa4e0000-0000-4000-8000-{n:012x}")
}

/// Now, in the API's second-precision RFC 3339 form.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The object as a `PartialObjectMetadata` (for `Accept: ...;as=PartialObjectMetadata`).
pub fn partial(object: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": object["metadata"].clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;

    fn lease_type() -> &'static ResourceType {
        resources::get(resources::by_kind("coordination.k8s.io/v1", "Lease").unwrap_or(0))
    }

    #[test]
    fn update_keeps_identity_and_counts_spec_generations() {
        let ty = lease_type();
        let mut old = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
        stamp_created(&mut old, ty, 5);
        assert_eq!(old["kind"], "Lease");
        assert_eq!(old["metadata"]["generation"], 1);

        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        relabelled["metadata"]["uid"] = json!("other");
        stamp_updated(&mut relabelled, &old, ty, 6);
        assert_eq!(relabelled["metadata"]["generation"], 1);
        assert_eq!(relabelled["metadata"]["uid"], old["metadata"]["uid"]);
        assert_eq!(relabelled["metadata"]["resourceVersion"], "6");

        let mut moved = old.clone();
        moved["spec"]["holderIdentity"] = json!("b");
        stamp_updated(&mut moved, &old, ty, 7);
        assert_eq!(moved["metadata"]["generation"], 2);
    }

    #[test]
    fn timestamps_are_second_precision_utc() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}
