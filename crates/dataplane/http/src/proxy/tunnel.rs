//! Upgrades: WebSockets and other protocols that take the connection over (HTTP/1.1
//! `Upgrade`, RFC 9110 §7.8; HTTP/2 extended CONNECT, RFC 8441). The upstream always hears an
//! HTTP/1.1 `Upgrade` on a connection of its own; once it switches protocols, hyper hands over
//! both connections (`hyper::upgrade::on`) and bytes are copied both ways until either side
//! closes. A tunnel holds no route table: configuration changes do not touch it.

use super::ProxyBody;
use super::conn::{Conn, failure_outcome, host_value, origin_form};
use super::error::ProxyError;
use super::headers::strip_hop_by_hop;
use super::tries::{connect_timeout, read_timeout};
use crate::route::{Outcome, PoolState, RequestInfo};
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use http::header::{
    CONNECTION, HeaderMap, HeaderValue, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE,
};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::{Either, Empty, Full};
use hyper::body::Incoming;
use hyper::ext::Protocol;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;

/// An HTTP/1.1 request with `Upgrade` named in `Connection`, or an HTTP/2 extended CONNECT.
pub(super) fn is_upgrade<B>(req: &Request<B>) -> bool {
    if req.method() == Method::CONNECT {
        return req.extensions().get::<Protocol>().is_some();
    }
    req.version() == Version::HTTP_11
        && req.headers().contains_key(UPGRADE)
        && names_upgrade(req.headers())
}

fn names_upgrade(headers: &HeaderMap) -> bool {
    let values = headers.get_all(CONNECTION).iter();
    let mut tokens = values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    tokens.any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// The protocol asked for: HTTP/2's `:protocol`, else the `Upgrade` field.
fn protocol<B>(req: &Request<B>) -> Option<HeaderValue> {
    match req.extensions().get::<Protocol>() {
        Some(protocol) => HeaderValue::from_str(protocol.as_str()).ok(),
        None => req.headers().get(UPGRADE).cloned(),
    }
}

impl Conn {
    /// Forwards an upgrade request; when the upstream switches protocols, the tunnel runs
    /// beside the client connection and the client gets `101` (HTTP/1.1) or `200` (HTTP/2).
    pub(super) async fn upgrade(
        &self,
        pool: &PoolState,
        mut req: Request<crate::limits::Inbound>,
    ) -> Result<Response<ProxyBody>, ProxyError> {
        let (pool_id, metrics) = (pool.id(), &pool.metrics);
        let no_member = || ProxyError::NoReadyMember { pool: pool_id };
        let request = RequestInfo {
            headers: req.headers(),
            uri: req.uri(),
            client: self.client_of(&req),
        };
        let pick = pool.choose(&request, &[]).ok_or_else(no_member)?;
        let endpoint = pick.endpoint().clone();
        if endpoint.is_h2c() {
            return Err(ProxyError::UpgradeToH2c { pool: pool_id });
        }
        let upstream = endpoint.addr();
        let host = host_value(&req).ok_or(ProxyError::MissingHost)?;
        let protocol = protocol(&req).ok_or(ProxyError::BadTarget)?;
        let extended_connect = req.method() == Method::CONNECT;
        let client = hyper::upgrade::on(&mut req);
        let (mut parts, _) = req.into_parts();
        self.forwarded.apply(&mut parts.headers, host);
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(UPGRADE, protocol);
        if extended_connect {
            parts.method = Method::GET;
            // RFC 8441 §5: HTTP/2 has no key; an HTTP/1.1 upstream wants one.
            let headers = &mut parts.headers;
            headers
                .entry(SEC_WEBSOCKET_KEY)
                .or_insert_with(websocket_key);
        }
        origin_form(&mut parts.uri);
        parts.version = Version::HTTP_11;
        parts.extensions = http::Extensions::new();
        let req = Request::from_parts(parts, Empty::<Bytes>::new());
        let started = std::time::Instant::now();
        let timeout = read_timeout(pool, &self.proxy.limits);
        let opening = endpoint.open_tunnel(req, connect_timeout(pool));
        let opened = tokio::time::timeout(timeout, opening).await;
        let mut response = match opened {
            Err(_) => {
                let latency = started.elapsed();
                pool.record(pick, Outcome::Timeout { latency });
                return Err(ProxyError::UpstreamTimeout {
                    pool: pool_id,
                    upstream,
                });
            }
            Ok(Err(source)) => {
                pool.record(pick, failure_outcome(&source));
                return Err(ProxyError::Upstream {
                    pool: pool_id,
                    upstream,
                    source,
                });
            }
            Ok(Ok(response)) => response,
        };
        let latency = started.elapsed();
        metrics.observe_latency(latency);
        let outcome = if response.status().is_server_error() {
            Outcome::Status5xx { latency }
        } else {
            Outcome::Success { latency }
        };
        pool.record(pick, outcome);
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            return Ok(declined(response));
        }
        let tunnel = tunnel(client, hyper::upgrade::on(&mut response), upstream);
        self.open(tunnel);
        Ok(switched(response, extended_connect))
    }
}

