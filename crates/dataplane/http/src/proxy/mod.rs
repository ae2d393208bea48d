//! The proxy server: configuration swaps, the accept loop and graceful shutdown.

mod authorize;
mod conn;
mod drain;
mod error;
mod errors;
mod filters;
mod gate;
mod h1;
mod h3;
mod headers;
mod https;
mod lane;
mod options;
mod passthrough;
mod proxy_protocol;
mod tries;
mod tunnel;

pub use headers::Scheme;
pub use lane::HeavyLane;

use crate::access::AccessLog;
use crate::limits::Caps;
use crate::metrics::ProxyMetrics;
use crate::route::{Compiler, RouteTable, ensure_checks, ready_members};
use crate::tls::{Resolver, server_config, stream_server_config};
use crate::upstream::{Endpoints, UpstreamBody};
use arc_swap::ArcSwap;
use bytes::Bytes;
use http::HeaderValue;
use http_body_util::{Either, Full};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use portico_model::{Limits, Model, Pool};
use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub(crate) use drain::Phase;

/// A response body: streamed from the upstream, or a short local one.
pub(crate) type ProxyBody = Either<UpstreamBody, Full<Bytes>>;

/// The built-in L7 proxy. Serving and reconfiguring run concurrently: `apply` swaps the route
/// table atomically, and each request reads the table once, without a lock.
pub struct Proxy {
    table: ArcSwap<RouteTable>,
    generation: AtomicU64,
    /// Serializes `apply` so two swaps cannot race on round-robin cursor carry-over.
    apply_lock: Mutex<()>,
    metrics: ProxyMetrics,
    /// Upstream connections by member address, shared by every configuration generation.
    endpoints: Endpoints,
    server: auto::Builder<TokioExecutor>,
    /// Certificates for TLS handshakes, swapped by `set_certificates`.
    resolver: Arc<Resolver>,
    /// The TLS server configuration of every HTTPS connection, around `resolver`.
    tls_config: Arc<rustls::ServerConfig>,
    /// The same for connections whose decrypted stream is spliced to a pool (no ALPN).
    stream_tls_config: Arc<rustls::ServerConfig>,
    /// The port HTTP → HTTPS redirects name: that of `serve_https`'s listener once it runs.
    https_port: AtomicU16,
    limits: Limits,
    /// `Strict-Transport-Security` of HTTPS responses (`limits.hsts`), rendered once.
    hsts: Option<HeaderValue>,
    /// Open client connections, in all and per client address, of both listeners.
    caps: Arc<Caps>,
    /// Serving, draining (after the shutdown signal) or closing (after the grace period).
    phase: watch::Sender<Phase>,
    /// Whether a configuration has been applied: the listeners accept only from then on, so
    /// that no client is answered from an empty route table.
    applied: watch::Sender<bool>,
    /// Whether a successor process serves the same listening sockets: the shutdown then stops
    /// accepting at once, and asks the connections it has to close for the grace period.
    handed_over: std::sync::atomic::AtomicBool,
    /// Where each request's line goes, if anywhere.
    access: AccessLog,
    /// The process's tracer, when `--otlp-endpoint` is set.
    tracing: Option<&'static crate::trace::Tracing>,
    /// Whether HTTP/1.1 requests take the own path (`h1`) before hyper.
    own_http1: std::sync::atomic::AtomicBool,
    /// Where TLS handshakes take turns: shared by `share_heavy_lane`, or made when the HTTPS
    /// listener starts.
    lane: std::sync::OnceLock<Arc<HeavyLane>>,
    /// `Alt-Svc` of HTTPS responses, once HTTP/3 is served beside the HTTPS listener.
    alt_svc: std::sync::OnceLock<HeaderValue>,
    /// A load balancer served here turns HTTP/3 off (its class's `portico.dev/http3:
    /// "false"`): no `Alt-Svc`, QUIC clients refused. Set by `apply`.
    h3_off: std::sync::atomic::AtomicBool,
    /// The basic-auth Secrets' entries routes check against, swapped by `set_credentials`.
    credentials: Mutex<portico_model::Credentials>,
}

