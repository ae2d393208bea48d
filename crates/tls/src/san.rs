//! A server certificate verifier that checks the certificate's subject alternative names
//! against a list instead of the server name: a BackendTLSPolicy's `subjectAltNames`.
//!
//! The chain is verified against the trust anchors as webpki does for any server; then the
//! certificate must carry one of the names: a DNS name matched as webpki matches a server name
//! (wildcards included), or a URI (`uniformResourceIdentifier`) equal to it. The server name
//! (the policy's hostname) is still sent as SNI but not required in the certificate.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// One name a certificate may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectAltName {
    /// A DNS name (`dNSName`).
    Hostname(String),
    /// A URI (`uniformResourceIdentifier`), compared exactly.
    Uri(String),
}

/// Verifies the chain against trust anchors and requires one of [`SubjectAltName`]s.
#[derive(Debug)]
pub struct SubjectAltNameVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    names: Vec<SubjectAltName>,
}

impl SubjectAltNameVerifier {
    /// Trusts `roots`, checks signatures with `provider`'s algorithms, and requires one of
    /// `names` (none: no certificate is accepted).
    pub fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<CryptoProvider>,
        names: Vec<SubjectAltName>,
    ) -> Result<Self, String> {
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(SubjectAltNameVerifier { webpki, names })
    }
}

/// Whether `error` is webpki's "the chain is good, the name is not in it".
fn wrong_name(error: &rustls::Error) -> bool {
    matches!(
        error,
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        )
    )
}

impl ServerCertVerifier for SubjectAltNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verify = |name: &ServerName<'_>| {
            (self.webpki).verify_server_cert(end_entity, intermediates, name, ocsp, now)
        };
        // The chain (and dates), whatever the name: webpki checks the name last.
        match verify(server_name) {
            Ok(_) => {}
            Err(error) if wrong_name(&error) => {}
            Err(error) => return Err(error),
        }
        let uris = uri_names(end_entity);
        for name in &self.names {
            match name {
                SubjectAltName::Hostname(host) => {
                    let Ok(host) = ServerName::try_from(host.as_str()) else {
                        continue;
                    };
                    match verify(&host) {
                        Ok(verified) => return Ok(verified),
                        Err(error) if wrong_name(&error) => {}
                        Err(error) => return Err(error),
                    }
                }
                SubjectAltName::Uri(uri) => {
                    if uris.iter().any(|u| u == uri) {
                        return Ok(ServerCertVerified::assertion());
                    }
                }
            }
        }
        Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// DER tags read here.
const SEQUENCE: u8 = 0x30;
const EXTENSIONS: u8 = 0xa3;
const OBJECT_ID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const URI: u8 = 0x86;
/// The subjectAltName extension's OID, 2.5.29.17, as DER content.
const SUBJECT_ALT_NAME: [u8; 3] = [0x55, 0x1d, 0x11];

