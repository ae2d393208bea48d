//! The proxy's own HTTP/1.1 path: the common request (HTTP/1.1, origin form, without a body or
//! with one framed by `Content-Length` or chunked (see [`body`]), to a
//! pool of plain HTTP/1.1 members chosen without reading the request) served in the client
//! connection's task, with httparse and byte copies instead of hyper's two state machines,
//! header maps and the task hand-off between them (docs/benchmarks.md, "Performance II, eighth
//! pass": a proxy built this way costs half of nginx's instructions per request, one built on
//! hyper 1.3 times nginx's).
//!
//! The first request head it declines (see [`head::inspect`]: upgrades, HTTP/2,
//! HTTP/1.0, malformed heads, ambiguous framing, `Expect`, a declared body over the pool's limit;
//! or a route that is not a pool it can serve) goes to hyper with
//! the bytes already read, and hyper serves that request and the rest of the connection, errors
//! included. So whatever this path does not do is done as before.
//!
//! Each request keeps what the hyper path does: the same routing, admission by source, member
//! choice, passive health, retries on another member (a failed connect; any failure before
//! the response head for idempotent methods without a body), retry budget, connect and read
//! timeouts, the body's size limit and minimum rate, the
//! header rewriting, `X-Request-Id`, the access log line and the pool metrics; the header,
//! keep-alive and drain deadlines of the connection.

mod body;
mod chunked;
mod deadline;
mod dechunk;
mod head;

use super::conn::{failure_outcome, lock};
use super::error::ProxyError;
use super::tries::{
    connect_timeout, is_idempotent, max_body, read_timeout, send_timeout, source_allowed,
};
use super::{Phase, Proxy, Scheme};
use crate::access::{Asked, Client as LoggedClient, Entry, RequestId, http_date_now};
use crate::access::{new_id_bits, uuid_text};
use crate::limits::{BodyFault, Fault};
use crate::route::{Action, Outcome, PoolState, RequestInfo, Target};
use crate::upstream::{Endpoint, UpstreamError};
use chunked::Chunked;
use deadline::Watch;
use head::{Answer, Body, Finish, Forwarding, Framing, Inspected, MAX_FIELDS};
use http::{HeaderMap, StatusCode, Uri};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Room kept free in a read buffer before each read.
const READ_ROOM: usize = 4096;
/// Room for a body read: a 16 KiB response in one read once the buffer has grown to it.
const BODY_ROOM: usize = 16 * 1024;
/// A buffer that grew past this (a huge head) is shrunk once its request is done, so that an
/// idle connection keeps a few KiB whatever it carried once.
const KEPT_ROOM: usize = 32 * 1024;
/// How long a closing TLS connection may take to send its close_notify.
const CLOSE_NOTIFY_WAIT: Duration = Duration::from_secs(1);
/// The most response bytes gathered from a member for one write to the client (nginx buffers
/// up to 32–64 KiB of a response by default, haproxy 16 KiB).
const GATHER: usize = 64 * 1024;
/// The largest response head taken from an upstream (hyper's client allows as much).
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// One client connection on this path.
struct Client<IO> {
    io: IO,
    peer: IpAddr,
    /// The peer's address as `X-Forwarded-For` and the access log write it.
    peer_text: String,
    scheme: Scheme,
    /// Bytes read and not yet served: the rest of a request body, then the next request head.
    input: Vec<u8>,
    /// Bytes of the current request's body not yet taken from `input` or read from the client
    /// ([`CHUNKED_UNREAD`] until a chunked body's end). The connection can take another
    /// request only once this is 0.
    unread: u64,
    /// What is written next, to the upstream or to the client.
    out: Vec<u8>,
    /// What the upstream sent, not yet forwarded.
    upstream: Vec<u8>,
    /// A response head being written for the client, until it is whole.
    head: Vec<u8>,
    phase: watch::Receiver<Phase>,
    /// The deadline of whatever the connection waits for.
    watch: Watch,
    /// For member choice, which reads nothing of the request on this path.
    no_fields: HeaderMap,
    no_uri: Uri,
}

/// The read and write buffers of connections that ended on this thread, for its next ones.
///
/// A connection's buffers are a few KiB each, and with a new connection per request they were
/// freed and allocated again for every request. Freed, the allocator's pages they filled
/// went back to the OS (Portico's allocator returns free pages at once), and the next
/// connection's buffers touched them again: about one page fault per request, which was most
/// of what a new connection cost Portico in the kernel beyond nginx's. Kept here they stay
/// mapped. At most [`MOST_SPARE`] sets of at most [`KEPT_ROOM`] each are kept per thread,
/// cleared.
mod spare {
    use super::KEPT_ROOM;
    use std::cell::RefCell;

