//! One client connection: routing and forwarding each of its requests.

use super::error::ProxyError;
use super::gate::Gate;
use super::headers::{Forwarded, Scheme, add_server, strip_hop_by_hop};
use super::tries::{
    connect_timeout, is_idempotent, max_body, may_retry, read_timeout, send_timeout, source_allowed,
};
use super::tunnel::is_upgrade;
use super::{Phase, Proxy, ProxyBody};
use crate::access::ensure_request_id;
use crate::access::{Asked, Client as LoggedClient, Entry, Logged, RequestId, X_REQUEST_ID};
use crate::trace::Traced;

use crate::compress::{self, Compressible};
use crate::limits::{Activity, Ambiguous, ClientBody, Fault, Framing, Inbound, Tracked, Watched};
use crate::metrics::PoolMetrics;
use crate::ratelimit::InProgress;
use crate::route::{Outcome, PoolState, RequestInfo, RouteOptions, Target, normalize_host};
use crate::upstream::{Endpoint, SendFailed, UpstreamError};
use bytes::Bytes;
use http::header::{
    ALT_SVC, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderValue, LOCATION, SET_COOKIE,
    STRICT_TRANSPORT_SECURITY, TE, WWW_AUTHENTICATE,
};
use http::uri::{self, Uri};
use http::{Request, Response, StatusCode, Version};
use http_body_util::{Either, Full};
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::gauge::Gauge;
use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;

/// The W3C trace context field (`--otlp-endpoint`).
static TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// The client a request from a trusted proxy names (`--trusted-proxies`), in its extensions.
#[derive(Debug, Clone, Copy)]
struct Client(IpAddr);

/// What routing decides for a response besides its body: the rate limiter's place, held
/// until the body ends; `Strict-Transport-Security`; the codings it may be compressed with.
struct Finish {
    held: Option<InProgress>,
    hsts: Option<HeaderValue>,
    compression: portico_model::Compression,
}

/// Where the route table sends a request.
enum Routed {
    /// To the pool, with the route's options if it has any.
    Pool(Arc<PoolState>, Option<Arc<RouteOptions>>),
    RedirectToHttps(u16),
    RedirectToUrl(u16, Arc<str>),
    Redirect(Arc<portico_model::Redirect>),
}

/// What every request of one connection shares.
pub(super) struct Conn {
    pub(super) proxy: Arc<Proxy>,
    pub(super) forwarded: Forwarded,
    /// The client's address (the TCP peer), for hashing on it and as allowed source ranges
    /// see it.
    pub(super) peer: IpAddr,
    activity: Arc<Activity>,
    /// Tunnels opened by upgrades, run by the connection's task.
    tunnels: mpsc::UnboundedSender<Tunnel>,
    /// The client speaks HTTP/2 (seen on its first request).
    h2: AtomicBool,
    /// Wakes the connection to send GOAWAY: an HTTP/2 request arrived while draining.
    goaway: Notify,
    /// Requests begun so far: the ordinal of the next one.
    requests: AtomicU64,
    /// Which HTTP/1 request declared both Content-Length and Transfer-Encoding.
    ambiguous: Arc<Ambiguous>,
}

