//! The proxy's own HTTP/1.1 path on real sockets, against scripted upstreams that record the
//! bytes they receive and answer with bytes of the test's choosing: what reaches the member
//! and the client is what the hyper path makes of the same request, framing, connection reuse,
//! failures and the hand-over to hyper included.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use portico_dataplane_http::{Proxy, ProxyMetrics};
use portico_model::Model;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::model::{ModelBuilder, prefix};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a scripted member does with a request (its head as received).
type Script = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A scripted member's answer.
#[derive(Clone)]
struct Reply {
    bytes: Vec<u8>,
    /// Close the connection after answering (without saying so).
    close: bool,
    delay: Duration,
    /// More bytes, written after a pause: a response that arrives in two pieces.
    later: Option<(Duration, Vec<u8>)>,
}

fn reply(bytes: &str) -> Reply {
    Reply {
        bytes: bytes.as_bytes().to_vec(),
        close: false,
        delay: Duration::ZERO,
        later: None,
    }
}

/// A member that reads request heads (and `Content-Length` bodies) and answers by its script.
struct Member {
    addr: SocketAddr,
    /// Every request received: head and body.
    received: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl Member {
    async fn start(script: Script) -> Member {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (seen, count) = (received.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve_member(stream, script.clone(), seen.clone()));
            }
        });
        Member {
            addr,
            received,
            connections,
        }
    }

    fn received(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

async fn serve_member(mut stream: TcpStream, script: Script, seen: Arc<Mutex<Vec<String>>>) {
    let mut input = Vec::new();
    loop {
        let Some(end) = find(&input, b"\r\n\r\n") else {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&input[..end + 4]).into_owned();
        let length = field(&head, "content-length").map_or(0, |v| v.parse().unwrap());
        while input.len() < end + 4 + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&input[end + 4..end + 4 + length]).into_owned();
        input.drain(..end + 4 + length);
        seen.lock().unwrap().push(format!("{head}{body}"));
        let answer = script(&head);
        tokio::time::sleep(answer.delay).await;
        if stream.write_all(&answer.bytes).await.is_err() {
            return;
        }
        if let Some((pause, bytes)) = &answer.later {
            tokio::time::sleep(*pause).await;
            if stream.write_all(bytes).await.is_err() {
                return;
            }
        }
        if answer.close {
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The value of a field of `head` (case-insensitive name).
fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

struct Harness {
    proxy: Arc<Proxy>,
    addr: SocketAddr,
    registry: Registry,
    _stop: watch::Sender<bool>,
}

impl Harness {
    async fn start(model: &Model, own: bool) -> Harness {
        Harness::with_limits(model, own, portico_model::Limits::default()).await
    }

    async fn with_limits(model: &Model, own: bool, limits: portico_model::Limits) -> Harness {
        let mut registry = Registry::default();
        let proxy = Proxy::with_limits(ProxyMetrics::new(&mut registry), limits);
        proxy.set_own_http1(own);
        proxy.apply(model);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(proxy.clone().serve(listener, stopped));
        Harness {
            proxy,
            addr,
            registry,
            _stop: stop,
        }
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).unwrap();
        out
    }
}

fn all_to(members: &[SocketAddr]) -> Model {
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", members);
    m.policy(vec![prefix("/")], pool);
    m.build()
}

/// A client connection that reads whole responses (by `Content-Length`, chunks or close).
struct Raw {
    stream: TcpStream,
    input: Vec<u8>,
}

/// A response as the client read it: head (status line and fields) and decoded body.
#[derive(Debug)]
struct Got {
    head: String,
    body: String,
}

impl Got {
    fn status(&self) -> u16 {
        self.head[9..12].parse().unwrap()
    }

    fn field(&self, name: &str) -> Option<&str> {
        field(&self.head, name)
    }
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        Raw {
            stream: TcpStream::connect(addr).await.unwrap(),
            input: Vec::new(),
        }
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        let read = tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut chunk));
        match read.await.expect("an answer within 5 s") {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.input.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Sends `request` and reads its response (`head`: the request was HEAD).
    async fn exchange(&mut self, request: &str, head: bool) -> Got {
        self.stream.write_all(request.as_bytes()).await.unwrap();
        self.response(head).await
    }

    async fn response(&mut self, head_only: bool) -> Got {
        let end = loop {
            if let Some(end) = find(&self.input, b"\r\n\r\n") {
                break end;
            }
            assert!(self.fill().await, "closed before a response head");
        };
        let head = String::from_utf8_lossy(&self.input[..end + 4]).into_owned();
        self.input.drain(..end + 4);
        let status: u16 = head[9..12].parse().unwrap();
        let mut body = Vec::new();
        if head_only || status == 204 || status == 304 {
        } else if field(&head, "transfer-encoding").is_some() {
            loop {
                let line_end = loop {
                    if let Some(at) = find(&self.input, b"\r\n") {
                        break at;
                    }
                    assert!(self.fill().await);
                };
                let size_text = String::from_utf8_lossy(&self.input[..line_end]).into_owned();
                let size_text = size_text.split(';').next().unwrap().trim().to_owned();
                let size = usize::from_str_radix(&size_text, 16).unwrap();
                self.input.drain(..line_end + 2);
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        if let Some(at) = find(&self.input, b"\r\n") {
                            let empty = at == 0;
                            self.input.drain(..at + 2);
                            if empty {
                                break;
                            }
                        } else {
                            assert!(self.fill().await);
                        }
                    }
                    break;
                }
                while self.input.len() < size + 2 {
                    assert!(self.fill().await);
                }
                body.extend_from_slice(&self.input[..size]);
                self.input.drain(..size + 2);
            }
        } else if let Some(length) = field(&head, "content-length") {
            let length: usize = length.parse().unwrap();
            while self.input.len() < length {
                assert!(self.fill().await);
            }
            body.extend(self.input.drain(..length));
        } else {
            while self.fill().await {}
            body.append(&mut self.input);
        }
        Got {
            head,
            body: String::from_utf8(body).unwrap(),
        }
    }

    /// Whether the proxy closed the connection.
    async fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), self.stream.read(&mut byte));
        matches!(read.await, Ok(Ok(0) | Err(_)))
    }
}

