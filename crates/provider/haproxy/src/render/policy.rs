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
pub(super) fn lines(policy: &L7Policy, guard: &str) -> Result<String, Refused> {
    lines_of(&policy.id.to_string(), policy.options.as_deref(), guard)
}

/// The lines of `options`, each conditioned on `txn.policy` holding `id` (a policy's id, or
/// a share's: `<policy>.<n>`), with `guard` (the policy's limits and basic auth) after the
/// answer to a CORS preflight and before every other line: a preflight is answered before
/// limits and auth, as ingress-nginx answers it in nginx's rewrite phase. Without options,
/// the guard alone.
pub(super) fn lines_of(
    id: &str,
    options: Option<&PolicyOptions>,
    guard: &str,
) -> Result<String, Refused> {
    let Some(options) = options else {
        return Ok(guard.to_owned());
    };
    let when = format!("if {{ var(txn.policy) -m str {id} }}");
    let mut s = String::new();
    if let Some(cors) = &options.cors {
        s.push_str(&cors_lines(cors, &when)?);
    }
    s.push_str(guard);
    for line in request_lines(options)? {
        let _ = writeln!(s, "    http-request {line} {when}");
    }
    if let Some(rewrite) = &options.rewrite {
        s.push_str(&super::rewrite::nginx_lines(rewrite, &when)?);
    }
    if let Some(ms) = server_timeout(options.timeouts) {
        // `set-timeout` is a backend's action: the pool's backend reads the variable
        // ([`super::backend::ROUTE_TIMEOUT`]).
        let _ = writeln!(s, "    http-request set-var(txn.timeout) int({ms}) {when}");
    }
    if let Some(changes) = &options.response_headers {
        for line in header_lines(changes, "ResponseHeaderModifier")? {
            let _ = writeln!(s, "    http-response {line} {when}");
        }
    }
    Ok(s)
}

/// The CORS answers of a policy, as the built-in proxy gives them: `txn.cors` takes the
/// `Access-Control-Allow-Origin` of the request (`*`, or its own `Origin` when one of the
/// allowed origins matches it, case-insensitively, `*.` standing for one label, several for
/// the Gateway API's filter); an `OPTIONS` request with one is answered here (204, the
/// Gateway API's 200) with the fields, and the members' answers get them.
fn cors_lines(cors: &portico_model::Cors, when: &str) -> Result<String, Refused> {
    let field = if cors.gateway_api {
        "CORS"
    } else {
        "cors-allow-origin"
    };
    let mut s = String::new();
    let origin = "req.fhdr(origin)";
    if cors.origins.iter().any(|o| o == "*") {
        let _ = writeln!(s, "    http-request set-var(txn.cors) str(*) {when}");
        if cors.gateway_api && cors.credentials {
            // A credentialed answer may not say `*`: the request's own origin.
            let _ = writeln!(
                s,
                "    http-request set-var(txn.cors) {origin} {when} {{ {origin} -m found }}"
            );
        }
    } else {
        let (exact, wild): (Vec<&String>, Vec<&String>) =
            cors.origins.iter().partition(|o| !o.contains('*'));
        if !exact.is_empty() {
            let words = (exact.iter())
                .map(|o| origin_word(field, &o.to_ascii_lowercase(), None))
                .collect::<Result<Vec<_>, _>>()?;
            let _ = writeln!(
                s,
                "    http-request set-var(txn.cors) {origin} {when} {{ {origin},lower -m str {} }}",
                words.join(" ")
            );
        }
        for o in wild {
            let pattern = origin_word(field, &o.to_ascii_lowercase(), Some(cors.gateway_api))?;
            let _ = writeln!(
                s,
                "    http-request set-var(txn.cors) {origin} {when} {{ {origin},lower -m reg {pattern} }}"
            );
        }
    }
    let cors_when = format!("{when} {{ var(txn.cors) -m found }}");
    // The fields, in the proxy's order: (name, value as a log-format word, on a preflight only).
    let mut fields = vec![(
        "Access-Control-Allow-Origin",
        "\"%[var(txn.cors)]\"".to_owned(),
    )];
    if cors.credentials {
        fields.push(("Access-Control-Allow-Credentials", "true".to_owned()));
    }
    let mut echoed = Vec::new();
    let lists = [
        (
            "Access-Control-Allow-Methods",
            &cors.methods,
            "cors_m",
            "access-control-request-method",
        ),
        (
            "Access-Control-Allow-Headers",
            &cors.headers,
            "cors_h",
            "access-control-request-headers",
        ),
    ];
    let field_of = |name: &str| {
        if cors.gateway_api {
            "CORS"
        } else {
            name_field(name)
        }
    };
    for (name, list, var, asked) in lists {
        if list.is_empty() {
            continue;
        }
        fields.push((name, value(field_of(name), list)?));
        if cors.gateway_api && list == "*" {
            echoed.push((name, var, asked));
        }
    }
    if !cors.expose_headers.is_empty() {
        let name = "Access-Control-Expose-Headers";
        fields.push((name, value(field_of(name), &cors.expose_headers)?));
    }
    fields.push(("Access-Control-Max-Age", cors.max_age_s.to_string()));
    // A `*` list answers a Gateway API preflight with what it asks for.
    for (_, var, asked) in &echoed {
        let _ = writeln!(s, "    http-request set-var(txn.{var}) str(*) {cors_when}");
        let _ = writeln!(
            s,
            "    http-request set-var(txn.{var}) req.fhdr({asked}) {cors_when}"
        );
    }
    let status = if cors.gateway_api { 200 } else { 204 };
    let _ = write!(
        s,
        // Without a body haproxy writes no Content-Type (the proxy's is text/plain).
        "    http-request return status {status}"
    );
    for (name, v) in &fields {
        match echoed.iter().find(|(n, _, _)| n == name) {
            Some((_, var, _)) => {
                let _ = write!(s, " hdr {name} \"%[var(txn.{var})]\"");
            }
            None => {
                let _ = write!(s, " hdr {name} {v}");
            }
        }
    }
    let _ = writeln!(s, " {cors_when} METH_OPTIONS");
    for (name, v) in &fields {
        let _ = writeln!(s, "    http-response set-header {name} {v} {cors_when}");
    }
    Ok(s)
}

