//! The flags of the data planes' limits (docs/limits.md): deadlines, sizes and connection
//! caps, the same for the built-in proxy and haproxy; and the deadlines of provider `l4`.

use clap::Args;
use portico_app::offline::Limits;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Time a client has, from connecting (or from the first byte after an idle keep-alive
    /// period), to send a complete request head: `10s`, `500ms`, `2m`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    client_header_timeout: Duration,
    /// Idle time allowed between two requests on one HTTP/1.1 or HTTP/2 connection.
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = duration)]
    keepalive_timeout: Duration,
    /// Request bodies: each window of this length must bring at least one byte and
    /// --client-body-min-rate on average, else 408 (haproxy: the longest pause).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    client_body_timeout: Duration,
    /// Bytes per second a request body must sustain (built-in proxy only).
    #[arg(long, value_name = "BYTES", default_value_t = 100)]
    client_body_min_rate: u64,
    /// Time an upstream has, after the request is sent, to begin its response (else 504), and
    /// between two reads of its response. A pool's `proxy-read-timeout` replaces it.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    upstream_response_timeout: Duration,
    /// Largest request head (request line and header fields), at least 8192; else 431 (400
    /// from haproxy).
    #[arg(long, value_name = "BYTES", default_value_t = 16384,
          value_parser = clap::value_parser!(u32).range(8192..))]
    max_header_bytes: u32,
    /// Most header fields in a request.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(1..))]
    max_headers: u16,
    /// Largest request body, else 413; 0 means no limit. A pool's `proxy-body-size` replaces it.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    max_body_bytes: u64,
    /// Client connections open at once, in all.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Client connections open at once from one client address; more are closed at once.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_client: u32,
    /// After SIGTERM: how long /readyz answers 503 while traffic is still served (responses
    /// say `Connection: close`, HTTP/2 gets GOAWAY) before the listeners close; `0s`: none.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration_or_zero)]
    shutdown_grace: Duration,
    /// After the grace period: the longest wait for requests and tunnels in flight.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    shutdown_timeout: Duration,
    /// Services (providers `l4` and `haproxy`): time to connect to one member of a TCP
    /// listener's pool before the next is tried.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    l4_connect_timeout: Duration,
    /// Services (providers `l4` and `haproxy`): a TCP connection without a byte either way
    /// for this long is closed.
    #[arg(long, value_name = "DURATION", default_value = "60m", value_parser = duration)]
    l4_tcp_idle_timeout: Duration,
    /// Provider `l4`: a UDP flow (client address and port) without a datagram either way for
    /// this long ends.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    l4_udp_idle_timeout: Duration,
    /// Provider `l4`: how long flows to a member that left its pool, or of a removed listener,
    /// go on before they are closed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration_or_zero)]
    l4_drain_timeout: Duration,
    /// The `Server` field of responses without one (the backend sent none, or Portico answered
    /// itself: errors, redirects, CORS preflights), as nginx and Envoy add theirs; `off` adds
    /// none. Both providers.
    #[arg(long, value_name = "off|NAME", default_value = Limits::SERVER, value_parser = server_header)]
    server_header: ServerHeader,
    /// The status of requests refused by an Ingress's rate or connection limits (`limit-rps`,
    /// `limit-rpm`, `limit-connections`), as ingress-nginx's `limit-req-status-code`.
    #[arg(long, value_name = "STATUS", default_value_t = 503,
          value_parser = clap::value_parser!(u16).range(400..=599))]
    limit_status_code: u16,
    /// `Strict-Transport-Security: max-age=SECONDS` on HTTPS responses that have none (RFC
    /// 6797), as ingress-nginx's `hsts` ConfigMap keys; 0: none. An Ingress's
    /// `portico.dev/hsts-max-age` replaces it on its routes (built-in proxy). Both providers.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    hsts_max_age: u64,
    /// With --hsts-max-age: `includeSubDomains`.
    #[arg(long)]
    hsts_include_subdomains: bool,
    /// With --hsts-max-age: `preload`.
    #[arg(long)]
    hsts_preload: bool,
    /// Response codings, in the order preferred when a client accepts several equally
    /// (`zstd`, `br`, `gzip`), or `off`: text, JSON, JavaScript, XML, SVG and fonts of at least
    /// 256 bytes, not already encoded, not ranges, no `Cache-Control: no-transform`. An Ingress's
    /// `portico.dev/compression` replaces it on its routes. haproxy: gzip only.
    #[arg(long, value_name = "LIST|off", default_value = "zstd,br,gzip",
          value_parser = portico_app::offline::Compression::parse)]
    compression: portico_app::offline::Compression,
    /// Every connection to the HTTP and HTTPS listeners must start with a PROXY protocol
    /// header (v1 or v2), as a cloud load balancer sends it: its client address is the one
    /// allowlists, rate limits, hashing, affinity, connection caps, X-Forwarded-For and the
    /// access log see. A connection without one is closed. Both providers.
    #[arg(long)]
    proxy_protocol: bool,
    /// Address ranges of the proxies in front (`10.0.0.0/8,192.0.2.7`): a request whose peer is
    /// in one has its client taken from `X-Forwarded-For` (the rightmost address not in these
    /// ranges), for allowlists, rate limits, hashing, affinity and the access log, as
    /// ingress-nginx's `use-forwarded-headers` with `proxy-real-ip-cidr`. Any other peer's
    /// header changes nothing. Built-in proxy.
    #[arg(long, value_name = "CIDR,…", value_delimiter = ',')]
    trusted_proxies: Vec<portico_app::offline::TrustedCidr>,
    /// HTTP/3 (QUIC) over UDP on every HTTPS listener's address and port, with the same routes,
    /// certificates, limits and access log, advertised by `Alt-Svc` on HTTPS responses; 0-RTT
    /// off. Not with --proxy-protocol (QUIC does not carry it). Built-in proxy.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off,
          action = clap::ArgAction::Set)]
    http3: bool,
    /// OpenTelemetry tracing: a span per request, exported in batches over OTLP/HTTP
    /// (protobuf) to this URL, the whole path (`http://collector:4318/v1/traces`); members
    /// get the W3C `traceparent` of the proxy's span (a client's is its parent) and the
    /// client's `tracestate`; the access log carries the trace id. Off when absent: no
    /// header is read or changed. Built-in proxy.
    #[arg(long, value_name = "URL", value_parser = otlp_endpoint)]
    otlp_endpoint: Option<String>,
    /// With --otlp-endpoint: the share of new traces sampled, 0 to 1 (`0.01`: 1 %). A client's
    /// `traceparent` decides for its trace: sampled, the request's span is too; not, not.
    #[arg(long, value_name = "RATIO", default_value_t = 1.0, value_parser = sample_ratio)]
    trace_sample_ratio: f64,
}

