//! Per-pool upstream settings from Ingress annotations, per provider (the built-in proxy and
//! haproxy): read and connect timeouts, body size, allowed sources, retries to another
//! member and the retry budget, against real backends (echo, silent, refusing, resetting and
//! black-holed ones).

use crate::conformance::Provider;
use crate::raw_client::{connect_from, read_response};
use crate::support::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

proxy_and_haproxy!(
    a_slow_backend_gets_504_after_the_pools_read_timeout,
    a_body_that_stalls_is_cut_after_the_read_timeout_and_a_slow_steady_one_is_not,
    a_connect_that_times_out_goes_to_the_next_member,
    a_body_over_the_pools_size_gets_413_while_another_pool_accepts_it,
    a_client_outside_the_allowed_sources_gets_403,
    a_client_in_the_denied_sources_gets_403_even_when_allowed,
    gets_succeed_when_one_of_two_members_refuses_connections,
    a_post_to_a_member_that_resets_after_reading_it_is_not_retried,
    a_member_killed_under_load_fails_no_request_after_its_detection,
    backend_protocols_https_grpcs_and_grpc_reach_tls_and_h2_backends,
    upstream_verification_trusts_only_the_named_ca_and_server_name,
    active_checks_reach_tls_and_h2_members_as_their_traffic_does,
);

/// The send timeout is the built-in proxy's alone (haproxy's `timeout server` covers both
/// directions: docs/upstreams.md).
#[tokio::test]
async fn a_member_that_stops_reading_the_body_fails_after_the_send_timeout() {
    let m = Manifests::new();
    let deaf = silent_backend();
    let mut y = service(NS, "deaf", &ready(&[deaf]));
    let settings = [("proxy-send-timeout", "1"), ("proxy-body-size", "0")];
    y.push_str(&annotated("deaf", "deaf.test", "deaf", &settings));
    m.write("deaf.yaml", &y);
    let p = start(Provider::Proxy, m.path()).await;
    let size = 64 * 1024 * 1024;
    let stream = TcpStream::connect(p.http).await.unwrap();
    let (mut rx, mut tx) = stream.into_split();
    let head = format!("POST / HTTP/1.1\r\nHost: deaf.test\r\nContent-Length: {size}\r\n\r\n");
    let writer = tokio::spawn(async move {
        tx.write_all(head.as_bytes()).await?;
        let chunk = vec![b'z'; 64 * 1024];
        for _ in 0..size / chunk.len() {
            tx.write_all(&chunk).await?;
        }
        Ok::<_, std::io::Error>(tx)
    });
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.expect("an answer within 20 s");
    let took = started.elapsed();
    writer.abort();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 504"), "{text:?} after {took:?}");
    // Loopback buffers take a few MiB first; then the member reads nothing for a second.
    assert!(took < Duration::from_secs(10), "504 after {took:?}");
}

/// The retry budget is the built-in proxy's alone (haproxy has none: docs/upstreams.md).
#[tokio::test]
async fn with_a_zero_budget_only_the_minimum_per_second_is_retried() {
    budget_zero(Provider::Proxy).await
}

const NS: &str = "up";

async fn start(provider: Provider, dir: &Path) -> Portico {
    match provider {
        Provider::Haproxy => Portico::start_haproxy(dir, &[]).await,
        _ => Portico::start(dir, &[]).await,
    }
}

/// An Ingress `name` routing every path of `host` to `svc` port 80, with `annotations`
/// (keys after `portico.dev/`).
fn annotated(name: &str, host: &str, svc: &str, annotations: &[(&str, &str)]) -> String {
    let mut y = format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {NS}\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n"
    );
    if !annotations.is_empty() {
        y.push_str("  annotations:\n");
        for (k, v) in annotations {
            let _ = writeln!(y, "    portico.dev/{k}: \"{v}\"");
        }
    }
    let _ = write!(
        y,
        "spec:\n  ingressClassName: portico\n  rules:\n  - host: \"{host}\"\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: {svc}\n            port:\n              number: 80\n"
    );
    y
}

