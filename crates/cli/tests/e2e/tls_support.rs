//! TLS for the end-to-end tests: Secrets as manifest files, a rustls client that either
//! verifies against a test authority or accepts anything and reports the certificate it got,
//! HTTP/1.1 and HTTP/2 over it; the gRPC-style h2c backend comes from portico-testkit.

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use portico_tls::generate::{Authority, Issued};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A `kubernetes.io/tls` Secret as a JSON manifest (base64 `data`, as the API server stores it).
pub fn tls_secret(ns: &str, name: &str, chain_pem: &str, key_pem: &str) -> String {
    let data = [("tls.crt", chain_pem), ("tls.key", key_pem)]
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())));
    let secret = Secret {
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data.into_iter().collect()),
        ..Secret::default()
    };
    let mut doc = serde_json::to_value(&secret).unwrap();
    doc["apiVersion"] = "v1".into();
    doc["kind"] = "Secret".into();
    doc["metadata"] = serde_json::json!({"name": name, "namespace": ns});
    doc.to_string()
}

pub fn issued_secret(ns: &str, name: &str, issued: &Issued) -> String {
    tls_secret(ns, name, &issued.chain_pem, &issued.key_pem)
}

/// The DER of the first certificate of a PEM chain.
pub fn leaf_of(chain_pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(chain_pem.as_bytes()).unwrap()
}

/// How a test client checks the server.
pub enum Trust<'a> {
    /// Anything goes; look at `TlsConn::leaf`.
    Any,
    /// A chain to this authority, for the name sent as SNI.
    Authority(&'a Authority),
}

/// An established TLS connection and what the handshake showed.
pub struct TlsConn {
    pub stream: TlsStream<TcpStream>,
    pub leaf: CertificateDer<'static>,
    pub alpn: Option<Vec<u8>>,
}

fn config(trust: Trust<'_>, alpn: &[&[u8]]) -> ClientConfig {
    let mut config = match trust {
        Trust::Any => portico_testkit::accept_any_certificate(),
        Trust::Authority(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(leaf_of(ca.cert_pem())).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = ClientConfig::builder_with_provider(provider);
            let builder = builder.with_safe_default_protocol_versions().unwrap();
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A handshake with `addr`, sending `sni` (none: no SNI extension) and offering `alpn`.
pub async fn try_connect(
    addr: SocketAddr,
    sni: Option<&str>,
    alpn: &[&[u8]],
    trust: Trust<'_>,
) -> std::io::Result<TlsConn> {
    let tcp = TcpStream::connect(addr).await?;
    handshake(tcp, sni, alpn, trust).await
}

/// The same handshake on a connection already open (after a PROXY protocol header, say).
pub async fn handshake(
    tcp: TcpStream,
    sni: Option<&str>,
    alpn: &[&[u8]],
    trust: Trust<'_>,
) -> std::io::Result<TlsConn> {
    let mut config = config(trust, alpn);
    config.enable_sni = sni.is_some();
    let name = ServerName::try_from(sni.unwrap_or("no-sni.invalid").to_owned()).unwrap();
    let stream = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let (_, session) = stream.get_ref();
    let leaf = session.peer_certificates().unwrap()[0].clone().into_owned();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    Ok(TlsConn { stream, leaf, alpn })
}

pub async fn connect(addr: SocketAddr, sni: Option<&str>, alpn: &[&[u8]]) -> TlsConn {
    try_connect(addr, sni, alpn, Trust::Any).await.unwrap()
}

/// The answer to a request, with the trailers if any.
pub struct Answer {
    pub status: u16,
    pub version: http::Version,
    pub headers: HeaderMap,
    pub body: String,
    pub trailers: Option<HeaderMap>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn service(&self) -> String {
        self.json()["service"].as_str().unwrap_or("").to_owned()
    }
}

async fn answer(response: Response<Incoming>) -> Answer {
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    Answer {
        status: parts.status.as_u16(),
        version: parts.version,
        headers: parts.headers,
        body: String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        trailers,
    }
}

/// HTTP/1.1 over a TLS connection.
pub struct H1(http1::SendRequest<Full<Bytes>>);

impl H1 {
    pub async fn over(conn: TlsConn) -> H1 {
        let (sender, io) = http1::handshake(TokioIo::new(conn.stream)).await.unwrap();
        tokio::spawn(io);
        H1(sender)
    }

    pub async fn get(&mut self, host: &str, path: &str) -> Answer {
        let req = Request::get(path).header("host", host);
        let response = self.0.send_request(req.body(Full::default()).unwrap());
        answer(response.await.unwrap()).await
    }
}

/// HTTP/2 over a TLS connection.
pub struct H2(http2::SendRequest<Full<Bytes>>);

impl H2 {
    pub async fn over(conn: TlsConn) -> H2 {
        let io = TokioIo::new(conn.stream);
        let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await.unwrap();
        tokio::spawn(conn);
        H2(sender)
    }

    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Answer {
        answer(self.0.send_request(req).await.unwrap()).await
    }
}

pub use portico_testkit::grpc_backend;
