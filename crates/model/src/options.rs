//! What a policy does to the requests it forwards and to their answers, beyond choosing the
//! pool: ingress-nginx's per-location annotations (`rewrite-target`, `x-forwarded-prefix`,
//! `upstream-vhost`, CORS, rate limits, external auth). Kept apart from the rules and the action so that a policy
//! without them is unchanged.

use crate::{HeaderChanges, Mirror, ObjectRef, PathRewrite, PoolId, Timeouts};
use serde::{Deserialize, Serialize};

/// The request changes and CORS answers of one policy. Every field is optional; a policy
/// without any has no options at all (`L7Policy::options` is `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Rewrite>,
    /// The `Host` field sent to the members instead of the client's (`upstream-vhost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// The Gateway API's filters ([`crate::filters`]): header changes on the request and on
    /// its answer, a new path (URLRewrite), mirrors, timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<HeaderChanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<HeaderChanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub timeouts: Timeouts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<ExternalAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
    /// The Ingress's own `Strict-Transport-Security` (`portico.dev/hsts-max-age`, …), in place
    /// of the process's (`--hsts-max-age`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts: Option<Hsts>,
    /// The Ingress's own response codings (`portico.dev/compression`), in place of the
    /// process's (`--compression`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// ingress-nginx's `default-backend` and `custom-http-errors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<ErrorPages>,
}

/// Where a policy's error answers come from: ingress-nginx's default backend (the
/// `default-backend` annotation's Service, else the controller-wide `--default-backend-service`),
/// a pool of the load balancer. It answers in place of the policy's pool when that has no ready
/// member (`unavailable`, the annotation's only), and it serves the page of each answer whose
/// status is one of `codes` (`custom-http-errors`), that status kept. Either request carries
/// the headers ingress-nginx sends its default backend: `X-Code`, `X-Format` (the request's
/// `Accept`), `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`,
/// `X-Service-Port`, `X-Request-ID`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ErrorPages {
    pub pool: PoolId,
    #[serde(default, skip_serializing_if = "is_false")]
    pub unavailable: bool,
    /// Ascending, each in 400–599.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<u16>,
    /// The Ingress (`X-Namespace`, `X-Ingress-Name`).
    pub namespace: String,
    pub ingress: String,
    /// The Service port of the policy's own backend, as the Ingress names it
    /// (`X-Service-Name`, `X-Service-Port`).
    pub service: String,
    pub service_port: String,
}

impl ErrorPages {
    /// Whether an answer with `status` gets the default backend's page instead.
    pub fn intercepts(&self, status: u16) -> bool {
        self.codes.binary_search(&status).is_ok()
    }
}

/// A content coding the data plane compresses responses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coding {
    Zstd,
    Br,
    Gzip,
}

impl Coding {
    /// The token of `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Zstd => "zstd",
            Coding::Br => "br",
            Coding::Gzip => "gzip",
        }
    }
}

/// The codings responses may be compressed with, in the order preferred when a client accepts
/// several equally (`--compression zstd,br,gzip`, the default; `off`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "Vec<Coding>", from = "Vec<Coding>")]
pub struct Compression {
    order: [Option<Coding>; 3],
}

impl Compression {
    pub const OFF: Compression = Compression { order: [None; 3] };

    /// `off`, or codings separated by commas, each once.
    pub fn parse(value: &str) -> Result<Compression, String> {
        if value.trim() == "off" {
            return Ok(Compression::OFF);
        }
        let mut codings = Vec::new();
        for token in value.split(',').map(str::trim) {
            let coding = match token {
                "zstd" => Coding::Zstd,
                "br" => Coding::Br,
                "gzip" => Coding::Gzip,
                _ => {
                    return Err(format!(
                        "expected off or codings from zstd, br, gzip separated by commas, got {token:?}"
                    ));
                }
            };
            if codings.contains(&coding) {
                return Err(format!("{token} is named twice"));
            }
            codings.push(coding);
        }
        Ok(Compression::from(codings))
    }

    /// The codings, most preferred first.
    pub fn codings(&self) -> impl Iterator<Item = Coding> + '_ {
        self.order.iter().flatten().copied()
    }

    pub fn is_off(&self) -> bool {
        self.order[0].is_none()
    }
}

impl Default for Compression {
    fn default() -> Self {
        Compression {
            order: [Some(Coding::Zstd), Some(Coding::Br), Some(Coding::Gzip)],
        }
    }
}

impl From<Vec<Coding>> for Compression {
    /// The first three distinct codings.
    fn from(codings: Vec<Coding>) -> Self {
        let mut order = [None; 3];
        let mut n = 0;
        for c in codings {
            if n < 3 && !order.contains(&Some(c)) {
                order[n] = Some(c);
                n += 1;
            }
        }
        Compression { order }
    }
}

