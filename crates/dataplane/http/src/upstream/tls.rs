//! TLS towards the members of `Https` and `H2` pools (`backend-protocol: HTTPS`, `GRPCS`): a
//! rustls client configuration per pool settings, ALPN `h2` or `http/1.1`.
//!
//! With `proxy-ssl-verify` on, the member's certificate must chain to the pool's CA bundle
//! (`proxy-ssl-secret`) and name the server name (webpki verification); without a usable CA
//! bundle the connection fails (closed: `502`), it never falls back to no verification. With
//! `subject_alt_names` (a BackendTLSPolicy's `subjectAltNames`), the certificate must carry one
//! of them instead of the server name ([`SubjectAltNameVerifier`]). With it off (ingress-nginx's default), any certificate is
//! accepted: [`portico_tls::AcceptAnyServerCertificate`].

use super::endpoint::UpstreamError;
use portico_model::{PoolProtocol, SubjectAltName, UpstreamTls};
use portico_tls::SubjectAltName as SanName;
use portico_tls::{AcceptAnyServerCertificate, CaBundle, SubjectAltNameVerifier};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How an endpoint's connections start TLS.
pub(crate) struct TlsClient {
    /// `Err`: why no connection can be verified (they all fail).
    connector: Result<TlsConnector, String>,
    server_name: ServerName<'static>,
}

impl TlsClient {
    /// The client for a pool speaking `protocol` with `tls` (its server name filled in).
    /// `ca`: the bundle to verify against, when `tls.verify` (none: every connection fails).
    pub(crate) fn new(protocol: PoolProtocol, tls: &UpstreamTls, ca: Option<&CaBundle>) -> Self {
        let name = tls.server_name.clone().unwrap_or_default();
        let server_name = ServerName::try_from(name.clone())
            .unwrap_or_else(|_| ServerName::try_from("invalid.invalid").expect("a DNS name"));
        let connector = config(protocol, tls, ca).map(|c| TlsConnector::from(Arc::new(c)));
        TlsClient {
            connector,
            server_name,
        }
    }

    /// The TLS handshake on `stream`.
    pub(crate) async fn connect(
        &self,
        stream: TcpStream,
    ) -> Result<TlsStream<TcpStream>, UpstreamError> {
        let connector = self
            .connector
            .as_ref()
            .map_err(|why| UpstreamError::Tls(std::io::Error::other(why.clone())))?;
        connector
            .connect(self.server_name.clone(), stream)
            .await
            .map_err(UpstreamError::Tls)
    }
}

fn config(
    protocol: PoolProtocol,
    tls: &UpstreamTls,
    ca: Option<&CaBundle>,
) -> Result<ClientConfig, String> {
    let provider = portico_tls::provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let mut config = if tls.verify {
        let Some(bundle) = ca else {
            let ca = tls.ca.as_ref().map_or_else(
                || "no proxy-ssl-secret".to_owned(),
                |ca| format!("Secret {}/{}", ca.namespace, ca.name),
            );
            return Err(format!(
                "verifying the member's certificate needs a usable CA bundle (ca.crt) of {ca}"
            ));
        };
        if tls.subject_alt_names.is_empty() {
            builder
                .with_root_certificates(bundle.roots().clone())
                .with_no_client_auth()
        } else {
            let names = tls.subject_alt_names.iter().map(|name| match name {
                SubjectAltName::Hostname(host) => SanName::Hostname(host.clone()),
                SubjectAltName::Uri(uri) => SanName::Uri(uri.clone()),
            });
            let verifier =
                SubjectAltNameVerifier::new(bundle.roots().clone(), provider, names.collect())?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCertificate::new(provider)))
            .with_no_client_auth()
    };
    config.enable_sni = tls.sni;
    config.alpn_protocols = match protocol {
        PoolProtocol::H2 => vec![b"h2".to_vec()],
        _ => vec![b"http/1.1".to_vec()],
    };
    Ok(config)
}