/// An address where connections are refused: a port bound and released.
fn refusing_backend() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// An address where a connect never completes: a listener that never accepts, its accept
/// queue full, so the kernel drops further SYNs. The returned guard keeps it so.
async fn black_hole() -> (SocketAddr, Vec<TcpStream>, TcpListener) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fill = Vec::new();
    // Fill the queue: connects that complete now; the next ones hang.
    loop {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => fill.push(stream),
            _ => break,
        }
        assert!(fill.len() < 64, "the accept queue never filled");
    }
    (addr, fill, listener)
}

/// A backend that reads a request head and closes the connection without answering; counts
/// the requests it got.
async fn resetting_backend() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"\r\n\r\n") {
                        count.fetch_add(1, Ordering::SeqCst);
                        // Close without a byte of response.
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

async fn a_slow_backend_gets_504_after_the_pools_read_timeout(provider: Provider) {
    let m = Manifests::new();
    let slow = silent_backend();
    let mut y = service(NS, "slow", &ready(&[slow]));
    y.push_str(&annotated(
        "slow",
        "slow.test",
        "slow",
        &[("proxy-read-timeout", "1")],
    ));
    m.write("slow.yaml", &y);
    let p = start(provider, m.path()).await;
    let started = Instant::now();
    let r = p.get("slow.test", "/").await;
    let took = started.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    // The global upstream timeout is 60 s: the pool's 1 s applied.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "504 after {took:?}"
    );
}

/// A backend that answers every connection with a head announcing 100 bytes, then sends
/// ten bytes every `gap`, `parts` times, and then holds the connection without a word.
fn trickling_backend(gap: Duration, parts: usize) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || trickle(stream, gap, parts));
        }
    });
    addr
}

fn trickle(mut stream: std::net::TcpStream, gap: Duration, parts: usize) {
    use std::io::{Read, Write};
    let mut head = [0u8; 4096];
    if stream.read(&mut head).is_err() {
        return;
    }
    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n";
    if stream.write_all(reply).is_err() {
        return;
    }
    for _ in 0..parts {
        if stream.write_all(b"0123456789").is_err() {
            return;
        }
        std::thread::sleep(gap);
    }
    // Held open until the proxy closes it: a read returns then.
    let _ = stream.read(&mut head);
}

/// What a client read of one `GET` before the connection closed (or 15 s passed), and when.
async fn read_until_closed(proxy: SocketAddr, host: &str) -> (String, Duration) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer));
    let _ = read.await;
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

/// `proxy-read-timeout` bounds each wait between two reads of the response body, not the
/// whole body: a body that stops is cut after about the timeout, one that keeps coming in
/// small parts with shorter gaps arrives whole even though it takes longer in all.
async fn a_body_that_stalls_is_cut_after_the_read_timeout_and_a_slow_steady_one_is_not(
    provider: Provider,
) {
    let m = Manifests::new();
    let stalls = trickling_backend(Duration::from_millis(10), 3);
    let steady = trickling_backend(Duration::from_millis(400), 10);
    let timeout = [("proxy-read-timeout", "1")];
    let mut y = service(NS, "stalls", &ready(&[stalls]));
    y.push_str(&annotated("stalls", "stalls.test", "stalls", &timeout));
    y.push_str(&service(NS, "steady", &ready(&[steady])));
    y.push_str(&annotated("steady", "steady.test", "steady", &timeout));
    m.write("trickle.yaml", &y);
    let p = start(provider, m.path()).await;

    let (answer, took) = read_until_closed(p.http, "stalls.test").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(
        answer.ends_with("012345678901234567890123456789"),
        "{answer:?}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(8),
        "the stalled body was cut after {took:?}"
    );

    let (answer, took) = read_until_closed(p.http, "steady.test").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.ends_with(&"0123456789".repeat(10)), "{answer:?}");
    assert!(
        took >= Duration::from_millis(3500),
        "the whole body took only {took:?}"
    );
}

async fn a_connect_that_times_out_goes_to_the_next_member(provider: Provider) {
    let m = Manifests::new();
    let (hole, _fill, _listener) = black_hole().await;
    let good = echo_pods("mixed", 1).await;
    let mut y = service(NS, "mixed", &ready(&[hole, good[0]]));
    let settings = [("proxy-connect-timeout", "300ms")];
    y.push_str(&annotated("mixed", "mixed.test", "mixed", &settings));
    m.write("mixed.yaml", &y);
    let p = start(provider, m.path()).await;
    for i in 0..6 {
        let started = Instant::now();
        let r = p.get("mixed.test", "/").await;
        let took = started.elapsed();
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert_eq!(r.service(), "mixed");
        assert!(took < Duration::from_secs(3), "request {i} took {took:?}");
    }
}