fn get(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: web.test\r\n{extra}\r\n")
}

/// The fields of a head as a sorted list of lower-case `name: value` lines, without those that
/// differ from run to run.
fn normalized(head: &str) -> Vec<String> {
    let mut lines: Vec<String> = head
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            format!("{}: {}", n.to_ascii_lowercase(), v.trim())
        })
        .filter(|l| !l.starts_with("date:") && !l.starts_with("x-request-id:"))
        .collect();
    lines.sort();
    lines
}

/// What a member answers to `/chunked`, `/head`, `/hop`, `/empty` and everything else.
fn answers(head: &str) -> Reply {
    let path = head.split(' ').nth(1).unwrap_or("/");
    if head.starts_with("HEAD ") {
        return reply("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Kind: plain\r\n\r\n");
    }
    match path {
        "/chunked" => reply(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Kind: chunks\r\n\r\n\
             5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
        ),
        "/hop" => reply(
            "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: keep-alive, X-Hop\r\n\
             X-Hop: secret\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n\r\nok",
        ),
        "/empty" => reply("HTTP/1.1 204 No Content\r\nX-Kind: empty\r\n\r\n"),
        "/early" => reply(
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlater",
        ),
        _ => reply("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Kind: plain\r\n\r\nbody"),
    }
}

#[tokio::test]
async fn the_member_and_the_client_see_what_the_hyper_path_makes_of_the_same_requests() {
    let requests = [
        (get("/plain?q=1", "User-Agent: t\r\n"), false),
        (
            get(
                "/hop",
                "Connection: keep-alive, X-Private\r\nX-Private: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\n\
                 X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Proto: ftp\r\n\
                 X-Forwarded-Host: elsewhere\r\nX-Request-Id: abc\r\n",
            ),
            false,
        ),
        (get("/chunked", ""), false),
        (get("/empty", ""), false),
        (get("/early", ""), false),
        (
            "HEAD /plain HTTP/1.1\r\nHost: web.test\r\n\r\n".to_owned(),
            true,
        ),
        (
            "DELETE /plain HTTP/1.1\r\nHost: web.test:8080\r\nContent-Length: 0\r\n\r\n".to_owned(),
            false,
        ),
    ];
    let mut seen = Vec::new();
    for own in [true, false] {
        let member = Member::start(Arc::new(answers)).await;
        let proxy = Harness::start(&all_to(&[member.addr]), own).await;
        let mut client = Raw::connect(proxy.addr).await;
        let mut got = Vec::new();
        for (request, head) in &requests {
            let response = client.exchange(request, *head).await;
            assert!(response.field("date").is_some(), "{}", response.head);
            got.push((response.status(), normalized(&response.head), response.body));
        }
        let received: Vec<_> = (member.received().iter())
            .map(|r| {
                let line = r.lines().next().unwrap().to_owned();
                let id = field(r, "x-request-id").map(|v| v.len());
                (line, normalized(r.split("\r\n\r\n").next().unwrap()), id)
            })
            .collect();
        if own {
            // One member connection carried every request (hyper's may open a second one
            // when a response's connection is not idle again in time).
            assert_eq!(member.connections.load(Ordering::SeqCst), 1);
        }
        seen.push((got, received));
    }
    let (own, hyper) = (&seen[0], &seen[1]);
    for (i, (a, b)) in own.0.iter().zip(&hyper.0).enumerate() {
        // hyper sends a body of unknown length in chunks of its own and says so.
        assert_eq!((a.0, &a.2), (b.0, &b.2), "response {i}");
        let fields = |f: &[String]| -> Vec<String> {
            f.iter()
                .filter(|l| !l.starts_with("transfer-encoding") && !l.starts_with("content-length"))
                .cloned()
                .collect()
        };
        assert_eq!(fields(&a.1), fields(&b.1), "response {i} fields");
    }
    assert_eq!(own.1, hyper.1, "what the member received");
    let hop = &own.1[1];
    assert!(
        hop.1
            .contains(&"x-forwarded-for: 1.1.1.1, 2.2.2.2, 127.0.0.1".to_owned())
    );
    assert!(!hop.1.iter().any(|l| l.starts_with("x-private")), "{hop:?}");
    assert_eq!(own.1[0].2, Some(36), "a new request id");
    assert_eq!(hop.2, Some(3), "the client's request id");
}

