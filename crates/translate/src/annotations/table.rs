//! The one table of Ingress annotation keys: under which prefixes each is read and what each
//! provider makes of it. The annotation reader takes from it which keys it knows and what it
//! warns about the others; `portico migrate` reports from it. So the report cannot say
//! "served" of a key the reader ignores, nor the reverse.

use serde::Serialize;

/// What Portico does with an annotation on one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "kebab-case")]
pub enum Outcome {
    /// As ingress-nginx does.
    Served,
    /// Served, with this difference from ingress-nginx.
    ServedDifferently(&'static str),
    /// Not served, for this reason; a warning names the annotation.
    Ignored(&'static str),
    /// Refused by design; the text names what replaces it.
    Refused(&'static str),
}

impl Outcome {
    /// `served`, `served-differently`, `ignored` or `refused`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Served => "served",
            Outcome::ServedDifferently(_) => "served-differently",
            Outcome::Ignored(_) => "ignored",
            Outcome::Refused(_) => "refused",
        }
    }

    /// The difference, the reason or the replacement; empty when served.
    pub fn detail(self) -> &'static str {
        match self {
            Outcome::Served => "",
            Outcome::ServedDifferently(s) | Outcome::Ignored(s) | Outcome::Refused(s) => s,
        }
    }

    /// Whether the key takes effect (as ingress-nginx's or differently).
    pub fn is_served(self) -> bool {
        matches!(self, Outcome::Served | Outcome::ServedDifferently(_))
    }
}

/// One annotation key (after its prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotation {
    pub key: &'static str,
    /// Read under `nginx.ingress.kubernetes.io/`.
    pub nginx: bool,
    /// Read under `portico.dev/`.
    pub portico: bool,
    /// What the built-in proxy makes of it.
    pub proxy: Outcome,
    /// What the haproxy provider makes of it.
    pub haproxy: Outcome,
}

impl Annotation {
    /// Its outcome on `provider` (`proxy` or `haproxy`; another provider serves no Ingress).
    pub fn outcome(&self, provider: &str) -> Outcome {
        if provider == "haproxy" {
            self.haproxy
        } else {
            self.proxy
        }
    }
}

use Outcome::{Ignored, Refused, Served, ServedDifferently};

/// Both prefixes, served alike by both providers.
const fn both(key: &'static str) -> Annotation {
    Annotation {
        key,
        nginx: true,
        portico: true,
        proxy: Served,
        haproxy: Served,
    }
}

/// Both prefixes, served by the proxy; `haproxy` on haproxy.
const fn proxy_only(key: &'static str, haproxy: Outcome) -> Annotation {
    Annotation {
        key,
        nginx: true,
        portico: true,
        proxy: Served,
        haproxy,
    }
}

/// Portico's own key (no ingress-nginx alias).
const fn own(key: &'static str, haproxy: Outcome) -> Annotation {
    Annotation {
        key,
        nginx: false,
        portico: true,
        proxy: Served,
        haproxy,
    }
}

/// An ingress-nginx key Portico does not serve (on either provider), and why.
const fn ignored(key: &'static str, why: &'static str) -> Annotation {
    Annotation {
        key,
        nginx: true,
        portico: false,
        proxy: Ignored(why),
        haproxy: Ignored(why),
    }
}

/// A snippet key, refused, with what replaces it.
const fn refused(key: &'static str, instead: &'static str) -> Annotation {
    Annotation {
        key,
        nginx: true,
        portico: true,
        proxy: Refused(instead),
        haproxy: Refused(instead),
    }
}

const NOT_YET: &str = "not served yet (planned: docs/migrating-from-ingress-nginx.md)";
const HSTS_HAPROXY: &str =
    "haproxy sends the process's Strict-Transport-Security (--hsts-max-age), not an Ingress's";
const HAPROXY_NOT_YET: &str =
    "served by the built-in proxy; the haproxy provider does not serve it yet";
