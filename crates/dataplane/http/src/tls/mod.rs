//! TLS termination for the TERMINATED_HTTPS listeners: a rustls server configuration (TLS 1.2
//! and 1.3, ALPN `h2` and `http/1.1`; none for the streams of terminated TLSRoutes) whose certificate resolver reads an SNI map that
//! [`crate::Proxy::set_certificates`] swaps atomically. A new handshake sees the newest map;
//! open connections keep the certificate they were established with.

mod sni;

pub use sni::SniMap;

/// Trusted CA bundles by Secret reference, as pools' `upstream_tls.ca` name them.
pub type CaBySecret =
    std::collections::BTreeMap<portico_model::ObjectRef, Arc<portico_tls::CaBundle>>;

use arc_swap::ArcSwap;
use portico_tls::Material;
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::Arc;

/// The names of the generated default certificate (an unroutable, reserved domain).
const SELF_SIGNED_NAMES: &[&str] = &["portico.invalid"];

/// The certificate resolver: reads the current SNI map on every handshake.
#[derive(Debug)]
pub(crate) struct Resolver {
    map: ArcSwap<SniMap>,
    /// Served when no configured certificate fits and no default certificate is configured.
    fallback: Option<Arc<CertifiedKey>>,
}

impl Resolver {
    /// A resolver with no SNI entries, serving a new self-signed certificate until told
    /// otherwise. Should generating it fail, handshakes that need it fail.
    pub(crate) fn new() -> Self {
        let fallback = match portico_tls::self_signed(SELF_SIGNED_NAMES) {
            Ok(material) => Some(material.certified_key().clone()),
            Err(error) => {
                tracing::error!(%error, "no default certificate: handshakes without a match fail");
                None
            }
        };
        Resolver {
            map: ArcSwap::from_pointee(SniMap::default()),
            fallback,
        }
    }

    pub(crate) fn store(&self, map: SniMap) {
        self.map.store(Arc::new(map));
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let map = self.map.load();
        let found = map.resolve(hello.server_name());
        found.cloned().or_else(|| self.fallback.clone())
    }
}

/// The server configuration of every TLS connection, around `resolver`.
pub(crate) fn server_config(resolver: Arc<Resolver>) -> Arc<ServerConfig> {
    let alpn = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config_for(resolver, portico_tls::PROTOCOL_VERSIONS, alpn))
}

/// The server configuration of the TLS connections whose decrypted stream is sent on as it is
/// (TLSRoutes on listeners of `tls.mode: Terminate`): the same certificates, no ALPN (the
/// stream is no HTTP of ours to name).
pub(crate) fn stream_server_config(resolver: Arc<Resolver>) -> Arc<ServerConfig> {
    Arc::new(config_for(
        resolver,
        portico_tls::PROTOCOL_VERSIONS,
        Vec::new(),
    ))
}

/// The TLS configuration of HTTP/3 (QUIC needs TLS 1.3, and names `h3` in ALPN) around the
/// same certificates. No early data (rustls's default, kept explicit): 0-RTT requests could
/// be replayed.
pub(crate) fn quic_server_config(resolver: Arc<Resolver>) -> Arc<ServerConfig> {
    let mut config = config_for(resolver, &[&rustls::version::TLS13], vec![b"h3".to_vec()]);
    config.max_early_data_size = 0;
    Arc::new(config)
}

/// A server configuration around `resolver` with `versions` and `alpn`, and the session
/// tickets of both.
fn config_for(
    resolver: Arc<Resolver>,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: Vec<Vec<u8>>,
) -> ServerConfig {
    let builder = ServerConfig::builder_with_provider(portico_tls::provider())
        .with_protocol_versions(versions);
    // Only fails for a provider without suites for these versions, which ring is not.
    let builder = match builder {
        Ok(builder) => builder,
        Err(error) => unreachable!("the ring provider supports TLS 1.2 and 1.3: {error}"),
    };
    let mut config = builder.with_no_client_auth().with_cert_resolver(resolver);
    config.alpn_protocols = alpn;
    // Session tickets (stateless resumption, keys rotated by rustls), as nginx and haproxy
    // offer by default; the stateful session cache stays as well.
    match rustls::crypto::ring::Ticketer::new() {
        Ok(ticketer) => config.ticketer = ticketer,
        Err(error) => tracing::warn!(%error, "no TLS session tickets"),
    }
    // One TLS 1.3 ticket per handshake (rustls sends two by default): a client that resumes
    // gets a new ticket with every connection, and one fewer ticket to make, send, decrypt and
    // store is a share of every new connection's cost on both sides. OpenSSL sends one after a
    // resumption (two after a full handshake); Go's crypto/tls, and with it Traefik, one.
    config.send_tls13_tickets = 1;
    config
}

/// Material by Secret reference, as [`crate::Proxy::set_certificates`] takes it.
pub type MaterialBySecret = std::collections::BTreeMap<portico_model::ObjectRef, Arc<Material>>;

#[cfg(test)]
mod tickets_tests;
