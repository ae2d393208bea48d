//! The proxy end to end on real sockets: echo backends, a served `Proxy`, a hyper client.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use bytes::Bytes;
use http::Request;
use portico_dataplane_http::{Proxy, ProxyMetrics};
use portico_model::Model;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::client::{Client, channel, full};
use support::echo::Echo;
use support::model::{ModelBuilder, exact, host, prefix};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

struct Harness {
    proxy: Arc<Proxy>,
    addr: SocketAddr,
    registry: Registry,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Harness {
    async fn start(model: &Model) -> Harness {
        let mut registry = Registry::default();
        let proxy = Proxy::new(ProxyMetrics::new(&mut registry));
        proxy.apply(model);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(proxy.clone().serve(listener, stopped));
        Harness {
            proxy,
            addr,
            registry,
            stop,
            task,
        }
    }

    async fn client(&self) -> Client {
        Client::http1(self.addr).await
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).unwrap();
        out
    }
}

/// A closed port: bound, then released.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// Every host and path to one pool of the given members.
fn all_to(name: &str, members: &[SocketAddr]) -> Model {
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool(name, members);
    m.policy(vec![prefix("/")], pool);
    m.build()
}

#[tokio::test]
async fn round_robin_alternates_between_two_members() {
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    let h = Harness::start(&all_to("web", &[a.addr, b.addr])).await;
    let mut client = h.client().await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(
            client
                .get("web.test", "/")
                .await
                .backend()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(seen, ["a", "b", "a", "b"]);
}

#[tokio::test]
async fn upstream_connections_are_reused_across_requests() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let (mut one, mut two) = (h.client().await, h.client().await);
    for _ in 0..3 {
        assert_eq!(one.get("x", "/").await.status, 200);
        assert_eq!(two.get("x", "/").await.status, 200);
    }
    assert_eq!(echo.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn request_reaches_backend_unchanged_with_forwarding_headers() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let req = Request::post("/a/%7Eb/c?q=1&r=%2F")
        .header("host", "Fwd.Test:8080")
        .header("user-agent", "conformance/1.0")
        .header("x-forwarded-for", "10.1.2.3")
        .header("connection", "x-private")
        .header("x-private", "secret")
        .body(full("hello"))
        .unwrap();
    let r = h.client().await.send(req).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.field("method"), Some("POST"));
    assert_eq!(r.field("path"), Some("/a/%7Eb/c"));
    assert_eq!(r.field("query"), Some("q=1&r=%2F"));
    assert_eq!(r.field("host"), Some("Fwd.Test:8080"));
    assert_eq!(r.field("user-agent"), Some("conformance/1.0"));
    assert_eq!(r.field("x-forwarded-for"), Some("10.1.2.3, 127.0.0.1"));
    assert_eq!(r.field("x-forwarded-proto"), Some("http"));
    assert_eq!(r.field("x-forwarded-host"), Some("Fwd.Test:8080"));
    assert_eq!(
        r.field("x-private"),
        None,
        "headers named in Connection are hop-by-hop"
    );
    assert_eq!(r.field("body"), Some("hello"));
}

#[tokio::test]
async fn response_comes_back_without_hop_by_hop_headers() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let r = h.client().await.get("x", "/").await;
    assert_eq!(r.headers["x-backend"], "echo");
    assert!(r.headers.get("x-hop").is_none());
    assert!(r.headers.get("connection").is_none());
}

