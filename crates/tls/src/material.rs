//! A certificate chain and its private key, parsed from PEM and checked to belong together.

use crate::provider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::sync::Arc;

/// Why PEM input is not usable material. Messages name the part (`tls.crt`, `tls.key`) and the
/// reason, never the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaterialError {
    #[error("tls.crt holds no PEM certificate")]
    NoCertificate,
    #[error("tls.crt is not valid PEM: {0}")]
    CertificatePem(&'static str),
    #[error("tls.crt: the first certificate cannot be parsed as X.509")]
    BadCertificate,
    #[error("tls.key holds no PEM private key (RSA PRIVATE KEY, PRIVATE KEY or EC PRIVATE KEY)")]
    NoKey,
    #[error("tls.key is not valid PEM: {0}")]
    KeyPem(&'static str),
    #[error(
        "tls.key is not a supported private key (RSA of 2048 bits or more, ECDSA P-256 or P-384, Ed25519)"
    )]
    UnsupportedKey,
    #[error("tls.key does not match the certificate in tls.crt")]
    KeyMismatch,
}

/// A validated certificate chain (leaf first) with its private key: what rustls serves, and the
/// PEM it came from (for data planes that read PEM files, such as haproxy).
#[derive(Clone)]
pub struct Material {
    certified: Arc<CertifiedKey>,
    chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl Material {
    /// Parses `chain_pem` (one or more `CERTIFICATE` blocks, leaf first; other blocks are
    /// skipped) and `key_pem` (the first `RSA PRIVATE KEY`, `PRIVATE KEY` or `EC PRIVATE KEY`
    /// block) and checks that the key is the leaf certificate's.
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, MaterialError> {
        let chain = certificates(chain_pem)?;
        let key = private_key(key_pem)?;
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|_| MaterialError::UnsupportedKey)?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(MaterialError::KeyMismatch);
            }
            // ring's keys always know their public key; "unknown" cannot happen with them.
            Err(rustls::Error::InconsistentKeys(_)) => {}
            Err(_) => return Err(MaterialError::BadCertificate),
        }
        Ok(Material {
            certified: Arc::new(certified),
            chain_pem: chain_pem.to_vec(),
            key_pem: key_pem.to_vec(),
        })
    }

    /// What rustls serves.
    pub fn certified_key(&self) -> &Arc<CertifiedKey> {
        &self.certified
    }

    /// The leaf certificate (DER).
    pub fn leaf(&self) -> &CertificateDer<'static> {
        &self.certified.cert[0]
    }

    /// The number of certificates in the chain, leaf included.
    pub fn chain_len(&self) -> usize {
        self.certified.cert.len()
    }

    /// The certificate chain as given (PEM).
    pub fn chain_pem(&self) -> &[u8] {
        &self.chain_pem
    }

    /// The private key as given (PEM). Key material: never log it.
    pub fn key_pem(&self) -> &[u8] {
        &self.key_pem
    }

    /// The chain then the key, as PEM: the `crt` file format of haproxy and nginx. Key
    /// material: write it only to files readable by the data plane alone.
    pub fn pem(&self) -> Vec<u8> {
        let mut out = self.chain_pem.clone();
        if !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(&self.key_pem);
        out
    }
}

/// Same input, same material (the parsed form follows from the PEM).
impl PartialEq for Material {
    fn eq(&self, other: &Self) -> bool {
        self.chain_pem == other.chain_pem && self.key_pem == other.key_pem
    }
}

impl Eq for Material {}

/// The chain length only: key material never reaches a log.
impl fmt::Debug for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Material")
            .field("certificates", &self.chain_len())
            .field("key", &"<redacted>")
            .finish()
    }
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, MaterialError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| MaterialError::CertificatePem(reason(&e)))?;
    if chain.is_empty() {
        return Err(MaterialError::NoCertificate);
    }
    Ok(chain)
}

fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, MaterialError> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(MaterialError::NoKey),
        Err(e) => Err(MaterialError::KeyPem(reason(&e))),
    }
}

/// The kind of PEM error, without the bytes some variants carry (they could be key material).
pub(crate) fn reason(error: &pem::Error) -> &'static str {
    match error {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a section is not valid base64",
        pem::Error::SectionTooLarge => "a section is too large",
        _ => "unreadable",
    }
}

#[cfg(test)]
#[path = "material_tests.rs"]
mod tests;
