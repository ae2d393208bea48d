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
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let names: Arc<(String, String)> = Arc::new((service.to_owned(), pod.to_owned()));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let names = names.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| respond(names.clone(), req));
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(bound)
}

async fn respond(
    names: Arc<(String, String)>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let (parts, body) = req.into_parts();
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
