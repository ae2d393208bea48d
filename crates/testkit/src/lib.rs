//! Test-only helpers shared by Portico's test suites (a dev-dependency, never linked into the
//! binary): a TLS client configuration that accepts any certificate, a gRPC-style h2c
//! backend, an HTTP/3 client ([`H3Client`]), free ports for listeners that a test cannot ask to bind port 0, real etcd
//! clusters ([`etcd`]), and the decoders of the response codings ([`decode`]).

pub mod etcd;
mod grpc;
mod h3;

pub use etcd::{EtcdCluster, EtcdTls};
pub use grpc::grpc_backend;
pub use h3::{H3Answer, H3Client};

use portico_tls::AcceptAnyServerCertificate;
use rustls::ClientConfig;
use std::io::Read;
use std::sync::Arc;

/// `data` decoded from the content coding `coding` (`gzip`, `br` or `zstd`); panics on
/// anything else or a body that does not decode whole.
pub fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let read = match coding {
        "gzip" => flate2::read::GzDecoder::new(data).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(data, 4096).read_to_end(&mut out),
        "zstd" => zstd::stream::read::Decoder::new(data).and_then(|mut d| d.read_to_end(&mut out)),
        other => panic!("unexpected coding {other}"),
    };
    read.unwrap_or_else(|e| panic!("a {coding} body that does not decode: {e}"));
    out
}

/// A rustls client configuration (ring provider, TLS 1.2 and 1.3) that accepts every server
/// certificate, so that a test can look at the certificate it got and compare it with the one
/// it expected. Signatures are still checked.
pub fn accept_any_certificate() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("the ring provider supports TLS 1.2 and 1.3: {e}"));
    builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCertificate::new(provider)))
        .with_no_client_auth()
}

/// A loopback TCP port that nothing listens on, for a process that must be told its port
/// (haproxy). It is taken below the kernel's ephemeral range (32768–60999), so that no socket of
/// a concurrent test, bound to port 0 or connecting out, can be handed the same port between
/// this check and the real bind. Ports are handed out once per test process, and processes
/// running side by side start at different offsets.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        (std::process::id() * 331) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let port = u16::try_from(port).expect("below 32768");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {LOW} and {}", LOW + SPAN)
}
