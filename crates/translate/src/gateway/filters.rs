//! HTTPRoute filters and timeouts → the model: RequestHeaderModifier and
//! ResponseHeaderModifier as header changes, URLRewrite as the upstream `Host` (the one
//! ingress-nginx's `upstream-vhost` sets) and a new path, RequestMirror as mirrors,
//! RequestRedirect as the policy's action, CORS as ingress-nginx's `enable-cors` is served (in
//! the Gateway API's dialect), `timeouts` as the policy's timeouts. [`check`] refuses, naming
//! the field, what is not served (ExtensionRef, unknown types) or does not hold; [`compile`] turns the rest into a policy's options for one match on one listener.

use super::status::Refusal;
use portico_gateway::{
    BackendRef, HeaderModifier, HttpRouteFilter, HttpRouteMatch, HttpRouteRule, PathModifier,
};
use portico_model::matching::normalize_prefix;
use portico_model::{
    Cors, HeaderChanges, Mirror, PathRewrite, PolicyOptions, PoolId, Redirect, Timeouts,
};
use serde_json::Value;

/// The filter types served here.
const SERVED: [&str; 6] = [
    "CORS",
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
    "RequestMirror",
];

/// The filters as typed; one that does not decode is left out ([`check`] refuses its route).
pub(crate) fn decode(filters: &[Value]) -> Vec<HttpRouteFilter> {
    (filters.iter())
        .filter_map(|f| serde_json::from_value(f.clone()).ok())
        .collect()
}

/// Why the filters and timeouts of rule `r` cannot be served, if they cannot.
pub(crate) fn check(r: usize, rule: &HttpRouteRule) -> Result<(), Refusal> {
    let field = format!("spec.rules[{r}]");
    let types = check_list(&format!("{field}.filters"), &rule.filters, false)?;
    if types.contains(&"RequestRedirect") && types.contains(&"URLRewrite") {
        return refuse(
            format!("{field}.filters"),
            "RequestRedirect and URLRewrite on one rule",
        );
    }
    let redirect = decode(&rule.filters)
        .into_iter()
        .find_map(|f| f.request_redirect);
    let rewrite = decode(&rule.filters)
        .into_iter()
        .find_map(|f| f.url_rewrite);
    let prefixed = (redirect.and_then(|r| r.path)).or_else(|| rewrite.and_then(|r| r.path));
    if prefixed.is_some_and(|p| p.type_ == "ReplacePrefixMatch")
        && (rule.effective_matches().iter()).any(|m| m.path_match().0 != "PathPrefix")
    {
        return refuse(
            format!("{field}.filters"),
            "ReplacePrefixMatch on a rule with a match that is not a PathPrefix",
        );
    }
    for (b, backend) in rule.backend_refs.iter().enumerate() {
        let at = format!("{field}.backendRefs[{b}].filters");
        check_list(&at, &backend.filters, true)?;
    }
    timeouts(rule).map_err(|what| ("UnsupportedValue", format!("{field}.timeouts: {what}")))?;
    Ok(())
}

fn refuse<T>(field: String, what: &str) -> Result<T, Refusal> {
    Err(("UnsupportedValue", format!("{field}: {what}")))
}

/// Checks each filter of a list; the types found.
fn check_list(
    field: &str,
    filters: &[Value],
    on_backend: bool,
) -> Result<Vec<&'static str>, Refusal> {
    let mut types = Vec::new();
    for (i, value) in filters.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let filter: HttpRouteFilter = serde_json::from_value(value.clone())
            .map_err(|e| ("UnsupportedValue", format!("{at}: {e}")))?;
        let Some(known) = SERVED.iter().find(|t| **t == filter.type_) else {
            let what = format!("filter type {:?} is not served", filter.type_);
            return Err(("UnsupportedValue", format!("{at}.type: {what}")));
        };
        if on_backend && *known == "RequestRedirect" {
            return refuse(at, "a RequestRedirect on a backendRef is not served");
        }
        if types.contains(known) && *known != "RequestMirror" {
            return refuse(at, &format!("{known} twice"));
        }
        check_one(&at, &filter).map_err(|what| ("UnsupportedValue", format!("{at}: {what}")))?;
        types.push(*known);
    }
    Ok(types)
}

