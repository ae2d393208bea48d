//! The deadline flags (`--l4-tcp-idle-timeout`, `--l4-udp-idle-timeout`) through the real
//! binary: TCP for providers `l4` and `haproxy` (whose `timeout client`/`timeout server`
//! they set), UDP for `l4` only (haproxy 2.6 has no UDP proxying).

use crate::l4::{
    Endpoint, Provider, l4_service, served_by, start_for, tcp_endpoint, tcp_pod, vip_by,
    wait_connect,
};
use crate::support::{Manifests, free_port};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::UdpSocket;

/// A UDP backend that answers each datagram with the address it came from (the balancer's
/// socket of the flow): a new flow shows as a new port.
async fn udp_peer_pod() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(peer.to_string().as_bytes(), peer).await;
        }
    });
    addr
}

/// Asks over `socket` (one client address and port, so one flow while it lives); the address
/// the member saw.
async fn seen_by_member(socket: &UdpSocket, addr: SocketAddr) -> String {
    let mut buf = [0u8; 256];
    for _ in 0..20 {
        socket.send_to(b"who", addr).await.unwrap();
        let got = tokio::time::timeout(Duration::from_millis(250), socket.recv_from(&mut buf));
        if let Ok(Ok((n, _))) = got.await {
            return String::from_utf8_lossy(&buf[..n]).into_owned();
        }
    }
    panic!("no UDP reply from {addr}");
}

#[tokio::test]
async fn short_l4_idle_timeouts_close_idle_tcp_connections_and_end_udp_flows() {
    idle_timeouts(Provider::L4, "--vip-pool=127.0.54.0/24").await;
}

#[tokio::test]
async fn short_l4_idle_timeouts_close_idle_tcp_connections_haproxy() {
    idle_timeouts(Provider::Haproxy, "--vip-pool=127.0.65.0/24").await;
}

async fn idle_timeouts(provider: Provider, pool: &str) {
    let (tcp, udp) = (tcp_pod("t0").await, udp_peer_pod().await);
    let (pt, pu) = (free_port(), free_port());
    let ports = format!(
        "  - {{name: tcp, port: {pt}, protocol: TCP}}\n  - {{name: udp, port: {pu}, protocol: UDP}}\n"
    );
    let endpoints = [
        tcp_endpoint(&["tcp"], tcp, true),
        Endpoint {
            ports: vec![("udp", "UDP", udp.port())],
            ready: true,
        },
    ];
    let m = Manifests::new();
    let yaml = l4_service("idle", "", &ports, &endpoints);
    m.write("svc.yaml", &served_by(&yaml, provider));
    let args = [pool, "--l4-tcp-idle-timeout=1s", "--l4-udp-idle-timeout=1s"];
    let p = start_for(provider, &m, &args).await;
    let vip = vip_by(&p, "idle", provider).await;

    // TCP: a connection that talks every 300 ms outlives the timeout; an idle one is closed.
    let mut busy = wait_connect(SocketAddr::new(vip, pt)).await;
    let mut quiet = wait_connect(SocketAddr::new(vip, pt)).await;
    let opened = Instant::now();
    for i in 0..8 {
        busy.echo(&format!("still here {i}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(3), quiet.stream.read_to_end(&mut rest));
    let read = read
        .await
        .expect("the idle connection is closed by the balancer");
    assert!(read.is_ok() && rest.is_empty(), "{read:?} {rest:?}");
    assert!(opened.elapsed() >= Duration::from_millis(900));
    busy.echo("after the idle one closed").await.unwrap();
    if provider == Provider::Haproxy {
        return; // No UDP on haproxy.
    }

    // UDP: one client port is one flow (the member sees one balancer port) until it has been
    // idle for the timeout; then the next datagram starts a new flow.
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = SocketAddr::new(vip, pu);
    let first = seen_by_member(&client, addr).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(seen_by_member(&client, addr).await, first, "same flow");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = seen_by_member(&client, addr).await;
    assert_ne!(later, first, "the idle flow ended; a new one began");
}
