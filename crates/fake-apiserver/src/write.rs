//! The write verbs over HTTP: create (POST), replace (PUT), patch (PATCH), delete (DELETE one)
//! and deletecollection.
//!
//! For a type with a `/status` subresource, writes to the main resource keep the stored status
//! and writes to `/status` change only the status (and are the only way to change it).
//! `dryRun=All` validates and answers without storing.

use crate::api::{Call, Reply};
use crate::meta;
use crate::patch::{self, PatchKind};
use crate::paths::Target;
use crate::query::Query;
use crate::resources::{self, ResourceType};
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::{Key, Preconditions};
use serde_json::{Value, json};

/// The store key a named target addresses.
pub fn key(target: &Target) -> Key {
    let namespace = target.namespace.clone().unwrap_or_default();
    (
        target.ty,
        namespace,
        target.name.clone().unwrap_or_default(),
    )
}

pub fn create(
    shared: &Shared,
    target: &Target,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    if def.namespaced && target.namespace.is_none() {
        return Err(ApiError::new(
            405,
            "a namespaced object is created in its namespace's collection",
        ));
    }
    let mut object = parse_object(body, def)?;
    if let Some(ns) = &target.namespace {
        if meta::namespace(&object).is_some_and(|got| got != ns) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta::set(&mut object, "namespace", ns.clone());
    }
    let created = shared.store.create(target.ty, object, query.dry_run)?;
    Ok(Reply::Json(201, created))
}

pub fn replace(
    shared: &Shared,
    target: &Target,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    let proposed = parse_object(body, def)?;
    let updated = shared.store.update(&key(target), query.dry_run, |old| {
        check_uid(def, old, &proposed)?;
        Ok(shape(def, target.status, old, proposed))
    })?;
    Ok(Reply::Json(200, updated))
}

pub fn patch(
    shared: &Shared,
    target: &Target,
    query: &Query,
    call: &Call<'_>,
) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    let kind = PatchKind::from_content_type(call.content_type)?;
    let updated = shared.store.update(&key(target), query.dry_run, |old| {
        let patched = patch::apply(kind, old, call.body)?;
        check_uid(def, old, &patched)?;
        Ok(shape(def, target.status, old, patched))
    })?;
    Ok(Reply::Json(200, updated))
}

/// Honours `DeleteOptions.preconditions` and `dryRun` from the body; answers 200 with the object.
pub fn delete(
    shared: &Shared,
    target: &Target,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let options: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let text = |v: &Value| v.as_str().map(str::to_string);
    let pre = Preconditions {
        uid: text(&options["preconditions"]["uid"]),
        resource_version: text(&options["preconditions"]["resourceVersion"]),
    };
    let dry_run = query.dry_run
        || options["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    let gone = shared.store.delete(&key(target), &pre, dry_run)?;
    Ok(Reply::Json(200, gone))
}

/// Deletes every object the selectors match in the target's namespace (or all); answers the
/// list of deleted objects.
pub fn delete_collection(
    shared: &Shared,
    target: &Target,
    query: &Query,
) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    let (_, items) = shared
        .store
        .list(target.ty, target.namespace.as_deref(), None)?;
    let mut deleted = Vec::new();
    for object in items
        .iter()
        .filter(|o| query.labels.matches(o) && query.fields.matches(o))
    {
        let Some(key) = crate::store::key_of(target.ty, object) else {
            continue;
        };
        if let Ok(gone) = shared
            .store
            .delete(&key, &Preconditions::default(), query.dry_run)
        {
            deleted.push(gone);
        }
    }
    let rv = shared.store.current().to_string();
    let list = json!({"apiVersion": def.api_version(), "kind": format!("{}List", def.kind), "metadata": {"resourceVersion": rv}, "items": deleted});
    Ok(Reply::Json(200, list))
}

/// A request body that must be an object of `def`'s type; 400 otherwise.
fn parse_object(body: &[u8], def: &ResourceType) -> Result<Value, ApiError> {
    let object: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if !object.is_object() || !(object["metadata"].is_object() || object["metadata"].is_null()) {
        return Err(ApiError::bad_request(
            "the body must be a JSON object with an object metadata",
        ));
    }
    let api_version = def.api_version();
    let wrong = |field: &str, want: &str| object[field].as_str().is_some_and(|got| got != want);
    if wrong("apiVersion", &api_version) || wrong("kind", def.kind) {
        let message = format!("the object is not a {} of {api_version}", def.kind);
        return Err(ApiError::bad_request(message));
    }
    Ok(object)
}

/// A proposed object naming another uid is a precondition failure.
fn check_uid(def: &ResourceType, old: &Value, proposed: &Value) -> Result<(), ApiError> {
    match meta::field(proposed, "uid") {
        Some(uid) if Some(uid) != meta::field(old, "uid") => {
            let name = meta::name(old).unwrap_or_default();
            Err(ApiError::conflict(def, name))
        }
        _ => Ok(()),
    }
}

/// The status-subresource rule: `/status` takes only the proposed status (and resourceVersion,
/// the precondition); the main resource keeps the stored status.
fn shape(def: &ResourceType, to_status: bool, old: &Value, proposed: Value) -> Value {
    if to_status {
        let mut out = old.clone();
        replace_field(&mut out, "status", proposed.get("status").cloned());
        match meta::field(&proposed, "resourceVersion") {
            Some(rv) => meta::set(&mut out, "resourceVersion", rv.to_string()),
            None => meta::remove(&mut out, "resourceVersion"),
        }
        out
    } else if def.status {
        let mut out = proposed;
        replace_field(&mut out, "status", old.get("status").cloned());
        out
    } else {
        proposed
    }
}

fn replace_field(object: &mut Value, field: &str, value: Option<Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(value) => map.insert(field.to_string(), value),
            None => map.remove(field),
        };
    }
}