/// The URIs among the subject alternative names of a DER certificate (none when it does not
/// parse: the certificate then names no URI).
fn uri_names(cert: &[u8]) -> Vec<String> {
    san_entries(cert)
        .map(|names| {
            (elements(names))
                .filter(|(tag, _)| *tag == URI)
                .filter_map(|(_, v)| std::str::from_utf8(v).ok().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The content of the subjectAltName extension's GeneralNames sequence.
fn san_entries(cert: &[u8]) -> Option<&[u8]> {
    let (SEQUENCE, certificate, _) = tlv(cert)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = tlv(certificate)? else {
        return None;
    };
    let (_, extensions) = elements(tbs).find(|(tag, _)| *tag == EXTENSIONS)?;
    let (SEQUENCE, extensions, _) = tlv(extensions)? else {
        return None;
    };
    elements(extensions).find_map(|(tag, extension)| {
        if tag != SEQUENCE {
            return None;
        }
        let mut parts = elements(extension);
        let (OBJECT_ID, oid) = parts.next()? else {
            return None;
        };
        if oid != SUBJECT_ALT_NAME {
            return None;
        }
        // `critical` (a BOOLEAN) may come before the value.
        let (_, value) = parts.find(|(tag, _)| *tag == OCTET_STRING)?;
        let (SEQUENCE, names, _) = tlv(value)? else {
            return None;
        };
        Some(names)
    })
}

/// The elements (tag, content) of DER content, up to the first that does not parse.
fn elements(mut input: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (tag, content, rest) = tlv(input)?;
        input = rest;
        Some((tag, content))
    })
}

/// One DER element at the start of `input`: its tag (single-byte tags only), content and
/// what follows.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, rest) = rest.split_at_checked(n)?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, rest)
    };
    let (content, rest) = rest.split_at_checked(len)?;
    Some((tag, content, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, Issuer, KeyPair, SanType};

    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        roots: Arc<RootCertStore>,
    }

    fn ca() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        Ca {
            issuer: Issuer::new(params, key),
            roots: Arc::new(roots),
        }
    }

    fn leaf(ca: &Ca, sans: Vec<SanType>) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans;
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn verify(
        ca: &Ca,
        names: Vec<SubjectAltName>,
        cert: &CertificateDer<'_>,
    ) -> Result<(), rustls::Error> {
        let verifier =
            SubjectAltNameVerifier::new(ca.roots.clone(), crate::provider(), names).unwrap();
        let sni = ServerName::try_from("backend.example").unwrap();
        (verifier.verify_server_cert(cert, &[], &sni, &[], UnixTime::now())).map(|_| ())
    }

    fn dns(name: &str) -> SanType {
        SanType::DnsName(name.try_into().unwrap())
    }

    fn uri(name: &str) -> SanType {
        SanType::URI(name.try_into().unwrap())
    }

    #[test]
    fn one_of_the_names_must_be_in_the_certificate_instead_of_the_server_name() {
        let ca = ca();
        let spiffe = "spiffe://cluster.local/ns/shop/sa/web";
        let names = vec![
            SubjectAltName::Hostname("web.shop.internal".into()),
            SubjectAltName::Uri(spiffe.into()),
        ];
        let by_host = leaf(&ca, vec![dns("other.example"), dns("web.shop.internal")]);
        assert_eq!(verify(&ca, names.clone(), &by_host), Ok(()));
        let by_uri = leaf(&ca, vec![uri(spiffe)]);
        assert_eq!(verify(&ca, names.clone(), &by_uri), Ok(()));
        let wildcard = leaf(&ca, vec![dns("*.shop.internal")]);
        assert_eq!(verify(&ca, names.clone(), &wildcard), Ok(()));
        // The server name alone does not do; nor a URI that is only a prefix.
        let sni_only = leaf(&ca, vec![dns("backend.example")]);
        let refused = Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ));
        assert_eq!(verify(&ca, names.clone(), &sni_only), refused);
        let prefix = leaf(&ca, vec![uri("spiffe://cluster.local/ns/shop")]);
        assert_eq!(verify(&ca, names.clone(), &prefix), refused);
        assert_eq!(verify(&ca, vec![], &by_host), refused);
    }

    #[test]
    fn the_chain_is_still_verified() {
        let (ca, stranger) = (ca(), ca());
        let names = vec![SubjectAltName::Uri("spiffe://a/b".into())];
        let cert = leaf(&stranger, vec![uri("spiffe://a/b")]);
        // Another CA (of the same empty subject: its signature does not verify).
        let error = verify(&ca, names, &cert).unwrap_err();
        assert!(
            matches!(
                error,
                rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer | CertificateError::BadSignature
                )
            ),
            "{error:?}"
        );
    }

    #[test]
    fn uris_are_read_from_the_certificate_and_garbage_names_none() {
        let ca = ca();
        let cert = leaf(
            &ca,
            vec![dns("a.example"), uri("spiffe://x/y"), uri("urn:z")],
        );
        assert_eq!(uri_names(&cert), ["spiffe://x/y", "urn:z"]);
        assert!(uri_names(&leaf(&ca, vec![dns("a.example")])).is_empty());
        // Truncated and corrupted certificates parse to no names, without panicking.
        for len in 0..cert.len() {
            let _ = uri_names(&cert[..len]);
        }
        let mut long = cert.to_vec();
        long[1] = 0x84;
        assert!(uri_names(&long).is_empty());
        assert!(uri_names(&[0x30, 0xff, 0xff]).is_empty());
    }
}