async fn a_body_over_the_pools_size_gets_413_while_another_pool_accepts_it(provider: Provider) {
    let m = crate::backends(NS, &[("small", 1), ("big", 1)]).await;
    let mut y = annotated("small", "small.test", "small", &[("proxy-body-size", "1k")]);
    y.push_str(&annotated("big", "big.test", "big", &[]));
    m.write("ingress.yaml", &y);
    let p = start(provider, m.path()).await;
    let body = "x".repeat(4096);
    let post = |host: &'static str| {
        let (p, body) = (&p, body.clone());
        async move {
            let r = p.request(p.http, "POST", host, "/", &[], &body).await;
            r.unwrap().status
        }
    };
    assert_eq!(post("small.test").await, 413);
    assert_eq!(post("big.test").await, 200);
    let small = p
        .request(p.http, "POST", "small.test", "/", &[], "short")
        .await;
    assert_eq!(small.unwrap().status, 200);
    // Chunked: no length up front.
    let chunked = |host: &str| {
        let mut raw = format!(
            "POST / HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        for _ in 0..4 {
            raw.push_str(&format!("400\r\n{}\r\n", "y".repeat(1024)));
        }
        raw.push_str("0\r\n\r\n");
        raw
    };
    for (host, want) in [("small.test", 413), ("big.test", 200)] {
        let mut stream = TcpStream::connect(p.http).await.unwrap();
        let _ = stream.write_all(chunked(host).as_bytes()).await;
        let status = read_response(&mut stream).await.unwrap_or(0);
        assert_eq!(status, want, "chunked body to {host}");
    }
}

async fn a_client_outside_the_allowed_sources_gets_403(provider: Provider) {
    let m = crate::backends(NS, &[("inner", 1)]).await;
    let settings = [("allowlist-source-range", "127.0.0.2/32, 10.0.0.0/8")];
    m.write(
        "ingress.yaml",
        &annotated("inner", "inner.test", "inner", &settings),
    );
    let p = start(provider, m.path()).await;
    let from = |ip: [u8; 4]| {
        let to = p.http;
        async move {
            let mut s = connect_from(IpAddr::from(ip), to).await.unwrap();
            let raw = "GET / HTTP/1.1\r\nHost: inner.test\r\nConnection: close\r\n\r\n";
            s.write_all(raw.as_bytes()).await.unwrap();
            read_response(&mut s).await.unwrap_or(0)
        }
    };
    assert_eq!(from([127, 0, 0, 1]).await, 403);
    assert_eq!(from([127, 0, 0, 3]).await, 403);
    assert_eq!(from([127, 0, 0, 2]).await, 200);
}

/// ingress-nginx's `denylist-source-range` (its e2e test: a denied client gets 403, others
/// 200); with an allowlist too, the denylist is checked first.
async fn a_client_in_the_denied_sources_gets_403_even_when_allowed(provider: Provider) {
    let m = crate::backends(NS, &[("deny", 1)]).await;
    let mut y = annotated(
        "deny",
        "deny.test",
        "deny",
        &[("denylist-source-range", "127.0.0.2/32, 10.0.0.0/8")],
    );
    let both = [
        ("denylist-source-range", "127.0.0.4"),
        ("allowlist-source-range", "127.0.0.0/24"),
    ];
    y.push_str(&annotated("both", "both.test", "deny", &both));
    m.write("ingress.yaml", &y);
    let p = start(provider, m.path()).await;
    let from = |ip: [u8; 4], host: &'static str| {
        let to = p.http;
        async move {
            let mut s = connect_from(IpAddr::from(ip), to).await.unwrap();
            let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
            s.write_all(raw.as_bytes()).await.unwrap();
            read_response(&mut s).await.unwrap_or(0)
        }
    };
    assert_eq!(from([127, 0, 0, 2], "deny.test").await, 403);
    assert_eq!(from([127, 0, 0, 1], "deny.test").await, 200);
    assert_eq!(from([127, 0, 0, 3], "deny.test").await, 200);
    // In the allowlist and in the denylist: refused.
    assert_eq!(from([127, 0, 0, 4], "both.test").await, 403);
    assert_eq!(from([127, 0, 0, 5], "both.test").await, 200);
}