impl Proxy {
    /// Serves one accepted connection (HTTP/1.1 with keep-alive and upgrades, or HTTP/2 with
    /// prior knowledge and extended CONNECT), then the tunnels its upgrades opened. `scheme`
    /// is what the client used: a TLS listener passes `Scheme::Https`.
    pub async fn serve_connection<IO>(self: Arc<Self>, io: IO, peer: SocketAddr, scheme: Scheme)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let _active = Active::new(self.metrics.connections());
        // The own HTTP/1.1 path first; hyper takes over from the first request it declines.
        let (io, ahead) = if self.own_http1.load(Ordering::Relaxed) {
            match self.serve_own(io, peer, scheme).await {
                Some(declined) => declined,
                None => return,
            }
        } else {
            (io, Vec::new())
        };
        // Boxed: hyper's connection makes this future kilobytes long, and a connection that
        // stays on the own path should not allocate (and touch) room for it.
        Box::pin(self.serve_hyper(io, ahead, peer, scheme)).await;
    }

    /// Serves `io` with hyper, `ahead` being bytes already read from it, then the tunnels its
    /// upgrades opened.
    async fn serve_hyper<IO>(
        self: Arc<Self>,
        io: IO,
        ahead: Vec<u8>,
        peer: SocketAddr,
        scheme: Scheme,
    ) where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (conn, mut opened) = Conn::new(self.clone(), peer, scheme);
        let activity = conn.activity.clone();
        let framing = Framing::new(super::head_buffer(&self.limits), conn.ambiguous.clone());
        let handler = conn.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let conn = handler.clone();
            let in_flight = conn.activity.request();
            let ordinal = conn.next_ordinal();
            async move {
                let version = req.version();
                let mut response = conn.handle(req.map(Inbound::Hyper), ordinal).await;
                conn.ask_to_close(version, &mut response);
                Ok::<_, Infallible>(response.map(|body| Tracked::new(body, in_flight)))
            }
        });
        let io = TokioIo::new(Watched::with_ahead(io, activity.clone(), framing, ahead));
        let served = self.server.serve_connection_with_upgrades(io, service);
        tokio::pin!(served);
        let mut phase = self.phase.subscribe();
        let (mut done, mut phase_open) = (false, true);
        let mut tunnels = JoinSet::new();
        let gate = Gate::new();
        loop {
            let event = {
                // The rare events, behind the gate: polled only when one of them woke.
                let mut expired = pin!(activity.expired(&self.limits));
                let mut changed = pin!(phase.changed());
                let mut goaway = pin!(conn.goaway.notified());
                let mut rare = pin!(poll_fn(|cx| {
                    if let Poll::Ready(Some(tunnel)) = opened.poll_recv(cx) {
                        return Poll::Ready(Event::Opened(tunnel));
                    }
                    if !tunnels.is_empty() && tunnels.poll_join_next(cx).is_ready() {
                        return Poll::Ready(Event::TunnelEnded);
                    }
                    if done {
                        return Poll::Pending;
                    }
                    if expired.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Event::Expired);
                    }
                    if phase_open && let Poll::Ready(changed) = changed.as_mut().poll(cx) {
                        return Poll::Ready(Event::Phase(changed.is_ok()));
                    }
                    goaway.as_mut().poll(cx).map(|()| Event::GoAway)
                }));
                gate.open();
                poll_fn(|cx| {
                    if !done && let Poll::Ready(result) = served.as_mut().poll(cx) {
                        return Poll::Ready(Event::Served(result.err()));
                    }
                    gate.poll(cx, rare.as_mut())
                })
                .await
            };
            match event {
                Event::Served(error) => {
                    done = true;
                    if let Some(error) = error {
                        tracing::debug!(%peer, %error, "client connection ended with an error");
                    }
                }
                Event::Opened(tunnel) => {
                    tunnels.spawn(tunnel);
                }
                Event::TunnelEnded => {}
                Event::Expired => {
                    tracing::debug!(%peer, "closing a connection idle past its deadline");
                    return;
                }
                Event::Phase(open) => {
                    phase_open = open;
                    let now = *phase.borrow_and_update();
                    let h2 = conn.h2.load(Ordering::Relaxed);
                    if now == Phase::Closing || (now == Phase::Draining && h2) {
                        served.as_mut().graceful_shutdown();
                    }
                }
                Event::GoAway => served.as_mut().graceful_shutdown(),
            }
            if done && tunnels.is_empty() && opened.is_empty() {
                return;
            }
        }
    }
}

/// What a client connection's task woke for.
enum Event {
    /// hyper's connection ended (with its error, if any).
    Served(Option<Box<dyn std::error::Error + Send + Sync>>),
    Opened(Tunnel),
    TunnelEnded,
    /// Idle past its deadline.
    Expired,
    /// The proxy's phase changed (`false`: and can change no more).
    Phase(bool),
    GoAway,
}

