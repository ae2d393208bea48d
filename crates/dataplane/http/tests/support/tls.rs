//! A TLS test client that accepts any certificate and reports which one it got, and
//! certificate material from a test authority.

use portico_tls::Material;
use portico_tls::generate::Authority;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
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