    /// How many sets of buffers a thread keeps for its next connections.
    pub(super) const MOST_SPARE: usize = 32;

    thread_local! {
        static SPARE: RefCell<Vec<[Vec<u8>; 4]>> = const { RefCell::new(Vec::new()) };
    }

    /// A set of buffers: a spare one, or new ones (empty, allocated when first used).
    pub(super) fn take() -> [Vec<u8>; 4] {
        SPARE.with_borrow_mut(Vec::pop).unwrap_or_default()
    }

    /// Keeps `buffers` for the next connection of this thread, unless enough are kept.
    pub(super) fn give_back(mut buffers: [Vec<u8>; 4]) {
        if buffers.iter().any(|buffer| buffer.capacity() > KEPT_ROOM) {
            return;
        }
        buffers.iter_mut().for_each(Vec::clear);
        SPARE.with_borrow_mut(|spare| {
            if spare.len() < MOST_SPARE {
                spare.push(buffers);
            }
        });
    }
}

/// [`Client::unread`] while a chunked body has not ended (no `Content-Length` the own path
/// takes is this large).
const CHUNKED_UNREAD: u64 = u64::MAX;

/// How serving a request left the connection.
enum Next {
    /// The response ended at this instant (the access log's and the idle wait's).
    KeepAlive(Instant),
    Close,
}

/// A request head on its way to a pool, with what its try needs.
struct Planned {
    pool: Arc<PoolState>,
    pick: crate::route::Pick,
    idempotent: bool,
    head: bool,
    close: bool,
    body: Body,
    entry: Entry,
}