const BASIC_HAPROXY: &str = "basic only (digest: a warning, the Ingress's paths answer 503); \
    a userlist checked by haproxy's crypt(3): bcrypt and crypt ($1$, $5$, $6$, DES) hashes; a \
    Secret holding $apr1$ or {SHA} hashes, which haproxy cannot check, answers 503 with a \
    warning rather than serve the paths unchecked";
const LIMIT_HAPROXY: &str = "a stick table per Ingress counts each client's requests in a \
    sliding window of (burst + 1) / rate: the same burst at once and the same rate over the \
    window, but after a burst the next request waits for the window to slide (up to one \
    window), where nginx admits one every 1/rate; counted per agent process, as ingress-nginx \
    counts per replica";
const REGEX: &str = "the regex crate's syntax (no lookaround or backreferences), on the path as \
    received (percent-encoding kept) rather than nginx's decoded one";
const CANARY: &str = "the canary's other annotations are its pool's (balancing, affinity, \
    timeouts), the main Ingress's locations' (rewrite, CORS, …) apply to both, as in \
    ingress-nginx; a canary without a main Ingress for its host and path is a warning";
const REGEX_SYNTAX: &str = "the regex crate's syntax (no lookaround or backreferences)";
const PER_AGENT: &str = "counted per agent process, as ingress-nginx counts per replica: N agents \
    serving one Ingress admit up to N times the rate";
const ALIAS: &str = "an alias gets the HTTP-to-HTTPS redirect and its own certificate only when \
    spec.tls lists it";
const NO_VARIABLES: &str = "nginx variables ($request_uri, …) in the URL are sent as written";
const FORCE_SSL: &str = "per host: the paths of other Ingresses on its hosts are redirected too";
const WWW: &str = "the Location keeps the request's path whole and the port its Host named \
    (ingress-nginx drops one trailing slash and names its HTTPS port when that is not 443); \
    308, scheme kept";
const DEFAULT_BACKEND: &str = "the Service's first port, as ingress-nginx takes it; a \
    Service that does not exist is a warning and the Ingress is served without it";
const REGEX_HAPROXY: &str = "the syntax PCRE2 and the regex crate read alike (no lookaround, \
    backreferences, named groups or Unicode classes; another path is an error on the Ingress and \
    is not served), on the path as received";
const REWRITE_HAPROXY: &str = "the syntax PCRE2 and the regex crate read alike (no lookaround, \
    backreferences, named groups or Unicode classes), on the path as received; a target holding \
    ?, % or \\ is not served by haproxy (an error on the Ingress)";
const NO_VARIABLES_HAPROXY: &str = "nginx variables ($request_uri, …) in the URL are sent as \
    written; a URL holding % is not served by haproxy (an error on the Ingress)";
const STREAMS: &str = "the proxy streams requests and responses; nothing to tune";

