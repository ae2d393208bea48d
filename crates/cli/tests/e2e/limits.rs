//! Limits against abuse, per provider (the built-in proxy and haproxy): raw smuggling and
//! limit requests over TCP with the expected status and connection state, the deadlines of
//! silent, idle and slow connections and backends, and the per-client connection cap.

use crate::conformance::Provider;
use crate::raw_client::{After, closed_within, connect_from, exchange, pipelined, read_response};
use crate::support::*;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

proxy_and_haproxy!(
    smuggling_and_limit_requests_get_their_status_and_connection_state,
    pipelined_requests_answer_each_and_refuse_only_the_one_with_both_lengths,
    silent_and_half_sent_connections_are_closed_after_the_header_timeout,
    an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout,
    a_request_body_that_stalls_is_cut_after_the_body_timeout,
    a_backend_that_never_answers_gives_504_after_the_upstream_timeout,
    a_client_over_its_connection_cap_is_closed_while_others_are_served,
);

const HOST: &str = "limits.test";

/// `portico run` on `dir` with `provider` and `flags`.
async fn start(provider: Provider, dir: &Path, flags: &[&str]) -> Portico {
    match provider {
        Provider::Haproxy => Portico::start_haproxy(dir, flags).await,
        _ => Portico::start(dir, flags).await,
    }
}

/// An echo Service `web` for every path of `limits.test`, and `slow` on `/slow`: a backend
/// that accepts connections and never answers.
async fn manifests() -> Manifests {
    let m = crate::backends("limits", &[("web", 1)]).await;
    let addr = silent_backend();
    m.write("slow.yaml", &service("limits", "slow", &ready(&[addr])));
    let rules = [
        (HOST, "/", "Prefix", "web", "80"),
        (HOST, "/slow", "Prefix", "slow", "80"),
    ];
    m.write(
        "ingress.yaml",
        &ingress("limits", "limits", "2026-01-01T00:00:00Z", &rules),
    );
    m
}

