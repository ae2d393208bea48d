//! The certificate served when no configured one fits: self-signed, made at start.

use crate::Material;
use rcgen::{CertificateParams, DnType, KeyPair};

/// Why the self-signed certificate could not be made (the system has no randomness, or rcgen
/// refused the parameters).
#[derive(Debug, thiserror::Error)]
pub enum SelfSignedError {
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("loading the generated certificate: {0}")]
    Load(#[from] crate::MaterialError),
}

/// The subject of the generated default certificate.
pub const SELF_SIGNED_SUBJECT: &str = "Portico Default Certificate";

/// A new ECDSA P-256 key and a self-signed certificate for `names` (DNS names) with the
/// subject [`SELF_SIGNED_SUBJECT`], like ingress-nginx's "Fake Certificate".
pub fn self_signed(names: &[&str]) -> Result<Material, SelfSignedError> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(DnType::CommonName, SELF_SIGNED_SUBJECT);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Material::from_pem(
        cert.pem().as_bytes(),
        key.serialize_pem().as_bytes(),
    )?)
}
