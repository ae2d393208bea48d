//! `auth-url` and its settings (`auth-method`, `auth-signin`, `auth-signin-redirect-param`,
//! `auth-response-headers`, `auth-request-redirect`). An `auth-url` that cannot be served is
//! a warning and the Ingress's paths answer 503: a request is never let through unchecked.

use super::{Reader, parse};
use portico_model::ExternalAuth;

/// The external auth of an Ingress: none when `auth-url` is unset, `Err(())` when it is set
/// and cannot be served (its paths then refuse every request).
pub(super) fn external_auth(r: &mut Reader<'_>) -> Option<Result<ExternalAuth, ()>> {
    r.get("auth-url")?;
    let url = r.value("auth-url", url);
    let method = r.value("auth-method", method);
    let signin = r.value("auth-signin", signin);
    let param = r.value("auth-signin-redirect-param", parse::cookie_name);
    let headers = r.value("auth-response-headers", header_names);
    let redirect = r.value("auth-request-redirect", parse::header_value);
    let Some(url) = url else {
        if let Some((name, _)) = r.get("auth-url") {
            r.warn(
                &name,
                "every request of this Ingress is refused (503) until it is valid",
            );
        }
        return Some(Err(()));
    };
    Some(Ok(ExternalAuth {
        url,
        method,
        signin,
        signin_redirect_param: param.unwrap_or_else(|| "rd".to_owned()),
        response_headers: headers.unwrap_or_default(),
        request_redirect: redirect,
    }))
}

/// An `http://` URL without nginx variables.
fn url(v: &str) -> Result<String, String> {
    let Some(rest) = v.strip_prefix("http://") else {
        return Err(if v.starts_with("https://") {
            "https:// auth services are not served yet: name the Service over http://".to_owned()
        } else {
            "must be an http:// URL".to_owned()
        });
    };
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    if host.is_empty() || v.contains('$') || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be an http:// URL with a host and without nginx variables".to_owned());
    }
    Ok(v.to_owned())
}

fn method(v: &str) -> Result<String, String> {
    let ok = !v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_uppercase());
    if ok {
        Ok(v.to_owned())
    } else {
        Err("must be an HTTP method such as GET or POST".to_owned())
    }
}

/// The variables `auth-signin` may use.
const SIGNIN_VARIABLES: [&str; 4] = ["$escaped_request_uri", "$request_uri", "$scheme", "$host"];

fn signin(v: &str) -> Result<String, String> {
    let absolute = v.starts_with("http://") || v.starts_with("https://");
    let mut rest = v;
    while let Some(at) = rest.find('$') {
        rest = &rest[at..];
        let Some(var) = SIGNIN_VARIABLES.iter().find(|var| rest.starts_with(**var)) else {
            return Err(
                "the only nginx variables served are $host, $scheme, $request_uri and \
                 $escaped_request_uri"
                    .to_owned(),
            );
        };
        rest = &rest[var.len()..];
    }
    if absolute && v.len() <= 2048 && v.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(v.to_owned())
    } else {
        Err("must be an http:// or https:// URL without spaces".to_owned())
    }
}

fn header_names(v: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = (v.split(',').map(str::trim))
        .filter(|n| !n.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if names.iter().all(|n| parse::is_token(n)) {
        Ok(names)
    } else {
        Err("must be a comma-separated list of header names".to_owned())
    }
}
