//! Providers `l4` and `haproxy` (`send-proxy-v2`) with `portico.dev/proxy-protocol: "v2"`: the member, a TCP server here that
//! parses the header itself, learns the client's address and port and the VIP and port it
//! reached; without the annotation the member gets the client's bytes only.

use crate::l4::{Provider, l4_service, served_by, start_for, tcp_endpoint, vip_by};
use crate::support::{Manifests, free_port};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

const SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];

/// Reads a PROXY v2 header for TCP over IPv4: (source, destination), or what was wrong.
async fn read_header(s: &mut TcpStream) -> Result<(SocketAddr, SocketAddr), String> {
    let mut fixed = [0u8; 16];
    s.read_exact(&mut fixed).await.map_err(|e| e.to_string())?;
    if fixed[..12] != SIGNATURE {
        return Err(format!("no signature: {:?}", &fixed[..12]));
    }
    if fixed[12..14] != [0x21, 0x11] {
        return Err(format!("not PROXY, TCP over IPv4: {:x?}", &fixed[12..14]));
    }
    let len = u16::from_be_bytes([fixed[14], fixed[15]]);
    if len != 12 {
        return Err(format!("address block of {len} bytes"));
    }
    let mut block = [0u8; 12];
    s.read_exact(&mut block).await.map_err(|e| e.to_string())?;
    let ip = |b: &[u8]| IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    Ok((
        SocketAddr::new(ip(&block[0..4]), port(&block[8..10])),
        SocketAddr::new(ip(&block[4..8]), port(&block[10..12])),
    ))
}

/// A member that expects the header (or, `proxied` false, the client's first line), answers
/// `from <source> to <destination>` (or `plain <line>`), then echoes.
async fn member(proxied: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let greeting = if proxied {
                    match read_header(&mut s).await {
                        Ok((from, to)) => format!("from {from} to {to}\n"),
                        Err(e) => format!("bad header: {e}\n"),
                    }
                } else {
                    let mut first = [0u8; 6];
                    let _ = s.read_exact(&mut first).await;
                    format!("plain {}\n", String::from_utf8_lossy(&first).trim())
                };
                if s.write_all(greeting.as_bytes()).await.is_ok() {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                }
            });
        }
    });
    addr
}

/// Connects from `source`, sends `hello\n`; the member's first line, the client's own address,
/// and the echo of a second line.
async fn ask(source: IpAddr, addr: SocketAddr) -> std::io::Result<(String, SocketAddr, String)> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let stream = tokio::time::timeout(Duration::from_secs(3), socket.connect(addr)).await??;
    let me = stream.local_addr()?;
    let mut stream = BufReader::new(stream);
    stream.get_mut().write_all(b"hello\n").await?;
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(3), stream.read_line(&mut line)).await??;
    stream.get_mut().write_all(b"again\n").await?;
    let mut echo = String::new();
    tokio::time::timeout(Duration::from_secs(3), stream.read_line(&mut echo)).await??;
    Ok((line.trim().to_owned(), me, echo))
}

#[tokio::test]
async fn proxy_protocol_v2_tells_the_member_the_client_and_the_vip() {
    proxy_protocol(Provider::L4, "--vip-pool=127.0.57.0/24").await;
}

#[tokio::test]
async fn proxy_protocol_v2_tells_the_member_the_client_and_the_vip_haproxy() {
    proxy_protocol(Provider::Haproxy, "--vip-pool=127.0.66.0/24").await;
}

async fn proxy_protocol(provider: Provider, pool: &str) {
    let (with, without) = (member(true).await, member(false).await);
    let (pw, pp) = (free_port(), free_port());
    let annotated = l4_service(
        "pp",
        "",
        &format!("  - {{name: app, port: {pw}}}\n"),
        &[tcp_endpoint(&["app"], with, true)],
    )
    .replacen(
        "metadata: {name: pp, namespace: apps}",
        "metadata: {name: pp, namespace: apps, annotations: {portico.dev/proxy-protocol: \"v2\"}}",
        1,
    );
    let plain = l4_service(
        "plain",
        "",
        &format!("  - {{name: app, port: {pp}}}\n"),
        &[tcp_endpoint(&["app"], without, true)],
    );
    let m = Manifests::new();
    m.write("svc.yaml", &served_by(&(annotated + &plain), provider));
    let p = start_for(provider, &m, &[pool]).await;
    let vip = SocketAddr::new(vip_by(&p, "pp", provider).await, pw);
    let client: IpAddr = [127, 0, 0, 9].into();

    let deadline = Instant::now() + Duration::from_secs(10);
    let (line, me, echo) = loop {
        match ask(client, vip).await {
            Ok(answer) => break answer,
            Err(e) => assert!(Instant::now() < deadline, "{vip} never answered: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(line, format!("from {me} to {vip}"));
    assert_eq!(me.ip(), client);
    // After the header, the client's bytes arrive untouched (`hello\n` was echoed first).
    assert_eq!(echo, "hello\n");

    let plain = SocketAddr::new(vip_by(&p, "plain", provider).await, pp);
    let (line, _, _) = ask(client, plain).await.unwrap();
    assert_eq!(line, "plain hello", "no header without the annotation");
}
