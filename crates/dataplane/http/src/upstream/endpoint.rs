//! One member address and its idle connections.

use super::body::UpstreamBody;
use super::h2c::H2c;
use crate::limits::ClientBody;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use portico_model::PoolProtocol;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections older than this are closed rather than reused (backends commonly close
/// theirs after 60-120 s; reusing one they are closing would fail the request).
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);
/// Idle connections kept per endpoint; more are closed when they come back.
const MAX_IDLE: usize = 512;

/// Why a request to an upstream failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    #[error("connecting: {0}")]
    Connect(#[source] std::io::Error),
    #[error("connecting: no answer within {0:?}")]
    ConnectTimeout(Duration),
    #[error("handshake: {0}")]
    Handshake(#[source] hyper::Error),
    #[error("{0}")]
    Request(#[source] hyper::Error),
}

struct Idle {
    sender: SendRequest<ClientBody>,
    since: Instant,
}

/// A member address with a stack of idle HTTP/1.1 connections (most recently used on top, so
/// a few warm connections serve a light load and the rest age out), or its HTTP/2 connection.
pub(crate) struct Endpoint {
    addr: SocketAddr,
    idle: Mutex<Vec<Idle>>,
    /// Set for h2c members: requests go there instead.
    h2c: Option<H2c>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Endpoint {
    pub(crate) fn new(addr: SocketAddr, protocol: PoolProtocol) -> Self {
        Endpoint {
            addr,
            idle: Mutex::new(Vec::new()),
            h2c: (protocol == PoolProtocol::H2c).then(H2c::default),
        }
    }

    /// Whether requests to this endpoint go over HTTP/2 (and need an absolute URI).
    pub(crate) fn is_h2c(&self) -> bool {
        self.h2c.is_some()
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `req` on an idle connection, or on a new one. A pooled connection that turns out
    /// to be closed before the request was written gives the request back, and it is retried.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut req: Request<ClientBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        if let Some(h2c) = &self.h2c {
            return h2c.send(self.addr, req).await;
        }
        while let Some(mut sender) = self.checkout() {
            match sender.try_send_request(req).await {
                Ok(response) => return Ok(self.wrap(response, sender)),
                Err(mut failed) => match failed.take_message() {
                    Some(unsent) => req = unsent,
                    None => return Err(UpstreamError::Request(failed.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let response = sender
            .send_request(req)
            .await
            .map_err(UpstreamError::Request)?;
        Ok(self.wrap(response, sender))
    }

    fn wrap(
        self: &Arc<Self>,
        response: Response<Incoming>,
        sender: SendRequest<ClientBody>,
    ) -> Response<UpstreamBody> {
        response.map(|body| UpstreamBody::new(body, self.clone(), sender))
    }

    fn checkout(&self) -> Option<SendRequest<ClientBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(entry) = idle.pop() {
            if !entry.sender.is_closed() && entry.since.elapsed() < IDLE_TIMEOUT {
                return Some(entry.sender);
            }
        }
        None
    }

    /// Takes a connection back once its response has been read to the end.
    pub(crate) fn checkin(&self, sender: SendRequest<ClientBody>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            let since = Instant::now();
            idle.push(Idle { sender, since });
        }
    }

    /// Sends an upgrade request on a connection of its own, never pooled: when the upstream
    /// switches protocols, that connection becomes the tunnel (`hyper::upgrade::on` on the
    /// response).
    pub(crate) async fn open_tunnel(
        &self,
        req: Request<Empty<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let stream = connect_tcp(self.addr).await?;
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

    async fn connect(&self) -> Result<SendRequest<ClientBody>, UpstreamError> {
        let stream = connect_tcp(self.addr).await?;
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(UpstreamError::Handshake)?;
        let addr = self.addr;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%addr, %error, "upstream connection ended with an error");
            }
        });
        Ok(sender)
    }
}

/// A TCP connection to `addr`, within the connect timeout, without Nagle's delay.
pub(super) async fn connect_tcp(addr: SocketAddr) -> Result<TcpStream, UpstreamError> {
    let connecting = TcpStream::connect(addr);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| UpstreamError::ConnectTimeout(CONNECT_TIMEOUT))?
        .map_err(UpstreamError::Connect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
