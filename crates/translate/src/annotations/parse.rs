//! Parsers of annotation values: each returns the value or why it is not one.

use portico_model::{Algorithm, HashKey, ObjectRef, PoolProtocol};

type Parsed<T> = Result<T, String>;

/// The longest duration an annotation may give: one day.
const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;

/// A duration in milliseconds: a whole number of seconds as ingress-nginx writes them
/// (`"30"`), or a number with a unit `ms`, `s`, `m` or `h` (`"500ms"`, `"2m"`); more than zero,
/// at most a day.
pub(super) fn duration_ms(v: &str) -> Parsed<u64> {
    let why =
        || "must be a duration such as \"30\" (seconds), \"500ms\", \"10s\" or \"2m\"".to_owned();
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = v.split_at(digits);
    if number.is_empty() || number.len() > 12 {
        return Err(why());
    }
    let n: u64 = number.parse().map_err(|_| why())?;
    let scale = match unit {
        "" | "s" => 1000,
        "ms" => 1,
        "m" => 60 * 1000,
        "h" => 3600 * 1000,
        _ => return Err(why()),
    };
    match n.checked_mul(scale) {
        Some(0) => Err("must be more than zero".to_owned()),
        Some(ms) if ms <= MAX_DURATION_MS => Ok(ms),
        _ => Err("must be at most a day".to_owned()),
    }
}

/// A size in bytes as nginx writes it: a number with an optional unit `k`, `m` or `g`
/// (either case; powers of 1024); `"0"` means no limit.
pub(super) fn size_bytes(v: &str) -> Parsed<u64> {
    let why = || "must be a size such as \"8m\", \"512k\", \"1g\" or \"0\" (no limit)".to_owned();
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = v.split_at(digits);
    if number.is_empty() || number.len() > 15 {
        return Err(why());
    }
    let n: u64 = number.parse().map_err(|_| why())?;
    let scale: u64 = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return Err(why()),
    };
    n.checked_mul(scale).ok_or_else(why)
}

pub(super) fn u32_value(v: &str) -> Parsed<u32> {
    v.parse()
        .ok()
        .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| "must be a whole number (0 to 4294967295)".to_owned())
}

pub(super) fn u64_value(v: &str) -> Parsed<u64> {
    v.parse()
        .ok()
        .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| "must be a whole number of seconds".to_owned())
}

pub(super) fn percent(v: &str) -> Parsed<u32> {
    u32_value(v)
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| "must be a percentage from 0 to 100".to_owned())
}

pub(super) fn threshold(v: &str) -> Parsed<u32> {
    u32_value(v)
        .ok()
        .filter(|n| (1..=100).contains(n))
        .ok_or_else(|| "must be a whole number from 1 to 100".to_owned())
}

/// `"true"`/`"false"`, or nginx's `"on"`/`"off"`.
pub(super) fn bool_value(v: &str) -> Parsed<bool> {
    match v {
        "true" | "on" => Ok(true),
        "false" | "off" => Ok(false),
        _ => Err("must be \"true\" or \"false\" (\"on\" or \"off\")".to_owned()),
    }
}

/// `load-balance`: `round_robin`, `least_request` or ingress-nginx's `ewma` (the same).
pub(super) fn algorithm(v: &str) -> Parsed<Algorithm> {
    match v {
        "round_robin" => Ok(Algorithm::RoundRobin),
        "least_request" | "ewma" => Ok(Algorithm::LeastRequest),
        _ => Err("must be \"round_robin\", \"least_request\" or \"ewma\"".to_owned()),
    }
}

