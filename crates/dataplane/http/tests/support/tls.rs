//! A TLS test client that accepts any certificate and reports which one it got, and an h2c
//! backend that answers like a gRPC server (trailers after the body).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use portico_tls::Material;
use portico_tls::generate::Authority;
use rustls::pki_types::{CertificateDer, ServerName};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A TLS connection: the certificate the server presented and the protocol ALPN chose.
pub struct Tls {
    pub stream: TlsStream<TcpStream>,
    pub leaf: CertificateDer<'static>,
    pub alpn: Option<Vec<u8>>,
}

/// Connects to `addr` with SNI `server_name` (none: no SNI), offering `alpn`.
pub async fn connect(addr: SocketAddr, server_name: Option<&str>, alpn: &[&[u8]]) -> Tls {
    let mut config = portico_testkit::accept_any_certificate();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.enable_sni = server_name.is_some();
    let name = ServerName::try_from(server_name.unwrap_or("no-sni.invalid").to_owned()).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let stream = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let (_, session) = stream.get_ref();
    let leaf = session.peer_certificates().unwrap()[0].clone().into_owned();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    Tls { stream, leaf, alpn }
}

/// Certificates from one authority, as `Material` (what the proxy serves).
pub fn material(ca: &Authority, names: &[&str]) -> Arc<Material> {
    let issued = ca.issue(names).unwrap();
    let m = Material::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes());
    Arc::new(m.unwrap())
}

/// An HTTP/2-only (h2c) backend: answers `name`, the protocol and the content-type it got,
/// then `grpc-status: 0` as a trailer.
pub async fn h2c_backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service_fn(move |req| grpc_reply(name, req));
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    addr
}

async fn grpc_reply(name: &str, req: Request<Incoming>) -> Result<Response<Trailered>, Infallible> {
    let header = |k| {
        req.headers()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let text = format!(
        "backend: {name}\nversion: {:?}\ncontent-type: {}\nte: {}\nx-forwarded-proto: {}\n",
        req.version(),
        header("content-type"),
        header("te"),
        header("x-forwarded-proto"),
    );
    let _ = req.into_body().collect().await;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let body = Trailered {
        data: Some(Bytes::from(text)),
        trailers: Some(trailers),
    };
    Ok(Response::builder()
        .header("content-type", "application/grpc")
        .body(body)
        .unwrap())
}

/// A body of one data frame, then trailers.
pub struct Trailered {
    pub data: Option<Bytes>,
    pub trailers: Option<HeaderMap>,
}

impl Body for Trailered {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}
