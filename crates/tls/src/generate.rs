//! Certificates made on the spot, for tests and benchmarks: a certificate authority that
//! issues leaf certificates (ECDSA P-256, PKCS#8 keys) for given DNS names.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A PEM certificate chain (leaf, then the authority) and the leaf's PEM private key.
#[derive(Clone)]
pub struct Issued {
    pub chain_pem: String,
    pub key_pem: String,
    /// The leaf certificate alone.
    pub leaf_pem: String,
}

/// A self-signed certificate authority.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority")
    }
}

impl Authority {
    /// A new authority whose subject is `name`.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
        })
    }

    /// The authority's certificate (PEM), for clients to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A leaf certificate for `names` (the first is also the subject's common name), with a
    /// new key.
    pub fn issue(&self, names: &[&str]) -> Result<Issued, rcgen::Error> {
        self.issue_with_uris(names, &[])
    }

    /// [`Authority::issue`], the certificate also naming `uris` (URI subject alternative
    /// names, such as SPIFFE IDs).
    pub fn issue_with_uris(&self, names: &[&str], uris: &[&str]) -> Result<Issued, rcgen::Error> {
        let owned: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(owned)?;
        for uri in uris {
            let uri = rcgen::SanType::URI((*uri).try_into()?);
            params.subject_alt_names.push(uri);
        }
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, *first);
        }
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            chain_pem: format!("{}{}", leaf.pem(), self.cert_pem),
            key_pem: key.serialize_pem(),
            leaf_pem: leaf.pem(),
        })
    }
}
