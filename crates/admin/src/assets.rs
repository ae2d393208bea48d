//! The dashboard's static files, built into the binary: one HTML page, its stylesheet and its
//! script. The script reads the JSON API with `fetch`; nothing is generated per request.
//! Every answer carries a strict Content-Security-Policy (no inline script or style, no
//! other origin), so user strings that reach the page can only ever be text.

use crate::routes::{Body, respond, text};
use http::{HeaderValue, Response, StatusCode, header};

const INDEX: &str = include_str!("../assets/index.html");
const CSS: &str = include_str!("../assets/dashboard.css");
const JS: &str = include_str!("../assets/dashboard.js");
const ICON: &str = include_str!("../assets/favicon.svg");

/// What every dashboard file is served with.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

pub(crate) fn index() -> Response<Body> {
    secured(respond(StatusCode::OK, "text/html; charset=utf-8", INDEX))
}

/// `/assets/NAME`.
pub(crate) fn asset(name: &str) -> Response<Body> {
    let (content_type, body) = match name {
        "dashboard.css" => ("text/css; charset=utf-8", CSS),
        "dashboard.js" => ("text/javascript; charset=utf-8", JS),
        "favicon.svg" => ("image/svg+xml", ICON),
        _ => return text(StatusCode::NOT_FOUND, "not found\n"),
    };
    secured(respond(StatusCode::OK, content_type, body))
}

fn secured(mut resp: Response<Body>) -> Response<Body> {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