/// The upstream did not switch: its answer goes back as any other.
fn declined(response: Response<Incoming>) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.version = Version::HTTP_11;
    Response::from_parts(parts, Either::Left(UpstreamBody::detached(body)))
}

/// The client's answer to a switch: `101` with the upstream's `Upgrade` over HTTP/1.1, `200`
/// without the key's proof over HTTP/2 (RFC 8441 §5).
fn switched(response: Response<Incoming>, extended_connect: bool) -> Response<ProxyBody> {
    let (mut parts, _) = response.into_parts();
    let upgrade = parts.headers.get(UPGRADE).cloned();
    strip_hop_by_hop(&mut parts.headers);
    if extended_connect {
        parts.status = StatusCode::OK;
        parts.headers.remove(SEC_WEBSOCKET_ACCEPT);
    } else if let Some(upgrade) = upgrade {
        parts
            .headers
            .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(UPGRADE, upgrade);
    }
    parts.version = Version::HTTP_11;
    Response::from_parts(parts, Either::Right(Full::new(Bytes::new())))
}

/// Joins the client's and the upstream's upgraded connections until either closes.
async fn tunnel(client: OnUpgrade, upstream: OnUpgrade, addr: SocketAddr) {
    let (client, upstream) = match tokio::try_join!(client, upstream) {
        Ok(both) => both,
        Err(error) => return tracing::debug!(%addr, %error, "upgrade failed"),
    };
    let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
    match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        Ok((up, down)) => tracing::debug!(%addr, up, down, "tunnel closed"),
        Err(error) => tracing::debug!(%addr, %error, "tunnel ended with an error"),
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 bytes from std's randomly seeded hasher, in base64. It
/// only has to differ between requests (RFC 6455 §4.1); it is no secret.
fn websocket_key() -> HeaderValue {
    let state = std::collections::hash_map::RandomState::new();
    let mut bytes = [0u8; 16];
    for (i, half) in bytes.chunks_mut(8).enumerate() {
        let mut hasher = state.build_hasher();
        hasher.write_usize(i);
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    HeaderValue::from_str(&base64(&bytes))
        .unwrap_or(HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_like_rfc_4648() {
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"the sample nonce"), "dGhlIHNhbXBsZSBub25jZQ==");
    }

    #[test]
    fn an_upgrade_needs_both_upgrade_and_connection_naming_it() {
        let req = |connection: &str| {
            let mut builder = Request::builder().header(UPGRADE, "websocket");
            if !connection.is_empty() {
                builder = builder.header(CONNECTION, connection);
            }
            builder.body(()).unwrap()
        };
        assert!(is_upgrade(&req("Upgrade")));
        assert!(is_upgrade(&req("keep-alive, upgrade")));
        assert!(!is_upgrade(&req("keep-alive")));
        assert!(!is_upgrade(&req("")));
    }
}
