//! An Ingress's per-location annotations (ingress-nginx's word: what each of its paths does
//! besides choosing the pool): regex paths, the rewrite, redirects, the upstream `Host`,
//! `X-Forwarded-Prefix`, the HTTPS redirect it forces, CORS, canaries, rate limits, external and basic auth, HSTS, compression, the default backend and
//! custom error pages. Read with the same [`Reader`]
//! as the upstream settings; a bad value is a warning and the default applies.

use super::canary::Canary;
use super::{Reader, parse};
use crate::KeptIngress;
use portico_model::{
    BasicAuth, Compression, Cors, Diagnostic, ExternalAuth, Hsts, ObjectRef, RateLimit,
};
use std::sync::{Arc, LazyLock};

/// What one Ingress's annotations ask of its routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Location {
    /// `use-regex`: its paths, and every path of its hosts, are regular expressions.
    pub use_regex: bool,
    /// `rewrite-target`: where the paths are rewritten to (`$1`…`$9` from the path's groups).
    pub rewrite_target: Option<String>,
    /// `x-forwarded-prefix`, sent with rewritten requests.
    pub forwarded_prefix: Option<String>,
    /// `upstream-vhost`: the `Host` sent to the members.
    pub upstream_host: Option<String>,
    /// `app-root`: `/` is redirected (302) here.
    pub app_root: Option<String>,
    /// `temporal-redirect` or `permanent-redirect`, with its status: every path answers it.
    pub redirect: Option<(u16, String)>,
    /// `force-ssl-redirect`: its hosts' HTTP requests go to HTTPS even without `spec.tls`.
    pub force_ssl_redirect: bool,
    /// `ssl-passthrough`: its hosts' TLS goes unterminated to their pools on the HTTPS port.
    pub ssl_passthrough: bool,
    pub cors: Option<Cors>,
    /// `canary: "true"`: the Ingress's paths are the alternative backends of the Ingress that
    /// routes the same host and path.
    pub canary: Option<Canary>,
    /// `limit-rps`, `limit-rpm`, `limit-connections` and their settings.
    pub rate_limit: Option<RateLimit>,
    /// `auth-url` and its settings; `Err`: set but not servable (the paths answer 503).
    pub external_auth: Option<Result<ExternalAuth, ()>>,
    /// `auth-type: basic` and its settings; `Err`: set but not servable (the paths answer
    /// 503).
    pub basic_auth: Option<Result<BasicAuth, ()>>,
    /// `server-alias`: more names for its rules' hosts (lower-case; `*.` allowed).
    pub aliases: Vec<String>,
    /// `portico.dev/hsts-max-age` and its companions: the Ingress's own
    /// `Strict-Transport-Security`.
    pub hsts: Option<Hsts>,
    /// `portico.dev/compression`: the Ingress's own response codings.
    pub compression: Option<Compression>,
    /// `default-backend`: the Service (in the Ingress's namespace) that answers when a path's
    /// own backend has no ready member, and serves the pages of `custom_errors`; with the
    /// full name of the annotation that named it.
    pub default_backend: Option<(String, String)>,
    /// `custom-http-errors`: the codes whose pages come from the default backend, ascending.
    pub custom_errors: Vec<u16>,
    /// `from-to-www-redirect`: the other name of each host (`www.` added or taken off)
    /// redirects to it.
    pub from_to_www: bool,
}

impl Location {
    /// The settings of an Ingress without such annotations, shared.
    pub(crate) fn default_arc() -> Arc<Location> {
        static DEFAULT: LazyLock<Arc<Location>> = LazyLock::new(Arc::default);
        DEFAULT.clone()
    }

    /// Whether a route of this Ingress whose path is `path` (as written) makes its host's
    /// paths regular expressions: `use-regex`, or a rewrite to another path (ingress-nginx's
    /// `enforceRegexModifier`).
    pub(crate) fn makes_regex(&self, path: &str) -> bool {
        self.use_regex || self.rewrites(path)
    }

    /// Whether requests of the route with `path` are rewritten (a target equal to the path
    /// is no rewrite, as in ingress-nginx).
    pub(crate) fn rewrites(&self, path: &str) -> bool {
        self.rewrite_target.as_deref().is_some_and(|t| t != path)
    }
}