async fn gets_succeed_when_one_of_two_members_refuses_connections(provider: Provider) {
    let m = Manifests::new();
    let good = echo_pods("half", 1).await;
    let mut y = service(NS, "half", &ready(&[refusing_backend(), good[0]]));
    // Half the requests need a retry (passive health, off here, would take the member out):
    // a budget that allows them.
    let settings = [("retry-budget", "100"), ("passive-health-failures", "0")];
    y.push_str(&annotated("half", "half.test", "half", &settings));
    m.write("half.yaml", &y);
    let p = start(provider, m.path()).await;
    for i in 0..20 {
        let r = p.get("half.test", "/").await;
        assert_eq!(r.status, 200, "GET {i}: {r:?}");
    }
    // So does a POST: nothing of it was sent to the refusing member.
    for i in 0..6 {
        let r = p
            .request(p.http, "POST", "half.test", "/", &[], "data")
            .await;
        assert_eq!(r.unwrap().status, 200, "POST {i}");
    }
    if matches!(provider, Provider::Proxy) {
        let text = p.metrics().await;
        let retries = text
            .lines()
            .find(|l| l.starts_with("portico_upstream_retries_total{") && l.contains("half"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
        assert!(retries.is_some_and(|n| n >= 10), "{text}");
    }
}

async fn a_post_to_a_member_that_resets_after_reading_it_is_not_retried(provider: Provider) {
    let m = Manifests::new();
    let good = echo_pods("reset", 1).await;
    let (bad, seen) = resetting_backend().await;
    let mut y = service(NS, "reset", &ready(&[bad, good[0]]));
    let settings = [("retry-budget", "100")];
    y.push_str(&annotated("reset", "reset.test", "reset", &settings));
    m.write("reset.yaml", &y);
    let p = start(provider, m.path()).await;
    let mut failed = 0;
    // Each POST on a connection of its own: on a reused client connection, haproxy answers a
    // member's silent close by closing the client connection without a response (as if its
    // keep-alive had timed out), which the client sees as an error rather than a 502.
    for _ in 0..8 {
        let mut s = TcpStream::connect(p.http).await.unwrap();
        let raw = "POST / HTTP/1.1\r\nHost: reset.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\nonce";
        s.write_all(raw.as_bytes()).await.unwrap();
        match read_response(&mut s).await.unwrap_or(0) {
            200 => {}
            502 => failed += 1,
            other => panic!("POST answered {other}"),
        }
    }
    // Each POST the resetting member read failed there and went nowhere else.
    assert!(failed > 0, "no POST reached the resetting member");
    assert_eq!(seen.load(Ordering::SeqCst), failed);
    // A GET it resets goes to the other member.
    let before = seen.load(Ordering::SeqCst);
    for i in 0..8 {
        let r = p.get("reset.test", "/").await;
        assert_eq!(r.status, 200, "GET {i}: {r:?}");
    }
    assert!(seen.load(Ordering::SeqCst) > before, "no GET was reset");
}

async fn budget_zero(provider: Provider) {
    let m = Manifests::new();
    let good = echo_pods("thrifty", 1).await;
    let mut y = service(NS, "thrifty", &ready(&[refusing_backend(), good[0]]));
    y.push_str(&annotated(
        "thrifty",
        "thrifty.test",
        "thrifty",
        &[("retry-budget", "0"), ("passive-health-failures", "0")],
    ));
    m.write("thrifty.yaml", &y);
    let p = start(provider, m.path()).await;
    let started = Instant::now();
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..40 {
        match p.get("thrifty.test", "/").await.status {
            200 => ok += 1,
            _ => failed += 1,
        }
    }
    let seconds = started.elapsed().as_secs() + 1;
    // Half the requests go to the refusing member first; at most 3 retries per second.
    let retried = ok - 20;
    println!("{ok} answered, {failed} failed over {seconds} s");
    assert!(
        retried <= 3 * seconds as usize,
        "{retried} retries in {seconds} s"
    );
    assert!(failed >= 20 - 3 * seconds as usize);
    assert!(retried >= 3, "the per-second minimum was not retried");
}

/// The echo child process of [`a_member_killed_under_load_fails_no_request_after_its_detection`]:
/// run by the test binary itself with `PORTICO_TEST_ECHO=<addr>`; does nothing otherwise.
#[tokio::test]
#[ignore = "a helper process, started by another test"]
async fn echo_process() {
    let Ok(addr) = std::env::var("PORTICO_TEST_ECHO") else {
        return;
    };
    let addr: SocketAddr = addr.parse().unwrap();
    portico_echo::spawn(addr, "kill", &addr.to_string())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// An echo backend in a process of its own (this test binary, running [`echo_process`]).
async fn echo_child() -> (SocketAddr, tokio::process::Child) {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "upstreams::echo_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("PORTICO_TEST_ECHO", addr.to_string())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "echo child did not listen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (addr, child)
}

async fn a_member_killed_under_load_fails_no_request_after_its_detection(provider: Provider) {
    let mut members = Vec::new();
    let mut children = Vec::new();
    for _ in 0..3 {
        let (addr, child) = echo_child().await;
        members.push(addr);
        children.push(child);
    }
    let m = Manifests::new();
    let mut y = service(NS, "kill", &ready(&members));
    // The default retry budget (20 %): passive health takes the dead member out after its
    // first failed tries, so few requests need a retry.
    y.push_str(&annotated("kill", "kill.test", "kill", &[]));
    m.write("kill.yaml", &y);
    let p = Arc::new(start(provider, m.path()).await);
    p.wait_route("kill.test", "/", 200, "kill").await;
    let started = Instant::now();
    let load = Duration::from_secs(10);
    // Failures: when the request started and ended (since the start), and its status.
    type Failure = (Duration, Duration, u16);
    let failures = Arc::new(std::sync::Mutex::new(Vec::<Failure>::new()));
    let total = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (p, failures, total) = (p.clone(), failures.clone(), total.clone());
        clients.spawn(async move {
            while started.elapsed() < load {
                let sent = started.elapsed();
                let r = p.request(p.http, "GET", "kill.test", "/", &[], "").await;
                let status = r.map_or(0, |r| r.status);
                total.fetch_add(1, Ordering::Relaxed);
                if status != 200 {
                    let failure = (sent, started.elapsed(), status);
                    failures.lock().unwrap().push(failure);
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = children.remove(0);
    let pid = victim.id().unwrap();
    let killed_at = started.elapsed();
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    while clients.join_next().await.is_some() {}
    let failures = failures.lock().unwrap().clone();
    println!(
        "{provider:?}: {} requests, member {} SIGKILLed at {killed_at:?}; {} failed",
        total.load(Ordering::Relaxed),
        members[0],
        failures.len()
    );
    // The kill is detected when a request first fails on the dead member (with retries, none
    // may: that member's failures go to another). No request sent after that may fail.
    let detected = failures
        .iter()
        .filter(|(_, ended, _)| *ended >= killed_at)
        .map(|(_, ended, _)| *ended)
        .min()
        .unwrap_or(killed_at);
    let before: Vec<_> = failures.iter().filter(|(s, _, _)| *s <= detected).collect();
    let after: Vec<_> = failures.iter().filter(|(s, _, _)| *s > detected).collect();
    println!("failures up to the detection at {detected:?}: {before:?}");
    assert!(
        after.is_empty(),
        "requests failed after the detection: {after:?}"
    );
    drop(victim);
}

/// A TLS echo backend (HTTP/1.1 and HTTP/2 by ALPN) whose certificate names `web.up.svc` and
/// chains to a new authority: it answers `{"service": service, "proto": …}`.
async fn tls_echo(service: &'static str) -> SocketAddr {
    tls_echo_with_ca(service).await.0
}

/// [`tls_echo`], with the PEM of the authority that signed its certificate; its answers also
/// name the SNI the client sent (`"sni"`, empty without one).
pub(crate) async fn tls_echo_with_ca(service: &'static str) -> (SocketAddr, String) {
    tls_backend(service, false).await
}

/// [`tls_echo_with_ca`]; when `sick`, `/healthz` answers 503.
async fn tls_backend(service: &'static str, sick: bool) -> (SocketAddr, String) {
    let ca = portico_tls::generate::Authority::new("upstream test CA").unwrap();
    let issued = ca.issue(&["web.up.svc"]).unwrap();
    (
        tls_backend_with(&issued, service, sick).await,
        ca.cert_pem().to_owned(),
    )
}

/// [`tls_backend`] serving the certificate `issued`.
pub(crate) async fn tls_backend_with(
    issued: &portico_tls::generate::Issued,
    service: &'static str,
    sick: bool,
) -> SocketAddr {
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let material =
        portico_tls::Material::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes())
            .unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(portico_tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let mut config = builder
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(material.certified_key().clone())));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let sni = tls.get_ref().1.server_name().unwrap_or_default().to_owned();
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let sni = sni.clone();
                    async move {
                        let body = format!(
                            "{{\"service\":\"{service}\",\"proto\":\"{:?}\",\"sni\":\"{sni}\"}}",
                            req.version()
                        );
                        let mut response = http::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(body),
                        ));
                        if sick && req.uri().path() == "/healthz" {
                            *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                        }
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    addr
}

#[derive(Debug)]
struct Fixed(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

async fn backend_protocols_https_grpcs_and_grpc_reach_tls_and_h2_backends(provider: Provider) {
    let m = Manifests::new();
    let secure = tls_echo("secure").await;
    let plain = echo_pods("plain", 1).await;
    let mut y = service(NS, "web", &ready(&[secure]));
    y.push_str(&service(NS, "plain", &ready(&plain)));
    y.push_str(&annotated(
        "https",
        "https.test",
        "web",
        &[("backend-protocol", "HTTPS")],
    ));
    y.push_str(&annotated(
        "grpcs",
        "grpcs.test",
        "web",
        &[("backend-protocol", "GRPCS")],
    ));
    y.push_str(&annotated(
        "verified",
        "verified.test",
        "web",
        &[
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-verify", "true"),
            ("proxy-ssl-secret", "up/upstream-ca"),
            ("proxy-ssl-server-name", "true"),
        ],
    ));
    y.push_str(&annotated(
        "grpc",
        "grpc.test",
        "plain",
        &[("backend-protocol", "GRPC")],
    ));
    m.write("protocols.yaml", &y);
    let p = start(provider, m.path()).await;
    let https = p.get("https.test", "/").await;
    assert_eq!(
        (https.status, https.service()),
        (200, "secure".into()),
        "{https:?}"
    );
    assert_eq!(https.json()["proto"], "HTTP/1.1");
    let grpcs = p.get("grpcs.test", "/").await;
    assert_eq!(
        (grpcs.status, grpcs.service()),
        (200, "secure".into()),
        "{grpcs:?}"
    );
    assert_eq!(grpcs.json()["proto"], "HTTP/2.0");
    let grpc = p.get("grpc.test", "/").await;
    assert_eq!(
        (grpc.status, grpc.service()),
        (200, "plain".into()),
        "{grpc:?}"
    );
    assert_eq!(grpc.json()["proto"], "HTTP/2.0");
    // Verification on, its CA Secret absent: it fails closed.
    let verified = p.get("verified.test", "/").await;
    assert_eq!(verified.status, 502, "{verified:?}");
}

/// Active health checks speak what the pool speaks: TLS for `HTTPS`, HTTP/2 over TLS for
/// `GRPCS`. Of two members, the one whose `/healthz` fails leaves the rotation and the other
/// keeps serving (checked in plain HTTP/1.1, both would fail and the pool would answer 503).
async fn active_checks_reach_tls_and_h2_members_as_their_traffic_does(provider: Provider) {
    let m = Manifests::new();
    let (good, _) = tls_backend("good", false).await;
    let (sick, _) = tls_backend("sick", true).await;
    let mut y = service(NS, "web", &ready(&[good, sick]));
    let checks = [
        ("health-check-path", "/healthz"),
        ("health-check-interval", "200ms"),
        ("health-check-unhealthy-threshold", "2"),
    ];
    for (name, protocol) in [("https", "HTTPS"), ("grpcs", "GRPCS")] {
        let mut annotations = vec![("backend-protocol", protocol)];
        annotations.extend(checks);
        y.push_str(&annotated(
            name,
            &format!("{name}.test"),
            "web",
            &annotations,
        ));
    }
    m.write("checked.yaml", &y);
    let p = start(provider, m.path()).await;
    for host in ["https.test", "grpcs.test"] {
        let start = Instant::now();
        loop {
            let mut served = BTreeMap::new();
            for _ in 0..8 {
                let r = p.get(host, "/").await;
                *served.entry((r.status, r.service())).or_insert(0) += 1;
            }
            if served.len() == 1 && served.contains_key(&(200, "good".into())) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(8),
                "{host}: still {served:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A Secret `name` in the test namespace holding `ca_pem` under `ca.crt`.
pub(crate) fn ca_secret(name: &str, ca_pem: &str) -> String {
    let indented: String = ca_pem.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {NS}\nstringData:\n  ca.crt: |\n{indented}"
    )
}

async fn upstream_verification_trusts_only_the_named_ca_and_server_name(provider: Provider) {
    let m = Manifests::new();
    let (secure, ca_pem) = tls_echo_with_ca("secure").await;
    let stranger = portico_tls::generate::Authority::new("another CA").unwrap();
    let mut y = service(NS, "web", &ready(&[secure]));
    y.push_str(&ca_secret("upstream-ca", &ca_pem));
    y.push_str(&ca_secret("other-ca", stranger.cert_pem()));
    let verify = |secret: &'static str| {
        vec![
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-verify", "true"),
            ("proxy-ssl-secret", secret),
        ]
    };
    let mut sni = verify("upstream-ca");
    sni.push(("proxy-ssl-server-name", "true"));
    y.push_str(&annotated("good", "good.test", "web", &sni));
    y.push_str(&annotated(
        "nosni",
        "nosni.test",
        "web",
        &verify("upstream-ca"),
    ));
    y.push_str(&annotated(
        "stranger",
        "stranger.test",
        "web",
        &verify("other-ca"),
    ));
    let mut wrong_name = verify("upstream-ca");
    wrong_name.push(("proxy-ssl-name", "other.up.svc"));
    y.push_str(&annotated(
        "wrongname",
        "wrongname.test",
        "web",
        &wrong_name,
    ));
    let mut named = verify("upstream-ca");
    named.push(("proxy-ssl-name", "web.up.svc"));
    y.push_str(&annotated("named", "named.test", "web", &named));
    y.push_str(&annotated(
        "missing",
        "missing.test",
        "web",
        &verify("no-such-ca"),
    ));
    m.write("verify.yaml", &y);
    let p = start(provider, m.path()).await;

    let good = p.get("good.test", "/").await;
    assert_eq!(
        (good.status, good.service()),
        (200, "secure".into()),
        "{good:?}"
    );
    assert_eq!(good.json()["sni"], "web.up.svc", "{good:?}");
    let nosni = p.get("nosni.test", "/").await;
    assert_eq!(nosni.status, 200, "{nosni:?}");
    assert_eq!(nosni.json()["sni"], "", "{nosni:?}");
    let named = p.get("named.test", "/").await;
    assert_eq!(named.status, 200, "{named:?}");
    for host in ["stranger.test", "wrongname.test", "missing.test"] {
        let r = p.get(host, "/").await;
        assert_eq!(r.status, 502, "{host}: {r:?}");
    }
    let missing = p.ingress(NS, "missing").await;
    let found: Vec<_> = (missing["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default())
    .into_iter()
    .filter(|d| d["field"] == "metadata.annotations[portico.dev/proxy-ssl-secret]")
    .collect();
    assert_eq!(found.len(), 1, "{missing:#}");
    assert_eq!(found[0]["severity"], "warning", "{missing:#}");
    let message = found[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("secret \"up/no-such-ca\" not found"),
        "{message}"
    );
    // The Ingresses whose CA Secret is usable carry no such warning, and no Secret data shows.
    let good = p.ingress(NS, "good").await;
    assert!(!good.to_string().contains("proxy-ssl-secret"), "{good:#}");
    let all = p.admin_json("/api/v1/diagnostics").await.to_string();
    assert!(!all.contains("BEGIN CERTIFICATE"), "Secret data in {all}");
}
