//! The load side of `bench/http3.sh`: GET requests over HTTP/3 (QUIC) or HTTP/2 over TLS, the
//! same way for both so that the proxy's CPU per request compares the protocols and nothing
//! else: `connections` connections, each sending its next request once the previous answer is
//! read, for `duration`. Any certificate is accepted (the proxies serve a generated one).
//! Loopback only; it stops by itself.

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use portico_testkit::H3Client;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The protocol of a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// HTTP/3 over QUIC (ALPN `h3`).
    H3,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
}

/// What one run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
}

/// Runs the load; a connection that fails is counted as an error and opened again.
pub async fn run(
    protocol: Protocol,
    addr: SocketAddr,
    host: String,
    path: String,
    connections: usize,
    duration: Duration,
) -> Totals {
    let start = Instant::now();
    let deadline = start + duration;
    let (host, path) = (Arc::new(host), Arc::new(path));
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (host, path) = (host.clone(), path.clone());
            tokio::spawn(async move {
                let mut totals = Totals::default();
                while Instant::now() < deadline {
                    let done = match protocol {
                        Protocol::H3 => h3_connection(addr, &host, &path, deadline).await,
                        Protocol::H2 => h2_connection(addr, &host, &path, deadline).await,
                    };
                    totals.requests += done.requests;
                    totals.errors += done.errors;
                }
                totals
            })
        })
        .collect();
    let mut all = Totals::default();
    for task in tasks {
        if let Ok(t) = task.await {
            all.requests += t.requests;
            all.errors += t.errors;
        }
    }
    all.elapsed = start.elapsed();
    all
}

/// Requests on one HTTP/3 connection until `deadline` or its first error.
async fn h3_connection(addr: SocketAddr, host: &str, path: &str, deadline: Instant) -> Totals {
    let mut totals = Totals::default();
    let Ok(mut client) = H3Client::connect(addr, host).await else {
        totals.errors += 1;
        return totals;
    };
    while Instant::now() < deadline {
        match client.get(host, path).await {
            Ok(answer) if answer.status.is_success() => totals.requests += 1,
            _ => {
                totals.errors += 1;
                return totals;
            }
        }
    }
    totals
}

/// Requests on one HTTP/2 over TLS connection until `deadline` or its first error.
async fn h2_connection(addr: SocketAddr, host: &str, path: &str, deadline: Instant) -> Totals {
    let mut totals = Totals::default();
    let Ok(mut send) = h2_connect(addr, host).await else {
        totals.errors += 1;
        return totals;
    };
    let uri = format!("https://{host}{path}");
    while Instant::now() < deadline {
        let Ok(req) = http::Request::get(uri.as_str()).body(Empty::<Bytes>::new()) else {
            totals.errors += 1;
            return totals;
        };
        let answered = match send.send_request(req).await {
            Ok(resp) if resp.status().is_success() => resp.into_body().collect().await.is_ok(),
            _ => false,
        };
        if !answered {
            totals.errors += 1;
            return totals;
        }
        totals.requests += 1;
    }
    totals
}

async fn h2_connect(
    addr: SocketAddr,
    host: &str,
) -> anyhow::Result<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> {
    let mut tls = portico_testkit::accept_any_certificate();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())?;
    let stream = connector.connect(name, tcp).await?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await?;
    tokio::spawn(conn);
    Ok(send)
}
