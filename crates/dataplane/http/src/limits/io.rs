//! The client connection's I/O, telling its [`Activity`] when bytes arrive and its
//! [`Framing`] what they are.

use super::Activity;
use super::framing::Framing;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct Watched<IO> {
    io: IO,
    activity: Arc<Activity>,
    framing: Framing,
    /// Bytes read ahead for a small read, not yet handed out.
    ahead: Vec<u8>,
    /// How many bytes of `ahead` were handed out.
    taken: usize,
}

/// A read for fewer bytes than this reads this many from the socket, and keeps the rest for
/// the next reads. The protocol detection of hyper-util's server reads 24 bytes (the length of
/// the HTTP/2 preface) before hyper reads the rest: without this, every new connection made
/// two `recvfrom` calls for its first request instead of one.
const READ_AHEAD: usize = 2048;

impl<IO> Watched<IO> {
    pub(crate) fn new(io: IO, activity: Arc<Activity>, framing: Framing) -> Self {
        Watched {
            io,
            activity,
            framing,
            ahead: Vec::new(),
            taken: 0,
        }
    }

    /// Like [`Watched::new`], with `ahead` already read from `io` (by the own HTTP/1.1
    /// path): handed out first, and seen by the deadlines and the framing scanner now.
    pub(crate) fn with_ahead(
        io: IO,
        activity: Arc<Activity>,
        framing: Framing,
        ahead: Vec<u8>,
    ) -> Self {
        let mut watched = Watched::new(io, activity, framing);
        watched.arrived(&ahead);
        watched.ahead = ahead;
        watched
    }

    /// Hands out bytes read ahead, if any are left; whether it did.
    fn take_ahead(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let left = &self.ahead[self.taken..];
        if left.is_empty() {
            return false;
        }
        let n = left.len().min(buf.remaining());
        buf.put_slice(&left[..n]);
        self.taken += n;
        if self.taken == self.ahead.len() {
            self.ahead = Vec::new();
            self.taken = 0;
        }
        true
    }

    /// Bytes came from the client: the deadlines and the framing scanner see them.
    fn arrived(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.activity.read();
            self.framing.feed(bytes);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.take_ahead(buf) {
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() < READ_AHEAD {
            let mut chunk = [0u8; READ_AHEAD];
            let mut ahead = ReadBuf::new(&mut chunk);
            let polled = Pin::new(&mut this.io).poll_read(cx, &mut ahead);
            if matches!(polled, Poll::Ready(Ok(()))) {
                let read = ahead.filled();
                this.arrived(read);
                let n = read.len().min(buf.remaining());
                buf.put_slice(&read[..n]);
                this.ahead.extend_from_slice(&read[n..]);
            }
            return polled;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) {
            this.arrived(&buf.filled()[before..]);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A client that sent `data`, counting the reads made of it.
    struct Sent {
        data: Vec<u8>,
        at: usize,
        reads: Arc<AtomicUsize>,
    }

    impl AsyncRead for Sent {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let n = (self.data.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            Poll::Ready(Ok(()))
        }
    }

    fn read(watched: &mut Watched<Sent>, into: &mut [u8]) -> usize {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut buf = ReadBuf::new(into);
        let polled = Pin::new(watched).poll_read(&mut cx, &mut buf);
        assert!(matches!(polled, Poll::Ready(Ok(()))));
        buf.filled().len()
    }

    #[test]
    fn a_small_first_read_reads_ahead_and_the_next_read_gets_the_rest_without_the_socket() {
        let head = b"GET /a/small HTTP/1.1\r\nHost: h1.bench\r\nUser-Agent: test\r\n\r\n".to_vec();
        let reads = Arc::new(AtomicUsize::new(0));
        let sent = Sent {
            data: head.clone(),
            at: 0,
            reads: reads.clone(),
        };
        let ambiguous = super::super::Ambiguous::new();
        let framing = Framing::new(8192, ambiguous);
        let mut watched = Watched::new(sent, Activity::new(), framing);

        let mut preface = [0u8; 24];
        assert_eq!(read(&mut watched, &mut preface), 24);
        let mut rest = [0u8; 8192];
        let n = read(&mut watched, &mut rest);
        assert_eq!([&preface[..], &rest[..n]].concat(), head);
        assert_eq!(reads.load(Ordering::SeqCst), 1, "one read of the socket");

        // Past what was read ahead, reads go to the socket again (here: its end).
        assert_eq!(read(&mut watched, &mut rest), 0);
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }
}
