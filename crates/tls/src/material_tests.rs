use super::*;
use crate::generate::Authority;

const RSA_PKCS1_KEY: &str = include_str!("../testdata/rsa-pkcs1.key");
const RSA_PKCS1_CRT: &str = include_str!("../testdata/rsa-pkcs1.crt");
const EC_SEC1_KEY: &str = include_str!("../testdata/ec-sec1.key");
const EC_SEC1_CRT: &str = include_str!("../testdata/ec-sec1.crt");

fn load(chain: &str, key: &str) -> Result<Material, MaterialError> {
    Material::from_pem(chain.as_bytes(), key.as_bytes())
}

#[test]
fn pkcs1_rsa_key_loads() {
    assert!(RSA_PKCS1_KEY.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let material = load(RSA_PKCS1_CRT, RSA_PKCS1_KEY).unwrap();
    assert_eq!(material.chain_len(), 1);
}

#[test]
fn sec1_ec_key_after_an_ec_parameters_block_loads() {
    assert!(EC_SEC1_KEY.starts_with("-----BEGIN EC PARAMETERS-----"));
    assert!(EC_SEC1_KEY.contains("-----BEGIN EC PRIVATE KEY-----"));
    assert!(load(EC_SEC1_CRT, EC_SEC1_KEY).is_ok());
}

#[test]
fn pkcs8_key_and_a_chain_load_leaf_first() {
    let ca = Authority::new("test ca").unwrap();
    let issued = ca.issue(&["a.test"]).unwrap();
    assert!(issued.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let material = load(&issued.chain_pem, &issued.key_pem).unwrap();
    assert_eq!(material.chain_len(), 2);
    let leaf = CertificateDer::from_pem_slice(issued.leaf_pem.as_bytes()).unwrap();
    assert_eq!(material.leaf(), &leaf);
}

#[test]
fn a_key_of_another_certificate_is_a_mismatch() {
    assert_eq!(
        load(RSA_PKCS1_CRT, EC_SEC1_KEY),
        Err(MaterialError::KeyMismatch)
    );
    let ca = Authority::new("test ca").unwrap();
    let (a, b) = (
        ca.issue(&["a.test"]).unwrap(),
        ca.issue(&["a.test"]).unwrap(),
    );
    assert_eq!(
        load(&a.chain_pem, &b.key_pem),
        Err(MaterialError::KeyMismatch)
    );
}

#[test]
fn empty_or_garbage_input_names_the_part_at_fault() {
    assert_eq!(load("", EC_SEC1_KEY), Err(MaterialError::NoCertificate));
    assert_eq!(
        load("hello", EC_SEC1_KEY),
        Err(MaterialError::NoCertificate)
    );
    assert_eq!(load(EC_SEC1_CRT, ""), Err(MaterialError::NoKey));
    assert_eq!(load(EC_SEC1_CRT, EC_SEC1_CRT), Err(MaterialError::NoKey));
    let truncated = &EC_SEC1_CRT[..EC_SEC1_CRT.len() - 30];
    assert!(matches!(
        load(truncated, EC_SEC1_KEY),
        Err(MaterialError::CertificatePem(_))
    ));
}

#[test]
fn a_key_with_broken_base64_is_reported_without_its_content() {
    let broken = RSA_PKCS1_KEY.replacen("MII", "M!!", 1);
    let err = load(RSA_PKCS1_CRT, &broken).unwrap_err();
    assert!(matches!(err, MaterialError::KeyPem(_)), "{err:?}");
    let body: Vec<&str> = RSA_PKCS1_KEY
        .lines()
        .filter(|l| !l.starts_with("---"))
        .collect();
    let shown = format!("{err} {err:?}");
    assert!(
        body.iter().all(|line| !shown.contains(&line[..16])),
        "{shown}"
    );
}

#[test]
fn a_certificate_that_is_not_x509_is_reported() {
    let junk = "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n";
    assert_eq!(load(junk, EC_SEC1_KEY), Err(MaterialError::BadCertificate));
}

#[test]
fn debug_output_hides_the_key() {
    let material = load(RSA_PKCS1_CRT, RSA_PKCS1_KEY).unwrap();
    let shown = format!("{material:?}");
    assert!(
        shown.contains("redacted") && !shown.contains("MII"),
        "{shown}"
    );
}

#[test]
fn pem_gives_back_the_chain_then_the_key() {
    let material = load(EC_SEC1_CRT, EC_SEC1_KEY).unwrap();
    let pem = String::from_utf8(material.pem()).unwrap();
    assert!(pem.starts_with(EC_SEC1_CRT.trim_end()));
    assert!(pem.ends_with(EC_SEC1_KEY));
    let again = Material::from_pem(pem.as_bytes(), pem.as_bytes()).unwrap();
    assert_eq!(again.leaf(), material.leaf());
}

#[test]
fn self_signed_certificate_loads() {
    let material = crate::self_signed(&["portico.invalid"]).unwrap();
    assert_eq!(material.chain_len(), 1);
}