/// Before its first configuration a served proxy accepts nothing: a client's request waits
/// in the listen queue instead of meeting an empty route table's 404.
#[tokio::test]
async fn a_proxy_answers_only_once_its_first_configuration_is_applied() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = Echo::start("echo").await;
    let proxy = Proxy::new(ProxyMetrics::new(&mut Registry::default()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(proxy.clone().serve(listener, stopped));
    let mut waiting = TcpStream::connect(addr).await.unwrap();
    waiting
        .write_all(b"GET / HTTP/1.1\r\nhost: any.test\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let early = tokio::time::timeout(Duration::from_millis(300), waiting.read_to_end(&mut answer));
    assert!(
        early.await.is_err(),
        "answered before any configuration: {answer:?}"
    );
    proxy.apply(&all_to("web", &[echo.addr]));
    let read = tokio::time::timeout(Duration::from_secs(5), waiting.read_to_end(&mut answer));
    read.await.unwrap().unwrap();
    let head = String::from_utf8_lossy(&answer);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test]
async fn unmatched_request_is_404_with_a_text_body() {
    let echo = Echo::start("echo").await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", &[echo.addr]);
    m.policy(vec![host("known.test"), exact("/")], pool);
    let h = Harness::start(&m.build()).await;
    let r = h.client().await.get("unknown.test", "/").await;
    assert_eq!((r.status, r.body.as_str()), (404, "404 Not Found\n"));
    assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
}

#[tokio::test]
async fn pool_without_ready_member_is_503() {
    let echo = Echo::start("echo").await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool_with("web", &[(echo.addr, false)]);
    m.policy(vec![], pool);
    let h = Harness::start(&m.build()).await;
    let r = h.client().await.get("x", "/").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "503 Service Unavailable\n")
    );
}

#[tokio::test]
async fn unreachable_member_is_502() {
    let h = Harness::start(&all_to("web", &[closed_port().await])).await;
    let r = h.client().await.get("x", "/").await;
    assert_eq!((r.status, r.body.as_str()), (502, "502 Bad Gateway\n"));
}

#[tokio::test]
async fn request_without_host_is_400() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let req = Request::get("/").body(support::client::empty()).unwrap();
    let r = h.client().await.send(req).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn keep_alive_connection_sees_the_newly_applied_routes() {
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    let h = Harness::start(&all_to("one", &[a.addr])).await;
    let mut client = h.client().await;
    assert_eq!(client.get("x", "/").await.backend(), Some("a"));
    let generation = h.proxy.apply(&all_to("two", &[b.addr]));
    assert_eq!(generation, 2);
    assert_eq!(client.get("x", "/").await.backend(), Some("b"));
    assert!(h.metrics().contains("portico_config_generation 2\n"));
}

#[tokio::test]
async fn reapplying_a_pool_keeps_its_round_robin_position() {
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    let model = all_to("web", &[a.addr, b.addr]);
    let h = Harness::start(&model).await;
    let mut client = h.client().await;
    assert_eq!(client.get("x", "/").await.backend(), Some("a"));
    h.proxy.apply(&model);
    assert_eq!(client.get("x", "/").await.backend(), Some("b"));
}

#[tokio::test]
async fn post_body_is_streamed_not_buffered() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let (tx, body) = channel();
    let req = Request::post("/upload")
        .header("host", "x")
        .body(body)
        .unwrap();
    let mut client = h.client().await;
    let reply = tokio::spawn(async move { client.send(req).await });
    tx.send(Bytes::from_static(b"first ")).await.unwrap();
    // The backend must see the first chunk while the client is still sending.
    let seen = tokio::time::timeout(Duration::from_secs(5), echo.first_chunk.notified()).await;
    assert!(
        seen.is_ok(),
        "first chunk did not reach the backend before the body ended"
    );
    tx.send(Bytes::from_static(b"second")).await.unwrap();
    drop(tx);
    let r = reply.await.unwrap();
    assert_eq!(r.field("body"), Some("first second"));
}

#[tokio::test]
async fn http2_prior_knowledge_is_proxied_with_the_authority_as_host() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let mut client = Client::http2(h.addr).await;
    let req = Request::get("http://h2.test/p?x=1")
        .body(support::client::empty())
        .unwrap();
    let r = client.send(req).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.field("host"), Some("h2.test"));
    assert_eq!(r.field("x-forwarded-host"), Some("h2.test"));
    assert_eq!(r.field("query"), Some("x=1"));
}

