//! The TLS side of the proxy: certificates swapped in by configuration, and the handshake in
//! front of each HTTPS connection.

use super::lane::HeavyLane;
use super::{Proxy, Scheme};
use crate::route::SniTarget;
use crate::tls::{MaterialBySecret, SniMap};
use portico_model::Model;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::LazyConfigAcceptor;

/// How long a client may take to complete the TLS handshake, its wait for a turn of the heavy
/// lane included.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Proxy {
    /// Serves the certificates of `model`'s TERMINATED_HTTPS listeners, from `material`, to new
    /// handshakes; connections already established keep theirs.
    pub fn set_certificates(&self, model: &Model, material: &MaterialBySecret) {
        self.resolver.store(SniMap::build(model, material));
    }

    /// Verifying pools trust the CA bundles of `bundles` from the next [`Proxy::apply`] on
    /// (a pool whose bundle is not there fails closed: 502). Endpoints whose pool settings and
    /// bundle are unchanged keep their TLS client and connections.
    pub fn set_ca_bundles(&self, bundles: &crate::tls::CaBySecret) {
        self.endpoints.set_ca_bundles(bundles);
    }

    /// Accepts TLS connections until `shutdown` turns true, like [`Proxy::serve`]; requests
    /// are routed on the TERMINATED_HTTPS listeners and forwarded with
    /// `X-Forwarded-Proto: https`. HTTP redirects name this listener's port. With `quic` (a
    /// UDP socket on the same address and port, bound by the provider), HTTP/3 is served on it too
    /// and advertised, unless `--http3 off` or the PROXY protocol (which QUIC does not carry).
    pub async fn serve_https(
        self: Arc<Self>,
        listener: TcpListener,
        quic: Option<std::net::UdpSocket>,
        shutdown: watch::Receiver<bool>,
    ) {
        let addr = listener.local_addr().ok();
        if let Some(addr) = addr {
            self.https_port.store(addr.port(), Ordering::Relaxed);
        }
        let h3 = quic.and_then(|quic| self.start_h3(quic, &shutdown));
        let lane = (self.lane)
            .get_or_init(|| Arc::new(HeavyLane::for_current_runtime()))
            .clone();
        let tcp = self.accept_loop(listener, shutdown, move |proxy, stream, peer| {
            proxy.serve_tls_connection(stream, peer, lane.clone())
        });
        match h3 {
            Some(h3) => drop(tokio::join!(tcp, h3)),
            None => tcp.await,
        }
    }

    /// HTTP/3 on `quic`, advertised in HTTPS responses (`--http3`, not behind the PROXY
    /// protocol, which QUIC does not carry); none when off.
    fn start_h3(
        self: &Arc<Self>,
        quic: std::net::UdpSocket,
        shutdown: &watch::Receiver<bool>,
    ) -> Option<impl Future<Output = ()> + use<>> {
        if !self.serves_h3() {
            return None;
        }
        let port = quic.local_addr().ok()?.port();
        let _set = self.alt_svc.set(super::h3::alt_svc(port));
        Some(self.clone().serve_h3(quic, shutdown.clone()))
    }

    /// Whether this proxy serves HTTP/3 beside its HTTPS listener when given a UDP socket:
    /// `--http3 on`, and no PROXY protocol.
    pub fn serves_h3(&self) -> bool {
        self.limits.http3 && !self.limits.proxy_protocol
    }

    /// Makes this proxy's TLS handshakes take turns in `lane` (see [`HeavyLane`]), with those
    /// of the other proxies that share it. Call before [`Proxy::serve_https`]; once the proxy
    /// has a lane, it keeps it.
    pub fn share_heavy_lane(&self, lane: Arc<HeavyLane>) {
        // A proxy whose listener already runs keeps the lane it started with.
        let _kept = self.lane.set(lane);
    }

    /// The handshake, then the connection; or, for a ClientHello naming a passthrough host,
    /// the raw stream spliced to that host's pool; or, for one naming a host whose TLS is
    /// terminated and sent on, the handshake (no ALPN), then the decrypted stream spliced to
    /// that host's pool. Processing the ClientHello (key exchange, signature, the server's
    /// flight) is the heavy step and takes its turn in `lane`.
    async fn serve_tls_connection(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        lane: Arc<HeavyLane>,
    ) {
        let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.sni_target(&stream));
        let splice = match peeked.await {
            Ok(Some(SniTarget::Pass(pool))) => return self.pass_through(stream, peer, &pool).await,
            Ok(Some(SniTarget::Terminate(pool))) => Some(pool),
            Ok(Some(SniTarget::Refuse)) => {
                return tracing::debug!(%peer, "no TLSRoute serves the server name: closed");
            }
            Ok(None) => None,
            // A client silent past the deadline gets no second one for the handshake.
            Err(_) => return tracing::debug!(%peer, "no ClientHello in time"),
        };
        let config = match splice {
            Some(_) => self.stream_tls_config.clone(),
            None => self.tls_config.clone(),
        };
        let handshake = async {
            let start =
                LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream).await?;
            lane.run(|| start.into_stream(config)).await
        };
        let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await;
        let stream = match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                return tracing::debug!(%peer, %error, "TLS handshake failed");
            }
            Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
        };
        match splice {
            Some(pool) => self.pass_through(stream, peer, &pool).await,
            None => self.serve_connection(stream, peer, Scheme::Https).await,
        }
    }
}