/// A tunnel (an upgraded connection to its upstream) to run beside its client connection.
pub(super) type Tunnel = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Conn {
    /// What the requests of a connection from `peer` share, and where the tunnels its
    /// upgrades open arrive.
    pub(super) fn new(
        proxy: Arc<Proxy>,
        peer: SocketAddr,
        scheme: Scheme,
    ) -> (Arc<Conn>, mpsc::UnboundedReceiver<Tunnel>) {
        let client = HeaderValue::from_str(&peer.ip().to_canonical().to_string());
        let client = client.unwrap_or(HeaderValue::from_static("unknown"));
        let (tunnels, opened) = mpsc::unbounded_channel();
        let conn = Arc::new(Conn {
            proxy,
            forwarded: Forwarded { client, scheme },
            peer: peer.ip().to_canonical(),
            activity: Activity::new(),
            tunnels,
            h2: AtomicBool::new(false),
            goaway: Notify::new(),
            requests: AtomicU64::new(0),
            ambiguous: Ambiguous::new(),
        });
        (conn, opened)
    }

    /// The ordinal of the request beginning now.
    pub(super) fn next_ordinal(&self) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed)
    }

    /// While draining: `Connection: close` on an HTTP/1 response (not on a switch of
    /// protocols), GOAWAY on an HTTP/2 connection.
    fn ask_to_close<B>(&self, version: Version, response: &mut Response<B>) {
        if version == Version::HTTP_2 {
            self.h2.store(true, Ordering::Relaxed);
        }
        if !self.proxy.draining() {
            return;
        }
        if version == Version::HTTP_2 {
            self.goaway.notify_one();
        } else if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            let close = HeaderValue::from_static("close");
            response.headers_mut().insert(CONNECTION, close);
        }
    }

    /// Runs `tunnel` beside the connection, counted as a request in flight (so that an
    /// HTTP/2 connection carrying it has no idle deadline).
    pub(super) fn open(&self, tunnel: impl Future<Output = ()> + Send + 'static) {
        let in_flight = self.activity.request();
        let _ = self.tunnels.send(Box::pin(async move {
            tunnel.await;
            drop(in_flight);
        }));
    }

    /// Gives the request its id, answers it, and logs it once the response body is done.
    pub(super) async fn handle(
        &self,
        mut req: Request<Inbound>,
        ordinal: u64,
    ) -> Response<Logged<Compressible<ProxyBody>>> {
        ensure_request_id(req.headers_mut());
        let trusted = self.proxy.limits.trusted_proxies;
        if !trusted.is_empty() {
            let named = req
                .headers()
                .get_all(&super::headers::X_FORWARDED_FOR)
                .iter();
            if let Some(client) = super::headers::forwarded_client(self.peer, named, trusted) {
                req.extensions_mut().insert(Client(client));
            }
        }
        let traced = self
            .proxy
            .tracing
            .map(|tracing| self.trace(tracing, &mut req));
        let trace_id = traced.as_ref().map(Traced::trace_id);
        let mut entry = self.begin_entry(&req, trace_id);
        entry.trace(traced.and_then(|t| t.span));
        let https = self.forwarded.scheme == Scheme::Https;
        let mut finish = Finish {
            held: None,
            hsts: self.proxy.hsts.clone().filter(|_| https),
            compression: self.proxy.limits.compression,
        };
        let accept = compress::accepted(req.headers());
        let head = req.method() == http::Method::HEAD;
        let mut response = (self.respond(req, ordinal, &mut entry, &mut finish)).await;
        add_server(response.headers_mut(), self.proxy.limits.server_header);
        if let Some(hsts) = finish.hsts {
            let headers = response.headers_mut();
            headers.entry(STRICT_TRANSPORT_SECURITY).or_insert(hsts);
        }
        if let Some(alt_svc) = self.proxy.alt_svc().filter(|_| https) {
            let headers = response.headers_mut();
            headers.entry(ALT_SVC).or_insert_with(|| alt_svc.clone());
        }
        entry.status(response.status().as_u16());
        let response = compress::respond(response, &accept, finish.compression, head);
        let held = finish.held;
        response.map(|body| Logged::new(body, entry, held))
    }

    /// The request's trace (a child of its `traceparent`, when valid), whose context
    /// replaces that field for the member; `tracestate` goes on as it came.
    fn trace(&self, tracing: &crate::trace::Tracing, req: &mut Request<Inbound>) -> Traced {
        let named = req.extensions().get::<Client>().map(|c| c.0.to_string());
        let host = match req.uri().authority() {
            Some(authority) => without_userinfo(authority).as_bytes(),
            None => req.headers().get(HOST).map_or(&b""[..], |h| h.as_bytes()),
        };
        let asked = crate::trace::Asked {
            method: req.method().as_str(),
            path: req.uri().path().as_bytes(),
            host,
            scheme: self.forwarded.scheme.as_str(),
            client: named
                .as_ref()
                .map_or(self.forwarded.client.as_bytes(), |n| n.as_bytes()),
            peer: self.peer,
        };
        let parent = req.headers().get(&TRACEPARENT).map(HeaderValue::as_bytes);
        let traced = tracing.begin(parent, &asked);
        if let Ok(value) = HeaderValue::from_bytes(&traced.traceparent) {
            req.headers_mut().insert(&TRACEPARENT, value);
        }
        traced
    }

    /// The access log line's start: what the client asked for (the path without its query,
    /// which may carry tokens).
    fn begin_entry(&self, req: &Request<Inbound>, trace_id: Option<&[u8]>) -> Entry {
        let log = &self.proxy.access;
        if !log.is_on() {
            return Entry::default();
        }
        let request_id = req.headers().get(&X_REQUEST_ID).map(HeaderValue::as_bytes);
        let host = match req.uri().authority() {
            Some(authority) => without_userinfo(authority).as_bytes(),
            None => req.headers().get(HOST).map_or(&b""[..], |h| h.as_bytes()),
        };
        let named = req.extensions().get::<Client>().map(|c| c.0.to_string());
        let asked = Asked {
            started: std::time::Instant::now(),
            request_id: RequestId::Sent(request_id.unwrap_or_default()),
            client: LoggedClient::Text(
                named
                    .as_ref()
                    .map_or(self.forwarded.client.as_bytes(), |n| n.as_bytes()),
            ),
            host,
            method: req.method().as_str(),
            path: req.uri().path().as_bytes(),
            trace_id,
        };
        Entry::begin(log, &asked)
    }

    async fn respond(
        &self,
        req: Request<Inbound>,
        ordinal: u64,
        entry: &mut Entry,
        finish: &mut Finish,
    ) -> Response<ProxyBody> {
        if let Err(error) = self.admit(&req, ordinal) {
            return rescue(self.proxy.metrics.unrouted(), &error);
        }
        let (pool, options) = match self.route(&req) {
            Ok(Routed::Pool(pool, options)) => (pool, options),
            Ok(Routed::RedirectToHttps(status)) => return self.redirect(&req, status),
            Ok(Routed::RedirectToUrl(status, url)) => {
                return self.redirect_to_url(&req, status, &url);
            }
            Ok(Routed::Redirect(redirect)) => return self.request_redirect(&req, &redirect),
            Err(error) => return rescue(self.proxy.metrics.unrouted(), &error),
        };
        entry.pool(&pool);
        let own_hsts = options.as_deref().and_then(|o| o.hsts.as_ref());
        if let (Some(own), Scheme::Https) = (own_hsts, self.forwarded.scheme) {
            finish.hsts.clone_from(own);
        }
        if let Some(own) = options.as_deref().and_then(|o| o.compression) {
            finish.compression = own;
        }
        let limiter = options.as_deref().and_then(|o| o.rate_limit.as_ref());
        if let Some(limiter) = limiter {
            match limiter.admit(self.client_of(&req), std::time::Instant::now()) {
                Ok(place) => finish.held = place,
                Err(()) => {
                    let error = ProxyError::Limited(self.proxy.limits.limit_status);
                    return rescue(&pool.metrics, &error);
                }
            }
        }
        if let Err(error) = self.admit_to(&pool, &req) {
            return rescue(&pool.metrics, &error);
        }
        let mut req = req;
        let options = options.as_deref();
        let cors = super::options::cors_origin(options, &req);
        if let (Some(options), Some(origin)) = (options, &cors)
            && req.method() == http::Method::OPTIONS
        {
            let response = super::options::preflight(options, origin.clone(), req.headers());
            pool.metrics.record(response.status());
            return response;
        }
        if let Some(basic) = options.and_then(|o| o.basic_auth.as_ref())
            && let Err(status) = basic.check(req.headers()).await
        {
            let mut response = rescue(&pool.metrics, &ProxyError::Auth(status));
            if status == 401 {
                (response.headers_mut()).insert(WWW_AUTHENTICATE, basic.challenge.clone());
            }
            return response;
        }
        if let Some(auth) = options.and_then(|o| o.external_auth.as_ref())
            && let Err(response) = self.authorize(auth.as_ref(), &pool, &mut req).await
        {
            return response;
        }
        let errors = options.and_then(|o| o.errors.as_ref());
        let asked = errors.map(|_| super::errors::Asked::of(&req));
        if let Some(options) = options {
            super::options::before(options, &mut req);
        }
        let filters = options.and_then(|o| o.filters.as_ref());
        if let Some(filters) = filters {
            super::filters::before(filters, &mut req);
            super::filters::mirror(self, filters, &req);
        }
        // ingress-nginx's `default-backend`: it answers for a pool without ready members.
        let fallback = errors.filter(|e| e.unavailable && pool.is_empty());
        if let (Some(errors), Some(asked)) = (fallback, &asked) {
            super::errors::mark(errors, asked, 503, req.headers_mut());
        }
        let to = fallback.map_or(&pool, |e| &e.pool);
        let forwarded = if is_upgrade(&req) {
            // Boxed: rare, and its state would lengthen every request's future.
            Box::pin(self.upgrade(to, req)).await
        } else if let Some(limit) = filters.and_then(|f| f.request_timeout) {
            let forward = self.forward(to, req, entry, options);
            let late = ProxyError::RequestTimeout { pool: to.id() };
            (tokio::time::timeout(limit, forward).await).unwrap_or(Err(late))
        } else {
            self.forward(to, req, entry, options).await
        };
        let mut response = match forwarded {
            Ok(response) => {
                to.metrics.record(response.status());
                response
            }
            Err(error) => rescue(&to.metrics, &error),
        };
        if let (Some(errors), Some(asked), None) = (errors, &asked, fallback)
            && errors.intercepts(response.status().as_u16())
        {
            response = Box::pin(self.error_page(errors, asked, response, entry)).await;
        }
        if let (Some(options), Some(origin)) = (options, cors) {
            super::options::cors_fields(options, origin, response.headers_mut());
        }
        if let Some(filters) = filters {
            super::filters::after(filters, response.headers_mut());
        }
        response
    }

    /// The client `req` is from: the address a trusted proxy named for it, else the peer.
    pub(super) fn client_of<B>(&self, req: &Request<B>) -> IpAddr {
        req.extensions().get::<Client>().map_or(self.peer, |c| c.0)
    }

    /// What is refused before routing, as haproxy's `http-request deny` rules refuse it: a
    /// request declaring both Content-Length and Transfer-Encoding (haproxy's parser serves
    /// it by its chunks and closes), naming more than one host, a path with dot segments.
    fn admit(&self, req: &Request<Inbound>, ordinal: u64) -> Result<(), ProxyError> {
        if self.ambiguous.is(ordinal) {
            return Err(ProxyError::AmbiguousLength);
        }
        if names_two_hosts(req) {
            return Err(ProxyError::AmbiguousHost);
        }
        if has_dot_segment(req.uri().path()) {
            return Err(ProxyError::DotSegment);
        }
        Ok(())
    }

    /// What the pool refuses before its members are asked: a client outside its allowed
    /// sources (403), a declared body over its limit (413; the pool's `proxy-body-size`, else
    /// `--max-body-bytes`).
    fn admit_to(&self, pool: &PoolState, req: &Request<Inbound>) -> Result<(), ProxyError> {
        if !source_allowed(pool, self.client_of(req)) {
            return Err(ProxyError::SourceNotAllowed { pool: pool.id() });
        }
        let max = max_body(pool, &self.proxy.limits);
        let declared = req.headers().get(CONTENT_LENGTH);
        let declared = declared.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if max > 0 && declared.is_some_and(|length| length > max) {
            return Err(ProxyError::TooLarge);
        }
        Ok(())
    }

    /// One table load, one lookup on the routes of the connection's scheme: where this
    /// request goes.
    fn route(&self, req: &Request<Inbound>) -> Result<Routed, ProxyError> {
        let host = request_host(req).ok_or(ProxyError::MissingHost)?;
        let path = req.uri().path();
        if !path.starts_with('/') {
            return Err(ProxyError::BadTarget);
        }
        let table = self.proxy.table.load();
        let request = crate::route::RouteRequest {
            method: req.method().as_str(),
            query: req.uri().query(),
            headers: req.headers(),
        };
        let action = super::target(&table, self.forwarded.scheme, host, path, &request);
        match action.map(crate::route::Action::target) {
            Some(Target::Pool(pool)) => Ok(Routed::Pool(pool.clone(), None)),
            Some(Target::Options(pool, options)) => {
                Ok(Routed::Pool(pool.clone(), Some(options.clone())))
            }
            Some(Target::Reject(status)) => Err(ProxyError::Rejected(*status)),
            Some(Target::RedirectToHttps(status)) => Ok(Routed::RedirectToHttps(*status)),
            Some(Target::RedirectToUrl(status, url)) => {
                Ok(Routed::RedirectToUrl(*status, url.clone()))
            }
            Some(Target::Redirect(redirect)) => Ok(Routed::Redirect(redirect.clone())),
            None => Err(ProxyError::NoRoute),
        }
    }

    /// `status` with `Location: https://host[:port]/path?query`, the port being the HTTPS
    /// listener's unless it is 443.
    fn redirect(&self, req: &Request<Inbound>, status: u16) -> Response<ProxyBody> {
        let unrouted = self.proxy.metrics.unrouted();
        let host = request_host(req).map(normalize_host).unwrap_or_default();
        let port = self.proxy.https_port();
        let port = if port == 443 {
            String::new()
        } else {
            format!(":{port}")
        };
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let location = HeaderValue::from_str(&format!("https://{host}{port}{target}"));
        let (Ok(location), false) = (location, host.is_empty()) else {
            return rescue(unrouted, &ProxyError::MissingHost);
        };
        redirect_response(unrouted, status, location)
    }

    /// `status` with `Location: url`; a `url` starting with `/` on the request's own scheme
    /// and host (ingress-nginx's `app-root`: `$scheme://$http_host<path>`).
    fn redirect_to_url(
        &self,
        req: &Request<Inbound>,
        status: u16,
        url: &str,
    ) -> Response<ProxyBody> {
        let unrouted = self.proxy.metrics.unrouted();
        let location = if url.starts_with('/') {
            let Some(host) = request_host(req).filter(|h| !h.is_empty()) else {
                return rescue(unrouted, &ProxyError::MissingHost);
            };
            let scheme = self.forwarded.scheme.as_str();
            HeaderValue::from_str(&format!("{scheme}://{host}{url}"))
        } else {
            HeaderValue::from_str(url)
        };
        match location {
            Ok(location) => redirect_response(unrouted, status, location),
            Err(_) => rescue(unrouted, &ProxyError::BadTarget),
        }
    }

    /// A Gateway API RequestRedirect: `Location` from the request's host, path and query as
    /// the redirect changes them.
    fn request_redirect(
        &self,
        req: &Request<Inbound>,
        redirect: &portico_model::Redirect,
    ) -> Response<ProxyBody> {
        let unrouted = self.proxy.metrics.unrouted();
        let host = request_host(req).map(normalize_host).unwrap_or_default();
        if host.is_empty() && redirect.hostname.is_none() {
            return rescue(unrouted, &ProxyError::MissingHost);
        }
        let uri = req.uri();
        let origin = portico_model::Origin {
            scheme: self.forwarded.scheme.as_str(),
            host: &host,
            port: request_host(req).and_then(host_port),
        };
        let location = redirect.location(&origin, uri.path(), uri.query());
        match HeaderValue::from_str(&location) {
            Ok(location) => redirect_response(unrouted, redirect.status, location),
            Err(_) => rescue(unrouted, &ProxyError::BadTarget),
        }
    }

    pub(super) async fn forward(
        &self,
        pool: &PoolState,
        req: Request<Inbound>,
        entry: &mut Entry,
        options: Option<&RouteOptions>,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let no_member = || ProxyError::NoReadyMember { pool: pool.id() };
        let host = host_value(&req).ok_or(ProxyError::MissingHost)?;
        let client = self.client_of(&req);
        let request = RequestInfo {
            headers: req.headers(),
            uri: req.uri(),
            client,
        };
        let pick = pool.choose(&request, &[]).ok_or_else(no_member)?;
        let limits = &self.proxy.limits;
        let (mut parts, body) = req.into_parts();
        let trailers = wants_trailers(&parts.headers);
        self.forwarded.apply(&mut parts.headers, host.clone());
        if let Some(vhost) = options.and_then(|o| o.upstream_host.clone()) {
            parts.headers.insert(HOST, vhost);
        }
        // A pool's members all speak its protocol: the first pick's stands for every try.
        if pick.endpoint().is_h2c() {
            to_h2c(&mut parts, &host, pick.endpoint(), trailers);
        } else {
            origin_form(&mut parts.uri);
            parts.version = Version::HTTP_11;
        }
        let max_tries = pool.max_tries();
        // What a try that failed after sending needs to send the request again: an idempotent
        // request without a body is rebuilt from its head (bodies are streamed, not kept).
        let replay =
            (max_tries > 1 && is_idempotent(parts.method.as_str()) && body.is_end_stream())
                .then(|| Replay::new(&parts));
        let (body, mut fault) = ClientBody::new(body, limits, max_body(pool, limits));
        let mut req = Request::from_parts(parts, body);
        let backend = options.and_then(|o| o.filters.as_ref()?.backend_timeout);
        let read = backend.unwrap_or_else(|| read_timeout(pool, limits));
        let timeouts = (connect_timeout(pool), read, send_timeout(pool));
        lock(&pool.budget).request(std::time::Instant::now());
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut pick = pick;
        loop {
            let started = Instant::now();
            let endpoint = pick.endpoint().clone();
            entry.upstream(endpoint.addr(), &fault);
            let upstream = endpoint.addr();
            let failed = match try_once(&endpoint, req, &fault, timeouts).await {
                Ok(response) => {
                    let latency = started.elapsed();
                    pool.metrics.observe_latency(latency);
                    entry.answered(latency);
                    let outcome = if response.status().is_server_error() {
                        Outcome::Status5xx { latency }
                    } else {
                        Outcome::Success { latency }
                    };
                    let set_cookie = pick.set_cookie().cloned();
                    pool.record(pick, outcome);
                    let (mut parts, body) = response.into_parts();
                    strip_hop_by_hop(&mut parts.headers);
                    if let Some(cookie) = set_cookie {
                        parts.headers.append(SET_COOKIE, cookie);
                    }
                    // The client's hop is ours: an HTTP/1.0 or HTTP/2 upstream does not change it.
                    parts.version = Version::HTTP_11;
                    return Ok(Response::from_parts(
                        parts,
                        Either::Left(body.read_timeout(read)),
                    ));
                }
                Err(Try::TimedOut) => {
                    let latency = started.elapsed();
                    pool.record(pick, Outcome::Timeout { latency });
                    let pool = pool.id();
                    return Err(ProxyError::UpstreamTimeout { pool, upstream });
                }
                Err(Try::Failed(failed)) => failed,
            };
            let SendFailed { error, unsent } = *failed;
            let give_up = |source| match fault.get() {
                Some(fault) => ProxyError::Body(fault),
                None => ProxyError::Upstream {
                    pool: pool.id(),
                    upstream,
                    source,
                },
            };
            // The client's body failed: not the member's fault (the pick is dropped).
            if fault.get().is_some() {
                return Err(give_up(error));
            }
            // Every failed try counts for the member's passive health, retried or not.
            pool.record(pick, failure_outcome(&error));
            let again = match unsent {
                Some(unsent) => Some((unsent, fault.clone())),
                None if may_retry(false, replay.is_some(), &error) => {
                    replay.as_ref().map(|r| r.request(limits))
                }
                None => None,
            };
            tried.push(upstream);
            let Some((again, again_fault)) = again.filter(|_| tried.len() < max_tries) else {
                return Err(give_up(error));
            };
            // The next member by the pool's algorithm (affinity, hash, least request), never
            // one this request tried nor one out of rotation.
            let request = RequestInfo {
                headers: again.headers(),
                uri: again.uri(),
                client,
            };
            let Some(next) = pool.choose(&request, &tried) else {
                return Err(give_up(error));
            };
            if !lock(&pool.budget).try_retry(std::time::Instant::now()) {
                pool.metrics.budget_exhausted();
                return Err(give_up(error));
            }
            tracing::debug!(%upstream, next = %next.addr(), %error, "trying another member");
            pool.metrics.retried();
            (req, fault, pick) = (again, again_fault, next);
        }
    }
}

