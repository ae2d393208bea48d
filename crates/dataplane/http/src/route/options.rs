//! A policy's options compiled for serving: the rewrite's regular expression built once per
//! policy, header values checked once. The rewrite itself is [`rewrite`], a pure function.

use crate::auth::Auth;
use crate::ratelimit::Limiter;
use http::HeaderValue;
use portico_model::{Cors, PolicyOptions, RateLimit};
use regex::{Regex, RegexBuilder};
use std::sync::Arc;

/// The most memory one compiled expression may take (the `regex` crate's own default is
/// 10 MiB); a pattern over it is refused like an invalid one.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What a route changes in the requests it forwards, and its CORS answers.
#[derive(Debug)]
pub struct RouteOptions {
    pub(crate) rewrite: Option<CompiledRewrite>,
    pub(crate) upstream_host: Option<HeaderValue>,
    pub(crate) cors: Option<Cors>,
    /// The Gateway API's filters, if the route has any.
    pub(crate) filters: Option<super::filters::Filters>,
    /// The Ingress's per-client limits, shared by its routes.
    pub(crate) rate_limit: Option<Arc<Limiter>>,
    /// `auth-url`; `Some(None)`: set but not usable (every request answers 500).
    pub(crate) external_auth: Option<Option<Auth>>,
    /// `auth-type: basic`.
    pub(crate) basic_auth: Option<crate::auth::basic::Basic>,
    /// The Ingress's own `Strict-Transport-Security` for HTTPS responses, in place of the
    /// process's; `Some(None)`: none at all (`hsts-max-age: 0`).
    pub(crate) hsts: Option<Option<HeaderValue>>,
    /// The Ingress's own response codings, in place of the process's.
    pub(crate) compression: Option<portico_model::Compression>,
    /// `default-backend` and `custom-http-errors`; none when the pool is not served here.
    pub(crate) errors: Option<CompiledErrors>,
}

/// [`portico_model::ErrorPages`] with its pool's state and its header values checked once.
#[derive(Debug)]
pub(crate) struct CompiledErrors {
    pub(crate) pool: Arc<super::PoolState>,
    pub(crate) unavailable: bool,
    pub(crate) codes: Vec<u16>,
    /// `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`, `X-Service-Port`, in that order.
    pub(crate) fields: [HeaderValue; 4],
}

impl CompiledErrors {
    fn compile(
        errors: &portico_model::ErrorPages,
        pool: &dyn Fn(portico_model::PoolId) -> Option<Arc<super::PoolState>>,
    ) -> Option<Self> {
        let value = |s: &str| HeaderValue::from_str(s).ok();
        Some(CompiledErrors {
            pool: pool(errors.pool)?,
            unavailable: errors.unavailable,
            codes: errors.codes.clone(),
            fields: [
                value(&errors.namespace)?,
                value(&errors.ingress)?,
                value(&errors.service)?,
                value(&errors.service_port)?,
            ],
        })
    }

    /// Whether an answer with `status` gets the default backend's page instead.
    pub(crate) fn intercepts(&self, status: u16) -> bool {
        self.codes.binary_search(&status).is_ok()
    }
}

#[derive(Debug)]
pub(crate) struct CompiledRewrite {
    pub(crate) pattern: Regex,
    pub(crate) target: String,
    pub(crate) forwarded_prefix: Option<HeaderValue>,
}

/// `pattern` as a location regex: case-insensitive; anchored at the start when `anchored`
/// (the match of a path), not for a rewrite (nginx's `rewrite` searches the path).
pub(crate) fn path_regex(pattern: &str, anchored: bool) -> Option<Regex> {
    let anchor = if anchored { "^" } else { "" };
    RegexBuilder::new(&format!("{anchor}(?:{pattern})"))
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .ok()
}

impl RouteOptions {
    /// The compiled options; an expression or value the translator should have refused
    /// leaves its option out (the translation reports such policies and does not serve them).
    /// `pool` gives the state of a mirror's pool; `limiter` the limiter of a rate limit (the
    /// same one for the same settings).
    pub(crate) fn compile(
        options: &PolicyOptions,
        pool: &dyn Fn(portico_model::PoolId) -> Option<std::sync::Arc<super::PoolState>>,
        limiter: &dyn Fn(&RateLimit) -> Arc<Limiter>,
        credentials: &portico_model::Credentials,
    ) -> Self {
        let rewrite = options.rewrite.as_ref().and_then(|r| {
            Some(CompiledRewrite {
                pattern: path_regex(&r.pattern, false)?,
                target: r.target.clone(),
                forwarded_prefix: (r.forwarded_prefix.as_deref())
                    .and_then(|p| HeaderValue::from_str(p).ok()),
            })
        });
        RouteOptions {
            rewrite,
            upstream_host: (options.upstream_host.as_deref())
                .and_then(|h| HeaderValue::from_str(h).ok()),
            cors: options.cors.clone(),
            filters: super::filters::Filters::compile(options, pool),
            rate_limit: options.rate_limit.as_ref().map(limiter),
            external_auth: options.external_auth.as_ref().map(Auth::compile),
            basic_auth: (options.basic_auth.as_ref())
                .map(|b| crate::auth::basic::Basic::compile(b, credentials)),
            hsts: options.hsts.as_ref().map(crate::proxy::hsts_value),
            compression: options.compression,
            errors: (options.errors.as_ref()).and_then(|e| CompiledErrors::compile(e, pool)),
        }
    }
}