/// (what, raw request, proxy's answer, haproxy's answer); status 0 is no answer.
type Case = (&'static str, String, (u16, After), (u16, After));

fn get(target: &str, headers: &str) -> String {
    format!("GET {target} HTTP/1.1\r\n{headers}\r\n")
}

fn cases() -> Vec<Case> {
    use After::{Closed, Kept};
    let h = format!("Host: {HOST}\r\n");
    let many: String = (0..120).map(|i| format!("X-H{i}: v\r\n")).collect();
    let big = format!("X-Big: {}\r\n", "a".repeat(20_000));
    let chunked =
        |body: &str| format!("POST / HTTP/1.1\r\n{h}Transfer-Encoding: chunked\r\n\r\n{body}");
    let both_lengths = format!(
        "POST / HTTP/1.1\r\n{h}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    let small_chunks = format!("100\r\n{}\r\n0\r\n\r\n", "b".repeat(256));
    let over_limit: String = (0..8)
        .map(|_| format!("100\r\n{}\r\n", "b".repeat(256)))
        .collect::<String>()
        + "0\r\n\r\n";
    vec![
        ("a plain request", get("/", &h), (200, Kept), (200, Kept)),
        // haproxy's parser drops Content-Length, serves the request by its chunks and closes
        // the connection after answering (RFC 9112 section 6.1 allows either); no rule of
        // haproxy 2.6 sees the pair.
        (
            "Content-Length with Transfer-Encoding",
            both_lengths.clone(),
            (400, Closed),
            (200, Closed),
        ),
        (
            "Transfer-Encoding with Content-Length",
            format!(
                "POST / HTTP/1.1\r\n{h}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
            ),
            (400, Closed),
            (200, Closed),
        ),
        (
            "a body that reads like a head with both lengths",
            format!(
                "POST / HTTP/1.1\r\n{h}Content-Length: {}\r\n\r\n{both_lengths}",
                both_lengths.len()
            ),
            (200, Kept),
            (200, Kept),
        ),
        (
            "differing duplicate Content-Length",
            format!("POST / HTTP/1.1\r\n{h}Content-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a bad chunk size",
            chunked("zz\r\nhello\r\n0\r\n\r\n"),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a small chunked body",
            chunked(&small_chunks),
            (200, Kept),
            (200, Kept),
        ),
        // haproxy's parser unfolds it into one line (RFC 9112 section 5.2 lets a proxy).
        (
            "obs-fold",
            get("/", &format!("{h}X-A: a\r\n b\r\n")),
            (400, Closed),
            (200, Kept),
        ),
        (
            "a space in a header name",
            get("/", &format!("{h}X A: b\r\n")),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a control byte in a header name",
            get("/", &format!("{h}X\x01A: b\r\n")),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a NUL in a header value",
            get("/", &format!("{h}X-A: a\x00b\r\n")),
            (400, Closed),
            (400, Closed),
        ),
        (
            "too many header fields",
            get("/", &format!("{h}{many}")),
            (431, Closed),
            (400, Closed),
        ),
        (
            "a request head over the size limit",
            get("/", &format!("{h}{big}")),
            (431, Closed),
            (400, Closed),
        ),
        (
            "a declared body over the limit",
            format!("POST / HTTP/1.1\r\n{h}Content-Length: 5000\r\n\r\n"),
            (413, Closed),
            (413, Closed),
        ),
        // haproxy waits for a chunked body up to a limit under 8 KiB (its buffer), then
        // refuses it without closing.
        (
            "a chunked body over the limit",
            chunked(&over_limit),
            (413, Closed),
            (413, Kept),
        ),
        ("no Host", get("/", ""), (400, Closed), (400, Closed)),
        // haproxy's parser merges identical copies before any rule runs.
        (
            "two equal Host fields",
            get("/", &format!("{h}{h}")),
            (400, Closed),
            (200, Kept),
        ),
        (
            "two different Host fields",
            get("/", &format!("{h}Host: other.test\r\n")),
            (400, Closed),
            (400, Closed),
        ),
        (
            "no Host in HTTP/1.0",
            "GET / HTTP/1.0\r\n\r\n".to_owned(),
            (404, Closed),
            (404, Closed),
        ),
        (
            "a Host list",
            get("/", &format!("Host: {HOST}, other.test\r\n")),
            (400, Closed),
            (400, Closed),
        ),
        (
            "an absolute-form target naming another host",
            get("http://other.test/", &h),
            (400, Closed),
            (400, Closed),
        ),
        (
            "an absolute-form target naming Host's host",
            get(&format!("http://{HOST}/"), &h),
            (200, Kept),
            (200, Kept),
        ),
        (
            "a dot-dot segment",
            get("/qa/../dev/build", &h),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a dot segment",
            get("/qa/./dev", &h),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a percent-encoded dot-dot segment",
            get("/qa/%2e%2E/dev", &h),
            (400, Closed),
            (400, Closed),
        ),
        (
            "a half-encoded dot-dot segment",
            get("/qa/.%2E", &h),
            (400, Closed),
            (400, Closed),
        ),
        (
            "dots inside a segment",
            get("/a..b/.well-known/x", &h),
            (200, Kept),
            (200, Kept),
        ),
    ]
}

async fn smuggling_and_limit_requests_get_their_status_and_connection_state(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path(), &["--max-body-bytes", "1000"]).await;
    p.wait_route(HOST, "/", 200, "web").await;
    let mut failures = Vec::new();
    for (what, raw, proxy, haproxy) in cases() {
        let want = match provider {
            Provider::Haproxy => haproxy,
            _ => proxy,
        };
        let got = exchange(p.http, raw.as_bytes(), HOST).await;
        if got != want {
            failures.push(format!("{what}: wanted {want:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{provider:?}:\n{}",
        failures.join("\n")
    );
}

/// Requests pipelined on one connection, the third declaring both lengths, after a chunked
/// body whose chunk reads like such a head: each request before it is answered as usual.
async fn pipelined_requests_answer_each_and_refuse_only_the_one_with_both_lengths(
    provider: Provider,
) {
    let m = manifests().await;
    let p = start(provider, m.path(), &[]).await;
    p.wait_route(HOST, "/", 200, "web").await;
    let h = format!("Host: {HOST}\r\n");
    let both = format!(
        "POST / HTTP/1.1\r\n{h}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    let raw = format!(
        "GET / HTTP/1.1\r\n{h}\r\nPOST / HTTP/1.1\r\n{h}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{both}\r\n0\r\n\r\n{both}GET / HTTP/1.1\r\n{h}\r\n",
        both.len()
    );
    let (statuses, after) = pipelined(p.http, raw.as_bytes()).await;
    let refused = match provider {
        Provider::Haproxy => 200,
        _ => 400,
    };
    assert_eq!(
        (statuses, after),
        (vec![200, 200, refused], After::Closed),
        "{provider:?}: the fourth request must not be served after the one with both lengths"
    );
}

/// Asserts that `stream` is closed by the server after about `deadline`.
async fn assert_closed_after(stream: &mut TcpStream, deadline: Duration, what: &str) {
    let took = closed_within(stream, deadline * 4).await;
    let took = took.unwrap_or_else(|| panic!("{what}: still open after {:?}", deadline * 4));
    assert!(
        took >= deadline.mul_f32(0.8),
        "{what}: closed after {took:?}, before the deadline {deadline:?}"
    );
}

async fn silent_and_half_sent_connections_are_closed_after_the_header_timeout(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path(), &["--client-header-timeout", "1s"]).await;
    let openings: [(&str, &[u8]); 4] = [
        ("nothing", b""),
        ("one byte of a method", b"P"),
        ("the HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        (
            "half a request head",
            b"GET / HTTP/1.1\r\nHost: limits.test\r\n",
        ),
    ];
    let checks = openings.map(|(what, bytes)| async move {
        let mut stream = TcpStream::connect(p.http).await.unwrap();
        stream.write_all(bytes).await.unwrap();
        assert_closed_after(&mut stream, Duration::from_secs(1), what).await;
    });
    futures_join(checks).await;
}

async fn an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout(provider: Provider) {
    let m = manifests().await;
    let flags = [
        "--keepalive-timeout",
        "1s",
        "--client-header-timeout",
        "10s",
    ];
    let p = start(provider, m.path(), &flags).await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    stream
        .write_all(get("/", &format!("Host: {HOST}\r\n")).as_bytes())
        .await
        .unwrap();
    assert_eq!(read_response(&mut stream).await, Some(200));
    assert_closed_after(&mut stream, Duration::from_secs(1), "idle keep-alive").await;
}

async fn a_request_body_that_stalls_is_cut_after_the_body_timeout(provider: Provider) {
    let m = manifests().await;
    let p = start(
        provider,
        m.path(),
        &[
            "--client-body-timeout",
            "1s",
            "--upstream-response-timeout",
            "2s",
        ],
    )
    .await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    let head = format!("POST / HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 100\r\n\r\npartial");
    stream.write_all(head.as_bytes()).await.unwrap();
    let deadline = Duration::from_secs(1);
    match provider {
        // haproxy has already passed the request on: its client timeout aborts both sides,
        // unanswered.
        Provider::Haproxy => assert_closed_after(&mut stream, deadline, "stalled body").await,
        _ => {
            let started = std::time::Instant::now();
            assert_eq!(read_response(&mut stream).await, Some(408));
            let took = started.elapsed();
            assert!(took >= deadline.mul_f32(0.8), "answered after {took:?}");
        }
    }
}

async fn a_backend_that_never_answers_gives_504_after_the_upstream_timeout(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path(), &["--upstream-response-timeout", "1s"]).await;
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), p.get(HOST, "/slow")).await;
    let took = started.elapsed();
    let r = r.unwrap_or_else(|_| panic!("{provider:?}: no answer within 10 s"));
    assert_eq!(r.status, 504, "{provider:?}");
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(4)).contains(&took),
        "504 after {took:?}"
    );
}

