//! The response body from an upstream: drives its HTTP/1.1 connection while it is read, and
//! hands it back to the endpoint at the end.

use super::endpoint::Endpoint;
use super::http1::{Http1, quiet};
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
#[derive(Debug)]
struct ReadDeadline {
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
}

/// An upstream response body. Reading it polls its HTTP/1.1 connection (which runs in no task
/// of its own); when it ends, the connection goes back to the endpoint's idle pool; when it is
/// dropped before the end, the connection is dropped (closed) with it.
#[derive(Debug)]
pub(crate) struct UpstreamBody {
    inner: Incoming,
    conn: Option<(Arc<Endpoint>, Http1)>,
    deadline: Option<ReadDeadline>,
}

impl UpstreamBody {
    pub(crate) fn new(inner: Incoming, endpoint: Arc<Endpoint>, conn: Http1) -> Self {
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

    /// A body whose connection is not handed back (HTTP/2: the connection is shared; a
    /// connection in a task of its own).
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
        let timer = Box::pin(tokio::time::sleep(timeout));
        self.deadline = Some(ReadDeadline { timeout, timer });
        self
    }

    /// Back to the pool: the next request settles the connection (`Http1::settle`) if it has
    /// not yet noticed the end of the message.
    fn release(&mut self) {
        if let Some((endpoint, conn)) = self.conn.take() {
            endpoint.checkin(conn);
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = ResponseBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ResponseBodyError>>> {
        let this = &mut *self;
        let polled = match this.conn.as_mut() {
            // Only the connection, driven here with `cx`, feeds the body: polled without a
            // waker, before and after (nothing buffered: the connection reads on).
            Some((_, conn)) => {
                let mut polled = Pin::new(&mut this.inner).poll_frame(&mut quiet());
                if polled.is_pending() {
                    conn.drive(cx);
                    polled = Pin::new(&mut this.inner).poll_frame(&mut quiet());
                }
                polled
            }
            None => Pin::new(&mut this.inner).poll_frame(cx),
        };
        match &polled {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.release(),
            Poll::Ready(Some(Err(_))) => self.conn = None,
            Poll::Pending => {
                if let Some(deadline) = self.deadline.as_mut()
                    && deadline.timer.as_mut().poll(cx).is_ready()
                {
                    let timeout = deadline.timeout;
                    self.conn = None;
                    return Poll::Ready(Some(Err(ResponseBodyError::ReadTimeout(timeout))));
                }
            }
            Poll::Ready(Some(Ok(_))) => {}
        }
        if let (Poll::Ready(Some(Ok(_))), Some(deadline)) = (&polled, self.deadline.as_mut()) {
            let next = Instant::now() + deadline.timeout;
            deadline.timer.as_mut().reset(next);
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