/// One try on `endpoint`: its response head, a timeout (no head within `read` after the
/// request body ended), or a failure.
async fn try_once(
    endpoint: &Arc<Endpoint>,
    req: Request<ClientBody>,
    fault: &Fault,
    (connect, read, send_timeout): (Duration, Duration, Duration),
) -> Result<Response<crate::upstream::UpstreamBody>, Try> {
    // Pinned where they are: `select!` would otherwise move them into its own state.
    let send = pin!(endpoint.send(req, connect, send_timeout));
    // The upstream's time to answer counts from the end of the request body.
    let late = pin!(async {
        fault.ended().await;
        tokio::time::sleep(read).await;
    });
    tokio::select! {
        sent = send => sent.map_err(|failed| Try::Failed(Box::new(failed))),
        () = late => Err(Try::TimedOut),
    }
}

/// How one try failed.
enum Try {
    TimedOut,
    Failed(Box<SendFailed>),
}

/// The head of a request without a body, to send it again after a failed try.
struct Replay {
    method: http::Method,
    uri: Uri,
    version: Version,
    headers: http::HeaderMap,
}

impl Replay {
    fn new(parts: &http::request::Parts) -> Self {
        Replay {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            headers: parts.headers.clone(),
        }
    }

    fn request(&self, limits: &portico_model::Limits) -> (Request<ClientBody>, Arc<Fault>) {
        let (body, fault) = ClientBody::empty(limits);
        let mut req = Request::new(body);
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.version_mut() = self.version;
        *req.headers_mut() = self.headers.clone();
        (req, fault)
    }
}

