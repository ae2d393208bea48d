//! The HTTP/1.1 side: accept loop, one task per connection, the request log, injected failures,
//! and the one place ("rescue") where an [`ApiError`] becomes a `Status` response.

use crate::Request;
use crate::api::{self, Call, Reply};
use crate::status::ApiError;
use crate::store::Store;
use crate::watch::WatchCut;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub type Body = BoxBody<Bytes, WatchCut>;

/// State shared by the harness handle and every connection.
#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    pub log: Mutex<Vec<Request>>,
    pub failures: Mutex<VecDeque<Failure>>,
    pub watches_opened: AtomicUsize,
    pub connections_accepted: AtomicUsize,
    pub bookmark_every_ms: Arc<AtomicU64>,
    /// API groups not served, as on a cluster without their CRDs.
    pub hidden: Vec<String>,
}

/// One injected failure, used by the first request that matches it.
#[derive(Debug)]
pub struct Failure {
    pub method: String,
    pub path_contains: String,
    pub code: u16,
}

impl Shared {
    pub fn new(hidden: Vec<String>) -> Self {
        Self {
            store: Store::new(),
            log: Mutex::default(),
            failures: Mutex::default(),
            watches_opened: AtomicUsize::new(0),
            connections_accepted: AtomicUsize::new(0),
            bookmark_every_ms: Arc::new(AtomicU64::new(1000)),
            hidden,
        }
    }
}

/// Locks, ignoring poison (a panicking test thread must not take the fake down with it).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves connections until the task is aborted; aborting drops every connection.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        shared.connections_accepted.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| handle(shared.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(
    shared: Arc<Shared>,
    req: hyper::Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut record = Request {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        user_agent: header_str(&parts.headers, header::USER_AGENT),
        content_type: header_str(&parts.headers, header::CONTENT_TYPE),
        accept: header_str(&parts.headers, header::ACCEPT),
        body: serde_json::from_slice(&bytes).ok(),
        status: 0,
    };
    let reply = match take_failure(&shared, &record) {
        Some(code) => Err(ApiError::new(code, "injected failure (fail_next)")),
        None => {
            let accept = record.accept.as_deref().unwrap_or_default();
            let call = Call {
                method: &parts.method,
                path: &record.path,
                query: &record.query,
                content_type: record.content_type.as_deref(),
                meta_only: accept.contains("as=PartialObjectMetadata"),
                body: &bytes,
            };
            api::dispatch(&shared, &call)
        }
    };
    let response = rescue(reply);
    record.status = response.status().as_u16();
    tracing::debug!(method = %record.method, path = %record.path, query = %record.query, status = record.status, "fake API server");
    lock(&shared.log).push(record);
    Ok(response)
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn take_failure(shared: &Shared, request: &Request) -> Option<u16> {
    let mut failures = lock(&shared.failures);
    let target = format!("{}?{}", request.path, request.query);
    let index = failures.iter().position(|f| {
        f.method.eq_ignore_ascii_case(&request.method) && target.contains(&f.path_contains)
    })?;
    failures.remove(index).map(|f| f.code)
}

/// The one place where a reply or an error becomes a response.
fn rescue(reply: Result<Reply, ApiError>) -> Response<Body> {
    match reply {
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Watch(body)) => with_json_type(Response::new(body.boxed())),
        Err(err) => json_response(err.code, &err.to_status()),
    }
}

fn json_response(code: u16, value: &serde_json::Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    with_json_type(response)
}

fn with_json_type(mut response: Response<Body>) -> Response<Body> {
    let json = header::HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}
