//! TLS passthrough on the HTTPS listener: the ClientHello is peeked, not read, so that a
//! connection whose server name passes through reaches a member byte for byte (the member
//! answers the handshake with its own certificate), and any other connection is handed,
//! untouched, to the rustls acceptor. A server name whose TLS is terminated and sent on as a
//! stream (TLSRoutes on listeners of `tls.mode: Terminate`) is handed to it too, and after the
//! handshake its decrypted stream is spliced the same way.

use super::Proxy;
use super::tries::{connect_timeout, source_allowed};
use crate::route::{Outcome, PoolState, RequestInfo, SniTarget};
use http::{HeaderMap, Uri};
use portico_tls::{Sni, peek_sni};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The most bytes peeked: a TLS record header and the largest record (16 KiB).
const MAX_HELLO: usize = 5 + (1 << 14);

/// How long to wait before peeking again at a ClientHello that came in pieces (rare: clients
/// send it in one segment, and the listener defers accepting until data arrives).
const PEEK_AGAIN: Duration = Duration::from_millis(5);

impl Proxy {
    /// Where `stream` goes if its ClientHello names an SNI-routed host (the pool, raw or
    /// terminated); `None`: terminate and serve HTTPS. Reads nothing from the stream.
    pub(super) async fn sni_target(&self, stream: &TcpStream) -> Option<SniTarget> {
        let table = self.table.load();
        if !table.has_passthrough() {
            return None;
        }
        let host = server_name(stream).await?;
        table.sni_target(&host).cloned()
    }

    /// Splices `client` (the raw TCP stream, or the decrypted side of a terminated TLS one) to
    /// a member of `pool`, both ways, each direction's end passed on as a half-close: the
    /// pool's balancing picks the member, a member that refuses the connection makes way for
    /// the next (up to the pool's tries), and a client outside the pool's allowed sources is
    /// closed.
    pub(super) async fn pass_through<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        mut client: S,
        peer: SocketAddr,
        pool: &PoolState,
    ) {
        if !source_allowed(pool, peer.ip()) {
            return tracing::debug!(%peer, pool = pool.name(), "passthrough source not allowed");
        }
        let Some(mut upstream) = connect(pool, peer).await else {
            return tracing::debug!(%peer, pool = pool.name(), "no member took the passthrough");
        };
        match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            Ok((up, down)) => tracing::debug!(%peer, up, down, "passthrough closed"),
            Err(error) => tracing::debug!(%peer, %error, "passthrough ended with an error"),
        }
    }
}

/// A connection to a member of `pool` for the client at `peer`.
async fn connect(pool: &PoolState, peer: SocketAddr) -> Option<TcpStream> {
    let (headers, uri) = (HeaderMap::new(), Uri::from_static("/"));
    let request = RequestInfo {
        headers: &headers,
        uri: &uri,
        client: peer.ip(),
    };
    let timeout = connect_timeout(pool);
    let mut tried = Vec::new();
    while tried.len() < pool.max_tries() {
        let pick = pool.choose(&request, &tried)?;
        let started = Instant::now();
        match pick.endpoint().connect_raw(timeout).await {
            Ok(stream) => {
                let latency = started.elapsed();
                pool.record(pick, Outcome::Success { latency });
                return Some(stream);
            }
            Err(error) => {
                tracing::debug!(%peer, member = %pick.addr(), %error, "passthrough connect failed");
                tried.push(pick.addr());
                pool.record(pick, Outcome::ConnectFailed);
            }
        }
    }
    None
}

/// The server name of the ClientHello waiting on `stream`, peeked; `None` for a hello without
/// one, or one that is not TLS, or a closed stream.
async fn server_name(stream: &TcpStream) -> Option<String> {
    let mut buf = vec![0; MAX_HELLO];
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        match peek_sni(&buf[..n]) {
            Sni::Host(host) => return Some(host),
            Sni::Incomplete if n > 0 && n < buf.len() => tokio::time::sleep(PEEK_AGAIN).await,
            Sni::Incomplete | Sni::Absent | Sni::Unreadable => return None,
        }
    }
}