/// The annotation an ingress-nginx CORS field comes from.
fn name_field(name: &str) -> &'static str {
    match name {
        "Access-Control-Allow-Methods" => "cors-allow-methods",
        "Access-Control-Allow-Headers" => "cors-allow-headers",
        _ => "cors-expose-headers",
    }
}

/// An allowed origin (`scheme://[*.]host[:port]`, lower-case, or `null`) as a quoted word:
/// itself, or, with `*.` (`labels`: several labels for the Gateway API), an anchored regular
/// expression in which every byte but letters and digits stands for itself only (`[.]`).
fn origin_word(field: &'static str, o: &str, labels: Option<bool>) -> Result<String, Refused> {
    let refused = || Refused {
        field,
        why: format!("origin {o:?} is not scheme://host[:port] (a host may start with *.)"),
    };
    let plain = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'/' | b'-'))
    };
    let Some(many) = labels else {
        if !plain(o) {
            return Err(refused());
        }
        return quote::word(o).map_err(|_| refused());
    };
    let (head, tail) = o.split_once("*.").ok_or_else(refused)?;
    if !plain(head) || !plain(tail) {
        return Err(refused());
    }
    let literal = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_string()
                } else {
                    format!("[{c}]")
                }
            })
            .collect()
    };
    let label = "[a-z0-9-]+";
    let labels = if many {
        format!("{label}([.]{label})*")
    } else {
        label.to_owned()
    };
    let pattern = format!("^{}{labels}[.]{}$", literal(head), literal(tail));
    quote::word(&pattern).map_err(|_| refused())
}

