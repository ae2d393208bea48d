//! A route's options applied to a request on hyper's path (the own HTTP/1.1 path declines
//! routes with options): the rewrite of its target and `X-Forwarded-Prefix`; CORS (the
//! preflight answered here, the fields set on the members' answers). The upstream
//! `Host` is set where the forwarding headers are (`conn.rs`, after `X-Forwarded-Host` took
//! the client's).

use super::ProxyBody;
use crate::route::{RouteOptions, rewrite};
use bytes::Bytes;
use http::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE,
    ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD, CONTENT_LENGTH, CONTENT_TYPE,
    HeaderMap, HeaderName, HeaderValue, ORIGIN,
};
use http::uri::{PathAndQuery, Uri};
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};

static X_FORWARDED_PREFIX: HeaderName = HeaderName::from_static("x-forwarded-prefix");

/// Rewrites `req`'s target as the route says (nginx's `rewrite … break`), with its
/// `X-Forwarded-Prefix`; a target the rewrite would make invalid is left as it was.
pub(super) fn before<B>(options: &RouteOptions, req: &mut Request<B>) {
    let Some(r) = &options.rewrite else {
        return;
    };
    let uri = req.uri();
    let Some(target) = rewrite(&r.pattern, &r.target, uri.path(), uri.query()) else {
        return;
    };
    let Ok(path) = target.parse::<PathAndQuery>() else {
        tracing::debug!(%target, "a rewritten target that is not a valid request target: kept the original");
        return;
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path);
    if let Ok(uri) = Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
    if let Some(prefix) = &r.forwarded_prefix {
        req.headers_mut()
            .insert(X_FORWARDED_PREFIX.clone(), prefix.clone());
    }
}

/// The `Access-Control-Allow-Origin` a request gets from the route's CORS settings, if any:
/// none when CORS is off for the route or its origin is not allowed.
pub(super) fn cors_origin<B>(
    options: Option<&RouteOptions>,
    req: &Request<B>,
) -> Option<HeaderValue> {
    let cors = options?.cors.as_ref()?;
    let origin = req.headers().get(ORIGIN).and_then(|o| o.to_str().ok());
    let allowed = cors.allow_origin(origin)?;
    HeaderValue::from_str(allowed).ok()
}

/// ingress-nginx's answer to an `OPTIONS` request whose origin is allowed: 204 with the CORS
/// fields, without asking the members (the Gateway API's: 200, and a `*` list of methods or
/// headers answers those `asked` for).
pub(super) fn preflight(
    options: &RouteOptions,
    origin: HeaderValue,
    asked: &HeaderMap,
) -> Response<ProxyBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::new())));
    let gateway_api = options.cors.as_ref().is_some_and(|c| c.gateway_api);
    *response.status_mut() = if gateway_api {
        StatusCode::OK
    } else {
        StatusCode::NO_CONTENT
    };
    let headers = response.headers_mut();
    cors_fields(options, origin, headers);
    if gateway_api {
        echo_wildcards(asked, headers);
    }
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    headers.insert(CONTENT_TYPE, plain);
    headers.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// A `*` among the allowed methods or headers answers what the preflight asks for.
fn echo_wildcards(asked: &HeaderMap, headers: &mut HeaderMap) {
    let pairs = [
        (ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_REQUEST_METHOD),
        (ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_REQUEST_HEADERS),
    ];
    for (allowed, requested) in pairs {
        let star = headers.get(&allowed).is_some_and(|v| v.as_bytes() == b"*");
        if let (true, Some(value)) = (star, asked.get(&requested)) {
            headers.insert(allowed, value.clone());
        }
    }
}

/// Sets the CORS fields on a response (replacing the members' own, as ingress-nginx's
/// `more_set_headers` does).
pub(super) fn cors_fields(options: &RouteOptions, origin: HeaderValue, headers: &mut HeaderMap) {
    let Some(cors) = &options.cors else {
        return;
    };
    let value = |s: &str| HeaderValue::from_str(s).ok();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    if cors.credentials {
        let yes = HeaderValue::from_static("true");
        headers.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, yes);
    }
    let fields = [
        (ACCESS_CONTROL_ALLOW_METHODS, value(&cors.methods)),
        (ACCESS_CONTROL_ALLOW_HEADERS, value(&cors.headers)),
        (ACCESS_CONTROL_EXPOSE_HEADERS, value(&cors.expose_headers)),
        (ACCESS_CONTROL_MAX_AGE, value(&cors.max_age_s.to_string())),
    ];
    for (name, value) in fields {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            headers.insert(name, value);
        }
    }
}