/// Whether one filter has its field and values the data plane can use.
fn check_one(at: &str, filter: &HttpRouteFilter) -> Result<(), String> {
    let missing = || format!("{} without its field", filter.type_);
    match filter.type_.as_str() {
        "RequestHeaderModifier" => headers(
            filter
                .request_header_modifier
                .as_ref()
                .ok_or_else(missing)?,
        ),
        "ResponseHeaderModifier" => headers(
            filter
                .response_header_modifier
                .as_ref()
                .ok_or_else(missing)?,
        ),
        "RequestRedirect" => {
            let r = filter.request_redirect.as_ref().ok_or_else(missing)?;
            if let Some(scheme) = r
                .scheme
                .as_deref()
                .filter(|s| !matches!(*s, "http" | "https"))
            {
                return Err(format!("scheme {scheme:?}: only http and https"));
            }
            let status = r.status_code.unwrap_or(302);
            if ![301, 302, 303, 307, 308].contains(&status) {
                return Err(format!("statusCode {status}"));
            }
            if r.port.is_some_and(|p| u16::try_from(p).is_err() || p == 0) {
                return Err("port out of range".into());
            }
            r.path.as_ref().map_or(Ok(()), path)
        }
        "URLRewrite" => {
            let r = filter.url_rewrite.as_ref().ok_or_else(missing)?;
            if let Some(host) = &r.hostname {
                value(host)?;
            }
            r.path.as_ref().map_or(Ok(()), path)
        }
        "RequestMirror" => {
            let m = filter.request_mirror.as_ref().ok_or_else(missing)?;
            let fraction = m
                .fraction
                .map(|f| (f.numerator, f.denominator.unwrap_or(100)));
            match (m.percent, fraction) {
                (Some(p), _) if !(0..=100).contains(&p) => Err(format!("percent {p}")),
                (_, Some((n, d))) if d <= 0 || n < 0 || n > d => Err(format!("fraction {n}/{d}")),
                _ => Ok(()),
            }
        }
        "CORS" => {
            let c = filter.cors.as_ref().ok_or_else(missing)?;
            if let Some(o) = c.allow_origins.iter().find(|o| !origin(o)) {
                return Err(format!(
                    "allowOrigins: {o:?} is not scheme://host[:port] or *"
                ));
            }
            let names = (c.allow_methods.iter())
                .chain(&c.allow_headers)
                .chain(&c.expose_headers);
            names.filter(|n| *n != "*").try_for_each(|n| name(n))
        }
        _ => Err(format!("{at}: unknown")),
    }
}

fn headers(modifier: &HeaderModifier) -> Result<(), String> {
    let pairs = modifier.set.iter().chain(&modifier.add);
    for header in pairs {
        name(&header.name)?;
        value(&header.value)?;
    }
    modifier.remove.iter().try_for_each(|n| name(n))
}

/// A CORS origin as the API writes it: `*`, or `scheme://host[:port]` where the host may
/// start with `*.`.
fn origin(origin: &str) -> bool {
    if origin == "*" {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = rest.strip_prefix("*.").unwrap_or(rest);
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b);
    !scheme.is_empty() && !host.is_empty() && host.bytes().all(allowed)
}

/// An RFC 9110 token.
fn name(name: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Err(format!("header name {name:?} is not a token"));
    }
    Ok(())
}

fn value(value: &str) -> Result<(), String> {
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!("value {value:?} holds a control character"));
    }
    Ok(())
}

fn path(modifier: &PathModifier) -> Result<(), String> {
    let (full, prefix) = (&modifier.replace_full_path, &modifier.replace_prefix_match);
    let written = match modifier.type_.as_str() {
        "ReplaceFullPath" => full.as_ref(),
        "ReplacePrefixMatch" => prefix.as_ref(),
        other => return Err(format!("path type {other:?}")),
    };
    let written = written.ok_or_else(|| format!("{} without its value", modifier.type_))?;
    if !written.is_empty() && !written.starts_with('/') {
        return Err(format!("path {written:?} does not start with /"));
    }
    value(written)
}