/// Every key Portico knows, in ingress-nginx's documentation order where it has one.
pub const ANNOTATIONS: &[Annotation] = &[
    // Upstream settings (docs/annotations.md).
    both("proxy-connect-timeout"),
    both("proxy-read-timeout"),
    proxy_only(
        "proxy-send-timeout",
        Ignored("haproxy has one server-side inactivity timeout, which proxy-read-timeout sets"),
    ),
    both("proxy-body-size"),
    Annotation {
        proxy: ServedDifferently("ewma is least request over a latency EWMA (P2C)"),
        haproxy: ServedDifferently("ewma and least_request are haproxy's leastconn"),
        ..both("load-balance")
    },
    both("upstream-hash-by"),
    Annotation {
        proxy: ServedDifferently("the cookie names the member, not its address"),
        ..both("affinity")
    },
    both("session-cookie-name"),
    both("session-cookie-max-age"),
    both("session-cookie-path"),
    both("proxy-next-upstream-tries"),
    both("whitelist-source-range"),
    both("allowlist-source-range"),
    both("denylist-source-range"),
    both("backend-protocol"),
    both("proxy-ssl-verify"),
    both("proxy-ssl-secret"),
    both("proxy-ssl-name"),
    both("proxy-ssl-server-name"),
    both("ssl-redirect"),
    // Portico's own.
    own("health-check-path", Served),
    own("health-check-interval", Served),
    own("health-check-timeout", Served),
    own("health-check-healthy-threshold", Served),
    own("health-check-unhealthy-threshold", Served),
    own("passive-health-failures", Served),
    own("passive-health-ejection", Served),
    own("retry-budget", Ignored("haproxy has no retry budget")),
    own("external-ip", Served),
    own("hsts-max-age", Ignored(HSTS_HAPROXY)),
    own("hsts-include-subdomains", Ignored(HSTS_HAPROXY)),
    own("hsts-preload", Ignored(HSTS_HAPROXY)),
    own(
        "compression",
        Ignored("haproxy compresses as --compression says (gzip), not per Ingress"),
    ),
    // Snippets: raw configuration text.
    refused(
        "configuration-snippet",
        "typed annotations: rewrite-target, x-forwarded-prefix, upstream-vhost, CORS \
         (enable-cors), redirects (permanent-redirect, temporal-redirect, app-root); \
         response headers are not yet typed",
    ),
    refused(
        "server-snippet",
        "typed annotations: server-alias, from-to-www-redirect, permanent-redirect, \
         force-ssl-redirect",
    ),
    refused(
        "auth-snippet",
        "auth-url and its typed settings (auth-method, auth-signin, auth-response-headers, \
         auth-request-redirect)",
    ),
    refused("modsecurity-snippet", "no replacement: Portico has no WAF"),
    refused(
        "stream-snippet",
        "Services of type LoadBalancer (provider l4)",
    ),
    // Known ingress-nginx keys that are not served.
    Annotation {
        proxy: ServedDifferently(REGEX),
        ..proxy_only("rewrite-target", ServedDifferently(REWRITE_HAPROXY))
    },
    Annotation {
        proxy: ServedDifferently(REGEX),
        ..proxy_only("use-regex", ServedDifferently(REGEX_HAPROXY))
    },
    Annotation {
        proxy: Served,
        haproxy: Served,
        ..both("app-root")
    },
    Annotation {
        proxy: ServedDifferently(NO_VARIABLES),
        haproxy: ServedDifferently(NO_VARIABLES_HAPROXY),
        ..both("permanent-redirect")
    },
    Annotation {
        proxy: Served,
        haproxy: Served,
        ..both("permanent-redirect-code")
    },
    Annotation {
        proxy: ServedDifferently(NO_VARIABLES),
        haproxy: ServedDifferently(NO_VARIABLES_HAPROXY),
        ..both("temporal-redirect")
    },
    Annotation {
        proxy: Served,
        haproxy: Served,
        ..both("temporal-redirect-code")
    },
    Annotation {
        proxy: ServedDifferently(FORCE_SSL),
        haproxy: ServedDifferently(FORCE_SSL),
        ..both("force-ssl-redirect")
    },
    Annotation {
        proxy: ServedDifferently(WWW),
        haproxy: ServedDifferently(WWW),
        ..both("from-to-www-redirect")
    },
    Annotation {
        proxy: ServedDifferently(ALIAS),
        haproxy: ServedDifferently(ALIAS),
        ..both("server-alias")
    },
    Annotation {
        proxy: Served,
        haproxy: Served,
        ..both("x-forwarded-prefix")
    },
    Annotation {
        proxy: Served,
        haproxy: Served,
        ..both("upstream-vhost")
    },
    both("enable-cors"),
    Annotation {
        proxy: ServedDifferently(
            "an origin is matched whole (ingress-nginx does not anchor its start)",
        ),
        haproxy: ServedDifferently(
            "an origin is matched whole (ingress-nginx does not anchor its start)",
        ),
        ..both("cors-allow-origin")
    },
    both("cors-allow-methods"),
    both("cors-allow-headers"),
    both("cors-expose-headers"),
    both("cors-allow-credentials"),
    both("cors-max-age"),
    Annotation {
        proxy: ServedDifferently(CANARY),
        haproxy: ServedDifferently(CANARY),
        ..both("canary")
    },
    both("canary-by-header"),
    both("canary-by-header-value"),
    Annotation {
        proxy: ServedDifferently(REGEX_SYNTAX),
        haproxy: ServedDifferently(
            "the syntax PCRE2 and the regex crate read alike (no lookaround, backreferences, \
             named groups or Unicode classes); another pattern is an error on the Ingress and \
             its canary's header is not served",
        ),
        ..both("canary-by-header-pattern")
    },
    both("canary-by-cookie"),
    Annotation {
        proxy: ServedDifferently(
            "drawn in turn (smooth weighted round robin): exactly canary-weight of every \
             canary-weight-total requests, where ingress-nginx draws at random",
        ),
        ..both("canary-weight")
    },
    both("canary-weight-total"),
    ignored("affinity-canary-behavior", NOT_YET),
    Annotation {
        proxy: ServedDifferently(
            "basic only: digest is a warning and the Ingress's paths answer 503; hashes \
             bcrypt, $apr1$, {SHA} and crypt ($1$, $5$, $6$, DES), not {PLAIN}",
        ),
        ..proxy_only("auth-type", ServedDifferently(BASIC_HAPROXY))
    },
    both("auth-secret"),
    both("auth-secret-type"),
    both("auth-realm"),
    Annotation {
        proxy: ServedDifferently(
            "http:// URLs without nginx variables only (another is a warning, and the \
             Ingress's paths answer 503); the subrequest's deadline is the Ingress's \
             proxy-read-timeout",
        ),
        ..proxy_only(
            "auth-url",
            Ignored(
                "served by the built-in proxy; the haproxy provider does not serve it yet and \
                 leaves the Ingress's paths out rather than serve them unchecked",
            ),
        )
    },
    proxy_only("auth-method", Ignored(HAPROXY_NOT_YET)),
    Annotation {
        proxy: ServedDifferently(
            "the nginx variables expanded are $host, $scheme, $request_uri and \
             $escaped_request_uri (another is a warning)",
        ),
        ..proxy_only("auth-signin", Ignored(HAPROXY_NOT_YET))
    },
    proxy_only("auth-signin-redirect-param", Ignored(HAPROXY_NOT_YET)),
    proxy_only("auth-response-headers", Ignored(HAPROXY_NOT_YET)),
    proxy_only("auth-request-redirect", Ignored(HAPROXY_NOT_YET)),
    ignored("auth-proxy-set-headers", NOT_YET),
    ignored("auth-cache-key", NOT_YET),
    ignored("auth-cache-duration", NOT_YET),
    ignored("auth-always-set-cookie", NOT_YET),
    ignored("auth-keepalive", NOT_YET),
    ignored("auth-keepalive-requests", NOT_YET),
    ignored("auth-keepalive-share-vars", NOT_YET),
    ignored("auth-keepalive-timeout", NOT_YET),
    ignored("enable-global-auth", NOT_YET),
    Annotation {
        proxy: ServedDifferently(PER_AGENT),
        ..proxy_only("limit-rps", ServedDifferently(LIMIT_HAPROXY))
    },
    Annotation {
        proxy: ServedDifferently(PER_AGENT),
        ..proxy_only("limit-rpm", ServedDifferently(LIMIT_HAPROXY))
    },
    Annotation {
        proxy: ServedDifferently(
            "counts requests in progress per client address (each HTTP/2 stream), where nginx \
             counts connections with a request in progress; per agent, as ingress-nginx counts \
             per replica",
        ),
        ..proxy_only(
            "limit-connections",
            ServedDifferently(
                "counts requests in progress per client address in a stick table, where nginx \
                 counts connections with a request in progress; per agent, as ingress-nginx \
                 counts per replica",
            ),
        )
    },
    proxy_only(
        "limit-burst-multiplier",
        ServedDifferently(
            "the burst is admitted at once, then haproxy's sliding window (see limit-rps) \
             refills it, not nginx's bucket",
        ),
    ),
    both("limit-whitelist"),
    ignored("limit-rate", NOT_YET),
    ignored("limit-rate-after", NOT_YET),
    Annotation {
        proxy: ServedDifferently(DEFAULT_BACKEND),
        haproxy: ServedDifferently(DEFAULT_BACKEND),
        ..both("default-backend")
    },
    Annotation {
        proxy: ServedDifferently(
            "the page is fetched with GET / and served with the intercepted status (nginx's \
             `error_page … =` keeps the method and takes the default backend's status); \
             without any default backend (annotation or --default-backend-service) the \
             backend's own answer is served, with a warning",
        ),
        ..proxy_only(
            "custom-http-errors",
            Ignored(
                "haproxy 2.6 cannot answer a response status with a page fetched from another \
                 backend (its errorfiles are static files); the backend's own answer is served",
            ),
        )
    },
    Annotation {
        proxy: ServedDifferently(
            "always on (no --enable-ssl-passthrough flag); the stream goes to the backend of \
             the host's `/` path (else its shortest path), balanced as that pool is",
        ),
        ..proxy_only(
            "ssl-passthrough",
            ServedDifferently(
                "always on; a `mode tcp` frontend on the HTTPS port reads the ClientHello's \
                 server name and hands the stream to the backend of the host's `/` path (else \
                 its shortest path), balanced by a hash of the client's address and port; \
                 the other hosts go to the terminating frontend through a unix socket. A \
                 backend that also serves HTTP routes is not passed through",
            ),
        )
    },
    ignored("service-upstream", NOT_YET),
    ignored("proxy-buffering", STREAMS),
    ignored("proxy-buffer-size", STREAMS),
    ignored("proxy-buffers-number", STREAMS),
    ignored("proxy-busy-buffers-size", STREAMS),
    ignored("proxy-max-temp-file-size", STREAMS),
    ignored("proxy-request-buffering", STREAMS),
    ignored("client-body-buffer-size", STREAMS),
    ignored(
        "proxy-http-version",
        "upstreams speak HTTP/1.1, or HTTP/2 by backend-protocol",
    ),
    ignored("proxy-next-upstream", NOT_YET),
    ignored("proxy-next-upstream-timeout", NOT_YET),
    ignored("proxy-cookie-domain", NOT_YET),
    ignored("proxy-cookie-path", NOT_YET),
    ignored("proxy-redirect-from", NOT_YET),
    ignored("proxy-redirect-to", NOT_YET),
    ignored(
        "proxy-ssl-ciphers",
        "upstream TLS uses rustls's AEAD suites",
    ),
    ignored("proxy-ssl-protocols", "upstream TLS is 1.2 and 1.3"),
    ignored("proxy-ssl-verify-depth", NOT_YET),
    ignored("ssl-ciphers", "TLS 1.2 and 1.3 with AEAD suites only"),
    ignored(
        "ssl-prefer-server-ciphers",
        "TLS 1.2 and 1.3 with AEAD suites only",
    ),
    ignored("auth-tls-secret", NOT_YET),
    ignored("auth-tls-verify-client", NOT_YET),
    ignored("auth-tls-verify-depth", NOT_YET),
    ignored("auth-tls-error-page", NOT_YET),
    ignored("auth-tls-pass-certificate-to-upstream", NOT_YET),
    ignored("auth-tls-match-cn", NOT_YET),
    ignored("custom-headers", NOT_YET),
    ignored("connection-proxy-header", NOT_YET),
    ignored(
        "enable-access-log",
        "the access log is per process (--access-log)",
    ),
    ignored("enable-rewrite-log", "nginx's debug log has no equivalent"),
    ignored("enable-opentelemetry", NOT_YET),
    ignored("opentelemetry-trust-incoming-span", NOT_YET),
    ignored("enable-modsecurity", "Portico has no WAF"),
    ignored("enable-owasp-core-rules", "Portico has no WAF"),
    ignored("modsecurity-transaction-id", "Portico has no WAF"),
    ignored("http2-push-preload", "HTTP/2 server push is obsolete"),
    ignored("mirror-target", NOT_YET),
    ignored("mirror-host", NOT_YET),
    ignored("mirror-request-body", NOT_YET),
    ignored("preserve-trailing-slash", NOT_YET),
    ignored("satisfy", NOT_YET),
    ignored("affinity-mode", NOT_YET),
    ignored("session-cookie-change-on-failure", NOT_YET),
    ignored("session-cookie-conditional-samesite-none", NOT_YET),
    ignored("session-cookie-domain", NOT_YET),
    ignored("session-cookie-expires", NOT_YET),
    ignored("session-cookie-samesite", NOT_YET),
    ignored("session-cookie-secure", NOT_YET),
    ignored("upstream-hash-by-subset", NOT_YET),
    ignored("upstream-hash-by-subset-size", NOT_YET),
];

