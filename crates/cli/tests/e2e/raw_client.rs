//! A raw HTTP/1.1 client over TCP for requests no well-behaved client would send: it writes
//! the bytes it is given and reads one response head (and its Content-Length body).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// What became of the connection after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// A well-formed request that followed on the same connection was answered.
    Kept,
    /// The connection ended (or the follow-up got no answer).
    Closed,
}

/// How long a raw exchange may take before it counts as no answer.
const PATIENCE: Duration = Duration::from_secs(5);

/// Connects to `to` from the loopback address `from`.
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// Sends `raw` on a new connection: the answer's status (0 for none) and whether a valid
/// request for `host` is still answered on that connection afterwards.
pub async fn exchange(to: SocketAddr, raw: &[u8], host: &str) -> (u16, After) {
    let mut stream = TcpStream::connect(to).await.unwrap();
    if stream.write_all(raw).await.is_err() {
        return (0, After::Closed);
    }
    let status = read_response(&mut stream).await.unwrap_or(0);
    let follow_up = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let after = match stream.write_all(follow_up.as_bytes()).await {
        Err(_) => After::Closed,
        Ok(()) => match read_response(&mut stream).await {
            Some(200) => After::Kept,
            _ => After::Closed,
        },
    };
    (status, after)
}

/// Reads one response; its status, or `None` when the connection ended (or stayed silent
/// past the patience) before a whole response arrived.
pub async fn read_response(stream: &mut TcpStream) -> Option<u16> {
    tokio::time::timeout(PATIENCE, read_one(stream))
        .await
        .ok()
        .flatten()
}

async fn read_one(stream: &mut TcpStream) -> Option<u16> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf.len() - head_end;
    while body < length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body += n;
    }
    Some(status)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Waits until the server ends the connection (EOF or reset); how long that took, or `None`
/// when it is still open after `within`. Whatever the server sends first is read and dropped.
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = std::time::Instant::now();
    let read_to_end = async {
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end)
        .await
        .ok()
        .map(|()| start.elapsed())
}

/// Sends `raw` (several pipelined requests) on a new connection and reads until the server
/// closes it or stays silent past the patience: the status of each whole response in order
/// (each with a Content-Length body), and whether the server closed the connection.
pub async fn pipelined(to: SocketAddr, raw: &[u8]) -> (Vec<u16>, After) {
    let mut stream = TcpStream::connect(to).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, async {
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .is_ok();
    let mut statuses = Vec::new();
    let mut rest = &buf[..];
    while let Some(head_end) = find(rest, b"\r\n\r\n").map(|at| at + 4) {
        let head = String::from_utf8_lossy(&rest[..head_end]).to_ascii_lowercase();
        let Some(status) = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()) else {
            break;
        };
        statuses.push(status);
        let length: usize = (head.lines())
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        rest = &rest[(head_end + length).min(rest.len())..];
    }
    let after = if closed { After::Closed } else { After::Kept };
    (statuses, after)
}
