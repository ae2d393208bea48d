//! Graceful drain on SIGTERM, per provider: readiness fails at once, requests in flight
//! complete and tell their keep-alive client to close, the listeners close after the grace
//! period, and the process exits within the shutdown limits.

use crate::conformance::Provider;
use crate::support::*;
use crate::websocket::{header, read_head};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn proxy_sigterm_drains_in_flight_requests_then_exits() {
    sigterm_drains_in_flight_requests_then_exits(Provider::Proxy).await;
}

#[tokio::test]
async fn haproxy_sigterm_drains_in_flight_requests_then_exits() {
    sigterm_drains_in_flight_requests_then_exits(Provider::Haproxy).await;
}

#[tokio::test]
async fn proxy_an_idle_keep_alive_client_does_not_hold_the_exit() {
    an_idle_keep_alive_client_does_not_hold_the_exit(Provider::Proxy).await;
}

#[tokio::test]
async fn haproxy_an_idle_keep_alive_client_does_not_hold_the_exit() {
    an_idle_keep_alive_client_does_not_hold_the_exit(Provider::Haproxy).await;
}

#[tokio::test]
async fn proxy_a_request_outliving_the_shutdown_timeout_is_cut_at_the_limit() {
    a_request_outliving_the_shutdown_timeout_is_cut_at_the_limit(Provider::Proxy).await;
}

#[tokio::test]
async fn haproxy_a_request_outliving_the_shutdown_timeout_is_cut_at_the_limit() {
    a_request_outliving_the_shutdown_timeout_is_cut_at_the_limit(Provider::Haproxy).await;
}

const HOST: &str = "drain.test";
const GRACE: Duration = Duration::from_millis(1000);
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long the slow backend takes to answer: past the grace period, within the timeout.
const SLOW: Duration = Duration::from_millis(2000);

async fn start(provider: Provider, dir: &Path) -> Portico {
    start_with(provider, dir, "5s").await
}

/// With a grace period of `GRACE` and a shutdown timeout of `timeout`.
async fn start_with(provider: Provider, dir: &Path, timeout: &str) -> Portico {
    let flags = [
        "--shutdown-grace=1s",
        &format!("--shutdown-timeout={timeout}"),
    ];
    match provider {
        Provider::Haproxy => Portico::start_haproxy(dir, &flags).await,
        _ => Portico::start(dir, &flags).await,
    }
}

/// Sends SIGTERM to `pid`; returns when.
fn sigterm(pid: u32) -> Instant {
    let signalled = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    signalled
}

/// How long after `since` the process exited (waiting at most `within`).
async fn exit_after(pid: u32, since: Instant, within: Duration) -> Duration {
    while !gone(pid) && since.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gone(pid),
        "still running {:?} after SIGTERM",
        since.elapsed()
    );
    since.elapsed()
}

async fn an_idle_keep_alive_client_does_not_hold_the_exit(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path()).await;
    let pid = p.pid().unwrap();
    let mut idle = TcpStream::connect(p.http).await.unwrap();
    send_get(&mut idle, "/").await;
    response_head(&mut idle).await.unwrap();
    let signalled = sigterm(pid);
    let exit = exit_after(pid, signalled, GRACE + TIMEOUT).await;
    assert!(
        exit < GRACE + Duration::from_millis(700),
        "exited after {exit:?}"
    );
    eprintln!("{provider:?}: with an idle keep-alive client, exited after {exit:?}");
}

async fn a_request_outliving_the_shutdown_timeout_is_cut_at_the_limit(provider: Provider) {
    let m = manifests().await;
    // The slow backend answers 1.8 s after the signal: past 1 s of grace and 500 ms.
    let p = start_with(provider, m.path(), "500ms").await;
    let pid = p.pid().unwrap();
    let mut busy = TcpStream::connect(p.http).await.unwrap();
    send_get(&mut busy, "/slow").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let signalled = sigterm(pid);
    let limit = GRACE + Duration::from_millis(500);
    let exit = exit_after(pid, signalled, limit + Duration::from_secs(3)).await;
    assert!(exit >= limit, "exited after {exit:?}, before the limit");
    assert!(
        exit < limit + Duration::from_millis(700),
        "exited after {exit:?}"
    );
    let cut = response_head(&mut busy).await;
    let answered = cut
        .as_ref()
        .is_some_and(|head| head.starts_with("HTTP/1.1 200"));
    assert!(!answered, "{cut:?}");
    eprintln!("{provider:?}: a request past the limit was cut, exited after {exit:?}");
}