pub(super) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A redirect: `status` (a redirect code, 308 when it is not a status), `Location`, a short
/// text body.
pub(super) fn redirect_response(
    metrics: &PoolMetrics,
    status: u16,
    location: HeaderValue,
) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::PERMANENT_REDIRECT);
    let reason = status.canonical_reason().unwrap_or("Redirect");
    let body = Bytes::from(format!("{} {reason}\n", status.as_str()));
    let mut response = Response::new(Either::Right(Full::new(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(LOCATION, location);
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    headers.insert(CONTENT_TYPE, plain);
    metrics.record(status);
    response
}

/// The single place where errors become responses.
pub(super) fn rescue(metrics: &PoolMetrics, error: &ProxyError) -> Response<ProxyBody> {
    error.log();
    let response = error.response();
    metrics.record(response.status());
    response
}

/// The host the client asked for: the URI authority (HTTP/2, absolute-form) or `Host`.
///
/// An empty `Host` (allowed by RFC 9112 when the target has no authority) and an HTTP/1.0
/// request without one route as host-less, as nginx does; an HTTP/1.1 request without `Host`
/// is a 400 (RFC 9112 section 3.2), and so is a `Host` that is not visible ASCII.
pub(super) fn request_host<B>(req: &Request<B>) -> Option<&str> {
    if let Some(authority) = req.uri().authority() {
        return Some(without_userinfo(authority));
    }
    match req.headers().get(HOST) {
        Some(host) => host.to_str().ok(),
        None if req.version() <= Version::HTTP_10 => Some(""),
        None => None,
    }
}

/// The `Host` header value to forward: the client's own, else one made from the authority,
/// else empty (an HTTP/1.0 client that sent none).
pub(super) fn host_value<B>(req: &Request<B>) -> Option<HeaderValue> {
    if let Some(host) = req.headers().get(HOST) {
        return Some(host.clone());
    }
    match req.uri().authority() {
        Some(authority) => HeaderValue::from_str(without_userinfo(authority)).ok(),
        None => Some(HeaderValue::from_static("")),
    }
}

/// Two `Host` fields, a `Host` that is a list, or an authority (absolute-form target, HTTP/2
/// `:authority`) that differs from `Host`: which host the request is for is not clear, and
/// the backend might see another than the one it was routed on.
fn names_two_hosts<B>(req: &Request<B>) -> bool {
    let mut hosts = req.headers().get_all(HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() || host.is_some_and(|h| h.as_bytes().contains(&b',')) {
        return true;
    }
    match (req.uri().authority(), host) {
        (Some(authority), Some(host)) => !host
            .as_bytes()
            .eq_ignore_ascii_case(without_userinfo(authority).as_bytes()),
        _ => false,
    }
}

/// Whether a segment of `path` is a dot segment. Most paths have no `.` and no `%` at all,
/// which one scan tells.
pub(super) fn has_dot_segment(path: &str) -> bool {
    let suspect = path.bytes().any(|b| b == b'.' || b == b'%');
    suspect && path.split('/').any(is_dot_segment)
}

/// `.` or `..`, any dot written plain or as `%2e`: a segment that would move the path
/// elsewhere once resolved, so that the rule matched and the resource served could differ.
fn is_dot_segment(segment: &str) -> bool {
    let mut rest = segment.as_bytes();
    let mut dots = 0;
    while !rest.is_empty() {
        rest = match rest {
            [b'.', tail @ ..] => tail,
            [b'%', b'2', e, tail @ ..] if e.eq_ignore_ascii_case(&b'e') => tail,
            _ => return false,
        };
        dots += 1;
    }
    matches!(dots, 1 | 2)
}

/// The port a request's host names (`a.test:8080`, `[::1]:8080`), if any.
fn host_port(host: &str) -> Option<u16> {
    let (_, port) = host.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    port.parse().ok()
}

fn without_userinfo(authority: &uri::Authority) -> &str {
    let s = authority.as_str();
    s.rsplit_once('@').map_or(s, |(_, host)| host)
}

/// The request target as an upstream HTTP/1.1 request line carries it: `/path?query`. An
/// absolute-form or HTTP/2 target loses its scheme and authority (the host is in `Host`).
pub(super) fn origin_form(uri: &mut Uri) {
    if uri.authority().is_some() || uri.scheme().is_some() {
        let path = uri.path_and_query().cloned();
        *uri = Uri::from(path.unwrap_or_else(|| uri::PathAndQuery::from_static("/")));
    }
}

/// Whether the client accepts trailers (`TE: trailers`): gRPC needs the upstream to know.
fn wants_trailers(headers: &http::HeaderMap) -> bool {
    let values = headers.get_all(TE).iter().filter_map(|v| v.to_str().ok());
    let mut tokens = values.flat_map(|v| v.split(',')).map(str::trim);
    tokens.any(|t| t.eq_ignore_ascii_case("trailers"))
}

/// An HTTP/2 request to an h2c member: an absolute URI (HTTP/2 sends scheme and authority),
/// and `TE: trailers` kept when the client sent it (the one TE value HTTP/2 allows).
pub(super) fn to_h2c(
    parts: &mut http::request::Parts,
    host: &HeaderValue,
    to: &Endpoint,
    trailers: bool,
) {
    let authority = host
        .to_str()
        .ok()
        .and_then(|h| h.parse::<uri::Authority>().ok());
    let authority = authority.or_else(|| to.addr().to_string().parse().ok());
    let path = parts.uri.path_and_query().cloned();
    let scheme = if to.is_tls() { "https" } else { "http" };
    let mut builder = Uri::builder().scheme(scheme);
    if let Some(authority) = authority {
        builder = builder.authority(authority);
    }
    let path = path.unwrap_or_else(|| uri::PathAndQuery::from_static("/"));
    if let Ok(absolute) = builder.path_and_query(path).build() {
        parts.uri = absolute;
    }
    parts.version = Version::HTTP_2;
    if trailers {
        parts
            .headers
            .insert(TE, HeaderValue::from_static("trailers"));
    }
}

/// Counts the connection in `portico_http_connections_active` while it lives.
pub(super) struct Active(Gauge);

impl Active {
    pub(super) fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Active(gauge.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How a failed try counts for passive health.
pub(super) fn failure_outcome(error: &UpstreamError) -> Outcome {
    match error {
        UpstreamError::Connect(_) | UpstreamError::ConnectTimeout(_) | UpstreamError::Tls(_) => {
            Outcome::ConnectFailed
        }
        UpstreamError::Handshake(_)
        | UpstreamError::Request(_)
        | UpstreamError::Io(_)
        | UpstreamError::Response(_) => Outcome::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, hosts: &[&str]) -> Request<()> {
        let mut builder = Request::builder().uri(target);
        for host in hosts {
            builder = builder.header(HOST, *host);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn a_request_names_two_hosts_when_host_and_authority_differ_or_host_repeats() {
        let cases = [
            ("/", &["a.test"][..], false),
            ("/", &[][..], false),
            ("http://a.test/", &["A.test"][..], false),
            ("http://a.test/", &[][..], false),
            ("http://b.test/", &["a.test"][..], true),
            ("http://a.test:8080/", &["a.test"][..], true),
            ("/", &["a.test", "a.test"][..], true),
            ("/", &["a.test, b.test"][..], true),
        ];
        for (target, hosts, two) in cases {
            assert_eq!(
                names_two_hosts(&request(target, hosts)),
                two,
                "{target} {hosts:?}"
            );
        }
    }

    #[test]
    fn dot_segments_are_found_plain_or_percent_encoded() {
        for segment in [".", "..", "%2e", "%2E%2e", ".%2E", "%2e."] {
            assert!(is_dot_segment(segment), "{segment}");
        }
        for path in ["/a/./b", "/a/%2E%2e", "/..", "/a/b/."] {
            assert!(has_dot_segment(path), "{path}");
        }
        for path in ["/a/b", "/a.b/c.d", "/a/%41", "/a/...", "/"] {
            assert!(!has_dot_segment(path), "{path}");
        }
        for segment in [
            "",
            "...",
            "a..",
            ".well-known",
            "%2e%2e%2e",
            "%2f",
            "%2",
            "%",
        ] {
            assert!(!is_dot_segment(segment), "{segment}");
        }
    }
}
