//! Echo backends for the demo, the tests and the benchmarks: each answers every request with
//! JSON naming its service and pod and echoing the method, path, query, host, protocol and
//! headers it received. It lives beside the test kit; the binary links it for `portico demo`
//! only. It depends on hyper and tokio, on no Portico crate.

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use tokio::net::TcpListener;

/// What an echo backend reports about the request it received.
#[derive(Debug, Serialize)]
pub struct Echo<'a> {
    pub service: &'a str,
    pub pod: &'a str,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub host: Option<String>,
    pub proto: String,
    pub headers: BTreeMap<String, String>,
    pub body_bytes: usize,
}

/// Binds `addr` and serves echo responses as `service`/`pod` until the task is dropped.
pub async fn spawn(addr: SocketAddr, service: &str, pod: &str) -> std::io::Result<SocketAddr> {
    spawn_with(addr, service, pod, Arc::default()).await
}

/// How a backend misbehaves, changeable while it runs (tests of balancing and health).
#[derive(Debug, Default)]
pub struct Behaviour {
    /// Added before every answer, in milliseconds.
    pub delay_ms: AtomicU64,
    /// When not 0, every answer but the health check's has this status.
    pub status: AtomicU16,
    /// When set, `GET /healthz` answers 503 (else 200).
    pub unhealthy: AtomicBool,
    /// Requests answered, the health checks included.
    pub requests: AtomicU64,
    /// Health checks answered.
    pub checks: AtomicU64,
}

/// Like [`spawn`], behaving as `behaviour` says.
pub async fn spawn_with(
    addr: SocketAddr,
    service: &str,
    pod: &str,
    behaviour: Arc<Behaviour>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let names: Arc<(String, String)> = Arc::new((service.to_owned(), pod.to_owned()));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let names = names.clone();
            let behaviour = behaviour.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| respond(names.clone(), behaviour.clone(), req));
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(bound)
}

async fn respond(
    names: Arc<(String, String)>,
    behaviour: Arc<Behaviour>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    behaviour.requests.fetch_add(1, Ordering::Relaxed);
    let delay = behaviour.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let (parts, body) = req.into_parts();
    let check = parts.uri.path() == "/healthz";
    let status = if check {
        behaviour.checks.fetch_add(1, Ordering::Relaxed);
        if behaviour.unhealthy.load(Ordering::Relaxed) {
            503
        } else {
            200
        }
    } else {
        behaviour.status.load(Ordering::Relaxed)
    };
    let body_bytes = body.collect().await?.to_bytes().len();
    let mut headers = BTreeMap::new();
    for (name, value) in &parts.headers {
        let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|old: &mut String| {
                old.push_str(", ");
                old.push_str(&v)
            })
            .or_insert(v);
    }
    let echo = Echo {
        service: &names.0,
        pod: &names.1,
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        host: headers
            .get("host")
            .cloned()
            .or_else(|| parts.uri.authority().map(|a| a.to_string())),
        proto: format!("{:?}", parts.version),
        headers,
        body_bytes,
    };
    let body = serde_json::to_vec(&echo).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    if let Ok(status) = http::StatusCode::from_u16(status) {
        *resp.status_mut() = status;
    }
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::SERVER,
        header::HeaderValue::from_static("portico-echo"),
    );
    Ok(resp)
}
