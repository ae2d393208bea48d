//! Request bodies through the built-in proxy over raw HTTP/1.1: `Content-Length` bodies and
//! chunked ones that come whole with their head take the own HTTP/1.1 path; chunked ones still
//! coming and those with `Expect: 100-continue` hyper's. Each body
//! reaches the member whole, in one
//! write or in pieces, with other requests before and after it on the same connection and
//! pipelined; a body over the limit is refused with 413; a member that closes mid-request
//! gets the same answer on both paths and a POST is not tried again; the access log counts
//! the bytes received.

use crate::support::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HOST: &str = "bodies.test";

/// Service `web` (one echo pod) on every path of `bodies.test`, and `cut` on `/cut`: members
/// that read part of a request and close.
async fn manifests() -> Manifests {
    let m = crate::backends("bodies", &[("web", 1)]).await;
    let cut = [closing_member().await, closing_member().await];
    m.write("cut.yaml", &service("bodies", "cut", &ready(&cut)));
    let rules = [
        (HOST, "/", "Prefix", "web", "80"),
        (HOST, "/cut", "Prefix", "cut", "80"),
    ];
    m.write(
        "ingress.yaml",
        &ingress("bodies", "bodies", "2026-01-01T00:00:00Z", &rules),
    );
    m
}

/// A member that reads the first bytes of each request and closes the connection.
async fn closing_member() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut some = [0u8; 64];
            let _ = stream.read(&mut some).await;
        }
    });
    addr
}

fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

fn post_chunked(path: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        body.len()
    );
    [head.as_bytes(), body, b"\r\n0\r\n\r\n"].concat()
}

/// A POST that hyper's path serves (the own path declines `Expect`).
fn post_expecting(path: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {HOST}\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n").into_bytes()
}

/// The next final response on `stream` (interim ones skipped).
async fn response(stream: &mut TcpStream, rest: &mut Vec<u8>) -> Option<(u16, Value)> {
    loop {
        match any_response(stream, rest).await? {
            (100..=199, _) => {}
            answer => return Some(answer),
        }
    }
}

/// The next response on `stream` (its body by `Content-Length`), with what was read past it
/// kept in `rest`: the status and the body as JSON (`Null` when it is not JSON), `None` when
/// the connection ended first or nothing came within 5 s.
async fn any_response(stream: &mut TcpStream, rest: &mut Vec<u8>) -> Option<(u16, Value)> {
    let read = async {
        loop {
            if let Some(at) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&rest[..at]).to_ascii_lowercase();
                let status = head.split_whitespace().nth(1)?.parse().ok()?;
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if rest.len() >= at + 4 + length {
                    let body: Vec<u8> = rest.drain(..at + 4 + length).skip(at + 4).collect();
                    return Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)));
                }
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => rest.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

/// The echo member's count of the body bytes it received.
fn received(echo: &Value) -> u64 {
    echo["body_bytes"].as_u64().unwrap_or(u64::MAX)
}

async fn start(flags: &[&str]) -> (Manifests, Portico) {
    let m = manifests().await;
    let p = Portico::start(m.path(), flags).await;
    p.wait_route(HOST, "/", 200, "web").await;
    (m, p)
}

#[tokio::test]
async fn bodies_reach_the_member_whole_between_other_requests_on_one_connection() {
    let (_m, p) = start(&[]).await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    let mut rest = Vec::new();
    let one_kib = vec![b'a'; 1024];
    let big = vec![b'b'; 200 * 1024];
    // A body in the head's write, a GET, a body sent in pieces, a chunked one sent in pieces
    // and one with `Expect` (both hyper's path), then a body of 1 byte.
    stream.write_all(&post("/one", &one_kib)).await.unwrap();
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 1024), "{echo}");
    assert_eq!(echo["method"], "POST", "{echo}");
    stream.write_all(&get("/between")).await.unwrap();
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 0), "{echo}");
    let whole = post("/pieces", &big);
    for piece in whole.chunks(50_000) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 200 * 1024), "{echo}");
    let whole = post_chunked("/chunked", &big);
    for piece in whole.chunks(50_000) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 200 * 1024), "{echo}");
    let expecting = post_expecting("/expect", &one_kib);
    stream.write_all(&expecting).await.unwrap();
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 1024), "{echo}");
    stream.write_all(&post("/last", b"z")).await.unwrap();
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 1), "{echo}");
    assert_eq!(echo["path"], "/last", "{echo}");
}