#[tokio::test]
async fn a_request_the_own_path_declines_goes_to_hyper_with_the_rest_of_the_connection() {
    let member = Member::start(Arc::new(answers)).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    assert_eq!(
        client.exchange(&get("/plain", ""), false).await.body,
        "body"
    );
    let post = "POST /plain HTTP/1.1\r\nHost: web.test\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(client.exchange(post, false).await.body, "body");
    assert_eq!(
        client.exchange(&get("/chunked", ""), false).await.body,
        "hello, world"
    );
    let received = member.received();
    assert_eq!(received.len(), 3);
    assert!(received[1].ends_with("\r\n\r\nhello"), "{}", received[1]);
    // A head split across writes, and two heads in one write (pipelining), on a new connection.
    let mut client = Raw::connect(proxy.addr).await;
    client
        .stream
        .write_all(b"GET /plain HTTP/1.1\r\nHo")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let rest = "st: web.test\r\n\r\nGET /hop HTTP/1.1\r\nHost: web.test\r\n\r\n";
    assert_eq!(client.exchange(rest, false).await.body, "body");
    assert_eq!(client.response(false).await.body, "ok");
}

#[tokio::test]
async fn one_member_connection_serves_request_after_request_and_a_closed_one_is_replaced() {
    // The member closes every other connection after its answer, without saying so.
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    let script: Script = Arc::new(move |head| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        let mut r = answers(head);
        r.close = n % 2 == 1;
        r
    });
    let member = Member::start(script).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    for path in ["/plain", "/chunked", "/plain", "/hop", "/plain", "/plain"] {
        let got = client.exchange(&get(path, ""), false).await;
        assert!(got.status() < 300, "{path}: {}", got.head);
        // Give the member's close time to reach the proxy's idle connection.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(member.received().len(), 6);
    assert_eq!(member.connections.load(Ordering::SeqCst), 3);
    let metrics = proxy.metrics();
    assert!(
        !metrics.contains("portico_upstream_retries_total{pool=\"web\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_body_delimited_by_the_members_close_ends_the_client_connection_too() {
    let script: Script = Arc::new(|_| Reply {
        close: true,
        ..reply("HTTP/1.1 200 OK\r\nX-Kind: until-close\r\n\r\nall of it")
    });
    let member = Member::start(script).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    let got = client.exchange(&get("/", ""), false).await;
    assert_eq!(got.body, "all of it");
    assert_eq!(got.field("connection"), Some("close"));
    assert!(client.closed().await);
    // The client asking to close is answered and closed too.
    let mut client = Raw::connect(proxy.addr).await;
    let got = client
        .exchange(&get("/", "Connection: close\r\n"), false)
        .await;
    assert_eq!(got.field("connection"), Some("close"));
}

#[tokio::test]
async fn failures_are_retried_on_another_member_or_answered_as_the_hyper_path_does() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let good = Member::start(Arc::new(answers)).await;
    // A refused connect goes to the next member.
    let proxy = Harness::start(&all_to(&[closed, good.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    for _ in 0..4 {
        assert_eq!(client.exchange(&get("/", ""), false).await.status(), 200);
    }
    assert!(
        proxy
            .metrics()
            .contains("portico_upstream_retries_total{pool=\"web\"}")
    );
    // A member that answers nonsense: 502, and the client connection stays.
    let nonsense = Member::start(Arc::new(|_| reply("HTTP/9 what\r\n\r\n"))).await;
    let proxy = Harness::start(&all_to(&[nonsense.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    let got = client.exchange(&get("/", ""), false).await;
    assert_eq!(got.status(), 502, "{}", got.head);
    assert_eq!(got.body, "502 Bad Gateway\n");
    assert_eq!(client.exchange(&get("/", ""), false).await.status(), 502);
    // A member that answers too late: 504 after the pool's read timeout.
    let slow = Member::start(Arc::new(|head| Reply {
        delay: Duration::from_secs(2),
        ..answers(head)
    }))
    .await;
    let mut m = ModelBuilder::new("lb");
    let pool = m.pool("web", &[slow.addr]);
    m.policy(vec![prefix("/")], pool);
    let mut model = m.build();
    for lb in &mut model.load_balancers {
        for pool in &mut lb.pools {
            let mut changed = (**pool).clone();
            let mut settings = (*changed.settings).clone();
            settings.read_timeout_ms = Some(200);
            changed.settings = Arc::new(settings);
            *pool = Arc::new(changed);
        }
    }
    let proxy = Harness::start(&model, true).await;
    let mut client = Raw::connect(proxy.addr).await;
    let got = client.exchange(&get("/", ""), false).await;
    assert_eq!(got.status(), 504, "{}", got.head);
    drop(proxy.proxy);
}

#[tokio::test]
async fn large_bodies_by_length_and_by_chunks_arrive_whole_and_the_connection_is_reused() {
    let body: String = (0..100_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let text = body.clone();
    let script: Script = Arc::new(move |head| {
        if head.starts_with("GET /chunks") {
            let mut bytes = String::from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            for piece in text.as_bytes().chunks(7_000) {
                bytes += &format!(
                    "{:x}\r\n{}\r\n",
                    piece.len(),
                    String::from_utf8_lossy(piece)
                );
            }
            bytes += "0\r\n\r\n";
            return reply(&bytes);
        }
        reply(&format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        ))
    });
    let member = Member::start(script).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    for path in ["/length", "/chunks", "/length", "/chunks"] {
        let got = client.exchange(&get(path, ""), false).await;
        assert_eq!(got.body.len(), body.len(), "{path}");
        assert!(got.body == body, "{path}: the body changed on its way");
    }
    assert_eq!(member.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bytes_after_the_announced_body_are_not_forwarded_and_that_member_connection_is_dropped() {
    // 20,000-byte bodies: more than the first read of a response takes, so that the rest is
    // gathered at once (`now`) or read after a pause (`later`, `pieces`).
    let body: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let text = body.clone();
    let script: Script = Arc::new(move |head| {
        let path = head.split(' ').nth(1).unwrap_or("/");
        let start = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", text.len());
        let (first, second) = text.split_at(10_000);
        match path {
            "/extra-now" => reply(&format!("{start}{text}EXTRA")),
            "/extra-later" => Reply {
                later: Some((
                    Duration::from_millis(50),
                    format!("{second}EXTRA").into_bytes(),
                )),
                ..reply(&format!("{start}{first}"))
            },
            "/pieces" => Reply {
                later: Some((Duration::from_millis(50), second.as_bytes().to_vec())),
                ..reply(&format!("{start}{first}"))
            },
            _ => answers(head),
        }
    });
    let member = Member::start(script).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    let mut client = Raw::connect(proxy.addr).await;
    for path in [
        "/extra-now",
        "/plain",
        "/extra-later",
        "/plain",
        "/pieces",
        "/plain",
    ] {
        let got = client.exchange(&get(path, ""), false).await;
        assert_eq!(got.status(), 200, "{path}: {}", got.head);
        if path == "/plain" {
            assert_eq!(got.body, "body", "{path}");
        } else {
            assert!(got.body == body, "{path}: the body changed on its way");
        }
    }
    // Each member connection that sent too much served no other request; the pieces did not
    // cost a connection.
    assert_eq!(member.connections.load(Ordering::SeqCst), 3);
    assert_eq!(member.received().len(), 6);
}

#[tokio::test]
async fn a_connection_starts_with_nothing_left_by_one_that_ended_before() {
    let member = Member::start(Arc::new(answers)).await;
    let proxy = Harness::start(&all_to(&[member.addr]), true).await;
    // A request, the start of a second one, and the end of the connection.
    let mut first = Raw::connect(proxy.addr).await;
    let got = first
        .exchange(&format!("{}GET /left-behind HT", get("/first", "")), false)
        .await;
    assert_eq!(got.status(), 200);
    first.stream.shutdown().await.unwrap();
    assert!(first.closed().await);
    // The next connections (on the same thread, with the same buffers) begin afresh.
    for n in 0..3 {
        let mut next = Raw::connect(proxy.addr).await;
        let got = next.exchange(&get(&format!("/next-{n}"), ""), false).await;
        assert_eq!(got.status(), 200, "{}", got.head);
        assert_eq!(got.body, "body");
    }
    let paths: Vec<String> = member
        .received()
        .iter()
        .map(|head| head.split(' ').nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(paths, ["/first", "/next-0", "/next-1", "/next-2"]);
}

#[tokio::test]
async fn a_pipelined_head_begun_during_a_slow_answer_gets_its_header_timeout_from_then() {
    let member = Member::start(Arc::new(|head| Reply {
        delay: Duration::from_millis(if head.contains("/slow") { 600 } else { 0 }),
        ..answers(head)
    }))
    .await;
    let limits = portico_model::Limits {
        header_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let proxy = Harness::with_limits(&all_to(&[member.addr]), true, limits).await;
    let mut client = Raw::connect(proxy.addr).await;
    // The slow request and the start of the next one in one write.
    let first = client
        .exchange(&(get("/slow", "") + "GET /plain HTTP/1.1\r\nHo"), false)
        .await;
    assert_eq!(first.status(), 200, "{}", first.head);
    let second = client.exchange("st: web.test\r\n\r\n", false).await;
    assert_eq!(second.body, "body");
}
