//! The TLS Secrets of the generated cluster: one certificate authority, one leaf certificate
//! (ECDSA P-256) per TLS Ingress for its hosts.

use super::Layout;
use super::yaml;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::io;
use std::path::{Path, PathBuf};

/// The chain-and-key PEM file of Ingress `i`'s certificate (what nginx is given).
pub fn pem_file(dir: &Path, layout: &Layout, i: usize) -> PathBuf {
    dir.join("secrets")
        .join(format!("{}.pem", layout.tls_secret_name(i)))
}

/// Writes the Secret and the PEM file of every TLS Ingress.
pub fn write_secrets(dir: &Path, layout: &Layout) -> io::Result<()> {
    if layout.tls_secrets == 0 {
        return Ok(());
    }
    std::fs::create_dir_all(dir.join("secrets"))?;
    let ca = Authority::new().map_err(io::Error::other)?;
    for i in (0..layout.sizes.ingresses).filter(|i| layout.has_tls(*i)) {
        let (chain, key) = ca
            .issue(&layout.ingress_hosts(i))
            .map_err(io::Error::other)?;
        let name = layout.tls_secret_name(i);
        let secret = dir.join("secrets").join(format!("{name}.yaml"));
        std::fs::write(secret, yaml::tls_secret(&name, &chain, &key))?;
        std::fs::write(pem_file(dir, layout, i), format!("{chain}{key}"))?;
    }
    Ok(())
}

struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Authority {
    fn new() -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "portico-bench CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Authority {
            issuer: Issuer::new(params, key),
            pem,
        })
    }

    /// A leaf for `hosts`: (chain PEM, key PEM).
    fn issue(&self, hosts: &[String]) -> Result<(String, String), rcgen::Error> {
        let params = CertificateParams::new(hosts.to_vec())?;
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        Ok((format!("{}{}", leaf.pem(), self.pem), key.serialize_pem()))
    }
}
