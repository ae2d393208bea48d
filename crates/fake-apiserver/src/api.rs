//! Routing a request to its verb, and the read verbs: get, list (with selectors and pagination)
//! and watch.
//!
//! List semantics, as the real server: no `resourceVersion` is a consistent read of now (paged by
//! `limit`/`continue`, every page at the first page's resourceVersion); `resourceVersion=0` is
//! served whole "from cache", ignoring `limit`; `resourceVersion=N` with
//! `resourceVersionMatch=Exact` (or with `limit` and no match, the legacy form) is the state at
//! N, 410 Expired when N is older than the history kept; with `NotOlderThan` it is now. A
//! resourceVersion newer than now is answered 504 at once (the real server waits up to 3 s).

use crate::meta;
use crate::paths::{self, Route, Target};
use crate::query::Query;
use crate::resources;
use crate::server::Shared;
use crate::status::ApiError;
use crate::watch::{self, WatchBody};
use crate::{discovery, write};
use http::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// One request, as the handlers see it.
#[derive(Debug)]
pub struct Call<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: &'a str,
    pub content_type: Option<&'a str>,
    /// `Accept: ...;as=PartialObjectMetadata[List]`: answer with metadata only.
    pub meta_only: bool,
    pub body: &'a [u8],
}

/// A successful answer.
#[derive(Debug)]
pub enum Reply {
    Json(u16, Value),
    Watch(WatchBody),
}

pub fn dispatch(shared: &Shared, call: &Call<'_>) -> Result<Reply, ApiError> {
    let not_found = || ApiError::new(404, "the server could not find the requested resource");
    let route = paths::parse(call.path).ok_or_else(not_found)?;
    if paths::group_version(&route).is_some_and(|(g, v)| resources::hidden(&shared.hidden, g, v)) {
        return Err(not_found());
    }
    let target = match route {
        Route::Object(target) => target,
        other => {
            let answer = discovery::answer(&other, call.method, &shared.hidden);
            return answer.map(|v| Reply::Json(200, v));
        }
    };
    let query = Query::parse(call.query)?;
    let named = target.name.is_some();
    match (call.method.as_str(), named) {
        ("GET", true) => get(shared, &target, call.meta_only),
        ("GET", false) if query.watch => watch(shared, target, query, call.meta_only),
        ("GET", false) => list(shared, &target, &query, call.meta_only),
        ("POST", false) => write::create(shared, &target, &query, call.body),
        ("PUT", true) => write::replace(shared, &target, &query, call.body),
        ("PATCH", true) => write::patch(shared, &target, &query, call),
        ("DELETE", true) => write::delete(shared, &target, &query, call.body),
        ("DELETE", false) => write::delete_collection(shared, &target, &query),
        (method, _) => Err(ApiError::new(
            405,
            format!("the server does not allow this method on the requested resource: {method}"),
        )),
    }
}

fn get(shared: &Shared, target: &Target, meta_only: bool) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    let key = write::key(target);
    let object = shared
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(def, &key.2))?;
    Ok(Reply::Json(
        200,
        if meta_only {
            meta::partial(&object)
        } else {
            (*object).clone()
        },
    ))
}

/// Where a list is read and where its page starts.
struct ListPlan {
    at: Option<u64>,
    paged: bool,
    start_after: Option<(String, String)>,
}

fn plan(shared: &Shared, query: &Query) -> Result<ListPlan, ApiError> {
    if let Some(token) = &query.continue_token {
        if query.exact_version()?.is_some() {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (at, ns, name) = decode_continue(token)
            .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
        return Ok(ListPlan {
            at: Some(at),
            paged: true,
            start_after: Some((ns, name)),
        });
    }
    let version = query.exact_version()?;
    let any = query.resource_version.as_deref() == Some("0");
    let exact = match (query.resource_version_match.as_deref(), version) {
        (Some(_), None) if !any => {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        (Some("Exact"), _) => true,
        (Some("NotOlderThan"), _) => false,
        (Some(other), _) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: {other:?}"
            )));
        }
        (None, _) => query.limit.is_some(),
    };
    if let Some(v) = version.filter(|_| !exact)
        && v > shared.store.current()
    {
        return Err(ApiError::new(
            504,
            format!("Too large resource version: {v}"),
        ));
    }
    let at = version.filter(|_| exact);
    Ok(ListPlan {
        at,
        paged: query.limit.is_some() && !any,
        start_after: None,
    })
}

