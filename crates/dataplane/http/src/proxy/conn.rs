//! One client connection: routing and forwarding each of its requests.

use super::error::ProxyError;
use super::headers::{Forwarded, Scheme, strip_hop_by_hop};
use super::{GRACE, Proxy, ProxyBody, stopped};
use crate::metrics::PoolMetrics;
use crate::route::{PoolState, Target};
use http::header::{HOST, HeaderValue};
use http::uri::{self, Uri};
use http::{Request, Response, Version};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::gauge::Gauge;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

/// What every request of one connection shares.
struct Conn {
    proxy: Arc<Proxy>,
    forwarded: Forwarded,
}

impl Proxy {
    /// Serves one accepted connection (HTTP/1.1 with keep-alive, or HTTP/2 with prior
    /// knowledge). `scheme` is what the client used: a TLS listener passes `Scheme::Https`.
    pub async fn serve_connection<IO>(
        self: Arc<Self>,
        io: IO,
        peer: SocketAddr,
        scheme: Scheme,
        mut shutdown: watch::Receiver<bool>,
    ) where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let _active = Active::new(self.metrics.connections());
        let client = HeaderValue::from_str(&peer.ip().to_canonical().to_string());
        let client = client.unwrap_or(HeaderValue::from_static("unknown"));
        let conn = Arc::new(Conn {
            proxy: self.clone(),
            forwarded: Forwarded { client, scheme },
        });
        let service = service_fn(move |req| {
            let conn = conn.clone();
            async move { Ok::<_, Infallible>(conn.handle(req).await) }
        });
        let served = self.server.serve_connection(TokioIo::new(io), service);
        tokio::pin!(served);
        let result = tokio::select! {
            result = served.as_mut() => result,
            () = stopped(&mut shutdown) => {
                served.as_mut().graceful_shutdown();
                tokio::time::timeout(GRACE, served).await.unwrap_or(Ok(()))
            }
        };
        if let Err(error) = result {
            tracing::debug!(%peer, %error, "client connection ended with an error");
        }
    }
}

impl Conn {
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let pool = match self.route(&req) {
            Ok(pool) => pool,
            Err(error) => return rescue(self.proxy.metrics.unrouted(), &error),
        };
        match self.forward(&pool, req).await {
            Ok(response) => {
                pool.metrics.record(response.status());
                response
            }
            Err(error) => rescue(&pool.metrics, &error),
        }
    }

    /// One table load, one lookup: the pool this request goes to.
    fn route(&self, req: &Request<Incoming>) -> Result<Arc<PoolState>, ProxyError> {
        let host = request_host(req).ok_or(ProxyError::MissingHost)?;
        let path = req.uri().path();
        if !path.starts_with('/') {
            return Err(ProxyError::BadTarget);
        }
        match self.proxy.table.load().route(host, path) {
            Some(Target::Pool(pool)) => Ok(pool.clone()),
            Some(Target::Reject(status)) => Err(ProxyError::Rejected(*status)),
            None => Err(ProxyError::NoRoute),
        }
    }

    async fn forward(
        &self,
        pool: &PoolState,
        req: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let no_member = || ProxyError::NoReadyMember { pool: pool.id() };
        let endpoint = pool.next_endpoint().ok_or_else(no_member)?;
        let host = host_value(&req).ok_or(ProxyError::MissingHost)?;
        let (mut parts, body) = req.into_parts();
        origin_form(&mut parts.uri);
        parts.version = Version::HTTP_11;
        self.forwarded.apply(&mut parts.headers, host);
        let started = Instant::now();
        let sent = endpoint.send(Request::from_parts(parts, body)).await;
        let response = sent.map_err(|source| ProxyError::Upstream {
            pool: pool.id(),
            upstream: endpoint.addr(),
            source,
        })?;
        pool.metrics.observe_latency(started.elapsed());
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        Ok(Response::from_parts(parts, Either::Left(body)))
    }
}

/// The single place where errors become responses.
fn rescue(metrics: &PoolMetrics, error: &ProxyError) -> Response<ProxyBody> {
    match error {
        ProxyError::Upstream { .. } => tracing::warn!(%error, "upstream request failed"),
        _ => tracing::debug!(%error, "request not forwarded"),
    }
    let response = error.response();
    metrics.record(response.status());
    response
}

/// The host the client asked for: the URI authority (HTTP/2, absolute-form) or `Host`.
///
/// An empty `Host` (allowed by RFC 9112 when the target has no authority) and an HTTP/1.0
/// request without one route as host-less, as nginx does; an HTTP/1.1 request without `Host`
/// is a 400 (RFC 9112 section 3.2), and so is a `Host` that is not visible ASCII.
fn request_host<B>(req: &Request<B>) -> Option<&str> {
    if let Some(authority) = req.uri().authority() {
        return Some(without_userinfo(authority));
    }
    match req.headers().get(HOST) {
        Some(host) => host.to_str().ok(),
        None if req.version() <= Version::HTTP_10 => Some(""),
        None => None,
    }
}

/// The `Host` header value to forward: the client's own, else one made from the authority,
/// else empty (an HTTP/1.0 client that sent none).
fn host_value<B>(req: &Request<B>) -> Option<HeaderValue> {
    if let Some(host) = req.headers().get(HOST) {
        return Some(host.clone());
    }
    match req.uri().authority() {
        Some(authority) => HeaderValue::from_str(without_userinfo(authority)).ok(),
        None => Some(HeaderValue::from_static("")),
    }
}

fn without_userinfo(authority: &uri::Authority) -> &str {
    let s = authority.as_str();
    s.rsplit_once('@').map_or(s, |(_, host)| host)
}

/// The request target as an upstream HTTP/1.1 request line carries it: `/path?query`. An
/// absolute-form or HTTP/2 target loses its scheme and authority (the host is in `Host`).
fn origin_form(uri: &mut Uri) {
    if uri.authority().is_some() || uri.scheme().is_some() {
        let path = uri.path_and_query().cloned();
        *uri = Uri::from(path.unwrap_or_else(|| uri::PathAndQuery::from_static("/")));
    }
}

/// Counts the connection in `portico_http_connections_active` while it lives.
struct Active(Gauge);

impl Active {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Active(gauge.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.dec();
    }
}