#[tokio::test]
async fn pipelined_requests_with_bodies_are_answered_in_order() {
    let (_m, p) = start(&[]).await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    let raw = [
        post("/p1", &[b'x'; 300]),
        get("/g"),
        post("/p2", &[b'y'; 5000]),
        post_chunked("/c", &[b'z'; 700]),
        post("/p3", b""),
    ]
    .concat();
    stream.write_all(&raw).await.unwrap();
    let mut rest = Vec::new();
    let answers = [
        ("/p1", 300),
        ("/g", 0),
        ("/p2", 5000),
        ("/c", 700),
        ("/p3", 0),
    ];
    for (path, bytes) in answers {
        let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
        assert_eq!(status, 200, "{path}: {echo}");
        assert_eq!(echo["path"], path, "{echo}");
        assert_eq!(received(&echo), bytes, "{path}: {echo}");
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413_and_one_at_it_is_served() {
    let (_m, p) = start(&["--max-body-bytes", "1000"]).await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    let mut rest = Vec::new();
    stream.write_all(&post("/at", &[b'a'; 1000])).await.unwrap();
    let (status, echo) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!((status, received(&echo)), (200, 1000), "{echo}");
    stream
        .write_all(&post("/over", &[b'a'; 1001]))
        .await
        .unwrap();
    let (status, _) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!(status, 413);
    // The body was not read: the connection ends.
    assert!(response(&mut stream, &mut rest).await.is_none());
}

#[tokio::test]
async fn a_member_closing_mid_request_gets_the_same_answer_on_both_paths_and_no_second_try() {
    let (_m, p) = start(&[]).await;
    let body = vec![b'c'; 100 * 1024];
    let mut answers = Vec::new();
    let raws = [
        post("/cut", &body),
        post_chunked("/cut", &body),
        post_expecting("/cut", &body),
    ];
    for raw in raws {
        let mut stream = TcpStream::connect(p.http).await.unwrap();
        // The member may close before the whole body is written.
        let _ = stream.write_all(&raw).await;
        let mut rest = Vec::new();
        answers.push(response(&mut stream, &mut rest).await.map(|(s, _)| s));
    }
    assert_eq!(answers, [Some(502), Some(502), Some(502)]);
    // Each POST went to one member only: a body once sent is not sent again.
    assert_eq!(retries(&p).await, 0.0);
    // A GET is (the pool's other member closes too).
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    stream.write_all(&get("/cut")).await.unwrap();
    let answer = response(&mut stream, &mut Vec::new()).await;
    assert_eq!(answer.map(|(s, _)| s), Some(502));
    assert_eq!(retries(&p).await, 1.0);
}

/// The retries made for the pool of Service `cut`.
async fn retries(p: &Portico) -> f64 {
    let metrics = p.metrics().await;
    metrics
        .lines()
        .filter(|l| l.starts_with("portico_upstream_retries_total{") && l.contains("cut"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn the_access_log_counts_the_body_bytes_received() {
    let (_m, p) = start(&[]).await;
    let mut stream = TcpStream::connect(p.http).await.unwrap();
    let mut rest = Vec::new();
    stream
        .write_all(&post("/logged", &[b'l'; 4321]))
        .await
        .unwrap();
    let (status, _) = response(&mut stream, &mut rest).await.unwrap();
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let printed = p.stdout.lock().unwrap().join("\n");
        let line = printed
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["path"] == "/logged");
        if let Some(line) = line {
            assert_eq!(line["bytes_in"], 4321, "{line}");
            assert_eq!(line["method"], "POST", "{line}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no line:\n{printed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
