//! A minimal WebSocket (RFC 6455) for the tests: an echo backend speaking HTTP/1.1 and a
//! client of text frames. Just enough to show bytes crossing an upgraded connection both
//! ways; no fragmentation, no control frames.

use sha1::{Digest, Sha1};
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Starts the echo backend: it answers `101` to a WebSocket handshake (anything else gets
/// `400`) and sends every text frame back, prefixed with `echo: `.
pub async fn echo_backend() -> SocketAddr {
    echo_backend_on([127, 0, 0, 1].into()).await
}

/// [`echo_backend`] on `ip`.
pub async fn echo_backend_on(ip: std::net::IpAddr) -> SocketAddr {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

async fn serve(mut stream: TcpStream) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let Some(key) = header(&head, "sec-websocket-key") else {
        let _ = stream
            .write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {}\r\n\r\n",
        accept(&key)
    );
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    while let Some(text) = read_frame(&mut stream).await {
        let reply = format!("echo: {text}");
        if write_frame(&mut stream, &reply, false).await.is_err() {
            return;
        }
    }
}

/// `Sec-WebSocket-Accept` for `key`.
pub fn accept(key: &str) -> String {
    let digest = Sha1::digest(format!("{key}{GUID}").as_bytes());
    base64(&digest)
}

/// The request head, up to and including the empty line.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

/// A header's value in a raw head (case-insensitive name).
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

/// Opens a WebSocket over `stream` (HTTP/1.1): returns the response head once it is `101`.
pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    host: &str,
    path: &str,
) -> Result<String, String> {
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: {key}\r\nsec-websocket-version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(stream).await.ok_or("closed before a response")?;
    if !head.starts_with("HTTP/1.1 101") {
        return Err(head);
    }
    let proof = header(&head, "sec-websocket-accept");
    if proof.as_deref() != Some(accept(key).as_str()) {
        return Err(format!("bad Sec-WebSocket-Accept in {head}"));
    }
    Ok(head)
}

/// Sends `text` in one text frame (masked, as a client must) and returns the one frame read
/// back.
pub async fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    text: &str,
) -> Option<String> {
    write_frame(stream, text, true).await.ok()?;
    read_frame(stream).await
}

/// One unfragmented text frame of under 126 bytes.
pub async fn write_frame<S: AsyncWrite + Unpin>(
    stream: &mut S,
    text: &str,
    masked: bool,
) -> std::io::Result<()> {
    let payload = text.as_bytes();
    assert!(payload.len() < 126, "short frames only");
    let mut frame = vec![0x81, payload.len() as u8];
    if masked {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        frame[1] |= 0x80;
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    } else {
        frame.extend_from_slice(payload);
    }
    stream.write_all(&frame).await?;
    stream.flush().await
}

/// One text frame of under 126 bytes, unmasked if it was masked; `None` at the end.
pub async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.ok()?;
    if head[0] & 0x0f != 1 {
        return None;
    }
    let len = usize::from(head[1] & 0x7f);
    let mut mask = [0u8; 4];
    if head[1] & 0x80 != 0 {
        stream.read_exact(&mut mask).await.ok()?;
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    payload
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b ^= mask[i % 4]);
    String::from_utf8(payload).ok()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn the_accept_proof_is_rfc_6455_s_example() {
    assert_eq!(
        accept("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}