#[tokio::test]
async fn requests_are_counted_by_pool_and_code_class() {
    let echo = Echo::start("echo").await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", &[echo.addr]);
    m.policy(vec![host("web.test")], pool);
    let h = Harness::start(&m.build()).await;
    let mut client = h.client().await;
    assert_eq!(client.get("web.test", "/").await.status, 200);
    assert_eq!(client.get("other.test", "/").await.status, 404);
    let text = h.metrics();
    assert!(
        text.contains("portico_http_requests_total{pool=\"web\",code_class=\"2xx\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("portico_http_requests_total{pool=\"\",code_class=\"4xx\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("portico_upstream_latency_seconds_count{pool=\"web\"} 1\n"),
        "{text}"
    );
}

#[tokio::test]
async fn a_pool_gets_its_series_on_its_first_request_and_loses_them_when_it_goes() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("one", &[echo.addr])).await;
    let series = "portico_http_requests_total{pool=\"one\",code_class=\"2xx\"}";
    // The request series: member series (health) are there from the start.
    let any = [
        "portico_http_requests_total{pool=\"one\"",
        "latency_seconds_count{pool=\"one\"",
    ];
    assert!(
        !any.iter().any(|s| h.metrics().contains(s)),
        "{}",
        h.metrics()
    );
    let mut client = h.client().await;
    assert_eq!(client.get("x", "/").await.status, 200);
    h.proxy.apply(&all_to("one", &[echo.addr]));
    assert_eq!(client.get("x", "/").await.status, 200);
    assert!(
        h.metrics().contains(&format!("{series} 2\n")),
        "{}",
        h.metrics()
    );
    h.proxy.apply(&all_to("two", &[echo.addr]));
    assert!(
        !any.iter().any(|s| h.metrics().contains(s)),
        "{}",
        h.metrics()
    );
}

#[tokio::test]
async fn shutdown_finishes_in_flight_requests_and_stops_accepting() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let mut client = h.client().await;
    let slow = tokio::spawn(async move { client.get("x", "/slow").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.stop.send(true).unwrap();
    assert_eq!(slow.await.unwrap().status, 200);
    tokio::time::timeout(Duration::from_secs(6), h.task)
        .await
        .unwrap()
        .unwrap();
    assert!(TcpStream::connect(h.addr).await.is_err());
}

/// A backend that answers one request per connection, then closes it without warning
/// (no `Connection: close`), as a backend does when its keep-alive timeout fires.
async fn one_shot_backend() -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            let _ = stream.write_all(reply).await;
            let _ = stream.shutdown().await;
        }
    });
    addr
}

