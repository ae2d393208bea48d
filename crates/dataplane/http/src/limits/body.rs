//! The client's request body on its way upstream: its size limit and minimum rate, what went
//! wrong with it (so the request is answered 413, 408 or 400 rather than 502), and when it
//! ended (the upstream response timeout starts then).

use bytes::{Buf, Bytes};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use portico_model::Limits;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

/// What went wrong with a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BodyFault {
    #[error("the request body is larger than the limit")]
    TooLarge = 1,
    #[error("the request body arrived too slowly")]
    TooSlow = 2,
    #[error("the request body is malformed or was cut")]
    Malformed = 3,
}

/// Shared between the body (polled by the upstream connection) and the request handler.
#[derive(Debug, Default)]
pub(crate) struct Fault {
    fault: AtomicU8,
    ended: AtomicBool,
    notify: Notify,
    /// Body bytes read so far, for the access log.
    read: AtomicU64,
}

impl Fault {
    fn set(&self, fault: BodyFault) -> BodyFault {
        let _ = self
            .fault
            .compare_exchange(0, fault as u8, Ordering::SeqCst, Ordering::SeqCst);
        self.end();
        fault
    }

    fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Counts `bytes` more of the body as read: for a body read without a [`ClientBody`] (the
    /// own HTTP/1.1 path's), so that the access log has its size.
    pub(crate) fn count(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Body bytes read so far.
    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The body's fault, if it had one.
    pub(crate) fn get(&self) -> Option<BodyFault> {
        match self.fault.load(Ordering::SeqCst) {
            1 => Some(BodyFault::TooLarge),
            2 => Some(BodyFault::TooSlow),
            3 => Some(BodyFault::Malformed),
            _ => None,
        }
    }

    /// Resolves once the body has been read to its end (or failed).
    pub(crate) async fn ended(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ended.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// A request body as the client connection gives it: hyper's (HTTP/1.1 and HTTP/2), or an
/// HTTP/3 request stream's.
pub(crate) enum Inbound {
    Hyper(Incoming),
    H3(H3Body),
    /// No body: a request the proxy makes itself (an error page's).
    Empty,
}

/// The receiving half of an HTTP/3 request stream as a body: its DATA frames, then its
/// trailers.
pub(crate) struct H3Body {
    stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    /// Data read before the body was polled.
    first: Option<Bytes>,
    /// The DATA frames are all read (the trailers may follow).
    data_done: bool,
    /// Nothing more will come.
    ended: bool,
}

impl H3Body {
    /// The body of `stream`, ended already if the client finished the stream with its
    /// headers (a request without a body, known without waiting when the stream's end has
    /// arrived: one poll, whose wake-up, if any, goes to the request's task).
    pub(crate) async fn new(
        mut stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    ) -> Self {
        let first = std::future::poll_fn(|cx| Poll::Ready(stream.poll_recv_data(cx))).await;
        let mut body = H3Body {
            stream,
            first: None,
            data_done: false,
            ended: false,
        };
        match first {
            Poll::Ready(Ok(Some(mut data))) => {
                body.first = Some(data.copy_to_bytes(data.remaining()))
            }
            // Trailers would have come before the stream's end.
            Poll::Ready(Ok(None)) => (body.data_done, body.ended) = (true, true),
            Poll::Ready(Err(_)) | Poll::Pending => {}
        }
        body
    }
}

/// An error of a request body, as the client's connection reports it.
type InboundError = Box<dyn std::error::Error + Send + Sync>;

impl Body for Inbound {
    type Data = Bytes;
    type Error = InboundError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InboundError>>> {
        match self.get_mut() {
            Inbound::Hyper(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Inbound::H3(body) => body.poll_frame(cx),
            Inbound::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Inbound::Hyper(body) => body.is_end_stream(),
            Inbound::H3(body) => body.ended,
            Inbound::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Inbound::Hyper(body) => body.size_hint(),
            Inbound::H3(body) if body.ended => SizeHint::with_exact(0),
            Inbound::Empty => SizeHint::with_exact(0),
            Inbound::H3(_) => SizeHint::default(),
        }
    }
}

impl H3Body {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InboundError>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        if !self.data_done {
            match self.stream.poll_recv_data(cx) {
                Poll::Ready(Ok(Some(mut data))) => {
                    let data = data.copy_to_bytes(data.remaining());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(Ok(None)) => self.data_done = true,
                Poll::Ready(Err(error)) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(error.into())));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        let trailers = std::task::ready!(self.stream.poll_recv_trailers(cx));
        self.ended = true;
        Poll::Ready(match trailers {
            Ok(Some(trailers)) => Some(Ok(Frame::trailers(trailers))),
            Ok(None) => None,
            Err(error) => Some(Err(error.into())),
        })
    }
}

/// The request body as the upstream reads it.
pub(crate) struct ClientBody {
    /// `None`: an empty body (a request tried again whose body was empty).
    inner: Option<Inbound>,
    fault: Arc<Fault>,
    max: u64,
    read: u64,
    window: Duration,
    per_window: u64,
    window_read: u64,
    /// The rate window's timer; none for a body that ended before it began (most requests
    /// have no body, and a timer per request is a heap block and a timer-wheel entry).
    timer: Option<Pin<Box<Sleep>>>,
}

impl std::fmt::Debug for ClientBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBody")
            .field("read", &self.read)
            .finish()
    }
}

impl ClientBody {
    /// The body of a request with `limits`, its size limit being `max` (0: none).
    pub(crate) fn new(inner: Inbound, limits: &Limits, max: u64) -> (Self, Arc<Fault>) {
        let ended = inner.is_end_stream();
        Self::with(Some(inner), ended, limits, max)
    }

    /// An empty body, ended already: what a request without a body sends when tried again.
    pub(crate) fn empty(limits: &Limits) -> (Self, Arc<Fault>) {
        Self::with(None, true, limits, 0)
    }

    fn with(inner: Option<Inbound>, ended: bool, limits: &Limits, max: u64) -> (Self, Arc<Fault>) {
        let fault = Arc::new(Fault::default());
        if ended {
            fault.end();
        }
        let body = ClientBody {
            inner,
            fault: fault.clone(),
            max,
            read: 0,
            window: limits.body_timeout,
            per_window: limits.body_bytes_per_window(),
            window_read: 0,
            timer: (!ended).then(|| Box::pin(tokio::time::sleep(limits.body_timeout))),
        };
        (body, fault)
    }

    fn data(&mut self, len: usize) -> Result<(), BodyFault> {
        let len = u64::try_from(len).unwrap_or(u64::MAX);
        self.read = self.read.saturating_add(len);
        self.fault.read.store(self.read, Ordering::Relaxed);
        self.window_read = self.window_read.saturating_add(len);
        if self.max > 0 && self.read > self.max {
            return Err(self.fault.set(BodyFault::TooLarge));
        }
        if self.is_end_stream() {
            self.fault.end();
        }
        Ok(())
    }

    /// Whether the current rate window closed without enough bytes.
    fn too_slow(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(timer) = self.timer.as_mut() else {
            return false;
        };
        while timer.as_mut().poll(cx).is_ready() {
            if self.window_read < self.per_window {
                self.fault.set(BodyFault::TooSlow);
                return true;
            }
            self.window_read = 0;
            timer.as_mut().reset(Instant::now() + self.window);
        }
        false
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BodyFault;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyFault>>> {
        if let Some(fault) = self.fault.get() {
            return Poll::Ready(Some(Err(fault)));
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                Poll::Ready(Some(self.data(len).map(|()| frame)))
            }
            Poll::Ready(Some(Err(_))) => {
                Poll::Ready(Some(Err(self.fault.set(BodyFault::Malformed))))
            }
            Poll::Ready(None) => {
                self.fault.end();
                Poll::Ready(None)
            }
            Poll::Pending if self.too_slow(cx) => Poll::Ready(Some(Err(BodyFault::TooSlow))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Inbound::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(inner) => inner.size_hint(),
            None => SizeHint::with_exact(0),
        }
    }
}
