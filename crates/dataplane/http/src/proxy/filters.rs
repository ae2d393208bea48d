//! A route's Gateway API filters applied on hyper's path (the own HTTP/1.1 path declines
//! routes with options): the request's header changes and new path before it is forwarded,
//! its copies to the mirrors (their answers ignored), the answer's header changes, and the
//! redirect a route answers with.

use super::conn::{Conn, origin_form};
use super::tries::{connect_timeout, send_timeout};
use crate::limits::ClientBody;
use crate::route::RequestInfo;
use crate::route::filters::Filters;
use http::uri::{PathAndQuery, Uri};
use http::{HeaderMap, Request, Version};

/// The request's header changes and its new path (the query kept).
pub(super) fn before<B>(filters: &Filters, req: &mut Request<B>) {
    if let Some(changes) = &filters.request_headers {
        changes.apply(req.headers_mut());
    }
    let Some(rewrite) = &filters.path else {
        return;
    };
    let uri = req.uri();
    let path = rewrite.apply(uri.path());
    let target = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let Ok(target) = target.parse::<PathAndQuery>() else {
        tracing::debug!(%target, "a rewritten target that is not a valid request target: kept the original");
        return;
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(target);
    if let Ok(uri) = Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
}

/// The answer's header changes.
pub(super) fn after(filters: &Filters, headers: &mut HeaderMap) {
    if let Some(changes) = &filters.response_headers {
        changes.apply(headers);
    }
}

/// Sends a copy of `req` (as it will be forwarded: after [`before`]) to each mirror whose
/// share draws it, in a task of its own; the answers are dropped. A request with a body is
/// not copied: bodies are streamed to the members, not kept.
pub(super) fn mirror<B: hyper::body::Body>(conn: &Conn, filters: &Filters, req: &Request<B>) {
    if filters.mirrors.is_empty() || !req.body().is_end_stream() {
        return;
    }
    for mirror in filters.mirrors.iter().filter(|m| m.share.draw()) {
        let pool = mirror.pool.clone();
        let info = RequestInfo {
            headers: req.headers(),
            uri: req.uri(),
            client: conn.client_of(req),
        };
        let Some(pick) = pool.choose(&info, &[]) else {
            tracing::debug!(pool = %pool.id(), "no ready member to mirror a request to");
            continue;
        };
        let (body, _fault) = ClientBody::empty(&conn.proxy.limits);
        let mut copy = Request::new(body);
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.headers_mut() = req.headers().clone();
        let host = super::conn::host_value(req).unwrap_or(http::HeaderValue::from_static(""));
        conn.forwarded.apply(copy.headers_mut(), host.clone());
        let endpoint = pick.endpoint().clone();
        let (mut parts, body) = copy.into_parts();
        if endpoint.is_h2c() {
            super::conn::to_h2c(&mut parts, &host, &endpoint, false);
        } else {
            origin_form(&mut parts.uri);
            parts.version = Version::HTTP_11;
        }
        let copy = Request::from_parts(parts, body);
        let timeouts = (connect_timeout(&pool), send_timeout(&pool));
        let read = conn.proxy.limits.upstream_timeout;
        tokio::spawn(async move {
            let sent = endpoint.send(copy, timeouts.0, timeouts.1);
            if let Ok(Ok(response)) = tokio::time::timeout(read, sent).await {
                // Read to its end, so that the connection can serve again.
                let _ = http_body_util::BodyExt::collect(response.into_body()).await;
            }
            drop(pick);
        });
    }
}
