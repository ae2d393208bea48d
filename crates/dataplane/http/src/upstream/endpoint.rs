//! One member address and its idle connections.

use super::body::UpstreamBody;
use super::h2c::H2c;
use super::io::{SendDeadline, SendTimeout};
use super::tls::TlsClient;
use crate::limits::ClientBody;
use bytes::Bytes;
use http::header::{CONNECTION, HOST, USER_AGENT};
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use portico_model::{PoolProtocol, UpstreamTls};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Idle connections older than this are closed rather than reused (backends commonly close
/// theirs after 60-120 s; reusing one they are closing would fail the request).
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);
/// Idle connections kept per endpoint; more are closed when they come back.
const MAX_IDLE: usize = 512;

/// The idle connections kept across all endpoints, and the most that may be: each holds a
/// descriptor, and with thousands of members (every pod its own address) the members a
/// request reached once would otherwise each keep one until their next request.
#[derive(Debug)]
pub(crate) struct IdleBudget {
    held: AtomicUsize,
    max: usize,
}

impl IdleBudget {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(IdleBudget {
            held: AtomicUsize::new(0),
            max,
        })
    }

    /// One more idle connection, if the budget has room.
    fn take(&self) -> bool {
        let more = |held: usize| (held < self.max).then_some(held + 1);
        (self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, more))
        .is_ok()
    }

    /// `n` idle connections fewer (reused or closed).
    fn give(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    /// Idle connections kept now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// Why a request to an upstream failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    #[error("connecting: {0}")]
    Connect(#[source] std::io::Error),
    #[error("connecting: no answer within {0:?}")]
    ConnectTimeout(Duration),
    #[error("TLS handshake: {0}")]
    Tls(#[source] std::io::Error),
    #[error("handshake: {0}")]
    Handshake(#[source] hyper::Error),
    #[error("{0}")]
    Request(#[source] hyper::Error),
    /// The own HTTP/1.1 path: the connection failed before the response head was whole.
    #[error("connection: {0}")]
    Io(#[source] std::io::Error),
    /// The own HTTP/1.1 path: the response head is not valid HTTP/1.1.
    #[error("invalid response: {0}")]
    Response(&'static str),
}

impl UpstreamError {
    /// A connect or a send that timed out: `504`, as nginx answers, where other failures
    /// are `502`.
    pub(crate) fn is_timeout(&self) -> bool {
        match self {
            UpstreamError::ConnectTimeout(_) => true,
            UpstreamError::Io(e) => e.kind() == std::io::ErrorKind::TimedOut,
            UpstreamError::Request(e) => {
                let mut source = std::error::Error::source(e);
                while let Some(cause) = source {
                    if cause
                        .downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
                    {
                        return true;
                    }
                    source = cause.source();
                }
                false
            }
            _ => false,
        }
    }

    /// A failure before any response byte arrived (a reset or a close), not a response the
    /// member sent and the proxy could not read, nor the request's own fault.
    pub(crate) fn before_response(&self) -> bool {
        match self {
            UpstreamError::Request(e) => !e.is_parse() && !e.is_user(),
            UpstreamError::Response(_) => false,
            _ => true,
        }
    }
}

/// A failed send: why, and the request when none of it was sent (so it can go elsewhere).
#[derive(Debug)]
pub(crate) struct SendFailed {
    pub(crate) error: UpstreamError,
    pub(crate) unsent: Option<Request<ClientBody>>,
}

impl SendFailed {
    pub(super) fn unsent(error: UpstreamError, req: Request<ClientBody>) -> Self {
        SendFailed {
            error,
            unsent: Some(req),
        }
    }

    pub(super) fn sent(error: UpstreamError) -> Self {
        SendFailed {
            error,
            unsent: None,
        }
    }
}

/// An HTTP/1.1 connection: its sender and the send timeout its I/O applies.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(super) sender: SendRequest<ClientBody>,
    pub(super) send_timeout: SendTimeout,
}

struct Idle {
    conn: Pooled,
    since: Instant,
}

/// A member address with a stack of idle HTTP/1.1 connections (most recently used on top, so
/// a few warm connections serve a light load and the rest age out), or its HTTP/2 connection.
pub(crate) struct Endpoint {
    addr: SocketAddr,
    idle: Mutex<Vec<Idle>>,
    /// Idle connections of the proxy's own HTTP/1.1 path (`proxy/h1/`), plain members only.
    raw_idle: Mutex<Vec<(TcpStream, Instant)>>,
    /// Set for HTTP/2 members (h2c, h2 over TLS): requests go there instead.
    h2c: Option<H2c>,
    /// Set for TLS members (`Https`, `H2`).
    tls: Option<TlsClient>,
    /// Shared by the endpoints of one proxy: both stacks count against it.
    budget: Arc<IdleBudget>,
}

/// An upstream connection's byte stream: TCP, or TLS over TCP.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for Endpoint {
    /// Its idle connections close with it: the budget gets them back.
    fn drop(&mut self) {
        let idle = self.idle.get_mut().unwrap_or_else(PoisonError::into_inner);
        let raw = self
            .raw_idle
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        self.budget.give(idle.len() + raw.len());
    }
}

impl Endpoint {
    /// The endpoint of `addr` in `protocol`; `tls` (server name filled in) for TLS protocols.
    /// `ca`: the bundle a verifying pool trusts, if it is known. Its idle connections are
    /// bounded by [`MAX_IDLE`] alone until [`Endpoint::with_budget`].
    pub(crate) fn new(
        addr: SocketAddr,
        protocol: PoolProtocol,
        tls: Option<&UpstreamTls>,
        ca: Option<&portico_tls::CaBundle>,
    ) -> Self {
        let tls = tls.filter(|_| protocol.is_tls());
        Endpoint {
            addr,
            idle: Mutex::new(Vec::new()),
            raw_idle: Mutex::new(Vec::new()),
            h2c: protocol.is_h2().then(H2c::default),
            tls: tls.map(|t| TlsClient::new(protocol, t, ca)),
            budget: IdleBudget::new(usize::MAX),
        }
    }

    /// The endpoint keeping its idle connections within `budget`, shared with others.
    pub(crate) fn with_budget(mut self, budget: Arc<IdleBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// Whether requests to this endpoint go over HTTP/2 (and need an absolute URI).
    pub(crate) fn is_h2c(&self) -> bool {
        self.h2c.is_some()
    }

    /// Whether requests to this endpoint go over plain HTTP/1.1 (no TLS, no HTTP/2): what the
    /// proxy's own HTTP/1.1 path forwards to.
    pub(crate) fn is_plain(&self) -> bool {
        self.h2c.is_none() && self.tls.is_none()
    }

    /// An idle connection of the own HTTP/1.1 path that is still open, most recently used
    /// first. One the upstream closed (or that has bytes nobody asked for) is readable: the
    /// reactor already knows, so telling costs no system call.
    pub(crate) fn checkout_raw(&self) -> Option<TcpStream> {
        let mut idle = self.raw_idle.lock().unwrap_or_else(PoisonError::into_inner);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while let Some((stream, since)) = idle.pop() {
            self.budget.give(1);
            let readable = stream.poll_read_ready(&mut cx).is_ready();
            if !readable && since.elapsed() < IDLE_TIMEOUT {
                return Some(stream);
            }
        }
        None
    }

    /// Takes back a connection of the own HTTP/1.1 path whose response was read to its end.
    pub(crate) fn checkin_raw(&self, stream: TcpStream) {
        let mut idle = self.raw_idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE && self.budget.take() {
            idle.push((stream, Instant::now()));
        }
    }

    /// A new plain TCP connection within `timeout`, for the own HTTP/1.1 path.
    pub(crate) async fn connect_raw(&self, timeout: Duration) -> Result<TcpStream, UpstreamError> {
        connect_tcp(self.addr, timeout).await
    }

    /// Whether connections to this endpoint use TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A new connection's byte stream within `timeout`: TCP, then the TLS handshake if any.
    pub(super) async fn open(&self, timeout: Duration) -> Result<Box<dyn Io>, UpstreamError> {
        let started = Instant::now();
        let stream = connect_tcp(self.addr, timeout).await?;
        let Some(tls) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, tls.connect(stream)).await {
            Ok(stream) => Ok(Box::new(stream?)),
            Err(_) => Err(UpstreamError::ConnectTimeout(timeout)),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `req` on an idle connection, or on a new one (within `connect_timeout`). A pooled
    /// connection that turns out to be closed before the request was written gives the
    /// request back, and it is retried. A failure gives the request back when none of it was
    /// sent.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut req: Request<ClientBody>,
        connect_timeout: Duration,
        send_timeout: Duration,
    ) -> Result<Response<UpstreamBody>, SendFailed> {
        let send_ms = u64::try_from(send_timeout.as_millis()).unwrap_or(u64::MAX);
        // The HTTP/2 and connecting paths are boxed: inline, their states would make this
        // future, and every future that awaits it, kilobytes long, and each request would
        // copy those kilobytes as the futures move (2 % of its instructions).
        if let Some(h2c) = &self.h2c {
            return Box::pin(h2c.send(self, req, connect_timeout, send_ms)).await;
        }
        while let Some(mut conn) = self.checkout() {
            conn.send_timeout.store(send_ms, Ordering::Relaxed);
            match conn.sender.try_send_request(req).await {
                Ok(response) => return Ok(self.wrap(response, conn)),
                Err(mut failed) => match failed.take_message() {
                    Some(unsent) => req = unsent,
                    None => {
                        return Err(SendFailed::sent(UpstreamError::Request(
                            failed.into_error(),
                        )));
                    }
                },
            }
        }
        let mut conn = match Box::pin(self.connect(connect_timeout)).await {
            Ok(conn) => conn,
            Err(error) => return Err(SendFailed::unsent(error, req)),
        };
        conn.send_timeout.store(send_ms, Ordering::Relaxed);
        match conn.sender.try_send_request(req).await {
            Ok(response) => Ok(self.wrap(response, conn)),
            Err(mut failed) => {
                let unsent = failed.take_message();
                let error = UpstreamError::Request(failed.into_error());
                Err(SendFailed { error, unsent })
            }
        }
    }

    fn wrap(
        self: &Arc<Self>,
        response: Response<Incoming>,
        conn: Pooled,
    ) -> Response<UpstreamBody> {
        response.map(|body| UpstreamBody::new(body, self.clone(), conn))
    }

    fn checkout(&self) -> Option<Pooled> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(entry) = idle.pop() {
            self.budget.give(1);
            if !entry.conn.sender.is_closed() && entry.since.elapsed() < IDLE_TIMEOUT {
                return Some(entry.conn);
            }
        }
        None
    }

    /// Takes a connection back once its response has been read to the end.
    pub(crate) fn checkin(&self, conn: Pooled) {
        if conn.sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE && self.budget.take() {
            let since = Instant::now();
            idle.push(Idle { conn, since });
        }
    }

    /// Sends an upgrade request on a connection of its own, never pooled: when the upstream
    /// switches protocols, that connection becomes the tunnel (`hyper::upgrade::on` on the
    /// response).
    pub(crate) async fn open_tunnel(
        &self,
        req: Request<Empty<Bytes>>,
        connect_timeout: Duration,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let stream = self.open(connect_timeout).await?;
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(UpstreamError::Handshake)?;
        let addr = self.addr;
        tokio::spawn(async move {
            if let Err(error) = connection.with_upgrades().await {
                tracing::debug!(%addr, %error, "upstream upgrade connection failed");
            }
        });
        sender
            .send_request(req)
            .await
            .map_err(UpstreamError::Request)
    }

    /// One active health check: `GET path` with `Host: host` on a connection of its own,
    /// speaking what the pool's traffic speaks (TLS with the pool's verification, HTTP/2 for
    /// HTTP/2 pools); the response's status. `timeout` bounds the connect and handshake.
    pub(crate) async fn probe(
        &self,
        host: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<StatusCode, UpstreamError> {
        let io = TokioIo::new(self.open(timeout).await?);
        let request = Request::get(path)
            .header(HOST, host)
            .header(USER_AGENT, "portico-health-check");
        if self.h2c.is_some() {
            let scheme = if self.is_tls() { "https" } else { "http" };
            let uri = format!("{scheme}://{host}{path}");
            let request = request.uri(uri).body(Empty::<Bytes>::new());
            let request = request.map_err(unsendable)?;
            let (mut sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(UpstreamError::Handshake)?;
            tokio::spawn(connection);
            let response = sender.send_request(request).await;
            return Ok(response.map_err(UpstreamError::Request)?.status());
        }
        let request = request
            .header(CONNECTION, "close")
            .body(Empty::<Bytes>::new());
        let request = request.map_err(unsendable)?;
        let (mut sender, connection) = http1::handshake(io)
            .await
            .map_err(UpstreamError::Handshake)?;
        tokio::spawn(connection);
        let response = sender.send_request(request).await;
        Ok(response.map_err(UpstreamError::Request)?.status())
    }

    async fn connect(&self, timeout: Duration) -> Result<Pooled, UpstreamError> {
        let stream = self.open(timeout).await?;
        let send_timeout = SendTimeout::default();
        let io = SendDeadline::new(stream, send_timeout.clone());
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(io))
            .await
            .map_err(UpstreamError::Handshake)?;
        let addr = self.addr;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%addr, %error, "upstream connection ended with an error");
            }
        });
        Ok(Pooled {
            sender,
            send_timeout,
        })
    }
}

/// A health check request that cannot be built (its host or path is not valid in a request):
/// it fails as a connect would.
fn unsendable(error: http::Error) -> UpstreamError {
    UpstreamError::Connect(std::io::Error::new(std::io::ErrorKind::InvalidInput, error))
}

/// A TCP connection to `addr` within `timeout`, without Nagle's delay.
async fn connect_tcp(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, UpstreamError> {
    let connecting = TcpStream::connect(addr);
    let stream = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| UpstreamError::ConnectTimeout(timeout))?
        .map_err(UpstreamError::Connect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
