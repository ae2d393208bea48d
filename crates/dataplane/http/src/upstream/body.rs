//! The response body from an upstream: hands its connection back to the endpoint at the end.

use super::endpoint::{Endpoint, Pooled};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// Why an upstream response body failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResponseBodyError {
    #[error("{0}")]
    Upstream(#[from] hyper::Error),
    #[error("the upstream sent nothing for {0:?} (read timeout)")]
    ReadTimeout(Duration),
}

/// The longest wait between two reads of a response body.
///
/// The timer is armed when a read finds nothing ready, not at each frame: a response that
/// arrives whole (most do) never touches the timer wheel, and a client that reads slowly
/// does not use up the upstream's time.
#[derive(Debug)]
struct ReadDeadline {
    timeout: Duration,
    /// Made on the first wait, then reset for each later one.
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer counts the current wait (no frame came since it was set).
    armed: bool,
}

impl ReadDeadline {
    /// Starts the wait's timer if this wait has none yet, and polls it.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            let deadline = Instant::now() + self.timeout;
            match self.timer.as_mut() {
                Some(timer) => timer.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = true;
        }
        let timer = self.timer.as_mut().map(|t| t.as_mut().poll(cx));
        timer.is_some_and(|polled| polled.is_ready())
    }
}

/// An upstream response body. When it ends, its connection goes back to the endpoint's idle
/// pool; when it is dropped before the end, the connection is dropped with it (hyper closes
/// a connection whose response was not read to the end).
#[derive(Debug)]
pub(crate) struct UpstreamBody {
    inner: Incoming,
    conn: Option<(Arc<Endpoint>, Pooled)>,
    deadline: Option<ReadDeadline>,
}

impl UpstreamBody {
    pub(crate) fn new(inner: Incoming, endpoint: Arc<Endpoint>, conn: Pooled) -> Self {
        let mut body = UpstreamBody {
            inner,
            conn: Some((endpoint, conn)),
            deadline: None,
        };
        // A response without a body (204, 304, HEAD, Content-Length: 0) is complete already.
        if body.inner.is_end_stream() {
            body.release();
        }
        body
    }

    /// A body whose connection is not handed back (HTTP/2: the connection is shared).
    pub(crate) fn detached(inner: Incoming) -> Self {
        UpstreamBody {
            inner,
            conn: None,
            deadline: None,
        }
    }

    /// Fails the body when the upstream sends nothing for `timeout` (`proxy-read-timeout`
    /// between two reads).
    pub(crate) fn read_timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Some(ReadDeadline {
            timeout,
            timer: None,
            armed: false,
        });
        self
    }

    fn release(&mut self) {
        if let Some((endpoint, conn)) = self.conn.take() {
            if conn.sender.is_ready() {
                endpoint.checkin(conn);
            } else {
                // The connection has not yet noticed the end of the message: let it settle
                // before anyone else may use it.
                tokio::spawn(idle_when_ready(endpoint, conn));
            }
        }
    }
}

async fn idle_when_ready(endpoint: Arc<Endpoint>, mut conn: Pooled) {
    if conn.sender.ready().await.is_ok() {
        endpoint.checkin(conn);
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = ResponseBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ResponseBodyError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.release(),
            Poll::Ready(Some(Err(_))) => self.conn = None,
            Poll::Pending => {
                if let Some(deadline) = self.deadline.as_mut()
                    && deadline.expired(cx)
                {
                    let timeout = deadline.timeout;
                    self.conn = None;
                    return Poll::Ready(Some(Err(ResponseBodyError::ReadTimeout(timeout))));
                }
            }
            Poll::Ready(Some(Ok(_))) => {}
        }
        if let (Poll::Ready(Some(Ok(_))), Some(deadline)) = (&polled, self.deadline.as_mut()) {
            deadline.armed = false;
        }
        polled.map(|frame| frame.map(|result| result.map_err(ResponseBodyError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
