//! A policy's own frontend lines: what its options ask of the request once the route maps
//! ([`super::routes`]) have chosen it. The map value of such a policy carries its id after a
//! `~`, which the frontend copies to `txn.policy`; each line here tests it, so a listener's
//! configuration grows only by the lines of the policies that have options.

use crate::quote;
use portico_model::{L7Policy, PolicyOptions};
use std::fmt::Write as _;

/// A policy option this provider cannot write safely: the field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    pub field: &'static str,
    pub why: String,
}

/// The lines `policy` needs, each conditioned on its id; empty when it needs none.
pub(super) fn lines(policy: &L7Policy) -> Result<String, Refused> {
    lines_of(&policy.id.to_string(), policy.options.as_deref())
}

/// The lines of `options`, each conditioned on `txn.policy` holding `id` (a policy's id, or
/// a share's: `<policy>.<n>`); empty without options.
pub(super) fn lines_of(id: &str, options: Option<&PolicyOptions>) -> Result<String, Refused> {
    let Some(options) = options else {
        return Ok(String::new());
    };
    let when = format!("if {{ var(txn.policy) -m str {id} }}");
    let mut s = String::new();
    for line in request_lines(options)? {
        let _ = writeln!(s, "    http-request {line} {when}");
    }
    if let Some(changes) = &options.response_headers {
        for line in header_lines(changes, "ResponseHeaderModifier")? {
            let _ = writeln!(s, "    http-response {line} {when}");
        }
    }
    Ok(s)
}

/// A header value as a quoted word; haproxy reads it as a format string, so `%` is refused.
fn value(field: &'static str, v: &str) -> Result<String, Refused> {
    let refused = |why: String| Refused { field, why };
    if v.contains('%') {
        return Err(refused(format!(
            "value {v:?} holds a %, which haproxy reads as a format directive"
        )));
    }
    quote::word(v).map_err(|e| refused(e.to_string()))
}

/// A header name: an HTTP token (no quoting needed, none possible in an action's name).
fn name(field: &'static str, n: &str) -> Result<String, Refused> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
    if n.is_empty() || !n.bytes().all(token) {
        return Err(Refused {
            field,
            why: format!("name {n:?} is not an HTTP token"),
        });
    }
    Ok(n.to_owned())
}

/// `set-header`, `add-header`, `del-header` actions, in the model's order.
fn header_lines(
    changes: &portico_model::HeaderChanges,
    field: &'static str,
) -> Result<Vec<String>, Refused> {
    let mut out = Vec::new();
    for (n, v) in &changes.set {
        out.push(format!(
            "set-header {} {}",
            name(field, n)?,
            value(field, v)?
        ));
    }
    for (n, v) in &changes.add {
        out.push(format!(
            "add-header {} {}",
            name(field, n)?,
            value(field, v)?
        ));
    }
    for n in &changes.remove {
        out.push(format!("del-header {}", name(field, n)?));
    }
    Ok(out)
}

/// The `http-request` actions of a policy's options, in the proxy's order.
fn request_lines(options: &PolicyOptions) -> Result<Vec<String>, Refused> {
    let mut out = match &options.request_headers {
        Some(changes) => header_lines(changes, "RequestHeaderModifier")?,
        None => Vec::new(),
    };
    if let Some(host) = &options.upstream_host {
        let host = quote::word(host).map_err(|e| Refused {
            field: "upstream-vhost",
            why: e.to_string(),
        })?;
        out.push(format!("set-header Host {host}"));
    }
    if let Some(rewrite) = &options.path {
        out.extend(super::rewrite::actions(rewrite, "URLRewrite")?);
    }
    Ok(out)
}

/// The `http-request redirect` of a redirect to a URL (`permanent-redirect`,
/// `temporal-redirect`, `app-root`): a URL starting with `/` is on the request's own scheme
/// and host, as the proxy answers it. haproxy reads the location as a log-format string, so
/// a `%` in the URL cannot be written as itself: refused.
pub(super) fn redirect_to_url(status: u16, url: &str) -> Result<String, Refused> {
    let refused = |why: &str| Refused {
        field: "the redirect URL",
        why: why.to_owned(),
    };
    if url.contains('%') {
        return Err(refused(
            "holds a %, which haproxy's redirect reads as a format directive",
        ));
    }
    let quoted = quote::word(url).map_err(|e| refused(&e.to_string()))?;
    let location = if url.starts_with('/') {
        // Scheme and Host of the request, then the URL's quoted word without its opening quote.
        format!(
            "\"%[ssl_fc,iif(https,http)]://%[req.hdr(host)]{}",
            &quoted[1..]
        )
    } else {
        quoted
    };
    let code = if matches!(status, 301 | 302 | 303 | 307 | 308) {
        status
    } else {
        302
    };
    Ok(format!(
        "http-request redirect location {location} code {code}"
    ))
}
