//! ingress-nginx's default backend in a route: the request it answers in place of a pool
//! without ready members, and the error page it serves for an intercepted status
//! (`custom-http-errors`), each with the headers ingress-nginx sends it.

use super::ProxyBody;
use super::conn::{Conn, host_value};
use crate::access::{Entry, X_REQUEST_ID};
use crate::limits::Inbound;
use crate::route::CompiledErrors;
use http::header::{ACCEPT, HOST, HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response};

static X_CODE: HeaderName = HeaderName::from_static("x-code");
static X_FORMAT: HeaderName = HeaderName::from_static("x-format");
static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
/// In the order of [`CompiledErrors::fields`].
static FIELDS: [HeaderName; 4] = [
    HeaderName::from_static("x-namespace"),
    HeaderName::from_static("x-ingress-name"),
    HeaderName::from_static("x-service-name"),
    HeaderName::from_static("x-service-port"),
];

/// What the default backend is told of the client's request, taken before the route changes
/// it (a rewrite): nginx's `$request_uri`, `$http_accept`, `$req_id` and `Host`.
pub(super) struct Asked {
    original_uri: Option<HeaderValue>,
    format: Option<HeaderValue>,
    request_id: Option<HeaderValue>,
    host: Option<HeaderValue>,
}

impl Asked {
    pub(super) fn of<B>(req: &Request<B>) -> Self {
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        Asked {
            original_uri: HeaderValue::from_str(target).ok(),
            format: req.headers().get(ACCEPT).cloned(),
            request_id: req.headers().get(&X_REQUEST_ID).cloned(),
            host: host_value(req),
        }
    }
}

/// Sets the default backend's headers for an answer with `code` on `headers`.
pub(super) fn mark(errors: &CompiledErrors, asked: &Asked, code: u16, headers: &mut HeaderMap) {
    headers.insert(&X_CODE, HeaderValue::from(code));
    let format = asked.format.clone();
    let format = format.unwrap_or_else(|| HeaderValue::from_static("text/html"));
    headers.insert(&X_FORMAT, format);
    if let Some(uri) = &asked.original_uri {
        headers.insert(&X_ORIGINAL_URI, uri.clone());
    }
    for (name, value) in FIELDS.iter().zip(&errors.fields) {
        headers.insert(name, value.clone());
    }
    if let Some(id) = &asked.request_id {
        headers.insert(&X_REQUEST_ID, id.clone());
    }
}

impl Conn {
    /// The default backend's page for `original`, an answer whose status `errors` intercepts:
    /// `GET /` with the default backend's headers, its answer served with the original
    /// status. When the default backend cannot answer, the original answer stands.
    pub(super) async fn error_page(
        &self,
        errors: &CompiledErrors,
        asked: &Asked,
        original: Response<ProxyBody>,
        entry: &mut Entry,
    ) -> Response<ProxyBody> {
        let status = original.status();
        let mut req = Request::new(Inbound::Empty);
        *req.uri_mut() = http::Uri::from_static("/");
        let headers = req.headers_mut();
        if let Some(host) = &asked.host {
            headers.insert(HOST, host.clone());
        }
        mark(errors, asked, status.as_u16(), headers);
        match self.forward(&errors.pool, req, entry, None).await {
            Ok(mut page) => {
                errors.pool.metrics.record(page.status());
                *page.status_mut() = status;
                page
            }
            Err(error) => {
                tracing::debug!(%error, code = status.as_u16(), "no error page; the answer stands");
                original
            }
        }
    }
}
