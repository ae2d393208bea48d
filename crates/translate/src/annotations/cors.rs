//! `enable-cors` and its `cors-*` settings, with ingress-nginx's defaults and validation: an
//! origin that is not `scheme://host[:port]` (the host may start with `*.`), `null` or `*`
//! is reported and left out; bad methods or headers lists fall back to the defaults.

use super::{Reader, parse};
use portico_model::Cors;

const METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
const HEADERS: &str = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,\
                       Cache-Control,Content-Type,Range,Authorization";
const MAX_AGE_S: u64 = 1_728_000;

pub(super) fn cors(r: &mut Reader<'_>) -> Option<Cors> {
    let enabled = r.value("enable-cors", parse::bool_value).unwrap_or(false);
    let origins = origins(r);
    let methods = r.value("cors-allow-methods", |v| {
        list(v, false, "methods such as \"GET, POST\"")
    });
    let headers = r.value("cors-allow-headers", |v| list(v, false, "header names"));
    let expose = r.value("cors-expose-headers", |v| {
        list(v, true, "header names or *")
    });
    let credentials = r.value("cors-allow-credentials", parse::bool_value);
    let max_age_s = r.value("cors-max-age", parse::u64_value);
    enabled.then(|| Cors {
        origins,
        methods: methods.unwrap_or_else(|| METHODS.to_owned()),
        headers: headers.unwrap_or_else(|| HEADERS.to_owned()),
        expose_headers: expose.unwrap_or_default(),
        credentials: credentials.unwrap_or(true),
        max_age_s: max_age_s.unwrap_or(MAX_AGE_S),
        gateway_api: false,
    })
}

/// `cors-allow-origin`: `["*"]` when unset or when any entry is `*`.
fn origins(r: &mut Reader<'_>) -> Vec<String> {
    let Some((name, raw)) = r.get("cors-allow-origin") else {
        return vec!["*".to_owned()];
    };
    let raw = raw.to_owned();
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for origin in raw.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if origin == "*" {
            return vec!["*".to_owned()];
        }
        if is_origin(origin) {
            out.push(origin.to_ascii_lowercase());
        } else {
            bad.push(origin);
        }
    }
    if !bad.is_empty() {
        let message = format!(
            "invalid origins {bad:?} (e.g. https://app.example.com, https://*.example.com:8443, \
             null or *) are left out"
        );
        r.warn(&name, message);
    }
    out
}

/// ingress-nginx's `^([a-z]+://(\*\.)?[A-Za-z0-9\-.]*(:\d+)?|null)$`.
fn is_origin(origin: &str) -> bool {
    if origin == "null" {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = rest.strip_prefix("*.").unwrap_or(rest);
    let (host, port) = host.split_once(':').unwrap_or((host, ""));
    let port_ok = port.is_empty() && !rest.ends_with(':')
        || port.bytes().all(|b| b.is_ascii_digit()) && !port.is_empty();
    !scheme.is_empty()
        && scheme.bytes().all(|b| b.is_ascii_lowercase())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && port_ok
}

/// A comma-separated list of tokens (letters, digits, `-`, `_`; `*` when `star`), with or
/// without spaces after the commas.
fn list(v: &str, star: bool, what: &str) -> Result<String, String> {
    let token = |t: &str| {
        (star && t == "*")
            || (!t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    };
    if v.len() <= 1024 && v.split(',').map(str::trim).all(token) {
        Ok(v.to_owned())
    } else {
        Err(format!("must be a comma-separated list of {what}"))
    }
}

#[cfg(test)]
mod tests {
    use super::is_origin;

    #[test]
    fn origins_are_scheme_host_and_port_with_an_optional_wildcard_label() {
        for good in [
            "https://a.example.com",
            "http://a.test:8080",
            "https://*.example.com",
            "null",
        ] {
            assert!(is_origin(good), "{good}");
        }
        for bad in [
            "a.example.com",
            "https://a/b",
            "HTTPS://a.test",
            "https://a.test:",
            "https://a.test:x",
            "$http_origin",
        ] {
            assert!(!is_origin(bad), "{bad}");
        }
    }
}
