//! The ingress-nginx controller ConfigMap's keys and what serves each in Portico (a flag, an
//! annotation, or nothing): what `portico migrate --nginx-configmap` reports. Portico reads no
//! such ConfigMap; its settings are flags (process-wide) and annotations (per Ingress).

use crate::annotations::table::Outcome::{self, Ignored, Refused, Served, ServedDifferently};

/// One ConfigMap key, what Portico makes of it and, when served, by what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigKey {
    pub key: &'static str,
    pub outcome: Outcome,
    /// The flag or annotation that serves it ("" when not served).
    pub by: &'static str,
}

const fn by(key: &'static str, by: &'static str) -> ConfigKey {
    ConfigKey {
        key,
        outcome: Served,
        by,
    }
}

const fn differently(key: &'static str, by: &'static str, how: &'static str) -> ConfigKey {
    ConfigKey {
        key,
        outcome: ServedDifferently(how),
        by,
    }
}

const fn not(key: &'static str, why: &'static str) -> ConfigKey {
    ConfigKey {
        key,
        outcome: Ignored(why),
        by: "",
    }
}

const PER_INGRESS: &str = "set it per Ingress with the annotation of the same name";
const STREAMS: &str = "the proxy streams requests and responses; nothing to tune";
const TLS: &str = "TLS 1.2 and 1.3 with AEAD suites and forward secrecy only (rustls)";
const LOG: &str = "the access log is JSON lines with fixed fields (docs/access-log.md)";
const LATER: &str = "no equivalent yet";

