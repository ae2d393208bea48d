//! Echo backends: each reply says which backend answered and what the request looked like.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;

const ECHOED: &[&str] = &[
    "user-agent",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-private",
    "te",
];

/// A running echo backend on 127.0.0.1.
pub struct Echo {
    pub addr: SocketAddr,
    /// Notified when the backend has received the first chunk of a request body.
    pub first_chunk: Arc<Notify>,
    /// How many TCP connections the backend has accepted.
    pub connections: Arc<AtomicUsize>,
}

impl Echo {
    pub async fn start(name: &'static str) -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let first_chunk = Arc::new(Notify::new());
        let notify = first_chunk.clone();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let notify = notify.clone();
                let service = service_fn(move |req| reply(name, req, notify.clone()));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::spawn(conn);
            }
        });
        Echo {
            addr,
            first_chunk,
            connections,
        }
    }
}

/// Paths under `/slow` answer after 300 ms.
async fn reply(
    name: &str,
    req: Request<Incoming>,
    first_chunk: Arc<Notify>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut text = format!("backend: {name}\nmethod: {}\n", req.method());
    text += &format!(
        "path: {}\nquery: {}\n",
        req.uri().path(),
        req.uri().query().unwrap_or("")
    );
    let header = |k: &str| {
        req.headers()
            .get(k)
            .map(|v| v.to_str().unwrap_or("?").to_owned())
    };
    text += &format!("host: {}\n", header("host").unwrap_or_default());
    for key in ECHOED {
        if let Some(v) = header(key) {
            text += &format!("{key}: {v}\n");
        }
    }
    if req.uri().path().starts_with("/slow") {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let body = read_body(req.into_body(), &first_chunk).await;
    text += &format!("body: {body}\n");
    let response = Response::builder()
        .header("x-backend", name)
        .header("connection", "x-hop")
        .header("x-hop", "1")
        .body(Full::new(Bytes::from(text)));
    Ok(response.unwrap())
}

async fn read_body(mut body: Incoming, first_chunk: &Notify) -> String {
    let mut all = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            if all.is_empty() && !data.is_empty() {
                first_chunk.notify_one();
            }
            all.extend_from_slice(&data);
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}
