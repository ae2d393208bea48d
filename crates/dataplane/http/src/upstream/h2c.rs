//! HTTP/2 over cleartext with prior knowledge (h2c) to members of h2c pools: one multiplexed
//! connection per endpoint, opened on first use and again when it closes.

use super::body::UpstreamBody;
use super::endpoint::{Endpoint, SendFailed, UpstreamError};
use super::io::{SendDeadline, SendTimeout};
use crate::limits::ClientBody;
use http::{Request, Response};
use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The endpoint's current HTTP/2 connection, if it has one that is open.
#[derive(Default)]
pub(super) struct H2c {
    conn: Mutex<Option<SendRequest<ClientBody>>>,
    /// The send timeout of the shared connection: the last request's (streams share it).
    send_timeout: SendTimeout,
}

impl H2c {
    /// Sends `req` (its URI must be absolute: HTTP/2 carries scheme and authority) on the
    /// shared connection, opening one first when there is none.
    pub(super) async fn send(
        &self,
        endpoint: &Endpoint,
        req: Request<ClientBody>,
        connect_timeout: Duration,
        send_ms: u64,
    ) -> Result<Response<UpstreamBody>, SendFailed> {
        self.send_timeout.store(send_ms, Ordering::Relaxed);
        let mut sender = match self.current() {
            Some(sender) => sender,
            None => match self.connect(endpoint, connect_timeout).await {
                Ok(sender) => sender,
                Err(error) => return Err(SendFailed::unsent(error, req)),
            },
        };
        match sender.try_send_request(req).await {
            Ok(response) => Ok(response.map(UpstreamBody::detached)),
            Err(mut failed) => {
                let unsent = failed.take_message();
                let error = UpstreamError::Request(failed.into_error());
                Err(SendFailed { error, unsent })
            }
        }
    }

    fn current(&self) -> Option<SendRequest<ClientBody>> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.as_ref().filter(|s| !s.is_closed()).cloned()
    }

    async fn connect(
        &self,
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<SendRequest<ClientBody>, UpstreamError> {
        let addr = endpoint.addr();
        let stream = endpoint.open(timeout).await?;
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new());
        let io = SendDeadline::new(stream, self.send_timeout.clone());
        let (sender, connection) = builder
            .handshake(TokioIo::new(io))
            .await
            .map_err(UpstreamError::Handshake)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%addr, %error, "upstream h2c connection ended with an error");
            }
        });
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        // Another request may have connected meanwhile: share its connection, close this one.
        match conn.as_ref().filter(|s| !s.is_closed()) {
            Some(shared) => Ok(shared.clone()),
            None => {
                *conn = Some(sender.clone());
                Ok(sender)
            }
        }
    }
}