/// nginx's `rewrite "(?i)<pattern>" <target> break;` on a request target: when `pattern`
/// matches somewhere in `path`, the new target is `target` with `$1`…`$9` replaced by the
/// first match's groups (empty when a group took no part), followed by the query: kept as it
/// was, appended after `&` when `target` has a query of its own, dropped when `target` ends
/// with `?`. `None` when the pattern does not match (the target is unchanged).
pub fn rewrite(pattern: &Regex, target: &str, path: &str, query: Option<&str>) -> Option<String> {
    let captures = pattern.captures(path)?;
    let mut out = String::with_capacity(target.len() + path.len());
    let mut rest = target;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.as_bytes().first() {
            Some(d @ b'1'..=b'9') => {
                let group = usize::from(d - b'0');
                out.push_str(captures.get(group).map_or("", |m| m.as_str()));
                rest = &after[1..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let query = query.filter(|q| !q.is_empty());
    if let Some(kept) = out.strip_suffix('?') {
        return Some(kept.to_owned());
    }
    if let Some(query) = query {
        out.push(if out.contains('?') { '&' } else { '?' });
        out.push_str(query);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (Ingress path, rewrite-target, request path and query, upstream target), as nginx's
    /// `rewrite "(?i)path" target break;` turns them; `None`: no match, unchanged.
    const CASES: &[(&str, &str, &str, Option<&str>)] = &[
        // ingress-nginx's documented example: the second group is what follows.
        ("/something(/|$)(.*)", "/$2", "/something", Some("/")),
        ("/something(/|$)(.*)", "/$2", "/something/", Some("/")),
        ("/something(/|$)(.*)", "/$2", "/something/new", Some("/new")),
        (
            "/something(/|$)(.*)",
            "/$2",
            "/something/new/",
            Some("/new/"),
        ),
        ("/something(/|$)(.*)", "/$2", "/SomeThing/New", Some("/New")),
        (
            "/something(/|$)(.*)",
            "/$2",
            "/something?a=1",
            Some("/?a=1"),
        ),
        ("/something(/|$)(.*)", "/$2", "/somethingelse", None),
        // Without groups the whole path is replaced: ingress-nginx's 0.22 behaviour.
        ("/foo", "/", "/foo/bar", Some("/")),
        ("/foo", "/new/backend", "/foo?x=y", Some("/new/backend?x=y")),
        // Several groups, in any order, and a group that took no part.
        (
            "/api/(v[0-9]+)/(.*)",
            "/$2/$1",
            "/api/v2/users",
            Some("/users/v2"),
        ),
        ("/a(/b)?(/.*)", "/x$1$2", "/a/c", Some("/x/c")),
        (
            "/foo/bar/(.+)",
            "/new/backend/$1",
            "/foo/bar/bar",
            Some("/new/backend/bar"),
        ),
        // The search is not anchored: the first match anywhere in the path.
        ("/b(.*)", "/x$1", "/a/b/c", Some("/x/c")),
        // Queries: the target's own comes first, `?` at the end drops the client's.
        ("/s(.*)", "/q?from=s", "/s/t?a=1", Some("/q?from=s&a=1")),
        ("/s(.*)", "/q$1?", "/s/t?a=1", Some("/q/t")),
        // `$` before anything but 1–9 is kept as written.
        ("/p(.*)", "/$0$x$$1", "/p/r", Some("/$0$x$/r")),
    ];

    #[test]
    fn rewrite_follows_nginx_rules_for_groups_trailing_slashes_and_queries() {
        for (pattern, target, request, want) in CASES {
            let re = path_regex(pattern, false).unwrap();
            let (path, query) = request
                .split_once('?')
                .map_or((*request, None), |(p, q)| (p, Some(q)));
            let got = rewrite(&re, target, path, query);
            assert_eq!(got.as_deref(), *want, "{pattern} → {target} on {request}");
        }
    }

    #[test]
    fn location_regexes_are_anchored_and_case_insensitive() {
        let re = path_regex("/foo.+", true).unwrap();
        assert!(re.is_match("/FOO/bar"));
        assert!(!re.is_match("/x/foo/bar"));
        assert!(!re.is_match("/foo"));
        assert!(path_regex("/(?=lookahead)", true).is_none());
    }
}