impl Proxy {
    /// Serves `io` on the own HTTP/1.1 path until the connection ends (`None`) or a request
    /// head is declined: then the connection and the bytes read of that head, for hyper.
    pub(super) async fn serve_own<IO>(
        self: &Arc<Self>,
        io: IO,
        peer: SocketAddr,
        scheme: Scheme,
    ) -> Option<(IO, Vec<u8>)>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let peer = peer.ip().to_canonical();
        // The first head's deadline counts from the accept; later ones from their first byte,
        // after an idle wait of up to the keep-alive timeout.
        let mut idle_since = None;
        let mut first_byte = Instant::now();
        let [input, out, upstream, head] = spare::take();
        let mut client = Client {
            io,
            peer,
            peer_text: peer.to_string(),
            scheme,
            input,
            unread: 0,
            out,
            upstream,
            head,
            phase: self.phase.subscribe(),
            watch: Watch::new((first_byte + self.limits.header_timeout).into()),
            no_fields: HeaderMap::new(),
            no_uri: Uri::from_static("/"),
        };
        // When the head being read began to arrive: the access log's request time counts
        // from then (as nginx's `$request_time` does).
        let mut began = first_byte;
        loop {
            let planned = loop {
                match self.plan(&mut client, began) {
                    Ok(Some(planned)) => break planned,
                    Ok(None) => {}
                    Err(Declined) => return Some(client.hand_over()),
                }
                let deadline = match (idle_since, client.input.is_empty()) {
                    (Some(idle), true) => idle + self.limits.keepalive_timeout,
                    _ => first_byte + self.limits.header_timeout,
                };
                let was_empty = client.input.is_empty();
                match client.read_more(deadline).await {
                    Read::Bytes if was_empty && idle_since.is_some() => {
                        first_byte = Instant::now();
                        began = first_byte;
                    }
                    Read::Bytes if was_empty => began = Instant::now(),
                    Read::Bytes => {}
                    Read::Closing | Read::Ended => {
                        client.close().await;
                        return None;
                    }
                }
            };
            match self.exchange(&mut client, planned).await {
                Next::KeepAlive(now) => {
                    idle_since = Some(now);
                    // A pipelined head already begun has its header timeout from now.
                    first_byte = now;
                    began = now;
                }
                Next::Close => {
                    client.close().await;
                    return None;
                }
            }
        }
    }

    /// The request head at the start of the client's input, routed and its member chosen, its
    /// upstream head in `out`: `Ok(None)` until the head is whole, `Err` when declined.
    /// `began`: when the head began to arrive.
    fn plan<IO>(
        &self,
        client: &mut Client<IO>,
        began: Instant,
    ) -> Result<Option<Planned>, Declined> {
        if client.input.is_empty() {
            return Ok(None);
        }
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        // A head over the size limit goes to hyper, which refuses it as every other one.
        let max = self.limits.max_header_bytes;
        let request = match head::inspect(&client.input, &mut fields, self.limits.max_headers) {
            Inspected::Partial if client.input.len() > max => return Err(Declined),
            Inspected::Partial => return Ok(None),
            Inspected::Decline => return Err(Declined),
            Inspected::Request(request) if request.len > max => return Err(Declined),
            Inspected::Request(request) => request,
        };
        let target: http::uri::PathAndQuery = request.target.parse().map_err(|_| Declined)?;
        let path = target.path();
        if super::conn::has_dot_segment(path) {
            return Err(Declined);
        }
        let table = self.table.load();
        // A split's draw is hyper's to make: a declined request would draw twice.
        let facts = crate::route::RouteRequest {
            method: request.method,
            query: target.query(),
            headers: &request.fields,
        };
        let routed = super::target(&table, client.scheme, request.host, path, &facts);
        let Some(Action::One(Target::Pool(pool))) = routed else {
            return Err(Declined);
        };
        if !pool.own_path_fits() || !source_allowed(pool, client.peer) {
            return Err(Declined);
        }
        // A declared body over the limit is refused by hyper's path (413), as every other one;
        // a send timeout is applied there only. A chunked body is taken only when it came whole
        // with its head, well-formed and within the limit: one still coming may be answered
        // while it streams (full duplex), which hyper's path serves and this one, reading the
        // answer once the body is sent, would not.
        let max = max_body(pool, &self.limits);
        let too_large = matches!(request.body, Body::Length(n) if max > 0 && n > max);
        let partial =
            request.body == Body::Chunked && !dechunk::is_whole(&client.input[request.len..], max);
        if request.body != Body::None && (too_large || partial || !send_timeout(pool).is_zero()) {
            return Err(Declined);
        }
        // A trusted proxy's request names its client: hyper's path reads it.
        let trusted = self.limits.trusted_proxies;
        if request.forwarded_for && trusted.iter().any(|c| c.contains(client.peer)) {
            return Err(Declined);
        }
        // A response that may be compressed is hyper's path's to make.
        let compression = self.limits.compression;
        if request.accept_encoding && crate::compress::wanted(request.fields, compression) {
            return Err(Declined);
        }
        let pick = pool.choose(&client.request_info(), &[]).ok_or(Declined)?;
        let new_bits = request.request_id.is_none().then(new_id_bits);
        let new_id = new_bits.map(uuid_text);
        let traced = self.tracing.map(|tracing| {
            let asked = crate::trace::Asked {
                method: request.method,
                path: path.as_bytes(),
                host: request.host.as_bytes(),
                scheme: client.scheme.as_str(),
                client: client.peer_text.as_bytes(),
                peer: client.peer,
            };
            tracing.begin(request.traceparent, &asked)
        });
        let forwarding = Forwarding {
            client: client.peer_text.as_bytes(),
            proto: client.scheme.as_str(),
            request_id: new_id.as_ref().map(|id| &id[..]),
            traceparent: traced.as_ref().map(|t| &t.traceparent[..]),
        };
        client.out.clear();
        if !head::write_upstream(&mut client.out, &request, &forwarding) {
            return Err(Declined);
        }
        let mut entry = Entry::begin(
            &self.access,
            &Asked {
                started: began,
                // The client's id, or the one made for it above: there is always one.
                request_id: new_bits.map_or(
                    RequestId::Sent(request.request_id.unwrap_or_default()),
                    RequestId::New,
                ),
                client: LoggedClient::Addr(client.peer),
                host: request.host.as_bytes(),
                method: request.method,
                path: path.as_bytes(),
                trace_id: traced.as_ref().map(crate::trace::Traced::trace_id),
            },
        );
        entry.trace(traced.and_then(|t| t.span));
        entry.pool(pool);
        let planned = Planned {
            pool: pool.clone(),
            pick,
            idempotent: is_idempotent(request.method),
            head: request.method == "HEAD",
            close: request.close,
            body: request.body,
            entry,
        };
        let (len, body) = (request.len, request.body);
        client.input.drain(..len);
        client.unread = match body {
            Body::None => 0,
            Body::Length(length) => length,
            Body::Chunked => CHUNKED_UNREAD,
        };
        Ok(Some(planned))
    }

    /// Sends the planned request to its member (and others, as the pool's tries allow) and
    /// the response, or the failure, to the client.
    async fn exchange<IO>(&self, client: &mut Client<IO>, planned: Planned) -> Next
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let Planned {
            pool,
            mut pick,
            idempotent,
            head,
            close,
            body,
            mut entry,
        } = planned;
        // Only a request without a body can be sent again once sent: bodies are streamed.
        let replayable = idempotent && body == Body::None;
        // Counts the body's bytes for the access log.
        let received = (body != Body::None).then(|| Arc::new(Fault::default()));
        let max_body = max_body(&pool, &self.limits);
        let read = read_timeout(&pool, &self.limits);
        let connect = connect_timeout(&pool);
        lock(&pool.budget).request(Instant::now());
        let max_tries = pool.max_tries();
        let mut tried: Vec<SocketAddr> = Vec::new();
        loop {
            let endpoint = pick.endpoint().clone();
            let upstream = endpoint.addr();
            match &received {
                Some(received) => entry.upstream(upstream, received),
                None => entry.upstream_addr(upstream),
            }
            let started = Instant::now();
            let try_ = Try {
                proxy: self,
                connect,
                read,
                replayable,
                head,
                close,
                body: (body, max_body),
                received: received.as_deref(),
            };
            let failed = match send(&endpoint, client, &try_).await {
                Ok((stream, response)) => {
                    let latency = started.elapsed();
                    let to = (&endpoint, &pool, pick);
                    return respond(client, stream, to, response, latency, entry, read).await;
                }
                Err(Failed::TimedOut) => {
                    pool.record(
                        pick,
                        Outcome::Timeout {
                            latency: started.elapsed(),
                        },
                    );
                    let error = ProxyError::UpstreamTimeout {
                        pool: pool.id(),
                        upstream,
                    };
                    return self.fail(client, &pool, &error, entry).await;
                }
                // The client's body failed: not the member's fault (its pick is dropped).
                Err(Failed::Body(fault)) => {
                    let error = ProxyError::Body(fault);
                    return self.fail(client, &pool, &error, entry).await;
                }
                Err(Failed::Error { error, unsent }) => (error, unsent),
            };
            let (error, unsent) = failed;
            pool.record(pick, failure_outcome(&error));
            tried.push(upstream);
            let again = super::tries::may_retry(unsent, replayable, &error);
            let next = if again && tried.len() < max_tries {
                pool.choose(&client.request_info(), &tried)
            } else {
                None
            };
            let next = next.filter(|_| {
                let allowed = lock(&pool.budget).try_retry(Instant::now());
                if !allowed {
                    pool.metrics.budget_exhausted();
                }
                allowed
            });
            let Some(next) = next else {
                let pool_id = pool.id();
                let error = ProxyError::Upstream {
                    pool: pool_id,
                    upstream,
                    source: error,
                };
                return self.fail(client, &pool, &error, entry).await;
            };
            tracing::debug!(%upstream, next = %next.addr(), %error, "trying another member");
            pool.metrics.retried();
            pick = next;
        }
    }

    /// Answers with `error`'s response, as the hyper path's `rescue` does.
    async fn fail<IO>(
        &self,
        client: &mut Client<IO>,
        pool: &PoolState,
        error: &ProxyError,
        mut entry: Entry,
    ) -> Next
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        error.log();
        let status = error.status();
        pool.metrics.record(status);
        entry.status(status.as_u16());
        let body = super::error::body(status);
        client.out.clear();
        client.out.extend_from_slice(b"HTTP/1.1 ");
        client.out.extend_from_slice(status.as_str().as_bytes());
        client.out.push(b' ');
        let reason = status.canonical_reason().unwrap_or("");
        client.out.extend_from_slice(reason.as_bytes());
        client
            .out
            .extend_from_slice(b"\r\ncontent-type: text/plain; charset=utf-8\r\n");
        client.out.extend_from_slice(b"content-length: ");
        client
            .out
            .extend_from_slice(body.len().to_string().as_bytes());
        client.out.extend_from_slice(b"\r\ndate: ");
        client.out.extend_from_slice(&http_date_now());
        if let Some(server) = self.limits.server_header {
            client.out.extend_from_slice(b"\r\nserver: ");
            client.out.extend_from_slice(server.as_bytes());
        }
        if let Some(hsts) = client.hsts(self) {
            client
                .out
                .extend_from_slice(b"\r\nstrict-transport-security: ");
            client.out.extend_from_slice(hsts);
        }
        if let Some(alt_svc) = client.alt_svc(self) {
            client.out.extend_from_slice(b"\r\nalt-svc: ");
            client.out.extend_from_slice(alt_svc);
        }
        // A body not read to its end leaves the connection without a next request head.
        let close = self.draining() || client.unread > 0;
        if close {
            client.out.extend_from_slice(b"\r\nconnection: close");
        }
        client.out.extend_from_slice(b"\r\n\r\n");
        client.out.extend_from_slice(&body);
        let sent = client.io.write_all(&client.out).await.is_ok();
        let flushed = sent && client.io.flush().await.is_ok();
        entry.sent(if flushed { body.len() } else { 0 });
        let now = Instant::now();
        entry.end(now);
        if flushed && !close {
            Next::KeepAlive(now)
        } else {
            Next::Close
        }
    }
}