impl Proxy {
    /// A proxy with an empty configuration until `apply`, with the default limits. Its
    /// listeners accept no connection before the first `apply` (clients wait in the listen
    /// queue).
    pub fn new(metrics: ProxyMetrics) -> Arc<Self> {
        Self::with_limits(metrics, Limits::default())
    }

    /// Like [`Proxy::new`] with `limits` on every client connection.
    pub fn with_limits(metrics: ProxyMetrics, limits: Limits) -> Arc<Self> {
        Self::with_access_log(metrics, limits, AccessLog::off())
    }

    /// Like [`Proxy::with_limits`], writing a line per request to `access`.
    pub fn with_access_log(metrics: ProxyMetrics, limits: Limits, access: AccessLog) -> Arc<Self> {
        let resolver = Arc::new(Resolver::new());
        Arc::new(Proxy {
            tls_config: server_config(resolver.clone()),
            stream_tls_config: stream_server_config(resolver.clone()),
            resolver,
            https_port: AtomicU16::new(443),
            table: ArcSwap::from_pointee(RouteTable::default()),
            generation: AtomicU64::new(0),
            apply_lock: Mutex::new(()),
            metrics,
            // Idle upstream connections: at most one per client connection allowed, so that
            // the descriptors the proxy holds stay within a small multiple of the cap however
            // many members the pools have (docs/limits.md).
            endpoints: Endpoints::new(limits.max_connections),
            server: server_builder(&limits),
            caps: Caps::new(&limits),
            hsts: hsts_value(&limits.hsts),
            limits,
            phase: watch::Sender::new(Phase::Serving),
            applied: watch::Sender::new(false),
            handed_over: std::sync::atomic::AtomicBool::new(false),
            access,
            tracing: crate::trace::process(&limits.tracing),
            own_http1: std::sync::atomic::AtomicBool::new(own_http1_from_env()),
            lane: std::sync::OnceLock::new(),
            alt_svc: std::sync::OnceLock::new(),
            h3_off: std::sync::atomic::AtomicBool::new(false),
            credentials: Mutex::default(),
        })
    }

    /// Compiles `model` and swaps it in; returns the new configuration generation (1, 2, …).
    ///
    /// Requests already routed finish on the old table; keep-alive connections route their
    /// next request on the new one. Pools that keep their id keep their round-robin position.
    pub fn apply(&self, model: &Model) -> u64 {
        let _serial = self
            .apply_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let previous = self.table.load();
        let credentials = self
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let compiler = Compiler::new(Some(&previous), Some(&self.metrics), &self.endpoints)
            .with_credentials(credentials);
        let table = compiler.compile(model);
        // The same pool states as before (most changes): no pool is gone, no endpoint was
        // let go.
        let same_pools = table.same_pools(&previous);
        if !same_pools {
            // A pool that is gone takes its series with it, so /metrics and memory do not
            // grow with every pool that ever existed.
            let served: HashSet<&str> = table.pool_names().collect();
            let gone = previous.pools().filter(|p| !served.contains(p.name()));
            gone.for_each(|p| p.metrics.forget());
        }
        // Started once per pool (a runtime may only be there from some apply on).
        table.pools().for_each(|p| ensure_checks(p.balance()));
        self.table.store(Arc::new(table));
        drop(previous);
        let listeners = model
            .load_balancers
            .iter()
            .flat_map(|lb| lb.listeners.iter());
        let h3_off = listeners
            .filter_map(|l| l.tls.as_ref())
            .any(|t| t.http3_off);
        self.h3_off.store(h3_off, Ordering::Relaxed);
        let generation = self.next_generation(!same_pools);
        self.applied.send_replace(true);
        generation
    }

    /// How many upstream endpoints the proxy knows (tests).
    #[cfg(test)]
    pub(crate) fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// The basic-auth Secrets' entries the next [`Proxy::apply`] compiles routes with.
    pub fn set_credentials(&self, credentials: &portico_model::Credentials) {
        let mut own = self
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        own.clone_from(credentials);
    }