impl From<Compression> for Vec<Coding> {
    fn from(c: Compression) -> Self {
        c.codings().collect()
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_off() {
            return f.write_str("off");
        }
        let tokens: Vec<&str> = self.codings().map(Coding::token).collect();
        f.write_str(&tokens.join(","))
    }
}

/// `Strict-Transport-Security` on the responses to HTTPS requests (RFC 6797): the process's
/// (`--hsts-max-age`, `--hsts-include-subdomains`, `--hsts-preload`) or an Ingress's. A
/// `max_age_s` of 0 sends none. A response whose member set the field keeps the member's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hsts {
    pub max_age_s: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub include_subdomains: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub preload: bool,
}

impl Hsts {
    /// The field's value (`max-age=N[; includeSubDomains][; preload]`); none when off.
    pub fn value(&self) -> Option<String> {
        if self.max_age_s == 0 {
            return None;
        }
        let mut value = format!("max-age={}", self.max_age_s);
        if self.include_subdomains {
            value.push_str("; includeSubDomains");
        }
        if self.preload {
            value.push_str("; preload");
        }
        Some(value)
    }
}

/// ingress-nginx's `auth-url` (nginx's `auth_request`): before a request is forwarded, a
/// subrequest without its body asks the auth service; a 2xx lets it through (with the
/// `response_headers` copied from the answer), 401 and 403 are returned to the client (401
/// as a redirect to `signin` when set), anything else, a timeout or an unreachable service is
/// 500: the request never passes unchecked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExternalAuth {
    /// An `http://` URL.
    pub url: String,
    /// The subrequest's method (`auth-method`); none: the client's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Where a 401 redirects (`auth-signin`), with `$host`, `$scheme`, `$request_uri` and
    /// `$escaped_request_uri` expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signin: Option<String>,
    /// The query parameter of `signin` that carries the original URL (`rd`).
    pub signin_redirect_param: String,
    /// Header fields copied from the auth service's 2xx answer to the forwarded request
    /// (lower-case), replacing the client's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub response_headers: Vec<String>,
    /// `X-Auth-Request-Redirect` of the subrequest (`auth-request-redirect`); none: the
    /// request's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<String>,
}

/// ingress-nginx's `auth-type: basic`: a request without a user and password the Secret's
/// htpasswd entries accept is answered 401 with `WWW-Authenticate: Basic realm="…"`. The
/// model names the Secret only; its entries travel beside the model as key material do
/// ([`crate::Htpasswd`]), and a Secret the data plane was not handed answers 503.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BasicAuth {
    /// The Secret (kind `Secret`, in the Ingress's namespace).
    pub secret: ObjectRef,
    /// `auth-realm`, unescaped.
    pub realm: String,
}

/// ingress-nginx's `limit-rps`, `limit-rpm` and `limit-connections` per client address, with
/// nginx's `limit_req … burst=N nodelay` and `limit_conn`: requests over the rate beyond the
/// burst, or beyond the connections in progress, are refused (503, or `--limit-status-code`).
/// Counted per data-plane process, as ingress-nginx counts per replica.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RateLimit {
    /// The Ingress (`namespace/name`) whose paths share the counts, as ingress-nginx's zones
    /// are per Ingress.
    pub zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Requests in progress at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// The burst is the rate times this (`limit-burst-multiplier`, 5 by default).
    pub burst_multiplier: u32,
    /// Client ranges that are not limited (`limit-whitelist`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<crate::Cidr>,
}

/// nginx's `rewrite "(?i)<pattern>" <target> break;`: the first match of `pattern` in the
/// request path, case-insensitive, replaces the whole path with `target`, its `$1`…`$9` being
/// the match's groups; the query is kept (appended after `&` when `target` has one of its
/// own, dropped when `target` ends with `?`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rewrite {
    /// A regular expression (the `regex` crate's syntax), as the Ingress path writes it.
    pub pattern: String,
    /// Starts with `/`; `$1`…`$9` are the only variables.
    pub target: String,
    /// `X-Forwarded-Prefix` sent with rewritten requests (`x-forwarded-prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_prefix: Option<String>,
}