/// The HTTPRoute timeouts as haproxy's server timeout for the request (504 when it runs out
/// before the member answers): `backendRequest` bounds each wait for a member's answer, as
/// haproxy's does; `request` has no haproxy equivalent covering connecting and retrying too,
/// so it bounds that wait as well (the smaller of both).
fn server_timeout(timeouts: portico_model::Timeouts) -> Option<u64> {
    match (timeouts.request_ms, timeouts.backend_ms) {
        (Some(r), Some(b)) => Some(r.min(b)),
        (r, b) => r.or(b),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use portico_model::Cors;

    fn cors(origins: &[&str], gateway_api: bool) -> Cors {
        Cors {
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            methods: "GET, PUT".into(),
            headers: "*".into(),
            expose_headers: "X-Total".into(),
            credentials: true,
            max_age_s: 600,
            gateway_api,
        }
    }

    /// `haproxy -c` on a frontend holding `lines`: its answer, or the alerts.
    fn haproxy_accepts(lines: &str) -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!("portico-cors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.cfg", lines.len()));
        let config = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\nfrontend f\n    bind 127.0.0.1:65000\n    http-request set-var(txn.policy) str(p1)\n{lines}    default_backend b\n\nbackend b\n    server s 127.0.0.1:1\n"
        );
        std::fs::write(&path, config).unwrap();
        let out = std::process::Command::new("haproxy")
            .args(["-c", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        let alerts = String::from_utf8_lossy(&out.stderr);
        if out.status.success() && !alerts.contains("WARNING") {
            Ok(())
        } else {
            Err(alerts.into_owned())
        }
    }

    #[test]
    fn cors_lines_match_origins_answer_preflights_and_pass_haproxy_check() {
        let when = "if { var(txn.policy) -m str p1 }";
        for (origins, gateway_api) in [
            (
                &["https://app.example.com", "https://*.example.org:8443"][..],
                false,
            ),
            (&["https://*.bar.com"][..], true),
            (&["*"][..], true),
            (&["*"][..], false),
        ] {
            let lines = cors_lines(&cors(origins, gateway_api), when).unwrap();
            haproxy_accepts(&lines).unwrap_or_else(|e| panic!("{lines}\n{e}"));
            assert!(lines.contains("http-request return status"), "{lines}");
        }
        let lines = cors_lines(
            &cors(
                &["https://app.example.com", "https://*.example.org:8443"],
                false,
            ),
            when,
        )
        .unwrap();
        assert!(
            lines.contains("{ req.fhdr(origin),lower -m str \"https://app.example.com\" }"),
            "{lines}"
        );
        // One label for ingress-nginx, dots as themselves only.
        assert!(
            lines.contains(r#"-m reg "\x5ehttps\x5b:\x5d\x5b/\x5d\x5b/\x5d\x5ba-z0-9-\x5d\x2b\x5b.\x5dexample\x5b.\x5dorg\x5b:\x5d8443\x24""#),
            "{lines}"
        );
        assert!(lines.contains("return status 204"), "{lines}");
        let gw = cors_lines(&cors(&["https://*.bar.com"], true), when).unwrap();
        assert!(gw.contains("return status 200"), "{gw}");
        assert!(gw.contains("set-var(txn.cors_h) req.fhdr(access-control-request-headers)"));
    }

    #[test]
    fn timeouts_set_the_server_timeout_of_the_request_the_smaller_of_both() {
        let timeouts = |request_ms, backend_ms| PolicyOptions {
            timeouts: portico_model::Timeouts {
                request_ms,
                backend_ms,
            },
            ..Default::default()
        };
        let line = |r, b| lines_of("p1", Some(&timeouts(r, b)), "").unwrap();
        let want = |ms: u64| {
            format!(
                "    http-request set-var(txn.timeout) int({ms}) if {{ var(txn.policy) -m str p1 }}\n"
            )
        };
        assert_eq!(line(Some(200), None), want(200));
        assert_eq!(line(None, Some(300)), want(300));
        assert_eq!(line(Some(2000), Some(1000)), want(1000));
        assert_eq!(line(None, None), "");
        haproxy_accepts(&line(Some(2000), Some(1000))).unwrap();
        let backend = format!(
            "    default_backend b\n\nbackend b2\n{}    server s2 127.0.0.1:2\n\nfrontend f2\n    bind 127.0.0.1:65001\n",
            super::super::backend::ROUTE_TIMEOUT
        );
        haproxy_accepts(&backend).unwrap();
    }

    #[test]
    fn unwritable_cors_values_are_refused_naming_the_field() {
        let when = "if { var(txn.policy) -m str p1 }";
        let bad_origin = cors(&["https://a.com/$x"], false);
        let refused = cors_lines(&bad_origin, when).unwrap_err();
        assert_eq!(refused.field, "cors-allow-origin");
        let mut pct = cors(&["https://a.com"], false);
        pct.expose_headers = "X-%[src]".into();
        let refused = cors_lines(&pct, when).unwrap_err();
        assert_eq!(refused.field, "cors-expose-headers");
        assert!(refused.why.contains("holds a %"), "{}", refused.why);
    }
}