    /// Replaces the members of pools the served table already has, without recompiling it:
    /// the fast path for endpoint changes. Pools the table does not know are skipped (they
    /// are not served by this provider). Returns the new configuration generation.
    pub fn update_members<'a>(&self, pools: impl IntoIterator<Item = &'a Pool>) -> u64 {
        let _serial = self
            .apply_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let table = self.table.load();
        for pool in pools {
            if let Some(state) = table.pool(pool.id) {
                state.set_members(ready_members(pool, &self.endpoints));
            }
        }
        self.next_generation(true)
    }

    /// After a change is in place (the caller holds `apply_lock`): forgets unused endpoints
    /// (when members may have been let go: `prune`) and counts the new configuration
    /// generation.
    fn next_generation(&self, prune: bool) -> u64 {
        if prune {
            self.endpoints.prune();
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.metrics.set_generation(generation);
        generation
    }

    /// A successor process accepts on this proxy's listening sockets: call before the
    /// shutdown signal, which then stops accepting at once and drains the connections as a
    /// shutdown does (asked to close for the grace period, then closed once idle).
    pub fn hand_over(&self) {
        self.handed_over.store(true, Ordering::SeqCst);
    }

    /// Whether new connections' HTTP/1.1 requests take the proxy's own path before hyper (on
    /// unless `PORTICO_HTTP1=hyper` is set), or go to hyper only.
    pub fn set_own_http1(&self, on: bool) {
        self.own_http1.store(on, Ordering::Relaxed);
    }

    /// The route table currently served.
    pub fn table(&self) -> Arc<RouteTable> {
        self.table.load_full()
    }

    /// The port of the HTTPS listener, as HTTP → HTTPS redirects name it.
    pub fn https_port(&self) -> u16 {
        self.https_port.load(Ordering::Relaxed)
    }

    /// Accepts connections until `shutdown` turns true (or its sender is dropped), then drains:
    /// see [`Proxy::accept_loop`].
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: watch::Receiver<bool>) {
        self.accept_loop(listener, shutdown, |proxy, stream, peer| {
            proxy.serve_connection(stream, peer, Scheme::Http)
        })
        .await;
    }

    /// The accept loop of [`Proxy::serve`] and [`Proxy::serve_https`]: from the first
    /// [`Proxy::apply`] on, `start` serves each accepted connection in a task of its own
    /// (before it, connections wait in the listen queue). After `shutdown`, it keeps accepting for
    /// the grace period while every response asks the client to close (`Connection: close`,
    /// HTTP/2 GOAWAY); then it closes the listener, shuts every connection down gracefully and
    /// waits for requests and tunnels in flight up to the shutdown timeout.
    async fn accept_loop<F, Fut>(
        self: Arc<Self>,
        listener: TcpListener,
        mut shutdown: watch::Receiver<bool>,
        start: F,
    ) where
        F: Fn(Arc<Self>, TcpStream, SocketAddr) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut connections = JoinSet::new();
        let mut nodelay = NoDelay::on(&listener);
        if let Err(error) = defer_accept(&listener) {
            tracing::debug!(%error, "TCP_DEFER_ACCEPT not set: connections are taken at once");
        }
        let mut applied = self.applied.subscribe();
        tokio::select! {
            _ = applied.wait_for(|a| *a) => {}
            () = stopped(&mut shutdown) => return,
        }
        let stop = stopped(&mut shutdown);
        self.accept_until(&listener, (&mut connections, &mut nodelay), &start, stop)
            .await;
        self.enter(Phase::Draining);
        let grace = tokio::time::sleep(self.limits.shutdown_grace);
        if self.handed_over.load(Ordering::SeqCst) {
            // The successor accepts on the same socket: only the connections already here
            // are asked to close during the grace period.
            drop(listener);
            grace.await;
        } else {
            self.accept_until(&listener, (&mut connections, &mut nodelay), &start, grace)
                .await;
            drop(listener);
        }
        self.enter(Phase::Closing);
        let drained = tokio::time::timeout(self.limits.shutdown_timeout, async {
            while connections.join_next().await.is_some() {}
        });
        if drained.await.is_err() {
            tracing::warn!(
                left = connections.len(),
                "closing connections still busy after the shutdown timeout"
            );
        }
        connections.shutdown().await;
    }

    /// Accepts connections into `connections` until `until` resolves.
    async fn accept_until<F, Fut>(
        self: &Arc<Self>,
        listener: &TcpListener,
        (connections, nodelay): (&mut JoinSet<()>, &mut NoDelay),
        start: &F,
        until: impl Future<Output = ()>,
    ) where
        F: Fn(Arc<Self>, TcpStream, SocketAddr) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        tokio::pin!(until);
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) if self.limits.proxy_protocol => {
                        nodelay.set(&stream);
                        // The client is known once its header is read: that is in the
                        // connection's task, and so are the caps, by that client.
                        let start = start.clone();
                        let proxy = self.clone();
                        connections.spawn(async move {
                            let mut stream = stream;
                            let deadline = proxy.limits.header_timeout;
                            let client = proxy_protocol::read(&mut stream, peer, deadline).await;
                            let client = match client {
                                Ok(client) => client,
                                Err(error) => {
                                    tracing::debug!(%peer, %error, "closing");
                                    return;
                                }
                            };
                            let Some(admitted) = proxy.caps.admit(client.ip()) else {
                                tracing::debug!(%client, "connection cap reached: closing");
                                return;
                            };
                            Box::pin(start(proxy, stream, client)).await;
                            drop(admitted);
                        });
                        while connections.try_join_next().is_some() {}
                    }
                    Ok((stream, peer)) => {
                        let Some(admitted) = self.caps.admit(peer.ip()) else {
                            tracing::debug!(%peer, "connection cap reached: closing");
                            continue;
                        };
                        nodelay.set(&stream);
                        // Boxed here: a connection's future is kilobytes long (hyper's
                        // connection, the watchdog, the TLS session), and spawning moves what
                        // it is given through several frames into the task and out again at
                        // the end. Moved once into a box, it is copied once per connection
                        // instead of about six times (5,400 instructions, callgrind).
                        let served = Box::pin(start(self.clone(), stream, peer));
                        connections.spawn(async move {
                            served.await;
                            drop(admitted);
                        });
                        // Finished connections are let go here, without waiting for them:
                        // waiting (`join_next`) woke this loop once per connection that ended,
                        // a task poll for every short connection. Until the next accept, a
                        // finished one keeps only its task's header, its future already gone.
                        while connections.try_join_next().is_some() {}
                    }
                    Err(error) => accept_failed(error).await,
                },
                () = &mut until => return,
            }
        }
    }
}