/// `upstream-hash-by`: ingress-nginx's variables (`$remote_addr`, `$binary_remote_addr`,
/// `$request_uri`, `$http_<header>`, `$cookie_<name>`) or Portico's words (`client-address`,
/// `request-uri`, `header:<name>`, `cookie:<name>`).
pub(super) fn hash_key(v: &str) -> Parsed<HashKey> {
    let why = || {
        "must be one of $remote_addr, $request_uri, $http_<header>, $cookie_<name> (or \
         client-address, request-uri, header:<name>, cookie:<name>); other nginx variables \
         and combinations are not supported"
            .to_owned()
    };
    let key = match v {
        "$remote_addr" | "$binary_remote_addr" | "client-address" => HashKey::ClientAddress,
        "$request_uri" | "request-uri" => HashKey::RequestUri,
        _ => {
            if let Some(h) = v.strip_prefix("$http_") {
                HashKey::Header(h.replace('_', "-").to_ascii_lowercase())
            } else if let Some(h) = v.strip_prefix("header:") {
                HashKey::Header(h.to_ascii_lowercase())
            } else if let Some(c) = v.strip_prefix("$cookie_").or(v.strip_prefix("cookie:")) {
                HashKey::Cookie(c.to_owned())
            } else {
                return Err(why());
            }
        }
    };
    match &key {
        HashKey::Header(n) | HashKey::Cookie(n) if !is_token(n) => Err(why()),
        _ => Ok(key),
    }
}

/// `backend-protocol`: HTTP, HTTPS, GRPC (HTTP/2 cleartext), GRPCS (HTTP/2 over TLS), H2C.
pub(super) fn backend_protocol(v: &str) -> Parsed<PoolProtocol> {
    match v.to_ascii_uppercase().as_str() {
        "HTTP" => Ok(PoolProtocol::Http),
        "HTTPS" => Ok(PoolProtocol::Https),
        "GRPC" | "H2C" => Ok(PoolProtocol::H2c),
        "GRPCS" => Ok(PoolProtocol::H2),
        "AUTO_HTTP" | "FCGI" => Err("is not supported by Portico".to_owned()),
        _ => Err("must be HTTP, HTTPS, GRPC, GRPCS or H2C".to_owned()),
    }
}

/// An HTTP token (RFC 9110): what header and cookie names are made of.
pub(super) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn cookie_name(v: &str) -> Parsed<String> {
    if is_token(v) {
        Ok(v.to_owned())
    } else {
        Err("must be a cookie name: letters, digits and !#$%&'*+-.^_`|~".to_owned())
    }
}

/// A cookie `Path`: starts with `/`, visible ASCII without `;` or `,`.
pub(super) fn cookie_path(v: &str) -> Parsed<String> {
    let ok = v.starts_with('/')
        && v.len() <= 1024
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b';' && b != b',');
    if ok {
        Ok(v.to_owned())
    } else {
        Err("must be a path starting with \"/\" without spaces, \";\" or \",\"".to_owned())
    }
}

/// A health check path: starts with `/`, visible ASCII (a query allowed), no `#`.
pub(super) fn check_path(v: &str) -> Parsed<String> {
    let ok = v.starts_with('/')
        && v.len() <= 1024
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'#' && b != b'"' && b != b'\\');
    if ok {
        Ok(v.to_owned())
    } else {
        Err("must be a path starting with \"/\", without spaces, quotes or \"#\"".to_owned())
    }
}

/// A DNS name for upstream TLS: labels of letters, digits and `-`, dot-separated.
pub(super) fn dns_name(v: &str) -> Parsed<String> {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if v.len() <= 253 && v.split('.').all(label) {
        Ok(v.to_ascii_lowercase())
    } else {
        Err("must be a DNS name such as backend.example.svc".to_owned())
    }
}

/// `proxy-ssl-secret`: `namespace/name` or `name`, in the Ingress's own namespace (an Ingress
/// may not make Portico read another namespace's Secrets).
pub(super) fn secret_ref(v: &str, namespace: &str) -> Parsed<ObjectRef> {
    let (ns, name) = v.split_once('/').unwrap_or((namespace, v));
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    if !dns(ns) || !dns(name) {
        return Err("must be a Secret name, or namespace/name".to_owned());
    }
    if ns != namespace {
        return Err(format!(
            "the Secret must be in the Ingress's own namespace {namespace:?}"
        ));
    }
    Ok(ObjectRef::new("Secret", ns, name))
}

/// Visible ASCII and spaces, no leading or trailing space, at most 1024 bytes: what a header
/// value Portico sends may hold.
fn is_field_value(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 1024
        && v.trim() == v
        && v.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}

