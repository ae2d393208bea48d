//! A bundle of trusted CA certificates (the `ca.crt` of a `proxy-ssl-secret`), parsed from PEM
//! and checked to be usable as trust anchors: what a data plane verifies its upstreams' server
//! certificates against.

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use std::fmt;
use std::sync::Arc;

/// Why PEM input is not a usable CA bundle. Names the part and the reason, never the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaBundleError {
    #[error("ca.crt holds no PEM certificate")]
    NoCertificate,
    #[error("ca.crt is not valid PEM: {0}")]
    Pem(&'static str),
    #[error("ca.crt: certificate {0} cannot be parsed as an X.509 trust anchor")]
    BadCertificate(usize),
}

/// Trusted CA certificates: the roots a verifying client starts from, and the PEM they came
/// from (for data planes that read PEM files, such as haproxy's `ca-file`).
#[derive(Clone)]
pub struct CaBundle {
    roots: Arc<RootCertStore>,
    pem: Vec<u8>,
}

impl CaBundle {
    /// Parses the `CERTIFICATE` blocks of `pem` (other blocks are skipped); each must be a
    /// valid trust anchor.
    pub fn from_pem(pem: &[u8]) -> Result<Self, CaBundleError> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CaBundleError::Pem(crate::material::reason(&e)))?;
        if certs.is_empty() {
            return Err(CaBundleError::NoCertificate);
        }
        let mut roots = RootCertStore::empty();
        for (i, cert) in certs.into_iter().enumerate() {
            roots
                .add(cert)
                .map_err(|_| CaBundleError::BadCertificate(i + 1))?;
        }
        Ok(CaBundle {
            roots: Arc::new(roots),
            pem: pem.to_vec(),
        })
    }

    /// The trust anchors, for a rustls client configuration.
    pub fn roots(&self) -> &Arc<RootCertStore> {
        &self.roots
    }

    /// The number of CA certificates.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// Never true for a parsed bundle (it holds at least one certificate).
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The bundle as given (PEM).
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }
}

/// Same input, same bundle.
impl PartialEq for CaBundle {
    fn eq(&self, other: &Self) -> bool {
        self.pem == other.pem
    }
}

impl Eq for CaBundle {}

impl std::hash::Hash for CaBundle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pem.hash(state);
    }
}

/// The count only: Secret data never reaches a log.
impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle")
            .field("certificates", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::Authority;

    #[test]
    fn a_bundle_of_two_authorities_parses_and_bad_input_says_why_without_content() {
        let a = Authority::new("a").unwrap();
        let b = Authority::new("b").unwrap();
        let pem = format!("{}{}", a.cert_pem(), b.cert_pem());
        let bundle = CaBundle::from_pem(pem.as_bytes()).unwrap();
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle.pem(), pem.as_bytes());
        assert_eq!(format!("{bundle:?}"), "CaBundle { certificates: 2 }");

        assert_eq!(
            CaBundle::from_pem(b"not pem at all"),
            Err(CaBundleError::NoCertificate)
        );
        let broken = "-----BEGIN CERTIFICATE-----\nSECRET!!\n-----END CERTIFICATE-----\n";
        let error = CaBundle::from_pem(broken.as_bytes()).unwrap_err();
        assert!(matches!(error, CaBundleError::Pem(_)), "{error:?}");
        assert!(!error.to_string().contains("SECRET"));
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let with_garbage = format!("{}{garbage}", a.cert_pem());
        assert_eq!(
            CaBundle::from_pem(with_garbage.as_bytes()),
            Err(CaBundleError::BadCertificate(2))
        );
    }
}
