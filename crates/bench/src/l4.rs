//! The load side of `bench/l4.sh`: echo backends (TCP and UDP on each address), and a load
//! generator that measures the rate of short connections (connect, send a few bytes, read them
//! back, close), the throughput of a few long connections (write and read back
//! continuously), or UDP datagrams answered per second (each client one socket, one datagram
//! in flight). Loopback only; it stops after the given duration.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Serves TCP and UDP echo on every address until the process is stopped.
pub async fn echo(addrs: Vec<SocketAddr>) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for addr in addrs {
        let socket = UdpSocket::bind(addr).await?;
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..n], peer).await;
            }
        }));
        let listener = TcpListener::bind(addr).await?;
        tasks.push(tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let _ = s.set_nodelay(true);
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(())
}

/// What the load measures.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// Short connections: each carries `size` bytes there and back, then closes.
    Connections,
    /// Long connections streaming `size`-byte writes both ways.
    Throughput,
    /// UDP: each client sends a `size`-byte datagram and waits for it back, again and again
    /// (`connections` counts the datagrams answered).
    Udp,
}

/// The totals of one run.
#[derive(Debug, Default)]
pub struct Totals {
    pub connections: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed: Duration,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Runs `concurrency` clients against `target` for `duration`.
pub async fn load(
    target: SocketAddr,
    mode: Mode,
    concurrency: usize,
    duration: Duration,
    size: usize,
) -> Totals {
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (counters, stop) = (counters.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            match mode {
                Mode::Connections => short_loop(target, size, &counters, &stop).await,
                Mode::Throughput => stream(target, size, &counters, &stop).await,
                Mode::Udp => udp_loop(target, size, &counters, &stop).await,
            }
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    for task in tasks {
        // A client stuck on a dead connection is abandoned, not waited for.
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    Totals {
        connections: counters.connections.load(Ordering::Relaxed),
        bytes: counters.bytes.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
        elapsed,
    }
}

async fn short_loop(target: SocketAddr, size: usize, counters: &Counters, stop: &AtomicBool) {
    let payload = vec![b'x'; size];
    let mut back = vec![0u8; size];
    while !stop.load(Ordering::Relaxed) {
        let round = async {
            let mut s = TcpStream::connect(target).await?;
            s.set_nodelay(true)?;
            s.write_all(&payload).await?;
            s.read_exact(&mut back).await?;
            std::io::Result::Ok(())
        };
        match tokio::time::timeout(Duration::from_secs(5), round).await {
            Ok(Ok(())) => {
                counters.connections.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(size as u64, Ordering::Relaxed);
            }
            _ => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                // Out of ports or a refused connection: back off rather than spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn stream(target: SocketAddr, size: usize, counters: &Counters, stop: &AtomicBool) {
    let Ok(s) = TcpStream::connect(target).await else {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    counters.connections.fetch_add(1, Ordering::Relaxed);
    let (mut r, mut w) = s.into_split();
    let payload = vec![b'y'; size];
    let writer = async {
        while !stop.load(Ordering::Relaxed) {
            if w.write_all(&payload).await.is_err() {
                break;
            }
        }
    };
    let reader = async {
        let mut buf = vec![0u8; 64 * 1024];
        while !stop.load(Ordering::Relaxed) {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    };
    tokio::join!(writer, reader);
}

async fn udp_loop(target: SocketAddr, size: usize, counters: &Counters, stop: &AtomicBool) {
    let Ok(socket) = UdpSocket::bind("127.0.0.1:0").await else {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if socket.connect(target).await.is_err() {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let payload = vec![b'u'; size];
    let mut back = vec![0u8; size.max(1) + 1];
    while !stop.load(Ordering::Relaxed) {
        let round = async {
            socket.send(&payload).await?;
            socket.recv(&mut back).await
        };
        match tokio::time::timeout(Duration::from_millis(500), round).await {
            Ok(Ok(n)) if n == size => {
                counters.connections.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(size as u64, Ordering::Relaxed);
            }
            // A lost datagram (or a refused port): counted, and the client goes on.
            _ => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