/// The response head the upstream sent (already written for the client in `client.out`),
/// then its body, to the client.
async fn respond<IO>(
    client: &mut Client<IO>,
    mut stream: TcpStream,
    (endpoint, pool, pick): (&Arc<Endpoint>, &Arc<PoolState>, crate::route::Pick),
    response: head::Response,
    latency: Duration,
    mut entry: Entry,
    read: Duration,
) -> Next
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    pool.metrics.observe_latency(latency);
    entry.answered(latency);
    let outcome = if response.status >= 500 {
        Outcome::Status5xx { latency }
    } else {
        Outcome::Success { latency }
    };
    pool.record(pick, outcome);
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::BAD_GATEWAY);
    pool.metrics.record(status);
    entry.status(response.status);
    let body = &client.upstream[response.len..];
    let (forwarded, reusable) = match response.framing {
        Framing::Empty => {
            let sent = client.io.write_all(&client.out).await.is_ok();
            (sent.then_some(0), body.is_empty())
        }
        Framing::Length(length) => {
            let have = body
                .len()
                .min(usize::try_from(length).unwrap_or(usize::MAX));
            let left = length - have as u64;
            copy_length(client, &mut stream, (response.len, have), left, read).await
        }
        Framing::Chunked => copy_chunked(client, &mut stream, response.len, read).await,
        Framing::UntilClose => {
            let copied = copy_until_close(client, &mut stream, response.len, read).await;
            (copied, false)
        }
    };
    client.keep_small();
    let flushed = forwarded.is_some() && client.io.flush().await.is_ok();
    entry.sent(usize::try_from(forwarded.unwrap_or(0)).unwrap_or(usize::MAX));
    let now = Instant::now();
    entry.end(now);
    if flushed && reusable && response.reusable {
        endpoint.checkin_raw(stream);
    }
    if flushed && !response.close {
        Next::KeepAlive(now)
    } else {
        Next::Close
    }
}