async fn a_client_over_its_connection_cap_is_closed_while_others_are_served(provider: Provider) {
    let m = manifests().await;
    let flags = [
        "--max-connections-per-client",
        "3",
        "--client-header-timeout",
        "30s",
    ];
    let p = start(provider, m.path(), &flags).await;
    let crowded: IpAddr = [127, 0, 0, 1].into();
    let other: IpAddr = [127, 0, 0, 2].into();
    let mut held = Vec::new();
    for _ in 0..3 {
        // Each has sent the first byte of a request: the built-in proxy takes a connection
        // when it speaks (TCP_DEFER_ACCEPT), and these are slow clients, not silent ones.
        let mut stream = connect_from(crowded, p.http).await.unwrap();
        stream.write_all(b"G").await.unwrap();
        held.push(stream);
    }
    // A connect completes in the kernel's backlog before the server accepts it: let the
    // server count the three before the fourth arrives (under load it may lag).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The fourth from the same address is closed at once, unanswered.
    let request = get("/", &format!("Host: {HOST}\r\n"));
    assert_eq!(
        answer_from(crowded, p.http, &request).await,
        None,
        "over the cap"
    );
    // Another address is served meanwhile.
    assert_eq!(answer_from(other, p.http, &request).await, Some(200));
    // A place freed is a place taken.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(answer_from(crowded, p.http, &request).await, Some(200));
}