/// The rule's `timeouts` in milliseconds (`0s`: none), or what is wrong with them.
pub(crate) fn timeouts(rule: &HttpRouteRule) -> Result<Timeouts, String> {
    let Some(written) = rule.rest.get("timeouts") else {
        return Ok(Timeouts::default());
    };
    let read = |key: &str| -> Result<Option<u64>, String> {
        match written.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => {
                let ms = duration_ms(s).ok_or_else(|| format!("{key}: {s:?} is not a duration"))?;
                Ok((ms > 0).then_some(ms))
            }
            Some(other) => Err(format!("{key}: {other} is not a duration")),
        }
    };
    let (request, backend) = (read("request")?, read("backendRequest")?);
    if let (Some(r), Some(b)) = (request, backend)
        && b > r
    {
        return Err("backendRequest is longer than request".into());
    }
    Ok(Timeouts {
        request_ms: request,
        backend_ms: backend,
    })
}

/// A Gateway API duration (`1h`, `30m`, `10s`, `500ms`, or several: `1m30s`) in milliseconds.
fn duration_ms(written: &str) -> Option<u64> {
    let mut rest = written;
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            let unit = match rest.bytes().next()? {
                b'h' => 3_600_000,
                b'm' => 60_000,
                b's' => 1_000,
                _ => return None,
            };
            (unit, 1)
        };
        total = total.checked_add(number.checked_mul(unit)?)?;
        rest = &rest[len..];
    }
    Some(total)
}

/// Where a policy is: its listener's scheme and port (a redirect's defaults).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    pub(crate) scheme: &'a str,
    pub(crate) port: u16,
}

/// The redirect (if a filter asks for one) and the options of `filters` for `matched` at
/// `place`; `mirror` gives the pool of a mirror's backendRef (none: not resolved, no mirror).
pub(crate) fn compile(
    filters: &[HttpRouteFilter],
    matched: &HttpRouteMatch,
    place: Place<'_>,
    mirror: &mut dyn FnMut(&BackendRef) -> Option<PoolId>,
) -> (Option<Redirect>, PolicyOptions) {
    let mut options = PolicyOptions::default();
    let mut redirect = None;
    let prefix = normalize_prefix(matched.path_match().1);
    for filter in filters {
        let changes = |m: &Option<HeaderModifier>| m.as_ref().map(header_changes);
        match filter.type_.as_str() {
            "RequestHeaderModifier" => {
                options.request_headers = changes(&filter.request_header_modifier)
            }
            "ResponseHeaderModifier" => {
                options.response_headers = changes(&filter.response_header_modifier)
            }
            "URLRewrite" => {
                let Some(r) = &filter.url_rewrite else {
                    continue;
                };
                options.upstream_host = r.hostname.clone();
                options.path = r.path.as_ref().and_then(|p| rewrite(p, prefix));
            }
            "RequestMirror" => {
                let Some(m) = &filter.request_mirror else {
                    continue;
                };
                if let Some(pool) = mirror(&m.backend_ref) {
                    options.mirrors.push(Mirror {
                        pool,
                        per_million: per_million(m),
                    });
                }
            }
            "RequestRedirect" => {
                let Some(r) = &filter.request_redirect else {
                    continue;
                };
                let scheme = r.scheme.as_deref().unwrap_or(place.scheme);
                let port = match (r.port, &r.scheme) {
                    (Some(port), _) => u16::try_from(port).unwrap_or(place.port),
                    (None, Some(s)) if s == "https" => 443,
                    (None, Some(_)) => 80,
                    (None, None) => place.port,
                };
                redirect = Some(Redirect {
                    status: u16::try_from(r.status_code.unwrap_or(302)).unwrap_or(302),
                    scheme: scheme.to_owned(),
                    hostname: r.hostname.clone(),
                    port,
                    path: r.path.as_ref().and_then(|p| rewrite(p, prefix)),
                    same_scheme: false,
                });
            }
            "CORS" => options.cors = filter.cors.as_ref().map(cors),
            _ => {}
        }
    }
    (redirect, options)
}

