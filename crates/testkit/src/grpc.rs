//! An HTTP/2-only (h2c) backend that answers like a gRPC server.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::net::TcpListener;

/// Starts an h2c backend on 127.0.0.1 (HTTP/2 with prior knowledge only). Each response is a
/// JSON body naming `service` and what it received (`proto`, `method`, `path`, `content-type`,
/// `te`, `x-forwarded-proto`), then the trailers `grpc-status: 0` and `grpc-message: ok`.
pub async fn grpc_backend(service: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("binding a loopback port: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("a bound listener has an address: {e}"));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let reply = service_fn(move |req| grpc_reply(service, req));
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), reply);
            tokio::spawn(conn);
        }
    });
    addr
}

async fn grpc_reply(
    service: &str,
    req: Request<Incoming>,
) -> Result<Response<Trailered>, Infallible> {
    let header = |k| {
        let v = req.headers().get(k).and_then(|v| v.to_str().ok());
        v.unwrap_or("").to_owned()
    };
    let echo = serde_json::json!({
        "service": service,
        "proto": format!("{:?}", req.version()),
        "method": req.method().as_str(),
        "path": req.uri().path(),
        "content-type": header("content-type"),
        "te": header("te"),
        "x-forwarded-proto": header("x-forwarded-proto"),
    });
    let _ = req.into_body().collect().await;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers.insert("grpc-message", HeaderValue::from_static("ok"));
    let body = Trailered {
        data: Some(Bytes::from(echo.to_string())),
        trailers: Some(trailers),
    };
    let mut response = Response::new(body);
    let content_type = HeaderValue::from_static("application/grpc");
    response.headers_mut().insert("content-type", content_type);
    Ok(response)
}

/// A body of one data frame, then trailers.
struct Trailered {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for Trailered {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}