/// The location settings of `ingress`, with a warning for each bad value.
pub(crate) fn location(
    object: &ObjectRef,
    ingress: &KeptIngress,
    diagnostics: &mut Vec<Diagnostic>,
) -> Arc<Location> {
    let Some(annotations) = ingress.metadata.annotations.as_ref() else {
        return Location::default_arc();
    };
    let mut r = Reader {
        object,
        annotations,
        diagnostics,
    };
    let l = Location {
        use_regex: r.value("use-regex", parse::bool_value).unwrap_or(false),
        rewrite_target: r.value("rewrite-target", parse::rewrite_target),
        forwarded_prefix: r.value("x-forwarded-prefix", parse::header_value),
        upstream_host: r.value("upstream-vhost", parse::authority),
        app_root: r.value("app-root", parse::absolute_path),
        redirect: redirect(&mut r),
        force_ssl_redirect: r
            .value("force-ssl-redirect", parse::bool_value)
            .unwrap_or(false),
        ssl_passthrough: r
            .value("ssl-passthrough", parse::bool_value)
            .unwrap_or(false),
        cors: super::cors::cors(&mut r),
        canary: super::canary::canary(&mut r),
        rate_limit: super::ratelimit::rate_limit(&mut r),
        external_auth: super::auth::external_auth(&mut r),
        basic_auth: super::basic::basic_auth(&mut r),
        aliases: r.value("server-alias", aliases).unwrap_or_default(),
        hsts: hsts(&mut r),
        compression: r.value("compression", Compression::parse),
        default_backend: default_backend(&mut r),
        custom_errors: r
            .value("custom-http-errors", parse::error_codes)
            .unwrap_or_default(),
        from_to_www: r
            .value("from-to-www-redirect", parse::bool_value)
            .unwrap_or(false),
    };
    if l == Location::default() {
        return Location::default_arc();
    }
    Arc::new(l)
}

/// `temporal-redirect` (302, or `temporal-redirect-code`) before `permanent-redirect` (301, or
/// `permanent-redirect-code`), as ingress-nginx reads them.
fn redirect(r: &mut Reader<'_>) -> Option<(u16, String)> {
    let temporal = r.value("temporal-redirect", parse::redirect_url);
    let temporal_code = r.value("temporal-redirect-code", parse::redirect_code);
    let permanent = r.value("permanent-redirect", parse::redirect_url);
    let permanent_code = r.value("permanent-redirect-code", parse::redirect_code);
    match (temporal, permanent) {
        (Some(url), _) => Some((temporal_code.unwrap_or(302), url)),
        (None, Some(url)) => Some((permanent_code.unwrap_or(301), url)),
        (None, None) => None,
    }
}

/// `default-backend`: the annotation's full name and the Service it names.
fn default_backend(r: &mut Reader<'_>) -> Option<(String, String)> {
    let (name, _) = r.get("default-backend")?;
    let service = r.value("default-backend", parse::service_name)?;
    Some((name, service))
}

/// `hsts-max-age` (seconds; 0: none on this Ingress's routes), with `hsts-include-subdomains`
/// and `hsts-preload`, which mean nothing without it: then a warning says so.
fn hsts(r: &mut Reader<'_>) -> Option<Hsts> {
    let max_age_s = r.value("hsts-max-age", parse::u64_value);
    let include_subdomains = r.value("hsts-include-subdomains", parse::bool_value);
    let preload = r.value("hsts-preload", parse::bool_value);
    let Some(max_age_s) = max_age_s else {
        for key in ["hsts-include-subdomains", "hsts-preload"] {
            if let Some((name, _)) = r.get(key) {
                let message = "ignored without portico.dev/hsts-max-age on the same Ingress";
                r.warn(&name, message);
            }
        }
        return None;
    };
    Some(Hsts {
        max_age_s,
        include_subdomains: include_subdomains.unwrap_or(false),
        preload: preload.unwrap_or(false),
    })
}

/// `server-alias`: host names separated by commas, each possibly `*.`-prefixed.
fn aliases(v: &str) -> Result<Vec<String>, String> {
    let names = v.split(',').map(str::trim).filter(|n| !n.is_empty());
    names
        .map(|n| {
            let (wild, name) = n.strip_prefix("*.").map_or(("", n), |rest| ("*.", rest));
            parse::dns_name(name).map(|name| format!("{wild}{name}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            "must be host names separated by commas (e.g. \"foo.com, *.bar.com\")".to_owned()
        })
}