/// Cross-origin resource sharing as ingress-nginx's `enable-cors` answers it: a request whose
/// `Origin` is allowed gets the `Access-Control-*` fields on its response, and a preflight
/// (`OPTIONS`) from an allowed origin is answered 204 without reaching the members.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cors {
    /// Allowed origins (`scheme://host[:port]`, a host may start with `*.`); empty: any
    /// origin (`*`, answered as `Access-Control-Allow-Origin: *`).
    pub origins: Vec<String>,
    pub methods: String,
    pub headers: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expose_headers: String,
    pub credentials: bool,
    pub max_age_s: u64,
    /// The Gateway API's CORS filter instead of ingress-nginx's: `*.` in an origin stands
    /// for one or more labels; with credentials allowed, a `*` origin answers the request's
    /// own origin; a preflight is answered 200 (not 204), and a `*` list of methods or
    /// headers answers what the preflight asks for.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gateway_api: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Cors {
    /// The `Access-Control-Allow-Origin` of a request whose `Origin` field is `origin`: `*`
    /// when every origin is allowed (with or without an `Origin`, as ingress-nginx answers),
    /// the request's origin when one of `origins` matches it (case-insensitively; `*.` stands
    /// for exactly one label), else none: the request gets no CORS fields.
    pub fn allow_origin<'a>(&self, origin: Option<&'a str>) -> Option<&'a str> {
        if self.origins.iter().any(|o| o == "*") {
            // A credentialed answer may not say `*` (Fetch): the Gateway API echoes.
            return match (self.gateway_api && self.credentials, origin) {
                (true, Some(origin)) => Some(origin),
                _ => Some("*"),
            };
        }
        let origin = origin?;
        let labels = if self.gateway_api {
            Labels::Many
        } else {
            Labels::One
        };
        self.origins
            .iter()
            .any(|allowed| origin_matches(allowed, origin, labels))
            .then_some(origin)
    }
}

/// How many labels `*.` stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Labels {
    One,
    Many,
}

/// `allowed` (lower-case, `scheme://[*.]host[:port]` or `null`) against a request's origin.
fn origin_matches(allowed: &str, origin: &str, labels: Labels) -> bool {
    let origin = origin.to_ascii_lowercase();
    let Some((head, tail)) = allowed.split_once("*.") else {
        return allowed == origin;
    };
    let Some(label) = origin
        .strip_prefix(head)
        .and_then(|rest| rest.strip_suffix(tail))
        .and_then(|rest| rest.strip_suffix('.'))
    else {
        return false;
    };
    let one = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    match labels {
        Labels::One => one(label),
        Labels::Many => label.split('.').all(one),
    }
}

fn is_default(timeouts: &Timeouts) -> bool {
    *timeouts == Timeouts::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_lists_parse_in_order_and_refuse_the_unknown() {
        let list = Compression::parse("br, gzip").unwrap();
        assert_eq!(
            list.codings().collect::<Vec<_>>(),
            [Coding::Br, Coding::Gzip]
        );
        assert_eq!(list.to_string(), "br,gzip");
        assert!(Compression::parse("off").unwrap().is_off());
        assert_eq!(Compression::default().to_string(), "zstd,br,gzip");
        assert!(Compression::parse("gzip,deflate").is_err());
        assert!(Compression::parse("gzip,gzip").is_err());
        assert!(Compression::parse("").is_err());
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(json, r#"["br","gzip"]"#);
        assert_eq!(serde_json::from_str::<Compression>(&json).unwrap(), list);
    }

    fn cors(origins: &[&str]) -> Cors {
        Cors {
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            methods: String::new(),
            headers: String::new(),
            expose_headers: String::new(),
            credentials: true,
            max_age_s: 0,
            gateway_api: false,
        }
    }

    #[test]
    fn the_gateway_apis_wildcards_take_several_labels_and_a_credentialed_star_echoes() {
        let mut some = cors(&["https://*.bar.com"]);
        some.gateway_api = true;
        let allowed = |o| some.allow_origin(Some(o));
        assert_eq!(allowed("https://www.bar.com"), Some("https://www.bar.com"));
        assert_eq!(
            allowed("https://x.www.bar.com"),
            Some("https://x.www.bar.com")
        );
        assert_eq!(allowed("https://bar.com"), None);
        assert_eq!(allowed("https://x..bar.com"), None);
        let mut any = cors(&["*"]);
        any.gateway_api = true;
        assert_eq!(
            any.allow_origin(Some("https://a.test")),
            Some("https://a.test")
        );
        any.credentials = false;
        assert_eq!(any.allow_origin(Some("https://a.test")), Some("*"));
    }

    #[test]
    fn allowed_origins_are_echoed_and_a_star_allows_every_request() {
        let any = cors(&["*"]);
        assert_eq!(any.allow_origin(None), Some("*"));
        assert_eq!(any.allow_origin(Some("https://x.test")), Some("*"));
        let some = cors(&["https://origin.cors.com:8080", "https://*.example.com"]);
        let allowed = |o| some.allow_origin(Some(o));
        assert_eq!(
            allowed("https://origin.cors.com:8080"),
            Some("https://origin.cors.com:8080")
        );
        assert_eq!(
            allowed("https://App.Example.com"),
            Some("https://App.Example.com")
        );
        // The port is part of the origin, and a wildcard is one label.
        assert_eq!(allowed("https://origin.cors.com"), None);
        assert_eq!(allowed("https://a.b.example.com"), None);
        assert_eq!(allowed("https://example.com"), None);
        assert_eq!(allowed("http://app.example.com"), None);
        assert_eq!(
            allowed("https://evil.com/https://origin.cors.com:8080"),
            None
        );
        assert_eq!(some.allow_origin(None), None);
    }
}