fn list(
    shared: &Shared,
    target: &Target,
    query: &Query,
    meta_only: bool,
) -> Result<Reply, ApiError> {
    let def = resources::get(target.ty);
    let plan = plan(shared, query)?;
    let (rv, items) = shared
        .store
        .list(target.ty, target.namespace.as_deref(), plan.at)
        .map_err(|e| {
            if query.continue_token.is_some() && e.code == 410 {
                expired_continue()
            } else {
                e
            }
        })?;
    let mut items: Vec<_> = items
        .into_iter()
        .filter(|o| query.labels.matches(o) && query.fields.matches(o))
        .collect();
    if let Some(after) = &plan.start_after {
        items.retain(|o| list_key(o) > *after);
    }
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(limit) = query.limit.filter(|_| plan.paged)
        && items.len() > limit
    {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let (ns, name) = items.last().map(|o| list_key(o)).unwrap_or_default();
        metadata["continue"] = format!("{rv}/{ns}/{name}").into();
        metadata["remainingItemCount"] = remaining.into();
    }
    let items: Vec<Value> = items
        .iter()
        .map(|o| {
            if meta_only {
                meta::partial(o)
            } else {
                (**o).clone()
            }
        })
        .collect();
    let (api_version, kind) = if meta_only {
        (
            "meta.k8s.io/v1".to_string(),
            "PartialObjectMetadataList".to_string(),
        )
    } else {
        (def.api_version(), format!("{}List", def.kind))
    };
    Ok(Reply::Json(
        200,
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "items": items}),
    ))
}

fn list_key(object: &Value) -> (String, String) {
    let ns = meta::namespace(object).unwrap_or_default().to_string();
    (ns, meta::name(object).unwrap_or_default().to_string())
}

fn decode_continue(token: &str) -> Option<(u64, String, String)> {
    let mut parts = token.splitn(3, '/');
    let rv = parts.next()?.parse().ok()?;
    Some((rv, parts.next()?.to_string(), parts.next()?.to_string()))
}

fn expired_continue() -> ApiError {
    ApiError::new(
        410,
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
    )
}

/// `sendInitialEvents=true` (streaming list) is supported: the current objects as `ADDED`, then a
/// bookmark annotated `k8s.io/initial-events-end`; like the real server it needs
/// `allowWatchBookmarks=true` and `resourceVersionMatch=NotOlderThan` (else 422).
fn watch(
    shared: &Shared,
    target: Target,
    query: Query,
    meta_only: bool,
) -> Result<Reply, ApiError> {
    let streaming = query.send_initial_events == Some(true);
    if streaming
        && (!query.bookmarks || query.resource_version_match.as_deref() != Some("NotOlderThan"))
    {
        return Err(ApiError::invalid(
            "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
        ));
    }
    let from = if streaming {
        None
    } else {
        query.exact_version()?
    };
    let skip_initial = from.is_none() && query.send_initial_events == Some(false);
    // Counted once subscribed, so a test that waits for the count can cut or write after it.
    let subscribed = shared.store.subscribe(target.ty, from);
    shared.watches_opened.fetch_add(1, Ordering::Relaxed);
    let mut sub = match subscribed {
        Ok(sub) => sub,
        Err(err) => return Ok(Reply::Watch(watch::error(&err))),
    };
    if skip_initial {
        sub.initial.clear();
    }
    let filter = watch::Filter {
        ty: target.ty,
        namespace: target.namespace,
        from: from.unwrap_or(sub.rv),
        query,
        meta_only,
    };
    let options = watch::Options {
        bookmark_every: Arc::clone(&shared.bookmark_every_ms),
        initial_events_end: streaming,
    };
    Ok(Reply::Watch(watch::start(sub, filter, options)))
}
