//! An HTTP/1.1 upstream connection driven by the task that uses it: no task of its own.
//!
//! hyper's client connection is a future (reading, writing, parsing) with a `SendRequest`
//! handle that talks to it over a channel. Spawned, every request would cross tasks twice
//! (the request to the connection's task, the response head and each body chunk back), with a
//! wake-up and a scheduling of a task per hop. Here the connection future stays next to its
//! sender: a send polls it together with the response on the way, the response body polls it
//! while it is read (`UpstreamBody`), and an idle connection waits in its endpoint's pool,
//! polled by no one. A member closing an idle connection is noticed on its next use: the
//! first poll reads the close before the request is written, and hyper gives the request
//! back (it is sent elsewhere, see `Endpoint::send`).

use super::endpoint::Io;
use super::io::{SendDeadline, SendTimeout};
use crate::limits::ClientBody;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::TrySendError;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

type Connection = http1::Connection<TokioIo<SendDeadline<Box<dyn Io>>>, ClientBody>;

/// An HTTP/1.1 connection to a member: its sender, the connection future (`None` once it
/// ended; boxed, since it is large and moves from the pool to the request and its response
/// body and back), and the send timeout its I/O applies.
pub(crate) struct Http1 {
    sender: SendRequest<ClientBody>,
    connection: Option<Box<Connection>>,
    send_timeout: SendTimeout,
}

impl std::fmt::Debug for Http1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1")
            .field("open", &self.connection.is_some())
            .finish()
    }
}

impl Http1 {
    /// The HTTP/1.1 handshake (nothing on the wire) over a connected stream.
    pub(super) async fn handshake(stream: Box<dyn Io>) -> Result<Self, hyper::Error> {
        let send_timeout = SendTimeout::default();
        let io = SendDeadline::new(stream, send_timeout.clone());
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(io))
            .await?;
        Ok(Http1 {
            sender,
            connection: Some(Box::new(connection)),
            send_timeout,
        })
    }

    /// The send timeout of the request about to be sent, in milliseconds (0: none).
    pub(super) fn set_send_timeout(&self, ms: u64) {
        self.send_timeout.store(ms, Ordering::Relaxed);
    }

    /// Whether the connection has not ended.
    pub(super) fn is_open(&self) -> bool {
        self.connection.is_some()
    }

    /// Whether a request can be sent now: open, and done with the previous exchange.
    fn is_ready(&self) -> bool {
        self.connection.is_some() && self.sender.is_ready()
    }

    /// Lets the connection read and write what it can (wakes come to the calling task).
    pub(super) fn drive(&mut self, cx: &mut Context<'_>) {
        drive(&mut self.connection, cx);
    }

    /// Whether the connection can take a request now, after polling it once if it has not
    /// yet settled from its previous exchange (or has ended meanwhile).
    pub(super) async fn settle(&mut self) -> bool {
        std::future::poll_fn(|cx| {
            if !self.is_ready() {
                self.drive(cx);
            }
            Poll::Ready(self.is_ready())
        })
        .await
    }

    /// Sends `req`, driving the connection until the response head arrives. When none of the
    /// request was written (the connection was closed or not ready), the error carries it.
    pub(super) async fn send(
        &mut self,
        req: Request<ClientBody>,
    ) -> Result<Response<Incoming>, TrySendError<Request<ClientBody>>> {
        let mut sending = std::pin::pin!(self.sender.try_send_request(req));
        let connection = &mut self.connection;
        std::future::poll_fn(|cx| {
            drive(connection, cx);
            // Only the connection, polled just now, answers: a wake-up for the answer would
            // only poll this task once more for nothing (and ending the connection answers
            // at once).
            sending.as_mut().poll(&mut quiet())
        })
        .await
    }

    /// Hands the connection to a task of its own, for this exchange only: the response head
    /// came while the request body was still being sent, and the body must keep flowing to
    /// the member whether or not the client reads the response. The sender is dropped, so the
    /// connection closes once the exchange is over.
    pub(super) fn detach(self, addr: SocketAddr) {
        if let Some(connection) = self.connection {
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%addr, %error, "upstream connection ended with an error");
                }
            });
        }
    }
}

/// A context that wakes no one: for what only a connection this task drives can make ready
/// (the response head, the body's chunks), polled again right after each drive.
pub(super) fn quiet() -> Context<'static> {
    Context::from_waker(std::task::Waker::noop())
}

/// Polls `connection` once; drops it when it has ended (which fails or gives back whatever
/// request it still held).
fn drive(connection: &mut Option<Box<Connection>>, cx: &mut Context<'_>) {
    let Some(conn) = connection.as_mut() else {
        return;
    };
    if let Poll::Ready(result) = conn.poll_without_shutdown(cx) {
        if let Err(error) = result {
            tracing::debug!(%error, "upstream connection ended with an error");
        }
        *connection = None;
    }
}
