use super::*;
use crate::{AcceptAnyServerCertificate, PROTOCOL_VERSIONS, provider};
use rustls::pki_types::ServerName;
use std::sync::Arc;

/// The first flight rustls' own client sends for `name` (with SNI unless `name` is an address).
fn client_hello(name: &str) -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(PROTOCOL_VERSIONS)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCertificate::new(provider())))
        .with_no_client_auth();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

#[test]
fn rustls_client_hello_names_its_host_lowercased() {
    let hello = client_hello("Pass.Example.COM");
    assert_eq!(peek_sni(&hello), Sni::Host("pass.example.com".into()));
}

#[test]
fn client_hello_to_an_address_has_no_name() {
    assert_eq!(peek_sni(&client_hello("127.0.0.1")), Sni::Absent);
}

#[test]
fn every_proper_prefix_of_a_hello_is_incomplete() {
    let hello = client_hello("pass.example.com");
    for cut in 0..hello.len() {
        assert_eq!(peek_sni(&hello[..cut]), Sni::Incomplete, "cut at {cut}");
    }
}

#[test]
fn bytes_after_the_first_record_are_ignored() {
    let mut hello = client_hello("a.example");
    hello.extend_from_slice(b"trailing bytes");
    assert_eq!(peek_sni(&hello), Sni::Host("a.example".into()));
}

#[test]
fn plaintext_http_is_unreadable_from_its_first_byte() {
    assert_eq!(peek_sni(b"G"), Sni::Unreadable);
    assert_eq!(peek_sni(b"GET / HTTP/1.1\r\n\r\n"), Sni::Unreadable);
}

#[test]
fn a_handshake_length_beyond_its_record_is_unreadable() {
    let mut hello = client_hello("a.example");
    hello[6] = 0xff; // the ClientHello's 24-bit length now exceeds the record
    assert_eq!(peek_sni(&hello), Sni::Unreadable);
}

#[test]
fn every_corrupted_byte_yields_an_answer_without_panicking() {
    let hello = client_hello("a.example");
    for at in 0..hello.len() {
        for value in [0x00, 0x7f, 0xff] {
            let mut bad = hello.clone();
            bad[at] = value;
            let _ = peek_sni(&bad);
        }
    }
}
