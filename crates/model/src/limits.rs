//! Limits against abusive clients and stuck backends, shared by every provider: the built-in
//! proxy applies them with hyper's and tokio's settings, haproxy through its configuration.
//! Defaults follow nginx and haproxy (see docs/limits.md). Also the response fields every data
//! plane adds: `Server`, and `Strict-Transport-Security` on HTTPS.

use std::time::Duration;

/// Deadlines, sizes and connection caps of the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From accept (or from the first byte after an idle keep-alive period) until the request
    /// head is complete: the first bytes, the HTTP/2 preface and the header read.
    pub header_timeout: Duration,
    /// Idle time allowed between two requests of one connection (HTTP/1.1 and HTTP/2).
    pub keepalive_timeout: Duration,
    /// Request body: each window of this length must bring at least
    /// `max(1, body_min_rate × window)` bytes, else 408.
    pub body_timeout: Duration,
    /// Bytes per second a request body must sustain, averaged over each `body_timeout` window.
    pub body_min_rate: u64,
    /// From the end of the request until the upstream's response head, else 504; also between
    /// two reads of the response. A pool's read timeout replaces it.
    pub upstream_timeout: Duration,
    /// Largest request head (request line and header fields), in bytes.
    pub max_header_bytes: usize,
    /// Most header fields in one request.
    pub max_headers: usize,
    /// Largest request body, in bytes (413 above it); 0 means no limit.
    pub max_body_bytes: u64,
    /// Open client connections, in all; further connections are closed or wait.
    pub max_connections: usize,
    /// Open client connections from one client address; further ones are closed.
    pub max_connections_per_client: usize,
    /// After the shutdown signal: how long readiness fails while traffic is still served (so
    /// that load balancers stop sending new connections), before the listeners close.
    pub shutdown_grace: Duration,
    /// After the grace period: the longest wait for requests (and tunnels) in flight.
    pub shutdown_timeout: Duration,
    /// The `Server` field of responses that have none (the backend sent none, or the data
    /// plane answered itself), as nginx and Envoy add theirs; none: no field added. Static:
    /// set once per process from `--server-header`, which keeps `Limits` a plain copy.
    pub server_header: Option<&'static str>,
    /// The status of a request refused by a rate or connection limit (`limit-rps`,
    /// `limit-connections`, …): ingress-nginx's default, 503, unless `--limit-status-code`.
    pub limit_status: u16,
    /// `Strict-Transport-Security` on HTTPS responses without one (`--hsts-max-age`, …);
    /// off (`max_age_s` 0) by default. An Ingress's own replaces it on its routes.
    pub hsts: crate::Hsts,
    /// The codings responses are compressed with (`--compression`); an Ingress's own replaces
    /// them on its routes.
    pub compression: crate::Compression,
    /// Every connection to the HTTP and HTTPS listeners starts with a PROXY protocol header
    /// (v1 or v2) naming the client (`--proxy-protocol`), as a load balancer in front sends it.
    pub proxy_protocol: bool,
    /// Peers whose `X-Forwarded-For` names the client (`--trusted-proxies`): the rightmost
    /// address in it that is not itself a trusted proxy. Static, set once per process.
    pub trusted_proxies: &'static [crate::Cidr],
    /// HTTP/3 over UDP on every HTTPS listener's port, advertised with `Alt-Svc` (`--http3`;
    /// built-in proxy). Not behind the PROXY protocol.
    pub http3: bool,
    /// OpenTelemetry tracing of the built-in proxy's requests (`--otlp-endpoint`,
    /// `--trace-sample-ratio`); off by default.
    pub tracing: Tracing,
}

/// Where the built-in proxy exports its spans, and which share of new traces it samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracing {
    /// The OTLP/HTTP URL spans are sent to (`http://collector:4318/v1/traces`); none: off.
    /// Static, set once per process.
    pub endpoint: Option<&'static str>,
    /// Millionths of new traces sampled (a sampled parent's are, an unsampled one's not).
    pub sample_per_million: u32,
}

/// Off, sampling every new trace once an endpoint is set (`--trace-sample-ratio`'s default).
impl Default for Tracing {
    fn default() -> Self {
        Tracing {
            endpoint: None,
            sample_per_million: 1_000_000,
        }
    }
}

impl Tracing {
    /// The share of new traces sampled, 0 to 1.
    pub fn ratio(&self) -> f64 {
        f64::from(self.sample_per_million) / 1e6
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(60),
            body_min_rate: 100,
            upstream_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_headers: 100,
            max_body_bytes: 1024 * 1024,
            max_connections: 4096,
            max_connections_per_client: 256,
            shutdown_grace: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(30),
            server_header: Some(Limits::SERVER),
            limit_status: 503,
            hsts: crate::Hsts::default(),
            compression: crate::Compression::default(),
            proxy_protocol: false,
            trusted_proxies: &[],
            http3: true,
            tracing: Tracing::default(),
        }
    }
}

impl Limits {
    /// The default `Server` field.
    pub const SERVER: &'static str = "portico";

    /// The bytes a request body must bring within each `body_timeout` window.
    pub fn body_bytes_per_window(&self) -> u64 {
        let rate = u128::from(self.body_min_rate) * self.body_timeout.as_millis() / 1000;
        u64::try_from(rate).unwrap_or(u64::MAX).max(1)
    }
}
