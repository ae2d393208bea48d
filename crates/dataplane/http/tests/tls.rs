//! The proxy's TLS side on real sockets: SNI, ALPN, certificate swaps, HTTP → HTTPS redirects,
//! and h2c upstreams.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use portico_dataplane_http::{MaterialBySecret, Proxy, ProxyMetrics};
use portico_model::{Model, ObjectRef, PolicyAction};
use portico_tls::generate::Authority;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use support::client::{Client, empty};
use support::echo::Echo;
use support::model::{ModelBuilder, host, prefix};
use support::tls::{Tls, connect, material};
use tokio::net::TcpListener;
use tokio::sync::watch;

struct Harness {
    proxy: Arc<Proxy>,
    http: SocketAddr,
    https: SocketAddr,
    _stop: watch::Sender<bool>,
}

impl Harness {
    async fn start(model: &Model, certs: &MaterialBySecret) -> Harness {
        let proxy = Proxy::new(ProxyMetrics::new(&mut Registry::default()));
        proxy.apply(model);
        proxy.set_certificates(model, certs);
        let (http, https) = (bind().await, bind().await);
        let addrs = (http.local_addr().unwrap(), https.local_addr().unwrap());
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(proxy.clone().serve(http, stopped.clone()));
        tokio::spawn(proxy.clone().serve_https(https, None, stopped));
        Harness {
            proxy,
            http: addrs.0,
            https: addrs.1,
            _stop: stop,
        }
    }
}

async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

fn secret(name: &str) -> ObjectRef {
    ObjectRef::new("Secret", "default", name)
}

/// One HTTP/1.1 request on a TLS connection; returns (status, body, connection sender).
async fn get_h1(
    tls: Tls,
    host: &str,
    path: &str,
) -> (u16, String, http1::SendRequest<Full<Bytes>>) {
    let (mut sender, conn) = http1::handshake(TokioIo::new(tls.stream)).await.unwrap();
    tokio::spawn(conn);
    let (status, body) = send_h1(&mut sender, host, path).await;
    (status, body, sender)
}

async fn send_h1(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    host: &str,
    path: &str,
) -> (u16, String) {
    let req = Request::get(path)
        .header("host", host)
        .body(Full::default())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A model with two hosts on one echo backend, served over HTTP and HTTPS.
fn two_hosts(backend: SocketAddr) -> Model {
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", &[backend]);
    m.policy(vec![host("a.test"), prefix("/")], pool);
    m.policy(vec![host("b.test"), prefix("/")], pool);
    m.tls(
        &[("a.test", "a"), ("*.wild.test", "wild")],
        Some("fallback"),
    );
    m.build()
}

#[tokio::test]
async fn sni_chooses_the_certificate_and_https_requests_say_so_upstream() {
    let echo = Echo::start("web").await;
    let ca = Authority::new("ca").unwrap();
    let certs: MaterialBySecret = [
        (secret("a"), material(&ca, &["a.test"])),
        (secret("wild"), material(&ca, &["*.wild.test"])),
        (secret("fallback"), material(&ca, &["fallback.test"])),
    ]
    .into();
    let h = Harness::start(&two_hosts(echo.addr), &certs).await;
    let leaf = |name: &str| certs[&secret(name)].leaf().clone();
    assert_eq!(connect(h.https, Some("a.test"), &[]).await.leaf, leaf("a"));
    assert_eq!(
        connect(h.https, Some("x.wild.test"), &[]).await.leaf,
        leaf("wild")
    );
    assert_eq!(
        connect(h.https, Some("b.test"), &[]).await.leaf,
        leaf("fallback")
    );
    let tls = connect(h.https, None, &[]).await;
    assert_eq!(tls.leaf, leaf("fallback"));
    // No SNI, and a host without its own certificate: routed by Host as usual.
    let (status, body, _) = get_h1(tls, "b.test", "/x").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("x-forwarded-proto: https"), "{body}");
}

#[tokio::test]
async fn without_certificates_handshakes_get_the_generated_self_signed_one() {
    let echo = Echo::start("web").await;
    let h = Harness::start(&two_hosts(echo.addr), &MaterialBySecret::new()).await;
    let first = connect(h.https, Some("a.test"), &[]).await;
    let second = connect(h.https, None, &[]).await;
    assert_eq!(first.leaf, second.leaf);
    let (status, _, _) = get_h1(first, "a.test", "/").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_connection_the_proxy_closes_ends_with_a_close_notify_on_both_http1_paths() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = Echo::start("web").await;
    let h = Harness::start(&two_hosts(echo.addr), &MaterialBySecret::new()).await;
    for own in [true, false] {
        h.proxy.set_own_http1(own);
        let mut tls = connect(h.https, Some("a.test"), &[]).await;
        let request = "GET /x HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
        tls.stream.write_all(request.as_bytes()).await.unwrap();
        // rustls reports a close without close_notify as an error (UnexpectedEof).
        let mut answer = Vec::new();
        let read = tls.stream.read_to_end(&mut answer).await;
        assert!(read.is_ok(), "own path {own}: {read:?}");
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "own path {own}: {answer}"
        );
    }
}