/// Why a snippet key the table does not list is refused.
const SNIPPET: &str = "snippets are refused by design: raw configuration text would bypass \
    validation, escaping and the isolation of one Ingress from the others; the typed \
    annotations of docs/annotations.md cover what snippets were used for";

/// An ingress-nginx key the table does not know.
const UNKNOWN_NGINX: &str = "not an ingress-nginx annotation Portico knows; ignored";
/// A `portico.dev/` key the table does not know: a typo would otherwise go unnoticed.
const UNKNOWN_PORTICO: &str = "unknown annotation; ignored (see docs/annotations.md)";

/// The prefixes annotation keys are read under.
pub const PORTICO: &str = "portico.dev/";
pub const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// The table's entry for `key` (after its prefix).
pub fn lookup(key: &str) -> Option<&'static Annotation> {
    ANNOTATIONS.iter().find(|a| a.key == key)
}

/// What `provider` makes of the Ingress annotation `name` (with its prefix); `None` for
/// annotations under neither prefix (other tools' keys, `kubernetes.io/ingress.class`).
pub fn classify(name: &str, provider: &str) -> Option<Outcome> {
    let (key, nginx) = match (name.strip_prefix(PORTICO), name.strip_prefix(NGINX)) {
        (Some(key), _) => (key, false),
        (None, Some(key)) => (key, true),
        (None, None) => return None,
    };
    let entry = lookup(key).filter(|a| if nginx { a.nginx } else { a.portico });
    Some(match entry {
        Some(a) => a.outcome(provider),
        None if key.ends_with("snippet") || key.ends_with("snippets") => Refused(SNIPPET),
        None if nginx => Ignored(UNKNOWN_NGINX),
        None => Ignored(UNKNOWN_PORTICO),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_listed_once() {
        let mut keys: Vec<&str> = ANNOTATIONS.iter().map(|a| a.key).collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len());
    }

    #[test]
    fn keys_are_classified_by_prefix_and_provider() {
        assert_eq!(
            classify("nginx.ingress.kubernetes.io/proxy-body-size", "proxy"),
            Some(Served)
        );
        assert!(matches!(
            classify("nginx.ingress.kubernetes.io/proxy-send-timeout", "haproxy"),
            Some(Ignored(_))
        ));
        // Portico's own keys have no ingress-nginx alias.
        assert_eq!(
            classify("nginx.ingress.kubernetes.io/retry-budget", "proxy"),
            Some(Ignored(UNKNOWN_NGINX))
        );
        assert_eq!(
            classify("portico.dev/proxy-bodysize", "proxy"),
            Some(Ignored(UNKNOWN_PORTICO))
        );
        assert!(matches!(
            classify("nginx.ingress.kubernetes.io/location-snippets", "proxy"),
            Some(Refused(_))
        ));
        assert_eq!(classify("kubernetes.io/ingress.class", "proxy"), None);
    }
}
