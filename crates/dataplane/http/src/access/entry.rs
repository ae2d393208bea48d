//! One request's line: begun when the request arrives (what the client asked for), completed
//! as routing and forwarding learn more, sent when the response body is done or dropped.

use super::record;
use super::writer::AccessLog;
use crate::limits::Fault;
use crate::ratelimit::InProgress;
use crate::route::PoolState;
use crate::trace::Recording;
use bytes::Buf;
use hyper::body::{Body, Frame, SizeHint};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The client as the line names it: the peer's address, or a name given for it (a trusted
/// proxy's header, the PROXY protocol).
#[derive(Clone, Copy)]
pub(crate) enum Client<'a> {
    Addr(std::net::IpAddr),
    Text(&'a [u8]),
}

/// The request's id: the one the client sent, or the bits of the one Portico made.
#[derive(Clone, Copy)]
pub(crate) enum RequestId<'a> {
    Sent(&'a [u8]),
    New(u128),
}

/// What the client asked for, as the line shows it.
pub(crate) struct Asked<'a> {
    /// When the request's first byte arrived (its request time counts from then).
    pub(crate) started: Instant,
    pub(crate) request_id: RequestId<'a>,
    pub(crate) client: Client<'a>,
    pub(crate) host: &'a [u8],
    pub(crate) method: &'a str,
    pub(crate) path: &'a [u8],
    /// The request's trace id, when tracing is on.
    pub(crate) trace_id: Option<&'a [u8]>,
}

/// A request's access log line in the making, and its span when it is traced and sampled
/// (which ends with the line, knowing what it knows); does nothing when both are off.
#[derive(Default)]
pub(crate) struct Entry {
    line: Option<Box<Line>>,
    span: Option<Box<Spanned>>,
}

/// A sampled request's span and what its end needs that the line may not be there to hold.
struct Spanned {
    span: Recording,
    status: u16,
    pool: Option<Arc<PoolState>>,
}

impl Spanned {
    fn end(self) {
        let pool = self.pool.as_ref().map(|p| (p.load_balancer(), p.name()));
        self.span.end(self.status, pool);
    }
}

struct Line {
    log: AccessLog,
    text: Vec<u8>,
    started: Instant,
    status: u16,
    pool: Option<Arc<PoolState>>,
    upstream: Option<SocketAddr>,
    upstream_time: Option<Duration>,
    body_in: Option<Arc<Fault>>,
    bytes_out: u64,
}

impl Entry {
    /// Formats what the client asked for, when `log` is on.
    pub(crate) fn begin(log: &AccessLog, asked: &Asked<'_>) -> Self {
        if !log.is_on() {
            return Entry::default();
        }
        let mut text = log.buffer();
        let started = asked.started;
        record::begin(&mut text, asked);
        let line = Some(Box::new(Line {
            log: log.clone(),
            text,
            started,
            status: 0,
            pool: None,
            upstream: None,
            upstream_time: None,
            body_in: None,
            bytes_out: 0,
        }));
        Entry { line, span: None }
    }

    /// The request's span, sampled: it ends when the line does.
    pub(crate) fn trace(&mut self, span: Option<Box<Recording>>) {
        self.span = span.map(|span| {
            Box::new(Spanned {
                span: *span,
                status: 0,
                pool: None,
            })
        });
    }

    fn line(&mut self) -> Option<&mut Line> {
        self.line.as_deref_mut()
    }

    /// Sends the line (the response ended at `now`, when known) and ends the span.
    fn finish(&mut self, now: Option<Instant>) {
        if let Some(line) = self.line.take() {
            line.finish(now.unwrap_or_else(Instant::now));
        }
        if let Some(span) = self.span.take() {
            span.end();
        }
    }

    pub(crate) fn pool(&mut self, pool: &Arc<PoolState>) {
        if let Some(span) = self.span.as_deref_mut() {
            span.pool = Some(pool.clone());
        }
        if let Some(line) = self.line() {
            line.pool = Some(pool.clone());
        }
    }

    pub(crate) fn upstream(&mut self, addr: SocketAddr, body: &Arc<Fault>) {
        if let Some(span) = self.span.as_deref_mut() {
            span.span.tried(addr);
        }
        if let Some(line) = self.line() {
            line.upstream = Some(addr);
            line.body_in = Some(body.clone());
        }
    }

    /// The member a try without a request body went to (the own HTTP/1.1 path).
    pub(crate) fn upstream_addr(&mut self, addr: SocketAddr) {
        if let Some(span) = self.span.as_deref_mut() {
            span.span.tried(addr);
        }
        if let Some(line) = self.line() {
            line.upstream = Some(addr);
        }
    }

    /// Response body bytes sent to the client (the own HTTP/1.1 path).
    pub(crate) fn sent(&mut self, bytes: usize) {
        if let Some(line) = self.line() {
            line.bytes_out += u64::try_from(bytes).unwrap_or(u64::MAX);
        }
    }

    /// Sends the line now (the own HTTP/1.1 path, once the response is written, at `now`).
    pub(crate) fn end(mut self, now: Instant) {
        self.finish(Some(now));
    }

    pub(crate) fn answered(&mut self, upstream_time: Duration) {
        if let Some(line) = self.line() {
            line.upstream_time = Some(upstream_time);
        }
    }

    pub(crate) fn status(&mut self, status: u16) {
        if let Some(span) = self.span.as_deref_mut() {
            span.status = status;
        }
        if let Some(line) = self.line() {
            line.status = status;
        }
    }
}

impl Line {
    /// The rest of the record, then to the writer.
    fn finish(mut self, now: Instant) {
        let done = record::Done {
            status: self.status,
            bytes_in: self.body_in.as_ref().map_or(0, |f| f.read()),
            bytes_out: self.bytes_out,
            upstream_time: self.upstream_time,
            upstream: self.upstream,
        };
        record::finish(&mut self.text, &done);
        let Line {
            log,
            text,
            pool,
            started,
            ..
        } = self;
        let pool = pool.map(|p| p as Arc<dyn record::Named>);
        log.send(record::Record {
            bytes: text,
            pool,
            started,
            ended: now,
        });
    }
}

/// A response body that counts the bytes it sends and completes its request's line when it
/// is done (sent, or dropped because the client went away).
pub(crate) struct Logged<B> {
    body: B,
    entry: Entry,
    /// Held until the body is done: the request's place under `limit-connections`.
    held: Option<InProgress>,
}

impl<B> Logged<B> {
    pub(crate) fn new(body: B, entry: Entry, held: Option<InProgress>) -> Self {
        Logged { body, entry, held }
    }
}

impl<B: Body + Unpin> Body for Logged<B>
where
    B::Data: Buf,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let (Poll::Ready(Some(Ok(frame))), Some(line)) = (&polled, self.entry.line()) {
            let len = frame.data_ref().map_or(0, Buf::remaining);
            line.bytes_out += u64::try_from(len).unwrap_or(u64::MAX);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B> Drop for Logged<B> {
    fn drop(&mut self) {
        self.entry.finish(None);
        self.held.take();
    }
}