/// An `http://` URL with a host (the exporter speaks plain HTTP).
fn otlp_endpoint(value: &str) -> Result<String, String> {
    let uri: http::Uri = value.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(format!(
            "expected http://HOST[:PORT]/PATH (as http://collector:4318/v1/traces), got {value:?}"
        ));
    }
    Ok(value.to_owned())
}

/// A number from 0 to 1.
fn sample_ratio(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("expected a number from 0 to 1, got {value:?}")),
    }
}

/// `on` or `off`.
fn on_off(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, got {value:?}")),
    }
}

/// `--server-header`: a name, or none (`off`).
#[derive(Debug, Clone, Copy)]
struct ServerHeader(Option<&'static str>);

/// `off`, or a field value of visible ASCII and spaces (at most 64 bytes). The name lives as
/// long as the process (leaked once, at start): the data planes' limits are a plain copy.
fn server_header(value: &str) -> Result<ServerHeader, String> {
    if value == "off" {
        return Ok(ServerHeader(None));
    }
    // Neither quotes, backslashes nor `%`: haproxy's configuration would read them.
    let plain = |b: u8| (b.is_ascii_graphic() || b == b' ') && !b"\"\\%".contains(&b);
    let fits = value.bytes().all(plain);
    if value.is_empty() || value.len() > 64 || !fits || value.starts_with(' ') {
        return Err(format!(
            "expected off or a name of visible ASCII without quotes, backslashes or % (at most \
             64 bytes), got {value:?}"
        ));
    }
    Ok(ServerHeader(Some(Box::leak(value.into()))))
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            header_timeout: self.client_header_timeout,
            keepalive_timeout: self.keepalive_timeout,
            body_timeout: self.client_body_timeout,
            body_min_rate: self.client_body_min_rate,
            upstream_timeout: self.upstream_response_timeout,
            max_header_bytes: self.max_header_bytes as usize,
            max_headers: usize::from(self.max_headers),
            max_body_bytes: self.max_body_bytes,
            max_connections: self.max_connections as usize,
            max_connections_per_client: self.max_connections_per_client as usize,
            shutdown_grace: self.shutdown_grace,
            shutdown_timeout: self.shutdown_timeout,
            server_header: self.server_header.0,
            limit_status: self.limit_status_code,
            hsts: portico_app::offline::Hsts {
                max_age_s: self.hsts_max_age,
                include_subdomains: self.hsts_include_subdomains,
                preload: self.hsts_preload,
            },
            compression: self.compression,
            proxy_protocol: self.proxy_protocol,
            // Leaked once, at start: the limits are a plain copy.
            trusted_proxies: Vec::leak(self.trusted_proxies.clone()),
            http3: self.http3,
            tracing: portico_app::offline::Tracing {
                // Leaked once, at start, as the trusted proxies.
                endpoint: (self.otlp_endpoint.clone()).map(|e| &*String::leak(e)),
                // In 0..=1 (checked by `sample_ratio`): at most a million.
                sample_per_million: (self.trace_sample_ratio * 1e6).round() as u32,
            },
        }
    }

    pub fn l4_limits(&self) -> portico_app::L4Limits {
        portico_app::L4Limits {
            connect_timeout: self.l4_connect_timeout,
            idle_timeout: self.l4_tcp_idle_timeout,
            udp_idle_timeout: self.l4_udp_idle_timeout,
            drain: self.l4_drain_timeout,
            ..portico_app::L4Limits::default()
        }
    }
}