/// `rewrite-target`: a path starting with `/`, in which `$` is followed by a group number
/// 1–9 (nginx's other variables are not served).
pub(super) fn rewrite_target(v: &str) -> Parsed<String> {
    if !v.starts_with('/') || !v.bytes().all(|b| b.is_ascii_graphic()) || v.len() > 1024 {
        return Err("must be a path starting with \"/\" (e.g. \"/$2\"), without spaces".to_owned());
    }
    let mut rest = v;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        if !rest.starts_with(|c: char| ('1'..='9').contains(&c)) {
            return Err(
                "the only variables are the path's groups $1 to $9 (other nginx variables are \
                 not served)"
                    .to_owned(),
            );
        }
    }
    Ok(v.to_owned())
}

/// A header value (`x-forwarded-prefix`).
pub(super) fn header_value(v: &str) -> Parsed<String> {
    if is_field_value(v) {
        Ok(v.to_owned())
    } else {
        Err("must be visible ASCII (spaces inside allowed), at most 1024 bytes".to_owned())
    }
}

/// `upstream-vhost`: a host, optionally with a port.
pub(super) fn authority(v: &str) -> Parsed<String> {
    let ok = !v.is_empty()
        && v.len() <= 255
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
    if ok {
        Ok(v.to_owned())
    } else {
        Err("must be a host name, optionally with :port".to_owned())
    }
}

/// `app-root`: a path starting with `/`.
pub(super) fn absolute_path(v: &str) -> Parsed<String> {
    if v.starts_with('/') && v.len() <= 1024 && v.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(v.to_owned())
    } else {
        Err("must be a path starting with \"/\", without spaces".to_owned())
    }
}

/// `permanent-redirect`, `temporal-redirect`: an `http://` or `https://` URL, or a path.
pub(super) fn redirect_url(v: &str) -> Parsed<String> {
    let absolute = v.starts_with("http://") || v.starts_with("https://") || v.starts_with('/');
    if absolute && v.len() <= 2048 && v.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(v.to_owned())
    } else {
        Err("must be an http:// or https:// URL (or a path), without spaces".to_owned())
    }
}

/// `permanent-redirect-code`, `temporal-redirect-code`: a redirect status, 300 to 308.
pub(super) fn redirect_code(v: &str) -> Parsed<u16> {
    v.parse::<u16>()
        .ok()
        .filter(|c| (300..=308).contains(c) && v.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| "must be a redirect status from 300 to 308".to_owned())
}

/// `default-backend`: the name of a Service in the Ingress's own namespace (a DNS-1035 label,
/// as Service names are).
pub(super) fn service_name(v: &str) -> Parsed<String> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.starts_with(|c: char| c.is_ascii_lowercase())
        && !v.ends_with('-')
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(v.to_owned())
    } else {
        Err("must be the name of a Service in the Ingress's namespace".to_owned())
    }
}

/// `custom-http-errors`: status codes from 400 to 599 separated by commas, ascending and
/// without duplicates once read.
pub(crate) fn error_codes(v: &str) -> Parsed<Vec<u16>> {
    let mut codes = Vec::new();
    for token in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let code = token
            .parse::<u16>()
            .ok()
            .filter(|c| (400..=599).contains(c) && token.bytes().all(|b| b.is_ascii_digit()));
        let Some(code) = code else {
            return Err(format!(
                "{token:?} is not a status code from 400 to 599 (e.g. \"404,503\")"
            ));
        };
        codes.push(code);
    }
    if codes.is_empty() {
        return Err("must name status codes from 400 to 599 (e.g. \"404,503\")".to_owned());
    }
    codes.sort_unstable();
    codes.dedup();
    Ok(codes)
}

#[cfg(test)]
mod error_code_tests {
    use super::{error_codes, service_name};

    #[test]
    fn custom_http_errors_are_codes_from_400_to_599_sorted_once() {
        assert_eq!(error_codes("503, 404,404"), Ok(vec![404, 503]));
        assert_eq!(error_codes("599,400"), Ok(vec![400, 599]));
        for bad in ["", " , ", "404,600", "399", "4o4", "+404", "404;503", "off"] {
            assert!(error_codes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_default_backend_is_a_service_name() {
        assert_eq!(service_name("pages-1"), Ok("pages-1".to_owned()));
        for bad in ["", "Pages", "1pages", "pages-", "ns/pages", "a.b"] {
            assert!(service_name(bad).is_err(), "{bad:?}");
        }
    }
}
