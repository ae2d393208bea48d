//! A test client that owns one connection, so keep-alive behaviour is observable.

use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

pub type TestBody = BoxBody<Bytes, Infallible>;

pub fn empty() -> TestBody {
    Empty::new().boxed()
}

pub fn full(text: &'static str) -> TestBody {
    Full::new(Bytes::from_static(text.as_bytes())).boxed()
}

/// A body fed chunk by chunk from the test; it ends when the sender is dropped.
pub fn channel() -> (mpsc::Sender<Bytes>, TestBody) {
    let (tx, rx) = mpsc::channel(4);
    (tx, ChannelBody(rx).boxed())
}

struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// A `key: value` line of an echo backend's reply.
    pub fn field(&self, key: &str) -> Option<&str> {
        let prefix = format!("{key}: ");
        self.body
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
    }

    pub fn backend(&self) -> Option<&str> {
        self.field("backend")
    }
}

pub enum Client {
    Http1(http1::SendRequest<TestBody>),
    Http2(http2::SendRequest<TestBody>),
}

impl Client {
    pub async fn http1(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        Client::Http1(sender)
    }

    pub async fn http2(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.unwrap();
        let io = TokioIo::new(stream);
        let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await.unwrap();
        tokio::spawn(conn);
        Client::Http2(sender)
    }

    pub async fn get(&mut self, host: &str, path: &str) -> Reply {
        let req = Request::get(path)
            .header("host", host)
            .body(empty())
            .unwrap();
        self.send(req).await
    }

    pub async fn send(&mut self, req: Request<TestBody>) -> Reply {
        let response = match self {
            Client::Http1(s) => s.send_request(req).await,
            Client::Http2(s) => s.send_request(req).await,
        };
        let (parts, body) = response.unwrap().into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }
}
