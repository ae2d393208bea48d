//! HTTP/3 (RFC 9114) beside every HTTPS listener: QUIC over UDP on the same address and port
//! (quinn, with rustls and the listener's certificates by SNI), HTTP/3 framing on it (h3), and
//! each request through the same pipeline as HTTP/1.1 and HTTP/2 (routes, limits, access log,
//! metrics). The HTTPS listener's responses advertise it (`Alt-Svc`). 0-RTT is off (rustls
//! accepts no early data); connection migration is QUIC's, as quinn implements it.
//!
//! An HTTP/3 connection is counted by the connection caps like a TCP one. On shutdown the
//! endpoint stops taking connections, each connection gets a GOAWAY, and requests in flight
//! finish until the shutdown timeout. QUIC connections live in this process: an upgrade hands
//! the UDP socket over with the TCP listeners, and the connections this process had close at
//! once (their clients connect again, to the successor).

use super::conn::Conn;
use super::{Phase, Proxy, Scheme, stopped};
use crate::limits::{H3Body, Inbound};
use bytes::Bytes;
use http::header::{CONNECTION, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use quinn::crypto::rustls::QuicServerConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long clients may keep using the advertised HTTP/3 endpoint (`Alt-Svc`'s `ma`): a day,
/// as Cloudflare and Google advertise.
const ALT_SVC_MAX_AGE_S: u32 = 86_400;

/// `Alt-Svc` naming HTTP/3 on `port`.
pub(super) fn alt_svc(port: u16) -> HeaderValue {
    let value = format!("h3=\":{port}\"; ma={ALT_SVC_MAX_AGE_S}");
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("clear"))
}

impl Proxy {
    /// Serves HTTP/3 on `socket` until `shutdown`, from the first configuration on (as the TCP
    /// listeners), then drains.
    pub(super) async fn serve_h3(
        self: Arc<Self>,
        socket: std::net::UdpSocket,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let endpoint = match self.h3_endpoint(socket) {
            Ok(endpoint) => endpoint,
            Err(error) => return tracing::warn!(%error, "HTTP/3 not served"),
        };
        let mut applied = self.applied.subscribe();
        tokio::select! {
            _ = applied.wait_for(|a| *a) => {}
            () = stopped(&mut shutdown) => return,
        }
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                incoming = endpoint.accept() => {
                    let Some(incoming) = incoming else { break };
                    let peer = incoming.remote_address();
                    if self.h3_off.load(std::sync::atomic::Ordering::Relaxed) {
                        // A class served here turned HTTP/3 off: the client falls back to TCP.
                        incoming.refuse();
                        continue;
                    }
                    let Some(admitted) = self.caps.admit(peer.ip()) else {
                        tracing::debug!(%peer, "connection cap reached: refusing");
                        incoming.refuse();
                        continue;
                    };
                    let proxy = self.clone();
                    connections.spawn(async move {
                        proxy.serve_h3_connection(incoming, peer).await;
                        drop(admitted);
                    });
                    while connections.try_join_next().is_some() {}
                }
                () = stopped(&mut shutdown) => break,
            }
        }
        if self.handed_over.load(std::sync::atomic::Ordering::SeqCst) {
            // The successor reads the same socket: this process must not take its clients.
            // Without a server configuration, a new client's first packet read here is
            // dropped (a stateless reset its client ignores while it has no connection), and
            // its retransmission reaches the successor.
            endpoint.set_server_config(None);
            endpoint.close(0u32.into(), b"");
            connections.shutdown().await;
            return;
        }
        // New connections are refused from now on; those here get their GOAWAY from the
        // phase change and finish their requests.
        endpoint.set_server_config(None);
        let drained = tokio::time::timeout(self.limits.shutdown_timeout, async {
            while connections.join_next().await.is_some() {}
        });
        if drained.await.is_err() {
            tracing::debug!(
                left = connections.len(),
                "closing HTTP/3 connections still busy"
            );
        }
        connections.shutdown().await;
        endpoint.close(0u32.into(), b"");
        endpoint.wait_idle().await;
    }

    /// The QUIC endpoint on `socket`: TLS 1.3 with the HTTPS listener's certificates, ALPN
    /// `h3`, the idle deadline of keep-alive connections.
    fn h3_endpoint(&self, socket: std::net::UdpSocket) -> std::io::Result<quinn::Endpoint> {
        let tls = crate::tls::quic_server_config(self.resolver.clone());
        let crypto = QuicServerConfig::try_from(tls).map_err(std::io::Error::other)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = quinn::TransportConfig::default();
        let idle = quinn::IdleTimeout::try_from(self.limits.keepalive_timeout);
        transport.max_idle_timeout(idle.ok());
        config.transport_config(Arc::new(transport));
        let runtime = Arc::new(quinn::TokioRuntime);
        quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(config),
            socket,
            runtime,
        )
    }

    /// One QUIC connection: its requests, each in a task of its own, until the client closes
    /// it or the proxy drains.
    async fn serve_h3_connection(self: Arc<Self>, incoming: quinn::Incoming, peer: SocketAddr) {
        let _active = super::conn::Active::new(self.metrics.connections());
        let connection = match incoming.await {
            Ok(connection) => connection,
            Err(error) => return tracing::debug!(%peer, %error, "QUIC handshake failed"),
        };
        // The request head limit of the other versions (`--max-header-bytes`), told to the
        // client in SETTINGS and enforced on every request's field section.
        let max_head = u64::try_from(self.limits.max_header_bytes).unwrap_or(u64::MAX);
        let h3 = h3::server::builder()
            .max_field_section_size(max_head)
            .build(h3_quinn::Connection::new(connection))
            .await;
        let mut h3: h3::server::Connection<h3_quinn::Connection, Bytes> = match h3 {
            Ok(h3) => h3,
            Err(error) => return tracing::debug!(%peer, %error, "HTTP/3 connection failed"),
        };
        let (conn, _tunnels) = Conn::new(self.clone(), peer, Scheme::Https);
        let mut phase = self.phase.subscribe();
        let mut requests = JoinSet::new();
        let mut going_away = false;
        loop {
            tokio::select! {
                accepted = h3.accept() => match accepted {
                    Ok(Some(resolver)) => {
                        let conn = conn.clone();
                        requests.spawn(async move {
                            match resolver.resolve_request().await {
                                Ok((req, stream)) => answer(&conn, req, stream).await,
                                Err(error) => tracing::debug!(%error, "HTTP/3 request refused"),
                            }
                        });
                        while requests.try_join_next().is_some() {}
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "HTTP/3 connection ended");
                        break;
                    }
                },
                changed = phase.changed(), if !going_away => {
                    if changed.is_err() || *phase.borrow_and_update() != Phase::Serving {
                        going_away = true;
                        // GOAWAY: no new requests; those accepted finish.
                        if let Err(error) = h3.shutdown(0).await {
                            tracing::debug!(%peer, %error, "HTTP/3 GOAWAY not sent");
                        }
                    }
                }
            }
        }
        while requests.join_next().await.is_some() {}
    }
}