/// A backend that answers every request `SLOW` after its head arrived.
async fn slow_backend() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                while read_head(&mut stream).await.is_some() {
                    tokio::time::sleep(SLOW).await;
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nslow";
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn manifests() -> Manifests {
    let m = crate::backends("drain", &[("web", 1)]).await;
    m.write(
        "slow.yaml",
        &service("drain", "slow", &ready(&[slow_backend().await])),
    );
    let rules = [
        (HOST, "/", "Prefix", "web", "80"),
        (HOST, "/slow", "Prefix", "slow", "80"),
    ];
    m.write(
        "ingress.yaml",
        &ingress("drain", "drain", "2026-01-01T00:00:00Z", &rules),
    );
    m
}

/// Sends `GET path` on a keep-alive connection.
async fn send_get(stream: &mut TcpStream, path: &str) {
    let request = format!("GET {path} HTTP/1.1\r\nhost: {HOST}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
}

/// The next response's head (its body, read by Content-Length, is dropped).
async fn response_head(stream: &mut TcpStream) -> Option<String> {
    let head = tokio::time::timeout(Duration::from_secs(10), read_head(stream))
        .await
        .ok()??;
    let length: usize = header(&head, "content-length")?.parse().ok()?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(head)
}

fn asks_to_close(head: &str) -> bool {
    header(head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

/// The process has exited (it is gone or a zombie nobody waited for yet).
async fn readyz(p: &Portico) -> Option<u16> {
    let reply = p
        .request(p.admin, "GET", "localhost", "/readyz", &[], "")
        .await;
    reply.ok().map(|r| r.status)
}

async fn sigterm_drains_in_flight_requests_then_exits(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path()).await;
    let pid = p.pid().unwrap();
    // A keep-alive client that already had an answer, and a request in flight.
    let mut idle = TcpStream::connect(p.http).await.unwrap();
    send_get(&mut idle, "/").await;
    let first = response_head(&mut idle).await.unwrap();
    assert!(!asks_to_close(&first), "{first}");
    let mut busy = TcpStream::connect(p.http).await.unwrap();
    send_get(&mut busy, "/slow").await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let signalled = sigterm(pid);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(readyz(&p).await, Some(503), "readiness fails at once");

    // Within the grace period: still served.
    send_get(&mut idle, "/").await;
    let during = response_head(&mut idle).await;
    let during = during.expect("served during the grace period");
    assert!(during.starts_with("HTTP/1.1 200"), "{during}");
    // The proxy asks keep-alive clients to close from the signal on; haproxy from its soft
    // stop at the end of the grace period (it keeps idle connections for their next request:
    // `option idle-close-on-response`).
    let proxy = matches!(provider, Provider::Proxy);
    assert_eq!(asks_to_close(&during), proxy, "{during}");

    // After the grace period: refused.
    tokio::time::sleep_until((signalled + GRACE + Duration::from_millis(300)).into()).await;
    let late = TcpStream::connect(p.http).await;
    assert!(
        late.is_err(),
        "a new connection after the grace period was accepted"
    );

    // The request in flight completes, and its client is told to close.
    let done = response_head(&mut busy)
        .await
        .expect("the request in flight completes");
    assert!(done.starts_with("HTTP/1.1 200"), "{done}");
    assert!(asks_to_close(&done), "{done}");
    let completed = signalled.elapsed();
    if !proxy {
        send_get(&mut idle, "/").await;
        let last = response_head(&mut idle)
            .await
            .expect("the idle client's last request");
        assert!(asks_to_close(&last), "{last}");
    }

    let exit = exit_after(pid, signalled, GRACE + TIMEOUT + Duration::from_secs(3)).await;
    assert!(exit <= GRACE + TIMEOUT, "exited {exit:?} after SIGTERM");
    eprintln!(
        "{provider:?}: in-flight request done {completed:?} after SIGTERM, exited after {exit:?}"
    );
}
