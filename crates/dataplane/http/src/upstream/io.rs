//! An upstream connection's I/O with a send timeout: a write the member does not accept
//! within the timeout (`proxy-send-timeout`: the time between two successful writes) fails
//! with `TimedOut`, which fails the request.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// The send timeout of the request a connection carries, in milliseconds (0: none); set by
/// each request, since pools with different timeouts may share a member's connections.
pub(crate) type SendTimeout = Arc<AtomicU64>;

pub(super) struct SendDeadline<IO> {
    io: IO,
    timeout: SendTimeout,
    /// Armed while a write waits for the member.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<IO> SendDeadline<IO> {
    pub(super) fn new(io: IO, timeout: SendTimeout) -> Self {
        SendDeadline {
            io,
            timeout,
            stalled: None,
        }
    }

    /// After a write: ready clears the timer, pending arms it (or fails once it expired).
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let ms = self.timeout.load(Ordering::Relaxed);
        if ms == 0 {
            return polled;
        }
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(ms))));
        if timer.as_mut().poll(cx).is_ready() {
            self.stalled = None;
            let message = format!("the member accepted nothing for {ms} ms (send timeout)");
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, message)));
        }
        polled
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for SendDeadline<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for SendDeadline<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
