//! A real HTTP/3 client for the tests (quinn's QUIC with rustls, h3's framing): one QUIC
//! connection, requests on it, and what the server answered.

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Request, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;

/// An answer over HTTP/3.
#[derive(Debug)]
pub struct H3Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// An HTTP/3 connection to one server.
pub struct H3Client {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    /// Drives the connection; ended when it closes.
    driver: tokio::task::JoinHandle<()>,
    endpoint: quinn::Endpoint,
    connection: quinn::Connection,
}

impl std::fmt::Debug for H3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Client").finish_non_exhaustive()
    }
}

impl H3Client {
    /// Connects to `server` over QUIC, asking for `server_name` by SNI (TLS 1.3, ALPN `h3`,
    /// any certificate accepted: [`crate::accept_any_certificate`]).
    pub async fn connect(server: SocketAddr, server_name: &str) -> Result<H3Client, String> {
        let mut tls = crate::accept_any_certificate();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| format!("QUIC TLS configuration: {e}"))?;
        let config = quinn::ClientConfig::new(Arc::new(crypto));
        let local: SocketAddr = match server {
            SocketAddr::V4(_) => ([127, 0, 0, 1], 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::LOCALHOST, 0).into(),
        };
        let mut endpoint = quinn::Endpoint::client(local).map_err(|e| e.to_string())?;
        endpoint.set_default_client_config(config);
        let connecting = endpoint
            .connect(server, server_name)
            .map_err(|e| e.to_string())?;
        let connection = connecting.await.map_err(|e| format!("QUIC: {e}"))?;
        let quic = h3_quinn::Connection::new(connection.clone());
        let (mut driver, send) = h3::client::new(quic)
            .await
            .map_err(|e| format!("HTTP/3: {e}"))?;
        let driver = tokio::spawn(async move {
            let _closed = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(H3Client {
            send,
            driver,
            endpoint,
            connection,
        })
    }

    /// Sends `req` with `body` and reads the whole answer.
    pub async fn send(&mut self, req: Request<()>, body: &[u8]) -> Result<H3Answer, String> {
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        if !body.is_empty() {
            let data = Bytes::copy_from_slice(body);
            stream.send_data(data).await.map_err(|e| e.to_string())?;
        }
        stream.finish().await.map_err(|e| e.to_string())?;
        let response = stream
            .recv_response()
            .await
            .map_err(|e| format!("response: {e}"))?;
        let mut received = BytesMut::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            received.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
        }
        let (parts, ()) = response.into_parts();
        Ok(H3Answer {
            status: parts.status,
            headers: parts.headers,
            body: received.freeze(),
        })
    }

    /// `GET https://host/path`.
    pub async fn get(&mut self, host: &str, path: &str) -> Result<H3Answer, String> {
        let req = Request::get(format!("https://{host}{path}"))
            .body(())
            .map_err(|e| e.to_string())?;
        self.send(req, b"").await
    }

    /// The QUIC connection (to look at its TLS session: the server's certificate, ALPN).
    pub fn connection(&self) -> &quinn::Connection {
        &self.connection
    }
}

impl Drop for H3Client {
    fn drop(&mut self) {
        self.connection.close(0u32.into(), b"");
        self.endpoint.close(0u32.into(), b"");
        self.driver.abort();
    }
}