#[tokio::test]
async fn a_pooled_connection_the_backend_closed_is_not_used_again() {
    let backend = one_shot_backend().await;
    let h = Harness::start(&all_to("web", &[backend])).await;
    let mut client = h.client().await;
    for _ in 0..5 {
        assert_eq!(client.get("x", "/").await.status, 200);
        // Let the backend's close reach the proxy's idle connection.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A backend that reads one whole request per connection (its head, then `Content-Length`
/// bytes of body), answers it, and closes the connection without warning; counts connections.
async fn one_shot_reading_backend() -> (SocketAddr, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let mut headers = [httparse::EMPTY_HEADER; 32];
                let mut parsed = httparse::Request::new(&mut headers);
                if let Ok(httparse::Status::Complete(head)) = parsed.parse(&request) {
                    let length = (parsed.headers.iter())
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                        .unwrap_or(0usize);
                    if request.len() >= head + length {
                        break;
                    }
                }
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            let _ = stream.write_all(reply).await;
            let _ = stream.shutdown().await;
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn a_post_after_the_member_closed_the_idle_connection_goes_on_a_new_one() {
    // A POST is never tried again once any of it was sent: each one succeeding shows that the
    // closed idle connection gave the request back before writing it.
    let (backend, connections) = one_shot_reading_backend().await;
    let h = Harness::start(&all_to("web", &[backend])).await;
    let mut client = h.client().await;
    for n in 1..=4 {
        let req = Request::post("/form")
            .header("host", "x")
            .body(full("name=value"))
            .unwrap();
        let r = client.send(req).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "POST {n}");
        assert_eq!(connections.load(Ordering::SeqCst), n);
        // Let the member's close reach the proxy's idle connection.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn one_upstream_connection_carries_sequential_requests_with_large_bodies() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let mut client = h.client().await;
    let large = "0123456789abcdef".repeat(16 * 1024);
    for n in 0..20 {
        let body = if n % 2 == 0 {
            large.clone()
        } else {
            format!("small {n}")
        };
        let body = http_body_util::Full::new(Bytes::from(body.clone()));
        let req = Request::post("/echo")
            .header("host", "x")
            .body(http_body_util::BodyExt::boxed(body))
            .unwrap();
        let r = client.send(req).await;
        assert_eq!(r.status, 200, "request {n}");
        let expected = if n % 2 == 0 {
            large.clone()
        } else {
            format!("small {n}")
        };
        assert_eq!(r.field("body"), Some(expected.as_str()), "request {n}");
        let r = client.get("x", "/").await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(echo.connections.load(Ordering::SeqCst), 1);
}

/// A backend that answers at once and streams the request body back as the response body,
/// chunk by chunk, while the request body is still coming.
async fn duplex_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(req.into_body()))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    addr
}

#[tokio::test]
async fn a_response_streams_back_while_its_request_body_is_still_sent() {
    use http_body_util::BodyExt;
    let backend = duplex_backend().await;
    let h = Harness::start(&all_to("web", &[backend])).await;
    for _ in 0..2 {
        let stream = TcpStream::connect(h.addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let (tx, body) = channel();
        let req = Request::post("/duplex")
            .header("host", "x")
            .body(body)
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), async {
            tx.send(Bytes::from_static(b"one")).await.unwrap();
            sender.send_request(req).await.unwrap()
        });
        let mut response = response
            .await
            .expect("the response head before the body ends");
        assert_eq!(response.status(), 200);
        for chunk in ["one", "two", "three"] {
            if chunk != "one" {
                tx.send(Bytes::from(chunk)).await.unwrap();
            }
            let frame = tokio::time::timeout(Duration::from_secs(5), response.frame()).await;
            let data = frame.expect("the echoed chunk").unwrap().unwrap();
            assert_eq!(data.into_data().unwrap(), chunk.as_bytes());
        }
        drop(tx);
        let end = tokio::time::timeout(Duration::from_secs(5), response.frame()).await;
        assert!(end.expect("the end of the response").is_none());
    }
}

#[tokio::test]
async fn upstream_connections_survive_a_configuration_change() {
    let echo = Echo::start("echo").await;
    let h = Harness::start(&all_to("web", &[echo.addr])).await;
    let mut client = h.client().await;
    assert_eq!(client.get("x", "/").await.status, 200);
    // The same member under another pool name: a new configuration generation.
    h.proxy.apply(&all_to("renamed", &[echo.addr]));
    assert_eq!(client.get("x", "/").await.status, 200);
    assert_eq!(echo.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn updated_members_serve_without_a_new_route_table() {
    let (a, b) = (Echo::start("a").await, Echo::start("b").await);
    let h = Harness::start(&all_to("web", &[a.addr])).await;
    let mut client = h.client().await;
    assert_eq!(client.get("x", "/").await.backend(), Some("a"));
    let table = h.proxy.table();
    let moved = all_to("web", &[b.addr]);
    let generation = h
        .proxy
        .update_members(moved.load_balancers[0].pools.iter().map(|p| &**p));
    assert_eq!(generation, 2);
    assert!(Arc::ptr_eq(&table, &h.proxy.table()), "same route table");
    for _ in 0..3 {
        assert_eq!(client.get("x", "/").await.backend(), Some("b"));
    }
    // To no member at all: 503.
    let none = all_to("web", &[]);
    h.proxy
        .update_members(none.load_balancers[0].pools.iter().map(|p| &**p));
    assert_eq!(client.get("x", "/").await.status, 503);
}