/// TCP_NODELAY on every accepted connection: latency matters more than packet count for a
/// proxy. Linux copies it from the listening socket to each connection accepted from it, so it
/// is set once on the listener, and per connection only where the first connection shows that
/// it was not inherited (a system call per new connection saved).
pub(crate) struct NoDelay {
    /// Whether connections come with it: unknown until the first one.
    inherited: Option<bool>,
}

impl NoDelay {
    /// Sets TCP_NODELAY on `listener`, for the connections it accepts.
    pub(crate) fn on(listener: &TcpListener) -> NoDelay {
        let set = socket2::SockRef::from(listener)
            .set_tcp_nodelay(true)
            .is_ok();
        NoDelay {
            inherited: (!set).then_some(false),
        }
    }

    /// Makes sure `stream` has TCP_NODELAY.
    pub(crate) fn set(&mut self, stream: &TcpStream) {
        let inherited = *self
            .inherited
            .get_or_insert_with(|| stream.nodelay().unwrap_or(false));
        if !inherited {
            let _ = stream.set_nodelay(true);
        }
    }
}

/// Seconds a connection may stay silent before it is accepted all the same.
const DEFER_ACCEPT_SECONDS: libc::c_int = 1;

/// Sets TCP_DEFER_ACCEPT on `listener`: Linux hands over a connection when its first bytes
/// have arrived (or after [`DEFER_ACCEPT_SECONDS`] and a retransmitted SYN-ACK), instead of at
/// the end of the TCP handshake. HTTP and TLS clients speak first, so the proxy's first read
/// of a new connection finds its request or ClientHello, and the client's `connect` no longer
/// wakes the proxy for a connection it cannot serve yet. nginx (`listen … deferred`) and
/// haproxy (`bind … defer-accept`) offer it; here it is always on. A connection that never
/// speaks meets the header timeout about a second later than without it.
fn defer_accept(listener: &TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let seconds = DEFER_ACCEPT_SECONDS;
    let length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    #[allow(unsafe_code)]
    // SAFETY: the option value is a live `c_int` for the whole call and `length` is its size;
    // the descriptor is the listener's, open while it is borrowed.
    let set = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&raw const seconds).cast(),
            length,
        )
    };
    if set < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What the routes of the listener the client used (`scheme`) do with a request for `host`