/// The request head was not for this path.
struct Declined;

/// What one try needs besides the member.
struct Try<'a> {
    proxy: &'a Proxy,
    connect: Duration,
    read: Duration,
    /// The request can be sent again after a failure (see [`super::tries::may_retry`]).
    replayable: bool,
    /// The request's body and the pool's limit on it (0: none).
    body: (Body, u64),
    /// Where the body's bytes are counted; `None`: no body.
    received: Option<&'a Fault>,
    /// The request is HEAD.
    head: bool,
    /// The client asked to close.
    close: bool,
}

/// What a wait for client bytes ended with.
enum Read {
    Bytes,
    /// The proxy is closing its connections.
    Closing,
    /// The client closed, failed, or let its deadline pass.
    Ended,
}

impl<IO> Client<IO> {
    /// How many of the next `most` bytes belong to the current request's body.
    fn body_room(&self, most: usize) -> usize {
        usize::try_from(self.unread).map_or(most, |unread| unread.min(most))
    }

    /// What member choice sees of a request on this path: the client's address only.
    fn request_info(&self) -> RequestInfo<'_> {
        RequestInfo {
            headers: &self.no_fields,
            uri: &self.no_uri,
            client: self.peer,
        }
    }

    /// The `Strict-Transport-Security` of this connection's responses: the process's, over
    /// TLS (this path serves no route with options, where an Ingress's own would be).
    fn hsts<'p>(&self, proxy: &'p Proxy) -> Option<&'p [u8]> {
        let hsts = proxy.hsts.as_ref().filter(|_| self.scheme == Scheme::Https);
        hsts.map(http::HeaderValue::as_bytes)
    }

    /// The `Alt-Svc` of this connection's responses: HTTP/3's, over TLS, while it is served.
    fn alt_svc<'p>(&self, proxy: &'p Proxy) -> Option<&'p [u8]> {
        let alt_svc = proxy.alt_svc().filter(|_| self.scheme == Scheme::Https);
        alt_svc.map(http::HeaderValue::as_bytes)
    }

    /// The connection ends on this path. Over TLS the client gets a close_notify first, as
    /// TLS asks (RFC 8446, 6.1) and as hyper's path does: without one, clients see a truncated
    /// connection (OpenSSL reports "unexpected eof"). Then the buffers go to this thread's
    /// spares.
    async fn close(mut self)
    where
        IO: AsyncWrite + Unpin,
    {
        if self.scheme == Scheme::Https {
            let deadline = tokio::time::Instant::now() + CLOSE_NOTIFY_WAIT;
            let _ = self.watch.within(deadline, self.io.shutdown()).await;
        }
        self.end();
    }

    /// The connection's buffers go to this thread's spares.
    fn end(self) {
        spare::give_back(self.into_parts().1);
    }

    /// The connection goes to hyper with the bytes read of the head declined; the other
    /// buffers go to this thread's spares.
    fn hand_over(self) -> (IO, Vec<u8>) {
        let (io, [input, out, upstream, head]) = self.into_parts();
        spare::give_back([Vec::new(), out, upstream, head]);
        (io, input)
    }

    /// The connection and its four buffers, in the order [`spare::take`] gives them.
    fn into_parts(self) -> (IO, [Vec<u8>; 4]) {
        let Client {
            io,
            input,
            out,
            upstream,
            head,
            ..
        } = self;
        (io, [input, out, upstream, head])
    }

    /// Gives back what a buffer took beyond [`KEPT_ROOM`].
    fn keep_small(&mut self) {
        for buffer in [
            &mut self.input,
            &mut self.out,
            &mut self.upstream,
            &mut self.head,
        ] {
            if buffer.capacity() > KEPT_ROOM {
                buffer.shrink_to(READ_ROOM);
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Client<IO> {
    /// Reads what the client sends next, until `deadline`.
    async fn read_more(&mut self, deadline: Instant) -> Read {
        self.input.reserve(READ_ROOM);
        let (io, input, phase) = (&mut self.io, &mut self.input, &mut self.phase);
        let reading = self.watch.within(deadline.into(), io.read_buf(input));
        let closing = async {
            loop {
                if *phase.borrow_and_update() == Phase::Closing {
                    return;
                }
                if phase.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            biased;
            read = reading => match read {
                Some(Ok(n)) if n > 0 => Read::Bytes,
                _ => Read::Ended,
            },
            () = closing => Read::Closing,
        }
    }
}

/// How a try failed.
enum Failed {
    /// No response head within the read timeout.
    TimedOut,
    Error {
        error: UpstreamError,
        /// Nothing of the request reached the member (it can go elsewhere).
        unsent: bool,
    },
    /// The client's body failed: cut or malformed, too large, or too slow.
    Body(BodyFault),
}

/// Sends the upstream head in `client.out` to `endpoint`, on an idle connection or a new one,
/// and reads the response head into `client.upstream` (interim responses dropped); the
/// client's head is then in `client.out`. A reused connection that fails before any response
/// byte is replaced once by a new one for a replayable request: the member closed it while
/// idle, which says nothing of its health.
async fn send<IO: AsyncRead + AsyncWrite + Unpin>(
    endpoint: &Endpoint,
    client: &mut Client<IO>,
    try_: &Try<'_>,
) -> Result<(TcpStream, head::Response), Failed> {
    let mut reused = endpoint.checkout_raw();
    loop {
        let fresh = reused.is_none();
        let mut stream = match reused.take() {
            Some(stream) => stream,
            None => (endpoint.connect_raw(try_.connect).await).map_err(|error| Failed::Error {
                error,
                unsent: true,
            })?,
        };
        match exchange_head(&mut stream, client, try_).await {
            Ok(response) => return Ok((stream, response)),
            Err(Failed::Error { error, .. })
                if !fresh && try_.replayable && error.before_response() =>
            {
                tracing::debug!(addr = %endpoint.addr(), %error, "idle upstream connection closed");
            }
            Err(failed) => return Err(failed),
        }
    }
}

/// Writes the request head and reads the response head, within the read timeout of the
/// write. `client.out` keeps the request head until a response head replaces it.
async fn exchange_head<IO: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut TcpStream,
    client: &mut Client<IO>,
    try_: &Try<'_>,
) -> Result<head::Response, Failed> {
    let broken = |error: std::io::Error| Failed::Error {
        error: UpstreamError::Io(error),
        unsent: false,
    };
    let limits = &try_.proxy.limits;
    match (try_.body, try_.received) {
        ((Body::Length(_), _), Some(received)) => {
            body::send_length(stream, client, limits, received).await?;
        }
        ((Body::Chunked, max), Some(received)) => {
            body::send_chunked(stream, client, (limits, max), received).await?;
        }
        _ => stream.write_all(&client.out).await.map_err(broken)?,
    }
    let deadline = tokio::time::Instant::now() + try_.read;
    client.upstream.clear();
    loop {
        if !client.upstream.is_empty() {
            client.head.clear();
            // Draining and the date are taken when the answer is there: a request in flight
            // when the drain began gets `Connection: close` too.
            let date = http_date_now();
            let finish = Finish {
                head: try_.head,
                close: try_.close || try_.proxy.draining(),
                date: &date,
                server: try_.proxy.limits.server_header.map(str::as_bytes),
                hsts: client.hsts(try_.proxy),
                alt_svc: client.alt_svc(try_.proxy),
            };
            match head::answer(&client.upstream, &mut client.head, &finish) {
                Answer::Partial if client.upstream.len() > MAX_RESPONSE_HEAD => {
                    return Err(bad("response head too large"));
                }
                Answer::Partial => {}
                Answer::Interim(len) => {
                    client.upstream.drain(..len);
                    continue;
                }
                Answer::Response(response) => {
                    std::mem::swap(&mut client.out, &mut client.head);
                    return Ok(response);
                }
                Answer::Bad(why) => return Err(bad(why)),
            }
        }
        client.upstream.reserve(READ_ROOM);
        let reading = stream.read_buf(&mut client.upstream);
        match client.watch.within(deadline, reading).await {
            None => return Err(Failed::TimedOut),
            Some(Ok(0)) => {
                let closed = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                return Err(broken(closed));
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => return Err(broken(error)),
        }
    }
}

fn bad(why: &'static str) -> Failed {
    Failed::Error {
        error: UpstreamError::Response(why),
        unsent: false,
    }
}

/// Reads the next body bytes from the member into `upstream` (emptied first) within `read`,
/// into room for `room` of them: how many (0: the member closed), `None` on a failure or when
/// the read timed out.
async fn read_body(
    (stream, watch): (&mut TcpStream, &mut Watch),
    upstream: &mut Vec<u8>,
    room: usize,
    read: Duration,
) -> Option<usize> {
    use bytes::BufMut;
    upstream.clear();
    upstream.reserve(room);
    let deadline = tokio::time::Instant::now() + read;
    let mut limited = upstream.limit(room);
    watch
        .within(deadline, stream.read_buf(&mut limited))
        .await?
        .ok()
}

/// Room for a read of the body's `left` bytes: one byte more, so that a member that sends more
/// than it announced is seen, and so that a read that takes the rest is a short read, which
/// tells tokio the socket is drained (the idle connection's check then costs no system call).
fn room_for(left: u64) -> usize {
    usize::try_from(left).map_or(BODY_ROOM, |left| left.saturating_add(1).min(BODY_ROOM))
}

/// Appends to `upstream` what the member has already sent, without waiting: the body's `left`
/// bytes at most (one more is a fault of the member's), and no more once `upstream` holds
/// [`GATHER`]. How many bytes it added. A response that arrived in pieces then goes to the
/// client in one write, as one segment, instead of a write per piece: with 16 KiB responses on
/// new connections that was a second write, a second segment and its acknowledgement per
/// request. A failure or the member's close is left for the next blocking read to see.
fn gather(stream: &mut TcpStream, upstream: &mut Vec<u8>, left: u64) -> u64 {
    use bytes::BufMut;
    use std::future::Future;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut added = 0u64;
    while added < left {
        let room = room_for(left - added).min(GATHER.saturating_sub(upstream.len()));
        if room == 0 {
            break;
        }
        upstream.reserve(room);
        let mut limited = upstream.limit(room);
        let read = std::pin::pin!(stream.read_buf(&mut limited));
        match read.poll(&mut cx) {
            std::task::Poll::Ready(Ok(n)) if n > 0 => added += n as u64,
            _ => break,
        }
    }
    added
}

/// Writes `head` and then `body` to `io`, in one vectored write where the stream takes one:
/// the body is not copied into the head's buffer.
async fn write_two<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    head: &[u8],
    body: &[u8],
) -> std::io::Result<()> {
    use bytes::Buf;
    let mut both = Buf::chain(head, body);
    io.write_all_buf(&mut both).await
}

/// Writes the client's head in `client.out` with the `have` body bytes at `start` in
/// `client.upstream`, then copies `left` more body bytes: how many body bytes were sent (`None`
/// on a failure), and whether the member sent nothing after the body (else its connection is
/// not used again). What the member has sent already is gathered (see [`gather`]) before each
/// write.
async fn copy_length<IO: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Client<IO>,
    stream: &mut TcpStream,
    (start, have): (usize, usize),
    mut left: u64,
    read: Duration,
) -> (Option<u64>, bool) {
    let Client {
        io,
        out,
        upstream,
        watch,
        ..
    } = client;
    let mut clean = upstream.len() == start + have;
    upstream.truncate(start + have);
    let mut n = gather(stream, upstream, left);
    let mut sent = 0u64;
    let mut from = start;
    loop {
        if n > left {
            // The member sent more than it announced: forward the body, drop the rest.
            clean = false;
            upstream.truncate(upstream.len() - usize::try_from(n - left).unwrap_or(0));
            n = left;
        }
        left -= n;
        let part = &upstream[from..];
        let written = if from == start {
            write_two(io, out, part).await
        } else {
            io.write_all(part).await
        };
        if written.is_err() {
            return (None, false);
        }
        sent += part.len() as u64;
        if left == 0 {
            return (Some(sent), clean);
        }
        from = 0;
        match read_body((stream, watch), upstream, room_for(left), read).await {
            Some(0) | None => return (None, false),
            Some(got) => n = got as u64 + gather(stream, upstream, left.saturating_sub(got as u64)),
        }
    }
}

/// Writes `client.out`, then forwards the chunked body that starts at `start` in
/// `client.upstream`, chunks as they come, to its end: the bytes sent, and whether the body
/// ended where the upstream's bytes did (so that the connection can be reused).
async fn copy_chunked<IO: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Client<IO>,
    stream: &mut TcpStream,
    start: usize,
    read: Duration,
) -> (Option<u64>, bool) {
    let Client {
        io,
        out,
        upstream,
        watch,
        ..
    } = client;
    let mut scanner = Chunked::new();
    let mut sent = 0u64;
    let mut at = start;
    loop {
        let part = &upstream[at..];
        let (take, ended) = match scanner.feed(part) {
            Ok(Some(end)) => (end, true),
            Ok(None) => (part.len(), false),
            Err(_) => return (None, false),
        };
        let extra = part.len() > take;
        if write_two(io, out, &part[..take]).await.is_err() {
            return (None, false);
        }
        sent += take as u64;
        out.clear();
        if ended {
            return (Some(sent), !extra);
        }
        at = 0;
        match read_body((stream, watch), upstream, BODY_ROOM, read).await {
            Some(n) if n > 0 => {}
            _ => return (None, false),
        }
    }
}

/// Writes `client.out` and the body bytes from `start` in `client.upstream`, then copies
/// what the upstream sends until it closes.
async fn copy_until_close<IO: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Client<IO>,
    stream: &mut TcpStream,
    start: usize,
    read: Duration,
) -> Option<u64> {
    let Client {
        io,
        out,
        upstream,
        watch,
        ..
    } = client;
    write_two(io, out, &upstream[start..]).await.ok()?;
    let mut sent = (upstream.len() - start) as u64;
    loop {
        let n = read_body((stream, watch), upstream, BODY_ROOM, read).await?;
        if n == 0 {
            return Some(sent);
        }
        io.write_all(&upstream[..n]).await.ok()?;
        sent += n as u64;
    }
}
