//! ingress-nginx's external auth (`auth-url`, nginx's `auth_request`) for the routes that
//! have it: the subrequest's head built from the client's request ([`subrequest`]), the
//! verdict on the auth service's answer ([`verdict`]) and the sign-in redirect
//! ([`signin_location`]) are pure; [`client`] sends the subrequest. Fails closed: anything
//! but a 2xx, 401 or 403 from the service (a timeout, a refused connection, a 5xx, a
//! redirect) answers 500.

pub(crate) mod basic;
pub(crate) mod client;

use http::header::{CONTENT_LENGTH, HOST, HeaderName, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use portico_model::ExternalAuth;

/// A route's external auth, compiled once per route table.
#[derive(Debug)]
pub(crate) struct Auth {
    pub(crate) uri: Uri,
    host: HeaderValue,
    method: Option<Method>,
    signin: Option<String>,
    redirect_param: String,
    pub(crate) response_headers: Vec<HeaderName>,
    request_redirect: Option<HeaderValue>,
}

impl Auth {
    /// `None` when the URL is not an `http://` URL with a host (the translator refuses those).
    pub(crate) fn compile(auth: &ExternalAuth) -> Option<Self> {
        let uri: Uri = auth.url.parse().ok()?;
        let host = HeaderValue::from_str(uri.authority()?.as_str()).ok()?;
        Some(Auth {
            host,
            method: auth.method.as_deref().and_then(|m| m.parse().ok()),
            signin: auth.signin.clone(),
            redirect_param: auth.signin_redirect_param.clone(),
            response_headers: (auth.response_headers.iter())
                .filter_map(|h| h.parse().ok())
                .collect(),
            request_redirect: (auth.request_redirect.as_deref())
                .and_then(|v| HeaderValue::from_str(v).ok()),
            uri,
        })
    }
}

/// What the client asked, as the subrequest reports it.
pub(crate) struct Original<'a> {
    pub(crate) method: &'a Method,
    /// The request target as received (path and query).
    pub(crate) target: &'a str,
    pub(crate) scheme: &'a str,
    pub(crate) host: &'a str,
    /// The client's header fields after the proxy's forwarding fields were set
    /// (`X-Forwarded-For` with the client appended, `-Proto`, `-Host`).
    pub(crate) headers: HeaderMap,
    pub(crate) client: &'a HeaderValue,
}

static X_ORIGINAL_URL: HeaderName = HeaderName::from_static("x-original-url");
static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
static X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
static X_SCHEME: HeaderName = HeaderName::from_static("x-scheme");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static X_SENT_FROM: HeaderName = HeaderName::from_static("x-sent-from");
static X_AUTH_REQUEST_REDIRECT: HeaderName = HeaderName::from_static("x-auth-request-redirect");

/// The subrequest's head, as ingress-nginx's auth location sends it: the client's header
/// fields without the body's, `Host` of the auth service, the original URL, URI and method,
/// the scheme, the client address, `X-Auth-Request-Redirect`.
pub(crate) fn subrequest(auth: &Auth, original: Original<'_>) -> Option<Request<()>> {
    let Original {
        method,
        target,
        scheme,
        host,
        mut headers,
        client,
    } = original;
    headers.remove(CONTENT_LENGTH);
    headers.remove(TRANSFER_ENCODING);
    headers.insert(HOST, auth.host.clone());
    let value = |s: &str| HeaderValue::from_str(s).ok();
    let url = value(&format!("{scheme}://{host}{target}"))?;
    headers.insert(X_ORIGINAL_URL.clone(), url);
    headers.insert(X_ORIGINAL_URI.clone(), value(target)?);
    headers.insert(X_ORIGINAL_METHOD.clone(), value(method.as_str())?);
    headers.insert(X_SCHEME.clone(), value(scheme)?);
    headers.insert(X_REAL_IP.clone(), client.clone());
    let sent_from = HeaderValue::from_static("nginx-ingress-controller");
    headers.insert(X_SENT_FROM.clone(), sent_from);
    let redirect = auth.request_redirect.clone().or_else(|| value(target))?;
    headers.insert(X_AUTH_REQUEST_REDIRECT.clone(), redirect);
    let mut request = Request::new(());
    *request.method_mut() = auth.method.clone().unwrap_or_else(|| method.clone());
    *request.uri_mut() = auth.uri.clone();
    *request.headers_mut() = headers;
    Some(request)
}