/// The built-in proxy takes a connection when its first bytes arrive (TCP_DEFER_ACCEPT): one
/// that has sent nothing holds none of its client's places under the cap until it speaks.
#[tokio::test]
async fn a_silent_connection_holds_no_place_under_the_cap_until_it_speaks() {
    let m = manifests().await;
    let flags = ["--max-connections-per-client", "1"];
    let p = Portico::start(m.path(), &flags).await;
    let client: IpAddr = [127, 0, 0, 1].into();
    let mut silent = connect_from(client, p.http).await.unwrap();
    // Time for the proxy to take (and count) the silent connection, were it handed over at
    // the end of the TCP handshake; well within the second before Linux hands it over anyway.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let request = get("/", &format!("Host: {HOST}\r\nConnection: close\r\n"));
    assert_eq!(
        answer_from(client, p.http, &request).await,
        Some(200),
        "a request beside a silent connection, with a cap of one"
    );
    // Once it speaks, it is served too, the other connection's place given back.
    tokio::time::sleep(Duration::from_millis(200)).await;
    silent.write_all(request.as_bytes()).await.unwrap();
    assert_eq!(
        read_response(&mut silent).await,
        Some(200),
        "the silent one"
    );
}

/// Runs `checks` concurrently, so that their deadlines overlap.
async fn futures_join<F: std::future::Future<Output = ()>>(checks: [F; 4]) {
    let [a, b, c, d] = checks;
    tokio::join!(a, b, c, d);
}

async fn answer_from(from: IpAddr, to: SocketAddr, request: &str) -> Option<u16> {
    let mut stream = connect_from(from, to).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    read_response(&mut stream).await
}

/// Issue 35, the built-in proxy: the shape of distinct pod addresses under a short hard limit
/// of open files starts and serves (no descriptor per member), and the soft limit it was
/// started with is raised to the hard one, not beyond.
#[tokio::test]
async fn the_proxy_serves_distinct_pods_under_a_short_limit_raising_its_soft_limit_to_the_hard_one()
{
    let m = Manifests::new();
    let routes = crate::haproxy::distinct_pods(&m, 30).await;
    let p = Portico::start_limited(m.path(), 256, 1024, &[]).await;
    for (path, name) in [&routes[0], &routes[29]] {
        p.wait_route("pods.test", path, 200, name).await;
    }
    let pid = p.pid().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = open_files.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["1024", "1024"], "{open_files}");
}