/// The CORS filter as the model's CORS, in the Gateway API's dialect.
fn cors(filter: &portico_gateway::CorsFilter) -> Cors {
    Cors {
        origins: filter
            .allow_origins
            .iter()
            .map(|o| o.to_ascii_lowercase())
            .collect(),
        methods: filter.allow_methods.join(", "),
        headers: filter.allow_headers.join(", "),
        expose_headers: filter.expose_headers.join(", "),
        credentials: filter.allow_credentials.unwrap_or(false),
        max_age_s: u64::try_from(filter.max_age.unwrap_or(5)).unwrap_or(0),
        gateway_api: true,
    }
}

fn header_changes(modifier: &HeaderModifier) -> HeaderChanges {
    let pairs = |list: &[portico_gateway::HttpHeader]| {
        (list.iter())
            .map(|h| (h.name.to_ascii_lowercase(), h.value.clone()))
            .collect()
    };
    HeaderChanges {
        set: pairs(&modifier.set),
        add: pairs(&modifier.add),
        remove: modifier
            .remove
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .collect(),
    }
}

fn rewrite(modifier: &PathModifier, prefix: &str) -> Option<PathRewrite> {
    match modifier.type_.as_str() {
        "ReplaceFullPath" => Some(PathRewrite::Full {
            path: modifier.replace_full_path.clone()?,
        }),
        "ReplacePrefixMatch" => Some(PathRewrite::Prefix {
            prefix: prefix.to_owned(),
            replacement: modifier.replace_prefix_match.clone()?,
        }),
        _ => None,
    }
}

/// A mirror's share in millionths: `percent`, else `fraction`, else every request.
fn per_million(mirror: &portico_gateway::RequestMirror) -> u32 {
    let share = match (mirror.percent, mirror.fraction) {
        (Some(percent), _) => i64::from(percent) * 10_000,
        (None, Some(f)) => {
            let denominator = i64::from(f.denominator.unwrap_or(100).max(1));
            i64::from(f.numerator) * 1_000_000 / denominator
        }
        (None, None) => 1_000_000,
    };
    u32::try_from(share.clamp(0, 1_000_000)).unwrap_or(0)
}

/// `backend`'s options on top of the rule's: header changes of both (the rule's first), the
/// backend's rewrite where it has one, the mirrors of both; the rule's timeouts.
pub(crate) fn merge(rule: &PolicyOptions, backend: PolicyOptions) -> PolicyOptions {
    let both = |a: &Option<HeaderChanges>, b: Option<HeaderChanges>| match (a.clone(), b) {
        (Some(mut a), Some(b)) => {
            a.set.extend(b.set);
            a.add.extend(b.add);
            a.remove.extend(b.remove);
            Some(a)
        }
        (a, b) => b.or(a),
    };
    let mut mirrors = rule.mirrors.clone();
    mirrors.extend(backend.mirrors);
    PolicyOptions {
        request_headers: both(&rule.request_headers, backend.request_headers),
        response_headers: both(&rule.response_headers, backend.response_headers),
        upstream_host: backend.upstream_host.or_else(|| rule.upstream_host.clone()),
        path: backend.path.or_else(|| rule.path.clone()),
        cors: backend.cors.or_else(|| rule.cors.clone()),
        mirrors,
        ..rule.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_the_apis() {
        for (written, ms) in [
            ("10s", Some(10_000)),
            ("500ms", Some(500)),
            ("1m30s", Some(90_000)),
            ("1h", Some(3_600_000)),
            ("0s", Some(0)),
            ("", None),
            ("10", None),
            ("1.5s", None),
            ("123456s", None),
            ("s", None),
        ] {
            assert_eq!(duration_ms(written), ms, "{written:?}");
        }
    }
}