/// and `path` with `headers`.
fn target<'t>(
    table: &'t RouteTable,
    scheme: Scheme,
    host: &str,
    path: &str,
    headers: &dyn crate::route::RequestHeaders,
) -> Option<&'t crate::route::Action> {
    table.action(scheme == Scheme::Https, host, path, headers)
}

/// The own HTTP/1.1 path is on unless `PORTICO_HTTP1=hyper` sends every request through
/// hyper (to compare the two, or to step around a fault of the own path).
fn own_http1_from_env() -> bool {
    std::env::var("PORTICO_HTTP1").map_or(true, |v| v.trim() != "hyper")
}

/// Resolves once shutdown is requested, or when nobody can request it any more.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Running out of file descriptors makes `accept` fail in a loop: back off briefly.
async fn accept_failed(error: std::io::Error) {
    tracing::warn!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// The read buffer a request head must fit in (hyper needs at least 8 KiB): hyper's, and the
/// bound of what each connection's framing scanner follows.
pub(super) fn head_buffer(limits: &Limits) -> usize {
    limits.max_header_bytes.max(8192)
}

/// hyper's own limits. Its HTTP/1 header timer is off: it would arm a timer for every
/// request head, idle or not, while the first-bytes, header and keep-alive deadlines are
/// each connection's watchdog's (`limits::Activity`), which costs nothing per request.
fn server_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_headers(limits.max_headers)
        .max_buf_size(head_buffer(limits));
    let list_size = u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(list_size)
        // RFC 8441: WebSockets (and other upgrades) over HTTP/2 with extended CONNECT.
        .enable_connect_protocol();
    builder
}

impl Proxy {
    /// The `Alt-Svc` of HTTPS responses now: HTTP/3's while it is served and no load balancer
    /// here turns it off.
    pub(crate) fn alt_svc(&self) -> Option<&HeaderValue> {
        let off = self.h3_off.load(Ordering::Relaxed);
        self.alt_svc.get().filter(|_| !off)
    }
}

/// `hsts` as a field value; none when off.
pub(crate) fn hsts_value(hsts: &portico_model::Hsts) -> Option<HeaderValue> {
    hsts.value().and_then(|v| HeaderValue::from_str(&v).ok())
}

#[cfg(test)]
mod tests {
    use super::NoDelay;
    use tokio::net::{TcpListener, TcpStream};

    /// Accepts `n` connections from `listener` through `nodelay`: whether each has TCP_NODELAY.
    async fn accepted(listener: &TcpListener, nodelay: &mut NoDelay, n: usize) -> Vec<bool> {
        let addr = listener.local_addr().unwrap();
        let mut seen = Vec::new();
        for _ in 0..n {
            let _client = TcpStream::connect(addr).await.unwrap();
            let (stream, _) = listener.accept().await.unwrap();
            nodelay.set(&stream);
            seen.push(stream.nodelay().unwrap());
        }
        seen
    }

    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay_inherited_or_set_one_by_one() {
        // Set on the listener: Linux passes it on, and nothing is set per connection.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut nodelay = NoDelay::on(&listener);
        assert_eq!(accepted(&listener, &mut nodelay, 3).await, [true; 3]);
        assert_eq!(nodelay.inherited, Some(true));
        // A listener without it: the first connection shows it, and each one gets it.
        let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut nodelay = NoDelay { inherited: None };
        assert_eq!(accepted(&plain, &mut nodelay, 3).await, [true; 3]);
        assert_eq!(nodelay.inherited, Some(false));
    }

    #[tokio::test]
    async fn a_connection_is_accepted_when_its_first_bytes_arrive() {
        use std::time::Duration;
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        super::defer_accept(&listener).unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        // The TCP handshake is done, but nothing has been sent: not handed over (Linux waits
        // up to a second, then a retransmitted SYN-ACK, before it hands it over anyway).
        let early = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
        assert!(early.is_err(), "accepted before the client spoke");
        client.write_all(b"G").await.unwrap();
        let spoke = tokio::time::timeout(Duration::from_millis(500), listener.accept()).await;
        assert!(spoke.is_ok(), "not accepted once the client spoke");
    }
}
