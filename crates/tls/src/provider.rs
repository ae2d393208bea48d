//! The one crypto provider and protocol set of Portico's TLS endpoints.

use rustls::SupportedProtocolVersion;
use rustls::crypto::CryptoProvider;
use std::sync::{Arc, OnceLock};

/// TLS 1.3 and 1.2; nothing older (no SSLv3, TLS 1.0 or 1.1).
pub static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// rustls' ring provider, shared. Its cipher suites are all AEAD with forward secrecy: AES-GCM
/// and ChaCha20-Poly1305, with ECDHE key exchange under TLS 1.2; no CBC, RC4, 3DES or RSA key
/// exchange.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cipher_suite_is_aead_with_forward_secrecy() {
        for suite in &provider().cipher_suites {
            let name = format!("{:?}", suite.suite());
            let aead = name.contains("_GCM_") || name.contains("CHACHA20_POLY1305");
            let tls13_or_ecdhe = name.starts_with("TLS13_") || name.starts_with("TLS_ECDHE_");
            assert!(aead && tls13_or_ecdhe, "weak suite {name}");
        }
    }
}