/// Like [`duration`], zero allowed.
fn duration_or_zero(value: &str) -> Result<Duration, String> {
    match value {
        "0" | "0ms" | "0s" | "0m" => Ok(Duration::ZERO),
        _ => duration(value),
    }
}

/// `250ms`, `10s`, `2m`, or a bare number of seconds; more than zero.
fn duration(value: &str) -> Result<Duration, String> {
    let (number, unit) = value
        .find(|c: char| !c.is_ascii_digit())
        .map_or((value, "s"), |at| value.split_at(at));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("expected a duration like 10s, 500ms or 2m, got \"{value}\""))?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        _ => {
            return Err(format!(
                "unknown unit \"{unit}\" in \"{value}\": use ms, s or m"
            ));
        }
    };
    if duration.is_zero() {
        return Err("a duration must be more than zero".to_owned());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        limits: LimitArgs,
    }

    #[test]
    fn the_flag_defaults_are_the_model_defaults() {
        let cli = Cli::try_parse_from(["portico"]).unwrap();
        assert_eq!(cli.limits.limits(), Limits::default());
        assert_eq!(cli.limits.l4_limits(), portico_app::L4Limits::default());
    }

    #[test]
    fn the_server_header_is_a_name_or_off() {
        let parse = |v: &[&str]| {
            let args = ["portico", "--server-header"].iter().chain(v);
            Cli::try_parse_from(args).map(|c| c.limits.limits().server_header)
        };
        assert_eq!(parse(&["off"]).unwrap(), None);
        assert_eq!(parse(&["edge 1.0"]).unwrap(), Some("edge 1.0"));
        for bad in ["", "a\r\nx: y", "é", " lead", "50%"] {
            assert!(parse(&[bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "s", "10h", "0s", "-1s", "1.5s"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}