/// Answers one HTTP/3 request through the proxy's pipeline and streams the response back.
async fn answer(
    conn: &Conn,
    req: Request<()>,
    stream: h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
) {
    let (mut send, recv) = stream.split();
    let body = Inbound::H3(H3Body::new(recv).await);
    let ordinal = conn.next_ordinal();
    let response = conn.handle(req.map(|()| body), ordinal).await;
    let (mut parts, body) = response.into_parts();
    // Connection-specific fields do not exist in HTTP/3 (RFC 9114, 4.2).
    for name in [CONNECTION, TRANSFER_ENCODING, UPGRADE, KEEP_ALIVE] {
        parts.headers.remove(name);
    }
    if let Err(error) = send.send_response(Response::from_parts(parts, ())).await {
        return tracing::debug!(%error, "HTTP/3 response not sent");
    }
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let sent = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => send.send_data(data).await,
                Err(frame) => match frame.into_trailers() {
                    Ok(trailers) => send.send_trailers(trailers).await,
                    Err(_) => Ok(()),
                },
            },
            Err(error) => {
                tracing::debug!(%error, "response body failed: resetting the HTTP/3 stream");
                send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return;
            }
        };
        if let Err(error) = sent {
            return tracing::debug!(%error, "HTTP/3 response cut");
        }
    }
    if let Err(error) = send.finish().await {
        tracing::debug!(%error, "HTTP/3 stream not finished");
    }
}

const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