/// What the auth service's answer means for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    /// 401 or 403, returned to the client (a 401 as the sign-in redirect when there is one).
    Deny(u16),
    /// Anything else: 500.
    Error,
}

/// nginx's `auth_request`: 2xx allows, 401 and 403 deny, anything else is an error.
pub(crate) fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Allow,
        401 | 403 => Verdict::Deny(status),
        _ => Verdict::Error,
    }
}

/// Where a 401 redirects (302): `auth-signin` with its variables expanded and, unless it has
/// the parameter already, `?rd=` (or `&rd=`) and the original URL, percent-encoded.
pub(crate) fn signin_location(
    auth: &Auth,
    scheme: &str,
    host: &str,
    target: &str,
) -> Option<String> {
    let signin = auth.signin.as_deref()?;
    let escaped = escape(target);
    let url = signin
        .replace("$escaped_request_uri", &escaped)
        .replace("$request_uri", target)
        .replace("$scheme", scheme)
        .replace("$host", host);
    let param = format!("{}=", auth.redirect_param);
    if url.contains(&param) {
        return Some(url);
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    let original = escape(&format!("{scheme}://{host}{target}"));
    Some(format!("{url}{separator}{param}{original}"))
}

/// Percent-encoding of everything but unreserved characters (nginx's `escape_uri` for
/// arguments, as `$escaped_request_uri`).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(signin: Option<&str>) -> Auth {
        Auth::compile(&ExternalAuth {
            url: "http://auth.test:9000/check?x=1".into(),
            method: None,
            signin: signin.map(str::to_owned),
            signin_redirect_param: "rd".into(),
            response_headers: vec!["x-user".into()],
            request_redirect: None,
        })
        .unwrap()
    }

    #[test]
    fn the_subrequest_carries_the_original_request_without_its_body() {
        let mut headers = HeaderMap::new();
        headers.insert("content-length", "12".parse().unwrap());
        headers.insert("authorization", "Bearer t".parse().unwrap());
        headers.insert("host", "app.test".parse().unwrap());
        let client = HeaderValue::from_static("10.0.0.9");
        let original = Original {
            method: &Method::POST,
            target: "/a/b?c=d",
            scheme: "https",
            host: "app.test",
            headers,
            client: &client,
        };
        let req = subrequest(&auth(None), original).unwrap();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.uri(), "http://auth.test:9000/check?x=1");
        let h = req.headers();
        let get = |name: &str| h.get(name).map(|v| v.to_str().unwrap());
        assert_eq!(get("host"), Some("auth.test:9000"));
        assert_eq!(get("content-length"), None);
        assert_eq!(get("authorization"), Some("Bearer t"));
        assert_eq!(get("x-original-url"), Some("https://app.test/a/b?c=d"));
        assert_eq!(get("x-original-uri"), Some("/a/b?c=d"));
        assert_eq!(get("x-original-method"), Some("POST"));
        assert_eq!(get("x-real-ip"), Some("10.0.0.9"));
        assert_eq!(get("x-auth-request-redirect"), Some("/a/b?c=d"));
    }

    #[test]
    fn only_2xx_allows_and_only_401_and_403_deny() {
        assert_eq!(verdict(204), Verdict::Allow);
        assert_eq!(verdict(401), Verdict::Deny(401));
        assert_eq!(verdict(403), Verdict::Deny(403));
        for status in [302, 400, 404, 500, 503] {
            assert_eq!(verdict(status), Verdict::Error, "{status}");
        }
    }

    #[test]
    fn the_signin_redirect_carries_the_original_url() {
        let plain = auth(Some("https://login.test/start"));
        assert_eq!(
            signin_location(&plain, "http", "app.test", "/a?b=1").as_deref(),
            Some("https://login.test/start?rd=http%3A%2F%2Fapp.test%2Fa%3Fb%3D1")
        );
        let own = auth(Some("https://$host/oauth2/start?rd=$escaped_request_uri"));
        assert_eq!(
            signin_location(&own, "https", "app.test", "/x y").as_deref(),
            Some("https://app.test/oauth2/start?rd=%2Fx%20y")
        );
        assert_eq!(signin_location(&auth(None), "http", "h", "/"), None);
    }
}