/// The keys Portico has an answer for; any other key is reported as having no equivalent.
pub const CONFIG_KEYS: &[ConfigKey] = &[
    by(
        "proxy-body-size",
        "--max-body-bytes (per Ingress: proxy-body-size)",
    ),
    differently(
        "proxy-connect-timeout",
        "annotation proxy-connect-timeout",
        PER_INGRESS,
    ),
    by(
        "proxy-read-timeout",
        "--upstream-response-timeout (per Ingress: proxy-read-timeout)",
    ),
    differently(
        "proxy-send-timeout",
        "annotation proxy-send-timeout",
        PER_INGRESS,
    ),
    differently(
        "proxy-next-upstream-tries",
        "annotation proxy-next-upstream-tries",
        PER_INGRESS,
    ),
    differently("load-balance", "annotation load-balance", PER_INGRESS),
    by("client-header-timeout", "--client-header-timeout"),
    by("client-body-timeout", "--client-body-timeout"),
    by("keep-alive", "--keepalive-timeout"),
    by("large-client-header-buffers", "--max-header-bytes"),
    by("max-worker-connections", "--max-connections"),
    by("worker-processes", "--workers"),
    differently(
        "worker-shutdown-timeout",
        "--shutdown-grace, --shutdown-timeout",
        "a grace period (readiness fails, traffic served) then a drain timeout",
    ),
    differently(
        "server-tokens",
        "--server-header",
        "responses without a Server field get `Server: portico` (no version); \
         --server-header names another, off adds none",
    ),
    by(
        "ssl-redirect",
        "annotation ssl-redirect (default true, as ingress-nginx)",
    ),
    differently(
        "force-ssl-redirect",
        "annotation force-ssl-redirect",
        PER_INGRESS,
    ),
    by(
        "use-http2",
        "always on (ALPN h2 on HTTPS, prior knowledge on HTTP)",
    ),
    by(
        "enable-underscores-in-headers",
        "always on: such headers are passed",
    ),
    by("access-log-path", "--access-log PATH"),
    by("disable-access-log", "--access-log off"),
    not("log-format-upstream", LOG),
    not("log-format-escape-json", LOG),
    not("ssl-protocols", TLS),
    not("ssl-ciphers", TLS),
    not("ssl-ecdh-curve", TLS),
    not(
        "ssl-session-cache",
        "session resumption by ticket and cache is always on",
    ),
    not(
        "ssl-session-tickets",
        "session resumption by ticket and cache is always on",
    ),
    not("proxy-buffering", STREAMS),
    not("proxy-buffer-size", STREAMS),
    not("proxy-buffers-number", STREAMS),
    not("proxy-request-buffering", STREAMS),
    not("client-body-buffer-size", STREAMS),
    differently(
        "hsts",
        "--hsts-max-age (0: off)",
        "off unless --hsts-max-age is set (ingress-nginx sends max-age=31536000; \
         includeSubDomains by default)",
    ),
    by(
        "hsts-max-age",
        "--hsts-max-age (per Ingress: portico.dev/hsts-max-age)",
    ),
    differently(
        "hsts-include-subdomains",
        "--hsts-include-subdomains (per Ingress: portico.dev/hsts-include-subdomains)",
        "off unless set (ingress-nginx's default is true)",
    ),
    by(
        "hsts-preload",
        "--hsts-preload (per Ingress: portico.dev/hsts-preload)",
    ),
    not("add-headers", LATER),
    not("proxy-set-headers", LATER),
    not("hide-headers", LATER),
    not("enable-cors", PER_INGRESS),
    by("limit-req-status-code", "--limit-status-code"),
    by("use-proxy-protocol", "--proxy-protocol"),
    differently(
        "use-forwarded-headers",
        "--trusted-proxies",
        "X-Forwarded-For is read from the peers in --trusted-proxies only, never from any peer",
    ),
    by("proxy-real-ip-cidr", "--trusted-proxies"),
    differently(
        "forwarded-for-header",
        "--trusted-proxies",
        "the header is X-Forwarded-For",
    ),
    differently(
        "compute-full-forwarded-for",
        "--trusted-proxies",
        "X-Forwarded-For always keeps the list sent and appends the peer",
    ),
    differently(
        "limit-conn-status-code",
        "--limit-status-code",
        "one status for rate and connection limits (--limit-status-code)",
    ),
    by(
        "custom-http-errors",
        "--custom-http-errors with --default-backend-service (per Ingress: custom-http-errors)",
    ),
    differently(
        "enable-opentelemetry",
        "--otlp-endpoint",
        "on for the process when --otlp-endpoint is set (built-in proxy)",
    ),
    differently(
        "otlp-collector-host",
        "--otlp-endpoint",
        "the host of --otlp-endpoint's URL: OTLP over HTTP (port 4318, /v1/traces), not gRPC",
    ),
    differently(
        "otlp-collector-port",
        "--otlp-endpoint",
        "the port of --otlp-endpoint's URL: OTLP over HTTP (4318), not gRPC's 4317",
    ),
    by("otel-sampler-ratio", "--trace-sample-ratio"),
    differently(
        "otel-sampler-parent-based",
        "--trace-sample-ratio",
        "always parent-based: a client's traceparent decides for its trace",
    ),
    differently(
        "opentelemetry-trust-incoming-span",
        "--otlp-endpoint",
        "always trusted: a valid client traceparent is the span's parent",
    ),
    not("enable-modsecurity", "Portico has no WAF"),
    not("enable-owasp-modsecurity-crs", "Portico has no WAF"),
    not("use-geoip2", LATER),
    differently(
        "enable-brotli",
        "--compression (per Ingress: portico.dev/compression)",
        "on by default (zstd, br, gzip), at Brotli quality 4",
    ),
    differently(
        "use-gzip",
        "--compression (per Ingress: portico.dev/compression)",
        "on by default (zstd, br, gzip), at gzip level 1",
    ),
    differently(
        "gzip-level",
        "--compression",
        "the level is fixed at 1 (ingress-nginx's default), Brotli at 4, zstd at 1",
    ),
    differently(
        "gzip-min-length",
        "--compression",
        "fixed at 256 bytes (ingress-nginx's default)",
    ),
    differently(
        "gzip-types",
        "--compression",
        "a fixed list: text/* but event streams, JSON, JavaScript, XML, SVG, icons, fonts",
    ),
    not(
        "upstream-keepalive-connections",
        "upstream connections are pooled, unbounded idle",
    ),
    not(
        "upstream-keepalive-timeout",
        "upstream connections are pooled, unbounded idle",
    ),
    not("allow-snippet-annotations", "snippets are always refused"),
    not(
        "annotations-risk-level",
        "snippets are always refused; other annotations are typed",
    ),
    ConfigKey {
        key: "http-snippet",
        outcome: Refused("flags and typed annotations; snippets are refused by design"),
        by: "",
    },
    ConfigKey {
        key: "server-snippet",
        outcome: Refused("flags and typed annotations; snippets are refused by design"),
        by: "",
    },
    ConfigKey {
        key: "location-snippet",
        outcome: Refused("flags and typed annotations; snippets are refused by design"),
        by: "",
    },
    ConfigKey {
        key: "main-snippet",
        outcome: Refused("flags and typed annotations; snippets are refused by design"),
        by: "",
    },
];

/// What Portico makes of ConfigMap key `key`.
pub fn config_key(key: &str) -> ConfigKey {
    let known = CONFIG_KEYS.iter().find(|k| k.key == key).copied();
    known.unwrap_or(ConfigKey {
        key: "",
        outcome: if key.ends_with("snippet") {
            Refused("flags and typed annotations; snippets are refused by design")
        } else {
            Ignored("not known to Portico: no equivalent")
        },
        by: "",
    })
}