#[tokio::test]
async fn alpn_h2_gives_http2_to_the_client() {
    let echo = Echo::start("web").await;
    let h = Harness::start(&two_hosts(echo.addr), &MaterialBySecret::new()).await;
    let tls = connect(h.https, Some("a.test"), &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.alpn.as_deref(), Some(&b"h2"[..]));
    let (mut sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls.stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get("https://a.test/h2")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("path: /h2") && body.contains("x-forwarded-proto: https"),
        "{body}"
    );
    let h1 = connect(h.https, Some("a.test"), &[b"http/1.1"]).await;
    assert_eq!(h1.alpn.as_deref(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn new_certificates_reach_new_handshakes_and_open_connections_keep_theirs() {
    let echo = Echo::start("web").await;
    let ca = Authority::new("ca").unwrap();
    let model = two_hosts(echo.addr);
    let old: MaterialBySecret = [(secret("a"), material(&ca, &["a.test"]))].into();
    let h = Harness::start(&model, &old).await;
    let kept = connect(h.https, Some("a.test"), &[]).await;
    assert_eq!(&kept.leaf, old[&secret("a")].leaf());
    let (_, _, mut sender) = get_h1(kept, "a.test", "/").await;

    let new: MaterialBySecret = [(secret("a"), material(&ca, &["a.test"]))].into();
    h.proxy.set_certificates(&model, &new);
    let fresh = connect(h.https, Some("a.test"), &[]).await;
    assert_eq!(&fresh.leaf, new[&secret("a")].leaf());
    assert_ne!(fresh.leaf, *old[&secret("a")].leaf());
    let (status, _) = send_h1(&mut sender, "a.test", "/again").await;
    assert_eq!(status, 200, "the open connection still serves");
}

#[tokio::test]
async fn redirects_name_the_https_port_and_keep_path_and_query() {
    let echo = Echo::start("web").await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", &[echo.addr]);
    m.http_only(
        vec![host("a.test"), prefix("/")],
        PolicyAction::RedirectToHttps { status: 308 },
    );
    m.policy(vec![host("a.test"), prefix("/")], pool);
    m.policy(vec![prefix("/")], pool);
    m.tls(&[], None);
    let h = Harness::start(&m.build(), &MaterialBySecret::new()).await;
    let mut client = Client::http1(h.http).await;
    let reply = client.get("A.test:8080", "/a/b?x=1&y=2").await;
    assert_eq!(reply.status, 308);
    let expected = format!("https://a.test:{}/a/b?x=1&y=2", h.https.port());
    assert_eq!(reply.headers["location"], expected.as_str());
    assert_eq!(
        client.get("other.test", "/").await.status,
        200,
        "other hosts stay on HTTP"
    );
    let (status, body, _) =
        get_h1(connect(h.https, Some("a.test"), &[]).await, "a.test", "/").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn h2c_pools_get_http2_and_grpc_trailers_come_back() {
    let backend = portico_testkit::grpc_backend("grpc").await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool_h2c("grpc", &[backend]);
    m.policy(vec![prefix("/")], pool);
    m.tls(&[], None);
    let h = Harness::start(&m.build(), &MaterialBySecret::new()).await;
    let tls = connect(h.https, Some("grpc.test"), &[b"h2"]).await;
    let (mut sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls.stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let req = Request::post("https://grpc.test/pkg.Service/Method")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from_static(b"\0\0\0\0\0")))
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        assert_eq!(response.status(), 200);
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        let body = String::from_utf8_lossy(&collected.to_bytes()).into_owned();
        assert!(body.contains(r#""proto":"HTTP/2.0""#), "{body}");
        assert!(
            body.contains(r#""content-type":"application/grpc""#),
            "{body}"
        );
        assert!(body.contains(r#""te":"trailers""#), "{body}");
        assert!(body.contains(r#""x-forwarded-proto":"https""#), "{body}");
    }
    // An HTTP/1.1 client reaches the h2c member too.
    let mut plain = Client::http1(h.http).await;
    let reply = plain
        .send(
            Request::get("/x")
                .header("host", "grpc.test")
                .body(empty())
                .unwrap(),
        )
        .await;
    assert!(
        reply.body.contains(r#""proto":"HTTP/2.0""#),
        "{}",
        reply.body
    );
}
